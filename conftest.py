"""Collection rules for the whole repository: what needs an extra is skipped without it."""

from __future__ import annotations

import importlib.util

collect_ignore = ["docs/conf.py", "benchmarks"]
if importlib.util.find_spec("jax") is None:
    collect_ignore.append("docs/jax.md")
if importlib.util.find_spec("hypothesis") is None:
    collect_ignore += ["treekit/testing.py", "docs/testing.md"]

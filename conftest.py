"""Collection rules for the doctests in docs/: pages that need JAX skip where it is missing."""

import importlib.util

collect_ignore = ["docs/conf.py", "benchmarks"]
if importlib.util.find_spec("jax") is None:
    collect_ignore.append("docs/jax.md")

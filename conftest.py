"""Collection rules for the whole repository: what needs an extra is skipped without it."""

from __future__ import annotations

import importlib.util

import pytest

collect_ignore = ["docs/conf.py", "benchmarks"]
HAS_JAX = importlib.util.find_spec("jax") is not None
if not HAS_JAX:
    collect_ignore += ["docs/jax.md", "docs/scaling-out.md"]
if importlib.util.find_spec("hypothesis") is None:
    collect_ignore += ["treekit/testing.py", "docs/testing.md"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The JAX bridge's (treekit/_jax.py) and treekit.sharding's examples need jax."""
    if not HAS_JAX:
        for item in items:
            if item.name.startswith(("treekit._jax.", "treekit.sharding")):
                item.add_marker(pytest.mark.skip(reason="the example needs jax"))

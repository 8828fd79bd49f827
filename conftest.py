"""Collection rules for the whole repository: what needs an extra is skipped without it."""

from __future__ import annotations

import importlib.util
import re

import pytest

collect_ignore = ["docs/conf.py", "benchmarks"]
HAS_JAX = importlib.util.find_spec("jax") is not None
if not HAS_JAX:
    collect_ignore += ["docs/jax.md", "docs/scaling-out.md"]
if importlib.util.find_spec("fsspec") is None:  # (the remote extra's)
    collect_ignore += ["docs/cloud.md"]
if importlib.util.find_spec("hypothesis") is None:
    collect_ignore += ["treekit/testing.py", "docs/testing.md"]


def _needs_jax(item: pytest.Item) -> bool:
    """The JAX bridge's (treekit/core/_jax.py) and treekit.sharding's examples, and any that imports jax."""
    examples = getattr(getattr(item, "dtest", None), "examples", [])
    return item.name.startswith(("treekit.core._jax.", "treekit.sharding")) or any(
        re.match(r"(import|from) jax\b", example.source) for example in examples
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Without jax, skip the examples that need it."""
    if not HAS_JAX:
        for item in items:
            if _needs_jax(item):
                item.add_marker(pytest.mark.skip(reason="the example needs jax"))

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


# The tests that start processes or run for seconds each (the memory, GC-pressure and fuzz
# children, several processes over localhost, Spark, the Sphinx build, the demo and benchmarks):
# `python -m pytest -m "not slow"` leaves them out while you work (README, "Set up").
SLOW = (
    "tests/test_native_memory.py", "tests/test_gc_pressure.py", "tests/test_fuzz.py::test_garbage_in",
    "tests/test_mesh_checkpoints.py", "tests/test_data_sources.py::test_a_folder_that_spark_wrote",
    "tests/test_data_spark.py", "treekit/data/_spark.py", "docs/data.md",
    "tests/test_chexify.py", "tests/test_docs.py", "tests/test_linear.py", "tests/test_benchmarks.py",
    "tests/test_demo.py", "tests/test_checkpoint_manager.py::test_a_save_killed", "tests/test_hostile_files.py",
    "tests/test_cloud.py::test_a_saving_process_killed", "tests/test_data_mesh.py::test_two_processes",
    "tests/test_known_functions.py", "tests/test_jax.py::test_jax_registrations_are_watched",
    "tests/test_jax.py::test_every_import_order", "tests/test_sharding.py", "tests/test_packaging.py",
    "tests/test_transfer.py::test_packs_are_made_per_device",
)  # fmt: skip


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the slow tests; without jax, skip the examples that need it."""
    for item in items:
        if item.nodeid.startswith(SLOW):
            item.add_marker(pytest.mark.slow)
        if not HAS_JAX and _needs_jax(item):
            item.add_marker(pytest.mark.skip(reason="the example needs jax"))

"""Shared fixtures: the hypothesis profile, registering test node types safely, and the platform
the tests' child processes run on."""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from object_store import bucket, s3_env  # noqa: F401 (fixtures: one S3 server for the session)

try:
    from hypothesis import settings
except ImportError:  # the core tests run without the testing extra
    pass
else:
    settings.register_profile("ci", derandomize=True, max_examples=60, deadline=None, print_blob=True)
    settings.register_profile("dev", max_examples=100, deadline=None)
    # for the slow runs: valgrind, the sanitizer build
    settings.register_profile("few", derandomize=True, max_examples=10, deadline=None, print_blob=True)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Child processes run on the CPU: an accelerator such as a TPU admits one process at a time, and
# this one may hold it. jax takes JAX_PLATFORMS when it is imported, so this process keeps the
# platforms it was started with; a child about the device would set its own. (A child's own
# pytest, already on the CPU, does not import jax here: some run with warnings as errors, and
# an accelerator machine's jax warns at import.)
if os.environ.get("JAX_PLATFORMS") != "cpu":
    try:
        import jax  # noqa: F401
    except ImportError:  # the core tests run without jax
        pass
    os.environ["JAX_PLATFORMS"] = "cpu"


@pytest.fixture
def registered() -> Iterator[Callable[[type, Callable[[type], Any]], Any]]:
    """``registered(cls, register)``: call ``register(cls)`` now and unregister ``cls`` after."""
    from treekit.core._registry import remove_type

    added: list[type] = []

    def register(cls: type, how: Callable[[type], Any]) -> Any:
        out = how(cls)
        added.append(cls)
        return out

    yield register
    for cls in added:
        remove_type(cls)


@pytest.fixture
def case_types() -> Iterator[None]:
    """Register the custom node types of tests/cases.py for one test."""
    from cases import case_types

    with case_types():
        yield


# The examples in docstrings and docs/ that import an optional library (a model, data or
# checkpoint library the dev extra installs) skip where it is missing, as the tests that
# importorskip it do; where it is installed (CI) they run.
_OPTIONAL = {
    "chex",
    "datasets",
    "equinox",
    "flax",
    "grain",
    "haiku",
    "optax",
    "optree",
    "orbax",
    "pyarrow",
    "pyspark",
    "safetensors",
    "torch",
    "transformers",
    "tree",
}
_IMPORTS = re.compile(r"^\s*(?:from\s+(\w+)|import\s+([\w., ]+))", re.M)  # from X ... | import X as x, Y


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    from _pytest.doctest import DoctestItem

    for item in items:
        if isinstance(item, DoctestItem) and item.dtest is not None:
            names = set()
            for example in item.dtest.examples:
                for source, listed in _IMPORTS.findall(example.source):
                    names |= {source} if source else {part.split()[0].split(".")[0] for part in listed.split(",")}
            missing = sorted(m for m in names & _OPTIONAL if importlib.util.find_spec(m) is None)
            if missing:
                item.add_marker(pytest.mark.skip(reason=f"the example imports {', '.join(missing)}, not installed"))
            elif "datasets" in names and datasets_broken():
                item.add_marker(pytest.mark.skip(reason=datasets_broken()))
            elif "pyspark" in names and shutil.which("java") is None:
                item.add_marker(pytest.mark.skip(reason="the example runs pyspark, which needs Java"))


@functools.cache
def datasets_broken() -> str | None:
    """Why the installed Hugging Face datasets cannot build the smallest Dataset here, or None.

    (datasets 5.0.1 with pyarrow 25, the newest an accelerator machine's index had: its own
    fingerprinting fails to pickle pyarrow's MonthDayNano; newer releases work.)
    """
    try:
        import datasets

        datasets.Dataset.from_dict({"x": [1]})
    except Exception as exc:  # (whatever the library's own first step raises)
        version = getattr(sys.modules.get("datasets"), "__version__", "?")
        return f"datasets {version} cannot build a Dataset here ({type(exc).__name__}: {str(exc)[:200]})"
    return None


@pytest.fixture
def hf_datasets() -> Any:
    """The datasets module, where it is installed and works (else the test skips, saying why)."""
    datasets = pytest.importorskip("datasets")
    if datasets_broken():
        pytest.skip(datasets_broken())
    return datasets

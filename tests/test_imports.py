"""``import treekit`` stays light: no jax, numpy or hypothesis (checked in a fresh interpreter)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("jax", "jaxlib", "numpy", "hypothesis", "optax", "torch")


@pytest.mark.parametrize("statement", ["import treekit", "import treekit.tree", "from treekit import tree_map"])
def test_import_treekit_imports_no_heavy_package(statement: str) -> None:
    script = (
        f"import sys, json; {statement}; import treekit; "
        "treekit.tree_map(lambda x: x, {'a': [1]}); treekit.tree_leaves_with_path([1]); "
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []

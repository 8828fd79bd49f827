"""Assertions for test suites: AssertionError subclasses, treekit's frames hidden from pytest, the
leaf-by-leaf asserts (finite, no None, shape, rank)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import treekit
from treekit import (
    ShapeDtype,
    SpecMismatchError,
    StructureAssertionError,
    StructureMismatchError,
    assert_rank,
    assert_shape,
    assert_tree_all_finite,
    assert_tree_no_nones,
)

FAILING = {
    "same_structure": lambda: treekit.assert_same_structure({"w": [1, 2]}, {"w": [1, 2, 3]}),
    "all_close": lambda: treekit.assert_trees_all_close({"w": np.ones(3)}, {"w": np.zeros(3)}),
    "all_equal": lambda: treekit.assert_trees_all_equal([1], [2]),
    "tree_shapes": lambda: treekit.assert_tree_shapes({"w": np.ones(3)}, {"w": (4,)}),
    "check_spec": lambda: treekit.check_spec({"w": np.ones(3)}, {"w": ShapeDtype((4,), "float64")}),
    "all_finite": lambda: assert_tree_all_finite({"w": np.array([np.nan])}),
    "no_nones": lambda: assert_tree_no_nones({"w": None}),
    "shape": lambda: assert_shape({"w": np.ones(3)}, (4,)),
    "rank": lambda: assert_rank({"w": np.ones(3)}, 2),
}


@pytest.mark.parametrize("name", FAILING)
def test_every_assertion_helper_raises_an_assertion_error(name: str) -> None:
    with pytest.raises(AssertionError):
        FAILING[name]()


def test_the_structure_and_spec_errors_stay_value_errors_too() -> None:
    with pytest.raises(StructureAssertionError) as info:
        FAILING["same_structure"]()
    assert isinstance(info.value, StructureMismatchError) and isinstance(info.value, ValueError)
    assert str(info.value) == "b['w']: expected list of length 2, got list of length 3"
    assert info.value.label == "b" and treekit.keystr(info.value.path) == "['w']"
    with pytest.raises(SpecMismatchError) as spec:
        FAILING["check_spec"]()
    assert isinstance(spec.value, ValueError)
    assert not treekit.same_structure([1], [1, 2])


def test_pytest_shows_the_test_line_and_the_message_not_treekit_source(tmp_path: Path) -> None:
    calls = "\n".join(
        f"def test_{name}():\n    {source}\n"
        for name, source in [
            ("same_structure", "treekit.assert_same_structure({'w': [1, 2]}, {'w': [1, 2, 3]})"),
            ("all_close", "treekit.assert_trees_all_close({'w': np.ones(3)}, {'w': np.zeros(3)})"),
            ("all_equal", "treekit.assert_trees_all_equal([1], [2])"),
            ("tree_shapes", "treekit.assert_tree_shapes({'w': np.ones(3)}, {'w': (4,)})"),
            ("check_spec", "treekit.check_spec({'w': np.ones(3)}, {'w': treekit.ShapeDtype((4,), 'float64')})"),
            ("all_finite", "treekit.assert_tree_all_finite({'w': np.array([np.nan])})"),
            ("no_nones", "treekit.assert_tree_no_nones({'w': None})"),
            ("shape", "treekit.assert_shape({'w': np.ones(3)}, (4,))"),
            ("rank", "treekit.assert_rank({'w': np.ones(3)}, 2)"),
            ("node_laws", "check_node_type(Swapped, [Swapped(0, 1)], jit=False)"),
        ]
    )
    swapped = (
        "class Swapped:\n"
        "    def __init__(self, x, y): self.x, self.y = x, y\n"
        "treekit.register_pytree_node(Swapped, lambda p: ((p.y, p.x), None), lambda _, c: Swapped(*c))\n"
    )
    header = "import numpy as np\nimport treekit\nfrom treekit.testing import check_node_type\n"
    (tmp_path / "test_user.py").write_text(header + swapped + "\n\n" + calls)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--tb=long", "-q", str(tmp_path / "test_user.py")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    out = run.stdout
    assert "10 failed" in out, out[-3000:]
    treekit_dir = str(Path(treekit.__file__).parent)
    assert treekit_dir not in out, out
    assert "__tracebackhide__" not in out and "def assert_" not in out
    # each failure shows the user's line and the message
    assert out.count("test_user.py:") >= 10
    assert "E   AssertionError: b is not close to a" in out or "E       AssertionError: b is not close to a" in out


def test_assert_tree_all_finite_names_each_leaf() -> None:
    tree = {
        "w": np.array([[1.0, np.nan], [np.inf, -np.inf]]),
        "ok": np.ones(2),
        "n": np.arange(3),
        "lr": float("nan"),
        "c": complex(1, float("inf")),
        "name": "relu",
    }
    message = (
        "tree is not all finite: 3 leaves\n"
        "tree['c']: expected a finite number, got (1+infj)\n"
        "tree['lr']: expected a finite number, got nan\n"
        "tree['w']: expected finite values, got 3 of 4 not finite (1 NaN, 2 inf)"
    )
    with pytest.raises(AssertionError, match=f"^{re.escape(message)}$"):
        assert_tree_all_finite(tree)
    assert_tree_all_finite({"a": np.ones(2), "b": 3, "s": "x", "none": None})


def test_assert_tree_all_finite_on_jax_arrays() -> None:
    jnp = pytest.importorskip("jax.numpy")
    with pytest.raises(AssertionError, match=r"tree\[1\]: expected finite values, got 1 of 2 not finite \(1 NaN\)"):
        assert_tree_all_finite([jnp.ones(2), jnp.array([0.0, jnp.nan])])


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_assert_tree_all_finite_on_ml_dtypes(dtype: str) -> None:
    """bfloat16 and float8 arrays (numpy files them under kind 'V') are checked, not skipped."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.array([1.0, np.nan, 2.0], dtype=getattr(ml_dtypes, dtype))
    message = "tree is not all finite: 1 leaf\ntree['h']: expected finite values, got 1 of 3 not finite (1 NaN)"
    with pytest.raises(AssertionError, match=f"^{re.escape(message)}$"):
        assert_tree_all_finite({"h": x, "ok": np.ones(2, dtype=getattr(ml_dtypes, dtype))})


def test_assert_tree_all_finite_passes_ints_of_any_size() -> None:
    assert_tree_all_finite({"big": 10**400, "step": np.array(2**62), "flag": True})


def test_assert_tree_no_nones_names_every_none() -> None:
    message = (
        "tree holds None: 3 leaves\n"
        "tree['a']: expected no None, got None\n"
        "tree['b'][1]: expected no None, got None\n"
        "tree['c']['d']: expected no None, got None"
    )
    with pytest.raises(AssertionError, match=f"^{re.escape(message)}$"):
        assert_tree_no_nones({"a": None, "b": [1, None], "c": {"d": None}})
    with pytest.raises(AssertionError, match=r"^tree holds None: 1 leaf\ntree: expected no None, got None$"):
        assert_tree_no_nones(None)
    assert_tree_no_nones({"a": [1, ()], "b": {}})


SHAPES = [
    ((2, 3), (2, 3), None),
    ((2, 3), (None, 3), None),
    ((2, 3), (2, None), None),
    ((2, 3), (...,), None),
    ((2, 3), (..., 3), None),
    ((2, 3), (2, ...), None),
    ((2, 3, 4), (2, ..., 4), None),
    ((2, 3), ({1, 2}, {3}), None),
    ((), (), None),
    ((2, 3), (2, 4), "dim 1 is 3, not 4"),
    ((2, 3), (2,), "rank 2, not 1"),
    ((2, 3), (2, 3, ...), None),
    ((2,), (2, 3, ...), "rank 1, not at least 2"),
    ((5, 3), ({1, 2}, 3), "dim 0 is 5, not one of {1, 2}"),
    ((2, 3, 4), (..., 3), "dim 2 is 4, not 3"),
]


@pytest.mark.parametrize(("shape", "want", "problem"), SHAPES)
def test_assert_shape_dims(shape: tuple[int, ...], want: tuple[Any, ...], problem: str | None) -> None:
    tree = {"x": np.zeros(shape)}
    if problem is None:
        assert_shape(tree, want)
        return
    with pytest.raises(AssertionError, match=re.escape(f"({problem})")):
        assert_shape(tree, want)


def test_assert_shape_one_per_leaf_and_messages() -> None:
    tree = [np.zeros((2, 3)), np.zeros(4), 1.5, "s"]
    assert_shape(tree[:3], [(2, 3), (4,), ()])
    message = (
        "tree does not have the expected shapes: 2 leaves\n"
        "tree[1]: expected shape (5,), got shape (4,) (dim 0 is 4, not 5)\n"
        "tree[3]: expected shape (), got str 's' (no shape)"
    )
    with pytest.raises(AssertionError, match=f"^{re.escape(message)}$"):
        assert_shape(tree, [(2, 3), (5,), (), ()])
    with pytest.raises(TypeError, match=r"^expected_shapes: expected one per leaf of tree \(4\), got 2$"):
        assert_shape(tree, [(2, 3), (5,)])
    with pytest.raises(TypeError, match=r"^expected_shapes: expected a shape"):
        assert_shape(tree, "(2, 3)")


def test_assert_rank() -> None:
    tree = {"w": np.zeros((2, 3)), "b": np.zeros(3), "s": 2.0}
    assert_rank(tree, {0, 1, 2})
    assert_rank(tree, [1, 0, 2])  # leaf order: b, s, w
    message = "tree does not have a rank in {1, 2}: 1 leaf\ntree['s']: expected rank in {1, 2}, got rank 0 (shape ())"
    with pytest.raises(AssertionError, match=f"^{re.escape(message)}$"):
        assert_rank(tree, {1, 2})
    with pytest.raises(TypeError, match=r"^expected_ranks: expected an int"):
        assert_rank(tree, "2")

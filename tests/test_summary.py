"""summary's grouped rows (depth=), value statistics (stats=), Markdown, and format_tree's max_depth."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given

import treekit as tk
from treekit.testing import param_trees

MODEL = {
    "encoder": {"dense": {"w": np.ones((3, 4), np.float32), "b": np.zeros(4, np.float32)}, "norm": np.ones(4)},
    "head": [np.full((4, 2), -1.0, np.float32), np.array([np.nan, np.inf, 2.0], np.float32)],
    "step": 7,
}


def test_depth_collapses_below_it_with_subtotals() -> None:
    assert tk.summary(MODEL, depth=1).splitlines() == [
        "path         shape     dtype    size  bytes",
        "['encoder']  3 arrays  mixed      20     96",
        "['head']     2 arrays  float32    11     44",
        "['step']     -         int         -      -",
        "total        5 arrays             31    140",
        "not counted (not arrays): ['step'] (int)",
    ]
    assert tk.summary(MODEL, depth=2).splitlines()[1:4] == [
        "['encoder']['dense']  2 arrays  float32    16     64",
        "['encoder']['norm']   (4,)      float64     4     32",
        "['head'][0]           (4, 2)    float32     8     32",
    ]
    assert tk.summary(MODEL, depth=0).splitlines()[1] == "(root)  5 arrays  mixed    31    140"
    assert tk.summary(MODEL, depth=9) == tk.summary(MODEL)


@given(param_trees())
def test_subtotals_add_up_to_the_total(params: Any) -> None:
    rows = [line.split() for line in tk.summary(params, depth=1).splitlines()[1:]]
    *layers, total = rows
    assert len(layers) == len(params)
    assert sum(int(r[-2].replace(",", "")) for r in layers) == int(total[-2].replace(",", ""))
    assert sum(int(r[-1].replace(",", "")) for r in layers) == int(total[-1].replace(",", ""))


def test_stats_per_leaf_and_per_group() -> None:
    lines = tk.summary(MODEL, stats=True).splitlines()
    assert lines[0].split() == ["path", "shape", "dtype", "size", "bytes", "mean", "std", "min", "max", "nan", "inf"]
    assert lines[5].split() == ["['head'][1]", "(3,)", "float32", "3", "12", "2", "0", "2", "2", "1", "1"]
    assert lines[6].split() == ["['step']", "-", "int", "-", "-", "-", "-", "-", "-", "-", "-"]
    grouped = tk.summary(MODEL, depth=1, stats=True).splitlines()
    finite = np.array([-1.0] * 8 + [2.0])  # the head's finite entries
    want = [f"{finite.mean():.4g}", f"{finite.std():.4g}", "-1", "2", "1", "1"]
    assert grouped[2].split()[6:] == want


def test_stats_of_jax_arrays_and_abstract_leaves() -> None:
    jax = pytest.importorskip("jax")
    tree = {"a": jax.numpy.arange(4.0), "s": jax.ShapeDtypeStruct((2,), np.float32)}
    lines = tk.summary(tree, stats=True).splitlines()
    assert lines[1].split()[5:] == ["1.5", "1.118", "0", "3", "0", "0"]
    assert lines[2].split()[5:] == ["-", "-", "-", "-", "0", "0"]


def test_markdown() -> None:
    assert tk.summary({"w": np.zeros((2, 3), np.float32), "n": "x"}, format="markdown") == (
        "| path | shape | dtype | size | bytes |\n"
        "|:---|:---|:---|---:|---:|\n"
        "| ['n'] | - | str | - | - |\n"
        "| ['w'] | (2, 3) | float32 | 6 | 24 |\n"
        "| total | 1 array |  | 6 | 24 |\n"
        "\n"
        "not counted (not arrays): ['n'] (str)"
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"depth": -1}, "depth: expected None or an int >= 0, got -1"),
        ({"depth": 1.5}, "depth: expected None or an int >= 0, got 1.5"),
        ({"format": "html"}, "format: expected 'text' or 'markdown', got 'html'"),
    ],
)
def test_summary_argument_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        tk.summary(MODEL, **kwargs)


def test_format_tree_max_depth() -> None:
    assert tk.format_tree(MODEL, max_depth=1) == (
        "dict\n  ['encoder']: dict ... (3 leaves)\n  ['head']: list ... (2 leaves)\n  ['step']: 7"
    )
    assert tk.format_tree([[1]], max_depth=0) == "list ... (1 leaf)"
    assert tk.format_tree(MODEL, max_depth=5) == tk.format_tree(MODEL)
    with pytest.raises(ValueError, match=re.escape("max_depth: expected None or an int >= 0, got -2")):
        tk.format_tree(MODEL, max_depth=-2)
    for bad in ("1", 1.0, True):
        with pytest.raises(TypeError, match="max_depth: expected None or an int"):
            tk.format_tree(MODEL, max_depth=bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="max_items: expected an int"):
        tk.format_tree(MODEL, max_items=None)  # type: ignore[arg-type]


def test_format_tree_elides_long_lists() -> None:
    lines = tk.format_tree(list(range(1000))).splitlines()
    assert lines == [
        "list",
        "  [0]: 0",
        "  [1]: 1",
        "  [2]: 2",
        "  ... 994 more",
        "  [997]: 997",
        "  [998]: 998",
        "  [999]: 999",
    ]

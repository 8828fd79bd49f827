"""format_tree, summary and the leaf descriptions they share."""

from __future__ import annotations

import collections
import dataclasses
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import treekit as tk
from treekit.core._describe import describe_leaf, dtype_name, short_dtype

P = collections.namedtuple("P", "x y")


@dataclasses.dataclass(frozen=True)
class Shown:
    name: str
    tree: Any
    text: str
    max_items: int = 6


FORMATS = [
    Shown("scalar root", 3, "3"),
    Shown("array root", np.zeros((2, 3), np.float32), "f32[2,3]"),
    Shown("None root", None, "None"),
    Shown("empty containers", [[], (), {}], "list\n  [0]: list (empty)\n  [1]: tuple (empty)\n  [2]: dict (empty)"),
    Shown(
        "nested, dict keys sorted",
        {"b": [np.ones(2, np.int8), "relu"], "a": P(1.5, None)},
        "dict\n  ['a']: P\n    .x: 1.5\n    .y: None\n  ['b']: list\n    [0]: i8[2]\n    [1]: 'relu'",
    ),
    Shown(
        "long lists fold, their children too",
        [[i] for i in range(5)],
        "list\n  [0]: list\n    [0]: 0\n  ... 3 more\n  [4]: list\n    [0]: 4",
        max_items=2,
    ),
    Shown("exactly max_items do not fold", (1, 2), "tuple\n  [0]: 1\n  [1]: 2", max_items=2),
    Shown("long reprs are cut", ["x" * 80], "list\n  [0]: '" + "x" * 56 + "..."),
]


@pytest.mark.parametrize("case", FORMATS, ids=lambda c: c.name)
def test_format_tree(case: Shown) -> None:
    assert tk.format_tree(case.tree, max_items=case.max_items) == case.text


def test_format_tree_shows_custom_nodes_and_is_leaf(registered: Callable[..., Any]) -> None:
    @dataclasses.dataclass
    class Linear:
        w: Any
        b: Any
        act: str = tk.static(default="relu")

    registered(Linear, tk.register_dataclass)
    tree = {"layer": Linear(np.zeros((2, 2), np.float32), None)}
    assert tk.format_tree(tree) == "dict\n  ['layer']: Linear\n    .w: f32[2,2]\n    .b: None"
    assert tk.format_tree({"a": [1, 2], "b": [3]}, is_leaf=lambda x: x == [1, 2]) == (
        "dict\n  ['a']: [1, 2]\n  ['b']: list\n    [0]: 3"
    )


def test_format_tree_of_a_deep_tree() -> None:
    tree: Any = 0
    for _ in range(2000):
        tree = [tree]
    lines = tk.format_tree(tree).splitlines()
    assert len(lines) == 2001
    # Indentation stops at 32 levels; deeper lines say their depth (the text was 4 MB, 100 MB
    # for 10,000 levels: it grew with the depth squared).
    assert lines[32] == "  " * 32 + "[0]: list"
    assert lines[33] == "  " * 32 + "(33) [0]: list"
    assert lines[-1] == "  " * 32 + "(2000) [0]: 0"
    assert max(map(len, lines)) == len("  " * 32 + "(1999) [0]: list")


def test_summary_table() -> None:
    params = {"w": np.zeros((300, 400), np.float32), "b": np.zeros(4, np.float32), "step": 7}
    assert tk.summary(params).splitlines() == [
        "path      shape       dtype       size    bytes",
        "['b']     (4,)        float32        4       16",
        "['step']  -           int            -        -",
        "['w']     (300, 400)  float32  120,000  480,000",
        "total     2 arrays             120,004  480,016  (468.8 KiB)",
        "not counted (not arrays): ['step'] (int)",
    ]


def test_summary_of_a_root_leaf_and_of_no_leaves() -> None:
    assert tk.summary(np.zeros(3, np.int8)).splitlines() == [
        "path    shape  dtype  size  bytes",
        "(root)  (3,)   int8      3      3",
        "total   1 array          3      3",
    ]
    assert tk.summary([None, {}]).splitlines() == [
        "path   shape  dtype  size  bytes",
        "total  0 arrays         0      0",
    ]


def test_leaf_descriptions() -> None:
    assert describe_leaf(np.float32(1)) == "f32[]"
    assert describe_leaf(np.zeros((0, 2), np.complex64)) == "c64[0,2]"
    assert describe_leaf(np.zeros(1, "datetime64[s]")) == "datetime64[s][1]"
    assert describe_leaf(1.5) == "1.5"
    assert [short_dtype(d) for d in ("bfloat16", "uint16", "bool", np.float64)] == ["bf16", "u16", "bool", "f64"]
    assert dtype_name("torch.float32") == "torch.float32"


def test_torch_dtypes_lose_their_prefix() -> None:
    class FakeTorchDtype:  # torch's dtypes print as 'torch.float32' and have no .name
        def __str__(self) -> str:
            return "torch.float32"

    assert dtype_name(FakeTorchDtype()) == "float32"


def test_import_treekit_imports_no_numpy_jax_or_hypothesis() -> None:
    code = "import sys, treekit; print(sorted(m for m in ('numpy', 'jax', 'hypothesis') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

"""Partial: a functools.partial whose bound arguments are children (jax's Partial)."""

from __future__ import annotations

import functools

import treekit
from treekit import Partial


def _add(a: int, b: int, c: int = 0) -> int:
    return a + b + c


def test_bound_arguments_are_leaves_and_the_function_is_node_data() -> None:
    p = Partial(_add, 1, c=10)
    leaves, treedef = treekit.tree_flatten(p)
    assert leaves == [1, 10]
    assert treedef.node_data() == (Partial, _add)
    assert treedef == treekit.tree_structure(Partial(_add, 2, c=20))
    assert treedef != treekit.tree_structure(Partial(max, 2, c=20))


def test_map_gives_a_callable_partial() -> None:
    out = treekit.tree_map(lambda x: x * 2, Partial(_add, 1, c=10))
    assert type(out) is Partial and out(3) == 25


def test_a_partial_without_arguments_has_no_leaves() -> None:
    p = Partial(_add)
    assert treekit.tree_leaves(p) == []
    assert treekit.tree_map(lambda x: x, p)(1, 2) == 3


def test_wrapping_a_functools_partial_keeps_its_arguments_out_of_the_tree() -> None:
    inner = functools.partial(_add, 1)
    p = Partial(inner, 2)
    assert treekit.tree_leaves(p) == [2]
    assert p() == 3 and p.func.func is _add
    assert treekit.tree_map(lambda x: x * 10, p)() == 21


def test_partials_nest() -> None:
    p = Partial(_add, Partial(_add, 1, 2), c=3)
    assert treekit.tree_leaves(p) == [1, 2, 3]
    assert [treekit.keystr(k) for k, _ in treekit.tree_leaves_with_path(p)] == [
        "[<flat index 0>][0][<flat index 0>][0]",
        "[<flat index 0>][0][<flat index 0>][1]",
        "[<flat index 1>]['c']",
    ]

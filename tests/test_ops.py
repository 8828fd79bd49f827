"""The public functions of treekit.ops._ops: map, reduce, all, transpose, broadcast, treedef helpers."""

from __future__ import annotations

import collections
import operator
import re
from typing import Any

import pytest
from cases import CASES, NT, Case, Pair, Point

import treekit
from treekit import StructureMismatchError, keystr, tree_structure

pytestmark = pytest.mark.usefixtures("case_types")


# -- tree_map -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_map_applies_f_to_each_leaf_in_order(case: Case) -> None:
    seen: list[Any] = []
    out = treekit.tree_map(lambda x: seen.append(x) or ("new", x), case.tree)
    assert len(seen) == len(case.leaves) and all(a is b for a, b in zip(seen, case.leaves))
    assert treekit.tree_structure(out, is_leaf=lambda x: type(x) is tuple and x[:1] == ("new",)) == (
        tree_structure(case.tree)
    )


def test_map_returns_new_containers_in_the_input_key_order() -> None:
    tree = {"b": [1, 2], "a": (3,)}
    out = treekit.tree_map(lambda x: x * 10, tree)
    assert out == {"b": [10, 20], "a": (30,)} and list(out) == ["b", "a"]
    assert out is not tree and out["b"] is not tree["b"]


def test_map_over_several_trees_passes_subtrees_where_the_first_has_leaves() -> None:
    out = treekit.tree_map(lambda x, y, z: (x, y, z), [1, {"a": 2}], [[10, 11], {"a": 20}], ["p", {"a": None}])
    assert out == [(1, [10, 11], "p"), {"a": (2, 20, None)}]


def test_map_result_follows_the_first_trees_dict_order() -> None:
    out = treekit.tree_map(operator.add, {"b": 1, "a": 2}, {"a": 10, "b": 20})
    assert out == {"b": 21, "a": 12} and list(out) == ["b", "a"]


def test_map_is_leaf_applies_to_the_first_tree() -> None:
    tree = [(1, 2), [3]]
    out = treekit.tree_map(lambda x: type(x).__name__, tree, is_leaf=lambda x: isinstance(x, tuple))
    assert out == ["tuple", ["int"]]
    out = treekit.tree_map(lambda x, y: (x, y), tree, [[5, 6], [7]], is_leaf=lambda x: isinstance(x, tuple))
    assert out == [((1, 2), [5, 6]), [(3, 7)]]


def test_map_over_none() -> None:
    assert treekit.tree_map(lambda x: x + 1, [None, 1, {"a": None}]) == [None, 2, {"a": None}]
    assert treekit.tree_map(lambda x: x, None) is None
    assert treekit.tree_map(lambda x: x is None, [None], is_leaf=lambda x: x is None) == [True]


def test_map_over_custom_nodes() -> None:
    tree = [Pair(1, Point(2, 3, label="q")), NT(4, 5)]
    assert treekit.tree_map(lambda x: -x, tree) == [Pair(-1, Point(-2, -3, label="q")), NT(-4, -5)]


def test_map_with_path() -> None:
    out = treekit.tree_map_with_path(lambda p, x, y: f"{keystr(p)}:{x + y}", {"b": [1], "a": 2}, {"a": 10, "b": [20]})
    assert out == {"b": ["['b'][0]:21"], "a": "['a']:12"} and list(out) == ["b", "a"]


def test_map_with_path_is_leaf_and_is_leaf_takes_path() -> None:
    tree = {"keep": [1, 2], "map": [3, 4]}
    out = treekit.tree_map_with_path(lambda p, x: (keystr(p), x), tree, is_leaf=lambda x: x == [1, 2])
    assert out == {"keep": ("['keep']", [1, 2]), "map": [("['map'][0]", 3), ("['map'][1]", 4)]}
    out = treekit.tree_map_with_path(
        lambda p, x: keystr(p), tree, is_leaf=lambda p, x: keystr(p) == "['map']", is_leaf_takes_path=True
    )
    assert out == {"keep": ["['keep'][0]", "['keep'][1]"], "map": "['map']"}


# -- reduce, all, all_leaves ------------------------------------------------------------------------------
def test_reduce_goes_left_to_right_in_leaf_order() -> None:
    tree = {"b": [2, 3], "a": 1}
    assert treekit.tree_reduce(lambda acc, x: [*acc, x], tree, []) == [1, 2, 3]
    assert treekit.tree_reduce(lambda acc, x: (acc, x), tree) == ((1, 2), 3)
    assert treekit.tree_reduce(operator.add, [1, (2, None)], 10) == 13


def test_reduce_with_is_leaf_and_without_leaves() -> None:
    assert treekit.tree_reduce(lambda a, x: [*a, x], [(1, 2), [3]], [], is_leaf=lambda x: type(x) is tuple) == [
        (1, 2),
        3,
    ]
    assert treekit.tree_reduce(operator.add, [None, ()], 0) == 0
    with pytest.raises(TypeError, match="empty"):
        treekit.tree_reduce(operator.add, [None, ()])


@pytest.mark.parametrize(
    ("n", "grouping"),
    [
        (1, 1),
        (2, (1, 2)),
        (3, (1, (2, 3))),
        (4, ((1, 2), (3, 4))),
        (5, ((1, 2), (3, (4, 5)))),
        (7, ((1, (2, 3)), ((4, 5), (6, 7)))),
    ],
)
def test_reduce_associative_groups_as_jax_halves(n: int, grouping: Any) -> None:
    assert treekit.tree_reduce_associative(lambda a, b: (a, b), list(range(1, n + 1))) == grouping


def test_reduce_associative_identity_and_is_leaf() -> None:
    assert treekit.tree_reduce_associative(operator.add, [], identity=0) == 0
    assert treekit.tree_reduce_associative(operator.add, [1, 2], identity=100) == 3
    assert treekit.tree_reduce_associative(operator.add, [(1,), (2,)], is_leaf=lambda x: type(x) is tuple) == (1, 2)
    with pytest.raises(TypeError, match=re.escape("tree_reduce_associative: the tree has no leaves; pass identity=")):
        treekit.tree_reduce_associative(operator.add, {"a": None})


def test_tree_all() -> None:
    assert treekit.tree_all([True, {"a": 1, "b": (2,)}]) is True
    assert treekit.tree_all([True, {"a": 0}]) is False
    assert treekit.tree_all([None, {}]) is True
    assert treekit.tree_all([[], 1], is_leaf=lambda x: x == []) is False


def test_all_leaves() -> None:
    assert treekit.all_leaves([1, "a", 2.0, object()]) is True
    assert treekit.all_leaves([1, [2]]) is False
    assert treekit.all_leaves([None]) is False
    assert treekit.all_leaves([Pair(1, 2)]) is False
    assert treekit.all_leaves([]) is True
    assert treekit.all_leaves(iter([1, 2])) is True
    assert treekit.all_leaves([(1,), (2,)], is_leaf=lambda x: isinstance(x, tuple)) is True
    assert treekit.all_leaves([(1,), [2]], is_leaf=lambda x: isinstance(x, tuple)) is False
    assert treekit.all_leaves([None], is_leaf=lambda x: x is None) is True
    # is_leaf sees the list of items too, as in jax: a list that is a leaf is not its items.
    assert treekit.all_leaves([[1], (2,)], is_leaf=lambda x: isinstance(x, (list, tuple))) is False


# -- transpose --------------------------------------------------------------------------------------------
def test_transpose() -> None:
    outer, inner = tree_structure([0, 0]), tree_structure({"b": 0, "a": 0})
    out = treekit.tree_transpose(outer, inner, [{"b": 1, "a": 2}, {"a": 3, "b": 4}])
    assert out == {"b": [1, 4], "a": [2, 3]} and list(out) == ["b", "a"]


def test_transpose_infers_the_inner_structure() -> None:
    steps = [NT(1, (2, 3)), NT(4, (5, 6))]
    assert treekit.tree_transpose(tree_structure([0, 0]), None, steps) == NT([1, 4], ([2, 5], [3, 6]))


def test_transpose_nested_outer_and_custom_inner() -> None:
    outer = tree_structure({"x": 0, "y": (0, None)})
    inner = tree_structure(Point(0, 0, label="q"))
    tree = {"x": Point(1, 2, "q"), "y": (Point(3, 4, "q"), None)}
    assert treekit.tree_transpose(outer, inner, tree) == Point(
        {"x": 1, "y": (3, None)}, {"x": 2, "y": (4, None)}, label="q"
    )


@pytest.mark.parametrize(
    ("outer", "inner", "tree", "expected"),
    [
        ([0, 0], (), [(), ()], ()),  # inner without leaves
        ([0, 0], {"a": None}, [{"a": None}, {"a": None}], {"a": None}),
        ([0, 0], {"a": [], "b": None}, [{"a": [], "b": None}, {"a": [], "b": None}], {"a": [], "b": None}),
        ([], (0, 0), [], ([], [])),  # outer without leaves
        ({}, {"a": 0}, {}, {"a": {}}),
        (0, [0, 0], [1, 2], [1, 2]),  # leaf outer
        ([0, 0], 0, [1, 2], [1, 2]),  # leaf inner
    ],
)
def test_transpose_edge_structures(outer: Any, inner: Any, tree: Any, expected: Any) -> None:
    assert treekit.tree_transpose(tree_structure(outer), tree_structure(inner), tree) == expected


def test_transpose_is_strict_about_the_inner_structure() -> None:
    # jax only compares leaf counts; [(1, 2), [3, 4]] has the right count but not the right structure.
    outer, inner = tree_structure([0, 0]), tree_structure((0, 0))
    message = "pytree_to_transpose[1]: expected tuple of length 2, got list of length 2"
    with pytest.raises(StructureMismatchError, match=f"^{re.escape(message)}$"):
        treekit.tree_transpose(outer, inner, [(1, 2), [3, 4]])


# -- broadcast --------------------------------------------------------------------------------------------
def test_broadcast() -> None:
    assert treekit.tree_broadcast([1, 2], [(0, 0), {"a": 0, "b": [0]}]) == [(1, 1), {"a": 2, "b": [2]}]
    assert treekit.tree_broadcast(5, {"b": 0, "a": (0,)}) == {"b": 5, "a": (5,)}
    assert list(treekit.tree_broadcast(5, {"b": 0, "a": 0})) == ["b", "a"]
    assert treekit.tree_broadcast([None, 1], [None, [0, None]]) == [None, [1, None]]


def test_broadcast_is_leaf_applies_to_the_prefix() -> None:
    out = treekit.tree_broadcast([(1, 2)], [[0, 0, 0]], is_leaf=lambda x: isinstance(x, tuple))
    assert out == [[(1, 2)] * 3]


def test_broadcast_mismatch() -> None:
    message = "full_tree['a']: expected list of length 1, got list of length 2"
    with pytest.raises(StructureMismatchError, match=f"^{re.escape(message)}$"):
        treekit.tree_broadcast({"a": [1]}, {"a": [0, 0]})


# -- treedef helpers --------------------------------------------------------------------------------------
def test_treedef_tuple() -> None:
    treedef = treekit.treedef_tuple([tree_structure([1, 2]), tree_structure({"b": 0, "a": 0}), tree_structure(None)])
    assert repr(treedef) == "PyTreeDef(([*, *], {'a': *, 'b': *}, None))"
    assert treedef == tree_structure(([1, 2], {"a": 0, "b": 0}, None))
    assert list(treedef.unflatten(range(4))[1]) == ["b", "a"]
    assert treekit.treedef_tuple([]) == tree_structure(())
    assert treekit.treedef_tuple(iter([tree_structure(1)])) == tree_structure((1,))


def test_treedef_children() -> None:
    assert treekit.treedef_children(tree_structure({"b": [1, 2], "a": 3})) == [
        tree_structure(0),
        tree_structure([1, 2]),
    ]
    assert treekit.treedef_children(tree_structure(1)) == []


@pytest.mark.parametrize(
    ("tree", "is_leaf", "is_strict_leaf"),
    [(1, True, True), (None, True, False), ((), True, False), ([1], False, False), ({}, True, False)],
)
def test_treedef_is_leaf(tree: Any, is_leaf: bool, is_strict_leaf: bool) -> None:
    treedef = tree_structure(tree)
    assert treekit.treedef_is_leaf(treedef) is is_leaf
    assert treekit.treedef_is_strict_leaf(treedef) is is_strict_leaf


def test_flatten_functions_agree() -> None:
    tree = collections.OrderedDict(b=[1, (2, None)], a=NT(3, 4))
    leaves, treedef = treekit.tree_flatten(tree)
    assert leaves == treekit.tree_leaves(tree) == [1, 2, 3, 4]
    assert treedef == treekit.tree_structure(tree)
    pairs, treedef2 = treekit.tree_flatten_with_path(tree)
    assert treedef2 == treedef and [x for _, x in pairs] == leaves
    assert treekit.tree_leaves_with_path(tree) == pairs
    assert treekit.tree_unflatten(treedef, leaves) == tree


def test_is_leaf_in_flatten_functions() -> None:
    tree = [1, [2, 3]]
    leaves, treedef = treekit.tree_flatten(tree, is_leaf=lambda x: x == [2, 3])
    assert leaves == [1, [2, 3]] and repr(treedef) == "PyTreeDef([*, *])"
    assert treekit.tree_structure(tree, is_leaf=lambda x: x == [2, 3]) == treedef

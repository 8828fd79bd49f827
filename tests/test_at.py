"""tree_get / tree_set / tree_at: laws over every key path of random trees, every key kind, errors."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from param_trees import Pair, skeletons

from treekit import (
    DictKey,
    FlattenedIndexKey,
    GetAttrKey,
    SequenceKey,
    StructureMismatchError,
    keystr,
    register_pytree_node,
    tree_at,
    tree_get,
    tree_leaves,
    tree_leaves_with_path,
    tree_map,
    tree_set,
    tree_structure,
)


def numbered(skeleton: Any) -> Any:
    """The skeleton with leaves 0, 1, 2, ...: each leaf identifies its position."""
    count = iter(range(10**6))
    return tree_map(lambda _: next(count), skeleton)


@given(skeletons)
def test_get_reaches_every_leaf_by_entries_and_by_keystr(skeleton: Any) -> None:
    tree = numbered(skeleton)
    for path, leaf in tree_leaves_with_path(tree):
        assert tree_get(tree, path) == leaf
        assert tree_get(tree, keystr(path)) == leaf
        if path:  # every prefix is the subtree above
            parent = tree_get(tree, path[:-1])
            assert tree_get(parent, path[-1:]) == leaf


@given(skeletons, st.data())
def test_set_replaces_exactly_one_leaf_and_keeps_the_input(skeleton: Any, data: st.DataObject) -> None:
    tree = numbered(skeleton)
    before = tree_leaves(tree)
    pairs = tree_leaves_with_path(tree)
    k = data.draw(st.integers(0, len(pairs) - 1))
    path = pairs[k][0]
    out = tree_set(tree, data.draw(st.sampled_from([path, keystr(path)])), "new")
    assert tree_structure(out) == tree_structure(tree)
    assert tree_leaves(out) == [*before[:k], "new", *before[k + 1 :]]
    assert tree_leaves(tree) == before
    assert tree_set(tree, path, before[k]) == tree


@given(skeletons, st.data())
def test_at_many_paths_equals_sets_in_turn(skeleton: Any, data: st.DataObject) -> None:
    tree = numbered(skeleton)
    paths = [p for p, _ in tree_leaves_with_path(tree)]
    chosen = data.draw(st.lists(st.sampled_from(paths), min_size=1, max_size=3))
    expected = tree
    for k, path in enumerate(chosen):
        expected = tree_set(expected, path, -k)
    assert tree_at(tree, chosen, [-k for k in range(len(chosen))]) == expected
    bumped = tree_at(tree, [keystr(p) for p in chosen], replace_fn=lambda x: x + 100)
    assert tree_leaves(bumped) == [x + 100 * chosen.count(p) for p, x in tree_leaves_with_path(tree)]


class Opaque:
    """A registered node without keys: its children get FlattenedIndexKey entries."""

    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b

    def __eq__(self, other: object) -> bool:
        return type(other) is Opaque and (self.a, self.b) == (other.a, other.b)


def test_flattened_index_keys_go_through_the_registry(registered: Any) -> None:
    registered(Opaque, lambda cls: register_pytree_node(cls, lambda o: ((o.a, o.b), None), lambda _, c: Opaque(*c)))
    tree = {"o": Opaque(1, [2, 3])}
    path = (DictKey("o"), FlattenedIndexKey(1), SequenceKey(0))
    assert tree_leaves_with_path(tree)[1][0] == path
    for spelling in [path, keystr(path), "['o'][1][0]", (DictKey("o"), SequenceKey(1), SequenceKey(0))]:
        assert tree_get(tree, spelling) == 2
    assert tree_set(tree, "['o'][<flat index 0>]", 9) == {"o": Opaque(9, [2, 3])}
    assert tree == {"o": Opaque(1, [2, 3])}


CASES = [
    # (name, tree, path, value there)
    ("root by empty tuple", [1], (), [1]),
    ("root by empty string", [1], "", [1]),
    ("subtree", {"a": {"b": 1}}, "['a']", {"b": 1}),
    ("namedtuple attribute", Pair(1, Pair(2, 3)), ".second.first", 2),
    ("namedtuple by entries", Pair(1, 2), (GetAttrKey("second"),), 2),
    ("int dict key", {0: "x", "0": "y"}, "[0]", "x"),
    ("str dict key that looks like int", {0: "x", "0": "y"}, "['0']", "y"),
    ("key with a bracket inside", {"a]b": 1, "a": 2}, "['a]b']", 1),
    ("key whose repr has double quotes", {"w": 1, "w']['x": 2}, "[\"w']['x\"]", 2),
    ("None is a node with no children", {"a": None}, "['a']", None),
    ("tuple key", {(1, 2): "t"}, "[(1, 2)]", "t"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_paths(case: tuple[str, Any, Any, Any]) -> None:
    _, tree, path, value = case
    assert tree_get(tree, path) == value
    assert tree_get(tree_set(tree, path, "new"), path) == "new"


def test_jax_key_entries_work_too() -> None:
    jtu = pytest.importorskip("jax.tree_util")
    tree = [{"w": Pair(1, 2)}]
    for path, leaf in jtu.tree_leaves_with_path(tree):
        assert tree_get(tree, path) == leaf
        assert tree_get(tree, jtu.keystr(path)) == leaf


PARAMS = [{"weights": [[1.0]], "biases": [0.5]}]
ERRORS = [
    (
        lambda: tree_get(PARAMS, "[0]['weight']"),
        "tree[0]: expected a child ['weight'], got dict with keys ['biases', 'weights']",
    ),
    (lambda: tree_get(PARAMS, (SequenceKey(2),)), "tree: expected a child [2], got list of length 1"),
    (
        lambda: tree_get(PARAMS, "[0]['biases'][0][1]"),
        "tree[0]['biases'][0]: expected a node with a child [1], got leaf 0.5",
    ),
    (
        lambda: tree_get(PARAMS, "0.weights"),
        "tree: expected a child 0.weights, got list of length 1\n"
        'write key paths as keystr gives them, e.g. "[0][\'weights\']" or ".layers[1]"',
    ),
    (
        lambda: tree_set(PARAMS, "[0].weights", 1),
        "tree[0]: expected a child .weights, got dict with keys ['biases', 'weights']",
    ),
    (lambda: tree_at(PARAMS, ["[0]['biases']", "[1]"], [1, 2]), "tree: expected a child [1], got list of length 1"),
]


@pytest.mark.parametrize(("call", "message"), ERRORS, ids=[m.splitlines()[0] for _, m in ERRORS])
def test_errors_name_the_deepest_existing_path(call: Any, message: str) -> None:
    with pytest.raises(StructureMismatchError, match=f"^{re.escape(message)}$"):
        call()


TYPE_ERRORS = [
    (lambda: tree_get(PARAMS, [0]), "tree: expected a key path (a tuple of key entries or a keystr string), got list"),
    (lambda: tree_at(PARAMS, "[0]"), "tree_at: pass exactly one of replace and replace_fn"),
    (lambda: tree_at(PARAMS, "[0]", 1, replace_fn=str), "tree_at: pass exactly one of replace and replace_fn"),
    (lambda: tree_at(PARAMS, ["[0]", "[0]"], [1]), "replace: expected 2 values (one per path in where), got 1"),
]


@pytest.mark.parametrize(("call", "message"), TYPE_ERRORS, ids=[m for _, m in TYPE_ERRORS])
def test_type_errors(call: Any, message: str) -> None:
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        call()

"""Laws every tree obeys, on random trees of every node type (hypothesis)."""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("hypothesis")

from cases import case_types
from hypothesis import given
from hypothesis import strategies as st
from strategies import trees

import treekit
from treekit import FlattenedIndexKey, tree_structure


@pytest.fixture(scope="module", autouse=True)
def _case_types() -> Iterator[None]:
    with case_types():
        yield


@dataclasses.dataclass(frozen=True)
class Wrap:
    """An unregistered class: a leaf that records what it wraps."""

    x: Any


def _same_leaves(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


@given(trees())
def test_unflatten_of_flatten_is_the_tree(tree: Any) -> None:
    leaves, treedef = treekit.tree_flatten(tree)
    rebuilt = treekit.tree_unflatten(treedef, leaves)
    assert rebuilt == tree
    assert repr(rebuilt) == repr(tree)  # also the dict key order and the node classes
    assert _same_leaves(treekit.tree_leaves(rebuilt), leaves)
    assert tree_structure(rebuilt) == treedef


@given(trees())
def test_map_maps_the_leaves(tree: Any) -> None:
    out = treekit.tree_map(Wrap, tree)
    assert treekit.tree_leaves(out) == [Wrap(x) for x in treekit.tree_leaves(tree)]
    assert tree_structure(out) == tree_structure(tree)
    assert repr(treekit.tree_map(lambda w: w.x, out)) == repr(tree)


@given(trees())
def test_map_over_a_tree_and_itself(tree: Any) -> None:
    out = treekit.tree_map(lambda x, y: (x, y), tree, tree, is_leaf=lambda x: False)
    leaves = treekit.tree_leaves(tree)
    assert tree_structure(tree).flatten_up_to(out) == [(x, x) for x in leaves]


def _walk(tree: Any, path: tuple[Any, ...]) -> Any:
    for entry in path:
        if type(entry) is FlattenedIndexKey:
            children, _ = treekit.flatten_one_level(tree)
            tree = list(children)[entry.key]
        else:
            tree = entry.get(tree)
    return tree


@given(trees())
def test_each_key_path_leads_to_its_leaf(tree: Any) -> None:
    pairs = treekit.tree_leaves_with_path(tree)
    assert _same_leaves([x for _, x in pairs], treekit.tree_leaves(tree))
    for path, leaf in pairs:
        assert _walk(tree, path) is leaf


@given(trees(max_leaves=4), trees(max_leaves=4))
def test_transpose_twice_is_the_identity(outer_tree: Any, inner_tree: Any) -> None:
    outer, inner = tree_structure(outer_tree), tree_structure(inner_tree)
    composed = outer.compose(inner)
    tree = composed.unflatten(range(composed.num_leaves))
    transposed = treekit.tree_transpose(outer, inner, tree)
    assert tree_structure(transposed) == inner.compose(outer)
    back = treekit.tree_transpose(inner, outer, transposed)
    assert back == tree and repr(back) == repr(tree)


@given(trees(max_leaves=3), trees(max_leaves=3))
def test_structure_equality_is_an_equivalence_and_hash_agrees(a: Any, b: Any) -> None:
    ta, tb = tree_structure(a), tree_structure(b)
    assert ta == ta and ta == tree_structure(a)
    assert (ta == tb) == (tb == ta)
    assert (ta != tb) == (not ta == tb)
    if ta == tb:
        assert hash(ta) == hash(tb)
    same = treekit.tree_map(lambda x: 0, b)
    assert tree_structure(same) == tb and hash(tree_structure(same)) == hash(tb)


@given(trees())
def test_pickle_round_trips_treedefs(tree: Any) -> None:
    treedef = tree_structure(tree)
    clone = pickle.loads(pickle.dumps(treedef))
    assert clone == treedef and hash(clone) == hash(treedef) and repr(clone) == repr(treedef)
    leaves = treekit.tree_leaves(tree)
    assert repr(clone.unflatten(leaves)) == repr(tree)


@given(trees())
def test_children_and_counts(tree: Any) -> None:
    treedef = tree_structure(tree)
    children = treedef.children()
    assert treedef.num_leaves == sum(c.num_leaves for c in children) or not children
    if children:
        assert treedef.num_nodes == 1 + sum(c.num_nodes for c in children)
        assert treekit.treedef_tuple(children) == tree_structure(tuple(treekit.flatten_one_level(tree)[0]))


@given(trees(max_leaves=4), st.data())
def test_broadcast_of_a_prefix(prefix: Any, data: st.DataObject) -> None:
    treedef = tree_structure(prefix)
    subtrees = data.draw(st.lists(trees(max_leaves=2), min_size=treedef.num_leaves, max_size=treedef.num_leaves))
    full = treedef.unflatten(subtrees)
    out = treekit.tree_broadcast(prefix, full)
    assert tree_structure(out) == tree_structure(full)
    expected = [x for x, sub in zip(treekit.tree_leaves(prefix), subtrees) for _ in treekit.tree_leaves(sub)]
    assert _same_leaves(treekit.tree_leaves(out), expected)

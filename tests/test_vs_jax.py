"""Differential tests: jax.tree_util is the oracle, on random trees of every node type.

The custom node types of tests/cases.py are registered in both registries with the same
functions. Where treekit departs from jax on purpose, the test says so and skips that input:
dicts come back in the input's key order (``==`` ignores it), mixed-type dict keys (not
generated), error wording, and tree_transpose checking structure rather than leaf counts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

jtu = pytest.importorskip("jax.tree_util")
pytest.importorskip("hypothesis")

from cases import CASES, Case, Layer, Pair, Point, Tag, _flatten_pair, _unflatten_pair, case_types  # noqa: E402
from hypothesis import assume, given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from strategies import LEAVES, trees  # noqa: E402

import treekit  # noqa: E402
from treekit import StructureMismatchError, keystr  # noqa: E402

# jax's registry cannot forget a type: register the test types there once, for the session.
for _cls, _register in [
    (Pair, lambda c: jtu.register_pytree_node(c, _flatten_pair, _unflatten_pair)),
    # Point's own flatten_with_keys makes treekit key entries; jax gets the same with jax's.
    (
        Point,
        lambda c: jtu.register_pytree_with_keys(
            c,
            lambda p: (((jtu.GetAttrKey("x"), p.x), (jtu.GetAttrKey("y"), p.y)), p.label),
            c.tree_unflatten,
            c.tree_flatten,
        ),
    ),
    (Layer, jtu.register_dataclass),
    (Tag, jtu.register_static),
]:
    if not jtu.is_tree_node(_cls):
        _register(_cls)


@pytest.fixture(scope="module", autouse=True)
def _case_types() -> Iterator[None]:
    with case_types():
        yield


def _same_objects(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def _jax_error_path(err: BaseException) -> str | None:
    """The key path jax's tree_map names (``tree_map tree['a'][0]`` on its second line)."""
    match = re.search(r"^    tree_map tree(.*)$", str(err), re.MULTILINE)
    return match.group(1) if match else None


SMALL = st.one_of(LEAVES, st.none(), trees(max_leaves=2))


def _below_a_namedtuple(tree: Any, path: tuple[Any, ...]) -> bool:
    """Whether ``path`` passes through a namedtuple of ``tree``.

    jax's error finder there names the wrong field: its flatten_one_level_with_keys gives
    every field of a namedtuple the first field's key (``.x`` for ``P(x, y).y``, jax 0.10.2).
    """
    for entry in path:
        if isinstance(tree, tuple) and hasattr(type(tree), "_fields"):
            return True
        tree = entry.get(tree) if hasattr(entry, "get") else list(treekit.flatten_one_level(tree)[0])[entry.key]
    return False


IS_LEAF: list[Callable[[Any], bool]] = [
    lambda x: isinstance(x, tuple),  # namedtuples too
    lambda x: isinstance(x, list) and len(x) == 1,
    lambda x: x is None,
    lambda x: isinstance(x, dict) and len(x) >= 2,  # OrderedDict and defaultdict too
    lambda x: type(x) in (Pair, Layer),
]


# -- the case records -------------------------------------------------------------------------------------
JAX_CASES = [c for c in CASES if c.name not in {"partial", "dict_mixed_keys"}]  # treekit's Partial; jax raises


@pytest.mark.parametrize("case", JAX_CASES, ids=lambda c: c.name)
def test_case_records_agree_with_jax(case: Case) -> None:
    leaves, treedef = jtu.tree_flatten(case.tree)
    assert _same_objects(leaves, case.leaves)
    assert repr(treedef) == case.treedef_repr
    assert [jtu.keystr(p) for p, _ in jtu.tree_leaves_with_path(case.tree)] == case.keystrs


# -- flatten, unflatten, map --------------------------------------------------------------------------------
@given(trees())
def test_flatten_agrees(tree: Any) -> None:
    leaves, treedef = treekit.tree_flatten(tree)
    jleaves, jtreedef = jtu.tree_flatten(tree)
    assert _same_objects(leaves, jleaves)
    assert repr(treedef) == repr(jtreedef)
    assert (treedef.num_leaves, treedef.num_nodes) == (jtreedef.num_leaves, jtreedef.num_nodes)
    assert treedef.node_data() == jtreedef.node_data()
    assert [repr(c) for c in treedef.children()] == [repr(c) for c in jtreedef.children()]
    pairs = treekit.tree_leaves_with_path(tree)
    jpairs = jtu.tree_leaves_with_path(tree)
    assert [keystr(p) for p, _ in pairs] == [jtu.keystr(p) for p, _ in jpairs]
    assert [keystr(p, simple=True, separator="/") for p, _ in pairs] == [
        jtu.keystr(p, simple=True, separator="/") for p, _ in jpairs
    ]
    assert _same_objects([x for _, x in pairs], leaves)
    assert treekit.is_tree_node(type(tree)) == jtu.is_tree_node(type(tree))


@given(trees())
def test_unflatten_agrees(tree: Any) -> None:
    leaves, treedef = treekit.tree_flatten(tree)
    new = [("new", k) for k in range(len(leaves))]
    ours, theirs = treedef.unflatten(new), jtu.tree_unflatten(jtu.tree_structure(tree), new)
    assert ours == theirs  # dict key order differs on purpose; == ignores it
    assert repr(treekit.tree_structure(ours)) == repr(jtu.tree_structure(theirs))


@given(trees())
def test_map_agrees(tree: Any) -> None:
    def f(x: Any) -> Any:
        return ("mapped", x)

    ours, theirs = treekit.tree_map(f, tree), jtu.tree_map(f, tree)
    assert ours == theirs
    ours = treekit.tree_map_with_path(lambda p, x: (keystr(p), x), tree)
    theirs = jtu.tree_map_with_path(lambda p, x: (jtu.keystr(p), x), tree)
    assert ours == theirs


@given(trees(max_leaves=5), st.data())
def test_map_over_several_trees_agrees(tree: Any, data: st.DataObject) -> None:
    treedef = treekit.tree_structure(tree)
    n = treedef.num_leaves
    # Trees that extend `tree`: a leaf or a small tree where `tree` has a leaf.
    rest = [
        treedef.unflatten(data.draw(st.lists(SMALL, min_size=n, max_size=n)))
        for _ in range(data.draw(st.integers(1, 2)))
    ]
    ours = treekit.tree_map(lambda *xs: xs, tree, *rest)
    theirs = jtu.tree_map(lambda *xs: xs, tree, *rest)
    assert ours == theirs
    ours = treekit.tree_map_with_path(lambda p, *xs: (keystr(p), xs), tree, *rest)
    theirs = jtu.tree_map_with_path(lambda p, *xs: (jtu.keystr(p), xs), tree, *rest)
    assert ours == theirs


@given(trees(), st.sampled_from(range(len(IS_LEAF))))
def test_is_leaf_agrees(tree: Any, which: int) -> None:
    is_leaf = IS_LEAF[which]
    leaves, treedef = treekit.tree_flatten(tree, is_leaf)
    jleaves, jtreedef = jtu.tree_flatten(tree, is_leaf)
    assert _same_objects(leaves, jleaves)
    assert repr(treedef) == repr(jtreedef)
    pairs = treekit.tree_leaves_with_path(tree, is_leaf)
    jpairs = jtu.tree_leaves_with_path(tree, is_leaf)
    assert [keystr(p) for p, _ in pairs] == [jtu.keystr(p) for p, _ in jpairs]
    assert treekit.tree_map(lambda x: ("m", x), tree, is_leaf=is_leaf) == jtu.tree_map(
        lambda x: ("m", x), tree, is_leaf=is_leaf
    )
    assert treekit.all_leaves(leaves, is_leaf) == jtu.all_leaves(leaves, is_leaf)


@given(trees(), st.integers(0, 3))
def test_is_leaf_takes_path_agrees(tree: Any, depth: int) -> None:
    def is_leaf(path: tuple[Any, ...], x: Any) -> bool:
        return len(path) == depth

    pairs, treedef = treekit.tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path=True)
    jpairs, jtreedef = jtu.tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path=True)
    assert [keystr(p) for p, _ in pairs] == [jtu.keystr(p) for p, _ in jpairs]
    assert _same_objects([x for _, x in pairs], [x for _, x in jpairs])
    assert repr(treedef) == repr(jtreedef)


# -- structure equality -------------------------------------------------------------------------------------
@given(trees(max_leaves=3), trees(max_leaves=3))
def test_treedef_equality_agrees(a: Any, b: Any) -> None:
    ta, tb = treekit.tree_structure(a), treekit.tree_structure(b)
    assert (ta == tb) == (jtu.tree_structure(a) == jtu.tree_structure(b))
    if ta == tb:
        assert hash(ta) == hash(tb)


@given(trees(max_leaves=4))
def test_equal_structures_agree(a: Any) -> None:
    b = treekit.tree_map(lambda x: 0, a)  # same structure; dicts in another order are equal too
    assert treekit.tree_structure(a) == treekit.tree_structure(b)
    assert jtu.tree_structure(a) == jtu.tree_structure(b)
    assert hash(treekit.tree_structure(a)) == hash(treekit.tree_structure(b))


# -- reduce, all, transpose, broadcast ------------------------------------------------------------------------
@given(trees())
def test_reduce_and_all_agree(tree: Any) -> None:
    def pair(a: Any, b: Any) -> Any:
        return (a, b)

    assert treekit.tree_reduce(pair, tree, "init") == jtu.tree_reduce(pair, tree, "init")
    assert treekit.tree_reduce_associative(pair, tree, identity="id") == jtu.tree_reduce_associative(
        pair, tree, identity="id"
    )
    if treekit.tree_leaves(tree):
        assert treekit.tree_reduce(pair, tree) == jtu.tree_reduce(pair, tree)
    assert treekit.tree_all(tree) == jtu.tree_all(tree)
    assert treekit.all_leaves([tree]) == jtu.all_leaves([tree])


@given(trees(max_leaves=4), trees(max_leaves=4), st.booleans())
def test_transpose_agrees(outer_tree: Any, inner_tree: Any, infer_inner: bool) -> None:
    outer, inner = treekit.tree_structure(outer_tree), treekit.tree_structure(inner_tree)
    # jax cannot transpose an outer structure without leaves (nothing to zip): treekit can.
    assume(outer.num_leaves > 0)
    composed = outer.compose(inner)
    tree = composed.unflatten([f"leaf{k}" for k in range(composed.num_leaves)])
    jouter = jtu.tree_structure(outer_tree)
    jinner = None if infer_inner else jtu.tree_structure(inner_tree)
    ours = treekit.tree_transpose(outer, None if infer_inner else inner, tree)
    theirs = jtu.tree_transpose(jouter, jinner, tree)
    assert ours == theirs
    assert repr(treekit.tree_structure(ours)) == repr(jtu.tree_structure(theirs))


@given(trees(max_leaves=4), st.data())
def test_broadcast_agrees(prefix: Any, data: st.DataObject) -> None:
    treedef = treekit.tree_structure(prefix)
    full = treedef.unflatten(
        data.draw(st.lists(trees(max_leaves=3), min_size=treedef.num_leaves, max_size=treedef.num_leaves))
    )
    ours, theirs = treekit.tree_broadcast(prefix, full), jtu.tree_broadcast(prefix, full)
    assert ours == theirs
    assert _same_objects(treekit.tree_leaves(ours), jtu.tree_leaves(theirs))


# -- mismatches ------------------------------------------------------------------------------------------------


@given(trees(max_leaves=4), st.data())
def test_mismatches_agree(context: Any, data: st.DataObject) -> None:
    # Two trees that share a random context and differ (or not) in the subtrees at its leaves.
    treedef = treekit.tree_structure(context)
    n = treedef.num_leaves
    a = treedef.unflatten(data.draw(st.lists(SMALL, min_size=n, max_size=n)))
    b = treedef.unflatten(data.draw(st.lists(SMALL, min_size=n, max_size=n)))
    try:
        theirs = jtu.tree_map(lambda *xs: xs, a, b)
    except ValueError as jax_error:
        with pytest.raises(StructureMismatchError) as info:
            treekit.tree_map(lambda *xs: xs, a, b)
        path = _jax_error_path(jax_error)
        if path is not None and not _below_a_namedtuple(a, info.value.path):
            assert keystr(info.value.path) == path
        with pytest.raises(StructureMismatchError):
            treekit.tree_structure(a).flatten_up_to(b)
        with pytest.raises(ValueError):
            jtu.tree_structure(a).flatten_up_to(b)
    else:
        assert treekit.tree_map(lambda *xs: xs, a, b) == theirs
        assert treekit.tree_structure(a).flatten_up_to(b) == jtu.tree_structure(a).flatten_up_to(b)

"""partition/combine and flatten_dict against the libraries whose forms they meet (issue 28):
haiku's ``partition``/``merge`` (parts that leave dict keys out) and flax's ``flatten_dict``
(keys in insertion order). Each library's checks run where it is installed."""

from __future__ import annotations

import collections
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import treekit as tk
from treekit import StructureMismatchError, keystr, tree_leaves, tree_leaves_with_path, tree_map_with_path
from treekit.params import combine, flatten_dict, partition, unflatten_dict


def _by_path(tree: Any) -> dict[str, Any]:
    return {keystr(path): leaf for path, leaf in tree_leaves_with_path(tree)}


def _none_leaves(tree: Any) -> list[str]:
    pairs = tk.tree_leaves_with_path(tree, is_leaf=lambda x: x is None)
    return [keystr(path) for path, leaf in pairs if leaf is None]


def _dict_keys(tree: Any) -> Any:
    """The nested key sets of a tree of dicts (its leaves left out)."""
    if type(tree) is dict:
        return {key: _dict_keys(value) for key, value in tree.items()}
    return None


def _assert_same(a: Any, b: Any) -> None:
    """``a`` and ``b`` have the same nested dict keys and equal arrays at each key path."""
    assert _dict_keys(a) == _dict_keys(b)
    left, right = _by_path(a), _by_path(b)
    assert left.keys() == right.keys()
    for path, leaf in left.items():
        np.testing.assert_array_equal(np.asarray(leaf), np.asarray(right[path]), err_msg=path)


# -- haiku ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def hk_params() -> Any:
    hk = pytest.importorskip("haiku")
    jax = pytest.importorskip("jax")
    model = hk.transform(lambda x: hk.nets.MLP([4, 2])(x))
    return model.init(jax.random.PRNGKey(0), np.ones((1, 3), np.float32))


HK_PREDICATES = {  # haiku's predicate (module name, param name, value) -> bool
    "weights": lambda module, name, value: name == "w",
    "first layer": lambda module, name, value: module.endswith("linear_0"),  # a module all in one part
    "first bias": lambda module, name, value: module.endswith("linear_0") and name == "b",
    "all": lambda module, name, value: True,
    "none": lambda module, name, value: False,
}


def _mask(params: Any, predicate: Any) -> Any:
    """haiku's predicate as a treekit mask, by key path."""
    return tree_map_with_path(lambda path, value: predicate(path[0].key, path[1].key, value), params)


@pytest.mark.parametrize("name", HK_PREDICATES)
def test_combine_joins_haikus_parts(hk_params: Any, name: str) -> None:
    hk = pytest.importorskip("haiku")
    parts = hk.data_structures.partition(HK_PREDICATES[name], hk_params)
    _assert_same(combine(*parts), hk_params)
    _assert_same(combine(*reversed(parts)), hk_params)


@pytest.mark.parametrize("name", HK_PREDICATES)
def test_partition_drop_gives_haikus_parts(hk_params: Any, name: str) -> None:
    hk = pytest.importorskip("haiku")
    predicate = HK_PREDICATES[name]
    theirs = hk.data_structures.partition(predicate, hk_params)
    ours = partition(hk_params, _mask(hk_params, predicate), drop=True)
    for mine, haikus in zip(ours, theirs, strict=True):
        _assert_same(mine, haikus)
        assert _none_leaves(mine) == []
    _assert_same(hk.data_structures.merge(*ours), hk_params)
    assert _none_leaves(hk.data_structures.merge(*ours)) == []
    _assert_same(combine(*ours), hk_params)


def test_partition_drop_by_leaf_predicate_matches_haiku(hk_params: Any) -> None:
    hk = pytest.importorskip("haiku")
    ours = partition(hk_params, lambda x: x.ndim == 2, drop=True)
    theirs = hk.data_structures.partition(lambda module, name, value: value.ndim == 2, hk_params)
    for mine, haikus in zip(ours, theirs, strict=True):
        _assert_same(mine, haikus)
    assert all(a is b for a, b in zip(tree_leaves(combine(*ours)), tree_leaves(hk_params), strict=True))


def test_without_drop_haikus_merge_keeps_none(hk_params: Any) -> None:
    """Why drop=True: haiku's merge takes ``None`` for a value, the last part's (issue 28)."""
    hk = pytest.importorskip("haiku")
    parts = partition(hk_params, _mask(hk_params, HK_PREDICATES["weights"]))
    assert _none_leaves(hk.data_structures.merge(*parts)) == ["['mlp/~/linear_0']['w']", "['mlp/~/linear_1']['w']"]


def test_combine_joins_haikus_partition_n(hk_params: Any) -> None:
    hk = pytest.importorskip("haiku")
    parts = hk.data_structures.partition_n(
        lambda module, name, value: 0 if name == "w" else 1 if module.endswith("linear_0") else 2, hk_params, 3
    )
    assert [len(part) for part in parts] == [2, 1, 1]
    _assert_same(combine(*parts), hk_params)
    _assert_same(combine(parts[2], parts[0], parts[1]), hk_params)


# -- combine: trees that lack dict keys ----------------------------------------------------------
def test_combine_takes_missing_keys_from_the_others() -> None:
    assert combine({"m": {"w": 1}}, {"m": {"b": 2}, "n": {"w": 3}}) == {"m": {"w": 1, "b": 2}, "n": {"w": 3}}
    joined = combine({"b": {"y": 1}}, {"a": {"x": 2}, "b": {"x": 3}})
    assert list(joined) == ["b", "a"] and list(joined["b"]) == ["y", "x"]  # the first tree's keys, then the others'
    assert combine({"x": 1}, {"m": {"w": 1}}, {"m": {"b": 2}}) == {"x": 1, "m": {"w": 1, "b": 2}}
    assert combine({}, {"m": [1, None]}, {"m": [None, 2]}) == {"m": [1, 2]}
    assert combine([{"w": 1}, {}], [{}, {"b": 2}]) == [{"w": 1}, {"b": 2}]
    dd = combine(collections.defaultdict(list, {"a": 1}), collections.defaultdict(list, {"b": 2}))
    assert type(dd) is collections.defaultdict and dd.default_factory is list and dd == {"a": 1, "b": 2}


def test_combine_takes_the_first_of_two_leaves_at_one_path() -> None:
    assert combine({"a": 1}, {"a": 2, "b": 3}) == {"a": 1, "b": 3}
    assert combine({"a": None}, {"a": 2}, {"a": 3}) == {"a": 2}


@pytest.mark.parametrize(
    ("trees", "message"),
    [
        (({"a": [1]}, {"a": [1, 2], "b": 1}), "rest[0]['a']: expected list of length 1, got list of length 2"),
        (({"x": 1}, {"m": [1]}, {"m": [1, 2]}), "rest[1]['m']: expected list of length 1, got list of length 2"),
        (({"a": {"x": 1}}, {"a": None, "b": 2}), "rest[0]['a']: expected dict with keys ['x'], got None"),
        (
            ({"a": {"x": 1}, "c": 1}, {"a": collections.OrderedDict(y=1)}),
            "rest[0]['a']: expected dict with keys ['x'], got OrderedDict with keys ['y']",
        ),
        (
            (collections.OrderedDict(a=1), collections.OrderedDict(b=2)),
            "rest[0]: expected OrderedDict with keys ['a'], got keys ['b'] (missing 'a'; extra 'b')",
        ),
        (({"a": 1}, [1]), "rest[0]: expected dict with keys ['a'], got list of length 1"),
    ],
)
def test_combine_still_needs_one_structure_outside_dict_keys(trees: tuple[Any, ...], message: str) -> None:
    with pytest.raises(StructureMismatchError, match=f"^{re.escape(message)}$"):
        combine(*trees)


def test_combine_stops_at_a_cycle() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    assert combine({"x": 1}, {"m": loop})["m"]["self"] is loop
    with pytest.raises(tk.TreeCycleError):
        combine({"m": loop}, {"x": 1})


# -- partition(drop=True) on other nodes --------------------------------------------------------------
def test_partition_drop_keeps_list_items_and_other_nodes() -> None:
    assert partition([{"w": 1}, {"b": 2}], lambda x: x < 2, drop=True) == ([{"w": 1}, {}], [{}, {"b": 2}])
    tree = {"a": None, "b": 1, "c": {}, "d": (1, 2), "e": [3, {"x": 4}]}
    assert partition(tree, lambda x: x == 1, drop=True) == (
        {"a": None, "b": 1, "c": {}, "d": (1, None)},
        {"a": None, "c": {}, "d": (None, 2), "e": [3, {"x": 4}]},
    )
    ordered = collections.OrderedDict(a=1, b=2)  # its key order is its structure: None kept
    assert partition(ordered, lambda x: x == 2, drop=True) == (
        collections.OrderedDict(a=None, b=2),
        collections.OrderedDict(a=1, b=None),
    )
    assert partition({"a": 1}, lambda x: False, drop=True) == ({}, {"a": 1})
    assert partition(5, lambda x: False, drop=True) == (None, 5)


def test_partition_drop_by_prefix_mask() -> None:
    params = {"linear_0": {"w": 1.0, "b": 0.0}, "linear_1": {"w": 2.0, "b": 0.0}}
    weights, rest = partition(params, {"linear_0": {"w": True, "b": False}, "linear_1": True}, drop=True)
    assert (weights, rest) == ({"linear_0": {"w": 1.0}, "linear_1": {"w": 2.0, "b": 0.0}}, {"linear_0": {"b": 0.0}})
    message = "tree: expected dict with keys ['linear_0', 'linear_1'], got keys ['linear_0', 'linear_1', 'x'] "
    with pytest.raises(StructureMismatchError, match=f"^{re.escape(message)}"):
        partition({**params, "x": 1.0}, {"linear_0": True, "linear_1": False}, drop=True)


# -- laws on random trees -------------------------------------------------------------------------------
dict_trees = st.recursive(
    st.floats(-2, 2, allow_nan=False),
    lambda children: st.dictionaries(st.text("abc", min_size=1, max_size=2), children, max_size=3),
    max_leaves=12,
).filter(lambda t: type(t) is dict)


@st.composite
def masks(draw: st.DrawFn, tree: Any) -> Any:
    """A mask for ``tree``: a bool per leaf, or a bool in place of whole subtrees (a prefix)."""
    if type(tree) is dict and (not tree or draw(st.booleans())):
        return {key: draw(masks(value)) for key, value in tree.items()}
    return draw(st.booleans())


def _kept(tree: Any, mask: Any, keep: bool) -> Any:
    """The part of a tree of dicts holding the leaves picked ``keep``, by recursion: each entry
    that held leaves and holds none of this part's is left out."""
    if type(tree) is not dict:
        return tree if mask == keep else None
    out = {}
    for key, value in tree.items():
        part = _kept(value, mask if type(mask) is bool else mask[key], keep)
        if tree_leaves(part) or not tree_leaves(value):
            out[key] = part
    return out


@given(dict_trees, st.data())
def test_partition_drop_then_combine_is_identity(tree: Any, data: st.DataObject) -> None:
    mask = data.draw(masks(tree))
    threshold = data.draw(st.floats(-2, 2))
    for how in (mask, lambda x: x > threshold):
        selected, rest = partition(tree, how, drop=True)
        assert combine(selected, rest) == tree
        assert combine(rest, selected) == tree
        assert _none_leaves(selected) == _none_leaves(rest) == []
        ours, others, every = _by_path(selected), _by_path(rest), _by_path(tree)
        assert ours.keys().isdisjoint(others.keys())
        assert ours.keys() | others.keys() == every.keys()
        assert all(leaf is every[path] for path, leaf in (ours | others).items())
    assert partition(tree, mask, drop=True) == (_kept(tree, mask, True), _kept(tree, mask, False))
    first, rest = partition(tree, mask, drop=True)  # three parts, as haiku's partition_n gives
    second, third = partition(rest, lambda x: x > threshold, drop=True)
    assert combine(first, second, third) == combine(third, first, second) == tree


@given(st.data())
def test_partition_drop_then_combine_is_identity_on_every_node_type(data: st.DataObject) -> None:
    from strategies import trees

    tree = data.draw(trees(custom=False))
    picks = [data.draw(st.booleans()) for _ in tree_leaves(tree)]
    mask = tk.tree_unflatten(tk.tree_structure(tree), picks)
    selected, rest = partition(tree, mask, drop=True)
    joined = combine(selected, rest)
    assert tk.tree_structure(joined) == tk.tree_structure(tree)
    assert all(a is b for a, b in zip(tree_leaves(joined), tree_leaves(tree), strict=True))
    assert [id(x) for x in tree_leaves(selected)] == [id(x) for x, p in zip(tree_leaves(tree), picks) if p]
    assert [id(x) for x in tree_leaves(rest)] == [id(x) for x, p in zip(tree_leaves(tree), picks) if not p]


# -- flax: flatten_dict's key order -------------------------------------------------------------
def test_flatten_dict_has_flaxs_keys_in_leaf_order() -> None:
    jax = pytest.importorskip("jax")
    nn = pytest.importorskip("flax.linen")
    traverse_util = pytest.importorskip("flax.traverse_util")

    class MLP(nn.Module):  # type: ignore[misc]
        @nn.compact
        def __call__(self, x: Any) -> Any:
            x = nn.relu(nn.Dense(4, name="hidden")(x))
            return nn.Dense(2, name="dense")(x)

    variables = MLP().init(jax.random.PRNGKey(0), np.ones((1, 3), np.float32))
    assert list(variables["params"]) == ["hidden", "dense"]  # insertion order, not sorted
    assert list(variables["params"]["dense"]) == ["kernel", "bias"]
    ours = flatten_dict(variables)
    theirs = traverse_util.flatten_dict(variables, sep="/")
    assert ours.keys() == theirs.keys()
    assert all(ours[key] is theirs[key] for key in theirs)
    assert list(ours) != list(theirs)
    assert list(theirs) == ["params/hidden/kernel", "params/hidden/bias", "params/dense/kernel", "params/dense/bias"]
    assert list(ours) == ["params/dense/bias", "params/dense/kernel", "params/hidden/bias", "params/hidden/kernel"]
    leaves = tree_leaves_with_path(variables)  # treekit's order is tree_leaves'
    assert list(ours) == [keystr(path, simple=True, separator="/") for path, _ in leaves]
    assert all(a is b for a, b in zip(ours.values(), tree_leaves(variables), strict=True))
    assert list({key: ours[key] for key in theirs}) == list(theirs)  # flax's order, when it matters
    for flat in (ours, theirs):
        for back in (unflatten_dict(flat), traverse_util.unflatten_dict(flat, sep="/")):
            _assert_same(back, variables)
            assert all(a is b for a, b in zip(tree_leaves(back), tree_leaves(variables), strict=True))
    assert list(unflatten_dict(theirs)["params"]["dense"]) == ["kernel", "bias"]  # the order flat has


# -- equinox's call forms and results (issue 45) ------------------------------------------------
_eqx_trees = st.recursive(
    st.integers(-3, 3),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.sampled_from("abc"), children, max_size=3)
    ),
    max_leaves=8,
)
_filters = st.sampled_from([lambda x: x > 0, lambda x: x % 2 == 0, True, False])


@given(_eqx_trees, _filters, st.booleans(), st.sampled_from([None, 0, "x"]), st.data())
def test_partition_takes_equinox_s_arguments_and_gives_its_parts(
    tree: Any, leaf_filter: Any, prefix: bool, replace: Any, data: Any
) -> None:
    eqx = pytest.importorskip("equinox")
    spec: Any = leaf_filter
    if prefix and isinstance(tree, (list, dict)):  # a prefix tree: a filter or a bool per child
        children = tree if isinstance(tree, list) else list(tree.values())
        picks = [data.draw(_filters) for _ in children]
        spec = picks if isinstance(tree, list) else dict(zip(tree, picks))
    ours = partition(tree, filter_spec=spec, replace=replace)
    assert ours == eqx.partition(tree, spec, replace=replace)
    if replace is None:
        assert combine(*ours) == tree


def test_partition_s_is_leaf_stops_at_a_node_as_equinox_s() -> None:
    eqx = pytest.importorskip("equinox")
    tree = [(1, 2), (3, -4), 5]
    is_pair = lambda x: isinstance(x, tuple)  # noqa: E731
    wanted = eqx.partition(tree, lambda x: isinstance(x, tuple) and sum(x) > 0, is_leaf=is_pair)
    assert partition(tree, lambda x: isinstance(x, tuple) and sum(x) > 0, is_leaf=is_pair) == wanted


_eqx_leaves = st.one_of(
    st.integers(-2, 2), st.floats(-2, 2, allow_nan=False), st.booleans(), st.sampled_from(["relu", 1j]),
    st.builds(lambda n, k: np.arange(n, dtype=k), st.integers(0, 3), st.sampled_from([np.float32, np.int32])),
)
_eqx_mixed = st.recursive(
    _eqx_leaves, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from("ab"), c), max_leaves=6
)


@given(_eqx_mixed, _eqx_mixed, st.booleans(), st.booleans())
@example([np.arange(2, dtype=np.float32), 1], [np.arange(2, dtype=np.int32), 1.0], False, False)  # dtypes, types
def test_equinox_s_filters_and_tree_equal_agree_with_equinox(a: Any, b: Any, typematch: bool, inverse: bool) -> None:
    eqx = pytest.importorskip("equinox")
    for x in tree_leaves(a):
        assert tk.is_array_like(x) == eqx.is_array_like(x)
        assert tk.is_inexact_array_like(x) == eqx.is_inexact_array_like(x)
    for spec in (tk.is_array, tk.is_inexact_array_like):
        ours, theirs = tk.params.filter(a, spec, inverse=inverse), eqx.filter(a, spec, inverse=inverse)
        assert eqx.tree_equal(ours, theirs, typematch=True)  # (dicts in the input's key order: docs/migration.md)
    for other in (a, b):
        assert bool(tk.tree_equal(a, other, typematch=typematch)) == bool(eqx.tree_equal(a, other, typematch=typematch))


def test_tree_equal_compares_shape_dtype_structs_as_equinox_does() -> None:
    eqx = pytest.importorskip("equinox")
    jax = pytest.importorskip("jax")
    sd, other = jax.ShapeDtypeStruct((2,), np.float32), jax.ShapeDtypeStruct((3,), np.float32)
    for a, b in (([sd], [sd]), ([sd], [other])):
        assert tk.tree_equal(a, b, rtol=1e-5, atol=1e-8) == eqx.tree_equal(a, b, rtol=1e-5, atol=1e-8)

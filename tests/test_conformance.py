"""What code written for ``jax.tree_util`` relies on, checked on treekit (issue 12).

The cases come from running JAX's own ``tests/tree_util_test.py`` against treekit (jax 0.10.2
for issue 12; the newest file, on jax 0.12 and Python 3.13, for issue 22) and from the issues'
numbered items; they are written here in our own words. Deliberate differences are pinned in
``test_deliberate_*`` and explained in docs/migration.md.
"""

from __future__ import annotations

import collections
import dataclasses
import re
from collections.abc import Callable
from typing import Any

import pytest

import treekit
from treekit import tree_flatten, tree_map, tree_structure, tree_unflatten

Registered = Callable[[type, Callable[[type], Any]], Any]


class Box:
    """A container of any number of children; each test registers it its own way."""

    def __init__(self, items: Any, tag: Any = None) -> None:
        self.items, self.tag = items, tag

    def __eq__(self, other: object) -> bool:
        return type(other) is Box and (self.items, self.tag) == (other.items, other.tag)

    __hash__ = None  # type: ignore[assignment]


Point = collections.namedtuple("Point", "x y")


# -- item 1: unflatten functions get their children as a tuple ----------------------------------
@pytest.mark.parametrize(
    "register",
    [
        lambda c: treekit.register_pytree_node(c, lambda b: (b.items, None), lambda _, ch: c(ch)),
        lambda c: treekit.register_pytree_with_keys(
            c, lambda b: ([(treekit.SequenceKey(i), x) for i, x in enumerate(b.items)], None), lambda _, ch: c(ch)
        ),
    ],
    ids=["register_pytree_node", "register_pytree_with_keys"],
)
def test_unflatten_functions_receive_a_tuple_of_children(registered: Registered, register: Any) -> None:
    registered(Box, register)
    assert tree_map(lambda x: 2 * x, Box([1, 2])).items == (2, 4)
    leaves, treedef = tree_flatten([Box([1, 2]), Box((3,))])
    for _ in range(10):  # interpreted at first, then compiled: a tuple either way
        rebuilt = treedef.unflatten(leaves)
        assert [b.items for b in rebuilt] == [(1, 2), (3,)]


def test_unflatten_classmethods_receive_a_tuple_of_children(registered: Registered) -> None:
    seen = []

    class Pair:
        def __init__(self, a: Any, b: Any) -> None:
            self.a, self.b = a, b

        def tree_flatten(self) -> tuple[list[Any], None]:
            return [self.a, self.b], None

        @classmethod
        def tree_unflatten(cls, data: None, children: Any) -> Pair:
            seen.append(type(children))
            return cls(*children)

    registered(Pair, treekit.register_pytree_node_class)
    tree_map(lambda x: x, Pair(1, Pair(2, 3)))
    assert seen == [tuple, tuple]


def test_unflatten_through_jax_gets_a_tuple(registered: Registered) -> None:
    jax = pytest.importorskip("jax")
    registered(Box, lambda c: treekit.register_pytree_node(c, lambda b: (b.items, None), lambda _, ch: c(ch)))
    assert jax.tree_util.tree_map(lambda x: 2 * x, Box([1, 2])).items == (2, 4)
    out = jax.jit(lambda b: b)(Box([1.0, 2.0]))
    assert type(out.items) is tuple


# -- item 3: a treedef hashes whatever its custom node data ---------------------------------------
def test_a_treedef_with_unhashable_node_data_hashes(registered: Registered) -> None:
    registered(Box, lambda c: treekit.register_pytree_node(c, lambda b: ((b.items,), b.tag), lambda t, ch: c(*ch, t)))
    a, b = tree_structure(Box(1, ["relu"])), tree_structure(Box(2, ["relu"]))
    assert a == b and hash(a) == hash(b)
    assert {a: "seen"}[b] == "seen"
    assert tree_structure(Box(1, ["gelu"])) != a  # node data still decides equality


# -- item 4: static() keeps an explicit 'static' entry ---------------------------------------------
def test_static_field_helper_keeps_an_explicit_static_entry() -> None:
    assert treekit.static(metadata={"static": False}).metadata["static"] is False
    assert dict(treekit.static(metadata={"doc": "x"}).metadata) == {"doc": "x", "static": True}
    assert treekit.tree.static is treekit.static


# -- item 6: flatten_one_level gives the children as jax does ---------------------------------------
def test_flatten_one_level_children_as_jax_gives_them(registered: Registered) -> None:
    registered(Box, lambda c: treekit.register_pytree_node(c, lambda b: (b.items, "d"), lambda _, ch: c(ch)))
    items = [1, 2]
    assert treekit.flatten_one_level(Point(1, [2])) == ([1, [2]], Point)
    assert treekit.flatten_one_level(Box(items))[0] is items  # what the flatten function returned
    assert treekit.flatten_one_level(Box((1, 2))) == ((1, 2), "d")
    assert treekit.flatten_one_level({"b": 1, "a": 2}) == ((2, 1), ("a", "b"))
    assert treekit.flatten_one_level(collections.OrderedDict(b=1, a=2)) == ([1, 2], ("b", "a"))
    assert treekit.flatten_one_level(None) == ((), None)
    lst = [1, 2]
    assert treekit.flatten_one_level(lst)[0] is lst


# -- item 8: smaller differences ---------------------------------------------------------------------
def test_node_data_shows_dict_keys_as_plain_tuples() -> None:
    for tree in ({"b": 1, "a": 2}, collections.defaultdict(int, {"b": 1, "a": 2})):
        data = treekit.flatten_one_level(tree)[1]
        keys = data if type(tree) is dict else data[1]
        assert type(keys) is tuple and keys == ("a", "b")
    node_data = tree_structure(collections.defaultdict(int, {"b": 1, "a": 2})).node_data()
    assert node_data == (collections.defaultdict, (int, ("a", "b")))
    assert type(node_data[1][1]) is tuple


def test_is_tree_node_of_an_instance_is_false() -> None:
    assert treekit.is_tree_node(list) is True
    assert treekit.is_tree_node([1]) is False
    assert treekit.is_tree_node(1) is False


# -- from JAX's tests: round trips over every kind of node ----------------------------------------------
@dataclasses.dataclass
class _Layer:
    w: Any
    act: str = treekit.static(default="relu")


def test_round_trips_keep_every_kind_of_node(registered: Registered) -> None:
    registered(_Layer, treekit.register_dataclass)
    registered(Box, lambda c: treekit.register_pytree_node(c, lambda b: (b.items, b.tag), lambda t, ch: c(ch, t)))
    trees = [
        None,
        (None,),
        [()],
        ((1, "foo"), ["bar", (3, None, 7)]),
        [3, Point(x=(3, Point(3, None)), y={"baz": 34})],
        Box((3, [4, "x"]), "tag"),
        _Layer(w=(1, 2)),
        collections.OrderedDict([("foo", 34), ("baz", 101)]),
        collections.defaultdict(dict, [("foo", 34), ("baz", 101)]),
        "leaf",
    ]
    for tree in trees:
        leaves, treedef = tree_flatten(tree)
        assert tree_unflatten(treedef, leaves) == tree
        assert tree_unflatten(treedef, treedef.flatten_up_to(tree)) == tree
        pairs, with_path = treekit.tree_flatten_with_path(tree)
        assert with_path == treedef and [leaf for _, leaf in pairs] == leaves


def test_is_leaf_must_return_a_bool_or_none() -> None:
    np = pytest.importorskip("numpy")
    tree = {"a": [1, [2]]}
    assert treekit.tree_leaves(tree, is_leaf=lambda x: None) == [1, 2]
    message = "is_leaf(tree['a'][0]): expected True, False or None, got numpy.bool np.True_"
    numpy_bool = lambda x: np.bool_(True) if type(x) is int else False  # noqa: E731
    for call in (
        lambda: treekit.tree_leaves(tree, is_leaf=numpy_bool),
        lambda: treekit.tree_map(lambda x: x, tree, is_leaf=numpy_bool),
        lambda: treekit.tree_map(lambda x, y: x, tree, tree, is_leaf=numpy_bool),
        lambda: treekit.tree_leaves_with_path(tree, is_leaf=lambda p, x: numpy_bool(x), is_leaf_takes_path=True),
    ):
        with pytest.raises(ValueError) as info:
            call()
        assert str(info.value).split("\n")[0] == message
    with pytest.raises(ValueError, match=r"^is_leaf\(tree\): expected True, False or None, got int 1"):
        treekit.tree_leaves(tree, is_leaf=lambda x: 1)


# -- item 5: tree_transpose ----------------------------------------------------------------------------
def test_transpose_mismatch_is_a_type_error_and_a_structure_mismatch() -> None:
    outer, inner = tree_structure({"a": 0, "b": 0, "c": 0}), tree_structure([0, 0])
    with pytest.raises(TypeError) as info:
        treekit.tree_transpose(outer, inner, {"a": [1, 2], "b": [3, 4]})
    assert isinstance(info.value, treekit.StructureMismatchError) and isinstance(info.value, ValueError)
    assert type(info.value) is treekit.TransposeMismatchError
    assert str(info.value) == (
        "pytree_to_transpose: expected dict with keys ['a', 'b', 'c'], got keys ['a', 'b'] (missing 'c')"
    )
    # same leaf count, other structure: jax only counts leaves, treekit names the place
    with pytest.raises(TypeError, match=re.escape("pytree_to_transpose[0]: expected tuple of length 2, got list")):
        treekit.tree_transpose(tree_structure([0, 0, 0]), tree_structure((0, 0)), [[1, 2], [3, 4], [5, 6]])
    with pytest.raises(TypeError, match=re.escape("pytree_to_transpose[1]: expected a leaf, got list of length 2")):
        treekit.tree_transpose(tree_structure([0, 0]), None, [1, [2, 3]])  # inner: the first subtree, 1


class FlatCache:
    """JAX's test class: one child per leaf of its contents, their structure as node data."""

    def __init__(self, structured: Any, *, leaves: Any = None, treedef: Any = None) -> None:
        if treedef is None:
            leaves, treedef = tree_flatten(structured)
        self._structured, self.treedef, self.leaves = structured, treedef, leaves

    @property
    def structured(self) -> Any:
        if self._structured is None:
            self._structured = tree_unflatten(self.treedef, self.leaves)
        return self._structured

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FlatCache) and self.structured == other.structured

    __hash__ = None  # type: ignore[assignment]

    def tree_flatten(self) -> tuple[Any, Any]:
        return self.leaves, self.treedef

    @classmethod
    def tree_unflatten(cls, treedef: Any, leaves: Any) -> FlatCache:
        if not treekit.all_leaves(leaves):  # children that are trees: flatten them into leaves
            leaves, treedef = tree_flatten(tree_unflatten(treedef, leaves))
        return cls(None, leaves=leaves, treedef=treedef)


def test_a_node_that_reflattens_itself_transposes(registered: Registered) -> None:
    registered(FlatCache, treekit.register_pytree_node_class)
    outer, inner = tree_structure(FlatCache({"a": 1, "b": 2})), tree_structure([0, 0])
    got = treekit.tree_transpose(outer, inner, FlatCache({"a": [3, 4], "b": [5, 6]}))
    assert got == [FlatCache({"a": 3, "b": 5}), FlatCache({"a": 4, "b": 6})]
    for tree in (FlatCache(1), FlatCache({"a": [1, 2]})):
        nested = tree_map(lambda x: [x, x, x], tree)
        assert treekit.tree_transpose(tree_structure(tree), tree_structure([0, 0, 0]), nested) == [tree] * 3
    with pytest.raises(TypeError, match=re.escape("expected FlatCache with 2 children")):  # its leaf count is wrong
        treekit.tree_transpose(outer, inner, FlatCache({"a": [3, 4], "b": [5, 6, 7]}))


# -- item 9: PyTreeDef.walk, from_iterable_tree, from_node_data_and_children; default_registry -------------
def test_walk_folds_leaves_up_the_structure() -> None:
    tree = {"b": [2, None], "a": Point(1, (3,))}
    leaves, treedef = tree_flatten(tree)
    seen: list[Any] = []
    out = treedef.walk(lambda kids, data: seen.append(data) or sum(kids), lambda x: 10 * x, leaves)
    assert out == 60
    assert seen == [None, Point, None, None, ["a", "b"]]  # bottom-up, node data as jax shows it
    assert treedef.walk(lambda kids, data: kids, None, leaves) == ((1, (3,)), (2, ()))
    for wrong in ([1, 2], [1, 2, 3, 4]):
        with pytest.raises(ValueError, match="leaves: expected 3 leaves"):
            treedef.walk(lambda kids, data: None, None, wrong)


def test_from_iterable_tree_rebuilds_each_node_from_its_children(registered: Registered) -> None:
    registered(Box, lambda c: treekit.register_pytree_node(c, lambda b: (b.items, b.tag), lambda t, ch: c(ch, t)))
    treedef = tree_structure([Box((0, 0), "t"), {"b": 0, "a": None}, Point(0, 0)])
    got = treedef.from_iterable_tree([iter([1, 2]), ([], 3), "xy"])
    assert got == [Box((1, 2), "t"), {"a": None, "b": 3}, Point("x", "y")]
    assert tree_structure(0).from_iterable_tree([1, 2]) == [1, 2]
    with pytest.raises(TypeError):
        treedef.from_iterable_tree([5, ([], 3), "xy"])
    with pytest.raises(ValueError, match=re.escape("iterable_tree[1]: expected 2 children for dict")):
        treedef.from_iterable_tree([[1, 2], ([], 3, 4), "xy"])


def test_from_node_data_and_children_inverts_node_data_and_children(registered: Registered) -> None:
    registered(Box, lambda c: treekit.register_pytree_node(c, lambda b: (b.items, b.tag), lambda t, ch: c(ch, t)))
    make = treekit.PyTreeDef.from_node_data_and_children
    registry = treekit.default_registry
    for tree in (
        [1, (2, 3)],
        {"b": 1, "a": [2, 3]},
        Point(1, [2]),
        Box([1, (2,)], ["unhashable tag"]),
        collections.OrderedDict(b=1, a=(2,)),
        collections.defaultdict(list, {"b": 1, "a": (2,)}),
        None,
        1,
    ):
        treedef = tree_structure(tree)
        assert make(registry, treedef.node_data(), treedef.children()) == treedef
    leaf = tree_structure(0)
    # dict keys in any order: each keeps its child
    swapped = make(registry, (dict, ["b", "a"]), [leaf, tree_structure((0,))])
    assert swapped == tree_structure({"a": (0,), "b": 0})
    assert swapped.unflatten([1, 2]) == {"b": 2, "a": (1,)}
    with pytest.raises(ValueError, match=re.escape("node_data: expected 3 distinct keys, one per child")):
        make(registry, (dict, ["a", "b"]), [leaf] * 3)
    with pytest.raises(ValueError, match="node_data: expected a registered node type, got 'int'"):
        make(registry, (int, None), [])
    with pytest.raises(TypeError, match=re.escape("registry: expected treekit.default_registry")):
        make(object(), (list, None), [])
    with pytest.raises(TypeError, match=re.escape("children[0]: expected a TreeDef, got int")):
        make(registry, (list, None), [1])


def test_default_registry_has_jax_registry_methods(registered: Registered) -> None:
    registry = treekit.default_registry
    registered(Box, lambda c: registry.register_node(c, lambda b: (b.items, None), lambda _, ch: c(ch)))
    assert treekit.tree_leaves(Box([1, [2]])) == [1, 2]
    is_tuple = lambda x: type(x) is tuple  # noqa: E731
    assert registry.flatten([1, (2,)], is_tuple) == tree_flatten([1, (2,)], is_tuple)
    pairs, _ = registry.flatten_with_path([1, (2,)], lambda path, x: len(path) == 1)
    assert [(treekit.keystr(p), x) for p, x in pairs] == [("[0]", 1), ("[1]", (2,))]
    assert registry.flatten_one_level(5) is None and registry.flatten_one_level_with_keys(5) is None
    assert registry.flatten_one_level([5]) == ([5], None)
    assert registry.is_node(list) and not registry.is_node(int)

    @dataclasses.dataclass
    class Pair:
        a: Any
        b: Any

    registered(Pair, lambda c: registry.register_dataclass_node(c, ["a"], ["b"]))
    assert tree_flatten(Pair(1, "meta"))[0] == [1]


# -- deliberate differences (docs/migration.md says why) ----------------------------------------------
def test_deliberate_dicts_rebuild_in_input_key_order() -> None:
    tree = {"b": 2, "a": 1, "c": {"b": 2, "a": 1}}
    leaves, treedef = tree_flatten(tree)
    assert leaves == [1, 2, 1, 2]  # leaf order is sorted, as in jax
    assert repr(treedef) == "PyTreeDef({'a': *, 'b': *, 'c': {'a': *, 'b': *}})"
    rebuilt = tree_unflatten(treedef, leaves)
    assert list(rebuilt) == ["b", "a", "c"] and list(rebuilt["c"]) == ["b", "a"]  # jax: sorted
    default = collections.defaultdict(int, tree)
    assert list(tree_unflatten(*reversed(tree_flatten(default)))) == ["b", "a", "c"]


def test_deliberate_mixed_type_keys_are_ordered_by_type() -> None:
    # jax raises "Comparator raised exception while sorting pytree dictionary keys."
    assert treekit.tree_leaves({"a": "str", 2: "int"}) == ["int", "str"]


def test_deliberate_no_proto_serialization_but_pickle() -> None:
    import pickle

    treedef = tree_structure([1, [2], (3,), {"a": 4, "b": 5}])
    assert not hasattr(treedef, "serialize_using_proto")
    assert pickle.loads(pickle.dumps(treedef)) == treedef


def test_deliberate_register_dataclass_takes_one_name_as_a_string(registered: Any) -> None:
    # docs/migration.md, "Smaller differences": a string is one name, not its characters.
    @dataclasses.dataclass
    class Norm:
        scale: float
        cache: Any = None

    registered(Norm, lambda c: treekit.register_dataclass(c, drop_fields="cache"))
    leaves, treedef = treekit.tree_flatten(Norm(2.0, cache="stale"))
    assert leaves == [2.0] and treedef.unflatten([3.0]) == Norm(3.0)

    @dataclasses.dataclass
    class Pair:
        w: float
        tag: str
        z: Any = None

    registered(Pair, lambda c: treekit.register_dataclass(c, data_fields="w", meta_fields="tag", drop_fields="z"))
    assert treekit.tree_leaves(Pair(1.0, "a", 5)) == [1.0]

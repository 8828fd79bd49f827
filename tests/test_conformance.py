"""What code written for ``jax.tree_util`` relies on, checked on treekit (issue 12).

The cases come from running JAX's own ``tests/tree_util_test.py`` (jax 0.10.2) against treekit
and from the issue's numbered items; they are written here in our own words. Deliberate
differences are pinned in ``test_deliberate_*`` and explained in docs/migration.md.
"""

from __future__ import annotations

import collections
import dataclasses
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

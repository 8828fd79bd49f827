"""Test trees as records: ``Case(name, tree, leaves, treedef_repr, keystrs)``, one per tree.

The custom node types below are plain classes; ``case_types()`` registers them for the length
of a ``with`` block (the ``case_types`` fixture in conftest.py) so that no test leaks them.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import treekit
from treekit.core._registry import remove_type


class Pair:
    """A node registered without keys (its key entries are FlattenedIndexKey)."""

    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b

    def __eq__(self, other: object) -> bool:
        return type(other) is Pair and (self.a, self.b) == (other.a, other.b)

    def __hash__(self) -> int:
        return hash((self.a, self.b))

    def __repr__(self) -> str:
        return f"Pair({self.a!r}, {self.b!r})"


def _flatten_pair(p: Pair) -> tuple[tuple[Any, Any], None]:
    return (p.a, p.b), None


def _unflatten_pair(_: None, children: Any) -> Pair:
    return Pair(*children)


class Point:
    """A node registered with keys (``.x``, ``.y``) and node data (its ``label``)."""

    def __init__(self, x: Any, y: Any, label: str = "p") -> None:
        self.x, self.y, self.label = x, y, label

    def tree_flatten_with_keys(self) -> tuple[Any, str]:
        return ((treekit.GetAttrKey("x"), self.x), (treekit.GetAttrKey("y"), self.y)), self.label

    def tree_flatten(self) -> tuple[Any, str]:
        return (self.x, self.y), self.label

    @classmethod
    def tree_unflatten(cls, label: str, children: Any) -> Point:
        return cls(*children, label=label)

    def __eq__(self, other: object) -> bool:
        return type(other) is Point and (self.x, self.y, self.label) == (other.x, other.y, other.label)

    def __hash__(self) -> int:
        return hash((self.x, self.y, self.label))

    def __repr__(self) -> str:
        return f"Point({self.x!r}, {self.y!r}, label={self.label!r})"


@dataclasses.dataclass
class Layer:
    """A dataclass node: ``w`` and ``b`` are children, ``act`` (static) goes to the treedef."""

    w: Any
    b: Any
    act: str = treekit.static(default="relu")


class Tag(str):
    """A static node: no children, the instance itself is node data."""

    __slots__ = ()


class NT(NamedTuple):
    """A namedtuple (a node without registration)."""

    x: Any
    y: Any


ATuple = collections.namedtuple("ATuple", ("name",))


# The registrations ``case_types()`` makes, as (class, register function) pairs.
REGISTRATIONS: list[tuple[type, Callable[[type], Any]]] = [
    (Pair, lambda cls: treekit.register_pytree_node(cls, _flatten_pair, _unflatten_pair)),
    (Point, treekit.register_pytree_with_keys_class),
    (Layer, treekit.register_dataclass),
    (Tag, treekit.register_static),
]


@contextlib.contextmanager
def case_types() -> Iterator[None]:
    """Register the custom node types above; unregister them on exit."""
    done: list[type] = []
    try:
        for cls, register in REGISTRATIONS:
            register(cls)
            done.append(cls)
        yield
    finally:
        for cls in done:
            remove_type(cls)


@dataclasses.dataclass(frozen=True)
class Case:
    """One test tree and what treekit (and jax, for built-in nodes) says about it."""

    name: str
    tree: Any
    leaves: list[Any]
    treedef_repr: str
    keystrs: list[str]


OBJ = object()
_DD = collections.defaultdict(list, {"b": 1, "a": [2]})

CASES: list[Case] = [
    Case("int_leaf", 1, [1], "PyTreeDef(*)", [""]),
    Case("str_leaf", "abc", ["abc"], "PyTreeDef(*)", [""]),
    Case("object_leaf", OBJ, [OBJ], "PyTreeDef(*)", [""]),
    Case("none", None, [], "PyTreeDef(None)", []),
    Case("empty_list", [], [], "PyTreeDef([])", []),
    Case("empty_tuple", (), [], "PyTreeDef(())", []),
    Case("empty_dict", {}, [], "PyTreeDef({})", []),
    Case("list", [1, "a", OBJ], [1, "a", OBJ], "PyTreeDef([*, *, *])", ["[0]", "[1]", "[2]"]),
    Case("tuple_of_one", (1,), [1], "PyTreeDef((*,))", ["[0]"]),
    Case("tuple", (1, (2, 3), ()), [1, 2, 3], "PyTreeDef((*, (*, *), ()))", ["[0]", "[1][0]", "[1][1]"]),
    Case(
        "dict_sorted",
        {"a": 2, "b": (2, 3)},
        [2, 2, 3],
        "PyTreeDef({'a': *, 'b': (*, *)})",
        ["['a']", "['b'][0]", "['b'][1]"],
    ),
    Case(
        "dict_insertion_order_not_sorted",
        {"c": 1, "a": 2, "b": 3},
        [2, 3, 1],
        "PyTreeDef({'a': *, 'b': *, 'c': *})",
        ["['a']", "['b']", "['c']"],
    ),
    Case(
        "dict_int_keys",
        {2: "x", 1: "y", 10: "z"},
        ["y", "x", "z"],
        "PyTreeDef({1: *, 2: *, 10: *})",
        ["[1]", "[2]", "[10]"],
    ),
    # treekit only (jax raises): keys that do not compare are grouped by type name, int before str.
    Case("dict_mixed_keys", {"a": "x", 1: "y"}, ["y", "x"], "PyTreeDef({1: *, 'a': *})", ["[1]", "['a']"]),
    Case("namedtuple", NT(1, [2]), [1, 2], "PyTreeDef(CustomNode(namedtuple[NT], [*, [*]]))", [".x", ".y[0]"]),
    Case(
        "namedtuple_nested",
        NT(NT(1, 2), ATuple("foo")),
        [1, 2, "foo"],
        "PyTreeDef(CustomNode(namedtuple[NT], "
        "[CustomNode(namedtuple[NT], [*, *]), CustomNode(namedtuple[ATuple], [*])]))",
        [".x.x", ".x.y", ".y.name"],
    ),
    Case(
        "ordereddict_keeps_order",
        collections.OrderedDict([("b", 1), ("a", 2)]),
        [1, 2],
        "PyTreeDef(CustomNode(OrderedDict[('b', 'a')], [*, *]))",
        ["['b']", "['a']"],
    ),
    Case(
        "defaultdict",
        _DD,
        [2, 1],
        "PyTreeDef(CustomNode(defaultdict[(<class 'list'>, ('a', 'b'))], [[*], *]))",
        ["['a'][0]", "['b']"],
    ),
    Case(
        "none_inside_containers",
        [None, {"a": None, "b": 1}, (None,)],
        [1],
        "PyTreeDef([None, {'a': None, 'b': *}, (None,)])",
        ["[1]['b']"],
    ),
    Case("empty_containers_inside", [[], (), {}, None], [], "PyTreeDef([[], (), {}, None])", []),
    Case("nested_lists", [[[[1]]], [2]], [1, 2], "PyTreeDef([[[[*]]], [*]])", ["[0][0][0][0]", "[1][0]"]),
    Case(
        "tutorial_key_paths",
        [1, {"k1": 2, "k2": (3, 4)}, ATuple("foo")],
        [1, 2, 3, 4, "foo"],
        "PyTreeDef([*, {'k1': *, 'k2': (*, *)}, CustomNode(namedtuple[ATuple], [*])])",
        ["[0]", "[1]['k1']", "[1]['k2'][0]", "[1]['k2'][1]", "[2].name"],
    ),
    Case(
        "mixed",
        {"layers": [{"w": 1, "b": 2}, NT(3, None)], "step": (4,)},
        [2, 1, 3, 4],
        "PyTreeDef({'layers': [{'b': *, 'w': *}, CustomNode(namedtuple[NT], [*, None])], 'step': (*,)})",
        ["['layers'][0]['b']", "['layers'][0]['w']", "['layers'][1].x", "['step'][0]"],
    ),
    Case(
        "partial",
        treekit.Partial(pow, 2, mod=5),
        [2, 5],
        "PyTreeDef(CustomNode(Partial[<built-in function pow>], [(*,), {'mod': *}]))",
        ["[<flat index 0>][0]", "[<flat index 1>]['mod']"],
    ),
    Case(
        "custom_without_keys",
        [Pair(1, [2, 3])],
        [1, 2, 3],
        "PyTreeDef([CustomNode(Pair[None], [*, [*, *]])])",
        ["[0][<flat index 0>]", "[0][<flat index 1>][0]", "[0][<flat index 1>][1]"],
    ),
    Case(
        "custom_with_keys",
        {"p": Point(1, (2,), label="q")},
        [1, 2],
        "PyTreeDef({'p': CustomNode(Point[q], [*, (*,)])})",
        ["['p'].x", "['p'].y[0]"],
    ),
    Case(
        "dataclass_with_static_field",
        [Layer(w=1, b=None, act="tanh")],
        [1],
        "PyTreeDef([CustomNode(Layer[('tanh',)], [*, None])])",
        ["[0].w"],
    ),
    Case("static", [1, Tag("relu")], [1], "PyTreeDef([*, CustomNode(Tag[relu], [])])", ["[0]"]),
    Case(
        "custom_nested_in_custom",
        Pair(Point(1, 2), Layer(3, [4])),
        [1, 2, 3, 4],
        "PyTreeDef(CustomNode(Pair[None], [CustomNode(Point[p], [*, *]), CustomNode(Layer[('relu',)], [*, [*]])]))",
        ["[<flat index 0>].x", "[<flat index 0>].y", "[<flat index 1>].w", "[<flat index 1>].b[0]"],
    ),
]

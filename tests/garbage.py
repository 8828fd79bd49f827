"""Hostile inputs for tests/test_fuzz.py: trees and arguments built from hypothesis draws.

Everything is built inside the example from primitive draws (numbers, names), so that
hypothesis never shows (or reprs) a hostile object, and every class registered for one
example is unregistered after it (``Garbage.close``). User code here only ever raises
:class:`Boom`, so any other exception class that comes out of treekit is treekit's own.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from hypothesis import strategies as st

import treekit
from treekit.core._registry import remove_type


class Boom(Exception):
    """The one exception class user code in these tests raises."""


def explode(*args: Any, **kwargs: Any) -> Any:
    raise Boom("user code raised on purpose")


# -- hostile objects: dunder methods that raise ------------------------------------------------
DUNDERS = ("__eq__", "__hash__", "__repr__", "__str__", "__lt__", "__bool__", "__len__", "__iter__", "__getattr__")
_ARMED = [False]  # exploding keys behave until the tree holding them is built


def hostile_class(methods: frozenset[str]) -> type:
    """A class whose listed dunders raise :class:`Boom` (``__getattr__``: any missing attribute)."""
    return type("Hostile", (), {m: explode for m in methods})


def _armed(name: str, normal: Callable[..., Any]) -> Callable[..., Any]:
    def method(self: Any, *args: Any) -> Any:
        if _ARMED[0]:
            raise Boom(f"key {name} raised on purpose")
        return normal(self, *args)

    return method


def key_class(methods: frozenset[str]) -> type:
    """Dict keys that hash and compare normally until armed, then raise in ``methods``."""
    normal: dict[str, Callable[..., Any]] = {
        "__hash__": lambda self: hash(self.v),
        "__eq__": lambda self, other: type(other) is type(self) and self.v == other.v,
        "__lt__": lambda self, other: self.v < other.v if type(other) is type(self) else NotImplemented,
        "__repr__": lambda self: f"K({self.v})",
    }
    body: dict[str, Any] = {"__init__": lambda self, v: setattr(self, "v", v)}
    body.update({name: (_armed(name, f) if name in methods else f) for name, f in normal.items()})
    return type("ExplodingKey", (), body)


class NT(NamedTuple):
    a: Any
    b: Any


@dataclasses.dataclass
class DC:
    x: Any
    y: Any
    tag: str = treekit.static(default="t")


class KeyedBox:
    def __init__(self, *children: Any) -> None:
        self.children = list(children)


# -- how a registered class's functions misbehave ------------------------------------------------
BEHAVIOURS = (
    "ok",
    "raises",
    "not_a_pair",
    "triple",
    "none",
    "non_iterable_children",
    "generator_children",
    "fresh_forever",
    "mutates_parent",
    "mutates_own",
    "unhashable_data",
    "hostile_data",
    "array_data",
    "registers",
    "grows",
    "keys_not_pairs",
    "keys_hostile",
    "keys_short",
    "unflatten_raises",
    "unflatten_garbage",
    "unflatten_wrong_arity",
)


class Garbage:
    """One example's inputs: a tree of the drawn class and whatever arguments a call needs."""

    def __init__(self, data: st.DataObject, kind: str, deep: int) -> None:
        self.data = data
        self.kind = kind
        self.deep = deep
        self.registered: list[type] = []
        self.stable = True  # the tree flattens the same way every time (native vs pure)
        self.honest = True  # no registered function misbehaves (plain vs with-path walks)
        self.parents: list[list[Any]] = []
        self.tree = self.make_tree()
        _ARMED[0] = kind == "keys"

    # -- bookkeeping ----------------------------------------------------------------------
    def draw(self, strategy: st.SearchStrategy[Any]) -> Any:
        return self.data.draw(strategy)

    def pick(self, *options: Any) -> Any:
        return options[self.draw(st.integers(0, len(options) - 1))]

    def register(self, cls: type, how: Callable[[type], Any]) -> type:
        self.registered.append(cls)
        how(cls)
        return cls

    def close(self) -> None:
        _ARMED[0] = False
        for cls in self.registered:
            try:
                remove_type(cls)
            except KeyError:  # a registration the example made that failed
                pass

    # -- trees ----------------------------------------------------------------------------
    def make_tree(self) -> Any:
        kind = self.kind
        if kind == "deep":
            return self.deep_tree()
        if kind == "cycles":
            return self.cycle_tree()
        return self.subtree(3)

    def leaf(self) -> Any:
        kind = self.kind
        choice = self.draw(st.integers(0, 9))
        if kind == "objects" and choice < 5:
            return hostile_class(self.draw(st.frozensets(st.sampled_from(DUNDERS))))()
        if kind == "numpy" and choice < 6:
            return self.array()
        if kind == "empty" and choice < 5:
            return self.pick(None, [], (), {}, collections.OrderedDict(), NT((), None), [[], {}])
        return self.pick(0, 1, -2.5, float("nan"), float("inf"), 2**70, "s", b"b", True, 1j, object(), None)

    def array(self) -> Any:
        shape = self.pick((), (0,), (2,), (2, 3), (1, 0, 2))
        dtype = self.pick(np.float32, np.float64, np.int32, np.int64, np.bool_, np.complex64, object, "U2")
        value = np.zeros(shape, dtype=dtype)
        if value.dtype.kind == "f" and value.size:
            value.flat[0] = self.pick(np.nan, np.inf, 1.5)
        return self.pick(value, value, np.float32(1.5), np.int64(3), np.zeros((2,), [("a", "f4")]))

    def dict_key(self, i: int) -> Any:
        if self.kind == "keys":
            pick = self.draw(st.integers(0, 6))
            if pick < 4:
                methods = self.draw(st.frozensets(st.sampled_from(("__hash__", "__eq__", "__lt__", "__repr__"))))
                return key_class(methods)(i)
            return self.pick(i, str(i), (i,), None, float("nan"), frozenset([i]), 1.0 * i)
        return self.pick(str(i), i, "k" + str(i))

    def subtree(self, depth: int) -> Any:
        if depth <= 0 or self.draw(st.integers(0, 3)) == 0:
            return self.leaf()
        n = self.draw(st.integers(0, 3))
        kids = [self.subtree(depth - 1) for _ in range(n)]
        node = self.draw(st.integers(0, 9))
        if node == 0:
            return tuple(kids)
        if node in (1, 2):
            return {self.dict_key(i): kid for i, kid in enumerate(kids)}
        if node == 3:
            return NT(kids[0] if kids else None, kids[1] if n > 1 else None)
        if node == 4:
            return collections.OrderedDict((self.dict_key(i), kid) for i, kid in enumerate(kids))
        if node == 5 and self.kind in ("flatten", "registered", "objects", "keys", "empty", "numpy"):
            return self.custom(kids)
        if node == 6:
            return collections.defaultdict(list, {self.dict_key(i): kid for i, kid in enumerate(kids)})
        if node == 7 and self.kind in ("registered", "empty", "numpy"):
            return self.pick(DC(*[*kids, None, None][:2]), treekit.Partial(len, *kids))
        out = list(kids)
        self.parents.append(out)
        return out

    def deep_tree(self) -> Any:
        depth = self.deep
        how = self.draw(st.integers(0, 4))
        tree: Any = self.leaf()
        if how == 4:  # a registered node at every level
            cls = self.register(type("Chain", (), {}), self._good_registration)
            for _ in range(depth):
                node = cls()
                node.children = [tree]
                tree = node
            return tree
        for i in range(depth):
            tree = ([tree], (i, tree), {"k": tree, "a": 1}, NT(tree, None))[how]
        return tree

    def cycle_tree(self) -> Any:
        inner = self.subtree(2)
        how = self.draw(st.integers(0, 4))
        if how == 0:
            node: Any = [inner]
            node.insert(self.draw(st.integers(0, 1)), node)
        elif how == 1:
            node = {"b": inner}
            node[self.pick("a", "c")] = node
        elif how == 2:  # a wide container holding itself first
            node = [None] + [inner] * self.draw(st.integers(1, 100))
            node[0] = node
        elif how == 3:  # through a registered node
            cls = self.register(type("Loop", (), {}), self._good_registration)
            node = cls()
            node.children = [inner, [node]]
        else:  # lower down
            node = [inner, {"x": [inner]}]
            node[1]["x"].append(node)
        return self.pick(node, [0, node], {"top": (node,)})

    def _good_registration(self, cls: type) -> None:
        treekit.register_pytree_node(cls, lambda n: (n.children, None), lambda d, c, cls=cls: _made(cls, c))

    # -- registered classes, well or badly behaved -------------------------------------------
    def custom(self, kids: list[Any]) -> Any:
        behaviour = "ok" if self.kind != "flatten" else self.draw(st.sampled_from(BEHAVIOURS))
        if behaviour not in ("ok", "raises", "not_a_pair", "triple", "none", "non_iterable_children"):
            self.stable = False
        if behaviour != "ok":
            self.honest = False
        cls = type("Odd", (), {})
        node = cls()
        node.children = kids
        flatten, unflatten, with_keys = self.functions(behaviour, cls)
        how = self.draw(st.integers(0, 3))
        if how == 0 or with_keys is None:
            self.register(cls, lambda c: treekit.register_pytree_node(c, flatten, unflatten))
        elif how == 1:
            self.register(cls, lambda c: treekit.register_pytree_with_keys(c, with_keys, unflatten))
        elif how == 2:
            self.register(cls, lambda c: treekit.register_pytree_with_keys(c, with_keys, unflatten, flatten))
        else:
            self.register(cls, lambda c: treekit.register_pytree_node(c, flatten, unflatten, with_keys))
        return node

    def functions(self, behaviour: str, cls: type) -> tuple[Any, Any, Any]:
        parents = self.parents
        calls = itertools.count()

        def flatten(n: Any) -> Any:
            b = behaviour
            if b == "raises":
                raise Boom("flatten raised on purpose")
            if b == "not_a_pair":
                return n.children
            if b == "triple":
                return n.children, None, None
            if b == "none":
                return None
            if b == "non_iterable_children":
                return 5, None
            if b == "generator_children":
                return (c for c in n.children), None
            if b == "fresh_forever":
                fresh = cls()
                fresh.children = []
                return [fresh], None
            if b == "mutates_parent":
                for parent in parents:
                    parent.clear()
                return n.children, None
            if b == "mutates_own":
                out = n.children
                n.children = out[:-1]
                return out, None
            if b == "unhashable_data":
                return n.children, [1]
            if b == "hostile_data":
                return n.children, hostile_class(frozenset(("__eq__", "__hash__", "__repr__")))()
            if b == "array_data":
                return n.children, np.arange(3)
            if b == "registers":
                treekit.register_pytree_node(type("Fresh", (), {}), lambda x: ((), None), lambda d, c: None)
                return n.children, None
            if b == "grows":  # one more child each call
                return [*n.children, *range(next(calls))], None
            return n.children, None

        def with_keys(n: Any) -> Any:
            children, data = flatten(n) if behaviour in ("ok", "grows", "mutates_own") else (n.children, None)
            children = list(children)
            if behaviour == "keys_not_pairs":
                return children, data
            if behaviour == "keys_hostile":
                return [(hostile_class(frozenset(("__repr__", "__str__", "__hash__")))(), c) for c in children], data
            if behaviour == "keys_short":
                return [(treekit.GetAttrKey("k"), c) for c in children][1:], data
            return [(treekit.GetAttrKey(f"c{i}"), c) for i, c in enumerate(children)], data

        def unflatten(data: Any, children: Any) -> Any:
            if behaviour == "unflatten_raises":
                raise Boom("unflatten raised on purpose")
            if behaviour == "unflatten_garbage":
                return self.pick(None, 1, [1, 2], object())
            if behaviour == "unflatten_wrong_arity":
                return _made(cls, list(children)[1:])
            return _made(cls, children)

        keyed = behaviour.startswith("keys_") or self.draw(st.booleans())
        return flatten, unflatten, with_keys if keyed else None

    # -- arguments --------------------------------------------------------------------------
    def other(self) -> Any:
        """A second tree: the same one, a copy with new leaves, another of this class, or garbage."""
        pick = self.draw(st.integers(0, 5))
        if pick <= 1:
            return self.tree
        if pick == 2:
            try:
                return treekit.tree_map(lambda x: x, self.tree)
            except Exception:
                return self.tree
        if pick == 3:
            return self.subtree(2)
        return self.pick({"a": 1.0}, [1.0, 2.0], None, np.ones(2), object(), 3)

    def f(self) -> Callable[..., Any]:
        return self.pick(
            lambda *a, **k: a[0] if a else None,
            lambda *a, **k: a[-1] if a else None,
            explode,
            lambda *a, **k: hostile_class(frozenset(DUNDERS))(),
            lambda *a, **k: None,
            lambda *a, **k: [a],
            None,
            1,
            "f",
        )

    def is_leaf_kw(self) -> dict[str, Any]:
        pick = self.draw(st.integers(0, 7))
        if pick < 3:
            return {}
        return {
            "is_leaf": self.pick(
                lambda *a: a[-1] is None,
                lambda *a: isinstance(a[-1], (list, np.ndarray)),
                explode,
                lambda *a: hostile_class(frozenset(("__bool__",)))(),
                "not callable",
            )
        }

    def scalar(self) -> Any:
        return self.pick(0.5, 0, -1, 2, float("nan"), np.float32(2), np.ones(2), None, "s", object(), [1.0])

    def value(self) -> Any:
        return self.pick(self.scalar(), self.leaf(), self.tree, hostile_class(frozenset(DUNDERS))(), int, np.int32)

    def treedef(self) -> Any:
        pick = self.draw(st.integers(0, 3))
        if pick <= 1:
            try:
                return treekit.tree_structure(self.tree if pick == 0 else self.other())
            except Exception:
                pass
        return self.pick(None, [1], "*", treekit.tree_structure([1, (2, 3)]), object())

    def leaves(self) -> Any:
        try:
            leaves = treekit.tree_leaves(self.tree)
        except Exception:
            leaves = [1]
        return self.pick(leaves, leaves[1:], [*leaves, 0], iter(leaves), None, 5, "abc")

    def path(self) -> Any:
        try:
            paths = [p for p, _ in treekit.tree_leaves_with_path(self.tree)]
        except Exception:
            paths = []
        if paths and self.draw(st.booleans()):
            path = paths[self.draw(st.integers(0, len(paths) - 1))]
            return self.pick(path, treekit.keystr(path) if self.kind != "keys" else path, path[:-1] or path)
        return self.pick(
            (), "", "a", "a/0", "['a'][0]", ("a", 0), [-1], 0, None, (treekit.DictKey("a"),),
            (hostile_class(frozenset(DUNDERS))(),), object(), "[", "a//b", (treekit.SequenceKey(99),),
        )

    def sep(self) -> Any:
        return self.pick("/", ".", None, "", 0, hostile_class(frozenset(DUNDERS))())

    def dtype(self) -> Any:
        return self.pick(None, np.float32, "float16", "int8", bool, "nonsense", object(), 3)

    def rng(self) -> Any:
        return self.pick(0, 1, -1, None, np.random.default_rng(0), "seed", 1.5, object())

    def keypath(self) -> Any:
        return self.pick(
            (), (treekit.DictKey("a"), treekit.SequenceKey(1), treekit.GetAttrKey("x"), treekit.FlattenedIndexKey(2)),
            (treekit.DictKey(hostile_class(frozenset(DUNDERS))()),), (hostile_class(frozenset(DUNDERS))(),),
            ("plain", 1), None, "abc", 5, [treekit.DictKey(self.dict_key(0))], self.path(),
        )

    def shapes_like(self) -> Any:
        try:
            return treekit.tree_map(lambda x: getattr(x, "shape", ()), self.tree)
        except Exception:
            return self.other()

    def spec(self) -> Any:
        try:
            specs = [treekit.tree_spec(self.tree), self.other(), {"x": treekit.ShapeDtype(("b", 3), "f32")}]
            return self.pick(*specs, {"x": treekit.ANY, "y": [treekit.NON_ARRAY]})
        except Exception:
            return self.other()


def _made(cls: type, children: Any) -> Any:
    node = cls()
    node.children = list(children)
    return node

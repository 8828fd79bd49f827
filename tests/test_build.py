"""TreeDef's compiled builders: the same trees as the interpreted build, for every equal structure."""

from __future__ import annotations

import collections
import dataclasses
import pickle
from collections.abc import Iterator
from typing import Any

import pytest

import treekit
from treekit.core import _build, _treedef

Point = collections.namedtuple("Point", "x y")


class Box:
    def __init__(self, *children: Any, tag: str = "t") -> None:
        self.children, self.tag = list(children), tag

    def __eq__(self, other: object) -> bool:
        return type(other) is Box and (self.children, self.tag) == (other.children, other.tag)

    def __repr__(self) -> str:
        return f"Box({self.children!r}, tag={self.tag!r})"


@pytest.fixture(autouse=True)
def compile_at_once(monkeypatch: pytest.MonkeyPatch, registered: Any) -> Iterator[None]:
    """Compile every structure on its first build; register Box. The pure core's builders are
    under test here, whichever core is in use (tests/test_native.py tests the C one)."""
    monkeypatch.setattr(_treedef, "NATIVE", None)
    monkeypatch.setattr(_build, "_COMPILE_AT", 1)
    monkeypatch.setattr(_build, "_BUILDERS", {})
    registered(Box, lambda cls: treekit.register_pytree_node(cls, lambda b: (b.children, b.tag), _box))
    yield


def _box(tag: str, children: list[Any]) -> Box:
    return Box(*children, tag=tag)


@dataclasses.dataclass
class Case:
    name: str
    tree: Any


def _deep(depth: int) -> Any:
    tree: Any = [0]
    for i in range(depth):
        tree = [i, tree]
    return tree


CASES = [
    Case("leaf", 1),
    Case("empty list", []),
    Case("none", None),
    Case("mlp", [{"b": 1, "w": 2}, {"b": 3, "w": 4}]),
    Case("dict insertion order", {"w": 1, "b": (2, None), "a": {}}),
    Case("mixed key types", {"a": 1, 2: [3], (0,): 4}),
    Case("bool and int keys", {True: 1, "x": [2]}),
    Case("wide list", list(range(20))),
    Case("wide tuple and namedtuple", (tuple(range(10)), Point(1, [2]), Point(*range(2)))),
    Case("wide dict", {f"k{i}": i for i in range(15, 0, -1)}),
    Case("wide node with an empty child", [1, 2, 3, 4, 5, 6, 7, None, 8]),
    Case("ordered and default dicts", [collections.OrderedDict(b=1, a=2), collections.defaultdict(list, z=1, a=2)]),
    Case("custom nodes", [Box(1, Box(), tag="p"), Box(*range(9))]),
    Case("300 deep (beyond the compiler's nesting limit)", _deep(300)),
]


def _rebuilt(tree: Any) -> tuple[Any, Any]:
    leaves, treedef = treekit.tree_flatten(tree)
    new = [(x,) for x in leaves]
    return treedef.unflatten(new), _build.interpret(treedef._nodes, new)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_compiled_build_equals_interpreted(case: Case) -> None:
    compiled, interpreted = _rebuilt(case.tree)
    assert repr(compiled) == repr(interpreted)
    assert treekit.tree_structure(compiled) == treekit.tree_structure(interpreted)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_checked_records_build_as_the_walked_ones(case: Case) -> None:
    # TreeDef(records) and unpickling check the records; what they make builds the same trees
    treedef = treekit.tree_structure(case.tree)
    leaves = [(x,) for x in treekit.tree_leaves(case.tree)]
    expected = repr(treedef.unflatten(leaves))
    for again in (treekit.TreeDef(list(treedef._nodes)), pickle.loads(pickle.dumps(treedef))):
        assert repr(again.unflatten(leaves)) == expected
        assert repr(_build.interpret(again._nodes, leaves)) == expected


def test_builder_is_compiled_and_shared_by_equal_structures() -> None:
    a = treekit.tree_structure({"b": 1, "a": [2]})
    b = treekit.tree_structure({"a": [1], "b": 2})
    assert a == b
    assert repr(a.unflatten([1, 2])) == "{'b': 2, 'a': [1]}"
    assert repr(b.unflatten([1, 2])) == "{'a': [1], 'b': 2}"
    assert a._builder is not None and a._builder is b._builder


def test_equal_keys_of_other_types_are_kept() -> None:
    one, true = treekit.tree_structure({1: 0, "x": 0}), treekit.tree_structure({True: 0, "x": 0})
    assert one == true
    assert [type(k) for k in one.unflatten([0, 0])] == [int, str]
    assert [type(k) for k in true.unflatten([0, 0])] == [bool, str]


def test_raising_unflatten_is_reported_as_when_interpreted(registered: Any) -> None:
    class Fragile:
        pass

    def unflatten(data: str, children: list[Any]) -> Fragile:
        raise TypeError("boom")

    registered(Fragile, lambda cls: treekit.register_pytree_node(cls, lambda f: ((1,), "p"), unflatten))
    treedef = treekit.tree_structure([Fragile()])
    note = f"raised by the unflatten function registered for {Fragile.__qualname__} (node data 'p', 1 child)"
    for _ in range(2):  # compiled, then again with the builder the treedef keeps
        with pytest.raises(TypeError) as info:
            treedef.unflatten([1])
        assert str(info.value).split("\n")[0] == "boom"
        assert info.value.__notes__[-1] == note
    assert treedef._builder is not None


def test_unhashable_node_data_builds_without_compiling(registered: Any) -> None:
    class Holder:
        def __init__(self, data: list[int], child: Any) -> None:
            self.data, self.child = data, child

    registered(
        Holder, lambda cls: treekit.register_pytree_node(cls, lambda h: ((h.child,), h.data), lambda d, c: cls(d, *c))
    )
    treedef = treekit.tree_structure(Holder([1], 2))
    assert treedef.unflatten([3]).child == 3
    assert treedef._builder is _build.interpret


@pytest.mark.parametrize("limit", ["_MAX_COMPILED_NODES"])
def test_big_structures_stay_interpreted(monkeypatch: pytest.MonkeyPatch, limit: str) -> None:
    monkeypatch.setattr(_build, limit, 3)
    treedef = treekit.tree_structure([1, 2, 3])
    for _ in range(_build._COMPILE_AT + 1):
        assert treedef.unflatten("abc") == ["a", "b", "c"]
    assert treedef._builder is _build.interpret

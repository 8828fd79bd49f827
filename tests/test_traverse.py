"""The building walker (treekit.core._traverse.flatten) on every case, is_leaf, key paths and dict order."""

from __future__ import annotations

from typing import Any

import pytest
from cases import CASES, NT, Case, Pair, Point
from hypothesis import given
from strategies import trees

import treekit
from treekit.core._traverse import LeafPaths, flatten

pytestmark = pytest.mark.usefixtures("case_types")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_leaves_are_the_same_objects_in_order(case: Case) -> None:
    leaves = treekit.tree_leaves(case.tree)
    assert len(leaves) == len(case.leaves)
    assert all(a is b for a, b in zip(leaves, case.leaves))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_treedef_repr(case: Case) -> None:
    assert repr(treekit.tree_structure(case.tree)) == case.treedef_repr


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_key_paths(case: Case) -> None:
    pairs = treekit.tree_leaves_with_path(case.tree)
    assert [treekit.keystr(path) for path, _ in pairs] == case.keystrs
    assert all(a is b for (_, a), b in zip(pairs, case.leaves))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_plain_and_path_walks_agree(case: Case) -> None:
    leaves, treedef, paths = flatten(case.tree)
    path_leaves, path_treedef, path_paths = flatten(case.tree, with_path=True)
    assert paths is None
    assert path_paths is not None and len(path_paths) == len(leaves)
    assert path_treedef == treedef
    assert all(a is b for a, b in zip(leaves, path_leaves))
    pairs, treedef2 = treekit.tree_flatten_with_path(case.tree)
    assert treedef2 == treedef and [p for p, _ in pairs] == path_paths


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_unflatten_rebuilds_the_tree(case: Case) -> None:
    leaves, treedef = treekit.tree_flatten(case.tree)
    rebuilt = treekit.tree_unflatten(treedef, leaves)
    # repr pins types, dict key order and node data; the leaves are the same objects.
    assert repr(rebuilt) == repr(case.tree)
    assert type(rebuilt) is type(case.tree)
    assert treekit.tree_structure(rebuilt) == treedef
    assert all(a is b for a, b in zip(treekit.tree_leaves(rebuilt), case.leaves))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_counts(case: Case) -> None:
    treedef = treekit.tree_structure(case.tree)
    assert treedef.num_leaves == len(case.leaves)
    assert treedef.num_nodes == case.treedef_repr.count("*") + _inner_nodes(case.tree)


def _inner_nodes(tree: Any) -> int:
    """Nodes that are not leaves, counted by flattening one level at a time (a second walker, tests only)."""
    if not treekit.is_tree_node(type(tree)):
        return 0
    children, _ = treekit.flatten_one_level(tree)
    return 1 + sum(_inner_nodes(c) for c in children)


def test_dict_leaves_are_sorted_but_unflatten_keeps_insertion_order() -> None:
    tree = {"b": 1, "a": 2, "c": {"z": 3, "y": 4}}
    leaves, treedef = treekit.tree_flatten(tree)
    assert leaves == [2, 1, 4, 3]
    rebuilt = treedef.unflatten(["A", "B", "Y", "Z"])
    assert list(rebuilt) == ["b", "a", "c"] and list(rebuilt["c"]) == ["z", "y"]
    assert rebuilt == {"b": "B", "a": "A", "c": {"z": "Z", "y": "Y"}}


def test_dicts_with_the_same_keys_in_another_order_have_equal_treedefs() -> None:
    a, b = treekit.tree_structure({"a": 1, "b": 2}), treekit.tree_structure({"b": 1, "a": 2})
    assert a == b and hash(a) == hash(b)
    assert list(b.unflatten([0, 0])) == ["b", "a"]


@pytest.mark.parametrize(
    ("tree", "leaves"),
    [
        ({"a": "x", 1: "y"}, ["y", "x"]),
        ({"b": 0, 2: 1, "a": 2, 1: 3}, [3, 1, 2, 0]),
        ({(0,): "t", 1: "i", "s": "s"}, ["i", "s", "t"]),
        ({None: "n", 1: "i"}, ["n", "i"]),  # by type name: "NoneType" sorts before "int"
    ],
)
def test_mixed_key_types_are_grouped_by_type_name(tree: dict[Any, Any], leaves: list[str]) -> None:
    assert treekit.tree_leaves(tree) == leaves
    assert treekit.tree_unflatten(treekit.tree_structure(tree), leaves) == tree


def test_is_leaf_stops_descent() -> None:
    tree = [(1, 2), {"a": (3,)}, NT(4, 5)]
    assert treekit.tree_leaves(tree, is_leaf=lambda x: type(x) is tuple) == [(1, 2), (3,), 4, 5]
    leaves, treedef = treekit.tree_flatten(tree, is_leaf=lambda x: isinstance(x, tuple))
    assert leaves == [(1, 2), (3,), NT(4, 5)]
    assert repr(treedef) == "PyTreeDef([*, {'a': *}, *])"


def test_is_leaf_sees_the_root_and_none() -> None:
    assert treekit.tree_leaves([1, 2], is_leaf=lambda x: isinstance(x, list)) == [[1, 2]]
    assert treekit.tree_leaves([None, 1], is_leaf=lambda x: x is None) == [None, 1]
    assert repr(treekit.tree_structure([None], is_leaf=lambda x: x is None)) == "PyTreeDef([*])"


def test_is_leaf_is_called_on_every_subtree_top_down() -> None:
    seen: list[Any] = []
    tree = {"b": [1], "a": Pair(2, None)}
    treekit.tree_leaves(tree, is_leaf=lambda x: seen.append(x) is not None)
    assert seen == [tree, tree["a"], 2, None, [1], 1]


def test_is_leaf_takes_path() -> None:
    calls: list[tuple[str, Any]] = []

    def is_leaf(path: tuple[Any, ...], x: Any) -> bool:
        calls.append((treekit.keystr(path), x))
        return treekit.keystr(path) == "['p'].y"

    tree = {"p": Point(1, [2, 3])}
    pairs, treedef = treekit.tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path=True)
    assert [(treekit.keystr(p), x) for p, x in pairs] == [("['p'].x", 1), ("['p'].y", [2, 3])]
    assert calls == [("", tree), ("['p']", tree["p"]), ("['p'].x", 1), ("['p'].y", [2, 3])]
    assert repr(treedef) == "PyTreeDef({'p': CustomNode(Point[p], [*, *])})"
    leaves = treekit.tree_leaves_with_path(tree, lambda p, x: len(p) == 1, is_leaf_takes_path=True)
    assert leaves == [((treekit.DictKey("p"),), tree["p"])]


def test_subclasses_of_registered_types_are_leaves() -> None:
    class MyList(list):  # type: ignore[type-arg]
        pass

    class MyDict(dict):  # type: ignore[type-arg]
        pass

    tree = [MyList([1, 2]), MyDict(a=1)]
    assert treekit.tree_leaves(tree) == tree
    assert repr(treekit.tree_structure(tree)) == "PyTreeDef([*, *])"


def test_any_tuple_subclass_with_fields_is_a_namedtuple_node() -> None:
    class Fields(tuple):  # type: ignore[type-arg]
        _fields = ("a", "b")

        def __new__(cls, a: Any, b: Any) -> Fields:
            return super().__new__(cls, (a, b))

    pairs, treedef = treekit.tree_flatten_with_path(Fields(1, 2))
    assert [(treekit.keystr(p), x) for p, x in pairs] == [(".a", 1), (".b", 2)]
    assert repr(treedef) == "PyTreeDef(CustomNode(namedtuple[Fields], [*, *]))"
    assert treedef.unflatten([3, 4]) == Fields(3, 4)


class ShortFields(tuple):  # type: ignore[type-arg]
    _fields = ("a",)


FIELDS_MISFIT = "expected one name in ShortFields._fields per item, got 1 for 3 items"


@pytest.mark.parametrize(
    "call",
    [
        treekit.tree_leaves,
        treekit.tree_leaves_with_path,
        treekit.tree_structure,
        lambda t: treekit.tree_map(lambda x: x, t),
        lambda t: treekit.tree_map_with_path(lambda p, x: x, t),
        lambda t: treekit.tree_structure({"x": (0, 0, 0)}).flatten_up_to(t),
        lambda t: __import__("treekit.params").params.flatten_dict(t),
    ],
    ids=["leaves", "leaves_with_path", "structure", "map", "map_with_path", "flatten_up_to", "flatten_dict"],
)
def test_a_tuple_whose_fields_do_not_fit_fails_alike_everywhere(call: Any) -> None:
    """Issue 13 item 4: leaves and leaves-with-path disagreed, flatten_dict dropped a leaf and
    map-with-path raised a bare StopIteration. Now every walk names the path and the misfit."""
    with pytest.raises((TypeError, ValueError)) as info:
        call({"x": ShortFields((1, 2, 3))})
    assert str(info.value).split("\n")[0] == FIELDS_MISFIT
    assert info.value.__notes__ == ["tree['x']: raised while flattening ShortFields"]  # issue 12 item 2


def test_shared_subtrees_are_not_cycles() -> None:
    shared = [1, 2]
    tree = {"a": shared, "b": shared, "c": [shared, [shared]]}
    assert treekit.tree_leaves(tree) == [1, 2] * 4


def test_wide_list_key_paths() -> None:
    wide = list(range(1000))
    pairs = treekit.tree_leaves_with_path(wide)
    assert all(path == (treekit.SequenceKey(i),) and x == i for i, (path, x) in enumerate(pairs))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_leaf_paths_made_one_at_a_time_are_flattens_paths(case: Case) -> None:
    # LeafPaths names failing leaves in the checks (tree_diff, check_spec, asserts); its paths,
    # asked for in any order, must be the ones flatten makes for every leaf.
    leaves, treedef, paths = flatten(case.tree, with_path=True)
    lazy = LeafPaths(case.tree, treedef)
    assert [lazy[i] for i in reversed(range(len(leaves)))] == paths[::-1]
    with pytest.raises(IndexError):
        lazy[len(leaves)]


@given(trees())
def test_leaf_paths_law(tree: Any) -> None:
    _, treedef, paths = flatten(tree, with_path=True)
    lazy = LeafPaths(tree, treedef)
    assert [lazy[i] for i in range(treedef.num_leaves)] == paths


# -- user code is called once: an exception it raised is the call's, never retried ---------------
class Flaky:
    """A node whose registered functions raise on their first call only, counting every call."""

    calls: dict[str, int] = {}  # noqa: RUF012  # (reset by the fixture)

    def __init__(self, *children: Any) -> None:
        self.children = children


def _flaky(name: str, ok: Any) -> Any:
    def function(*args: Any) -> Any:
        Flaky.calls[name] = Flaky.calls.get(name, 0) + 1
        if Flaky.calls[name] == 1:
            raise LookupError(f"{name} raised on its first call")
        return ok(*args)

    return function


@pytest.fixture
def flaky() -> Any:
    Flaky.calls = {}
    treekit.register_pytree_with_keys(
        Flaky,
        _flaky(
            "flatten_with_keys", lambda n: ([(treekit.GetAttrKey(f"c{i}"), c) for i, c in enumerate(n.children)], None)
        ),
        _flaky("unflatten", lambda _, children: Flaky(*children)),
        _flaky("flatten", lambda n: (n.children, None)),
    )
    yield Flaky
    from treekit.core._registry import remove_type

    remove_type(Flaky)


FLAKY_CALLS = {
    "tree_leaves": (lambda t: treekit.tree_leaves(t), "flatten"),
    "tree_flatten": (lambda t: treekit.tree_flatten(t), "flatten"),
    "tree_leaves_with_path": (lambda t: treekit.tree_leaves_with_path(t), "flatten_with_keys"),
    "tree_flatten_with_path": (lambda t: treekit.tree_flatten_with_path(t), "flatten_with_keys"),
    "tree_map": (lambda t: treekit.tree_map(lambda x: x, t), "flatten"),
    "tree_map_with_path": (lambda t: treekit.tree_map_with_path(lambda p, x: x, t), "flatten_with_keys"),
    "tree_map_rest": (lambda t: treekit.tree_map(lambda x, y: x, _ready(t), t), "flatten"),
    "flatten_up_to": (lambda t: _ready(treekit.tree_structure, t).flatten_up_to(t), "flatten"),
    "is_leaf": (lambda t: treekit.tree_leaves(t, is_leaf=lambda x: False), "flatten"),
}


def _ready(make: Any, tree: Any = None) -> Any:
    """``make(tree)`` (a copy of ``tree`` without ``tree``) made past the functions' first calls,
    which are then counted afresh."""
    Flaky.calls = {"flatten": 1, "flatten_with_keys": 1, "unflatten": 1}
    out = make(tree) if tree is not None else treekit.tree_map(lambda x: x, make)
    Flaky.calls = {}
    return out


@pytest.mark.parametrize("call", sorted(FLAKY_CALLS))
def test_a_flatten_function_that_raised_is_not_called_again(flaky: type, call: str) -> None:
    run, function = FLAKY_CALLS[call]
    tree = {"a": [0, flaky(1, (2,))]}
    with pytest.raises(LookupError, match=rf"^{function} raised on its first call") as info:
        run(tree)
    assert Flaky.calls == {function: 1}
    notes = getattr(info.value, "__notes__", [])
    assert notes and "raised while flattening Flaky" in notes[-1], notes


@pytest.mark.parametrize("call", ["tree_unflatten", "tree_map"])
def test_an_unflatten_function_that_raised_is_not_called_again(flaky: type, call: str) -> None:
    tree = {"a": [0, flaky(1, 2)]}
    leaves, treedef = _ready(treekit.tree_flatten, tree)
    Flaky.calls = {"flatten": 1}  # (tree_map flattens again)
    with pytest.raises(LookupError, match=r"^unflatten raised on its first call") as info:
        if call == "tree_unflatten":
            treekit.tree_unflatten(treedef, leaves)
        else:
            treekit.tree_map(lambda x: x, tree)
    assert Flaky.calls["unflatten"] == 1
    assert "raised by the unflatten function registered for Flaky" in info.value.__notes__[-1]


def test_an_is_leaf_that_raised_is_not_called_again() -> None:
    calls = []

    def is_leaf(x: Any) -> bool:
        calls.append(x)
        if len(calls) == 3:
            raise LookupError("is_leaf raised")
        return False

    for run in (
        lambda: treekit.tree_leaves([[1], [2]], is_leaf=is_leaf),
        lambda: treekit.tree_map(lambda x: x, [[1], [2]], is_leaf=is_leaf),
        lambda: flatten([[1], [2]], is_leaf, True),
    ):
        calls.clear()
        with pytest.raises(LookupError, match=r"^is_leaf raised"):
            run()
        assert len(calls) == 3

"""TreeDef: equality, hash, pickle, repr, children, node_data, compose, flatten_up_to, counts."""

from __future__ import annotations

import collections
import copy
import pickle
import re
from typing import Any

import pytest
from cases import CASES, NT, Case, Layer, Pair, Point, Tag

import treekit
from treekit import StructureMismatchError, TreeDef, keystr, tree_structure
from treekit._registry import _remove

pytestmark = pytest.mark.usefixtures("case_types")

P = collections.namedtuple("P", "x y")
Q = collections.namedtuple("Q", "x y")
DD = collections.defaultdict
OD = collections.OrderedDict

# (a, b, equal): treedef equality as in jax.
PAIRS = [
    ([1, 2], ["a", "b"], True),
    ({"a": 1, "b": 2}, {"b": 3, "a": 4}, True),
    ({"a": 1}, {"b": 1}, False),
    ([1, 2], (1, 2), False),
    ([1, 2], [1, 2, 3], False),
    ([1, [2]], [1, 2], False),
    (None, None, True),
    (None, [], False),
    ((), [], False),
    ({}, [], False),
    ([None], [1], False),
    (P(1, 2), P(3, 4), True),
    (P(1, 2), Q(1, 2), False),
    (P(1, 2), (1, 2), False),
    (OD(a=1, b=2), OD(a=3, b=4), True),
    (OD(a=1, b=2), OD(b=1, a=2), False),
    (OD(a=1), {"a": 1}, False),
    (DD(list, a=1), DD(list, a=2), True),
    (DD(list, a=1), DD(int, a=1), False),
    (DD(list, a=1), {"a": 1}, False),
    (Pair(1, 2), Pair([3], 4), False),
    (Pair(1, 2), Pair(3, 4), True),
    (Point(1, 2, "p"), Point(1, 2, "q"), False),
    (Layer(1, 2), Layer(3, 4), True),
    (Layer(1, 2), Layer(1, 2, act="tanh"), False),
    ([Tag("a")], [Tag("a")], True),
    ([Tag("a")], [Tag("b")], False),
    (treekit.Partial(pow, 1), treekit.Partial(pow, 2), True),
    (treekit.Partial(pow, 1), treekit.Partial(max, 1), False),
]


@pytest.mark.parametrize(("a", "b", "equal"), PAIRS, ids=lambda x: repr(x)[:30])
def test_equality_and_hash(a: Any, b: Any, equal: bool) -> None:
    ta, tb = tree_structure(a), tree_structure(b)
    assert (ta == tb) is equal
    assert (ta != tb) is not equal
    assert (tb == ta) is equal
    if equal:
        assert hash(ta) == hash(tb)
        assert len({ta, tb}) == 1


def test_not_equal_to_other_objects() -> None:
    treedef = tree_structure([1])
    assert treedef != [1] and treedef != "PyTreeDef([*])" and treedef != None  # noqa: E711


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_pickle_and_copy_round_trip(case: Case) -> None:
    treedef = tree_structure(case.tree)
    for clone in (pickle.loads(pickle.dumps(treedef)), copy.deepcopy(treedef), copy.copy(treedef)):
        assert clone == treedef and hash(clone) == hash(treedef)
        assert repr(clone) == case.treedef_repr
        assert repr(clone.unflatten(case.leaves)) == repr(case.tree)


class Gone:
    """Registered, pickled into a treedef, then unregistered."""


def test_unpickling_a_treedef_of_an_unregistered_type_fails_clearly() -> None:
    treekit.register_pytree_node(Gone, lambda g: ((), None), lambda _, c: Gone())
    try:
        data = pickle.dumps(tree_structure([Gone()]))
    finally:
        _remove(Gone)
    with pytest.raises(ValueError, match=re.escape("cannot unpickle a treedef: Gone is not registered")):
        pickle.loads(data)


def test_immutable() -> None:
    treedef = tree_structure([1])
    with pytest.raises(AttributeError):
        treedef.extra = 1  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        treedef.num_leaves = 3  # type: ignore[misc]


def test_pytreedef_is_treedef() -> None:
    assert treekit.PyTreeDef is TreeDef
    assert isinstance(tree_structure([1]), treekit.PyTreeDef)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_children_are_the_structures_of_the_children(case: Case) -> None:
    treedef = tree_structure(case.tree)
    if not treekit.is_tree_node(type(case.tree)):
        assert treedef.children() == []
        return
    children, _ = treekit.flatten_one_level(case.tree)
    assert treedef.children() == [tree_structure(c) for c in children]
    assert [repr(c) for c in treedef.children()] == [repr(tree_structure(c)) for c in children]


@pytest.mark.parametrize(
    ("tree", "node_data"),
    [
        (1, None),
        ([1], (list, None)),
        ((1,), (tuple, None)),
        (None, (type(None), None)),
        ({"b": 1, "a": 2}, (dict, ["a", "b"])),
        (NT(1, 2), (NT, None)),
        (OD(b=1, a=2), (OD, ("b", "a"))),
        (DD(list, b=1, a=2), (DD, (list, ("a", "b")))),
        (Pair(1, 2), (Pair, None)),
        (Point(1, 2, "q"), (Point, "q")),
        (Layer(1, 2, "tanh"), (Layer, ("tanh",))),
        (Tag("relu"), (Tag, "relu")),
        (treekit.Partial(pow, 2), (treekit.Partial, pow)),
    ],
    ids=lambda x: repr(x)[:30],
)
def test_node_data(tree: Any, node_data: Any) -> None:
    assert tree_structure(tree).node_data() == node_data


@pytest.mark.parametrize(
    ("outer", "inner", "composed"),
    [
        ([0, 0], (0, 0), [(1, 2), (3, 4)]),
        ({"a": 0, "b": [0]}, {"w": 0, "b": None}, {"a": {"w": 1, "b": None}, "b": [{"w": 2, "b": None}]}),
        ([0, 0], None, [None, None]),
        ([0], 0, [1]),
        (0, [0, 0], [1, 2]),
        ([], (0, 0), []),
        ([None, 0], NT(0, [0]), [None, NT(1, [2])]),
    ],
)
def test_compose(outer: Any, inner: Any, composed: Any) -> None:
    treedef = tree_structure(outer).compose(tree_structure(inner))
    expected = tree_structure(composed)
    assert treedef == expected and hash(treedef) == hash(expected)
    assert repr(treedef) == repr(expected)
    assert (treedef.num_leaves, treedef.num_nodes) == (expected.num_leaves, expected.num_nodes)
    assert treedef.unflatten(treekit.tree_leaves(composed)) == composed


def test_compose_keeps_dict_insertion_order() -> None:
    treedef = tree_structure({"b": 0, "a": 0}).compose(tree_structure({"y": 0, "x": 0}))
    out = treedef.unflatten(range(4))
    assert list(out) == ["b", "a"] and list(out["b"]) == ["y", "x"]


@pytest.mark.parametrize(
    ("prefix", "tree", "subtrees"),
    [
        ([0, {"a": 0}], [(1, 2), {"a": [3]}], [(1, 2), [3]]),
        (0, {"x": [1]}, [{"x": [1]}]),
        ([0, 0], [None, {}], [None, {}]),
        ({"b": 0, "a": 0}, {"a": 1, "b": 2}, [1, 2]),
        ([None, 0], [None, 5], [5]),
        (NT(0, 0), NT([1], 2), [[1], 2]),
        (Pair(0, 0), Pair(1, Pair(2, 3)), [1, Pair(2, 3)]),
        ([], [], []),
    ],
)
def test_flatten_up_to(prefix: Any, tree: Any, subtrees: list[Any]) -> None:
    out = tree_structure(prefix).flatten_up_to(tree)
    assert out == subtrees


def test_flatten_up_to_returns_the_subtrees_themselves() -> None:
    inner = [1, 2]
    assert tree_structure([0]).flatten_up_to([inner])[0] is inner


@pytest.mark.parametrize(
    ("prefix", "tree", "message"),
    [
        ([0, 0], [1, 2, 3], "tree: expected list of length 2, got list of length 3"),
        ({"a": [0, 0]}, {"a": (1, 2)}, "tree['a']: expected list of length 2, got tuple of length 2"),
        ([0, [0]], [1, 2], "tree[1]: expected list of length 1, got leaf 2"),
    ],
)
def test_flatten_up_to_names_the_path(prefix: Any, tree: Any, message: str) -> None:
    with pytest.raises(StructureMismatchError, match=f"^{re.escape(message)}$") as info:
        tree_structure(prefix).flatten_up_to(tree)
    assert info.value.label == "tree"


def test_the_leftmost_mismatch_is_reported() -> None:
    # Both [0] and [1] differ; the message names the first in leaf order, as jax's does.
    with pytest.raises(StructureMismatchError, match=re.escape("tree[0]: expected list of length 2")) as info:
        tree_structure([[1, 2], [3, 4]]).flatten_up_to([[1], [3]])
    assert info.value.path == (treekit.SequenceKey(0),)
    with pytest.raises(StructureMismatchError, match=re.escape("rest[0]['a'][0]: expected list of length 2")):
        treekit.tree_map(lambda x, y: x, {"a": [[1, 2], 3], "b": [1]}, {"a": [[1], 3], "b": [1, 2]})


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_flatten_up_to_itself_gives_the_leaves(case: Case) -> None:
    out = tree_structure(case.tree).flatten_up_to(case.tree)
    assert len(out) == len(case.leaves) and all(a is b for a, b in zip(out, case.leaves))


@pytest.mark.parametrize(
    ("tree", "num_leaves", "num_nodes"),
    [
        (1, 1, 1),
        (None, 0, 1),
        ([], 0, 1),
        ([1, None], 1, 3),
        ([1, {"a": 2, "b": (3, 4)}], 4, 7),
        (Pair(1, [2, 3]), 3, 5),
        ([Tag("t")], 0, 2),
        (Layer(1, None), 1, 3),
    ],
)
def test_counts(tree: Any, num_leaves: int, num_nodes: int) -> None:
    treedef = tree_structure(tree)
    assert (treedef.num_leaves, treedef.num_nodes) == (num_leaves, num_nodes)


def test_unflatten_takes_any_iterable() -> None:
    treedef = tree_structure([0, (0, 0)])
    expected = [1, (2, 3)]
    assert treedef.unflatten([1, 2, 3]) == expected
    assert treedef.unflatten((1, 2, 3)) == expected
    assert treedef.unflatten(iter([1, 2, 3])) == expected
    assert treedef.unflatten(x for x in [1, 2, 3]) == expected
    assert treekit.tree_unflatten(treedef, range(1, 4)) == expected


def test_unflatten_calls_unflatten_functions_with_node_data() -> None:
    out = tree_structure(Point(1, 2, "q")).unflatten(["a", "b"])
    assert out == Point("a", "b", "q")


# -- the guided walker's collect mode (errors=) ----------------------------------------------
def _collect(reference: Any, tree: Any, strict: bool = True) -> tuple[list[Any], list[str], list[tuple[int, int, str]]]:
    errors: list[tuple[int, int, StructureMismatchError]] = []
    paths: list[Any] = []
    out = tree_structure(reference)._walk(tree, "b", strict, None, paths, errors)
    return out, [keystr(p) for p in paths], [(start, stop, str(e).split("\n")[0]) for start, stop, e in errors]


def test_collect_mode_reports_every_mismatch_left_to_right_and_keeps_leaf_slots() -> None:
    reference = {"a": [1, 2], "b": None, "c": {"x": 1, "y": (1, 2)}, "d": 5}
    tree = {"a": [1, 2, 3], "b": 1, "c": {"x": [1], "y": (7, 8)}, "d": 6}
    out, paths, errors = _collect(reference, tree)
    assert out == [None, None, None, 7, 8, 6]
    assert paths == ["['a']", "['a']", "['c']['x']", "['c']['y'][0]", "['c']['y'][1]", "['d']"]
    assert errors == [
        (0, 2, "b['a']: expected list of length 2, got list of length 3"),
        (2, 2, "b['b']: expected None, got leaf 1"),
        (2, 3, "b['c']['x']: expected a leaf, got list of length 1"),
    ]


def test_collect_mode_skips_the_mismatched_subtree_whole() -> None:
    # The root differs: nothing below it is visited or reported.
    out, paths, errors = _collect([[1, 2], {"k": 3}], ([1], 2))
    assert out == [None, None, None]
    assert paths == ["", "", ""]
    assert errors == [(0, 3, "b: expected list of length 2, got tuple of length 2")]


def test_collect_mode_without_mismatch_equals_the_plain_walk() -> None:
    reference = [1, {"a": (2, 3)}]
    tree = [[9], {"a": (8, 7)}]
    out, paths, errors = _collect(reference, tree, strict=False)
    assert out == tree_structure(reference)._walk(tree, "b") == [[9], 8, 7]
    assert paths == ["[0]", "[1]['a'][0]", "[1]['a'][1]"]
    assert errors == []


def test_without_errors_a_mismatch_raises() -> None:
    with pytest.raises(StructureMismatchError, match=r"^b\['a'\]: expected list of length 2, got list of length 3$"):
        tree_structure({"a": [1, 2], "b": None})._walk({"a": [1, 2, 3], "b": None}, "b", True)


def test_the_raised_mismatch_is_the_leftmost_one() -> None:
    # The error names the first difference in leaf order.
    from treekit import tree_map

    message = "rest[0]['a']: expected list of length 2, got list of length 3"
    with pytest.raises(StructureMismatchError, match=re.escape(message)):
        tree_map(lambda x, y: x, {"a": [1, 2], "z": (1,)}, {"a": [1, 2, 3], "z": [1]})
    with pytest.raises(StructureMismatchError, match=r"^b\[0\]: expected a leaf, got None$"):
        tree_structure([1, [2], 3])._walk([None, 7, None], "b", True)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: treekit.tree_unflatten([0, 0], [1, 2]), "treedef: expected a TreeDef, got list [0, 0]"),
        (lambda: treekit.tree_transpose("[*]", None, []), "outer_treedef: expected a TreeDef, got str '[*]'"),
        (
            lambda: treekit.tree_transpose(treekit.tree_structure([0]), 3, [0]),
            "inner_treedef: expected a TreeDef, got int 3",
        ),
        (lambda: treekit.treedef_children(None), "treedef: expected a TreeDef, got NoneType None"),
        (lambda: treekit.treedef_is_leaf(1), "treedef: expected a TreeDef, got int 1"),
        (lambda: treekit.treedef_is_strict_leaf(1), "treedef: expected a TreeDef, got int 1"),
        (
            lambda: treekit.treedef_tuple([treekit.tree_structure(1), (1,)]),
            "treedefs[1]: expected a TreeDef, got tuple (1,)",
        ),
        (lambda: treekit.tree_structure([0]).compose([0]), "inner: expected a TreeDef, got list [0]"),
        (lambda: treekit.treedef_from_jax({}), "treedef: expected a TreeDef, got dict {}"),
    ],
    ids=["unflatten", "transpose-outer", "transpose-inner", "children", "is_leaf", "is_strict_leaf", "tuple",
         "compose", "from_jax"],
)
def test_treedef_arguments_of_other_kinds_raise_type_error(call: Any, message: str) -> None:
    with pytest.raises(TypeError, match=re.escape(message)):
        call()

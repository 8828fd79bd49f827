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
from treekit.core._registry import remove_type

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
        remove_type(Gone)
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
    out = tree_structure(reference)._guide(tree, "b", strict, None, paths, errors)
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
    assert out == tree_structure(reference)._guide(tree, "b") == [[9], 8, 7]
    assert paths == ["[0]", "[1]['a'][0]", "[1]['a'][1]"]
    assert errors == []


def test_without_errors_a_mismatch_raises() -> None:
    with pytest.raises(StructureMismatchError, match=r"^b\['a'\]: expected list of length 2, got list of length 3$"):
        tree_structure({"a": [1, 2], "b": None})._guide({"a": [1, 2, 3], "b": None}, "b", True)


def test_the_raised_mismatch_is_the_leftmost_one() -> None:
    # The error names the first difference in leaf order.
    from treekit import tree_map

    message = "rest[0]['a']: expected list of length 2, got list of length 3"
    with pytest.raises(StructureMismatchError, match=re.escape(message)):
        tree_map(lambda x, y: x, {"a": [1, 2], "z": (1,)}, {"a": [1, 2, 3], "z": [1]})
    with pytest.raises(StructureMismatchError, match=r"^b\[0\]: expected a leaf, got None$"):
        tree_structure([1, [2], 3])._guide([None, 7, None], "b", True)


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
    ids=[
        "unflatten",
        "transpose-outer",
        "transpose-inner",
        "children",
        "is_leaf",
        "is_strict_leaf",
        "tuple",
        "compose",
        "from_jax",
    ],
)
def test_treedef_arguments_of_other_kinds_raise_type_error(call: Any, message: str) -> None:
    with pytest.raises(TypeError, match=re.escape(message)):
        call()


# -- records from outside treekit's walkers are checked (issue 21) ---------------------------
def _records(tree: Any) -> tuple[Any, ...]:
    return tree_structure(tree)._nodes


def _with(tree: Any, index: int, field: int, value: Any) -> tuple[Any, ...]:
    """``tree``'s records with field ``field`` of record ``index`` replaced by ``value``."""
    records = list(_records(tree))
    record = list(records[index])
    record[field] = value
    records[index] = tuple(record)
    return tuple(records)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_every_walked_structure_passes_the_check(case: Case) -> None:
    treedef = tree_structure(case.tree)
    for records in (treedef._nodes, list(treedef._nodes)):
        again = TreeDef(records)
        assert type(again._nodes) is tuple and again == treedef and repr(again) == case.treedef_repr
        assert repr(again.unflatten(case.leaves)) == repr(case.tree)


def _short_root(tree: Any) -> tuple[Any, ...]:
    leaf, root = _records(tree)
    return (root, leaf)


UNDER = "(the subtrees before it not yet under a node)"
BAD_RECORDS = [
    # (records, message): one per kind of wrong record
    ((), "treedef records: expected at least 1 record, got none"),
    (
        _with([[1, 2], 3], 2, 4, -1),
        "treedef record 2: expected num_nodes 3 (1 + its 2 children's), got -1",
    ),
    (_with([1, 2], 2, 3, 10**30), f"treedef record 2: expected num_leaves 2 (its 2 children's), got {10**30}"),
    (_with([1, 2], 2, 4, 10**30), f"treedef record 2: expected num_nodes 3 (1 + its 2 children's), got {10**30}"),
    (_with([], 0, 3, 1), "treedef record 0: expected num_leaves 0 (a node with no children), got 1"),
    (_with([], 0, 4, 0), "treedef record 0: expected num_nodes 1 (a node with no children), got 0"),
    (
        _with([1, 2], 2, 2, 3),
        f"treedef record 2: expected an arity from 0 to 2 {UNDER}, got 3",
    ),
    (
        _with([1, 2], 2, 2, -1),
        f"treedef record 2: expected an arity from 0 to 2 {UNDER}, got -1",
    ),
    (_with([1], 1, 2, True), "treedef record 1: expected an int as arity, got bool True"),
    (_with([1], 1, 3, 1.0), "treedef record 1: expected an int as num_leaves, got float 1.0"),
    ((("x", None, 0, 1, 1),), "treedef record 0: expected None (a leaf) or a registered NodeType, got str 'x'"),
    (
        ((None, None, 0, 1, 2),),
        "treedef record 0: expected a leaf record (None, None, 0, 1, 1), got (None, None, 0, 1, 2)",
    ),
    (
        ((None, "data", 0, 1, 1),),
        "treedef record 0: expected a leaf record (None, None, 0, 1, 1), got (None, 'data', 0, 1, 1)",
    ),
    (
        [[None, None, 0, 1, 1]],
        "treedef record 0: expected a tuple (ntype, node data, arity, num_leaves, num_nodes), "
        "got list [None, None, 0, 1, 1]",
    ),
    (
        ((None, None, 0, 1),),
        "treedef record 0: expected a tuple (ntype, node data, arity, num_leaves, num_nodes), got tuple of length 4",
    ),
    (
        _records([1]) + _records(2),
        "treedef records: expected 1 tree, got 2 (the last record is the root of 1 of the 3 records)",
    ),
    (_short_root([1]), f"treedef record 0: expected an arity from 0 to 0 {UNDER}, got 1"),
    (_with([1], 1, 1, "x"), "treedef record 1: expected node data None for a list node, got 'x'"),
    (_with(None, 0, 2, 1), f"treedef record 0: expected an arity from 0 to 0 {UNDER}, got 1"),
    (_with([1, None], 1, 2, 1), "treedef record 1: expected arity 0 for a None node, got 1"),
    (
        _with({"a": 1, "b": 2}, 2, 1, ("b", "a")),
        "treedef record 2: expected node data: a tuple of 2 distinct dict keys in sorted order, got ('b', 'a')",
    ),
    (
        _with({"a": 1, "b": 2}, 2, 1, ("a", "a")),
        "treedef record 2: expected node data: a tuple of 2 distinct dict keys in sorted order, got ('a', 'a')",
    ),
    (
        _with({"a": 1, "b": 2}, 2, 1, ("a",)),
        "treedef record 2: expected node data: a tuple of 2 distinct dict keys in sorted order, got ('a',)",
    ),
    (
        _with({"a": 1}, 1, 1, (["a"],)),
        "treedef record 1: expected node data: a tuple of 1 dict key, got (['a'],)",
    ),
    (
        _with(OD(b=1, a=2), 2, 1, ("b", "b")),
        "treedef record 2: expected node data: a tuple of 2 distinct dict keys, got ('b', 'b')",
    ),
    (
        _with(DD(list, a=1), 1, 1, (3, ("a",))),
        "treedef record 1: expected node data (default_factory, 1 dict key) for a defaultdict node, got (3, ('a',))",
    ),
    (
        _with(NT(1, 2), 2, 1, tuple),
        "treedef record 2: expected node data: a namedtuple class with 2 fields, got <class 'tuple'>",
    ),
]


@pytest.mark.parametrize(("records", "message"), BAD_RECORDS, ids=lambda x: repr(x)[:40])
def test_wrong_records_raise_value_error_naming_the_record(records: Any, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        TreeDef(records)
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        pickle.loads(pickle.dumps(_Rebuilt(records)))


def test_other_kinds_of_records_raise_type_error() -> None:
    with pytest.raises(TypeError, match=re.escape("treedef records: expected a tuple of node records, got dict")):
        TreeDef({})  # type: ignore[arg-type]


class Dropped:
    """Registered, flattened into records, then unregistered (and registered again)."""


def test_an_entry_no_longer_registered_is_refused() -> None:
    def register() -> None:
        treekit.register_pytree_node(Dropped, lambda d: ((), None), lambda _, c: Dropped())

    register()
    try:
        records = _records([Dropped()])
    finally:
        remove_type(Dropped)
    message = (
        "treedef record 0: expected None (a leaf) or a registered NodeType, "
        "got NodeType(Dropped), not the entry registered for its type"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        TreeDef(records)
    register()  # registered again: another entry, which the old records do not hold
    try:
        with pytest.raises(ValueError, match=re.escape(message)):
            TreeDef(records)
        assert TreeDef(_records([Dropped()])).num_nodes == 2
    finally:
        remove_type(Dropped)


def test_records_the_checks_allow_are_kept_as_given() -> None:
    # a static node's record and a namedtuple class of the same width are valid
    assert TreeDef(_with(NT(1, 2), 2, 1, Q)).unflatten([1, 2]) == Q(1, 2)
    assert TreeDef(_records([Tag("t"), 1])) == tree_structure([Tag("t"), 1])


class _Rebuilt:
    """Pickles as ``TreeDef(records)``: a payload with hand-made records, as a corrupted file has."""

    def __init__(self, records: Any, how: str = "reduce") -> None:
        self.records, self.how = records, how

    def __reduce__(self) -> tuple[Any, ...]:
        if self.how == "build":  # object.__new__, then BUILD with slot state: copyreg's default reduction
            import copyreg

            return (copyreg._reconstructor, (TreeDef, object, None), (None, {"_nodes": self.records}))
        return (TreeDef, (self.records,))


def test_a_pickle_with_a_record_edited_raises_value_error() -> None:
    # [[1, 2], 3]: the inner list's record (2) has num_nodes 3; the payload is edited to -1
    # (BININT -1), which made repr, and every message naming the treedef, loop for ever.
    treedef = tree_structure([[1, 2], 3])
    data = pickle.dumps(treedef, protocol=4)
    assert data.count(b"K\x02K\x02K\x03") == 1
    edited = data.replace(b"K\x02K\x02K\x03", b"K\x02K\x02J\xff\xff\xff\xff")
    message = "treedef record 2: expected num_nodes 3 (1 + its 2 children's), got -1"
    with pytest.raises(ValueError, match=re.escape(message)):
        pickle.loads(edited)
    assert pickle.loads(data) == treedef


def test_a_pickle_that_sets_the_slots_is_checked_too() -> None:
    good = _records([1, (2,)])
    clone = pickle.loads(pickle.dumps(_Rebuilt(good, "build")))
    assert type(clone) is TreeDef and clone == tree_structure([1, (2,)]) and repr(clone) == "PyTreeDef([*, (*,)])"
    bad = _with([1, (2,)], 2, 4, -1)
    message = "treedef record 2: expected num_nodes 2 (1 + its 1 child's), got -1"
    with pytest.raises(ValueError, match=re.escape(message)):
        pickle.loads(pickle.dumps(_Rebuilt(bad, "build")))
    with pytest.raises(ValueError, match=re.escape("treedef state: expected a dict with '_nodes', got 3")):
        TreeDef.__new__(TreeDef).__setstate__(3)


def test_builders_from_parts_are_checked() -> None:
    # node_data comes from the caller: the new root is checked with the records under it
    message = (
        "treedef record 1: expected node data (default_factory, 1 dict key) for a defaultdict node, got (3, ('a',))"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        TreeDef.from_node_data_and_children(treekit.default_registry, (DD, (3, ["a"])), [tree_structure(1)])


def test_treekits_own_treedefs_skip_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    from treekit.core import _treedef

    treedef, pair, one = tree_structure([(1, 2), {"a": 3}]), tree_structure((1, 2)), tree_structure([0])

    def refuse(records: Any) -> Any:
        raise AssertionError("checked")

    monkeypatch.setattr(_treedef, "checked_records", refuse)
    assert treedef.children()[0] == pair
    assert treedef.compose(one).num_leaves == 3
    assert treekit.treedef_tuple([treedef, treedef]).num_leaves == 6
    with pytest.raises(AssertionError, match="checked"):
        TreeDef(treedef._nodes)


def test_the_building_walker_skips_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    from treekit.core import _treedef

    def refuse(records: Any) -> Any:
        raise AssertionError("checked")

    monkeypatch.setattr(_treedef, "checked_records", refuse)
    assert tree_structure([(1, 2), {"a": 3}]).num_leaves == 3


# -- node data that do not compare to a bool (arrays) ----------------------------------------
class Meta:
    """A registered node whose node data is what it is given: arrays, below."""

    def __init__(self, child: Any, meta: Any) -> None:
        self.child, self.meta = child, meta


class Eq:
    """Node data whose ``==`` gives what ``answer`` gives (a numpy bool, or raises)."""

    def __init__(self, value: Any, answer: Any) -> None:
        self.value, self.answer = value, answer

    def __eq__(self, other: object) -> Any:
        return self.answer(self.value, getattr(other, "value", None))

    def __repr__(self) -> str:
        return f"Eq({self.value!r})"


@pytest.fixture
def meta_node(registered: Any) -> None:
    registered(Meta, lambda cls: treekit.register_pytree_node(cls, lambda m: ([m.child], m.meta), _meta))


def _meta(meta: Any, children: Any) -> Meta:
    return Meta(children[0], meta)


HINT = (
    "node data are compared with ==, which must give True or False: keep arrays out of node data "
    "(make them children), or give the node data an __eq__ that returns a bool"
)


def _map(a: Any, b: Any) -> Any:
    return treekit.tree_map(lambda x, y: x, a, b)


@pytest.mark.usefixtures("meta_node")
def test_equal_arrays_as_node_data_raise_a_message_naming_the_path() -> None:
    np = pytest.importorskip("numpy")
    a = np.arange(3)
    message = (
        "rest[0][0]: expected Meta with 1 child and node data array([0, 1, 2]), got node data array([0, 1, 2]) "
        f"(the node data could not be compared: == gave numpy.ndarray, not True or False)\n{HINT}"
    )
    with pytest.raises(StructureMismatchError, match=f"^{re.escape(message)}$") as info:
        _map([Meta(1, a)], [Meta(2, a.copy())])
    assert info.value.label == "rest[0]" and info.value.path == (treekit.SequenceKey(0),)
    assert info.value.__cause__ is None and info.value.__suppress_context__
    with pytest.raises(StructureMismatchError, match=re.escape("tree[0]: expected Meta with 1 child")):
        tree_structure([Meta(1, a)]).flatten_up_to([Meta(2, a + 0)])
    assert _map([Meta(1, a)], [Meta(2, a)])[0].child == 1  # the same array: equal by identity


@pytest.mark.usefixtures("meta_node")
def test_node_data_whose_eq_raises_chain_the_users_exception() -> None:
    np = pytest.importorskip("numpy")
    a, b = (np.arange(3), "x"), (np.arange(3), "x")  # tuple ==: bool() of an array raises
    prefix = (
        "rest[0]: expected Meta with 1 child and node data (array([0, 1, 2]), 'x'), "
        "got node data (array([0, 1, 2]), 'x') (the node data could not be compared: == raised ValueError: "
    )
    with pytest.raises(StructureMismatchError, match=f"^{re.escape(prefix)}") as info:
        _map(Meta(1, a), Meta(2, b))
    assert type(info.value.__cause__) is ValueError and "ambiguous" in str(info.value.__cause__)

    def refuse(x: Any, y: Any) -> Any:
        raise RuntimeError("no ==\nsecond line")

    message = (
        "rest[0]: expected Meta with 1 child and node data Eq(1), got node data Eq(1) "
        f"(the node data could not be compared: == raised RuntimeError: no ==)\n{HINT}"
    )
    with pytest.raises(StructureMismatchError, match=f"^{re.escape(message)}$") as info:
        _map(Meta(1, Eq(1, refuse)), Meta(2, Eq(1, refuse)))
    assert type(info.value.__cause__) is RuntimeError


@pytest.mark.usefixtures("meta_node")
def test_numpy_bools_from_eq_count_as_their_value() -> None:
    np = pytest.importorskip("numpy")

    def answer(x: Any, y: Any) -> Any:
        return np.bool_(x == y)

    assert _map(Meta(1, Eq(1, answer)), Meta(2, Eq(1, answer))).child == 1
    message = "rest[0]: expected Meta with 1 child and node data Eq(1), got Meta with 1 child and node data Eq(2)"
    with pytest.raises(StructureMismatchError, match=f"^{re.escape(message)}$"):
        _map(Meta(1, Eq(1, answer)), Meta(2, Eq(2, answer)))


@pytest.mark.usefixtures("meta_node")
def test_a_one_element_array_is_refused_as_any_other() -> None:
    np = pytest.importorskip("numpy")
    with pytest.raises(StructureMismatchError, match=re.escape("== gave numpy.ndarray, not True or False")):
        _map(Meta(1, np.array([1])), Meta(2, np.array([1])))


@pytest.mark.usefixtures("meta_node")
def test_collect_mode_raises_node_data_that_do_not_compare() -> None:
    np = pytest.importorskip("numpy")
    treedef = tree_structure([1, Meta(1, np.arange(2))])
    errors: list[Any] = []
    with pytest.raises(StructureMismatchError, match=re.escape("b[1]: expected Meta with 1 child")):
        treedef._guide([[1], Meta(2, np.arange(2))], "b", True, None, None, errors)


@pytest.mark.usefixtures("meta_node")
def test_treedef_equality_with_array_node_data() -> None:
    np = pytest.importorskip("numpy")
    a = np.arange(3)
    left = tree_structure([1, Meta(1, a)])
    assert left == left and left == tree_structure([2, Meta(1, a)])  # the same array object
    assert left != tree_structure([Meta(1, a), 1])  # other shapes: no node data compared
    message = (
        "treedef record 2: expected Meta node data that compare, got array([0, 1, 2]) and array([0, 1, 2]) "
        f"(the node data could not be compared: == gave numpy.ndarray, not True or False)\n{HINT}"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        left == tree_structure([1, Meta(1, a.copy())])  # noqa: B015


# -- any records: checked, or refused with a ValueError; never a hang or a MemoryError --------
try:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
except ImportError:  # the core tests run without the testing extra
    st = None

if st is not None:
    import faulthandler

    from strategies import trees

    from treekit.core._registry import DEFAULTDICT, DICT, LIST, NAMEDTUPLE, NONE, ORDEREDDICT, TUPLE, NodeType

    _BUILT_IN = (LIST, TUPLE, DICT, NONE, NAMEDTUPLE, ORDEREDDICT, DEFAULTDICT)
    _NTYPES = st.sampled_from(
        [None, *_BUILT_IN, NodeType(Gone, lambda n, p: ((), None, None), lambda d, c: Gone()), "list", 0]
    ) | st.sampled_from([Pair, Point, Layer, Tag]).map(treekit.core._registry.lookup)
    _DATA = st.sampled_from(
        [
            None,
            (),
            ("a",),
            ("a", "b"),
            ("b", "a"),
            ("a", "a"),
            (1, "a"),
            NT,
            Q,
            tuple,
            (list, ("a",)),
            (3, ("a",)),
            (None, ()),
            "p",
            0,
            (["a"],),
            ("relu",),
        ]
    )
    _COUNTS = st.sampled_from([0, 1, 2, 3, 4, 5, -1, 10**30, -(10**30), True, 1.0, None])
    _RECORDS = st.tuples(_NTYPES, _DATA, _COUNTS, _COUNTS, _COUNTS)

    @st.composite
    def _edited_records(draw: st.DrawFn) -> Any:
        """A walked structure's records, then up to 3 edits: a field, or a record added,
        dropped, repeated, swapped or replaced by something that is not a record."""
        records = list(tree_structure(draw(trees(max_leaves=6)))._nodes)
        for _ in range(draw(st.sampled_from([0, 1, 1, 2, 3]))):
            at = draw(st.integers(0, len(records)))
            edit = draw(st.sampled_from(["field", "field", "field", "add", "drop", "repeat", "swap", "other"]))
            if edit == "add" or not records:
                records.insert(at, draw(_RECORDS))
                continue
            at = min(at, len(records) - 1)
            if type(records[at]) is not tuple:  # replaced by something else already
                continue
            if edit == "field":
                field = draw(st.integers(0, 4))
                value = draw([_NTYPES, _DATA, _COUNTS, _COUNTS, _COUNTS][field])
                records[at] = (*records[at][:field], value, *records[at][field + 1 :])
            elif edit == "drop":
                del records[at]
            elif edit == "repeat":
                records.insert(at, records[at])
            elif edit == "swap":
                other = draw(st.integers(0, len(records) - 1))
                records[at], records[other] = records[other], records[at]
            else:
                records[at] = draw(st.sampled_from([list(records[at]), records[at][:4], 5, None]))
        return tuple(records)

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.one_of(_edited_records(), st.lists(_RECORDS, max_size=6).map(tuple)))
    def test_any_records_are_checked_or_refused_with_value_error(records: Any) -> None:
        faulthandler.dump_traceback_later(60, exit=True)  # a hang fails the run, with a traceback
        try:
            try:
                treedef = TreeDef(records)
            except ValueError:
                return
            n = treedef.num_leaves
            assert isinstance(repr(treedef), str) and treedef == treedef and treedef == TreeDef(list(records))
            assert hash(treedef) == hash(TreeDef(records))
            clone = pickle.loads(pickle.dumps(treedef))
            assert clone == treedef and repr(clone) == repr(treedef) and hash(clone) == hash(treedef)
            assert len(treedef.children()) == treedef._nodes[-1][2]
            with pytest.raises(ValueError):
                treedef.unflatten(range(n + 1))
            if any(record[0] is not None and record[0] not in _BUILT_IN for record in treedef._nodes):
                try:  # registered classes' unflatten functions decide what their node data may be
                    treedef.unflatten(range(n))
                except (TypeError, ValueError):
                    pass
                return
            tree = treedef.unflatten(range(n))  # built-in nodes only: the structure walks back
            assert tree_structure(tree) == treedef and treedef.flatten_up_to(tree) == list(range(n))
        finally:
            faulthandler.cancel_dump_traceback_later()


# -- a flatten function that raised is not called again -----------------------------------------
class Flaky:
    """A node whose flatten function raises for ``Flaky(bad=True)``, counting its calls."""

    calls = 0

    def __init__(self, bad: bool = False) -> None:
        self.bad = bad


def _flatten_flaky(node: Flaky) -> tuple[list[Any], None]:
    Flaky.calls += 1
    if node.bad:
        raise RuntimeError("flaky")
    return [1], None


@pytest.fixture
def flaky(registered: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    registered(Flaky, lambda cls: treekit.register_pytree_node(cls, _flatten_flaky, lambda _, c: Flaky()))
    monkeypatch.setattr(Flaky, "calls", 0)


@pytest.mark.usefixtures("flaky")
@pytest.mark.parametrize("entry", ["flatten_up_to", "map_rest"])
def test_a_raising_flatten_function_is_reported_with_its_path(entry: str) -> None:
    good, bad = [0, {"a": Flaky()}], [0, {"a": Flaky(bad=True)}]
    treedef = tree_structure(good)
    Flaky.calls = 0
    with pytest.raises(RuntimeError) as info:
        if entry == "flatten_up_to":
            treedef.flatten_up_to(bad)
        else:
            treekit.tree_map(lambda x, y: x, good, bad)
    label = "tree" if entry == "flatten_up_to" else "rest[0]"
    assert str(info.value) == "flaky"
    assert info.value.__notes__ == [f"{label}[1]['a']: raised while flattening {Flaky.__qualname__}"]
    # the walk with keys that finds its key path takes the exception (guide's raised),
    # from the walk without keys or from the C core's, instead of calling the function again
    assert Flaky.calls - (entry == "map_rest") == 1  # (tree_map flattens `good` too)

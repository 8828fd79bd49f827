"""Errors are API: one full message per error kind, cycles, very deep trees, failing user functions."""

from __future__ import annotations

import collections
import pickle
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import pytest
from cases import Point

import treekit
from treekit import DictKey, SequenceKey, StructureMismatchError, TreeCycleError, keystr

pytestmark = pytest.mark.usefixtures("case_types")

NONE_HINT = "None is a node with no children, not a leaf: to treat it as a leaf pass is_leaf=lambda x: x is None"

GeoA = collections.namedtuple("Point", "x y", module="geo.a")  # type: ignore[name-match]
GeoB = collections.namedtuple("Point", "x y", module="geo.b")  # type: ignore[name-match]
Vec = collections.namedtuple("Vec", "x y")
# The same class statement run twice (a notebook cell run again, importlib.reload):
# two class objects that print the same.
Cell1 = collections.namedtuple("Point", "x y", module="__main__")  # type: ignore[name-match]
Cell2 = collections.namedtuple("Point", "x y", module="__main__")  # type: ignore[name-match]
REDEFINED = "a different class object with the same name: redefined?"


def _map(*trees: Any, **kwargs: Any) -> Any:
    return treekit.tree_map(lambda *xs: None, *trees, **kwargs)


# (name, tree, rest tree, full message of tree_map(f, tree, rest)).
MISMATCHES = [
    ("list_length", [1, 2], [1, 2, 3], "rest[0]: expected list of length 2, got list of length 3"),
    (
        "list_length_nested",
        {"layers": [[1, 2], [3, 4]]},
        {"layers": [[1, 2], [3, 4, 5]]},
        "rest[0]['layers'][1]: expected list of length 2, got list of length 3",
    ),
    (
        "dict_missing_and_extra",
        {"params": {"b": 1, "w": 2}},
        {"params": {"w": 1, "x": 2}},
        "rest[0]['params']: expected dict with keys ['b', 'w'], got keys ['w', 'x'] (missing 'b'; extra 'x')",
    ),
    (
        "dict_missing",
        {"a": 1, "b": 2},
        {"a": 1},
        "rest[0]: expected dict with keys ['a', 'b'], got keys ['a'] (missing 'b')",
    ),
    (
        "dict_extra",
        {"a": 1},
        {"b": 2, "a": 1},
        "rest[0]: expected dict with keys ['a'], got keys ['a', 'b'] (extra 'b')",
    ),
    ("list_vs_tuple", [[1, 2]], [(1, 2)], "rest[0][0]: expected list of length 2, got tuple of length 2"),
    ("tuple_vs_list", (1, 2), [1, 2], "rest[0]: expected tuple of length 2, got list of length 2"),
    ("node_vs_leaf", [[1]], [1], "rest[0][0]: expected list of length 1, got leaf 1"),
    ("node_vs_long_leaf", [(1, 2)], ["x" * 50], "rest[0][0]: expected tuple of length 2, got leaf of type str"),
    (
        "namedtuples_sharing_a_name",
        [GeoA(1, 2)],
        [GeoB(1, 2)],
        "rest[0][0]: expected namedtuple geo.a.Point, got namedtuple geo.b.Point",
    ),
    (
        "namedtuple_redefined",
        [Cell1(1, 2)],
        [Cell2(1, 2)],
        f"rest[0][0]: expected namedtuple __main__.Point, got namedtuple __main__.Point ({REDEFINED})",
    ),
    ("namedtuples", Vec(1, 2), GeoA(1, 2), "rest[0]: expected namedtuple Vec, got namedtuple Point"),
    ("namedtuple_vs_tuple", [Vec(1, 2)], [(1, 2)], "rest[0][0]: expected namedtuple Vec, got tuple of length 2"),
    ("none_vs_leaf", [None, 1], [1, 1], f"rest[0][0]: expected None, got leaf 1\n{NONE_HINT}"),
    ("none_vs_node", {"a": None}, {"a": [1]}, f"rest[0]['a']: expected None, got list of length 1\n{NONE_HINT}"),
    ("node_vs_none", [[]], [None], "rest[0][0]: expected list of length 0, got None"),
    (
        "custom_node_data",
        {"p": Point(1, 2, label="p")},
        {"p": Point(1, 2, label="q")},
        "rest[0]['p']: expected Point with 2 children and node data 'p', got Point with 2 children and node data 'q'",
    ),
    (
        "custom_vs_builtin",
        Point(1, 2),
        [1, 2],
        "rest[0]: expected Point with 2 children and node data 'p', got list of length 2",
    ),
    (
        "ordereddict_order",
        collections.OrderedDict(a=1, b=2),
        collections.OrderedDict(b=1, a=2),
        "rest[0]: expected OrderedDict with keys ['a', 'b'], got keys ['b', 'a'] (same keys in another order)",
    ),
    (
        "ordereddict_vs_dict",
        collections.OrderedDict(a=1),
        {"a": 1},
        "rest[0]: expected OrderedDict with keys ['a'], got dict with keys ['a']",
    ),
    (
        "defaultdict_factory",
        collections.defaultdict(list, a=1),
        collections.defaultdict(int, a=1),
        "rest[0]: expected defaultdict with keys ['a'], got keys ['a'] "
        "(default_factory <class 'list'> vs <class 'int'>)",
    ),
    ("static", [1, treekit.tree], [1, "relu"], None),  # a module is a leaf: no error
]


@pytest.mark.parametrize(("name", "tree", "rest", "message"), MISMATCHES, ids=lambda x: x if isinstance(x, str) else "")
def test_tree_map_mismatch_messages(name: str, tree: Any, rest: Any, message: str | None) -> None:
    if message is None:
        _map(tree, rest)
        return
    with pytest.raises(StructureMismatchError, match=f"^{re.escape(message)}$") as info:
        _map(tree, rest)
    assert isinstance(info.value, ValueError)
    assert info.value.label == "rest[0]"
    assert "rest[0]" + keystr(info.value.path) == message.split(":")[0]


@pytest.mark.parametrize(("name", "tree", "rest", "message"), MISMATCHES, ids=lambda x: x if isinstance(x, str) else "")
def test_flatten_up_to_gives_the_same_messages_labelled_tree(
    name: str, tree: Any, rest: Any, message: str | None
) -> None:
    if message is None:
        return
    expected = "tree" + message.removeprefix("rest[0]")
    with pytest.raises(StructureMismatchError, match=f"^{re.escape(expected)}$"):
        treekit.tree_structure(tree).flatten_up_to(rest)


def test_the_hint_is_right() -> None:
    assert _map([None, 1], [1, 1], is_leaf=lambda x: x is None) == [None, None]


def test_a_registered_class_defined_twice_is_named_as_two_classes(
    registered: Callable[[type, Callable[[type], Any]], Any],
) -> None:
    source = "@dataclasses.dataclass\nclass Layer:\n    w: int\n"
    first: dict[str, Any] = {"dataclasses": __import__("dataclasses"), "__name__": "__main__"}
    second = dict(first)
    exec(source, first)  # the same cell run twice
    exec(source, second)
    old, new = first["Layer"], second["Layer"]
    registered(old, treekit.register_dataclass)
    registered(new, treekit.register_dataclass)
    message = f"b['l']: expected __main__.Layer, got __main__.Layer ({REDEFINED})"
    with pytest.raises(StructureMismatchError, match=f"^{re.escape(message)}$"):
        treekit.assert_same_structure({"l": old(1)}, {"l": new(1)})


def test_label_names_the_argument_and_path_is_an_attribute() -> None:
    with pytest.raises(StructureMismatchError) as info:
        treekit.tree_map(lambda *x: 0, {"a": [1]}, {"a": [1]}, {"a": [1, 2]})
    err = info.value
    assert (err.label, err.path) == ("rest[1]", (DictKey("a"),))
    assert (err.expected, err.got, err.detail) == ("list of length 1", "list of length 2", None)
    clone = pickle.loads(pickle.dumps(err))
    assert type(clone) is StructureMismatchError
    assert (str(clone), clone.label, clone.path) == (str(err), err.label, err.path)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: treekit.tree_broadcast([1, 2], [(0, 0)]),
            "full_tree: expected list of length 2, got list of length 1",
        ),
        (
            lambda: treekit.tree_transpose(
                treekit.tree_structure([0, 0]), treekit.tree_structure({"a": 0, "b": 0}), [{"a": 1, "b": 2}, {"a": 3}]
            ),
            "pytree_to_transpose[1]: expected dict with keys ['a', 'b'], got keys ['a'] (missing 'b')",
        ),
        (
            lambda: treekit.tree_transpose(
                treekit.tree_structure([0, 0]), treekit.tree_structure((0, 0)), [(1, 2), (3, [4])]
            ),
            "pytree_to_transpose[1][1]: expected a leaf, got list of length 1",
        ),
        (
            lambda: treekit.tree_map_with_path(lambda p, x, y: x, {"w": (1,)}, {"w": (1, 2)}),
            "rest[0]['w']: expected tuple of length 1, got tuple of length 2",
        ),
    ],
)
def test_other_entry_points_label_their_argument(call: Callable[[], Any], message: str) -> None:
    with pytest.raises(StructureMismatchError, match=f"^{re.escape(message)}$"):
        call()


# -- unflatten ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("tree", "leaves", "message"),
    [
        ([1, 2], [1, 2, 3], "leaves: expected 2 leaves, got 3 (for PyTreeDef([*, *]))"),
        ({"a": 1}, [], "leaves: expected 1 leaves, got 0 (for PyTreeDef({'a': *}))"),
        (None, [1], "leaves: expected 0 leaves, got 1 (for PyTreeDef(None))"),
        (
            {f"key{i}": i for i in range(20)},
            [],
            "leaves: expected 20 leaves, got 0 (for PyTreeDef({'key0': *, 'key1': *, 'key10': *, 'key11': *, "
            "'key12': *, 'key13': *, 'key14': *, 'key15': *, 'key16': *, ...)",
        ),
    ],
)
def test_unflatten_with_the_wrong_number_of_leaves(tree: Any, leaves: list[Any], message: str) -> None:
    treedef = treekit.tree_structure(tree)
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        treekit.tree_unflatten(treedef, leaves)
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        treedef.unflatten(iter(leaves))


# -- user functions that fail ---------------------------------------------------------------------------
class Bad:
    """A node whose flatten function misbehaves as ``mode`` says."""

    def __init__(self, mode: str) -> None:
        self.mode = mode


def _flatten_bad(b: Bad) -> Any:
    if b.mode == "raise":
        raise RuntimeError("boom")
    if b.mode == "not_a_pair":
        return 3
    if b.mode == "triple":
        return ((), None, 1)
    if b.mode == "not_iterable":
        return 5, None
    return (1,), None


@pytest.fixture
def bad_node(registered: Callable[[type, Callable[[type], Any]], Any]) -> None:
    registered(Bad, lambda c: treekit.register_pytree_node(c, _flatten_bad, lambda _, ch: Bad("ok")))


BAD_FLATTEN = [
    ("raise", RuntimeError, "boom"),
    (
        "not_a_pair",
        ValueError,
        "the flatten function registered for Bad returned int 3; expected a (children, node data) pair",
    ),
    (
        "triple",
        ValueError,
        "the flatten function registered for Bad returned tuple ((), None, 1); expected a (children, node data) pair",
    ),
    (
        "not_iterable",
        ValueError,
        "the flatten function registered for Bad returned children of type int; expected an iterable",
    ),
]


@pytest.mark.usefixtures("bad_node")
@pytest.mark.parametrize(("mode", "error", "message"), BAD_FLATTEN, ids=[m for m, _, _ in BAD_FLATTEN])
@pytest.mark.parametrize(
    ("call", "where"),
    [
        (lambda bad: treekit.tree_leaves({"a": [0, bad]}), "tree['a'][1]"),
        (lambda bad: treekit.tree_leaves_with_path({"a": [0, bad]}), "tree['a'][1]"),
        (lambda bad: treekit.tree_map(lambda x, y: x, {"a": [0, 1]}, {"a": [0, bad]}), None),  # a leaf there
        (lambda bad: treekit.tree_map(lambda x, y: x, {"a": [0, Bad("ok")]}, {"a": [0, bad]}), "rest[0]['a'][1]"),
        (lambda bad: treekit.tree_structure([Bad("ok")]).flatten_up_to([bad]), "tree[0]"),
        (lambda bad: treekit.tree_structure([[0]]).flatten_up_to([bad]), "tree[0]"),
    ],
    ids=["leaves", "leaves_with_path", "map_rest_leaf", "map_rest_node", "flatten_up_to", "flatten_up_to_wrong_type"],
)
def test_a_failing_flatten_function_keeps_its_class_with_a_note_naming_type_and_path(
    mode: str, error: type, message: str, call: Callable[[Bad], Any], where: str | None
) -> None:
    """A user's exception comes out as itself (jax: the same); a malformed return is a ValueError
    (jax's class); either way a PEP 678 note names the node type and the key path."""
    if where is None:
        call(Bad(mode))
        return
    with pytest.raises(error) as info:
        call(Bad(mode))
    assert type(info.value) is error
    assert str(info.value).split("\n")[0] == message
    assert info.value.__notes__ == [f"{where}: raised while flattening Bad"]


def test_flatten_with_keys_returning_non_pairs(registered: Callable[[type, Callable[[type], Any]], Any]) -> None:
    registered(Bad, lambda c: treekit.register_pytree_with_keys(c, lambda b: ([1, 2], None), lambda _, ch: Bad("ok")))
    message = (
        "the flatten_with_keys function registered for Bad returned 1 among its children; "
        "expected (key entry, child) pairs"
    )
    for call in (treekit.tree_leaves, treekit.tree_leaves_with_path):
        with pytest.raises(ValueError) as info:
            call([Bad("x")])
        assert str(info.value).split("\n")[0] == message
        assert info.value.__notes__ == ["tree[0]: raised while flattening Bad"]


def test_a_failing_unflatten_function_keeps_its_class_with_a_note_naming_the_type(
    registered: Callable[[type, Callable[[type], Any]], Any],
) -> None:
    def unflatten(data: Any, children: Any) -> Any:
        raise KeyError("nope")

    registered(Bad, lambda c: treekit.register_pytree_node(c, lambda b: ((1,), "d"), unflatten))
    with pytest.raises(KeyError, match="nope") as info:
        treekit.tree_map(lambda x: x, [Bad("x")])
    assert info.value.__notes__ == ["raised by the unflatten function registered for Bad (node data 'd', 1 child)"]


# -- cycles -----------------------------------------------------------------------------------------------
class Loop:
    """A custom node holding a list of children (which may hold the node itself)."""

    def __init__(self, kids: list[Any]) -> None:
        self.kids = kids


def _cyclic_list() -> Any:
    tree: list[Any] = [1, [2]]
    tree[1].append(tree)
    return tree


def _cyclic_dict() -> Any:
    tree: dict[str, Any] = {"x": {"y": None}}
    tree["x"]["y"] = tree["x"]
    return tree


def _cyclic_custom() -> Any:
    inner = Loop([])
    outer = Loop([1, inner])
    inner.kids.append(outer)
    return {"root": outer}


CYCLES = [
    (
        _cyclic_list,
        "tree[1][1]: expected a tree, got a cycle (this list is the same object as its ancestor tree)",
        (SequenceKey(1), SequenceKey(1)),
        (),
    ),
    (
        _cyclic_dict,
        "tree['x']['y']: expected a tree, got a cycle (this dict is the same object as its ancestor tree['x'])",
        (DictKey("x"), DictKey("y")),
        (DictKey("x"),),
    ),
    (
        _cyclic_custom,
        "tree['root'][<flat index 1>][<flat index 0>]: expected a tree, got a cycle "
        "(this Loop is the same object as its ancestor tree['root'])",
        (DictKey("root"), treekit.FlattenedIndexKey(1), treekit.FlattenedIndexKey(0)),
        (DictKey("root"),),
    ),
]

CALLS: list[Callable[[Any], Any]] = [
    treekit.tree_leaves,
    treekit.tree_structure,
    treekit.tree_leaves_with_path,
    lambda t: treekit.tree_map(lambda x: x, t),
    lambda t: treekit.tree_map_with_path(lambda p, x: x, t),
    lambda t: treekit.tree_reduce(lambda a, b: a, t, 0),
    treekit.tree_all,
]


@pytest.fixture
def loop_node(registered: Callable[[type, Callable[[type], Any]], Any]) -> None:
    registered(Loop, lambda c: treekit.register_pytree_node(c, lambda n: (n.kids, None), lambda _, ch: Loop(ch)))


@pytest.mark.usefixtures("loop_node")
@pytest.mark.parametrize(("make", "message", "path", "ancestor"), CYCLES, ids=["list", "dict", "custom"])
@pytest.mark.parametrize(
    "call", CALLS, ids=["leaves", "structure", "leaves_with_path", "map", "map_with_path", "reduce", "all"]
)
def test_cycles_raise_naming_where_they_close(
    make: Callable[[], Any], message: str, path: tuple[Any, ...], ancestor: tuple[Any, ...], call: Callable[[Any], Any]
) -> None:
    with pytest.raises(TreeCycleError, match=f"^{re.escape(message)}$") as info:
        call(make())
    err = info.value
    assert isinstance(err, ValueError)
    assert (err.label, err.path, err.ancestor) == ("tree", path, ancestor)
    clone = pickle.loads(pickle.dumps(err))
    assert (str(clone), clone.path, clone.ancestor) == (str(err), err.path, err.ancestor)


def test_a_list_holding_itself() -> None:
    tree: list[Any] = [0]
    tree.append(tree)
    message = "tree[1]: expected a tree, got a cycle (this list is the same object as its ancestor tree)"
    with pytest.raises(TreeCycleError, match=f"^{re.escape(message)}$"):
        treekit.tree_leaves(tree)


@pytest.mark.parametrize("depth", [1, 999, 1000, 1001, 2500])
def test_a_cycle_closing_deep_down_names_where_it_first_closes(depth: int) -> None:
    # Cycles are looked for when the walk's stack has doubled in depth; the error is the same.
    chain: list[list[Any]] = [[0]]
    for _ in range(depth):
        chain[-1].append([1])
        chain.append(chain[-1][1])
    chain[-1].append(chain[depth // 2])
    path = (SequenceKey(1),) * (depth + 1)
    message = (
        f"tree{keystr(path)}: expected a tree, got a cycle "
        f"(this list is the same object as its ancestor tree{keystr(path[: depth // 2])})"
    )
    for call in (treekit.tree_leaves, treekit.tree_leaves_with_path):
        with pytest.raises(TreeCycleError, match=f"^{re.escape(message)}$") as info:
            call(chain[0])
        assert (info.value.path, info.value.ancestor) == (path, path[: depth // 2])


def test_the_guided_walk_stops_at_the_treedef_on_a_cyclic_rest_tree() -> None:
    cyclic = _cyclic_list()
    out = treekit.tree_map(lambda x, y: y, [1, [2, 3]], cyclic)
    assert out[0] == 1 and out[1][0] == 2 and out[1][1] is cyclic
    with pytest.raises(StructureMismatchError, match=re.escape("rest[0][1][1][1]: expected list of length 1, got")):
        treekit.tree_map(lambda x, y: x, [1, [2, [3, [4]]]], cyclic)


def test_cycles_in_a_fresh_interpreter_raise_and_leave_it_working() -> None:
    # A hang or a crash of the interpreter would fail here (timeout, return code), not hang pytest.
    script = textwrap.dedent(
        """
        import treekit
        tree = [1, {"a": [2]}]
        tree[1]["a"].append(tree)
        for call in (treekit.tree_leaves, treekit.tree_leaves_with_path, treekit.tree_structure,
                     lambda t: treekit.tree_map(lambda x: x, t)):
            try:
                call(tree)
            except treekit.TreeCycleError as err:
                print(err)
            else:
                raise SystemExit("no error")
        print(treekit.tree_leaves([1, [2, 3]]))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    message = "tree[1]['a'][1]: expected a tree, got a cycle (this list is the same object as its ancestor tree)"
    assert done.stdout.splitlines() == [message] * 4 + ["[1, 2, 3]"]


def test_a_wide_container_holding_itself_is_caught_early() -> None:
    # Each round of the cycle adds 100,000 leaves: looking for cycles by depth alone would
    # first walk 1,000 rounds (10^8 leaves). The subprocess times out instead of hanging pytest.
    script = textwrap.dedent(
        """
        import treekit
        wide = list(range(100_000))
        wide.append(wide)
        try:
            treekit.tree_leaves({"w": wide})
        except treekit.TreeCycleError as err:
            print(err)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    message = "tree['w'][100000]: expected a tree, got a cycle (this list is the same object as its ancestor tree['w'])"
    assert done.stdout.splitlines() == [message]


def _run_capped(script: str, timeout: float = 60) -> list[str]:
    """Run ``script`` in a fresh interpreter with 1 GiB of address space; its output lines.

    Under the sanitizer run (``.ci/sanitize``) AddressSanitizer has reserved terabytes of
    address space (and of data segment) before ``script`` starts, so no RLIMIT_AS can be set:
    there the cap is 1 GiB of data segment (RLIMIT_DATA) more than the interpreter has at start.
    """
    import os

    if os.environ.get("TREEKIT_SANITIZER"):
        cap = (
            "import re, resource\n"
            "data = int(re.search(r'^VmData:\\s+(\\d+) kB', open('/proc/self/status').read(), re.M)[1]) << 10\n"
            "resource.setrlimit(resource.RLIMIT_DATA, (data + (1 << 30), data + (1 << 30)))\n"
        )
    else:
        cap = "import resource\nresource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
    capped = cap + textwrap.dedent(script)
    done = subprocess.run([sys.executable, "-c", capped], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()


def test_a_wide_container_holding_itself_as_its_first_child_is_caught_at_once() -> None:
    # Each level of the cycle flattens the whole width again before going one level deeper:
    # looking for cycles only every 1,000 levels took 38 s and 3 GB for 100,000 keys.
    lines = _run_capped(
        """
        import treekit
        wide = {f"k{i:06}": i for i in range(100_000)}
        wide["a"] = wide
        first = [wide, *range(100_000)]
        first[0] = first
        for tree in (wide, {"w": first}):
            for flatten in (treekit.tree_leaves, treekit.tree_leaves_with_path, treekit.tree_structure):
                try:
                    flatten(tree)
                except treekit.TreeCycleError as err:
                    print(err)
        """
    )
    own = "tree['a']: expected a tree, got a cycle (this dict is the same object as its ancestor tree)"
    first = "tree['w'][0]: expected a tree, got a cycle (this list is the same object as its ancestor tree['w'])"
    assert lines == [own] * 3 + [first] * 3


def test_an_endless_tree_stops_at_the_depth_limit_not_at_memory() -> None:
    # A flatten function that makes a new child each time: no cycle to find, the tree just
    # goes on (on main it filled memory: MemoryError after 40 s at a 3 GB cap). jax stops at
    # Python's recursion limit (its walker recurses); treekit walks 100,000-deep trees, so it
    # stops at MAX_DEPTH, long before memory runs out.
    lines = _run_capped(
        """
        import treekit
        from treekit.core._traverse import MAX_DEPTH
        class Endless:
            pass
        treekit.register_pytree_node(Endless, lambda e: ((Endless(),), None), lambda _, c: Endless())
        try:
            treekit.tree_leaves({"e": Endless()})
        except ValueError as err:
            print(type(err).__name__, MAX_DEPTH)
            print(err)
        """
    )
    assert lines[0] == "ValueError 250000"
    index = "[<flat index 0>]"
    assert lines[1] == (
        f"tree['e']{index * 3}...{index * 4}: expected a tree at most 250,000 levels deep, got a deeper one "
        "(a flatten function that makes a new child each time makes an endless tree)"
    )


def test_the_depth_limit_counts_nodes_from_the_root(monkeypatch: pytest.MonkeyPatch) -> None:
    from treekit.core import _traverse

    monkeypatch.setattr(_traverse, "MAX_DEPTH", 5)
    assert treekit.tree_leaves(_nested(5)) == [0]  # the leaf's key path has 5 entries
    assert treekit.tree_leaves(_nested(5), is_leaf=lambda x: False) == [0]
    message = "tree[0][0][0][0][0]: expected a tree at most 5 levels deep, got a deeper one"
    for flatten in (treekit.tree_leaves, treekit.tree_leaves_with_path, treekit.tree_structure):
        with pytest.raises(ValueError, match=re.escape(message)):
            flatten(_nested(7))


# -- very deep trees ------------------------------------------------------------------------------------
def _nested(depth: int, leaf: Any = 0) -> Any:
    tree = leaf
    for _ in range(depth):
        tree = [tree]
    return tree


def _depth_and_leaf(tree: Any) -> tuple[int, Any]:
    depth = 0
    while type(tree) is list:
        (tree,) = tree
        depth += 1
    return depth, tree


@pytest.mark.parametrize("depth", [10_000, 100_000])
def test_very_deep_lists_flatten_map_and_unflatten(depth: int) -> None:
    tree = _nested(depth)
    leaves, treedef = treekit.tree_flatten(tree)
    assert leaves == [0]
    assert (treedef.num_leaves, treedef.num_nodes) == (1, depth + 1)
    assert _depth_and_leaf(treekit.tree_map(lambda x: x + 1, tree)) == (depth, 1)
    assert _depth_and_leaf(treedef.unflatten(["x"])) == (depth, "x")


def test_ten_thousand_deep_treedefs_and_several_trees() -> None:
    depth = 10_000
    tree = _nested(depth)
    treedef = treekit.tree_structure(tree)
    assert _depth_and_leaf(treekit.tree_map(lambda x, y: y, tree, _nested(depth, 5))) == (depth, 5)
    assert treedef == treekit.tree_structure(_nested(depth, 1)) and hash(treedef) == hash(treekit.tree_structure(tree))
    assert treedef != treekit.tree_structure(_nested(depth + 1))
    assert repr(treedef) == f"PyTreeDef({'[' * depth}*{']' * depth})"
    assert pickle.loads(pickle.dumps(treedef)) == treedef
    assert treedef.compose(treekit.tree_structure((0, 0))).num_leaves == 2


def test_ten_thousand_deep_with_paths() -> None:
    depth = 10_000
    tree = _nested(depth)
    ((path, leaf),) = treekit.tree_leaves_with_path(tree)
    assert leaf == 0 and path == (SequenceKey(0),) * depth
    out = treekit.tree_map_with_path(lambda p, x: len(p), tree)
    assert _depth_and_leaf(out) == (depth, depth)
    assert len(treekit.tree_structure(tree).children()) == 1


def test_ten_thousand_deep_mismatch_names_the_path() -> None:
    depth = 10_000
    with pytest.raises(StructureMismatchError) as info:
        treekit.tree_map(lambda x, y: x, _nested(depth, [0]), _nested(depth, (0,)))
    assert info.value.path == (SequenceKey(0),) * depth
    assert str(info.value) == "rest[0]" + "[0]" * depth + ": expected list of length 1, got tuple of length 1"


def test_ten_thousand_deep_dicts_and_cycle_at_the_bottom() -> None:
    depth = 10_000
    tree: dict[str, Any] = {}
    node = tree
    for _ in range(depth):
        node["k"] = {}
        node = node["k"]
    assert treekit.tree_leaves(tree) == []
    node["k"] = tree
    with pytest.raises(TreeCycleError) as info:
        treekit.tree_leaves(tree)
    assert info.value.path == (DictKey("k"),) * (depth + 1) and info.value.ancestor == ()


def test_array_leaves_are_shown_by_dtype_and_shape_not_contents() -> None:
    np = pytest.importorskip("numpy")
    message = "rest[0]['w']: expected list of length 2, got leaf f32[2,3]"
    with pytest.raises(StructureMismatchError, match=re.escape(message) + "$"):
        treekit.tree_map(lambda a, b: a, {"w": [1, 2]}, {"w": np.zeros((2, 3), np.float32)})


# -- a user function raising on a leaf: the error keeps its class and gets a note -----------------
LAYERS = {"layers": [{"w": 1, "b": 2}, {"w": 0, "b": 4}], "scale": 5}


def _div(x: Any, *ys: Any) -> Any:
    return 10 // x


def test_f_raising_in_tree_map_keeps_the_exception_and_notes_the_key_path() -> None:
    error = ZeroDivisionError("no")
    calls: list[Any] = []

    def f(x: Any) -> Any:
        calls.append(x)
        if x == 0:
            raise error
        return x

    with pytest.raises(ZeroDivisionError) as info:
        treekit.tree_map(f, LAYERS)
    assert info.value is error
    assert error.__notes__ == ["tree_map: f raised at ['layers'][1]['w'] (arguments from tree)"]
    assert calls == [2, 1, 4, 0]  # f is not called again to find the leaf


def test_the_note_names_the_other_trees_and_is_printed() -> None:
    with pytest.raises(ZeroDivisionError) as info:
        treekit.tree_map(_div, LAYERS, LAYERS, LAYERS)
    note = "tree_map: f raised at ['layers'][1]['w'] (arguments from tree, rest[0], rest[1])"
    assert info.value.__notes__ == [note]
    import traceback

    assert traceback.format_exception(info.value)[-1] == note + "\n"


def test_tree_map_with_path_and_is_leaf() -> None:
    with pytest.raises(TypeError) as info:
        treekit.tree_map_with_path(lambda p, x, y: x + y, [[1, None], 2], [[1, 1], 2], is_leaf=lambda x: x is None)
    assert info.value.__notes__ == [
        "tree_map_with_path: f raised at [0][1] (arguments: the key path, leaves from tree, rest[0])"
    ]
    with pytest.raises(TypeError) as info:
        treekit.tree_map(lambda x: x + 1, [[1, None], 2], is_leaf=lambda x: x is None)
    assert info.value.__notes__ == ["tree_map: f raised at [0][1] (arguments from tree)"]


def test_a_leaf_at_the_root_and_nested_maps() -> None:
    with pytest.raises(ZeroDivisionError) as info:
        treekit.tree_map(_div, 0)
    assert info.value.__notes__ == ["tree_map: f raised at the root (arguments from tree)"]
    with pytest.raises(ZeroDivisionError) as info:
        inner = lambda row: treekit.tree_map(_div, row)  # noqa: E731
        treekit.tree_map(inner, ([1], {"k": 0}), is_leaf=lambda x: type(x) is not tuple)
    assert info.value.__notes__ == [
        "tree_map: f raised at ['k'] (arguments from tree)",
        "tree_map: f raised at [1] (arguments from tree)",
    ]


@pytest.mark.parametrize(("initializer", "path"), [((), "[1]"), ((100,), "[0]")])
def test_tree_reduce_names_the_leaf_being_added(initializer: tuple[Any, ...], path: str) -> None:
    def add(acc: Any, x: Any) -> Any:
        if acc + x > 5:
            raise OverflowError("too big")
        return acc + x

    with pytest.raises(OverflowError) as info:
        treekit.tree_reduce(add, [3, 4, 0], *initializer)
    assert info.value.__notes__ == [
        f"tree_reduce: function raised at {path} (arguments: the value so far, that leaf of tree)"
    ]
    with pytest.raises(TypeError, match="empty") as empty:
        treekit.tree_reduce(add, [])
    assert not hasattr(empty.value, "__notes__")


def test_tree_math_names_the_operation_and_the_leaf() -> None:
    np = pytest.importorskip("numpy")
    a = {"w": np.zeros((2, 3)), "b": np.zeros(3)}
    b = {"w": np.zeros((3, 2)), "b": np.zeros(3)}
    with pytest.raises(ValueError, match="broadcast") as info:
        treekit.tree_add(a, b)
    assert info.value.__notes__ == ["tree_add: x + y raised at ['w'] (leaves of tree_x, tree_y)"]
    with pytest.raises(ValueError) as info:
        treekit.tree_add(a, a, b)
    assert info.value.__notes__ == ["tree_add: x + y + ... raised at ['w'] (leaves of tree_x, tree_y, other_trees[0])"]
    with pytest.raises(TypeError) as info:
        treekit.tree_scale(2.0, {"w": np.zeros(2), "name": object()})
    assert info.value.__notes__ == ["tree_scale: scalar * x raised at ['name'] (leaves of tree)"]


def test_params_helpers_name_the_leaf() -> None:
    pytest.importorskip("numpy")
    from treekit import params

    with pytest.raises(KeyError) as info:
        params.partition({"a": 1, "b": {}}, lambda x: {}[x])
    assert info.value.__notes__ == ["partition: filter_spec raised at ['a'] (the leaf of tree)"]

    def sampler(gen: Any, shape: Any, dtype: Any) -> Any:
        raise RuntimeError("bad sampler")

    with pytest.raises(RuntimeError) as info:
        params.tree_random_like(0, [1.0], sampler)
    assert info.value.__notes__ == [
        "tree_random_like: drawing the leaf raised at [0] (sampler on the shape and dtype of target_tree's leaf)"
    ]


# -- issue 13 item 13: errors about user objects, and arguments, say what is wrong -------------
class BadRepr:
    """An object whose repr raises (its == is identity, as object's)."""

    def __repr__(self) -> str:
        raise RuntimeError("repr boom")


BAD = "<BadRepr object (its repr raised RuntimeError)>"


def test_mismatch_messages_survive_objects_whose_repr_raises(registered: Any) -> None:
    key = BadRepr()
    with pytest.raises(
        StructureMismatchError, match=re.escape("rest[0][0]: expected list of length 1, got leaf of type BadRepr")
    ):
        _map([[1]], [BadRepr()])
    with pytest.raises(
        StructureMismatchError, match=re.escape(f"rest[0]: expected dict with keys ['a'], got keys [{BAD}]")
    ):
        _map({"a": 1}, {key: 1})
    msg = f"rest[0][{BAD}]: expected list of length 1, got list of length 2"
    with pytest.raises(StructureMismatchError, match=re.escape(msg)):
        _map({key: [1]}, {key: [1, 2]})

    class Node:
        def __init__(self, data: Any) -> None:
            self.data = data

    registered(Node, lambda cls: treekit.register_pytree_node(cls, lambda n: ((), n.data), lambda d, c: cls(d)))
    msg = f"rest[0][0]: expected Node with 0 children and node data {BAD}, got leaf 1"
    with pytest.raises(StructureMismatchError, match=re.escape(msg)):
        _map([Node(BadRepr())], [1])


def test_mismatched_dict_keys_are_compared_in_linear_time() -> None:
    n = 200_000  # compared pairwise in lists: 4 * 10**10 comparisons
    a, b = dict.fromkeys(range(n), 0), dict.fromkeys(range(1, n + 1), 0)
    with pytest.raises(StructureMismatchError, match=re.escape("(missing 0; extra 200000)")):
        _map(a, b)


class Shortener:
    """A node whose flatten function empties the list ``victim`` (as careless user code may)."""

    def __init__(self, victim: list[Any]) -> None:
        self.victim = victim


@pytest.fixture
def shortener(registered: Any) -> None:
    registered(
        Shortener,
        lambda cls: treekit.register_pytree_node(cls, lambda s: (s.victim.clear() or [], None), lambda d, c: None),
    )


@pytest.mark.usefixtures("shortener")
@pytest.mark.parametrize("with_path", [False, True])
def test_a_flatten_function_that_shortens_the_list_being_walked(with_path: bool) -> None:
    inner: list[Any] = [0, 1, 2]
    inner[0] = Shortener(inner)
    tree = {"a": [5, inner]}
    msg = (
        "tree['a'][1]: expected the list to keep its 3 children while the tree is walked, got 0 "
        "(a flatten function or is_leaf changed it)"
    )
    with pytest.raises(ValueError, match=re.escape(msg)):
        treekit.tree_leaves_with_path(tree) if with_path else treekit.tree_leaves(tree)
    root: list[Any] = [0, 1]
    root[0] = Shortener(root)
    with pytest.raises(ValueError, match=re.escape("tree: expected the list to keep its 2 children")):
        treekit.tree_structure(root)


class Plain:
    pass


@pytest.mark.parametrize(
    ("call", "msg"),
    [
        (
            lambda: treekit.register_pytree_node(Plain, None, None),
            "flatten_func: expected a function, got NoneType",
        ),
        (
            lambda: treekit.register_pytree_node(Plain, lambda x: ((), None), 3),
            "unflatten_func: expected a function, got int",
        ),
        (
            lambda: treekit.register_pytree_node(3, lambda x: x, lambda d, c: c),
            "nodetype: expected a class, got int",
        ),
        (
            lambda: treekit.register_pytree_node(Plain, len, len, flatten_with_keys_func=1),
            "flatten_with_keys_func: expected a function or None, got int",
        ),
        (
            lambda: treekit.register_pytree_with_keys(Plain, None, len),
            "flatten_with_keys: expected a function, got NoneType",
        ),
        (
            lambda: treekit.register_pytree_node_class(Plain),
            "cls.tree_flatten: expected a function, got NoneType",
        ),
        (
            lambda: treekit.register_pytree_with_keys_class(Plain()),
            "cls: expected a class, got Plain",
        ),
        (lambda: treekit.register_static("x"), "cls: expected a class, got str"),
        (
            lambda: treekit.register_dataclass(Plain, data_fields=3, meta_fields=[]),
            "data_fields: expected a sequence of attribute names (str), got int",
        ),
        (
            lambda: treekit.register_dataclass(Plain, data_fields=[1], meta_fields=[]),
            "data_fields: expected a sequence of attribute names (str), got other items",
        ),
    ],
)
def test_bad_registration_arguments_are_a_type_error_naming_the_argument(call: Callable[[], Any], msg: str) -> None:
    with pytest.raises(TypeError, match=re.escape(msg)):
        call()
    assert not treekit.is_tree_node(Plain)  # nothing was registered
    assert treekit.tree_leaves([Plain(), 1])[1] == 1


@pytest.mark.parametrize(
    ("call", "msg"),
    [
        (lambda: treekit.tree_unflatten([1], [1]), "treedef: expected a TreeDef, got list [1]"),
        (lambda: treekit.treedef_children(3), "treedef: expected a TreeDef, got int 3"),
        (lambda: treekit.tree_structure([1]).compose("x"), "inner: expected a TreeDef, got str 'x'"),
        (lambda: treekit.tree_transpose(1, None, [1]), "outer_treedef: expected a TreeDef, got int 1"),
        (lambda: treekit.treedef_tuple([BadRepr()]), f"treedefs[0]: expected a TreeDef, got BadRepr {BAD}"),
    ],
)
def test_a_non_treedef_where_a_treedef_is_expected_is_a_type_error(call: Callable[[], Any], msg: str) -> None:
    with pytest.raises(TypeError, match=re.escape(msg)):
        call()


class OddShape:
    """A leaf with a dtype whose ``.shape`` is not a tuple."""

    shape = 5
    dtype = "float32"


def test_param_helpers_name_the_argument_or_path_that_is_wrong() -> None:
    np = pytest.importorskip("numpy")
    from treekit import optim, params

    cases: list[tuple[Callable[[], Any], type[Exception], str]] = [
        (lambda: params.init_mlp_params([0, 4], rng=0), ValueError, "layer_widths[0]: expected an int >= 1, got 0"),
        (lambda: params.init_mlp_params([3], rng=0), ValueError, "layer_widths: expected at least 2 widths"),
        (lambda: params.init_mlp_params([3, 2.5], rng=0), TypeError, "layer_widths[1]: expected an int, got float 2.5"),
        (lambda: params.init_mlp_params("34", rng=0), TypeError, "layer_widths: expected a sequence of ints, got str"),
        (lambda: params.mlp_forward([], 1), ValueError, "params: expected at least one layer, got none"),
        (
            lambda: params.mlp_forward(params.init_mlp_params([3, 4, 1], rng=0), np.ones((2, 5))),
            ValueError,
            "params[0]: expected weights of shape (5, n) and biases of shape (n,) for inputs of shape (2, 5), "
            "got weights (3, 4) and biases (4,)",
        ),
        (
            lambda: params.mlp_forward([{"w": 1}], np.ones((2, 5))),
            TypeError,
            "params[0]: expected a dict with keys 'weights' and 'biases', got {'w': 1}",
        ),
        (
            lambda: params.tree_stack([{"a": np.zeros(2)}, {"a": np.zeros(2)}, {"a": np.zeros(3)}]),
            ValueError,
            "trees[2]['a']: expected a leaf of shape (2,) (as trees[0]['a']), got (3,)",
        ),
        (
            lambda: optim.apply_updates({"w": [np.ones(3)]}, {"w": [np.ones(2)]}),
            ValueError,
            "updates['w'][0]: expected an update that adds to params['w'][0] (f64[3]), got f64[2]",
        ),
        (
            lambda: optim.apply_updates({"w": "a"}, {"w": 0.5}),
            TypeError,
            "updates['w']: expected an update that adds to params['w'] (str), got float",
        ),
    ]
    for call, kind, msg in cases:
        with pytest.raises(kind, match=re.escape(msg)):
            call()


def test_a_python_float_param_is_updated_as_optax_does() -> None:
    np = pytest.importorskip("numpy")
    from treekit import optim

    new = optim.apply_updates({"w": 1.0, "b": [2]}, {"w": 0.5, "b": [np.float32(1.5)]})
    assert new == {"w": 1.5, "b": [3]}
    assert new["b"][0].dtype == np.asarray(2).dtype


def test_a_leaf_whose_shape_is_not_a_tuple_is_a_plain_leaf() -> None:
    table = treekit.summary({"x": OddShape(), "y": [1.0]})
    assert table.splitlines()[1].split() == ["['x']", "-", "OddShape", "-", "-"]
    assert "['x']: <" in treekit.format_tree({"x": OddShape()})


# -- user code that changes what the walk holds, while it walks ---------------------------------
class _ShrinkingKey:
    """A dict key whose ``__lt__`` (called while the dict's keys are sorted) drops ``victim``."""

    owner: dict[Any, Any] = {}  # noqa: RUF012

    def __init__(self, v: int) -> None:
        self.v = v

    def __hash__(self) -> int:
        return hash(self.v)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ShrinkingKey) and other.v == self.v

    def __lt__(self, other: _ShrinkingKey) -> bool:
        _ShrinkingKey.owner.pop(_ShrinkingKey(9), None)
        return self.v < other.v


def test_a_dict_that_loses_a_key_while_it_is_flattened_raises_or_is_read_whole() -> None:
    """The native core reads a dict's keys and values in one go; where a key's code ran while
    it sorted them, it hands the dict to the pure core's flatten function, which reads the dict
    as it is then. The pure core reads the values after sorting the keys, and raises if the
    dict changed meanwhile. Never a treedef whose keys and children disagree."""
    d = {_ShrinkingKey(2): "a", _ShrinkingKey(1): "b", _ShrinkingKey(9): "c"}
    _ShrinkingKey.owner = d
    if treekit.backend() == "native":
        leaves, treedef = treekit.tree_flatten({"x": d})
        assert treekit.tree_unflatten(treedef, leaves) == {"x": d} and len(d) == 2
        return
    msg = "expected the dict to keep its 3 keys while it is flattened, got 2 (code run meanwhile changed it"
    with pytest.raises(RuntimeError, match=re.escape(msg)) as info:
        treekit.tree_leaves({"x": d})
    assert info.value.__notes__ == ["tree['x']: raised while flattening dict"]


def test_a_list_shortened_with_its_parent_is_named_by_index() -> None:
    inner = [1, 2, 3]
    outer = [inner, 4]

    def is_leaf(x: Any) -> bool:
        if x == 1:
            inner.clear()
            outer.clear()
        return False

    msg = "tree[0]: expected the list to keep its 3 children while the tree is walked, got 0"
    for call in (treekit.tree_leaves, treekit.tree_flatten_with_path):
        inner[:] = [1, 2, 3]
        outer[:] = [inner, 4]
        with pytest.raises(ValueError, match=re.escape(msg)):
            call(outer, is_leaf=is_leaf)


class _Emptying:
    """Node data whose ``__eq__`` empties the children list its node's flatten function gave."""

    def __init__(self, owner: list[Any] | None = None) -> None:
        self.owner = owner

    def __eq__(self, other: object) -> bool:
        if self.owner is not None:
            self.owner.clear()
        return isinstance(other, _Emptying)

    __hash__ = None  # type: ignore[assignment]


class _Bag:
    def __init__(self, children: list[Any]) -> None:
        self.children = children


def test_node_data_eq_that_empties_the_children_is_a_mismatch(registered: Any) -> None:
    registered(
        _Bag,
        lambda cls: treekit.register_pytree_node(
            cls, lambda b: (b.children, _Emptying(b.children)), lambda d, c: cls(list(c))
        ),
    )
    treedef = treekit.tree_structure([_Bag([1, 2]), 3])
    for call in (
        lambda: treedef.flatten_up_to([_Bag([4, 5]), 6]),
        lambda: treekit.tree_map(lambda x, y: y, [_Bag([1, 2]), 3], [_Bag([4, 5]), 6]),
    ):
        with pytest.raises(StructureMismatchError, match=re.escape("[0]: expected _Bag with 2 children")):
            call()


def test_an_unflatten_function_that_empties_the_leaves_raises(registered: Any) -> None:
    leaves: list[Any] = []

    def unflatten(data: Any, children: Any) -> Any:
        leaves.clear()
        return _Bag(list(children))

    registered(_Bag, lambda cls: treekit.register_pytree_node(cls, lambda b: (b.children, None), unflatten))
    treedef = treekit.tree_structure([_Bag([1, 2]), 3, 4])
    msg = "leaves: expected the list to keep its 4 leaves while the tree is built, got 0 (an unflatten function"
    for _ in range(10):  # (the pure core compiles a builder for a structure built often)
        leaves[:] = ["a", "b", "c", "d"]
        with pytest.raises(ValueError, match=re.escape(msg)):
            treekit.tree_unflatten(treedef, leaves)

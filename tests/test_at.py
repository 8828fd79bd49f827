"""tree_get / tree_set / tree_at: laws over every key path of random trees, every key kind, errors."""

from __future__ import annotations

import re
from typing import Any, ClassVar, NamedTuple

import pytest
from hypothesis import given
from hypothesis import strategies as st
from param_trees import Pair, skeletons

from treekit import (
    DictKey,
    FlattenedIndexKey,
    GetAttrKey,
    SequenceKey,
    StructureKeyError,
    StructureMismatchError,
    keystr,
    register_pytree_node,
    tree_at,
    tree_get,
    tree_leaves,
    tree_leaves_with_path,
    tree_map,
    tree_set,
    tree_structure,
)
from treekit.params import flatten_dict, tree_get_all_with_path


def numbered(skeleton: Any) -> Any:
    """The skeleton with leaves 0, 1, 2, ...: each leaf identifies its position."""
    count = iter(range(10**6))
    return tree_map(lambda _: next(count), skeleton)


@given(skeletons)
def test_get_reaches_every_leaf_by_entries_and_by_keystr(skeleton: Any) -> None:
    tree = numbered(skeleton)
    for path, leaf in tree_leaves_with_path(tree):
        assert tree_get(tree, path) == leaf
        assert tree_get(tree, keystr(path)) == leaf
        if path:  # every prefix is the subtree above
            parent = tree_get(tree, path[:-1])
            assert tree_get(parent, path[-1:]) == leaf


@given(skeletons, st.data())
def test_set_replaces_exactly_one_leaf_and_keeps_the_input(skeleton: Any, data: st.DataObject) -> None:
    tree = numbered(skeleton)
    before = tree_leaves(tree)
    pairs = tree_leaves_with_path(tree)
    k = data.draw(st.integers(0, len(pairs) - 1))
    path = pairs[k][0]
    out = tree_set(tree, data.draw(st.sampled_from([path, keystr(path)])), "new")
    assert tree_structure(out) == tree_structure(tree)
    assert tree_leaves(out) == [*before[:k], "new", *before[k + 1 :]]
    assert tree_leaves(tree) == before
    assert tree_set(tree, path, before[k]) == tree


@given(skeletons, st.data())
def test_at_many_nodes_equals_sets_in_turn(skeleton: Any, data: st.DataObject) -> None:
    tree = numbered(skeleton)
    paths = [p for p, _ in tree_leaves_with_path(tree)]
    chosen = data.draw(st.lists(st.sampled_from(paths), min_size=1, max_size=3, unique=True))
    expected = tree
    for k, path in enumerate(chosen):
        expected = tree_set(expected, path, -k)

    def where(t: Any) -> tuple[Any, ...]:
        return tuple(tree_get(t, p) for p in chosen)

    assert tree_at(where, tree, [-k for k in range(len(chosen))]) == expected
    bumped = tree_at(where, tree, replace_fn=lambda x: x + 100)
    assert tree_leaves(bumped) == [x + 100 * (p in chosen) for p, x in tree_leaves_with_path(tree)]
    path = chosen[0]
    one = tree_at(lambda t: tree_get(t, path), tree, "new")
    assert one == tree_at(path, tree, "new") == tree_at(keystr(path), tree, "new") == tree_set(tree, path, "new")


@given(skeletons, st.sampled_from(["/", ".", "::"]))
def test_every_path_form_reaches_every_leaf(skeleton: Any, sep: str) -> None:
    tree = numbered(skeleton)
    for path, leaf in tree_leaves_with_path(tree):
        plain = tuple(_value(e) for e in path)
        for spelling in [path, keystr(path), plain, list(plain)]:
            assert tree_get(tree, spelling) == leaf
    try:
        flat = flatten_dict(tree, sep=sep)
    except ValueError:  # two leaves with the same flat key: nothing to look up
        return
    for key, leaf in flat.items():
        named = tree_get_all_with_path(tree, key) if sep not in key else []
        if len(named) > 1:  # a key without sep is a name (optax's form): found at several places
            with pytest.raises(StructureKeyError, match="places"):
                tree_get(tree, key, sep=sep)
            continue
        assert tree_get(tree, key, sep=sep) == (named[0][1] if named else leaf)
        assert tree_get(tree_set(tree, key, "new", sep=sep), key, sep=sep) == "new"



_FIELD = {DictKey: "key", SequenceKey: "idx", GetAttrKey: "name", FlattenedIndexKey: "key"}


def _value(entry: Any) -> Any:
    return getattr(entry, _FIELD[type(entry)])


class Opaque:
    """A registered node without keys: its children get FlattenedIndexKey entries."""

    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b

    def __eq__(self, other: object) -> bool:
        return type(other) is Opaque and (self.a, self.b) == (other.a, other.b)


def test_flattened_index_keys_go_through_the_registry(registered: Any) -> None:
    registered(Opaque, lambda cls: register_pytree_node(cls, lambda o: ((o.a, o.b), None), lambda _, c: Opaque(*c)))
    tree = {"o": Opaque(1, [2, 3])}
    path = (DictKey("o"), FlattenedIndexKey(1), SequenceKey(0))
    assert tree_leaves_with_path(tree)[1][0] == path
    for spelling in [path, keystr(path), "['o'][1][0]", (DictKey("o"), SequenceKey(1), SequenceKey(0))]:
        assert tree_get(tree, spelling) == 2
    assert tree_set(tree, "['o'][<flat index 0>]", 9) == {"o": Opaque(9, [2, 3])}
    assert tree == {"o": Opaque(1, [2, 3])}


CASES = [
    # (name, tree, path, value there)
    ("root by empty tuple", [1], (), [1]),
    ("root by empty string", [1], "", [1]),
    ("subtree", {"a": {"b": 1}}, "['a']", {"b": 1}),
    ("namedtuple attribute", Pair(1, Pair(2, 3)), ".second.first", 2),
    ("namedtuple by entries", Pair(1, 2), (GetAttrKey("second"),), 2),
    ("int dict key", {0: "x", "0": "y"}, "[0]", "x"),
    ("str dict key that looks like int", {0: "x", "0": "y"}, "['0']", "y"),
    ("key with a bracket inside", {"a]b": 1, "a": 2}, "['a]b']", 1),
    ("key whose repr has double quotes", {"w": 1, "w']['x": 2}, "[\"w']['x\"]", 2),
    ("None is a node with no children", {"a": None}, "['a']", None),
    ("tuple key", {(1, 2): "t"}, "[(1, 2)]", "t"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_paths(case: tuple[str, Any, Any, Any]) -> None:
    _, tree, path, value = case
    assert tree_get(tree, path) == value
    assert tree_get(tree_set(tree, path, "new"), path) == "new"


def test_jax_key_entries_work_too() -> None:
    jtu = pytest.importorskip("jax.tree_util")
    tree = [{"w": Pair(1, 2)}]
    for path, leaf in jtu.tree_leaves_with_path(tree):
        assert tree_get(tree, path) == leaf
        assert tree_get(tree, jtu.keystr(path)) == leaf


PARAMS = [{"weights": [[1.0]], "biases": [0.5]}]
ERRORS = [
    (
        lambda: tree_get(PARAMS, "[0]['weight']"),
        "tree[0]: expected a child ['weight'], got dict with keys ['biases', 'weights']",
    ),
    (lambda: tree_get(PARAMS, (SequenceKey(2),)), "tree: expected a child [2], got list of length 1"),
    (
        lambda: tree_get(PARAMS, "[0]['biases'][0][1]"),
        "tree[0]['biases'][0]: expected a node with a child [1], got leaf 0.5",
    ),
    (
        lambda: tree_set(PARAMS, "0.weights", 1),  # (a name, optax's form: tree_get gives None, as optax)
        "tree: expected a key named '0.weights', got none\n"
        "write key paths as keystr gives them (\"[0]['weights']\", \".layers[1]\"), as flatten_dict's keys "
        "('0/weights'), or as a tuple of keys ((0, 'weights'))",
    ),
    (
        lambda: tree_get(PARAMS, "0/weight"),
        "tree[0]: expected a child 'weight', got dict with keys ['biases', 'weights']\n"
        "write key paths as keystr gives them (\"[0]['weights']\", \".layers[1]\"), as flatten_dict's keys "
        "('0/weights'), or as a tuple of keys ((0, 'weights'))",
    ),
    (
        lambda: tree_get(PARAMS, [0, "biases", 0, 1]),
        "tree[0]['biases'][0]: expected a node with a child [1], got leaf 0.5",
    ),
    (lambda: tree_get(PARAMS, (0, "w")), "tree[0]: expected a child ['w'], got dict with keys ['biases', 'weights']"),
    (
        lambda: tree_set(PARAMS, "[0].weights", 1),
        "tree[0]: expected a child .weights, got dict with keys ['biases', 'weights']",
    ),
    (lambda: tree_at("[1]", PARAMS, 2), "pytree: expected a child [1], got list of length 1"),
    (lambda: tree_at((-2,), PARAMS, 2), "pytree: expected a child [-2], got list of length 1"),
]


@pytest.mark.parametrize(("call", "message"), ERRORS, ids=[m.splitlines()[0] for _, m in ERRORS])
def test_errors_name_the_deepest_existing_path(call: Any, message: str) -> None:
    with pytest.raises(StructureMismatchError, match=f"^{re.escape(message)}$"):
        call()


TYPE_ERRORS = [
    (
        lambda: tree_get(PARAMS, 0),
        "path: expected a key path (a tuple of key entries or keys, a keystr string or a flatten_dict key), got int",
    ),
]
REPLACE_ERRORS = [  # ValueError, as equinox's
    (lambda: tree_at("[0]", PARAMS), "tree_at: pass exactly one of replace and replace_fn"),
    (lambda: tree_at("[0]", PARAMS, 1, replace_fn=str), "tree_at: pass exactly one of replace and replace_fn"),
    (
        lambda: tree_at(lambda p: (p[0],), PARAMS, [1, 2]),
        "replace: expected 1 values (one per node where returns), got 2",
    ),
]


@pytest.mark.parametrize(("call", "message"), TYPE_ERRORS, ids=[m for _, m in TYPE_ERRORS])
def test_type_errors(call: Any, message: str) -> None:
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        call()


@pytest.mark.parametrize(("call", "message"), REPLACE_ERRORS, ids=[m for _, m in REPLACE_ERRORS])
def test_replace_errors_are_value_errors_as_equinox_s(call: Any, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        call()


# -- equinox's tree_at: where is a function of the tree, nodes found by identity ----------------
def test_equinox_examples() -> None:
    tree = [1, [2, {"a": 3, "b": 4}]]
    assert tree_at(lambda t: t[1][1]["a"], tree, 5) == [1, [2, {"a": 5, "b": 4}]]
    assert tree == [1, [2, {"a": 3, "b": 4}]]
    assert tree_at(lambda t: t[1], tree, "x") == [1, "x"]  # a whole subtree
    assert tree_at(lambda t: t, tree, "root") == "root"
    assert tree_at(lambda t: [t[0], t[1][0]], tree, replace_fn=lambda x: -x) == [-1, [-2, {"a": 3, "b": 4}]]
    assert tree_at(lambda t: (t[1], t[1]), tree, ("x", "y")) == [1, "y"]  # the same node twice: the last wins


def test_model_surgery_on_a_registered_dataclass(registered: Any) -> None:
    import dataclasses

    @dataclasses.dataclass
    class Linear:
        weight: Any
        bias: Any

    @dataclasses.dataclass
    class MLP:
        layers: list[Any]

    registered(Linear, __import__("treekit").register_dataclass)
    registered(MLP, __import__("treekit").register_dataclass)
    mlp = MLP([Linear(1, 2), Linear(3, 4)])
    out = tree_at(lambda m: m.layers[-1].weight, mlp, 30)
    assert out == MLP([Linear(1, 2), Linear(30, 4)])
    assert tree_at(lambda m: m.layers[-1], mlp, Linear(0, 0)) == MLP([Linear(1, 2), Linear(0, 0)])
    assert tree_at(".layers[1].weight", mlp, 30) == tree_at(("layers", -1, "weight"), mlp, 30) == out


CAPTURED = {"layers": [[1.0], [3.0]]}  # a tree that a where refers to by name, not through its argument
WHERE_ERRORS = [
    (
        lambda: tree_at(lambda x: tuple(v for v in x if type(v) is int), [1, 2, "s", 3], replace_fn=str),
        "where: expected a function of the structure of pytree, got one whose result depends on its leaves "
        "(equinox's rule: select by position, e.g. lambda m: m.layers[-1].weight)",
    ),
    (
        lambda: tree_at(lambda t: 5, [1, 2], 0),
        "where(pytree): expected a node or leaf of pytree, got 5, a value that is not part of pytree "
        "(made or computed by where)\n"
        "where must return parts of the tree it is given (or a tuple or list of them), "
        "e.g. lambda m: m.layers[-1].weight",
    ),
    (
        lambda: tree_at(lambda t: (t[0], [9]), [1, 2], (0, 0)),
        "where(pytree)[1]: expected a node or leaf of pytree, got [9], a value that is not part of pytree "
        "(made or computed by where)\n"
        "where must return parts of the tree it is given (or a tuple or list of them), "
        "e.g. lambda m: m.layers[-1].weight",
    ),
    (
        lambda: tree_at(lambda t: {"a": t[0]}, [1, 2], 0),  # a new node around a leaf: where's stand-in shows
        "where(pytree): expected a node or leaf of pytree, got {'a': <stand-in for the leaf 1>}, a value that "
        "is not part of pytree (made or computed by where)\n"
        "where must return parts of the tree it is given (or a tuple or list of them), "
        "e.g. lambda m: m.layers[-1].weight",
    ),
    (
        lambda: tree_at(lambda _: CAPTURED["layers"][1], CAPTURED, 0),
        "where(pytree): expected a node or leaf of pytree, got [3.0], which is pytree['layers'][1], taken from "
        "pytree itself, not from where's argument\n"
        "where runs on a copy of pytree: select from its argument (lambda m: m['layers'][1]), "
        "not from a tree it refers to by name",
    ),
    (
        lambda: tree_at(lambda _: CAPTURED, CAPTURED, 0),
        "where(pytree): expected a node or leaf of pytree, got {'layers': [[1.0], [3.0]]}, which is pytree "
        "itself, not where's argument\n"
        "where runs on a copy of pytree: select from its argument (lambda m: m), not from a tree it refers to by name",
    ),
    (
        lambda: tree_at(lambda t: t[0], (None, None, 1), True),
        "where(pytree): expected one node of pytree, got one found at 2 places\n"
        "a None is a node with no children and is shared: to select a None pass is_leaf=lambda x: x is None",
    ),
]


@pytest.mark.parametrize(("call", "message"), WHERE_ERRORS, ids=[m.splitlines()[0][:40] for _, m in WHERE_ERRORS])
def test_where_errors(call: Any, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        call()


def test_where_computing_with_the_leaves_says_it_ran_on_stand_ins() -> None:
    """Issue 28: ``lambda t: t[0] * 2`` raised a bare TypeError about the stand-in class."""
    message = (
        "where: expected a function that selects parts of pytree, got one that raised TypeError on stand-ins "
        "of pytree's leaves (unsupported operand type(s) for *: '_StandIn' and 'int')\n"
        "where runs on a copy of pytree whose leaves are stand-ins, to find what it selects by identity: it must "
        "select parts (lambda m: m.layers[-1].weight), not compute with their values (compute new values in "
        "replace_fn)"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$") as info:
        tree_at(lambda t: t[0] * 2, [1.0, 2.0], 0.0)
    assert type(info.value.__cause__) is TypeError  # the original exception, chained
    with pytest.raises(ValueError, match=r"raised AttributeError on stand-ins") as info:
        tree_at(lambda t: t[0].real, [1.0, 2.0], 0.0)
    assert type(info.value.__cause__) is AttributeError


class Tagged:
    """A registered node that keeps ``tag`` in its node data, not as a child."""

    def __init__(self, x: Any, tag: Any) -> None:
        self.x, self.tag = x, tag


class Boxed:
    """A registered node whose node data holds ``tag``, kept under another attribute name."""

    def __init__(self, x: Any, tag: Any) -> None:
        self.x, self._tag = x, tag


def test_where_selecting_node_data_names_its_key_path_and_type(registered: Any) -> None:
    registered(Tagged, lambda cls: register_pytree_node(cls, lambda t: ((t.x,), {"tag": t.tag}), _tagged))
    registered(Boxed, lambda cls: register_pytree_node(cls, lambda b: ((b.x,), (b._tag,)), _boxed))
    tree = {"enc": [Tagged(1, "relu")]}
    message = (
        "where(pytree): expected a node or leaf of pytree, got 'relu', which pytree holds as node data, "
        "not as a child: pytree['enc'][0].tag (an attribute of Tagged in its node data)\n"
        "tree_at can only replace children (nodes and leaves): to change it, build a new Tagged"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        tree_at(lambda t: t["enc"][0].tag, tree, 0)
    name = object()  # in node data, under no attribute: the node's own key path
    with pytest.raises(ValueError, match=re.escape("node data, not as a child: pytree[1] (in the node data of Boxed)")):
        tree_at(lambda t: t[1]._tag[0], [1, Boxed(2, (name,))], 0)
    assert tree_at(lambda t: t["enc"][0].x, tree, 5)["enc"][0].x == 5  # its child is replaced as ever


def _tagged(data: Any, children: Any) -> Tagged:
    return Tagged(children[0], data["tag"])


def _boxed(data: Any, children: Any) -> Boxed:
    return Boxed(children[0], data[0])


# -- equinox users (issue 28): the real equinox, flax and jax ------------------------------------------
@pytest.fixture
def eqx() -> Any:
    return pytest.importorskip("equinox")


def test_equinox_static_fields_are_node_data(eqx: Any) -> None:
    jax = pytest.importorskip("jax")
    lin = eqx.nn.Linear(3, 32, key=jax.random.key(2))
    with pytest.raises(ValueError) as info:
        tree_at(lambda m: m.out_features, lin, 64)
    first = str(info.value).splitlines()[0]
    assert first.startswith("where(pytree): expected a node or leaf of pytree, got 32, which pytree holds as node data")
    assert "pytree.out_features (a static field of Linear)" in first
    assert "build a new Linear" in str(info.value)

    class Block(eqx.Module):
        layers: list[Any]
        name: str = eqx.field(static=True)

    block = Block([lin, eqx.nn.Linear(32, 2, key=jax.random.key(3))], "head")
    message = "got 'head', which pytree holds as node data, not as a child: pytree.name (a static field of Block)\n"
    with pytest.raises(ValueError, match=re.escape(message)):
        tree_at(lambda b: b.name, block, "tail")
    with pytest.raises(ValueError) as info:
        tree_at(lambda b: b.layers[1].in_features, block, 64)
    first = str(info.value).splitlines()[0]  # the same 32 is in two static fields: both are named
    assert "pytree.layers[0].out_features (a static field of Linear)" in first
    assert "pytree.layers[1].in_features (a static field of Linear)" in first
    new = tree_at(lambda b: b.layers[1].weight, block, 0.0)  # a child still goes
    assert new.layers[1].weight == 0.0 and new.name == "head"


def test_equinox_fresh_and_computed_values(eqx: Any) -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    lin = eqx.nn.Linear(3, 32, key=jax.random.key(2))
    with pytest.raises(ValueError) as info:
        tree_at(lambda m: jnp.zeros(3), lin, 64)
    message = str(info.value)
    assert message.startswith(
        "where(pytree): expected a node or leaf of pytree, got f32[3], a value that is not part of pytree "
        "(made or computed by where)\n"
    )
    assert "depends on" not in message
    with pytest.raises(ValueError) as info:
        tree_at(lambda m: m.weight * 2, lin, 64)
    assert str(info.value).startswith(
        "where: expected a function that selects parts of pytree, got one that raised TypeError on stand-ins "
        "of pytree's leaves"
    )
    assert "not compute with their values" in str(info.value)
    assert type(info.value.__cause__) is TypeError
    with pytest.raises(ValueError, match=re.escape("got f32[32,3], which is pytree.weight, taken from pytree itself")):
        tree_at(lambda _: lin.weight, lin, 0.0)  # the tree by name, not where's argument


def test_flax_and_jax_static_fields() -> None:
    struct = pytest.importorskip("flax.struct")
    jax = pytest.importorskip("jax")
    import dataclasses

    @struct.dataclass
    class Dense:
        w: Any
        act: str = struct.field(pytree_node=False, default="relu")

    message = "which pytree holds as node data, not as a child: pytree['dense'].act (a static field of Dense)"
    with pytest.raises(ValueError, match=re.escape(message)):
        tree_at(lambda t: t["dense"].act, {"dense": Dense(1.0)}, "gelu")

    @dataclasses.dataclass
    class Meta:
        w: Any
        n: str

    jax.tree_util.register_dataclass(Meta, data_fields=["w"], meta_fields=["n"])
    with pytest.raises(ValueError, match=re.escape("node data, not as a child: pytree[0].n (a static field of Meta)")):
        tree_at(lambda t: t[0].n, [Meta(1.0, "meta")], "x")


def test_is_leaf_selects_a_none() -> None:
    assert tree_at(lambda t: t[0], (None, None, 1), True, is_leaf=lambda x: x is None) == (True, None, 1)


# -- linear in the path's length ------------------------------------------------------------------
class CountingTuple(tuple):  # type: ignore[type-arg]
    """A path that counts how it is read: by index (one step) or by slice (a copy of the rest)."""

    reads: ClassVar[list[str]] = []

    def __getitem__(self, i: Any) -> Any:
        CountingTuple.reads.append("slice" if isinstance(i, slice) else "index")
        return super().__getitem__(i)


class CountingStr(str):
    reads: ClassVar[list[str]] = []

    def __getitem__(self, i: Any) -> Any:
        CountingStr.reads.append("slice" if isinstance(i, slice) else "index")
        return super().__getitem__(i)


@pytest.mark.parametrize("depth", [10, 1000])
def test_a_walk_reads_each_step_of_the_path_once(depth: int) -> None:
    deep: Any = "leaf"
    for _ in range(depth):
        deep = [deep]
    CountingTuple.reads.clear()
    assert tree_get(deep, CountingTuple((0,) * depth)) == "leaf"
    assert CountingTuple.reads == ["index"] * depth
    for text in ["[0]" * depth, "/".join(["0"] * depth)]:
        CountingStr.reads.clear()
        assert tree_leaves(tree_set(deep, CountingStr(text), "new")) == ["new"]
        assert CountingStr.reads.count("slice") == 0
        assert CountingStr.reads.count("index") <= depth + 1  # a character looked at per step


def test_one_hundred_thousand_deep_paths_in_every_form() -> None:
    import subprocess
    import sys

    code = """
import treekit
depth = 100_000
deep = 0
for _ in range(depth):
    deep = [deep]
for path in [(0,) * depth, [0] * depth, "[0]" * depth, "/".join(["0"] * depth),
             (treekit.SequenceKey(0),) * depth]:
    assert treekit.tree_get(deep, path) == 0
    assert treekit.tree_leaves(treekit.tree_set(deep, path, 1)) == [1]
    assert treekit.tree_leaves(treekit.tree_at(path, deep, replace_fn=lambda x: x + 2)) == [2]
print("ok")
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.stdout == "ok\n", run.stderr[-2000:]


def test_a_bare_name_is_looked_up_anywhere_as_optax_does() -> None:
    optax = pytest.importorskip("optax")
    import numpy as np

    params = {"linear": {"w": np.ones(2), "b": np.zeros(2)}}
    state = optax.adam(0.1).init(params)
    assert tree_get(state, "count") is optax.tree_utils.tree_get(state, "count")
    new = tree_set(state, "count", 7)
    assert tree_get(new, "count") == 7 and tree_get(state, "count") == 0
    assert tree_get(params, "w") is params["linear"]["w"]
    assert tree_get(state, "ScaleByAdamState") is state[0]  # a namedtuple by its class name
    assert tree_get(params, "ema") is None and tree_get(params, "ema", 0.9) == 0.9  # optax's default


def test_a_bare_name_at_several_places_lists_them_in_a_key_error() -> None:
    tree = {"enc": {"w": 1}, "dec": [{"w": 2}], "w": 0}
    message = (
        "tree: expected one place named 'w', got 3 places\n"
        "pass the whole key path of one of them: ['w'], ['dec'][0]['w'], ['enc']['w']"  # (optax's order)
    )
    for call in (lambda: tree_get(tree, "w"), lambda: tree_set(tree, "w", 5)):
        with pytest.raises(KeyError) as caught:
            call()
        assert isinstance(caught.value, StructureMismatchError) and str(caught.value) == message
    assert tree_get(tree, ("w",)) == 0 == tree_get(tree, "['w']")  # a path from the root says which
    with pytest.raises(KeyError, match="expected a key named 'ema', got none"):
        tree_set(tree, ema=1)
    with pytest.raises(KeyError, match="the filtering function kept none of them"):
        tree_set(tree, lambda path, value: False, w=1)
    with pytest.raises(TypeError, match="filtering: expected None with a key path"):
        tree_get(tree, ("w",), filtering=lambda path, value: True)
    with pytest.raises(TypeError, match="tree_set: expected"):
        tree_set(tree, "w")


class _Adam(NamedTuple):
    count: Any
    mu: Any


class _Noise(NamedTuple):
    count: Any
    rng: Any


_NAMES = ["count", "mu", "lr", "rng", "_Adam", "_Noise"]
_states = st.recursive(
    st.integers(0, 9),
    lambda children: st.one_of(
        st.dictionaries(st.sampled_from(["count", "mu", "lr", "x"]), children, max_size=3),
        st.lists(children, max_size=2),
        st.builds(_Adam, children, children),
        st.builds(_Noise, children, children),
    ),
    max_leaves=8,
)


def _outcome(call: Any) -> Any:
    try:
        return ("value", call())
    except KeyError:
        return ("KeyError", None)


@given(_states, st.sampled_from(_NAMES), st.sampled_from([None, "ints"]))
def test_names_find_and_set_what_optax_s_do(state: Any, name: str, filter_kind: Any) -> None:
    optax = pytest.importorskip("optax")
    otu = optax.tree_utils
    filtering = (lambda path, value: isinstance(value, int)) if filter_kind else None

    def found(pairs: Any) -> list[tuple[str, Any]]:  # (in optax's order)
        return [("".join(str(e) for e in path), repr(value)) for path, value in pairs]

    ours = tree_get_all_with_path(state, name, filtering)
    assert found(ours) == found(otu.tree_get_all_with_path(state, name, filtering))
    assert _outcome(lambda: tree_get(state, name, None, filtering)) == _outcome(
        lambda: otu.tree_get(state, name, None, filtering)
    )
    ours_set, theirs_set = (_outcome(lambda f=f: f(state, filtering, **{name: 99})) for f in (tree_set, otu.tree_set))
    if ours_set != theirs_set:
        # optax's tree_set does not look below a node that lacks the name itself, so it leaves
        # a place its own tree_get_all_with_path finds: treekit sets every place found
        assert ours_set[0] == theirs_set[0] == "value"
        nines = [sum(leaf == 99 for leaf in tree_leaves(tree)) for tree in (ours_set[1], theirs_set[1])]
        assert nines[0] > nines[1]
    if ours_set[0] == "value":  # every place found, but those inside another one, now holds 99
        for path, _ in ours:
            if not any(path[: len(other)] == other and path != other for other, _ in ours):
                assert _follow(ours_set[1], path) == 99


def _follow(tree: Any, path: Any) -> Any:
    """The place at ``path``, a key path as tree_get_all_with_path gives it."""
    for entry in path:
        if isinstance(entry, DictKey):
            tree = tree[entry.key]
        elif isinstance(entry, SequenceKey):
            tree = tree[entry.idx]
        else:  # a NamedTupleKey
            tree = getattr(tree, entry.name)
    return tree


# -- a registered flatten function that raises (issue 21 item 1) ----------------------------------
class Raising:
    """A registered node whose flatten function raises (or returns a malformed result)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode


def _raising_flatten(node: Raising) -> Any:
    if node.mode == "raise":
        raise RuntimeError("flatten failed")
    if node.mode == "pairs":
        return [1, 2], None  # not (key entry, child) pairs
    return [(GetAttrKey("mode"), node.mode)], None


@pytest.fixture
def raising(registered: Any) -> None:
    from treekit import register_pytree_with_keys

    registered(Raising, lambda cls: register_pytree_with_keys(cls, _raising_flatten, lambda _, c: Raising(*c)))


RAISING_TREE = {"layers": [{"w": 1}, Raising("raise")], "ok": Raising("ok")}
FLATTEN_RAISES = [
    # (call, the user's class, its message, the note: node type and key path of the raising node)
    (lambda: tree_get(RAISING_TREE, "['layers'][1].mode"), RuntimeError, "flatten failed", "tree['layers'][1]"),
    (lambda: tree_get(RAISING_TREE, ("layers", 1, "mode")), RuntimeError, "flatten failed", "tree['layers'][1]"),
    (lambda: tree_get(RAISING_TREE, "layers/1/mode"), RuntimeError, "flatten failed", "tree['layers'][1]"),
    (lambda: tree_get(Raising("raise"), ".mode"), RuntimeError, "flatten failed", "tree"),
    (lambda: tree_get(RAISING_TREE, "mode"), RuntimeError, "flatten failed", "tree['layers'][1]"),  # a bare name
    (lambda: tree_set(RAISING_TREE, "['layers'][1].mode", 0), RuntimeError, "flatten failed", "tree['layers'][1]"),
    (lambda: tree_at("['layers'][1].mode", RAISING_TREE, 0), RuntimeError, "flatten failed", "pytree['layers'][1]"),
    (lambda: tree_at(lambda t: t["ok"], RAISING_TREE, 0), RuntimeError, "flatten failed", "pytree['layers'][1]"),
    (
        lambda: tree_get([Raising("pairs")], "[0][0]"),
        ValueError,
        "the flatten_with_keys function registered for Raising returned 1 among its children; "
        "expected (key entry, child) pairs",
        "tree[0]",
    ),
]


@pytest.mark.parametrize(
    ("call", "error", "message", "where"), FLATTEN_RAISES, ids=[f"{i}-{w}" for i, (*_, w) in enumerate(FLATTEN_RAISES)]
)
@pytest.mark.usefixtures("raising")
def test_a_raising_flatten_function_is_noted_with_type_and_key_path(
    call: Any, error: type, message: str, where: str
) -> None:
    """Issue 21 item 1: the bare user exception escaped with no key path. Now it is noted as
    flatten and tree_map note it (treekit.core._errors.flatten_noted): the same class and message,
    a PEP 678 note naming the node type and the key path of the node whose flatten raised."""
    with pytest.raises(error, match=f"^{re.escape(message)}") as info:
        call()
    assert type(info.value) is error
    assert info.value.__notes__ == [f"{where}: raised while flattening Raising"]


def test_tree_at_tells_apart_empty_tuples_that_cpython_shares() -> None:
    shared: tuple[()] = ()
    for tree, where, want in (
        ([(), ()], lambda t: t[0], ["new", ()]),
        ([shared, shared], lambda t: t[1], [(), "new"]),
        ([((), ()), 1], lambda t: t[0][1], [((), "new"), 1]),
        ({"a": (), "b": [()]}, lambda t: (t["a"], t["b"][0]), {"a": "new", "b": ["new"]}),
    ):
        replace = ("new", "new") if isinstance(want, dict) else "new"
        assert tree_at(where, tree, replace) == want
    eqx = pytest.importorskip("equinox")
    assert eqx.tree_at(lambda t: t[0], [(), ()], "new") == tree_at(lambda t: t[0], [(), ()], "new")

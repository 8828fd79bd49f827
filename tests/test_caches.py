"""Every cache in treekit is bounded and keeps nothing alive that the program dropped.

The caches (module: name, what it holds, its bound):

- ``_registry``: ``TYPES``/``_ANSWERED``, the answer for each unregistered type met: at most
  ``_CACHE_LIMIT`` types, all dropped before each full garbage collection.
- ``_registry``: ``_FIELD_KEYS``, a namedtuple class's field key entries: at most
  ``_CACHE_LIMIT`` classes, dropped before each full garbage collection.
- ``_registry``: ``_SEQ_KEYS``, shared ``SequenceKey`` entries: at most ``_SEQ_KEYS_LIMIT``
  (tests/test_registry.py::test_the_sequence_key_cache_stops_growing_and_long_lists_still_get_keys).
- ``_registry``: ``ORDERS``, a dict insertion order's sorted keys: at most ``_ORDERS_KEYS``
  keys in all (and ``_ORDERS_LIMIT`` orders).
- ``_build``: ``_COUNTS``, builds per structure, by hash (ints only): ``_COUNTS_LIMIT``.
- ``_build``: ``_BUILDERS``, compiled structures: at most ``_BUILDERS_NODES`` records in
  all, none bigger than ``_MAX_COMPILED_NODES``.

- ``_describe``: ``_NAMES``, a dtype's name (numpy computes it in Python): at most
  ``_NAMES_LIMIT`` dtypes; it keeps them alive, and programs use a handful.

The native core's caches (src/native/cache.c), one process each: ``_native.cache_info()``
gives each one's ``(size, limit)`` by the name below, ``_native.clear_caches()`` empties them:

- ``big_dicts``, ``big_dict_keys``: the node data of the last dicts of more than 8 keys met,
  by their very key objects: at most 4 dicts and ``2**15`` keys in all.
- ``orders``, ``order_keys``: for the last big key orders met, their ``DictKey`` entries, a
  dict of their keys (values ``None``) that their dicts are copied from, and the key paths of
  such a dict at the root: at most 8 orders and ``2**15`` keys in all.
- ``records``: node records of lists, tuples and ``None`` (node data ``None``): 512 slots.
- ``node_data``, ``node_records``: a dataclass node's node data (the tuple of its meta fields'
  values, where each is a small value that refers to nothing: an exact str, int, float, bool,
  complex or ``None``; at most 8) and its records (and those of other nodes whose node data
  is such a tuple), the same from walk to walk while those values are the same objects: 16384 slots
  each, emptied before each full collection (their node types hold their classes).
- ``counts``: the ints ``0..1023`` the records count with.
- ``spread_keys``: copies of ``SequenceKey(i)``, ``i < 64``, for deep key paths: 448.
- ``sequence_texts``, ``dict_texts``, ``attr_texts``: keystr's texts of entries seen: 256 ints;
  ``2**15`` strs each (emptied when full).
- ``spare_stack``, ``spare_buffer``: the walkers' last arrays (hold no objects): up to 4096
  frames and 65536 records.

None of them holds a leaf or the node data of a user's node, but dataclass nodes' meta values
that hold nothing (strs, ints: kept within the bounds above until the next full collection):
a tree dropped is freed, but for the keys of its big dicts (kept as ``ORDERS`` keeps them,
within the bounds above).

The JAX bridge's tables (``_jax._JAX_ONLY``, ``_JAX_OWN``, ``_MIRRORED``, ``_TAKEN``,
``_JAX_DATACLASSES``, ``_JAX_NODES``) hold only classes registered with JAX or treekit (and
the field names and functions JAX was given), which those registries hold for good anyway.
The entry of each class registered with JAX alone keeps the treekit key entries it converted
from JAX's (by key class and a str or int field): at most 512 per class.
"""

from __future__ import annotations

import collections
import gc
import importlib
import re
import tracemalloc
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

import treekit
from treekit.core import _build, _registry, _treedef


def test_a_dropped_class_is_collected_by_the_next_full_collection() -> None:
    cls = type("Dropped", (), {})
    point = collections.namedtuple("Point", "x y")  # type: ignore[misc]
    assert treekit.tree_leaves([cls(), point(1, 2)])[1:] == [1, 2]
    assert treekit.tree_leaves_with_path(point(1, 2))[0][0] == (treekit.GetAttrKey("x"),)
    refs = [weakref.ref(cls), weakref.ref(point)]
    del cls, point
    gc.collect()
    assert [ref() for ref in refs] == [None, None]
    assert treekit.tree_leaves([1, (2,), {"a": None}]) == [1, 2]  # registered types stay


def test_namedtuple_field_keys_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_registry, "_CACHE_LIMIT", 8)
    for k in range(20):
        cls = collections.namedtuple(f"P{k}", "a")  # type: ignore[misc]
        assert treekit.tree_leaves_with_path(cls(k)) == [((treekit.GetAttrKey("a"),), k)]
        assert len(_registry._FIELD_KEYS) <= 8


def test_dict_orders_are_bounded_by_keys() -> None:
    n = _registry._ORDERS_KEYS // 8  # unsorted dicts this big: their orders are kept ...
    for k in range(20):  # ... but no more than _ORDERS_KEYS keys' worth of them
        d = {f"{k}-{i:06}": i for i in range(n, 0, -1)}
        assert treekit.tree_leaves(d) == list(range(1, n + 1))  # sorted-key order
        assert treekit.tree_leaves(d) == list(range(1, n + 1))  # again, from the kept order
        held = sum(len(keys) for keys in _registry.ORDERS)
        assert held == _registry._orders_held[0] <= _registry._ORDERS_KEYS
    big = {f"{i:07}": i for i in range(_registry._ORDERS_KEYS, 0, -1)}  # too big to keep
    assert treekit.tree_leaves(big)[-1] == _registry._ORDERS_KEYS
    assert tuple(big) not in _registry.ORDERS


@pytest.fixture
def pure_builders(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Build with the pure core's builders (the C core builds plain containers itself) and
    empty caches."""
    monkeypatch.setattr(_treedef, "NATIVE", None)
    monkeypatch.setattr(_build, "_BUILDERS", {})
    monkeypatch.setattr(_build, "_COUNTS", {})
    monkeypatch.setattr(_build, "_builders_held", [0])
    yield


def _rebuilt(tree: Any, f: Any = lambda x: x) -> Any:
    """``tree_map(f, tree)`` through ``TreeDef.unflatten`` (the pure core's builders)."""
    leaves, treedef = treekit.tree_flatten(tree)
    return treedef.unflatten([f(x) for x in leaves])


class Data:
    """Node data that can be weakly referenced (and compares by identity)."""


class Holder:
    def __init__(self, data: Data, child: Any) -> None:
        self.data, self.child = data, child


@pytest.mark.usefixtures("pure_builders")
def test_a_structure_built_a_few_times_keeps_no_node_data(registered: Any) -> None:
    registered(
        Holder,
        lambda cls: treekit.register_pytree_node(cls, lambda h: ((h.child,), h.data), lambda d, c: cls(d, *c)),
    )
    data = Data()
    for _ in range(_build._COMPILE_AT - 1):  # not yet compiled
        assert _rebuilt(Holder(data, 1), lambda x: x + 1).child == 2
    ref = weakref.ref(data)
    del data
    gc.collect()
    assert ref() is None
    assert len(_build._COUNTS) == 1 and _build._BUILDERS == {}


@pytest.mark.usefixtures("pure_builders")
def test_compiled_structures_are_bounded_by_records(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_build, "_COMPILE_AT", 1)
    monkeypatch.setattr(_build, "_BUILDERS_NODES", 1000)
    for n in range(1, 300):
        assert _rebuilt(list(range(n)), str)[-1] == str(n - 1)
        held = sum(len(nodes) for nodes in _build._BUILDERS)
        assert held == _build._builders_held[0] <= 1000
    assert len(_build._BUILDERS) >= 2  # the newest are kept


@pytest.mark.usefixtures("pure_builders")
def test_build_counts_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_build, "_COUNTS_LIMIT", 16)
    for n in range(100):
        assert _rebuilt([0] * n, str) == ["0"] * n
        assert len(_build._COUNTS) <= 16
    assert all(type(key) is int and type(count) is int for key, count in _build._COUNTS.items())


@pytest.mark.usefixtures("pure_builders")
def test_structures_too_big_to_compile_are_not_remembered() -> None:
    tree = list(range(_build._MAX_COMPILED_NODES + 1))
    for _ in range(_build._COMPILE_AT + 1):
        assert _rebuilt(tree) == tree
    assert _build._COUNTS == {} and _build._BUILDERS == {}


@pytest.mark.usefixtures("pure_builders")
def test_big_dicts_mapped_once_and_dropped_leave_memory_flat() -> None:
    # Issue 13 item 10: 300 distinct 100,000-key dicts mapped once left 2.6 GB behind (the
    # builder cache kept each structure with its keys, the order cache each dict's order).
    # Here: 10 distinct 25,000-key dicts and 10 of 2,000 keys (small enough to compile),
    # inserted in reverse order (on that main: 23 MB kept); the caches may keep a few MB.
    def mapped_and_dropped(n: int, tag: int) -> None:
        d = {f"{tag}-{i:06}": i for i in range(n, 0, -1)}
        assert _rebuilt(d) == d

    mapped_and_dropped(2000, -1)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for tag in range(10):
            mapped_and_dropped(25_000, tag)
            mapped_and_dropped(2000, tag)
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 8 * 2**20, f"{kept / 2**20:.1f} MiB kept"


def test_dtype_names_are_bounded() -> None:
    np = pytest.importorskip("numpy")
    from treekit.core import _describe

    for i in range(_describe._NAMES_LIMIT + 100):  # structured dtypes: a new one each time
        assert _describe.dtype_name(np.dtype([(f"f{i}", np.float32)])) == "void32"
    assert len(_describe._NAMES) <= _describe._NAMES_LIMIT
    assert _describe.dtype_name(np.dtype("float32")) == "float32"


# -- the native core's caches ------------------------------------------------------------------------
native_only = pytest.mark.skipif(treekit.backend() != "native", reason="the native core is not in use")


def _native() -> Any:
    return importlib.import_module("treekit.core._native")


@native_only
def test_the_native_caches_are_the_ones_listed_above() -> None:
    assert __doc__ is not None
    section = __doc__.split("The native core's caches")[1].split("None of them")[0]
    listed = set(re.findall(r"^- (.*?):", section, re.M))
    names = {name.strip("`") for row in listed for name in row.split(", ")}
    assert names == set(_native().cache_info())


class Leaf:
    """A leaf (or node data) that can be weakly referenced."""


def _every_call(tree: Any) -> None:
    """What the native core does with a tree, twice (the second reads what the first kept)."""
    for _ in range(2):
        leaves, treedef = treekit.tree_flatten(tree)
        treekit.tree_unflatten(treedef, leaves)
        treekit.tree_map(lambda x: x, tree)
        treekit.tree_map(lambda x, y: y, tree, tree)
        paths = [path for path, _ in treekit.tree_flatten_with_path(tree)[0]]
        treekit.tree_map_with_path(lambda p, x: x, tree)
        [treekit.keystr(path) for path in paths]
        treekit.tree_structure(tree).flatten_up_to(tree)


@native_only
def test_the_native_caches_are_bounded() -> None:
    native = _native()
    for k in range(12):  # distinct big dicts, sorted and not, some with more keys than a cache keeps
        n = (2, 600, 40_000)[k % 3]
        keys = [f"{k}-{i:06}" for i in range(n)]
        _every_call(dict.fromkeys(keys if k % 2 else keys[::-1], 1.0))
    for depth in (10, 100, 5000):  # deep lists: spread keys, the spare stack
        tree: Any = 1.0
        for _ in range(depth):
            tree = [0.0, tree]
        _every_call(tree)
    _every_call([[0.0] * n for n in range(600)])  # many distinct records
    _every_call({f"clé {i}": 1.0 for i in range(40_000)})  # keys whose texts are not plain ASCII
    for name, (size, limit) in native.cache_info().items():
        assert 0 <= size <= limit, f"{name}: {size} > {limit}"
    info = native.cache_info()
    assert info["big_dicts"][0] > 0 and info["orders"][0] > 0 and info["dict_texts"][0] > 0  # they were used


@native_only
def test_the_native_caches_keep_no_leaf_and_no_node_data_alive(registered: Any) -> None:
    class Node:
        def __init__(self, data: Any, child: Any) -> None:
            self.data, self.child = data, child

    registered(
        Node,
        lambda cls: treekit.register_pytree_with_keys(
            cls, lambda n: (((treekit.GetAttrKey("child"), n.child),), n.data), lambda d, c: cls(d, *c)
        ),
    )
    Point = collections.namedtuple("Point", "x y")
    made: list[Leaf] = []

    def leaf() -> Leaf:
        made.append(Leaf())
        return made[-1]

    def trees() -> list[Any]:
        return [
            {f"k{i:03}": leaf() for i in range(40, 0, -1)},  # big, unsorted
            {f"k{i:03}": leaf() for i in range(40)},  # big, sorted
            [{"w": leaf(), "b": leaf()} for _ in range(3)],
            (leaf(), [leaf(), None], Point(leaf(), leaf())),
            Node(leaf(), [leaf()]),  # node data: a Leaf too
        ]

    for tree in trees():
        _every_call(tree)
    refs = [weakref.ref(x) for x in made]
    del made[:], tree
    gc.collect()
    assert [ref for ref in refs if ref() is not None] == []


@native_only
def test_clear_caches_empties_every_native_cache() -> None:
    native = _native()
    _every_call({f"{i:03}": [float(i), (i,)] for i in range(50, 0, -1)})
    assert any(size for size, _ in native.cache_info().values())
    native.clear_caches()
    assert {name: size for name, (size, _) in native.cache_info().items() if size} == {}
    tree = {f"{i:03}": [float(i), (i,)] for i in range(50, 0, -1)}
    _every_call(tree)  # and they fill again
    assert native.cache_info()["big_dicts"][0] == 1


@native_only
def test_dataclass_node_data_is_kept_from_walk_to_walk_until_a_full_collection() -> None:
    import dataclasses

    @dataclasses.dataclass
    class Layer:
        w: Any
        name: Any = dataclasses.field(default="", metadata={"static": True})

    treekit.register_dataclass(Layer)
    try:
        name = "".join(["lay", "er"])  # (made at run time: not a constant the test's code holds)
        tree = [Layer(1.0, name), Layer(2.0, name)]  # records: leaf, Layer, leaf, Layer, list
        first, second = treekit.tree_structure(tree)._nodes, treekit.tree_structure(tree)._nodes
        assert first[1][1] == (name,) and first[1][1] is second[1][1] and first[1] is second[1]  # kept
        assert first[3][1] is first[1][1]  # two nodes of the same values: one tuple
        tree[1].name = "".join(["oth", "er"])  # another value: other node data, never the kept one
        assert treekit.tree_structure(tree)._nodes[3][1] == ("other",)
        bound = [Layer(1.0, [name])]  # a value the collector tracks (a list): not kept
        assert treekit.tree_structure(bound)._nodes[1][1] is not treekit.tree_structure(bound)._nodes[1][1]
        assert _native().cache_info()["node_records"][0] > 0
    finally:
        _registry.remove_type(Layer)
    gc.collect()  # a full collection empties them first (their node types hold their classes)
    assert _native().cache_info()["node_data"][0] == _native().cache_info()["node_records"][0] == 0


@native_only
def test_kept_node_data_holds_only_small_values_and_hides_no_cycle() -> None:
    np = pytest.importorskip("numpy")
    import dataclasses

    @dataclasses.dataclass
    class Cell:
        w: Any
        meta: Any = dataclasses.field(default=None, metadata={"static": True})

    treekit.register_dataclass(Cell)
    try:
        big = np.zeros(3)  # untracked by the collector, yet no small value: never kept
        ref = weakref.ref(big)
        treekit.tree_structure(Cell(1.0, big))
        del big
        assert ref() is None  # freed as soon as dropped
        memo: dict[str, Any] = {}  # an empty dict is untracked until it holds a tracked object
        cell = Cell(1.0, memo)
        treedef = treekit.tree_structure(cell)
        memo["treedef"], memo["leaf"] = treedef, Leaf()  # a cycle through the node data
        leaf = weakref.ref(memo["leaf"])
        del cell, treedef, memo
        gc.collect()
        assert leaf() is None
    finally:
        _registry.remove_type(Cell)

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
- ``_treedef``: ``_COUNTS``, builds per structure, by hash (ints only): ``_COUNTS_LIMIT``.
- ``_treedef``: ``_BUILDERS``, compiled structures: at most ``_BUILDERS_NODES`` records in
  all, none bigger than ``_MAX_COMPILED_NODES``.

- ``_describe``: ``_NAMES``, a dtype's name (numpy computes it in Python): at most
  ``_NAMES_LIMIT`` dtypes; it keeps them alive, and programs use a handful.

The JAX bridge's tables (``_jax._JAX_ONLY``, ``_JAX_OWN``, ``_MIRRORED``, ``_TAKEN``) hold
only classes registered with JAX or treekit, which those registries hold for good anyway.
"""

from __future__ import annotations

import collections
import gc
import tracemalloc
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

import treekit
from treekit import _registry, _treedef


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
    monkeypatch.setattr(_treedef, "_BUILDERS", {})
    monkeypatch.setattr(_treedef, "_COUNTS", {})
    monkeypatch.setattr(_treedef, "_builders_held", [0])
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
    for _ in range(_treedef._COMPILE_AT - 1):  # not yet compiled
        assert _rebuilt(Holder(data, 1), lambda x: x + 1).child == 2
    ref = weakref.ref(data)
    del data
    gc.collect()
    assert ref() is None
    assert len(_treedef._COUNTS) == 1 and _treedef._BUILDERS == {}


@pytest.mark.usefixtures("pure_builders")
def test_compiled_structures_are_bounded_by_records(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_treedef, "_COMPILE_AT", 1)
    monkeypatch.setattr(_treedef, "_BUILDERS_NODES", 1000)
    for n in range(1, 300):
        assert _rebuilt(list(range(n)), str)[-1] == str(n - 1)
        held = sum(len(nodes) for nodes in _treedef._BUILDERS)
        assert held == _treedef._builders_held[0] <= 1000
    assert len(_treedef._BUILDERS) >= 2  # the newest are kept


@pytest.mark.usefixtures("pure_builders")
def test_build_counts_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_treedef, "_COUNTS_LIMIT", 16)
    for n in range(100):
        assert _rebuilt([0] * n, str) == ["0"] * n
        assert len(_treedef._COUNTS) <= 16
    assert all(type(key) is int and type(count) is int for key, count in _treedef._COUNTS.items())


@pytest.mark.usefixtures("pure_builders")
def test_structures_too_big_to_compile_are_not_remembered() -> None:
    tree = list(range(_treedef._MAX_COMPILED_NODES + 1))
    for _ in range(_treedef._COMPILE_AT + 1):
        assert _rebuilt(tree) == tree
    assert _treedef._COUNTS == {} and _treedef._BUILDERS == {}


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
    from treekit import _describe

    for i in range(_describe._NAMES_LIMIT + 100):  # structured dtypes: a new one each time
        assert _describe.dtype_name(np.dtype([(f"f{i}", np.float32)])) == "void32"
    assert len(_describe._NAMES) <= _describe._NAMES_LIMIT
    assert _describe.dtype_name(np.dtype("float32")) == "float32"

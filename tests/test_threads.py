"""Threads (issues 13 and 14): 16 threads walk a mixed set of trees while another registers
types, meets thousands of new ones (more than the type cache holds) and forgets the cached
answers as a JAX registration does; every result equals the single-threaded one.

The results compared per tree: the leaves (the very objects), the treedef (``==``, hash,
repr), the key paths, ``tree_map``, ``tree_map_with_path``, ``unflatten`` and
``flatten_up_to``. The thread switch interval is made tiny so that the walkers are
interrupted inside the registry's lookups.
"""

from __future__ import annotations

import collections
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import pytest
from cases import Layer, Pair, Point, Tag, case_types

import treekit
from treekit.core import _registry
from treekit.core._registry import remove_type

THREADS = 16
ROUNDS = 40  # per thread, over every tree


class Pos(NamedTuple):
    x: Any
    y: Any


@pytest.fixture(autouse=True)
def _types() -> Iterator[None]:
    with case_types():
        yield


@pytest.fixture
def fast_switching() -> Iterator[None]:
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


def _trees() -> list[Any]:
    leaf = object()
    trees = [
        [1, [2, 3]],
        {"weights": [1.0, 2.0], "biases": (3.0, None), "alpha": {}},
        (Pos(1, [2, {"b": 3, "a": 4}]), collections.OrderedDict(z=5, y=(6,))),
        collections.defaultdict(list, {"b": [leaf], "a": None}),
        [Pair(1, [2]), Point(3, {"k": 4}, label="q"), Layer([5], 6, act="tanh"), Tag("relu")],
        {1: "one", "x": [None, ()], (0,): [[[[leaf]]]]},
        treekit.Partial(max, 1, key=[2, 3]),
        list(range(50)),
    ]
    try:
        import jax.tree_util as jtu
    except ImportError:  # the core tests run without jax
        return trees
    trees.append({"partial": jtu.Partial(max, 1, [2.0])})  # a node only JAX knows: via the bridge
    return trees


def _results(tree: Any) -> tuple[Any, ...]:
    leaves, treedef = treekit.tree_flatten(tree)
    pairs = treekit.tree_leaves_with_path(tree)
    return (
        [id(x) for x in leaves],
        treedef,
        hash(treedef),
        repr(treedef),
        [treekit.keystr(path) for path, _ in pairs],
        treekit.tree_structure(treekit.tree_map(lambda x: 0, tree)),
        treekit.tree_leaves(treekit.tree_map_with_path(lambda p, x: treekit.keystr(p), tree)),
        treekit.tree_structure(treekit.tree_unflatten(treedef, leaves)),
        [id(x) for x in treedef.flatten_up_to(tree)],
    )


def _churn(stop: threading.Event, counts: collections.Counter[str]) -> None:
    """Register and drop classes, meet new leaf and namedtuple types, forget the answers."""
    k = 0
    while not stop.is_set():
        k += 1
        treekit.tree_leaves([type(f"Leaf{k}", (), {})(), 1])
        counts["new leaf types"] += 1
        if k % 5 == 0:
            nt = collections.namedtuple(f"NT{k}", "a b")
            assert treekit.tree_leaves(nt(1, [2])) == [1, 2]
            counts["new namedtuple types"] += 1
        if k % 7 == 0:
            fresh: Any = type(f"Node{k}", (), {})
            treekit.register_pytree_node(fresh, lambda n: ((n.v,), None), lambda d, c, cls=fresh: cls())
            node = fresh()
            node.v = [k]
            assert treekit.tree_leaves(node) == [k]
            remove_type(fresh)
            counts["registered and removed"] += 1
        if k % 500 == 0:
            _registry.forget_answers()  # what a registration in JAX's registry triggers
            counts["answers forgotten"] += 1


def _run(workers: int, work: Callable[[int], None], churn: Callable[[threading.Event], None]) -> None:
    stop = threading.Event()
    churner = threading.Thread(target=churn, args=(stop,))
    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    churner.start()
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        stop.set()
        churner.join()


@pytest.mark.usefixtures("fast_switching")
def test_sixteen_threads_get_the_single_threaded_results_while_types_churn(monkeypatch: pytest.MonkeyPatch) -> None:
    # A small cache bound (4,096 in use): answers are evicted all the time while others walk.
    monkeypatch.setattr(_registry, "_CACHE_LIMIT", 64)
    trees = _trees()
    expected = [_results(tree) for tree in trees]
    counts: collections.Counter[str] = collections.Counter()
    mismatches: list[tuple[int, int]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def work(_: int) -> None:
        done = 0
        try:
            for _ in range(ROUNDS):
                for t, tree in enumerate(trees):
                    got = _results(tree)
                    done += 1
                    if got != expected[t]:
                        with lock:
                            mismatches.append((t, [a == b for a, b in zip(got, expected[t])].index(False)))
        except BaseException as exc:  # reported below, with the others
            errors.append(exc)
        with lock:
            counts["comparisons"] += done

    _run(THREADS, work, lambda stop: _churn(stop, counts))
    print(f"threads x rounds x trees: {THREADS} x {ROUNDS} x {len(trees)}; {dict(counts)}")
    assert errors == []
    assert mismatches == []  # (tree index, index of the first result that differed)
    assert counts["comparisons"] == THREADS * ROUNDS * len(trees)
    assert counts["new leaf types"] > 0 and counts["registered and removed"] > 0


def test_a_jax_only_node_has_one_treedef_across_cache_resets() -> None:
    jtu = pytest.importorskip("jax.tree_util")
    tree = [jtu.Partial(max, 1), {"p": jtu.Partial(max, 2.0)}]
    before = treekit.tree_structure(tree)
    assert treekit.tree_leaves(tree) == [1, 2.0]
    _registry.forget_answers()
    for k in range(_registry._CACHE_LIMIT + 100):  # evict every remembered answer too
        treekit.tree_leaves([type(f"Leaf{k}", (), {})()])
    after = treekit.tree_structure(tree)
    assert after == before and hash(after) == hash(before) and repr(after) == repr(before)
    assert treekit.tree_unflatten(before, [3, 4.0])[1]["p"].args == (4.0,)

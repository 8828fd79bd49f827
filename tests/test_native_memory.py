"""The native core's memory safety, through the public API: reference counts that stay put,
memory that stays flat, and the native tests once more under ``python -X dev`` with the
debug allocator.

Every call goes through treekit's public functions, so each one runs the C walker and,
where it meets user code that raises or a mismatch, hands over to the pure core: both the
finished and the handed-over paths are exercised. These tests skip under the pure core
(``TREEKIT_PURE=1``, or where the extension was not built): the pure core holds no
references by hand.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import os
import subprocess
import sys
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import treekit
from treekit.core._registry import remove_type

pytestmark = pytest.mark.skipif(treekit.backend() != "native", reason="the native core is not in use")

ROOT = Path(__file__).resolve().parent.parent


class Layer:
    """A registered node with keys: children ``w`` and ``b``; ``name`` is its node data."""

    def __init__(self, w: Any, b: Any, name: Any) -> None:
        self.w, self.b, self.name = w, b, name


class Broken:
    """A registered node whose flatten function raises."""

    def __init__(self, child: Any) -> None:
        self.child = child


class Boom(Exception):
    pass


@dataclasses.dataclass
class Cell:
    """A register_dataclass node (the C core reads its fields and calls it); __post_init__
    raises for the child "boom"."""

    w: Any
    b: Any
    name: Any = dataclasses.field(default="cell", metadata={"static": True})

    def __post_init__(self) -> None:
        if isinstance(self.w, str) and self.w == "boom":
            raise Boom("post_init failed")


class Sour:
    """A register_dataclass node whose field's property raises."""

    @property
    def bad(self) -> Any:
        raise Boom("getattr failed")


def _broken_flatten(node: Broken) -> Any:
    raise Boom("flatten failed")


def _layer_unflatten(name: Any, children: Any) -> Layer:
    if name == "broken":
        raise Boom("unflatten failed")
    return Layer(*children, name)


class JaxOnly:
    """A node registered with JAX alone (with keys): the C core makes its JAX key entries treekit's."""

    def __init__(self, key: Any, child: Any) -> None:
        self.key, self.child = key, child


@functools.cache
def _jax_only() -> bool:
    try:
        import jax.tree_util as jtu
    except ImportError:
        return False
    jtu.register_pytree_with_keys(
        JaxOnly,
        lambda n: ([(jtu.DictKey(n.key), n.child), (jtu.GetAttrKey("c"), n.child)], n.key),
        lambda key, children: JaxOnly(key, children[0]),
    )
    return True


@pytest.fixture(autouse=True)
def _types() -> Iterator[None]:
    treekit.register_pytree_with_keys(
        Layer,
        lambda n: (((treekit.GetAttrKey("w"), n.w), (treekit.GetAttrKey("b"), n.b)), n.name),
        _layer_unflatten,
        lambda n: ((n.w, n.b), n.name),
    )
    treekit.register_pytree_node(Broken, _broken_flatten, lambda data, children: Broken(*children))
    treekit.register_dataclass(Cell)
    treekit.register_dataclass(Sour, ["bad"], [])
    try:
        yield
    finally:
        remove_type(Layer)
        remove_type(Broken)
        remove_type(Cell)
        remove_type(Sour)


class Workload:
    """One round of calls through every native path, and the objects whose reference counts
    those calls must leave alone: a leaf, a node's data, dict keys, the tree, its treedef."""

    def __init__(self) -> None:
        # objects made at run time, so that no constant table or interned string shares them
        self.leaf = float("1.5")
        self.data = "".join(["lay", "er0"])
        self.key = "".join(["wei", "ghts"])
        self.other_key = "".join(["bia", "ses"])
        self.tree = [
            {self.key: self.leaf, self.other_key: [float("2.5"), None]},  # natural order: unsorted
            Layer(self.leaf, (float("3.5"), {"z": 1.0, "a": 2.0}), self.data),
            (),
            Cell(self.leaf, [float("4.5")], self.data),
        ]
        if _jax_only():  # (its DictKey holds self.key: a converted entry kept or leaked shows there)
            self.tree.append(JaxOnly(self.key, self.leaf))
        self.leaves, self.treedef = treekit.tree_flatten(self.tree)
        self.broken = treekit.tree_structure([Layer(1.0, 2.0, self.data), Layer(3.0, 4.0, "broken")])
        self.mismatched = [
            {self.key: 1.0, self.other_key: [2.0]},
            Layer(3.0, (4.0, {"z": 5.0, "a": 6.0}), self.data),
            (),
            Cell(7.0, [8.0], self.data),
        ]

    def objects(self) -> list[Any]:
        return [self.leaf, self.data, self.key, self.other_key, self.tree, self.treedef, *self.leaves]

    def calls(self) -> tuple[list[Callable[[], Any]], list[Callable[[], Any]]]:
        """Zero-argument calls: those the C walker finishes, and those it hands over to the
        pure core (user code raising, a mismatch). The raising ones catch what they
        expect, so that a wrong exception fails the test."""
        tree, leaves, treedef, leaf = self.tree, self.leaves, self.treedef, self.leaf

        def same(*xs: Any) -> Any:
            return xs[0]

        def is_leaf_raises(x: Any) -> bool:
            if x is leaf:
                raise Boom("is_leaf failed")
            return False

        def expect(exc: type[BaseException], call: Callable[[], Any]) -> Callable[[], None]:
            def run() -> None:
                with pytest.raises(exc):
                    call()

            return run

        finished: list[Callable[[], Any]] = [
            lambda: treekit.tree_flatten(tree),
            lambda: treekit.tree_leaves(tree),
            lambda: treekit.tree_structure(tree),
            lambda: treekit.tree_unflatten(treedef, leaves),
            lambda: treekit.tree_map(same, tree),
            lambda: treekit.tree_map(same, tree, tree, tree),
            lambda: treekit.tree_map_with_path(lambda p, x: x, tree),
            lambda: treekit.tree_flatten_with_path(tree),
            lambda: [treekit.keystr(p) for p, _ in treekit.tree_leaves_with_path(tree)],
            lambda: treekit.keystr([treekit.DictKey("\u00e9"), treekit.DictKey(self.key)], simple=True, separator="/"),
            lambda: treekit.tree_flatten(tree, is_leaf=lambda x: x is None),
            lambda: treekit.tree_leaves_with_path(tree, is_leaf=lambda p, x: len(p) > 2, is_leaf_takes_path=True),
        ]
        handed_over: list[Callable[[], Any]] = [
            lambda: treekit.same_structure(tree, self.mismatched),
            expect(Boom, lambda: treekit.tree_flatten([tree, Broken(leaf)])),
            expect(Boom, lambda: treekit.tree_flatten_with_path([tree, Broken(leaf)])),
            expect(Boom, lambda: treekit.tree_leaves(tree, is_leaf=is_leaf_raises)),
            expect(Boom, lambda: treekit.tree_map(same, tree, is_leaf=is_leaf_raises)),
            expect(treekit.StructureMismatchError, lambda: treekit.tree_map(same, tree, self.mismatched)),
            expect(ValueError, lambda: treekit.tree_unflatten(treedef, leaves[:-1])),
            expect(TypeError, lambda: treekit.keystr((treekit.DictKey(self.key),), separator=None)),
            expect(Boom, lambda: treekit.tree_unflatten(self.broken, [leaf] * 4)),
            expect(Boom, lambda: treekit.tree_flatten([tree, Sour()])),
            expect(Boom, lambda: treekit.tree_flatten_with_path([tree, Sour()])),
            expect(Boom, lambda: treekit.tree_unflatten(treekit.tree_structure(Cell(1.0, 2.0)), ["boom", leaf])),
        ]
        return finished, handed_over


def _refcounts(objects: list[Any]) -> list[int]:
    gc.collect()
    return [sys.getrefcount(x) for x in objects]


def test_reference_counts_do_not_change() -> None:
    work = Workload()
    finished, handed_over = work.calls()
    calls = finished + handed_over
    for call in calls:  # caches (key orders, compiled builders) fill on the first calls
        for _ in range(10):
            call()
    before = _refcounts(work.objects())
    rounds = 10_000 // len(calls) + 1
    for _ in range(rounds):
        for call in calls:
            call()
    after = _refcounts(work.objects())
    names = [
        "leaf",
        "node data",
        "key",
        "other key",
        "tree",
        "treedef",
        *(f"leaves[{i}]" for i in range(len(work.leaves))),
    ]
    assert dict(zip(names, after)) == dict(zip(names, before))


def test_each_call_alone_keeps_reference_counts() -> None:
    """Call by call, so that a leak names its call."""
    work = Workload()
    finished, handed_over = work.calls()
    for index, call in enumerate(finished + handed_over):
        for _ in range(10):
            call()
        before = _refcounts(work.objects())
        for _ in range(200):
            call()
        assert _refcounts(work.objects()) == before, f"call {index} changes reference counts"


@pytest.mark.skipif(
    os.environ.get("PYTHONMALLOC") == "malloc",
    reason="with the system allocator (the sanitizer run) addresses are reused less, so the "
    "bounded caches keyed by address fill further (70-120 kB, also before issue 21); pymalloc runs it",
)
def test_memory_stays_flat_over_100000_calls() -> None:
    """100,000 calls: every round makes each call that C finishes and one of those handed
    over (in turn), which cost many times more under tracemalloc."""
    work = Workload()
    plain, handed_over = work.calls()
    rounds = 100_000 // (len(plain) + 1)
    for _ in range(20):
        for call in plain + handed_over:
            call()
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        for r in range(rounds):
            for call in plain:
                call()
            handed_over[r % len(handed_over)]()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    # one leaked float per handed-over call would be 250 kB; caches may settle a little
    assert grown < 64 * 1024, f"{grown} bytes kept after {rounds * (len(plain) + 1)} calls"


def test_native_tests_run_clean_under_dev_mode_and_the_debug_allocator() -> None:
    """tests/test_native.py and this file's reference
    count test, in a child ``python -X dev`` with ``PYTHONMALLOC=debug``: the debug
    allocator catches writes past a block, double frees and use after free."""
    if os.environ.get("TREEKIT_MEMORY_CHILD"):
        pytest.skip("already the child run")
    env = dict(os.environ, PYTHONMALLOC="debug", TREEKIT_MEMORY_CHILD="1")
    env.pop("TREEKIT_PURE", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-X",
            "dev",
            "-W",
            "error",
            "-m",
            "pytest",
            "-q",
            "-x",
            "-p",
            "no:cacheprovider",
            "tests/test_native.py",
            f"{__file__}::test_reference_counts_do_not_change",
            "-k",
            "not dev_mode and not memory_stays_flat",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert " passed" in proc.stdout and " failed" not in proc.stdout

"""treekit (both cores) against jax.tree_util, optree, dm-tree and torch.utils._pytree, side by side.

    python benchmarks/compare.py                  # full run (40 s of CPU; minutes on a busy machine)
    python benchmarks/compare.py --quick          # tiny trees, few rounds: a smoke run
    python benchmarks/compare.py --json out.json  # also write every timing as JSON
    python benchmarks/compare.py --markdown t.md  # and the table as Markdown
    python benchmarks/compare.py --callgrind 50 --libs treekit,treekit-pure --trees mlp-1000
                                                  # CPU instructions per call (valgrind), not time

Columns: ``treekit`` is the native core (the C extension), ``treekit-pure`` the pure-Python
core. The core is chosen once per process (``TREEKIT_PURE=1`` at import), so the pure core
is timed in a child process, against jax again there; every ratio is one library against
jax measured side by side in one process.

Every (tree, operation) row times each library in the same process, interleaved round-robin
(one batch per library per round, the order rotated each round), and reports the fastest
round (the minimum: on a shared, noisy machine other jobs only ever add time) as a ratio
to jax.tree_util's fastest round. Time is the thread's CPU time (``--clock wall`` for wall
time), which leaves out the time spent waiting for a core. Before timing a row, each library's result is checked:
the leaves it returns (or the leaves of the tree it builds) must be the very objects jax
returns, in jax's order. A library that is not installed, lacks the operation (``n/a``),
or disagrees is left out of the row and the table says why.

The model libraries (equinox, flax) are imported before treekit, as sorted imports put them,
so their classes were registered with JAX before treekit saw JAX (``--treekit-first`` for the
other order).

The standard trees insert dict keys in their natural order, as real parameter trees do
(`weights`/`biases`, flax's `kernel`/`bias`, haiku's `w`/`b`); `mlp-1000-sorted` is mlp-1000
with its keys inserted sorted. Libraries that keep insertion order (torch) return the same
leaves as those that sort (jax, optree, dm-tree, treekit) in another order: their check
compares the leaves as a collection of objects.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any, NamedTuple

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isdir(os.path.join(_ROOT, "treekit")):  # time this checkout's treekit, not an installed one
    sys.path.insert(0, _ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_trees import model_trees  # noqa: E402

LIBS = ("treekit", "treekit-pure", "jax", "optree", "dm-tree", "torch")
BASELINE = "jax"
NATIVE, PURE = "treekit", "treekit-pure"  # the two cores' columns
TORCH_TARGET = 10.0  # the native core is to be this many times faster than torch on every row
OPS = (
    "flatten",
    "unflatten",
    "leaves",
    "structure",
    "map",
    "map3",
    "map_with_path",
    "flatten_with_path",
    "keystr",
    "same_structure",
)
OP_TEXT = {
    "map": "tree_map, 1 tree",
    "map3": "tree_map, 3 trees",
    "keystr": "keystr of every path",
}


# -- the standard trees ---------------------------------------------------------------------------
class Record(NamedTuple):
    """A namedtuple leaf holder for the mixed tree."""

    name: str
    shape: tuple[Any, ...]
    extra: Any
    stats: Any


class Affine:
    """The registered custom node: children ``w`` and ``b``; its ``name`` is node data."""

    __slots__ = ("b", "name", "w")

    def __init__(self, w: Any, b: Any, name: str) -> None:
        self.w, self.b, self.name = w, b, name


def _counter() -> Callable[[], float]:
    count = iter(range(10**9))
    return lambda: float(next(count))  # distinct float objects: leaves are compared by identity


def mlp(layers: int, sort: bool = False) -> Callable[[], Any]:
    def build() -> Any:
        x = _counter()
        if sort:
            return [{"biases": x(), "weights": x()} for _ in range(layers)]
        return [{"weights": x(), "biases": x()} for _ in range(layers)]

    return build


def wide_dict(keys: int) -> Callable[[], Any]:
    def build() -> Any:
        x = _counter()
        return {f"k{i:06d}": x() for i in range(keys)}

    return build


def deep(depth: int) -> Callable[[], Any]:
    def build() -> Any:
        x = _counter()
        tree: Any = [x()]
        for _ in range(depth - 1):
            tree = [x(), tree]
        return tree

    return build


def mixed(items: int) -> Callable[[], Any]:
    def build() -> Any:
        x = _counter()
        return [
            (Record(f"item{i}", (x(), x()), None, {"mean": x(), "max": x()}), None, f"s{i}", ((x(),), [x(), None]))
            for i in range(items)
        ]

    return build


def transformer(blocks: int) -> Callable[[], Any]:
    def build() -> Any:
        x = _counter()

        def dense() -> dict[str, float]:  # flax's names
            return {"kernel": x(), "bias": x()}

        def norm() -> dict[str, float]:
            return {"scale": x(), "bias": x()}

        out: dict[str, Any] = {"embed": {"tok": x(), "pos": x()}}
        for i in range(blocks):
            out[f"block_{i:02d}"] = {
                "ln1": norm(),
                "attn": {"q": dense(), "k": dense(), "v": dense(), "o": dense()},
                "ln2": norm(),
                "mlp": {"fc1": dense(), "fc2": dense()},
            }
        out["ln_f"] = norm()
        return out

    return build


def custom(nodes: int) -> Callable[[], Any]:
    def build() -> Any:
        x = _counter()
        return {"layers": [Affine(x(), (x(), x()), f"layer{i}") for i in range(nodes)]}

    return build


def trees(quick: bool) -> dict[str, Callable[[], Any]]:
    """Name -> builder (called once per input, so the three trees of map3 share no containers):
    the standard trees, then the model trees (model_trees.py)."""
    return standard_trees(quick) | model_trees(quick)


def standard_trees(quick: bool) -> dict[str, Callable[[], Any]]:
    """The trees of lists, tuples, dicts, namedtuples, None and a hand-registered class."""
    if quick:
        return {
            "mlp-3": mlp(3),
            "dict-50": wide_dict(50),
            "deep-20": deep(20),
            "mixed-5": mixed(5),
            "transformer-1": transformer(1),
            "custom-5": custom(5),
        }
    return {
        "mlp-10": mlp(10),
        "mlp-100": mlp(100),
        "mlp-1000": mlp(1000),
        "mlp-1000-sorted": mlp(1000, sort=True),
        "dict-10000": wide_dict(10_000),
        "deep-200": deep(200),
        "mixed-200": mixed(200),
        "transformer-12": transformer(12),
        "custom-300": custom(300),
    }


# -- the libraries ----------------------------------------------------------------------------------
class Unsupported(Exception):
    """The library cannot do this operation (the message says why, for the table)."""


def _f1(x: Any) -> Any:
    return x


def _f3(x: Any, y: Any, z: Any) -> Any:
    return x


def _fp(path: Any, x: Any) -> Any:
    return x


class Inputs(NamedTuple):
    tree: Any
    tree2: Any
    tree3: Any
    treedef: Any
    leaves: list[Any]


# Each op: inputs -> a zero-argument function doing the work once. `leaves_of` maps its result
# to the leaves it holds, for the agreement check (None: nothing to compare but a count).
Op = Callable[[Inputs], Callable[[], Any]]


class Lib:
    """A library's ops; ``any_order``: its leaf lists follow dict insertion order, not sorted keys."""

    def __init__(
        self,
        name: str,
        version: str,
        ops: dict[str, Op],
        leaves_of: dict[str, Callable[[Any], Any]],
        any_order: bool = False,
    ):
        self.name, self.version, self.ops, self.leaves_of = name, version, ops, leaves_of
        self.any_order = any_order


def _jax_style(m: Any, name: str, version: str) -> Lib:
    """jax.tree_util and treekit share one API."""
    flatten, unflatten, leaves, structure = m.tree_flatten, m.tree_unflatten, m.tree_leaves, m.tree_structure
    tmap, tmap_path, flatten_path, keystr = m.tree_map, m.tree_map_with_path, m.tree_flatten_with_path, m.keystr
    ops: dict[str, Op] = {
        "flatten": lambda i: lambda: flatten(i.tree),
        "unflatten": lambda i: lambda: unflatten(i.treedef, i.leaves),
        "leaves": lambda i: lambda: leaves(i.tree),
        "structure": lambda i: lambda: structure(i.tree),
        "map": lambda i: lambda: tmap(_f1, i.tree),
        "map3": lambda i: lambda: tmap(_f3, i.tree, i.tree2, i.tree3),
        "map_with_path": lambda i: lambda: tmap_path(_fp, i.tree),
        "flatten_with_path": lambda i: lambda: flatten_path(i.tree),
        "keystr": lambda i: lambda: [keystr(p) for p, _ in flatten_path(i.tree)[0]],
        "same_structure": lambda i: lambda: structure(i.tree) == structure(i.tree2),
    }
    return Lib(name, version, ops, {"flatten": lambda r: r[0], "flatten_with_path": lambda r: [x for _, x in r[0]]})


def _treekit(core: str) -> Callable[[], Lib]:
    """treekit with ``core`` ('native' or 'pure'), when that is the core in this process."""

    def load() -> Lib:
        import treekit

        if treekit.backend() != core:
            raise Unsupported(f"{core} core not in use")
        treekit.register_pytree_with_keys(
            Affine,
            lambda a: (((treekit.GetAttrKey("w"), a.w), (treekit.GetAttrKey("b"), a.b)), a.name),
            lambda name, c: Affine(c[0], c[1], name),
            lambda a: ((a.w, a.b), a.name),
        )
        return _jax_style(treekit, NATIVE if core == "native" else PURE, f"{treekit.__version__} ({core} core)")

    return load


def _jax() -> Lib:
    import jax
    import jax.tree_util as jtu

    try:  # a treekit bridge may have mirrored the registration already
        jtu.register_pytree_with_keys(
            Affine,
            lambda a: (((jtu.GetAttrKey("w"), a.w), (jtu.GetAttrKey("b"), a.b)), a.name),
            lambda name, c: Affine(c[0], c[1], name),
            lambda a: ((a.w, a.b), a.name),
        )
    except ValueError:
        pass
    return _jax_style(jtu, "jax", jax.__version__)


def _optree() -> Lib:
    import optree

    ns = "treekit-bench"
    optree.register_pytree_node(
        Affine,
        lambda a: ((a.w, a.b), a.name, ("w", "b")),
        lambda name, c: Affine(c[0], c[1], name),
        path_entry_type=optree.GetAttrEntry,
        namespace=ns,
    )
    flatten, unflatten, leaves, structure = (
        optree.tree_flatten,
        optree.tree_unflatten,
        optree.tree_leaves,
        optree.tree_structure,
    )
    tmap, tmap_path, flatten_path, accessors = (
        optree.tree_map,
        optree.tree_map_with_path,
        optree.tree_flatten_with_path,
        optree.tree_accessors,
    )
    ops: dict[str, Op] = {
        "flatten": lambda i: lambda: flatten(i.tree, namespace=ns),
        "unflatten": lambda i: lambda: unflatten(i.treedef, i.leaves),
        "leaves": lambda i: lambda: leaves(i.tree, namespace=ns),
        "structure": lambda i: lambda: structure(i.tree, namespace=ns),
        "map": lambda i: lambda: tmap(_f1, i.tree, namespace=ns),
        "map3": lambda i: lambda: tmap(_f3, i.tree, i.tree2, i.tree3, namespace=ns),
        "map_with_path": lambda i: lambda: tmap_path(_fp, i.tree, namespace=ns),
        "flatten_with_path": lambda i: lambda: flatten_path(i.tree, namespace=ns),
        # optree's paths are raw keys; its accessors print as jax's keystr does
        "keystr": lambda i: lambda: [a.codify("") for a in accessors(i.tree, namespace=ns)],
        "same_structure": lambda i: lambda: structure(i.tree, namespace=ns) == structure(i.tree2, namespace=ns),
    }
    return Lib("optree", optree.__version__, ops, {"flatten": lambda r: r[0], "flatten_with_path": lambda r: r[1]})


def _dm_tree() -> Lib:
    import tree as dm

    def no_structure(_: Inputs) -> Callable[[], Any]:
        raise Unsupported("no structure object")

    def same(i: Inputs) -> Callable[[], Any]:
        def run() -> bool:
            dm.assert_same_structure(i.tree, i.tree2)
            return True

        return run

    ops: dict[str, Op] = {
        "flatten": no_structure,
        "unflatten": lambda i: lambda: dm.unflatten_as(i.tree, i.leaves),
        "leaves": lambda i: lambda: dm.flatten(i.tree),
        "structure": no_structure,
        "map": lambda i: lambda: dm.map_structure(_f1, i.tree),
        "map3": lambda i: lambda: dm.map_structure(_f3, i.tree, i.tree2, i.tree3),
        "map_with_path": lambda i: lambda: dm.map_structure_with_path(_fp, i.tree),
        "flatten_with_path": lambda i: lambda: dm.flatten_with_path(i.tree),
        "keystr": lambda i: lambda: ["/".join(map(str, p)) for p, _ in dm.flatten_with_path(i.tree)],
        "same_structure": same,
    }
    version = getattr(dm, "__version__", "?")
    return Lib("dm-tree", version, ops, {"flatten_with_path": lambda r: [x for _, x in r]})


def _torch() -> Lib:
    import torch
    import torch.utils._pytree as tp

    tp.register_pytree_node(
        Affine,
        lambda a: ([a.w, a.b], a.name),
        lambda c, name: Affine(*c, name),
        flatten_with_keys_fn=lambda a: ([(tp.GetAttrKey("w"), a.w), (tp.GetAttrKey("b"), a.b)], a.name),
    )
    flatten, structure, keystr = tp.tree_flatten, tp.tree_structure, tp.keystr
    ops: dict[str, Op] = {
        "flatten": lambda i: lambda: flatten(i.tree),
        "unflatten": lambda i: lambda: tp.tree_unflatten(i.leaves, i.treedef),
        "leaves": lambda i: lambda: tp.tree_leaves(i.tree),
        "structure": lambda i: lambda: structure(i.tree),
        "map": lambda i: lambda: tp.tree_map(_f1, i.tree),
        "map3": lambda i: lambda: tp.tree_map(_f3, i.tree, i.tree2, i.tree3),
        "map_with_path": lambda i: lambda: tp.tree_map_with_path(_fp, i.tree),
        "flatten_with_path": lambda i: lambda: tp.tree_flatten_with_path(i.tree),
        "keystr": lambda i: lambda: [keystr(p) for p, _ in tp.tree_flatten_with_path(i.tree)[0]],
        "same_structure": lambda i: lambda: structure(i.tree) == structure(i.tree2),
    }
    return Lib(
        "torch",
        torch.__version__,
        ops,
        {"flatten": lambda r: r[0], "flatten_with_path": lambda r: [x for _, x in r[0]]},
        any_order=True,
    )


LOADERS: dict[str, Callable[[], Lib]] = {
    NATIVE: _treekit("native"),
    PURE: _treekit("pure"),
    "jax": _jax,
    "optree": _optree,
    "dm-tree": _dm_tree,
    "torch": _torch,
}
IMPORT_NAMES = {
    NATIVE: "treekit",
    PURE: "treekit",
    "jax": "jax",
    "optree": "optree",
    "dm-tree": "tree",
    "torch": "torch",
}


def load(names: list[str]) -> tuple[dict[str, Lib], dict[str, str]]:
    """The libraries that import, and why each other one is missing. jax loads first, so that
    it registers the custom node itself (treekit's bridge would otherwise mirror treekit's
    registration into jax, and jax would time treekit's flatten function)."""
    libs: dict[str, Lib] = {}
    missing: dict[str, str] = {}
    for name in sorted(names, key=lambda n: n != BASELINE):
        try:
            importlib.import_module(IMPORT_NAMES[name])
        except ImportError:
            missing[name] = "not installed"
            continue
        try:
            libs[name] = LOADERS[name]()
        except Unsupported as exc:  # a treekit core that is not the one in this process
            missing[name] = str(exc)
    return {name: libs[name] for name in names if name in libs}, missing


# -- checking ------------------------------------------------------------------------------------------
def same_objects(a: Any, b: list[Any], any_order: bool = False) -> bool:
    """Whether ``a`` holds exactly the objects of ``b``, in order unless ``any_order``
    (compared by identity)."""
    a = list(a)
    if any_order:
        return sorted(map(id, a)) == sorted(map(id, b))
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


TREE_RESULTS = ("unflatten", "map", "map3", "map_with_path")


def check(
    lib: Lib, op: str, result: Any, expected: list[Any], reference_leaves: Callable[[Any], list[Any]]
) -> str | None:
    """Why ``result`` (``lib``'s ``op`` on a tree whose leaves are ``expected``) is wrong, or None.

    Leaf lists must hold ``expected``'s objects (in its order unless ``lib.any_order``); built
    trees (unflatten, maps with functions returning their first leaf) must have them as their
    leaves, read by ``reference_leaves`` (jax's tree_leaves). Key strings and structures are
    checked for count and truth.
    """
    if op in lib.leaves_of:
        ok = same_objects(lib.leaves_of[op](result), expected, lib.any_order)
    elif op == "leaves":
        ok = same_objects(result, expected, lib.any_order)
    elif op in TREE_RESULTS:
        ok = same_objects(reference_leaves(result), expected)
    elif op == "keystr":
        ok = len(result) == len(expected) and all(isinstance(s, str) for s in result)
    elif op == "same_structure":
        ok = result is True
    else:  # structure objects have no common reading; unflatten checks the treedef
        ok = result is not None
    return None if ok else "leaves differ"


# -- timing ------------------------------------------------------------------------------------------------
# The clock: this thread's CPU time by default, which does not count the time the thread
# waits for a core while other jobs run (the machine these numbers come from has 2 cores
# shared by many jobs); ``--clock wall`` for wall-clock time.
CLOCKS: dict[str, Callable[[], float]] = {"cpu": time.thread_time, "wall": time.perf_counter}
clock = CLOCKS["cpu"]
_TICK: dict[Callable[[], float], float] = {}  # each clock's step, measured once


def batch(fn: Callable[[], Any], number: int) -> float:
    """Seconds for ``number`` calls. The garbage collector stays on (unlike timeit's): the
    collections that a library's allocations trigger are part of what it costs in real use."""
    start = clock()
    for _ in range(number):
        fn()
    return clock() - start


def tick() -> float:
    """The smallest step ``clock`` was seen to take: coarse on some machines (a gVisor sandbox
    counts thread time in scheduler ticks), where a batch must be many ticks long."""
    steps = []
    for _ in range(5):
        start = now = clock()
        while now == start:
            now = clock()
        steps.append(now - start)
    return min(steps)


def calibrate(fn: Callable[[], Any], target: float) -> int:
    """Calls per batch so that a batch takes about ``target`` seconds (at least 50 ticks of the clock)."""
    target = max(target, 50 * _TICK.setdefault(clock, tick()))
    number = 1
    while True:
        elapsed = batch(fn, number)
        if elapsed >= target / 4:
            return max(1, round(number * target / elapsed))
        number *= 4 if elapsed < target / 40 else 2


def time_row(fns: dict[str, Callable[[], Any]], rounds: int, target: float) -> dict[str, list[float]]:
    """Seconds per call of each function in each round, the libraries interleaved round-robin
    (the order rotated each round)."""
    numbers = {name: calibrate(fn, target) for name, fn in fns.items()}
    samples: dict[str, list[float]] = {name: [] for name in fns}
    order = list(fns)
    for r in range(rounds):
        for name in order[r % len(order) :] + order[: r % len(order)]:
            samples[name].append(batch(fns[name], numbers[name]) / numbers[name])
    return samples


# -- the run --------------------------------------------------------------------------------------------------
Rows = dict[tuple[str, str], dict[str, Any]]  # (tree, op) -> row


def run(
    libs: dict[str, Lib],
    missing: dict[str, str],
    quick: bool,
    rounds: int,
    target: float,
    only_trees: list[str] | None = None,
    only_ops: list[str] | None = None,
    *,
    elsewhere: dict[str, Rows] | None = None,
) -> dict[str, Any]:
    """Check and time every (tree, op) row; print each row as it is done.

    ``elsewhere``: libraries timed in another process (the pure core), by name: their rows,
    whose ratios (to jax in that process) join this run's rows.
    """
    elsewhere = elsewhere or {}
    names = ordered([*libs, *elsewhere, *missing])
    leaves_op = libs[BASELINE].ops["leaves"]

    def reference_leaves(tree: Any) -> list[Any]:
        return list(leaves_op(Inputs(tree, None, None, None, []))())

    rows: list[dict[str, Any]] = []
    standard_names = set(standard_trees(quick))
    for tree_name, build in trees(quick).items():
        if only_trees and tree_name not in only_trees:
            continue
        try:
            base = (build(), build(), build())
        except ImportError as exc:  # a model library that is not installed
            print(f"{tree_name:<15} skipped: {exc}", flush=True)
            continue
        expected = reference_leaves(base[0])
        inputs = {name: _inputs(lib, base) for name, lib in libs.items()}
        # Collections stay on while timing, but over the objects made while timing only: the
        # libraries' imports (torch's are big) would otherwise make each full collection slow.
        gc.collect()
        gc.freeze()
        # A library that reads the tree differently (None or a custom node as a leaf) is left
        # out of the whole tree: its maps would "agree" while doing less work.
        disagree = {
            name: "leaves differ"
            for name, lib in libs.items()
            if not same_objects(lib.ops["leaves"](inputs[name])(), expected, lib.any_order)
            or not same_objects(inputs[name].leaves, expected, lib.any_order)
        }
        for op in OPS:
            if only_ops and op not in only_ops:
                continue
            fns: dict[str, Callable[[], Any]] = {}
            notes: dict[str, str] = dict(missing)
            for name, lib in libs.items():
                if name in disagree:
                    notes[name] = disagree[name]
                    continue
                try:
                    fn = lib.ops[op](inputs[name])
                    why = check(lib, op, fn(), expected, reference_leaves)
                except Unsupported as exc:
                    why = str(exc)
                except Exception as exc:  # a library that fails an op is reported, not fatal
                    why = f"error: {type(exc).__name__}: {exc}"[:200]
                if why is None:
                    fns[name] = fn
                else:
                    notes[name] = why
            samples = time_row(fns, rounds, target) if BASELINE in fns else {}
            times = {name: min(s) for name, s in samples.items()}
            base_time = times.get(BASELINE)
            row = {
                "tree": tree_name,
                "group": "standard" if tree_name in standard_names else "model",
                "op": op,
                "num_leaves": len(expected),
                "seconds": times,
                "median_seconds": {name: statistics.median(s) for name, s in samples.items()},
                "ratio_to_jax": {k: v / base_time for k, v in times.items()} if base_time else {},
                "notes": notes,
            }
            for name, other in elsewhere.items():
                theirs = other.get((tree_name, op))
                if theirs is not None and name in theirs["ratio_to_jax"]:
                    row["seconds"][name] = theirs["seconds"][name]
                    row["ratio_to_jax"][name] = theirs["ratio_to_jax"][name]
                    row.setdefault("jax_seconds_elsewhere", {})[name] = theirs["seconds"][BASELINE]
                    if name in theirs.get("ratio_runs", {}):  # (its runs, made in its process)
                        row.setdefault("ratio_runs", {})[name] = theirs["ratio_runs"][name]
                else:
                    row["notes"][name] = theirs["notes"].get(name, "not timed") if theirs else "not timed"
            rows.append(row)
            print(_row_text(rows[-1], names), flush=True)
        gc.unfreeze()
    versions = {"python": platform.python_version()} | {name: lib.version for name, lib in libs.items()}
    settings = {
        "quick": quick,
        "rounds": rounds,
        "runs": 1,
        "target_batch_seconds": target,
        "statistic": "min",
        "clock": next(name for name, c in CLOCKS.items() if c is clock),
    }
    result = {"machine": machine(), "versions": versions, "settings": settings, "libraries": names, "rows": rows}
    return totalled(result)


def totalled(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` with its rows' totals: geometric means, worst rows, the torch check."""
    rows, names = result["rows"], result["libraries"]
    standard = [r for r in rows if r["group"] == "standard"]
    model = [r for r in rows if r["group"] == "model"]
    return result | {
        "geomean_ratio_to_jax": geomeans(standard, names),
        "worst_row": worst_rows(standard, names),
        "model_rows": {"geomean_ratio_to_jax": geomeans(model, names), "worst_row": worst_rows(model, names)},
        "torch_check": torch_check(rows),
    }


def merged(results: list[dict[str, Any]]) -> dict[str, Any]:
    """One result of several whole runs of the same rows (``--runs``): each cell the median
    of the runs' cells (each a fastest round over jax's fastest round), each time the median
    of the runs' fastest; every run's cells kept (``ratio_runs``)."""
    if len(results) == 1:
        return results[0]
    rows = []
    for same in zip(*(r["rows"] for r in results)):
        ratios = {k: [r["ratio_to_jax"][k] for r in same if k in r["ratio_to_jax"]] for k in same[0]["ratio_to_jax"]}
        rows.append(
            same[0]
            | {
                "seconds": {k: statistics.median(r["seconds"][k] for r in same) for k in same[0]["seconds"]},
                "ratio_to_jax": {k: statistics.median(v) for k, v in ratios.items()},
                "ratio_runs": ratios | same[0].get("ratio_runs", {}),  # (another process's: as it ran them)
            }
        )
    settings = results[0]["settings"] | {"runs": len(results), "statistic": "median over runs of min"}
    return totalled(results[0] | {"settings": settings, "rows": rows})


def ordered(names: list[str]) -> list[str]:
    """Library names in the table's order (LIBS), others after them."""
    return sorted(dict.fromkeys(names), key=lambda n: LIBS.index(n) if n in LIBS else len(LIBS))


def _inputs(lib: Lib, base: tuple[Any, Any, Any]) -> Inputs:
    """The three trees, and the library's own treedef and leaves of the first (for unflatten)."""
    tree, tree2, tree3 = base
    probe = Inputs(tree, None, None, None, [])
    try:
        leaves, treedef = lib.ops["flatten"](probe)()[:2]
    except Unsupported:  # dm-tree: the tree is its own structure
        leaves, treedef = lib.ops["leaves"](probe)(), tree
    return Inputs(tree, tree2, tree3, treedef, list(leaves))


def geomeans(rows: list[dict[str, Any]], names: list[str]) -> dict[str, dict[str, Any]]:
    """Per library: the geometric mean of its ratios to jax over the rows it has."""
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        ratios = [row["ratio_to_jax"][name] for row in rows if name in row["ratio_to_jax"]]
        out[name] = {"geomean": _geomean(ratios) if ratios else None, "rows": len(ratios), "of": len(rows)}
    return out


def worst_rows(rows: list[dict[str, Any]], names: list[str]) -> dict[str, dict[str, Any] | None]:
    """Per library: its row with the highest ratio to jax, and how many rows are above 1.0."""
    out: dict[str, dict[str, Any] | None] = {}
    for name in names:
        timed = [row for row in rows if name in row["ratio_to_jax"]]
        if not timed:
            out[name] = None
            continue
        worst = max(timed, key=lambda row: row["ratio_to_jax"][name])
        above = sum(row["ratio_to_jax"][name] > 1.0 for row in timed)
        out[name] = {"tree": worst["tree"], "op": worst["op"], "ratio": worst["ratio_to_jax"][name], "above_1": above}
    return out


def torch_check(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Whether the native core is at least TORCH_TARGET times faster than torch on every row
    both ran; the rows where it is not."""
    timed = [(row, s) for row in rows if (s := _torch_speedup(row))]
    return {
        "target": TORCH_TARGET,
        "rows": len(timed),
        "met": sum(s >= TORCH_TARGET for _, s in timed),
        "smallest": min((s for _, s in timed), default=None),
        "below": [{"tree": row["tree"], "op": row["op"], "speedup": s} for row, s in timed if s < TORCH_TARGET],
    }


def machine() -> dict[str, Any]:
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")
    except OSError:
        pass
    return {
        "platform": platform.platform(),
        "cpu": model,
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
    }


# -- output ---------------------------------------------------------------------------------------------------
NOTE_MARKS = {
    "not installed": "n/i",
    "leaves differ": "diff",
    "no structure object": "n/a",
    "native core not in use": "n/b",
    "not timed": "-",
}
WIDTH = 12


def _cell(row: dict[str, Any], name: str) -> str:
    if name in row["ratio_to_jax"]:
        return f"{row['ratio_to_jax'][name]:.2f}"
    note = row["notes"].get(name, "-")
    return NOTE_MARKS.get(note, "err" if note.startswith("error") else note[:6])


def _row_text(row: dict[str, Any], names: list[str]) -> str:
    cells = [f"{row['tree']:<15}", f"{row['op']:<18}"]
    base = row["seconds"].get(BASELINE)
    cells.append(f"{base * 1e6:>10.1f}" if base else f"{'-':>10}")
    cells += [f"{_cell(row, name):>{WIDTH}}" for name in names]
    cells.append(_torch_text(row))
    return " ".join(cells)


def _torch_speedup(row: dict[str, Any]) -> float | None:
    """torch's time over the native core's (the TORCH_TARGET check), None where either is missing."""
    seconds = row["seconds"]
    if "torch" in seconds and NATIVE in seconds:
        return float(seconds["torch"] / seconds[NATIVE])
    return None


def _torch_text(row: dict[str, Any]) -> str:
    speedup = _torch_speedup(row)
    if speedup is None:
        return f"{'-':>9}"
    return f"{speedup:>7.1f} " + ("ok" if speedup >= TORCH_TARGET else "NO")


def header(names: list[str]) -> str:
    cells = [f"{'tree':<15}", f"{'op':<18}", f"{'jax us':>10}", *(f"{n:>{WIDTH}}" for n in names), f"{'torch/tk':>9}"]
    return " ".join(cells)


def runs_text(result: dict[str, Any]) -> str:
    runs = result["settings"].get("runs", 1)
    return f", the median of {runs} runs" if runs > 1 else ""


def summary(result: dict[str, Any]) -> str:
    names = result["libraries"]
    lines = [""]
    for title, group in (("standard trees", result), ("model trees", result["model_rows"])):
        lines.append(f"{title}, ratio to jax: geometric mean (rows timed / rows); worst row; rows above 1.0:")
        for name in [n for n in names if n != BASELINE]:
            g, w = group["geomean_ratio_to_jax"][name], group["worst_row"][name]
            value = f"{g['geomean']:.2f}" if g["geomean"] else "-"
            worst = f"  worst {w['ratio']:.2f} ({w['tree']} {w['op']}); {w['above_1']} above 1.0" if w else ""
            lines.append(f"  {name:<13} {value:>6}  ({g['rows']}/{g['of']} rows){worst}")
    check = result["torch_check"]
    if check["rows"]:
        below = ", ".join(f"{b['tree']} {b['op']} {b['speedup']:.1f}x" for b in check["below"]) or "none"
        lines.append(
            f"native treekit >= {check['target']:.0f}x faster than torch: {check['met']} of {check['rows']} rows "
            f"(smallest {check['smallest']:.1f}x); below: {below}"
        )
    lines += _per_leaf_text(result)
    lines.append(
        f"cells: time / jax's time (fastest of the rounds{runs_text(result)}; lower is faster); n/i not installed, "
        "n/a no such op, "
        "n/b native core not built, diff leaves differ from jax's, err the op raised"
    )
    versions = ", ".join(f"{k} {v}" for k, v in result["versions"].items())
    lines.append(f"versions: {versions}")
    m = result["machine"]
    lines.append(f"machine: {m['cpu']}, {m['cores']} cores, {m['platform']}")
    return "\n".join(lines)


NATIVE_GEOMEAN_TARGET = 0.5  # the native core: twice as fast as jax, as a geometric mean


def targets(result: dict[str, Any]) -> list[str]:
    """The performance targets as a Markdown table: each with this run's figure."""
    geo, worst, check = result["geomean_ratio_to_jax"], result["worst_row"], result["torch_check"]
    lines = ["| target | this run | met |", "|---|---|---|"]

    def add(target: str, figure: str, met: bool) -> None:
        lines.append(f"| {target} | {figure} | {'yes' if met else '**no**'} |")

    pure = geo.get(PURE, {}).get("geomean")
    model = result.get("model_rows", {"geomean_ratio_to_jax": {}, "worst_row": {}})
    for title, g, wr in (
        ("standard trees", geo, worst),
        ("model trees", model["geomean_ratio_to_jax"], model["worst_row"]),
    ):
        native, w = g.get(NATIVE, {}).get("geomean"), wr.get(NATIVE)
        if native is None or w is None:
            continue
        add(
            f"{title}: native geometric mean <= {NATIVE_GEOMEAN_TARGET}x jax",
            f"{native:.2f}",
            native <= NATIVE_GEOMEAN_TARGET,
        )
        add(
            f"{title}: no native row above 1.0x jax",
            f"{w['above_1']} of {g[NATIVE]['rows']} rows above; worst {w['ratio']:.2f} ({w['tree']}, {w['op']})",
            w["above_1"] == 0,
        )
    if check["rows"]:
        add(
            f"native >= {TORCH_TARGET:.0f}x faster than torch on every row",
            f"{check['met']} of {check['rows']} rows; smallest {check['smallest']:.1f}x",
            check["met"] == check["rows"],
        )
    if pure is not None:
        lines.append(f"| (pure core, for reference) | geometric mean {pure:.2f} | |")
    return lines


def markdown(result: dict[str, Any]) -> str:
    """The results as Markdown (docs/performance.md): the targets, a row per (tree, op) with
    the geometric means and worst rows, per operation the cores' geometric means, and ns per
    leaf on mlp-1000."""
    names = [n for n in result["libraries"] if n != BASELINE]
    lines = [
        *targets(result),
        "",
        "| tree | op | jax µs | " + " | ".join(names) + f" | torch / treekit (>= {TORCH_TARGET:.0f}) |",
        "|---|---|---:|" + "---:|" * len(names) + "---:|",
    ]
    for row in result["rows"]:
        base = row["seconds"].get(BASELINE)
        speedup = _torch_speedup(row)
        cells = [row["tree"], OP_TEXT.get(row["op"], row["op"]), f"{base * 1e6:.1f}" if base else "-"]
        cells += [_cell(row, name) for name in names]
        cells.append("-" if speedup is None else f"{speedup:.1f}" + ("" if speedup >= TORCH_TARGET else " **no**"))
        lines.append("| " + " | ".join(cells) + " |")
    geo, worst = result["geomean_ratio_to_jax"], result["worst_row"]
    cells = _geomean_cells(geo, names)
    check = result["torch_check"]
    met = f"{check['met']} of {check['rows']} rows" if check["rows"] else "-"
    lines.append("| **geometric mean, standard trees** | | | " + " | ".join(cells) + f" | {met} |")
    cells = [f"{worst[n]['ratio']:.2f} ({worst[n]['tree']}, {worst[n]['op']})" if worst[n] else "-" for n in names]
    smallest = f"{check['smallest']:.1f}" if check["smallest"] else "-"
    lines.append("| **worst row** | | | " + " | ".join(cells) + f" | {smallest} |")
    model = result.get("model_rows")
    if model:
        cells = _geomean_cells(model["geomean_ratio_to_jax"], names)
        lines.append("| **geometric mean, model trees** | | | " + " | ".join(cells) + " | |")
    cores = [n for n in (NATIVE, PURE) if n in names]
    lines += ["", "| op | " + " | ".join(f"{n} / jax, geometric mean (worst tree)" for n in cores) + " |"]
    lines.append("|---|" + "---:|" * len(cores))
    for op in OPS:
        cells = []
        for name in cores:
            rows = [row for row in result["rows"] if row["op"] == op and name in row["ratio_to_jax"]]
            if not rows:
                cells.append("-")
                continue
            w = max(rows, key=lambda row: row["ratio_to_jax"][name])
            ratios = [row["ratio_to_jax"][name] for row in rows]
            cells.append(f"{_geomean(ratios):.2f} ({w['tree']} {w['ratio_to_jax'][name]:.2f})")
        lines.append(f"| {OP_TEXT.get(op, op)} | " + " | ".join(cells) + " |")
    for title, ns in (
        (f"ns per leaf, {PER_LEAF_TREE}", per_leaf(result)),
        (f"ns per dataclass node, {PER_NODE_TREE}", per_leaf(result, PER_NODE_TREE, PER_NODE_COUNT)),
    ):
        if ns:
            libs = ordered(list({name: None for by_lib in ns.values() for name in by_lib}))
            lines += ["", f"| {title} | " + " | ".join(libs) + " |", "|---|" + "---:|" * len(libs)]
            for op, by_lib in ns.items():
                lines.append(f"| {op} | " + " | ".join(f"{by_lib[n]:.1f}" if n in by_lib else "-" for n in libs) + " |")
    return "\n".join(lines) + "\n"


def _geomean_cells(geo: dict[str, dict[str, Any]], names: list[str]) -> list[str]:
    return [f"**{geo[n]['geomean']:.2f}** ({geo[n]['rows']} rows)" if geo[n]["geomean"] else "-" for n in names]


PER_LEAF_TREE, PER_LEAF_OPS = "mlp-1000", ("flatten", "leaves", "unflatten")
# ns per dataclass node: dataclass-3000's time over its 3,000 dataclass nodes (2 leaves each)
PER_NODE_TREE, PER_NODE_COUNT = "dataclass-3000", 3000


def per_leaf(result: dict[str, Any], tree: str = PER_LEAF_TREE, per: int | None = None) -> dict[str, dict[str, float]]:
    """Nanoseconds per leaf, by op then library, of flatten, leaves and unflatten on
    mlp-1000 (the walker's cost per node: the tree has 2,000 leaves in 1,000 two-key dicts);
    with ``per``, per that many of ``tree``'s nodes instead."""
    out: dict[str, dict[str, float]] = {}
    for row in result["rows"]:
        if row["tree"] == tree and row["op"] in PER_LEAF_OPS:
            count = per or row["num_leaves"]
            out[row["op"]] = {name: t * 1e9 / count for name, t in row["seconds"].items()}
    return out


def _per_leaf_text(result: dict[str, Any]) -> list[str]:
    lines = []
    for title, ns in (
        (f"ns per leaf on {PER_LEAF_TREE}:", per_leaf(result)),
        (f"ns per dataclass node on {PER_NODE_TREE}:", per_leaf(result, PER_NODE_TREE, PER_NODE_COUNT)),
    ):
        if ns:
            lines.append(title)
        for op, by_lib in ns.items():
            cells = ", ".join(f"{name} {v:.1f}" for name, v in by_lib.items())
            lines.append(f"  {op:<10} {cells}")
    return lines


def _geomean(values: list[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values))


BEGIN, END = "<!-- compare.py --markdown: begin -->", "<!-- compare.py --markdown: end -->"


def write_markdown(path: str, text: str) -> None:
    """Write ``text`` to ``path``; where ``path`` is a page holding the BEGIN and END marks
    (docs/performance.md), only what lies between them is replaced."""
    try:
        with open(path) as f:
            page = f.read()
    except FileNotFoundError:
        page = ""
    if BEGIN in page and END in page:
        head, rest = page.split(BEGIN, 1)
        text = head + BEGIN + "\n" + text + END + rest.split(END, 1)[1]
    with open(path, "w") as f:
        f.write(text)


def time_elsewhere(core_env: dict[str, str], name: str, passed: list[str]) -> tuple[Rows, str, str | None]:
    """Time ``name`` (and jax) in a child process with ``core_env`` added to the environment:
    its rows, its version, and why it failed (None if it did not)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "child.json")
        argv = [sys.executable, os.path.abspath(__file__), "--libs", f"{name},{BASELINE}", "--json", out, *passed]
        proc = subprocess.run(argv, env=dict(os.environ, **core_env), capture_output=True, text=True)
        if proc.returncode != 0 or not os.path.exists(out):
            return {}, "?", f"child run failed: {proc.stderr.strip()[-300:]}"
        with open(out) as f:
            child = json.load(f)
    rows = {(row["tree"], row["op"]): row for row in child["rows"]}
    return rows, child["versions"].get(name, "?"), None


# -- instruction counts (--callgrind) --------------------------------------------------------------------
COUNTABLE = (NATIVE, PURE, "optree", "dm-tree")  # jax's and torch's imports take minutes under valgrind
WARM_CALLS = 20  # compiled builders and key-order caches settle within these


def count_calls(lib_name: str, tree_name: str, op: str, calls: int, quick: bool) -> None:
    """The child of --callgrind: load one library, make its inputs, call ``op`` ``calls`` times."""
    libs, missing = load([lib_name])
    if lib_name not in libs:
        raise SystemExit(f"{lib_name}: {missing.get(lib_name)}")
    build = trees(quick)[tree_name]
    inputs = _inputs(libs[lib_name], (build(), build(), build()))
    fn = libs[lib_name].ops[op](inputs)
    for _ in range(calls):
        fn()


def instructions(lib_name: str, tree_name: str, op: str, calls: int, quick: bool) -> float | None:
    """CPU instructions per call of ``op`` on ``tree_name``: callgrind's total for WARM_CALLS
    + ``calls`` calls minus its total for WARM_CALLS, over ``calls``. None if it fails."""
    totals = []
    env = dict(os.environ, TREEKIT_PURE="1" if lib_name == PURE else "")
    for n in (WARM_CALLS, WARM_CALLS + calls):
        argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable]
        argv += [os.path.abspath(__file__), "--count-child", f"{lib_name},{tree_name},{op},{n}"] + ["--quick"] * quick
        proc = subprocess.run(argv, env=env, capture_output=True, text=True)
        found = [line for line in proc.stderr.splitlines() if "Collected :" in line]
        if proc.returncode != 0 or not found:
            return None
        totals.append(int(found[-1].rsplit(":", 1)[1]))
    return (totals[1] - totals[0]) / calls


def callgrind(names: list[str], tree_names: list[str], ops: list[str], calls: int, quick: bool) -> dict[str, Any]:
    """Instructions per call (and per leaf) for each library, tree and op; printed as it goes."""
    names = [n for n in names if n in COUNTABLE]
    print(f"{'tree':<15} {'op':<18}" + "".join(f"{n:>14}" for n in names) + "   (instructions per call)")
    rows = []
    for tree_name in tree_names:
        num_leaves = len(_counter_leaves(trees(quick)[tree_name]()))
        for op in ops:
            counts = {name: instructions(name, tree_name, op, calls, quick) for name in names}
            rows.append({"tree": tree_name, "op": op, "num_leaves": num_leaves, "instructions": counts})
            cells = "".join(f"{c:>14,.0f}" if c is not None else f"{'-':>14}" for c in counts.values())
            print(f"{tree_name:<15} {op:<18}{cells}", flush=True)
    return {"machine": machine(), "calls": calls, "rows": rows}


def _counter_leaves(tree: Any) -> list[Any]:
    """The float leaves of a standard tree (its leaves are its floats, in any order)."""
    out, stack = [], [tree]
    while stack:
        x = stack.pop()
        if isinstance(x, float):
            out.append(x)
        elif isinstance(x, dict):
            stack.extend(x.values())
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, Affine):
            stack += [x.w, x.b]
    return out


def import_model_libraries() -> None:
    """Import the model libraries (those installed) before treekit, as a script whose imports
    are sorted does (``equinox``, ``flax``, ``jax``, ..., ``treekit``): their classes are then
    registered with JAX before treekit sees JAX."""
    for name in ("jax", "equinox", "flax.linen", "flax.nnx", "flax.struct"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="tiny trees, 3 rounds, short batches (a smoke run)")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    parser.add_argument("--markdown", metavar="PATH", help="write the table as Markdown")
    parser.add_argument("--libs", default=",".join(LIBS), help=f"comma-separated, from {','.join(LIBS)}")
    parser.add_argument("--trees", help="comma-separated tree names (default: all)")
    parser.add_argument("--ops", help=f"comma-separated, from {','.join(OPS)} (default: all)")
    parser.add_argument("--rounds", type=int, help="rounds per row, the fastest counts (default 9; 3 with --quick)")
    parser.add_argument(
        "--runs", type=int, default=1, help="whole runs of the rows, a cell the median of the runs' cells (default 1)"
    )
    parser.add_argument("--target", type=float, help="seconds per timed batch (default 0.005; 0.001 with --quick)")
    parser.add_argument("--clock", choices=list(CLOCKS), default="cpu", help="the thread's CPU time (default) or wall")
    parser.add_argument(
        "--callgrind",
        type=int,
        metavar="CALLS",
        help=f"instead of timing, count instructions per call over CALLS calls under valgrind ({', '.join(COUNTABLE)})",
    )
    parser.add_argument(
        "--treekit-first",
        action="store_true",
        help="import treekit before the model libraries (default: after, as sorted imports put it)",
    )
    parser.add_argument("--count-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.treekit_first:
        import_model_libraries()
    if args.count_child:
        lib_name, tree_name, op, calls = args.count_child.split(",")
        count_calls(lib_name, tree_name, op, int(calls), args.quick)
        return 0
    if args.callgrind:
        tree_names = args.trees.split(",") if args.trees else list(trees(args.quick))
        ops = args.ops.split(",") if args.ops else list(OPS)
        counted = callgrind(args.libs.split(","), tree_names, ops, args.callgrind, args.quick)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(counted, f, indent=1)
        return 0
    global clock
    clock = CLOCKS[args.clock]
    names = [n for n in args.libs.split(",") if n]
    unknown = sorted(set(names) - set(LIBS))
    if unknown:
        parser.error(f"unknown libraries {unknown}; choose from {list(LIBS)}")
    if BASELINE not in names:
        names.append(BASELINE)
    rounds = args.rounds or (3 if args.quick else 9)
    target = args.target or (0.001 if args.quick else 0.005)
    passed = ["--rounds", str(rounds), "--runs", str(args.runs), "--target", str(target), "--clock", args.clock]
    passed += ["--treekit-first"] * args.treekit_first
    passed += (
        ["--quick"] * args.quick + ["--trees", args.trees] * bool(args.trees) + ["--ops", args.ops] * bool(args.ops)
    )
    elsewhere: dict[str, Rows] = {}
    child_versions: dict[str, str] = {}
    child_failed: dict[str, str] = {}
    if PURE in names and NATIVE in names and os.environ.get("TREEKIT_PURE", "") in ("", "0"):
        # the pure core needs a process of its own: treekit picks its core at import
        print(f"timing {PURE} against {BASELINE} in a child process (TREEKIT_PURE=1) ...", flush=True)
        rows, version, failed = time_elsewhere({"TREEKIT_PURE": "1"}, PURE, passed)
        if failed:
            child_failed[PURE] = failed
        else:
            elsewhere[PURE], child_versions[PURE] = rows, version
        names.remove(PURE)
    libs, missing = load(names)
    missing |= child_failed
    if BASELINE not in libs:
        parser.error(f"{BASELINE} is the baseline of every ratio; it is {missing.get(BASELINE)}")
    results = []
    only_trees, only_ops = (args.trees.split(",") if args.trees else None), (args.ops.split(",") if args.ops else None)
    for _ in range(max(1, args.runs)):
        print(header(ordered([*libs, *elsewhere, *missing])), flush=True)
        results.append(run(libs, missing, args.quick, rounds, target, only_trees, only_ops, elsewhere=elsewhere))
    result = merged(results)
    result["versions"] |= child_versions
    print(summary(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if args.markdown:
        write_markdown(args.markdown, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""treekit against jax.tree_util, optree, dm-tree and torch.utils._pytree, side by side in one process.

    python benchmarks/compare.py                  # full run (~2-4 minutes on 2 cores)
    python benchmarks/compare.py --quick          # tiny trees, few rounds: a smoke run
    python benchmarks/compare.py --json out.json  # also write every timing as JSON
    python benchmarks/compare.py --markdown t.md  # and the table as Markdown

Every (tree, operation) row times each library in the same process, interleaved round-robin
(one batch per library per round, the order rotated each round), and reports the median of
the rounds as a ratio to jax.tree_util's median: these machines are noisy, so only ratios
mean anything. Before timing a row, each library's result is checked: the leaves it returns
(or the leaves of the tree it builds) must be the very objects jax returns, in jax's order. A
library that is not installed, lacks the operation, or disagrees is left out of the row and
the table says why.

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
import sys
import time
from collections.abc import Callable
from typing import Any, NamedTuple

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isdir(os.path.join(_ROOT, "treekit")):  # time this checkout's treekit, not an installed one
    sys.path.insert(0, _ROOT)

LIBS = ("treekit", "jax", "optree", "dm-tree", "torch")
BASELINE = "jax"
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
    """Name -> builder (called once per input, so the three trees of map3 share no containers)."""
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


def _treekit() -> Lib:
    import treekit

    treekit.register_pytree_with_keys(
        Affine,
        lambda a: (((treekit.GetAttrKey("w"), a.w), (treekit.GetAttrKey("b"), a.b)), a.name),
        lambda name, c: Affine(c[0], c[1], name),
        lambda a: ((a.w, a.b), a.name),
    )
    return _jax_style(treekit, "treekit", treekit.__version__)


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
    "treekit": _treekit,
    "jax": _jax,
    "optree": _optree,
    "dm-tree": _dm_tree,
    "torch": _torch,
}
IMPORT_NAMES = {"treekit": "treekit", "jax": "jax", "optree": "optree", "dm-tree": "tree", "torch": "torch"}


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
        libs[name] = LOADERS[name]()
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
def batch(fn: Callable[[], Any], number: int) -> float:
    """Seconds for ``number`` calls. The garbage collector stays on (unlike timeit's): the
    collections that a library's allocations trigger are part of what it costs in real use."""
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return time.perf_counter() - start


def calibrate(fn: Callable[[], Any], target: float) -> int:
    """Calls per batch so that a batch takes about ``target`` seconds."""
    number = 1
    while True:
        elapsed = batch(fn, number)
        if elapsed >= target / 4:
            return max(1, round(number * target / elapsed))
        number *= 4 if elapsed < target / 40 else 2


def time_row(fns: dict[str, Callable[[], Any]], rounds: int, target: float) -> dict[str, float]:
    """Median seconds per call of each function, the libraries interleaved round-robin."""
    numbers = {name: calibrate(fn, target) for name, fn in fns.items()}
    samples: dict[str, list[float]] = {name: [] for name in fns}
    order = list(fns)
    for r in range(rounds):
        for name in order[r % len(order) :] + order[: r % len(order)]:
            samples[name].append(batch(fns[name], numbers[name]) / numbers[name])
    return {name: statistics.median(times) for name, times in samples.items()}


# -- the run --------------------------------------------------------------------------------------------------
def run(
    libs: dict[str, Lib],
    missing: dict[str, str],
    quick: bool,
    rounds: int,
    target: float,
    only_trees: list[str] | None = None,
    only_ops: list[str] | None = None,
) -> dict[str, Any]:
    """Check and time every (tree, op) row; print each row as it is done."""
    names = [*libs, *missing]
    leaves_op = libs[BASELINE].ops["leaves"]

    def reference_leaves(tree: Any) -> list[Any]:
        return list(leaves_op(Inputs(tree, None, None, None, []))())

    rows: list[dict[str, Any]] = []
    for tree_name, build in trees(quick).items():
        if only_trees and tree_name not in only_trees:
            continue
        base = (build(), build(), build())
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
            times = time_row(fns, rounds, target) if BASELINE in fns else {}
            base_time = times.get(BASELINE)
            rows.append(
                {
                    "tree": tree_name,
                    "op": op,
                    "num_leaves": len(expected),
                    "seconds": times,
                    "ratio_to_jax": {k: v / base_time for k, v in times.items()} if base_time else {},
                    "notes": notes,
                }
            )
            print(_row_text(rows[-1], names), flush=True)
        gc.unfreeze()
    return {
        "machine": machine(),
        "versions": {"python": platform.python_version()} | {name: lib.version for name, lib in libs.items()},
        "settings": {"quick": quick, "rounds": rounds, "target_batch_seconds": target},
        "libraries": names,
        "rows": rows,
        "geomean_ratio_to_jax": geomeans(rows, names),
    }


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
        out[name] = {
            "geomean": math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None,
            "rows": len(ratios),
            "of": len(rows),
        }
    return out


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
NOTE_MARKS = {"not installed": "n/i", "leaves differ": "diff", "no structure object": "n/a"}


def _cell(row: dict[str, Any], name: str) -> str:
    if name in row["ratio_to_jax"]:
        return f"{row['ratio_to_jax'][name]:.2f}"
    note = row["notes"].get(name, "-")
    return NOTE_MARKS.get(note, "err" if note.startswith("error") else note[:6])


def _row_text(row: dict[str, Any], names: list[str]) -> str:
    cells = [f"{row['tree']:<15}", f"{row['op']:<18}"]
    base = row["seconds"].get(BASELINE)
    cells.append(f"{base * 1e6:>10.1f}" if base else f"{'-':>10}")
    cells += [f"{_cell(row, name):>8}" for name in names]
    torch_speedup = _torch_speedup(row)
    cells.append(f"{torch_speedup:>9.1f}" if torch_speedup else f"{'-':>9}")
    return " ".join(cells)


def _torch_speedup(row: dict[str, Any]) -> float | None:
    seconds = row["seconds"]
    if "torch" in seconds and "treekit" in seconds:
        return float(seconds["torch"] / seconds["treekit"])
    return None


def header(names: list[str]) -> str:
    cells = [f"{'tree':<15}", f"{'op':<18}", f"{'jax us':>10}", *(f"{n:>8}" for n in names), f"{'torch/tk':>9}"]
    return " ".join(cells)


def summary(result: dict[str, Any]) -> str:
    names = result["libraries"]
    lines = ["", "geometric mean of ratios to jax (rows timed / rows):"]
    for name in names:
        g = result["geomean_ratio_to_jax"][name]
        value = f"{g['geomean']:.2f}" if g["geomean"] else "-"
        lines.append(f"  {name:<8} {value:>6}  ({g['rows']}/{g['of']} rows)")
    speedups = [s for row in result["rows"] if (s := _torch_speedup(row))]
    if speedups:
        lines.append(
            f"treekit vs torch: slowest row {min(speedups):.1f}x faster, geomean "
            f"{math.exp(sum(map(math.log, speedups)) / len(speedups)):.1f}x ({len(speedups)} rows)"
        )
    lines.append(
        "cells: time / jax's time (lower is faster); n/i not installed, n/a no such op, "
        "diff leaves differ from jax's, err the op raised"
    )
    versions = ", ".join(f"{k} {v}" for k, v in result["versions"].items())
    lines.append(f"versions: {versions}")
    m = result["machine"]
    lines.append(f"machine: {m['cpu']}, {m['cores']} cores, {m['platform']}")
    return "\n".join(lines)


def markdown(result: dict[str, Any]) -> str:
    """The table as Markdown: a row per (tree, op), then geometric means (docs/performance.md)."""
    names = [n for n in result["libraries"] if n != BASELINE]
    lines = [
        "| tree | op | jax µs | " + " | ".join(names) + " | torch / treekit |",
        "|---|---|---:|" + "---:|" * len(names) + "---:|",
    ]
    for row in result["rows"]:
        base = row["seconds"].get(BASELINE)
        speedup = _torch_speedup(row)
        cells = [row["tree"], OP_TEXT.get(row["op"], row["op"]), f"{base * 1e6:.1f}" if base else "-"]
        cells += [_cell(row, name) for name in names]
        cells.append(f"{speedup:.1f}" if speedup else "-")
        lines.append("| " + " | ".join(cells) + " |")
    geo = result["geomean_ratio_to_jax"]
    cells = [f"{geo[n]['geomean']:.2f} ({geo[n]['rows']} rows)" if geo[n]["geomean"] else "-" for n in names]
    speedups = [s for row in result["rows"] if (s := _torch_speedup(row))]
    mean = f"{_geomean(speedups):.1f}" if speedups else "-"
    lines.append("| **geometric mean** | | | " + " | ".join(cells) + f" | {mean} |")
    lines += ["", "| op | treekit / jax, geometric mean | worst tree | torch / treekit, smallest |"]
    lines.append("|---|---:|---|---:|")
    for op in OPS:
        rows = [row for row in result["rows"] if row["op"] == op and "treekit" in row["ratio_to_jax"]]
        if not rows:
            continue
        ratios = [row["ratio_to_jax"]["treekit"] for row in rows]
        worst = max(rows, key=lambda row: row["ratio_to_jax"]["treekit"])
        torch = [s for row in rows if (s := _torch_speedup(row))]
        lines.append(
            f"| {OP_TEXT.get(op, op)} | {_geomean(ratios):.2f} | {worst['tree']} "
            f"({worst['ratio_to_jax']['treekit']:.2f}) | {f'{min(torch):.1f}' if torch else '-'} |"
        )
    return "\n".join(lines) + "\n"


def _geomean(values: list[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="tiny trees, 3 rounds, short batches (a smoke run)")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    parser.add_argument("--markdown", metavar="PATH", help="write the table as Markdown")
    parser.add_argument("--libs", default=",".join(LIBS), help=f"comma-separated, from {','.join(LIBS)}")
    parser.add_argument("--trees", help="comma-separated tree names (default: all)")
    parser.add_argument("--ops", help=f"comma-separated, from {','.join(OPS)} (default: all)")
    parser.add_argument("--rounds", type=int, help="rounds per row (default 7; 3 with --quick)")
    parser.add_argument("--target", type=float, help="seconds per timed batch (default 0.02; 0.001 with --quick)")
    args = parser.parse_args(argv)
    names = [n for n in args.libs.split(",") if n]
    unknown = sorted(set(names) - set(LIBS))
    if unknown:
        parser.error(f"unknown libraries {unknown}; choose from {list(LIBS)}")
    if BASELINE not in names:
        names.insert(1 if names and names[0] == "treekit" else 0, BASELINE)
    rounds = args.rounds or (3 if args.quick else 7)
    target = args.target or (0.001 if args.quick else 0.02)
    libs, missing = load(names)
    if BASELINE not in libs:
        parser.error(f"{BASELINE} is the baseline of every ratio; it is {missing.get(BASELINE)}")
    print(header([*libs, *missing]), flush=True)
    result = run(
        libs,
        missing,
        args.quick,
        rounds,
        target,
        args.trees.split(",") if args.trees else None,
        args.ops.split(",") if args.ops else None,
    )
    print(summary(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

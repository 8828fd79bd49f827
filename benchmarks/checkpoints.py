"""Checkpoint files: treekit.save/load against safetensors, numpy's .npz and orbax, side by side.

    python benchmarks/checkpoints.py                   # full run: a 1 GB tree, a 20,000-leaf tree (minutes)
    python benchmarks/checkpoints.py --quick           # small trees, one round: a smoke run (seconds)
    python benchmarks/checkpoints.py --markdown t.md   # also write the tables as Markdown
    python benchmarks/checkpoints.py --json out.json   # and every measurement as JSON
    python benchmarks/checkpoints.py --rounds 5 --libs treekit,safetensors --cold

Libraries (each where importable): ``treekit`` (``treekit.save`` to ``.safetensors``,
``treekit.load``, ``treekit.load_leaf``; ``treekit mmap`` is ``load(..., mmap=True)``),
``safetensors`` (``safetensors.numpy.save_file`` / ``load_file`` on ``flatten_dict(tree,
sep='.')``, ``safe_open(...).get_tensor`` for one array), ``numpy`` (``np.savez`` /
``np.load`` on ``flatten_dict(tree)``) and ``orbax`` (``StandardCheckpointer``: ``save`` then
``wait_until_finished``, ``restore``; one array by ``PyTreeCheckpointer.restore`` of a
template whose other leaves are ``ocp.PLACEHOLDER``). The flat dicts are made and nested again
inside the timed region: treekit does that work inside ``save`` and ``load``.

Trees: ``big``, 24 float32 arrays of 4096 x 2560 as a model's parameters
(``{'layers': [{'attn': {'q', 'k', 'v', 'o'}, 'mlp': {'up', 'down'}}] * 4}``, keys in that
natural order), 1 GB, and ``many``, 20,000 leaves: 2,000 layers of 10 small arrays. The data is random
(nothing compresses it). ``--quick`` uses the same layouts, smaller.

Method: every measurement runs in a fresh interpreter (this script, ``--child``), so that
the peak of one never includes another's. The child imports its library, builds what it
needs, then takes ``getrusage(RUSAGE_SELF).ru_maxrss`` as the baseline and times the one
operation (wall clock: the work is I/O and orbax's threads); the peak is the rise of
``ru_maxrss`` over the baseline: resident memory of the whole process (numpy buffers, Rust,
C++ and tensorstore allocations alike, which tracemalloc would miss). The tree is built in
place (``Generator.random(out=...)``), so the baseline holds no transient. A save's peak is
what the save adds to the tree it writes; a load's peak includes the tree it returns. Every
loaded tree is checked (its leaf count, shapes, and the first array's values) outside the
timed region. Before each child the parent calls ``os.sync()`` (untimed), so no write still
in flight from an earlier child slows the next. Loads read a file just written, from the
page cache (``--cold``: the file's pages are evicted first, ``posix_fadvise(DONTNEED)``).

Each row is measured ``--rounds`` times (3; 1 with ``--quick``), interleaved round-robin (one
measurement per library per round, the order rotated each round); a time is the fastest
round (on a shared, noisy machine other jobs only add time), a peak the largest. Ratios are
to safetensors. ``treekit.save`` syncs the file to disk before it returns (``os.fsync``,
then an atomic rename), the others do not: the second table times each save followed by an
``os.fsync`` of what it wrote, the cost of a checkpoint that survives a power cut.

Last, ``treekit.metadata``, ``treekit.load_leaf`` (of a small leaf) and ``python -m treekit show``
on a 100 MB and a 1 GB treekit file of the same structure: they read the header (and the one
leaf) only, so neither time nor memory grows with the file's bytes; and on the 20,000-leaf
tree's file, where they grow with the header (the leaves). ``show``'s peak is the resident
memory of its whole process (``RUSAGE_CHILDREN``), not a rise.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isdir(os.path.join(_ROOT, "treekit")):  # time this checkout's treekit, not an installed one
    sys.path.insert(0, _ROOT)

LIBS = ("treekit", "treekit mmap", "safetensors", "numpy", "orbax")
BASELINE = "safetensors"
IMPORTS = {"treekit": "treekit", "treekit mmap": "treekit", "safetensors": "safetensors", "numpy": "numpy"}
IMPORTS["orbax"] = "orbax.checkpoint"
SUFFIX = {"treekit": ".safetensors", "safetensors": ".safetensors", "numpy": ".npz", "orbax": ""}
OPS = ("save", "load", "one")  # "treekit mmap" shares treekit's file: it only loads
FIRST = ("layers", 0, "attn", "q")  # the array "one array" reads: the first in the file's tree


# -- the trees -------------------------------------------------------------------------------------
# A tree is described by a small JSON-able spec, so that a child builds its own: (kind, sizes).
def trees(quick: bool) -> dict[str, dict[str, Any]]:
    if quick:
        return {"big": {"kind": "big", "layers": 4, "rows": 256, "cols": 160}, "many": {"kind": "many", "layers": 100}}
    return {"big": {"kind": "big", "layers": 4, "rows": 4096, "cols": 2560}, "many": {"kind": "many", "layers": 2000}}


def describe(spec: dict[str, Any]) -> str:
    import math

    shapes = [shape for _, shape in _walk(skeleton(spec))]
    size = sum(math.prod(shape) for shape in shapes) * 4
    if spec["kind"] == "big":
        return f"{len(shapes)} float32 arrays of {spec['rows']} x {spec['cols']} ({size:,} bytes of data)"
    return f"{len(shapes):,} leaves: {spec['layers']:,} layers of 10 small float32 arrays ({size:,} bytes of data)"


def scale_trees(quick: bool) -> dict[str, dict[str, Any]]:
    """The header-only readers' files: the big tree's structure (with a 10 KB leaf) at 100 MB and
    1 GB, and the 20,000-leaf tree (with a 32-byte leaf): time that grows with leaves, not bytes."""
    sizes = {"10MB": 41, "100MB": 410} if quick else {"100MB": 410, "1GB": 4096}
    out = {
        label: {"kind": "big", "layers": 4, "rows": rows, "cols": 2560, "norm": True} for label, rows in sizes.items()
    }
    out["1k-leaves" if quick else "20k-leaves"] = {"kind": "many", "layers": 100 if quick else 2000, "norm": True}
    return out


def skeleton(spec: dict[str, Any]) -> dict[str, Any]:
    """The tree with each leaf's shape (a tuple) in place of its array, keys in natural order."""
    if spec["kind"] == "big":
        m = (spec["rows"], spec["cols"])
        tree: dict[str, Any] = {
            "layers": [
                {"attn": {"q": m, "k": m, "v": m, "o": m}, "mlp": {"up": m, "down": m}} for _ in range(spec["layers"])
            ]
        }
        if spec.get("norm"):
            tree["final_norm"] = {"scale": (spec["cols"],)}
        return tree
    d, h = 8, 32
    many: dict[str, Any] = {
        "layers": [
            {
                "attn": {"q": (d, d), "k": (d, d), "v": (d, d), "o": (d, d)},
                "mlp": {"up": (d, h), "up_bias": (h,), "down": (h, d), "down_bias": (d,)},
                "norm": {"scale": (d,), "bias": (d,)},
            }
            for _ in range(spec["layers"])
        ]
    }
    if spec.get("norm"):
        many["final_norm"] = {"scale": (d,)}
    return many


def _walk(tree: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """(path, shape) of every leaf of a skeleton, in insertion order."""
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from _walk(v, (*path, k))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            yield from _walk(v, (*path, i))
    else:
        yield path, tree


def _map(fn: Callable[[tuple[Any, ...], Any], Any], tree: Any, path: tuple[Any, ...] = ()) -> Any:
    if isinstance(tree, dict):
        return {k: _map(fn, v, (*path, k)) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_map(fn, v, (*path, i)) for i, v in enumerate(tree)]
    return fn(path, tree)


def build(spec: dict[str, Any]) -> Any:
    """The tree of random float32 arrays, each filled in place (no temporary copies)."""
    import numpy as np

    rng = np.random.default_rng(0)

    def leaf(_: tuple[Any, ...], shape: tuple[int, ...]) -> Any:
        a = np.empty(shape, np.float32)
        rng.random(out=a, dtype=np.float32)
        return a

    return _map(leaf, skeleton(spec))


def first_array(spec: dict[str, Any]) -> Any:
    """The values of the tree's first array (FIRST), for checking what was read."""
    import numpy as np

    a = np.empty(dict(_walk(skeleton(spec)))[FIRST], np.float32)
    np.random.default_rng(0).random(out=a, dtype=np.float32)
    return a


# -- the child: one operation of one library, timed, in a fresh process ------------------------------
def _maxrss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def _get(tree: Any, path: tuple[Any, ...]) -> Any:
    for k in path:
        tree = tree[k]
    return tree


def _check(lib: str, op: str, got: Any, spec: dict[str, Any]) -> None:
    """That what was read is what was saved: every leaf's shape (a load), the first array's values."""
    import numpy as np

    expected = list(_walk(skeleton(spec)))
    if op == "load":
        if lib in ("safetensors", "numpy"):  # nested dicts: a list's items under '0', '1', ...
            leaves = {path: _get(got, tuple(map(str, path))) for path, _ in expected}
        else:
            leaves = {path: _get(got, path) for path, _ in expected}
        found = len(list(_walk(got)))
        assert found == len(expected), f"{found} leaves, expected {len(expected)}"
        for path, shape in expected:
            assert tuple(leaves[path].shape) == shape, (path, leaves[path].shape, shape)
        got = leaves[FIRST]
    assert np.array_equal(np.asarray(got), first_array(spec)), "the first array differs"


def _fsync(path: str) -> None:
    """fsync every file at ``path`` (a file or an orbax folder) and its folders."""
    paths = [path] if os.path.isfile(path) else [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs]
    for p in [*paths, *(d for d, _, _ in os.walk(path)), os.path.dirname(path)]:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def operation(lib: str, op: str, spec: dict[str, Any], path: str) -> Callable[[], Any]:
    """The work to time, ready to run: the tree built, the library imported, its objects made."""
    import numpy as np

    import treekit
    from treekit.params import flatten_dict, unflatten_dict

    key = "['layers'][0]['attn']['q']"
    if op == "save":
        tree = build(spec)
        if lib == "treekit":
            fn = lambda: treekit.save(path, tree)  # noqa: E731
        elif lib == "safetensors":
            from safetensors.numpy import save_file

            fn = lambda: save_file(flatten_dict(tree, sep="."), path)  # noqa: E731
        elif lib == "numpy":
            fn = lambda: np.savez(path, **flatten_dict(tree))  # noqa: E731
        else:
            import orbax.checkpoint as ocp

            ckptr = ocp.StandardCheckpointer()

            def fn() -> None:
                ckptr.save(path, tree)
                ckptr.wait_until_finished()
    elif op == "load":
        if lib in ("treekit", "treekit mmap"):
            mmap = lib == "treekit mmap"
            fn = lambda: treekit.load(path, mmap=mmap)  # noqa: E731
        elif lib == "safetensors":
            from safetensors.numpy import load_file

            fn = lambda: unflatten_dict(load_file(path), sep=".")  # noqa: E731
        elif lib == "numpy":

            def fn() -> Any:
                with np.load(path) as z:
                    return unflatten_dict({k: z[k] for k in z.files})
        else:
            import orbax.checkpoint as ocp

            ckptr = ocp.StandardCheckpointer()
            fn = lambda: ckptr.restore(path)  # noqa: E731
    elif op == "one":
        if lib in ("treekit", "treekit mmap"):
            mmap = lib == "treekit mmap"
            fn = lambda: treekit.load_leaf(path, key, mmap=mmap)  # noqa: E731
        elif lib == "safetensors":
            from safetensors import safe_open

            def fn() -> Any:
                with safe_open(path, framework="np") as f:
                    return f.get_tensor("layers.0.attn.q")
        elif lib == "numpy":

            def fn() -> Any:
                with np.load(path) as z:
                    return z["layers/0/attn/q"]
        else:
            import jax
            import orbax.checkpoint as ocp

            ckptr = ocp.PyTreeCheckpointer()
            item = _map(
                lambda p, shape: jax.ShapeDtypeStruct(shape, np.float32) if p == FIRST else ocp.PLACEHOLDER,
                skeleton(spec),
            )
            restore_args = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), item)
            args = ocp.args.PyTreeRestore(item=item, restore_args=restore_args)
            fn = lambda: _get(ckptr.restore(path, args=args), FIRST)  # noqa: E731
    elif op == "metadata":
        fn = lambda: treekit.metadata(path)  # noqa: E731
    elif op == "leaf":
        fn = lambda: treekit.load_leaf(path, "['final_norm']['scale']")  # noqa: E731
    elif op == "show":
        command = [sys.executable, "-m", "treekit", "show", path]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([_ROOT, os.environ.get("PYTHONPATH", "")]))
        fn = lambda: subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)  # noqa: E731
    else:
        raise ValueError(f"unknown op {op!r}")
    return fn


def _tiny(spec: dict[str, Any]) -> dict[str, Any]:
    """A small tree of ``spec``'s layout (the warm-up's)."""
    return {**spec, "layers": 2, "rows": 2, "cols": 3} if spec["kind"] == "big" else {**spec, "layers": 2}


def child(job: dict[str, Any]) -> dict[str, Any]:
    """Run one job, ``{'lib', 'op', 'spec', 'path'}``: its time, peak, and for a save the file's
    size and an fsync's time. The same work on a tiny tree runs first, untimed, so that imports
    and first-call set-up (orbax's thread pools, treekit's lazy modules) are not timed."""
    lib, op, spec, path = job["lib"], job["op"], job["spec"], job["path"]
    if lib == "orbax":
        import logging

        logging.getLogger("absl").setLevel(logging.ERROR)
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    if op != "show":
        warm = os.path.join(os.path.dirname(path), f"warm-up-{os.getpid()}{os.path.splitext(path)[1]}")
        try:
            operation("treekit" if lib == "treekit mmap" else lib, "save", _tiny(spec), warm)()
            if op != "save":
                operation(lib, op, _tiny(spec), warm)()
        finally:
            _remove(warm)
    fn = operation(lib, op, spec, path)
    out: dict[str, Any] = {}
    base = _maxrss()
    start = time.perf_counter()
    result = fn()
    out["seconds"] = time.perf_counter() - start
    out["peak"] = _maxrss() - base
    if op == "show":
        out["peak"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # the whole process
    if op == "save":
        start = time.perf_counter()
        _fsync(path)
        out["fsync_seconds"] = time.perf_counter() - start
        out["bytes"] = _size(path)
    elif op in ("load", "one"):
        _check(lib, op, result, spec)
    elif op == "metadata":
        import treekit

        assert len(list(treekit.tree_leaves(result))) == len(list(_walk(skeleton(spec))))
    return out


def _size(path: str) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


# -- the parent: jobs, rounds, tables ----------------------------------------------------------------
def _evict(path: str) -> None:
    """Drop ``path``'s pages from the page cache (after os.sync, they are clean)."""
    paths = [path] if os.path.isfile(path) else [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs]
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def run_child(job: dict[str, Any], cold: bool = False) -> dict[str, Any]:
    os.sync()
    if cold and job["op"] != "save" and os.path.exists(job["path"]):
        _evict(job["path"])
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", json.dumps(job)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
        return {"error": lines[-1][:200] if lines else f"exit status {proc.returncode}"}
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def available(names: list[str]) -> tuple[list[str], dict[str, str]]:
    libs, missing = [], {}
    for name in names:
        try:
            found = importlib.util.find_spec(IMPORTS[name]) is not None
        except ImportError:
            found = False
        if found:
            libs.append(name)
        else:
            missing[name] = "not installed"
    return libs, missing


def versions(libs: list[str]) -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("jax-treekit", "safetensors", "numpy", "orbax-checkpoint", "jax", "tensorstore"):
        try:
            from importlib.metadata import version

            out[dist] = version(dist)
        except Exception:
            pass
    import treekit

    out["jax-treekit"] = treekit.__version__
    return out


def machine() -> dict[str, Any]:
    """compare.py's machine description, with the memory size."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from compare import machine as described

    memory = 0
    try:
        with open("/proc/meminfo") as f:
            memory = int(f.readline().split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return {**described(), "memory_bytes": memory}


def measure(
    libs: list[str], specs: dict[str, dict[str, Any]], rounds: int, folder: str, cold: bool
) -> dict[str, dict[str, dict[str, list[dict[str, Any]]]]]:
    """tree -> lib -> op -> one result per round; the libraries interleaved, the order rotated."""
    results: dict[str, dict[str, dict[str, list[dict[str, Any]]]]] = {
        t: {lib: {op: [] for op in OPS} for lib in libs} for t in specs
    }
    savers = [lib for lib in libs if lib != "treekit mmap"]
    for r in range(rounds):
        order = savers[r % len(savers) :] + savers[: r % len(savers)]
        for tree_name, spec in specs.items():
            for lib in order:
                path = os.path.join(folder, f"{tree_name}-{lib}{SUFFIX[lib]}")
                if os.path.isdir(path):  # orbax refuses to write over a checkpoint
                    shutil.rmtree(path)
                for op in OPS:
                    got = run_child({"lib": lib, "op": op, "spec": spec, "path": path}, cold)
                    results[tree_name][lib][op].append(got)
                    print(f"round {r + 1}/{rounds}  {tree_name:<10}  {lib:<12}  {op:<5}  {_brief(got)}", flush=True)
                    if op != "save" and lib == "treekit" and "treekit mmap" in libs:
                        got = run_child({"lib": "treekit mmap", "op": op, "spec": spec, "path": path}, cold)
                        results[tree_name]["treekit mmap"][op].append(got)
                        print(f"round {r + 1}/{rounds}  {tree_name:<10}  {'treekit mmap':<12}  {op:<5}  {_brief(got)}")
                    if "error" in got and op == "save":
                        break
            if r == rounds - 1:  # (earlier rounds' files are written over)
                for lib in order:
                    _remove(os.path.join(folder, f"{tree_name}-{lib}{SUFFIX[lib]}"))
    return results


def _remove(path: str) -> None:
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.unlink(path)


def measure_scale(specs: dict[str, dict[str, Any]], rounds: int, folder: str) -> dict[str, dict[str, list[Any]]]:
    """file label -> op (metadata, leaf, show) -> one result per round."""
    results: dict[str, dict[str, list[Any]]] = {label: {"metadata": [], "leaf": [], "show": []} for label in specs}
    paths = {label: os.path.join(folder, f"scale-{label}.safetensors") for label in specs}
    for label, spec in specs.items():
        got = run_child({"lib": "treekit", "op": "save", "spec": spec, "path": paths[label]})
        if "error" in got:
            raise SystemExit(f"writing the {label} file failed: {got['error']}")
        results[label]["bytes"] = [got["bytes"]]
    try:
        for r in range(rounds):
            for op in ("metadata", "leaf", "show"):
                labels = list(specs)[r % len(specs) :] + list(specs)[: r % len(specs)]
                for label in labels:
                    got = run_child({"lib": "treekit", "op": op, "spec": specs[label], "path": paths[label]})
                    results[label][op].append(got)
                    print(f"round {r + 1}/{rounds}  scale-{label:<6}  {op:<9}  {_brief(got)}", flush=True)
    finally:
        for path in paths.values():
            os.unlink(path)
    return results


def _brief(got: dict[str, Any]) -> str:
    if "error" in got:
        return f"error: {got['error']}"
    return f"{_secs(got['seconds'])}, peak {_mb(got['peak'])}" + (f", {got['bytes']:,} B" if "bytes" in got else "")


def summarize(samples: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Fastest time, largest peak, over the rounds; None if any round failed."""
    if not samples or any("error" in s for s in samples):
        return None
    out = {"seconds": min(s["seconds"] for s in samples), "peak": max(s["peak"] for s in samples)}
    if "fsync_seconds" in samples[0]:
        out["durable_seconds"] = min(s["seconds"] + s["fsync_seconds"] for s in samples)
        out["bytes"] = samples[-1]["bytes"]
    return out


def _secs(s: float) -> str:
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def _mb(b: float) -> str:
    return f"{b / 1e6:.0f} MB" if abs(b) >= 1e8 else f"{b / 1e6:.1f} MB"


def _ratio(value: float, base: float | None) -> str:
    return f" ({value / base:.2f}x)" if base else ""


def tables(results: Any, specs: dict[str, dict[str, Any]], missing: dict[str, str]) -> list[str]:
    """Markdown: per tree, the comparison table (ratios to safetensors) and the durable-save table."""
    lines: list[str] = []
    for tree_name, by_lib in results.items():
        rows = {lib: {op: summarize(samples) for op, samples in ops.items()} for lib, ops in by_lib.items()}
        base = rows.get(BASELINE, {})
        lines += [
            f"**{describe(specs[tree_name])}**",
            "",
            "| | save | load | one array | file | save peak | load peak |",
        ]
        lines.append("|---" * 7 + "|")
        for lib, ops in rows.items():
            cells = []
            save, load, one = ops["save"], ops["load"], ops["one"]
            for got, op in ((save, "save"), (load, "load"), (one, "one")):
                b = base.get(op)
                if lib == "treekit mmap" and op == "save":
                    cells.append("(treekit's)")
                elif got is None:
                    cells.append(_why(by_lib[lib][op]))
                else:
                    cells.append(_secs(got["seconds"]) + _ratio(got["seconds"], b and b["seconds"]))
            if save is not None and lib != "treekit mmap":
                b = base.get("save")
                cells.append(f"{save['bytes']:,} B" + _ratio(save["bytes"], b and b["bytes"]))
                cells.append(_mb(save["peak"]))
            else:
                cells += ["", ""]
            cells.append(_mb(load["peak"]) if load is not None else "")
            lines.append(f"| {lib} | " + " | ".join(cells) + " |")
        for lib, why in missing.items():
            lines.append(f"| {lib} | {why} | | | | | |")
        lines += ["", "| save, then `os.fsync` | time |", "|---|---|"]
        b = (base.get("save") or {}).get("durable_seconds")
        for lib, ops in rows.items():
            if ops["save"] is not None and lib != "treekit mmap":
                t = ops["save"]["durable_seconds"]
                lines.append(f"| {lib} | {_secs(t)}{_ratio(t, b)} |")
        lines.append("")
    return lines


def _why(samples: list[dict[str, Any]]) -> str:
    errors = [s["error"] for s in samples if "error" in s]
    return ("error: " + errors[0][:60]) if errors else "-"


def scale_table(results: dict[str, dict[str, list[Any]]]) -> list[str]:
    lines = [
        "| treekit file | metadata | metadata peak | load_leaf (small) | load_leaf peak | show | show peak RSS |",
        "|---" * 7 + "|",
    ]
    for label, ops in results.items():
        cells = [f"{label} ({ops['bytes'][0]:,} B)"]
        for op in ("metadata", "leaf", "show"):
            got = summarize(ops[op])
            cells += [_why(ops[op]), ""] if got is None else [_secs(got["seconds"]), _mb(got["peak"])]
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small trees, one round: a smoke run")
    parser.add_argument("--rounds", type=int, help="rounds per measurement (default 3; 1 with --quick)")
    parser.add_argument("--libs", help=f"comma-separated, of {', '.join(LIBS)} (default: all)")
    parser.add_argument("--cold", action="store_true", help="evict each file from the page cache before reading it")
    parser.add_argument("--no-scale", action="store_true", help="skip the metadata/load_leaf/show rows")
    parser.add_argument("--json", metavar="PATH", help="also write every measurement as JSON")
    parser.add_argument("--markdown", metavar="PATH", help="also write the tables as Markdown")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0
    names = args.libs.split(",") if args.libs else list(LIBS)
    unknown = [n for n in names if n not in LIBS]
    if unknown:
        parser.error(f"--libs: unknown {', '.join(unknown)} (known: {', '.join(LIBS)})")
    if "treekit mmap" in names and "treekit" not in names:  # it reads treekit's files
        names.insert(names.index("treekit mmap"), "treekit")
    libs, missing = available(names)
    rounds = args.rounds or (1 if args.quick else 3)
    specs = trees(args.quick)
    about = {"machine": machine(), "versions": versions(libs), "rounds": rounds, "cold": args.cold}
    print(json.dumps(about), flush=True)
    folder = tempfile.mkdtemp(prefix="treekit-ckpt-bench-", dir=os.environ.get("TMPDIR"))
    start = time.perf_counter()
    try:
        results = measure(libs, specs, rounds, folder, args.cold)
        scale = {} if args.no_scale else measure_scale(scale_trees(args.quick), rounds, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    m, v = about["machine"], about["versions"]
    head = [
        f"{m['cores']} cores ({m['cpu']}), {m['memory_bytes'] / 2**30:.0f} GiB, {m['platform']}; "
        + ", ".join(f"{k} {x}" for k, x in v.items()),
        "",
        f"min of {rounds} interleaved round(s) (wall clock), {'cold' if args.cold else 'warm'} page cache; "
        "peaks: rise of ru_maxrss over the baseline, in a fresh process each; ratios to safetensors",
        "",
    ]
    text = head + tables(results, specs, missing) + (scale_table(scale) if scale else [])
    print("\n" + "\n".join(text))
    print(f"({time.perf_counter() - start:.0f} s)")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(text) + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**about, "results": results, "scale": scale}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

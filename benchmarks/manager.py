"""Checkpoint managers in a training loop, side by side: how long ``save`` blocks the step, and
how long until the step is on disk, for treekit.CheckpointManager (synchronous and async) and
orbax's CheckpointManager (async), on the CPU.

    python benchmarks/manager.py [--rounds 3] [--mb 256] [--leaves 20000] [--json PATH]

Trees: ``big``, float32 arrays of 4096 x 2048 (``--mb`` in all), and ``many``, ``--leaves``
small arrays (2,000 layers of 10). Each manager saves 3 steps of the tree into a fresh folder
(its own retention at keep=2); a round times each step's ``save`` (what blocks the caller) and
the step's ``save`` plus ``wait`` (until it is written), after ``os.sync()``. The fastest round
of each; ratios are to orbax.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def trees(mb: int, leaves: int) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    count = max(1, mb * 2**20 // (4096 * 2048 * 4))
    big = {f"layer{i}": {"w": rng.random((4096, 2048), np.float32)} for i in range(count)}
    many = [{f"p{k}": rng.random(16, np.float32) for k in range(10)} for _ in range(leaves // 10)]
    return {"big": big, "many": many}


def treekit_manager(async_save: bool) -> Callable[[str], Any]:
    def make(folder: str) -> Any:
        import treekit

        manager = treekit.CheckpointManager(folder, keep=2, async_save=async_save)
        return manager.save, manager.wait

    return make


def orbax_manager(folder: str) -> Any:
    import orbax.checkpoint as ocp

    manager = ocp.CheckpointManager(folder, options=ocp.CheckpointManagerOptions(max_to_keep=2))

    def save(step: int, tree: Any) -> Any:
        return manager.save(step, args=ocp.args.StandardSave(tree))

    return save, manager.wait_until_finished


MANAGERS = {
    "treekit (sync)": treekit_manager(False),
    "treekit (async)": treekit_manager(True),
    "orbax (async)": orbax_manager,
}


def one_round(make: Callable[[str], Any], tree: Any) -> tuple[float, float]:
    """(median seconds save blocks, median seconds until the step is written) over 3 steps."""
    folder = tempfile.mkdtemp(prefix="treekit-manager-bench-")
    try:
        save, wait = make(os.path.join(folder, "ckpt"))
        blocked, total = [], []
        for step in range(3):
            os.sync()
            start = time.perf_counter()
            save(step, tree)
            blocked.append(time.perf_counter() - start)
            wait()
            total.append(time.perf_counter() - start)
        return statistics.median(blocked), statistics.median(total)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mb", type=int, default=256)
    parser.add_argument("--leaves", type=int, default=20_000)
    parser.add_argument("--json")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    for tree_name, tree in trees(args.mb, args.leaves).items():
        rows: dict[str, list[tuple[float, float]]] = {name: [] for name in MANAGERS}
        for _ in range(args.rounds):
            for name, make in MANAGERS.items():
                try:
                    rows[name].append(one_round(make, tree))
                except ImportError as exc:
                    print(f"{name}: not run ({exc})")
                    break
        for name, got in rows.items():
            if got:
                blocked, total = min(g[0] for g in got), min(g[1] for g in got)
                results[f"{tree_name}/{name}"] = {"blocks_s": blocked, "written_s": total}
        base = results.get(f"{tree_name}/orbax (async)")
        for name in MANAGERS:
            r = results.get(f"{tree_name}/{name}")
            if r:
                ratio = ""
                if base:
                    blocks, written = r["blocks_s"] / base["blocks_s"], r["written_s"] / base["written_s"]
                    ratio = f"  ({blocks:.2f}x, {written:.2f}x orbax)"
                print(f"{tree_name:5} {name:16} blocks {r['blocks_s']:.3f} s, written {r['written_s']:.3f} s{ratio}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()

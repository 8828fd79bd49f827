"""Checkpoints of a tree living in accelerator memory (a TPU where there is one), in one
process: treekit's save, load and CheckpointManager against safetensors' flax binding and
orbax, beside the floors the hardware sets.

    python benchmarks/device_checkpoints.py [--gb 1] [--leaves 2000,20000] [--rounds 3] [--json PATH]

Trees: ``big``, float32 arrays of 4096 x 2560 as a model's layers (``--gb`` of them, 1 GB:
24 arrays; ``--gb 0``: none), and ``many_<n>`` for each of ``--leaves``: n float32[16] arrays
(n/10 layers of 10). Every save gets fresh arrays (put on the device just before, untimed),
so no host copy kept by an earlier transfer hides the device-to-host copy.

Small arrays cross in packs (treekit.sharding.device_get/device_put; the checkpoints use
them): the ``one by one`` rows are treekit with packing off (as it was before), and the
``first call`` rows time one call after every compiled function is dropped (jax's caches
cleared), so they include compiling. ``peak device bytes`` is how far the device's peak
memory rose above the tree during a packed get and put (``memory_stats``, where the device
gives them).

Floors, measured on the same tree: ``device_get`` (every array to the host, all copies
started at once), ``write+fsync`` (those host bytes written to one file and synced),
``read`` (that file's bytes read back into arrays) and ``device_put`` (host arrays onto the
device, until ready). A save's floor is the longer of ``device_get`` and ``write+fsync`` (a
saver that overlaps them perfectly); a load's is ``read`` + ``device_put``. One more row writes
the arrays ``device_get`` just returned (untimed) instead of long-lived host arrays: on the TPU
machine (a gVisor sandbox) memory the transfer has just filled is slower to read the first
time, so that row is the floor a saver of device arrays meets.

Rows: ``treekit.save`` (synced, atomic), ``treekit.load(path, shardings=<the device>)``
(arrays on the device, until ready), ``CheckpointManager`` sync and async (the time ``save``
blocks, and until the step is on disk), ``safetensors.flax`` ``save_file``/``load_file``
(unsynced: its time plus an ``os.sync()`` is given too), orbax ``StandardCheckpointer``
(``save`` returning, then ``wait_until_finished``; ``restore`` onto the device). The fastest of
``--rounds`` rounds, the rows interleaved round by round, after one untimed round of every row
(a process's first transfer off the chip ran 20% faster than every later one in a probe, so
the row timed first, ``device_get``, had a round no other row could have).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def host_trees(gb: float, leaves: list[int]) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    names = ("w1", "b1", "w2", "b2", "scale", "bias", "mean", "var", "gate", "out")
    trees = {
        f"many_{n}": {"layers": [{k: rng.random((16,), np.float32) for k in names} for _ in range(n // len(names))]}
        for n in leaves
    }
    if gb > 0:
        layer = ("q", "k", "v", "o", "up", "down")
        count = max(1, round(gb * 2**30 / (4096 * 2560 * 4 * len(layer))))
        trees["big"] = {"layers": [{k: rng.random((4096, 2560), np.float32) for k in layer} for _ in range(count)]}
    return trees


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=1.0)
    parser.add_argument("--leaves", default="2000,20000", help="the many-leaf trees' sizes, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-warm", dest="warm", action="store_false", help="no untimed round first")
    parser.add_argument("--orbax-many", action="store_true", help="orbax on the many-leaf tree too (slow)")
    parser.add_argument("--json")
    args = parser.parse_args()

    import jax

    import treekit
    from treekit.ops import flatten_dict, unflatten_dict
    from treekit.sharding import _transfer

    device = jax.devices()[0]
    sharding = jax.sharding.SingleDeviceSharding(device)
    folder = tempfile.mkdtemp(prefix="treekit-device-ckpt-")
    results: dict[str, Any] = {"device": str(device), "jax": jax.__version__}
    try:
        import safetensors.flax as stf
    except ImportError:
        stf = None
    try:
        import orbax.checkpoint as ocp
    except ImportError:
        ocp = None

    def one_tree(tree_name: str, host: Any) -> None:
            nbytes = sum(x.nbytes for x in jax.tree.leaves(host))
            path = os.path.join(folder, "tree.safetensors")

            def fresh() -> Any:  # (new device arrays: none holds a host copy of itself yet)
                return jax.block_until_ready(treekit.sharding.device_put(host, device))

            def one_by_one(run: Callable[[], Any]) -> Callable[[], Any]:  # (packing off: treekit as it was)
                def unpacked() -> Any:
                    platforms, _transfer.PACKED_PLATFORMS = _transfer.PACKED_PLATFORMS, frozenset()
                    try:
                        return run()
                    finally:
                        _transfer.PACKED_PLATFORMS = platforms

                return unpacked

            def first_call(run: Callable[[], Any]) -> Any:  # (every compiled function dropped first)
                jax.clear_caches()
                _transfer._compiled.clear()
                _transfer._packer.cache_clear()
                _transfer._splitter.cache_clear()
                return run()

            def treekit_device_get() -> float:
                tree = fresh()
                return timed(lambda: treekit.sharding.device_get(tree))

            def treekit_device_put() -> float:
                return timed(lambda: treekit.sharding.device_put(host, device))

            def peak_above(run: Callable[[], Any]) -> int | None:  # (the peak above what is held before and after)
                stats = device.memory_stats() or {}
                if "peak_bytes_in_use" not in stats:
                    return None
                before = stats["bytes_in_use"]
                kept = run()
                after = device.memory_stats()
                del kept
                return max(0, after["peak_bytes_in_use"] - max(before, after["bytes_in_use"]))

            def timed(run: Callable[[], Any]) -> float:
                start = time.perf_counter()
                jax.block_until_ready(run())
                return time.perf_counter() - start

            def device_get() -> float:
                tree = fresh()
                return timed(lambda: jax.device_get(tree))

            def write_fsync(arrays: Any = None) -> float:
                arrays = jax.tree.leaves(host) if arrays is None else arrays
                start = time.perf_counter()
                with open(os.path.join(folder, "raw"), "wb") as f:
                    for a in arrays:
                        f.write(a.data)
                    f.flush()
                    os.fsync(f.fileno())
                return time.perf_counter() - start

            def write_fresh() -> float:  # the bytes just off the device (their pages new to the host)
                return write_fsync(jax.tree.leaves(jax.device_get(fresh())))

            def read() -> float:
                arrays = jax.tree.leaves(host)
                start = time.perf_counter()
                with open(os.path.join(folder, "raw"), "rb") as f:
                    for a in arrays:
                        f.readinto(memoryview(np.empty_like(a)).cast("B"))
                return time.perf_counter() - start

            def device_put() -> float:
                return timed(lambda: jax.device_put(host, device))

            def treekit_save() -> float:
                tree = fresh()
                return timed(lambda: treekit.save(path, tree))

            def treekit_load() -> float:
                return timed(lambda: treekit.load(path, shardings=sharding))

            def manager(async_save: bool) -> Callable[[], tuple[float, float]]:
                def run() -> tuple[float, float]:
                    where = tempfile.mkdtemp(dir=folder)
                    with treekit.CheckpointManager(where, keep=1, async_save=async_save) as m:
                        tree = fresh()
                        start = time.perf_counter()
                        m.save(0, tree)
                        blocked = time.perf_counter() - start
                        m.wait()
                        total = time.perf_counter() - start
                    shutil.rmtree(where)
                    return blocked, total

                return run

            def save_fresh_folder() -> float:  # treekit.save into a folder made just before (as a step is)
                where = tempfile.mkdtemp(dir=folder)
                tree = fresh()
                took = timed(lambda: treekit.save(os.path.join(where, "tree.safetensors"), tree))
                shutil.rmtree(where)
                return took

            def manager_apart() -> tuple[float, ...]:
                # the sync manager's step, its parts timed one by one: the folder made, the tree
                # saved into it, step.json written and fsynced, the folder fsynced, renamed, the
                # parent fsynced, the retention rules applied (a listing; nothing to delete)
                from treekit.files import fsync_folder

                parent = tempfile.mkdtemp(dir=folder)
                m = treekit.CheckpointManager(parent, keep=1)
                tree = fresh()
                marks = [time.perf_counter()]
                temp = os.path.join(parent, ".treekit-step_00000000.tmp")
                os.makedirs(temp)
                marks.append(time.perf_counter())
                treekit.save(os.path.join(temp, "tree.safetensors"), tree)
                marks.append(time.perf_counter())
                with open(os.path.join(temp, "step.json"), "w") as f:
                    writer = "treekit.CheckpointManager"
                    info = {"step": 0, "metrics": {}, "saved_at": time.time(), "written_by": writer}
                    json.dump(info, f)
                    f.flush()
                    os.fsync(f.fileno())
                marks.append(time.perf_counter())
                fsync_folder(temp)
                marks.append(time.perf_counter())
                os.rename(temp, os.path.join(parent, "step_00000000"))
                marks.append(time.perf_counter())
                fsync_folder(parent)
                marks.append(time.perf_counter())
                m._retain()
                marks.append(time.perf_counter())
                assert m.steps() == [0]
                m.close()
                shutil.rmtree(parent)
                return (*(b - a for a, b in itertools.pairwise(marks)), marks[-1] - marks[0])

            def st_save() -> tuple[float, float]:
                tree = fresh()
                start = time.perf_counter()
                stf.save_file(flatten_dict(tree, sep="."), os.path.join(folder, "st.safetensors"))
                took = time.perf_counter() - start
                os.sync()
                return took, time.perf_counter() - start

            def st_load() -> float:
                return timed(lambda: unflatten_dict(stf.load_file(os.path.join(folder, "st.safetensors")), sep="."))

            def orbax_save() -> tuple[float, float]:
                where = os.path.join(tempfile.mkdtemp(dir=folder), "ckpt")
                checkpointer = ocp.StandardCheckpointer()
                tree = fresh()
                start = time.perf_counter()
                checkpointer.save(where, tree)
                blocked = time.perf_counter() - start
                checkpointer.wait_until_finished()
                total = time.perf_counter() - start
                results.setdefault("_orbax_paths", {})[tree_name] = where
                return blocked, total

            def orbax_load() -> float:
                where = results["_orbax_paths"][tree_name]
                target = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding), host)
                return timed(lambda: ocp.StandardCheckpointer().restore(where, target))

            if tree_name.startswith("many"):  # (first: the peak memory is the highest the process has had)
                on_device = fresh()
                peaks = {
                    "get": peak_above(lambda: treekit.sharding.device_get(on_device)),
                    "put": peak_above(lambda: jax.block_until_ready(treekit.sharding.device_put(host, device))),
                }
                del on_device
                firsts = {
                    "device_get": first_call(treekit_device_get),
                    "device_put": first_call(treekit_device_put),
                    "save": first_call(treekit_save),
                    "load": first_call(treekit_load),
                    "manager (async) blocks": first_call(manager(True))[0],
                }
                results.setdefault("first_calls", {})[tree_name] = firsts
                results.setdefault("peak_device_bytes", {})[tree_name] = peaks
                timings = ", ".join(f"{k} {v:.3f} s" for k, v in firsts.items())
                print(f"\n{tree_name}: first calls (compiling): {timings}")
                print(f"{tree_name}: peak device bytes above the tree: {peaks}", flush=True)
            rows: dict[str, Callable[[], Any]] = {
                "floor: device_get": device_get,
                "floor: write+fsync": write_fsync,
                "floor: write+fsync, bytes fresh off the device": write_fresh,
                "floor: read": read,
                "floor: device_put": device_put,
                "treekit save": treekit_save,
                "treekit load": treekit_load,
                "treekit manager (sync)": manager(False),
                "treekit manager (async)": manager(True),
                "treekit save, into a fresh folder": save_fresh_folder,
                "treekit manager (sync), apart": manager_apart,
                "treekit device_get": treekit_device_get,
                "treekit device_put": treekit_device_put,
            }
            if tree_name.startswith("many"):
                rows |= {
                    "treekit save, one by one": one_by_one(treekit_save),
                    "treekit load, one by one": one_by_one(treekit_load),
                    "treekit manager (async), one by one": one_by_one(manager(True)),
                }
            if stf is not None and len(jax.tree.leaves(host)) <= 20_000:
                rows |= {"safetensors.flax save": st_save, "safetensors.flax load": st_load}
            if ocp is not None and (tree_name == "big" or len(jax.tree.leaves(host)) <= 2_000 or args.orbax_many):
                rows |= {"orbax save": orbax_save, "orbax load": orbax_load}
            for run in rows.values() if args.warm else ():  # (an untimed round: no first call's luck or cost)
                run()
            got: dict[str, list[Any]] = {name: [] for name in rows}
            for _ in range(args.rounds):
                for name, run in rows.items():  # (loads after their saves: each reads the file just written)
                    got[name].append(run())
            best = {name: tuple(map(min, zip(*g))) if isinstance(g[0], tuple) else min(g) for name, g in got.items()}
            save_floor = max(best["floor: device_get"], best["floor: write+fsync"])
            load_floor = best["floor: read"] + best["floor: device_put"]
            table = results[tree_name] = {"bytes": nbytes, "leaves": len(jax.tree.leaves(host)), "rows": best,
                                          "save_floor_s": save_floor, "load_floor_s": load_floor}
            print(f"\n{tree_name}: {table['leaves']} leaves, {nbytes / 2**20:.0f} MB on {device}")
            for name, value in best.items():
                if name.endswith("apart"):
                    parts = ("mkdir", "save", "step.json", "fsync folder", "rename", "fsync parent", "retain")
                    print(f"  {name:46} {value[-1]:7.3f} s: " + ", ".join(f"{p} {v:.4f}" for p, v in zip(parts, value)))
                elif isinstance(value, tuple):
                    ratio = value[1] / save_floor
                    print(f"  {name:46} blocks {value[0]:7.3f} s   done {value[1]:7.3f} s ({ratio:.2f}x floor)")
                else:
                    floor = load_floor if "load" in name else save_floor
                    ratio = "" if name.startswith("floor") else f" ({value / floor:.2f}x floor)"
                    print(f"  {name:46} {value:7.3f} s{ratio}")
            print(f"  save floor {save_floor:.3f} s; load floor {load_floor:.3f} s", flush=True)

    for tree_name, host in host_trees(args.gb, [int(n) for n in args.leaves.split(",") if n]).items():
        one_tree(tree_name, host)
        if args.json:  # (after each tree: a run cut short by a time limit keeps the trees it finished)
            with open(args.json, "w") as f:
                json.dump({k: v for k, v in results.items() if k != "_orbax_paths"}, f, indent=1, default=list)

    results.pop("_orbax_paths", None)
    shutil.rmtree(folder, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=list)


if __name__ == "__main__":
    main()

"""Checkpoints on a mesh: treekit and orbax saving and loading the 1 GB tree of
``checkpoints.py`` on one device and sharded over 8 CPU devices (``model=8``, ``data=2,model=4``).

Each (layout, library, operation) runs in a fresh child process with
``XLA_FLAGS=--xla_force_host_platform_device_count=8``: the child builds the tree, places it
(every array split by ``P(None, 'model')`` on ``model=8``, ``P('data', 'model')`` on
``data=2,model=4``), then times ``save`` (the placed tree) or ``load`` (onto the same layout:
treekit with ``shardings=``, orbax ``StandardCheckpointer.restore`` with a template of
``ShapeDtypeStruct`` carrying the shardings) and samples its anonymous memory (``RssAnon``,
every 2 ms) while the operation runs. CPU "devices" keep their buffers in host memory, so a
load's peak holds the loaded tree itself; memory-mapped file pages are page cache, not counted.

    python benchmarks/mesh_checkpoints.py [--quick] [--rounds N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checkpoints  # (the tree and the machine's description)

LAYOUTS = {
    "one device": None,
    "model=8": (("model",), (8,)),
    "data=2,model=4": (("data", "model"), (2, 4)),
    "2 processes, data=2,model=4": (("data", "model"), (2, 4)),
}
PROCESSES = {"2 processes, data=2,model=4": 2}
LIBS = ("treekit", "orbax")
EIGHT = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu"}


def _anon() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0


def _placed(spec: dict[str, Any], layout: str) -> Any:
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, SingleDeviceSharding
    from jax.sharding import PartitionSpec as P

    host = checkpoints.build(spec)
    if LAYOUTS[layout] is None:
        sharding: Any = SingleDeviceSharding(jax.devices()[0])
    else:
        names, sizes = LAYOUTS[layout]
        mesh = Mesh(np.array(jax.devices()).reshape(sizes), names)
        sharding = NamedSharding(mesh, P(None, "model") if len(names) == 1 else P("data", "model"))
    if jax.process_count() > 1:  # each process makes its own shards
        placed = jax.tree_util.tree_map(lambda x: jax.make_array_from_callback(x.shape, sharding, x.__getitem__), host)
    else:
        placed = jax.tree_util.tree_map(lambda x: jax.device_put(x, sharding), host)
    jax.block_until_ready(placed)
    return placed


def child(job: dict[str, Any]) -> dict[str, Any]:
    import jax

    if "process" in job:
        jax.distributed.initialize(
            f"localhost:{job['port']}", num_processes=job["processes"], process_id=job["process"]
        )

    placed = _placed(job["spec"], job["layout"])
    path = job["path"]
    like = jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), placed)
    shard_bytes = max(s.data.nbytes for s in jax.tree_util.tree_leaves(placed)[0].addressable_shards)
    if job["op"] == "load":
        if job["lib"] == "treekit":
            import treekit

            treekit.save(path, placed)
            fn = lambda: treekit.load(path, like=like)  # noqa: E731
        else:
            import orbax.checkpoint as ocp

            ckptr = ocp.StandardCheckpointer()
            ckptr.save(path, placed)
            ckptr.wait_until_finished()
            fn = lambda: ckptr.restore(path, like)  # noqa: E731
        del placed
    elif job["lib"] == "treekit":
        import treekit

        fn = lambda: treekit.save(path, placed)  # noqa: E731
    else:
        import orbax.checkpoint as ocp

        ckptr = ocp.StandardCheckpointer()

        def fn() -> None:
            ckptr.save(path, placed, force=True)
            ckptr.wait_until_finished()

    import gc

    gc.collect()
    before, peak, done = _anon(), [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _anon())
            time.sleep(0.002)

    sampler = threading.Thread(target=sample)
    sampler.start()
    start = time.perf_counter()
    got = fn()
    jax.block_until_ready(got) if got is not None else None
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    return {"seconds": seconds, "extra_bytes": max(peak[0], _anon()) - before, "shard_bytes": shard_bytes}


def run(job: dict[str, Any]) -> dict[str, Any]:
    """One child, or one per process (``jax.distributed`` on localhost, 8 devices in all): the
    slowest process's time and the most memory any added."""
    count = PROCESSES.get(job["layout"], 1)
    env = EIGHT if count == 1 else {**EIGHT, "XLA_FLAGS": f"--xla_force_host_platform_device_count={8 // count}"}
    if count > 1:
        import socket

        with socket.socket() as sock:
            sock.bind(("localhost", 0))
            port = sock.getsockname()[1]
    jobs = [job] if count == 1 else [{**job, "process": k, "processes": count, "port": port} for k in range(count)]
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--child", json.dumps(j)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for j in jobs
    ]
    outs = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=900)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            return {"error": "timed out"}
        if proc.returncode != 0:
            for p in procs:
                p.kill()
            return {"error": err.strip().splitlines()[-1] if err.strip() else f"exit {proc.returncode}"}
        outs.append(json.loads(out.strip().splitlines()[-1]))
    return {key: max(o[key] for o in outs) for key in outs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 10 MB tree, 1 round (a smoke run)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per cell; the fastest counts (default 3)")
    parser.add_argument("--json", help="write the results as JSON")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    spec = checkpoints.trees(args.quick)["big"]
    rounds = 1 if args.quick else args.rounds
    folder = tempfile.mkdtemp(prefix="mesh-ckpt-")
    results: dict[str, Any] = {}
    try:
        for layout in LAYOUTS:
            for lib in LIBS:
                for op in ("save", "load"):
                    samples = []
                    for k in range(rounds):
                        path = os.path.join(folder, f"{lib}-{k}" + (".safetensors" if lib == "treekit" else ""))
                        samples.append(run({"spec": spec, "layout": layout, "lib": lib, "op": op, "path": path}))
                        shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else None
                        if os.path.exists(path):
                            os.remove(path)
                    good = [s for s in samples if "error" not in s]
                    results[f"{layout}|{lib}|{op}"] = min(good, key=lambda s: s["seconds"]) if good else samples[0]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"tree: {checkpoints.describe(spec)}; {rounds} round(s), the fastest shown")
    print("| layout | library | save s | load s | save: extra host MB | load: extra host MB | one shard MB |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for layout in LAYOUTS:
        for lib in LIBS:
            s, ld = results[f"{layout}|{lib}|save"], results[f"{layout}|{lib}|load"]
            if "error" in s or "error" in ld:
                print(f"| {layout} | {lib} | {s.get('error', '')} {ld.get('error', '')} | | | | |")
                continue
            mb = lambda b: f"{b / 1e6:,.0f}"  # noqa: E731
            print(
                f"| {layout} | {lib} | {s['seconds']:.2f} | {ld['seconds']:.2f} | {mb(s['extra_bytes'])} "
                f"| {mb(ld['extra_bytes'])} | {mb(s['shard_bytes'])} |"
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"tree": checkpoints.describe(spec), "results": results, "machine": checkpoints.machine()}, f, indent=1
            )


if __name__ == "__main__":
    main()

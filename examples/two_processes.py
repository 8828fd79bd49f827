"""A training loop in two processes on one machine, as it runs on many hosts: ``jax.distributed``
over localhost, 4 CPU devices a process, one ``data=8`` mesh; each process reads its own share
of the examples into global batches (``treekit.data``), a jitted step trains a linear model on
them, and a ``CheckpointManager`` saves ``{'train': params and step, 'data': the loader's
state}`` in both processes, asynchronously, each keeping its own position in the data.

The run is stopped after step 12 (as a preemption would), started again, resumed from the
newest step, and trained to step 20; the final params are then compared with those of a run
that was never stopped: the same bits.

    python examples/two_processes.py [FOLDER]
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile

STEPS, STOP, EVERY, BATCH = 20, 12, 4, 8  # steps in all; where the first run stops; save every; rows a process


def worker(me: int, port: int, folder: str, stop: int) -> None:
    """One process: join the job, resume if there is a step, train until ``stop``."""
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax
    import numpy as np

    jax.distributed.initialize(f"localhost:{port}", num_processes=2, process_id=me)
    import jax.numpy as jnp

    import treekit
    from treekit import data

    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("data",))
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 3)).astype(np.float32)
    rows = [{"x": x[i], "y": np.float32(x[i] @ [1.0, -2.0, 0.5])} for i in range(me, 400, 2)]  # this process's
    loader = data.to_mesh(data.batches(data.from_iterable(rows), BATCH), mesh)  # (25 batches: enough)
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    train = {"w": jax.device_put(jnp.zeros(3), replicated), "step": 0}

    @jax.jit
    def step(w: jax.Array, batch: dict[str, jax.Array]) -> jax.Array:
        grad = jax.grad(lambda w: jnp.mean((batch["x"] @ w - batch["y"]) ** 2))(w)
        return w - 0.1 * grad

    with treekit.CheckpointManager(os.path.join(folder, "run"), keep=2) as manager:
        if manager.latest_step() is not None:
            restored = manager.restore(like={"train": train, "data": loader.get_state()})
            train = restored["train"]
            loader.set_state(restored["data"])  # this process's own position
        for batch in loader:
            train = {"w": step(train["w"], batch), "step": train["step"] + 1}
            if train["step"] % EVERY == 0:
                manager.save(train["step"], {"train": train, "data": loader.get_state()})
            if train["step"] == stop:
                break
        loader.close()
    w = np.asarray(train["w"])  # (replicated: every process holds all of it)
    print(f"process {me}: step {train['step']} w {w.tolist()} ({w.tobytes().hex()})", flush=True)


def run(folder: str, stop: int) -> list[str]:
    """Both processes until step ``stop``; their last lines."""
    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", str(me), str(port), folder, str(stop)],
            env=env, stdout=subprocess.PIPE, text=True,
        )
        for me in range(2)
    ]
    outs = [proc.communicate(timeout=300)[0] for proc in procs]
    if any(proc.returncode for proc in procs):
        raise SystemExit(f"a process failed: {[proc.returncode for proc in procs]}")
    return [out.strip().splitlines()[-1] for out in outs]


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        me, port, folder, stop = sys.argv[2:6]
        worker(int(me), int(port), folder, int(stop))
        return
    base = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="treekit-two-processes-")
    stopped, whole = os.path.join(base, "stopped"), os.path.join(base, "whole")
    print("\n".join(run(stopped, STOP)))  # the first run, stopped after step 12
    resumed = run(stopped, STEPS)  # started again: resumed from step 12
    print("\n".join(resumed))
    straight = run(whole, STEPS)  # never stopped
    same = [a.split("(")[-1] == b.split("(")[-1] for a, b in zip(resumed, straight)]
    print(f"resumed run's params equal the unstopped run's, bit for bit: {all(same)}")
    if not all(same):
        raise SystemExit(1)


if __name__ == "__main__":
    main()

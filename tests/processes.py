"""One process of a treekit checkpoint cluster on localhost, for tests/test_mesh_checkpoints.py:
``python tests/processes.py ID COUNT PORT MODE FOLDER``. Every process joins
``jax.distributed`` (8 CPU devices in all, 8 / COUNT each), then:

- ``save``: builds the same tree from the same numpy arrays, sharded ``data=2, model=4`` over
  all processes' devices, saves it together to ``FOLDER/ckpt.safetensors``; process 0 also
  saves the numpy tree alone to ``FOLDER/host.safetensors``;
- ``load``: loads ``FOLDER/ckpt.safetensors`` onto ``model=8`` over all devices, checks every
  shard it holds against the numpy tree, and prints the bytes it read (``read N of M``);
- ``slow``: saves a 256 MB tree to ``FOLDER/ckpt.safetensors`` (a test kills it mid-way);
- ``manager``: saves that tree as steps 0-2 together with a ``CheckpointManager`` (``keep=2``)
  in ``FOLDER/run`` and restores the latest onto ``model=8``; process 0 also saves the numpy
  tree alone to ``FOLDER/host.safetensors``;
- ``own`` / ``own-async``: the single-process pattern in every process: steps 0-3 of
  ``{'train': the sharded tree, 'data': this process's own position and name, 'rng': its own
  host array}`` saved by a sync (async) manager in ``FOLDER/own``, the processes' positions
  apart (async: a ``treekit.save`` of the arrays in the main thread while each step is
  written); each restores the latest (its own values beside the arrays) by ``like=``, by
  ``rules=`` with a ``default=`` onto ``model=8``, and an older step;
- ``late``: both save step 0 (async), then only process 0 saves step 1: its ``wait`` raises a
  ``TimeoutError`` naming process 1 within ``TREEKIT_BARRIER_TIMEOUT_S`` (3 s), and step 1 is
  not listed;
- ``differ``: process 1's tree holds ``kernel`` of another shape: ``save`` and the manager's
  ``save`` raise a ``ValueError`` naming ``['kernel']`` in both processes, writing nothing; so
  does ``save`` where process 1's own values have a key path more.
"""

from __future__ import annotations

import os
import sys
from typing import Any

SPECS = {"embed": ("model",), "kernel": (None, "data", "model"), "ids": (("data", "model"),), "norm": ()}


def host_tree(big: bool = False) -> dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(0)
    if big:
        return {f"w{k}": rng.random((2048, 4096), np.float32) for k in range(8)}
    return {
        "embed": rng.normal(size=(16, 24)).astype(np.float32),
        "kernel": rng.normal(size=(4, 6, 8)).astype(np.float32),
        "ids": np.arange(32, dtype=np.int32),
        "norm": rng.normal(size=(24,)).astype(np.float32),
        "scale": np.float32(2.5),
    }


def sharded(host: dict[str, Any]) -> dict[str, Any]:
    """``host``'s arrays sharded ``data=2, model=4`` over all processes' devices."""
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    return {
        k: jax.make_array_from_callback(
            v.shape, NamedSharding(mesh, P(*SPECS.get(k, ("data", "model")))), v.__getitem__
        )
        if v.ndim
        else v
        for k, v in host.items()
    }


def on_eight(host: dict[str, Any]) -> dict[str, Any]:
    """Shardings of ``host``'s arrays over a ``model=8`` mesh of all devices (another mesh than
    :func:`sharded`'s)."""
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()), ("model",))
    specs = {"embed": P("model"), "kernel": P(None, None, "model"), "ids": P("model"), "norm": P()}
    return {k: NamedSharding(mesh, s) for k, s in specs.items()} | {"scale": None}


def check(got: dict[str, Any], host: dict[str, Any]) -> None:
    """Every shard of ``got`` this process holds equals ``host``'s slice."""
    import numpy as np

    for k, v in got.items():
        if k == "scale":
            assert v == host[k]
            continue
        for shard in v.addressable_shards:
            np.testing.assert_array_equal(np.asarray(shard.data), host[k][shard.index], err_msg=k)


def manager(folder: str) -> None:
    """Three steps saved together by the manager (keep=2), the latest restored onto model=8."""
    import treekit

    host = host_tree()
    tree = sharded(host)
    with treekit.CheckpointManager(os.path.join(folder, "run"), keep=2) as steps:
        for step in range(3):
            assert steps.save(step, tree, metrics={"loss": 3.0 - step})
        steps.wait()  # (saved in the background: async_save, across processes too)
        assert steps.steps() == [1, 2], steps.steps()
        check(steps.restore(shardings=on_eight(host)), host)


def own(folder: str, async_save: bool) -> None:
    """Per-process values saved beside the arrays and restored by each process (see the top)."""
    import jax
    import numpy as np
    from jax.sharding import Mesh
    from jax.sharding import PartitionSpec as P

    import treekit

    me = jax.process_index()
    host = host_tree()
    arrays = sharded(host)

    def state(step: int) -> dict[str, Any]:
        position = 1000 * me + 7 * step * (me + 1)  # (apart: process 1 moves twice as fast)
        data = {"position": position, "name": f"process {me}", "window": [position, position + 1]}
        return {"train": arrays, "data": data, "rng": np.full(3, me, np.uint32), "step": step}

    with treekit.CheckpointManager(os.path.join(folder, "own"), keep=3, async_save=async_save) as steps:
        for step in range(4):
            assert steps.save(step, state(step))
            if async_save:  # (a save of its own while the manager's is in flight: counted apart)
                treekit.save(os.path.join(folder, "direct.safetensors"), {"train": arrays})
        steps.wait()
        assert steps.steps() == [1, 2, 3], steps.steps()
        got = steps.restore(like=state(0))
        assert got["data"] == state(3)["data"] and got["step"] == 3, got["data"]
        np.testing.assert_array_equal(got["rng"], np.full(3, me, np.uint32))
        check(got["train"], host)
        mesh = Mesh(np.array(jax.devices()), ("model",))
        rules = [("embed", P("model")), ("kernel", P(None, None, "model"))]
        placed = steps.restore(rules=rules, mesh=mesh, default=P())
        assert placed["data"] == state(3)["data"] and placed["train"]["scale"] == host["scale"]
        assert placed["train"]["kernel"].sharding.spec == P(None, None, "model")
        assert placed["train"]["ids"].sharding.spec == P()
        check(placed["train"], host)
        try:
            steps.restore(rules=rules, mesh=mesh)
            raise AssertionError("arrays no rule matches restored")
        except treekit.sharding.ShardingError as err:
            assert "['train']['ids']" in str(err) and "'data'" not in str(err), err
        assert steps.restore(2)["data"] == state(2)["data"]


def late(folder: str) -> None:
    """Process 1 does not come to step 1's save: process 0's fails in bounded time, naming it."""
    import time

    import jax
    from jax._src import distributed

    import treekit

    os.environ["TREEKIT_BARRIER_TIMEOUT_S"] = "3"
    client = distributed.global_state.client
    tree = sharded(host_tree())
    with treekit.CheckpointManager(os.path.join(folder, "run"), keep=None) as steps:
        steps.save(0, tree)
        steps.wait()
        if jax.process_index() == 1:  # (alive, but not saving: until process 0 is done)
            client.blocking_key_value_get("test/late/done", 120_000)
            return
        began = time.monotonic()
        steps.save(1, tree)  # (returns once the shards are on the host)
        try:
            steps.wait()
            raise AssertionError("a step saved by one process of two")
        except TimeoutError as err:
            assert "process 1 did not come" in str(err) and time.monotonic() - began < 60, err
        assert steps.steps() == [0], steps.steps()
        client.key_value_set("test/late/done", "1")


def differ(folder: str) -> None:
    """Process 1 holds ``kernel`` of another shape: nothing is written, both processes told."""
    import jax
    import numpy as np

    import treekit

    host = host_tree()
    if jax.process_index() == 1:
        host["kernel"] = np.zeros((4, 6, 16), np.float32)
    tree = sharded(host)
    for run in (
        lambda: treekit.save(os.path.join(folder, "ckpt.safetensors"), tree),
        lambda: treekit.CheckpointManager(os.path.join(folder, "run"), async_save=False).save(0, tree),
    ):
        try:
            run()
            raise AssertionError("trees that differ saved")
        except ValueError as err:
            message = str(err)
            assert "tree['kernel']" in message and "process 0" in message and "process 1" in message, message
            assert "float32[4, 6, 8]" in message and "float32[4, 6, 16]" in message, message
    same = sharded(host_tree())  # the same arrays; process 1's own values have one more key path
    own = {"position": 3} if jax.process_index() == 0 else {"position": 3, "extra": 1}
    try:
        treekit.save(os.path.join(folder, "ckpt.safetensors"), {"train": same, "data": own})
        raise AssertionError("trees of other key paths saved")
    except ValueError as err:
        assert "tree['data']['extra'] own" in str(err) and "process 0: tree['data']['position'] own" in str(err), err


def load(name: str) -> None:
    import treekit
    import treekit.checkpoint._shards

    host = host_tree()
    read = [0]
    slicer = treekit.checkpoint._shards._slicer

    def counting(source: Any) -> Any:
        take = slicer(source)

        def copy(index: Any) -> Any:
            out = take(index)
            read[0] += out.nbytes
            return out

        return copy

    treekit.checkpoint._shards._slicer = counting
    check(treekit.load(name, shardings=on_eight(host)), host)
    total = sum(v.nbytes for k, v in host.items() if k != "scale")
    print(f"read {read[0]} of {total}", flush=True)


def main() -> None:
    me, count, port, mode, folder = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={8 // count}"
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax

    jax.distributed.initialize(f"localhost:{port}", num_processes=count, process_id=me)
    import treekit

    name = os.path.join(folder, "ckpt.safetensors")
    if mode in ("save", "manager") and me == 0:
        treekit.save(os.path.join(folder, "host.safetensors"), host_tree())
    if mode == "save":
        treekit.save(name, sharded(host_tree()))
    elif mode == "manager":
        manager(folder)
    elif mode in ("own", "own-async"):
        own(folder, mode == "own-async")
    elif mode == "differ":
        differ(folder)
    elif mode == "late":
        late(folder)
    elif mode == "slow":
        treekit.save(name, sharded(host_tree(big=True)))
    else:
        load(name)
    print("ok", flush=True)


if __name__ == "__main__":
    main()

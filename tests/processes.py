"""One process of a treekit checkpoint cluster on localhost, for tests/test_mesh_checkpoints.py:
``python tests/processes.py ID COUNT PORT MODE FOLDER``. Every process joins
``jax.distributed`` (8 CPU devices in all, 8 / COUNT each), then:

- ``save``: builds the same tree from the same numpy arrays, sharded ``data=2, model=4`` over
  all processes' devices, saves it together to ``FOLDER/ckpt.safetensors``; process 0 also
  saves the numpy tree alone to ``FOLDER/host.safetensors``;
- ``load``: loads ``FOLDER/ckpt.safetensors`` onto ``model=8`` over all devices, checks every
  shard it holds against the numpy tree, and prints the bytes it read (``read N of M``);
- ``slow``: saves a 256 MB tree to ``FOLDER/ckpt.safetensors`` (a test kills it mid-way).
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


def save(name: str, host: dict[str, Any]) -> None:
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    import treekit

    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    tree = {
        k: jax.make_array_from_callback(
            v.shape, NamedSharding(mesh, P(*SPECS.get(k, ("data", "model")))), v.__getitem__
        )
        if v.ndim
        else v
        for k, v in host.items()
    }
    treekit.save(name, tree)


def load(name: str) -> None:
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

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
    mesh = Mesh(np.array(jax.devices()), ("model",))
    specs = {"embed": P("model"), "kernel": P(None, None, "model"), "ids": P("model"), "norm": P()}
    got = treekit.load(name, shardings={k: NamedSharding(mesh, s) for k, s in specs.items()} | {"scale": None})
    for k, v in got.items():
        if k == "scale":
            assert v == host[k]
            continue
        for shard in v.addressable_shards:
            np.testing.assert_array_equal(np.asarray(shard.data), host[k][shard.index], err_msg=k)
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
    if mode == "save":
        save(name, host_tree())
        if me == 0:
            treekit.save(os.path.join(folder, "host.safetensors"), host_tree())
    elif mode == "slow":
        save(name, host_tree(big=True))
    else:
        load(name)
    print("ok", flush=True)


if __name__ == "__main__":
    main()

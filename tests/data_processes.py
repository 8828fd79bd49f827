"""One process of a treekit.data input pipeline on localhost, for tests/test_data_mesh.py:
``python tests/data_processes.py ID COUNT PORT FOLDER``. Every process joins ``jax.distributed``
(8 CPU devices in all, 8 / COUNT each), reads its share of ``FOLDER``'s Parquet rows
(``shard='process'``) in local batches of 4 rows, and makes each one global batch of
``4 * COUNT`` rows over a ``data`` mesh of all the devices; it checks each global array's shape
and that the shards it holds are its own rows, and prints the row indices of its batches; where
the shares give different numbers of batches, the ``ValueError`` every process gets (``error
...``), with the prefetching thread (``prefetch=2``) or without (``prefetch=0``, a 5th argument)."""

from __future__ import annotations

import os
import sys


def main() -> None:
    me, count, port, folder = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={8 // count}"
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax
    import numpy as np
    from jax.sharding import Mesh

    jax.distributed.initialize(f"localhost:{port}", num_processes=count, process_id=me)
    from treekit import data

    mesh = Mesh(np.array(jax.devices()), ("data",))
    local = data.batches(data.parquet(folder, shard="process"), 4)
    prefetch = int(sys.argv[5]) if len(sys.argv) > 5 else 2
    with data.to_mesh(local, mesh, prefetch=prefetch) as batches:
        try:
            for batch in batches:
                index = batch["index"]
                assert index.shape == (4 * count,), index.shape
                mine = sorted({int(v) for shard in index.addressable_shards for v in np.asarray(shard.data)})
                print("rows", " ".join(map(str, mine)), flush=True)
        except ValueError as err:
            print("error", err, flush=True)
    print("ok", flush=True)


if __name__ == "__main__":
    main()

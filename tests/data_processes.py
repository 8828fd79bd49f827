"""One process of a treekit.data input pipeline on localhost, for tests/test_data_mesh.py:
``python tests/data_processes.py ID COUNT PORT FOLDER``. Every process joins ``jax.distributed``
(8 CPU devices in all, 8 / COUNT each), reads its share of ``FOLDER``'s Parquet rows
(``shard='process'``) in local batches of 4 rows, and makes each one global batch of
``4 * COUNT`` rows over a ``data`` mesh of all the devices; it checks each global array's shape
and that the shards it holds are its own rows, and prints the row indices of its batches; where
the shares give different numbers of batches, the ``ValueError`` every process gets (``error
...``), with the prefetching thread (``prefetch=2``) or without (``prefetch=0``, a 5th argument).
With ``write`` as the 5th argument, each process writes its own rows into ``FOLDER/ds`` with
``write_parquet(..., shard='process')`` (process 0: 0-9, process 1: 100-106) and prints ``wrote
N`` and the rows it then reads back; with ``write-bad``, process 1's rows raise at its 5th row
and each prints the error it got and what the folder holds (``error ...``, ``holds ...``)."""

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

    if len(sys.argv) > 5 and sys.argv[5].startswith("write"):
        write(me, os.path.join(folder, "ds"), sys.argv[5] == "write-bad")
        return
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


def write(me: int, folder: str, bad: bool) -> None:
    from treekit import ShapeDtype, data

    spec = {"index": ShapeDtype(("batch",), "int64"), "tokens": ShapeDtype(("batch", None), "int32")}

    def rows():
        for i in range(10) if me == 0 else range(100, 107):
            if bad and me == 1 and i == 104:
                raise OSError("process 1's source broke")
            yield {"index": i, "tokens": list(range(i % 5 + me))}

    try:
        print("wrote", data.write_parquet(folder, rows(), spec=spec, shard="process", row_group_size=3), flush=True)
    except Exception as exc:
        print("error", type(exc).__name__, str(exc).replace("\n", " "), flush=True)
        print("holds", " ".join(sorted(os.listdir(folder))) if os.path.isdir(folder) else "nothing", flush=True)
        print("ok", flush=True)
        return
    source = data.parquet(folder)
    print("read", " ".join(str(int(i)) for chunk in source for i in chunk["index"]), flush=True)
    print("longest", source.spec["tokens"].shape[1], flush=True)
    print("ok", flush=True)


if __name__ == "__main__":
    main()

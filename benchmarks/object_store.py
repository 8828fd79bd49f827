"""Data and checkpoints in an S3-compatible object store (moto's server, started here on a free
localhost port), treekit beside the clients it stands on, in one run:

    python benchmarks/object_store.py [--mb 100] [--rows 100000] [--rounds 3] [--json PATH]

Rows (the fastest of ``--rounds`` rounds, rows interleaved round by round, after one untimed
round of every row):

- ``s3fs put_file`` / ``s3fs cat_file``: the same bytes as the checkpoint, one file uploaded
  from the local disk and downloaded into memory by s3fs's own calls (the floor treekit's
  save and load stand on: they use s3fs too);
- ``pyarrow S3 read``: that file read whole by pyarrow's own S3 client;
- ``treekit.save`` / ``treekit.load``: a tree of ``--mb`` MB of float32 arrays (10 arrays) to
  and from ``s3://``; ``treekit.save`` local (synced) beside it;
- ``pyarrow dataset`` / ``treekit.data.parquet``: a Parquet folder of ``--rows`` rows
  (a label, a float, a 16-float list; 10 files, row groups of 10,000 rows) read whole, the same
  columns, through pyarrow's S3 dataset and through ``treekit.data.parquet(readers=8)``;
- ``manager.save blocks`` local and ``s3://``: how long an async ``CheckpointManager.save``
  holds the loop (the rest runs in its thread), and ``manager step total`` (until written).

Loopback numbers compare clients, not a cloud's latency or bandwidth. orbax is not a row: its
checkpointers refuse ``s3://`` paths ("Checkpoint path should be absolute").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import treekit
from tests.object_store import new_bucket, s3_server
from treekit import data
from treekit.checkpoint import CheckpointManager


def _timed(fn: Callable[[], object]) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq
    import s3fs

    with s3_server() as env:
        os.environ.update(env)
        url = new_bucket(env)
        fs = s3fs.S3FileSystem()
        native = pafs.FileSystem.from_uri(url)[0]  # (as treekit makes it: AWS_ENDPOINT_URL read)
        local = tempfile.mkdtemp(prefix="treekit-bench-")
        n = args.mb * (1 << 20) // 4 // 10
        tree = {f"layer{i}": np.random.default_rng(i).standard_normal(n).astype(np.float32) for i in range(10)}
        treekit.save(os.path.join(local, "tree.safetensors"), tree)
        raw = os.path.join(local, "tree.safetensors")
        fs.put_file(raw, f"{url[5:]}/raw.bin")

        rng = np.random.default_rng(0)
        per = args.rows // 10
        for i in range(10):
            table = pa.table({
                "label": rng.integers(0, 10, per),
                "x": rng.standard_normal(per),
                "v": pa.FixedSizeListArray.from_arrays(pa.array(rng.standard_normal(per * 16)), 16),
            })
            with fs.open(f"{url[5:]}/data/part-{i:05d}.parquet", "wb") as f:
                pq.write_table(table, f, row_group_size=10_000)
        columns = ["label", "x", "v"]

        def treekit_parquet() -> None:
            rows = sum(len(c["label"]) for c in data.parquet(f"{url}/data", columns=columns, readers=8))
            assert rows == args.rows, rows

        def manager_save(where: str) -> tuple[float, float]:
            with CheckpointManager(where, keep=1) as manager:
                step = int(time.time() * 1000)
                began = time.perf_counter()
                manager.save(step, tree)
                blocked = time.perf_counter() - began
                manager.wait()
                return blocked, time.perf_counter() - began

        rows: dict[str, Callable[[], object]] = {
            "s3fs put_file": lambda: fs.put_file(raw, f"{url[5:]}/raw2.bin"),
            "s3fs cat_file": lambda: fs.cat_file(f"{url[5:]}/raw.bin"),
            "pyarrow S3 read": lambda: native.open_input_file(f"{url[5:]}/raw.bin").read(),
            "treekit.save s3://": lambda: treekit.save(f"{url}/t.safetensors", tree),
            "treekit.load s3://": lambda: treekit.load(f"{url}/t.safetensors"),
            "treekit.save local": lambda: treekit.save(os.path.join(local, "t.safetensors"), tree),
            "pyarrow dataset": lambda: ds.dataset(f"{url[5:]}/data", filesystem=native).to_table(columns=columns),
            "treekit.data.parquet": treekit_parquet,
        }
        best: dict[str, float] = {}
        for round_ in range(args.rounds + 1):
            for name, fn in rows.items():
                t = _timed(fn)
                if round_:
                    best[name] = min(best.get(name, t), t)
            for where, label in ((os.path.join(local, "run"), "local"), (f"{url}/run-{uuid.uuid4().hex[:6]}", "s3://")):
                blocked, total = manager_save(where)
                if round_:
                    for key, t in ((f"manager.save blocks {label}", blocked), (f"manager step total {label}", total)):
                        best[key] = min(best.get(key, t), t)
        shutil.rmtree(local, ignore_errors=True)
    ratios = {
        "treekit.save s3:// / s3fs put_file": best["treekit.save s3://"] / best["s3fs put_file"],
        "treekit.load s3:// / s3fs cat_file": best["treekit.load s3://"] / best["s3fs cat_file"],
        "pyarrow dataset / treekit.data.parquet (speed ratio)": best["pyarrow dataset"] / best["treekit.data.parquet"],
        "manager.save blocks s3:// / local": best["manager.save blocks s3://"] / best["manager.save blocks local"],
    }
    print(f"{args.mb} MB tree, {args.rows:,} Parquet rows, fastest of {args.rounds} rounds")
    for name, t in best.items():
        print(f"  {name:34s} {t:8.3f} s")
    for name, r in ratios.items():
        print(f"  {name:52s} {r:6.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"seconds": best, "ratios": ratios}, indent=1))


if __name__ == "__main__":
    main()

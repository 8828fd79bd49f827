"""Writing a dataset, and a Spark DataFrame into a first batch, in one run.

    python benchmarks/data_write.py [--rows 100000] [--repeat 3] [--spark-rows 20000] [--json PATH]

**Writing** ``--rows`` examples of benchmarks/data.py's schema (``image`` uint8[32,32,3],
``label`` an int64, ``tokens`` 1 to 99 int64s), given as a list of dicts of numpy arrays, into
Parquet in row groups of 5,000 rows (snappy, pyarrow's default), three ways:

- ``treekit.data.write_parquet(folder, examples, spec=...)``: checked against the spec, and
  read back with every shape known;
- pyarrow by hand, the way docs/data.md showed before ``write_parquet``: the images stacked and
  given to ``ListArray.from_arrays`` over offsets, the tokens as Python lists, ``pq.write_table``;
- pyarrow by hand, the tokens as a list of numpy arrays (``pa.array`` converts each).

**Spark** (pyspark in local mode, where it and Java are here): the wall time from a DataFrame of
``--spark-rows`` rows (the same schema, made by Spark itself; the image as ``binary``) to its
first batch of 256 rows,
through ``treekit.data.from_spark`` (Spark writes the cache, treekit reads it), a second call
(the cache read again), and Spark writing Parquet by hand then ``treekit.data.parquet``.
petastorm's ``make_spark_converter`` where petastorm imports (0.13.1 does not with pyarrow >= 16:
it imports ``pyarrow.filesystem``). The median of ``--repeat`` runs; ratios are what to compare.
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

SHAPE, GROUP = (32, 32, 3), 5000


def examples(rows: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (rows, *SHAPE), dtype=np.uint8)
    lengths = rng.integers(1, 100, rows)
    tokens = rng.integers(0, 50_000, int(lengths.sum()))
    ends = np.cumsum(lengths)
    return [
        {"image": images[i], "label": np.int64(i % 10), "tokens": tokens[ends[i] - lengths[i] : ends[i]]}
        for i in range(rows)
    ]


def spec() -> dict[str, Any]:
    from treekit import ShapeDtype

    return {
        "image": ShapeDtype(("batch", *SHAPE), "uint8"),
        "label": ShapeDtype(("batch",), "int64"),
        "tokens": ShapeDtype(("batch", None), "int64"),
    }


def treekit_write(rows: list[dict[str, Any]], folder: str) -> None:
    from treekit import data

    data.write_parquet(folder, rows, spec=spec(), row_group_size=GROUP)


def by_hand(rows: list[dict[str, Any]], folder: str, tokens_as_lists: bool = True) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(folder)
    size = int(np.prod(SHAPE))
    images = np.stack([r["image"].reshape(-1) for r in rows])
    offsets = pa.array(np.arange(0, images.size + 1, size, dtype=np.int32))
    table = pa.table({
        "image": pa.ListArray.from_arrays(offsets, pa.array(images.ravel())),
        "label": np.array([r["label"] for r in rows]),
        "tokens": [r["tokens"].tolist() for r in rows] if tokens_as_lists else pa.array([r["tokens"] for r in rows]),
    })
    pq.write_table(table, os.path.join(folder, "part-00000.parquet"), row_group_size=GROUP)


def timed(run: Callable[[str], Any], base: str, repeat: int) -> float:
    times = []
    for k in range(repeat):
        folder = os.path.join(base, f"out-{k}")
        began = time.perf_counter()
        run(folder)
        times.append(time.perf_counter() - began)
        shutil.rmtree(folder)
    return statistics.median(times)


def writing(args: argparse.Namespace, base: str) -> dict[str, float]:
    rows = examples(args.rows)
    ways: dict[str, Callable[[str], Any]] = {
        "treekit write_parquet": lambda f: treekit_write(rows, f),
        "pyarrow by hand (tokens as lists)": lambda f: by_hand(rows, f),
        "pyarrow by hand (tokens as arrays)": lambda f: by_hand(rows, f, tokens_as_lists=False),
    }
    return {name: timed(run, base, args.repeat) for name, run in ways.items()}


def spark_rows(args: argparse.Namespace, base: str) -> dict[str, float] | None:
    import shutil as which

    try:
        from pyspark.sql import SparkSession
    except ImportError:
        return None
    if which.which("java") is None:
        return None
    from treekit import data

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        from pyspark.sql import functions as F

        n = args.spark_rows
        out: dict[str, list[float]] = {"from_spark (Spark writes the cache)": [], "from_spark again (cached)": [],
                                       "Spark write + treekit parquet": []}
        for k in range(args.repeat):
            # (made in the JVM, as Spark prepares data: no rows pass through Python)
            df = spark.range(n, numPartitions=2).select(
                F.col("id").alias("index"), (F.col("id") % 10).alias("label"),
                F.expr("sequence(0L, id % 99)").alias("tokens"),
                F.expr(f"unhex(repeat(lpad(hex(id % 256), 2, '0'), {int(np.prod(SHAPE))}))").alias("image"),
                F.lit(k).alias("run"),
            )
            cache = os.path.join(base, f"cache-{k}")

            def converter(df: Any, cache: str) -> None:
                for name in ("from_spark (Spark writes the cache)", "from_spark again (cached)"):
                    began = time.perf_counter()
                    source = data.from_spark(df, cache=cache, pad={"tokens": 64}, reshape={"image": SHAPE})
                    next(iter(data.batches(source, 256)))
                    out[name].append(time.perf_counter() - began)

            def spark_then_treekit(df: Any, folder: str) -> None:
                began = time.perf_counter()
                df.write.parquet(folder)
                next(iter(data.batches(data.parquet(folder, pad={"tokens": 64}, reshape={"image": SHAPE}), 256)))
                out["Spark write + treekit parquet"].append(time.perf_counter() - began)

            # (each way first in turn: the first Spark job of a plan also compiles it)
            ways = [(converter, cache), (spark_then_treekit, os.path.join(base, f"spark-{k}"))]
            for way, folder in ways if k % 2 == 0 else ways[::-1]:
                way(df, folder)
        try:
            import petastorm  # noqa: F401
        except Exception as exc:  # (0.13.1 with pyarrow >= 16: no pyarrow.filesystem)
            print(f"petastorm: does not import here ({type(exc).__name__}: {exc})", file=sys.stderr)
        return {name: statistics.median(times) for name, times in out.items()}
    finally:
        spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--spark-rows", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-spark", action="store_true")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as base:
        result: dict[str, Any] = {"rows": args.rows, "write_s": writing(args, base)}
        if not args.no_spark:
            result["spark_rows"] = args.spark_rows
            result["spark_s"] = spark_rows(args, base)
    ours = result["write_s"]["treekit write_parquet"]
    print(f"writing {args.rows:,} rows (median of {args.repeat})")
    for name, s in result["write_s"].items():
        print(f"  {name:40s} {s:8.3f} s  {s / ours:5.2f}x treekit's time")
    if result.get("spark_s"):
        print(f"Spark DataFrame of {args.spark_rows:,} rows -> first batch of 256")
        for name, s in result["spark_s"].items():
            print(f"  {name:40s} {s:8.3f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()

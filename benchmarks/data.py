"""Input pipelines against each other on one Parquet file, in one run: rows per second, the first
batch's latency, and what treekit's spec check costs.

    python benchmarks/data.py [--rows 100000] [--repeat 3] [--json PATH]
    python benchmarks/data.py --device [--readers N] [--epochs E]    # on an accelerator machine

The file (made once, in a temporary folder): 100,000 rows in 20 row groups, ``image`` a uint8
list of 32*32*3 values a row, ``label`` an int64, ``tokens`` an int64 list of 1 to 99 values.
Each pipeline gives the same batches of 256 rows: the image as u8[256,32,32,3], the label,
the tokens padded or truncated to 64 with their lengths. Peers, where installed (the ``bench``
extra): grain (``ParquetIterDataset``, a map that pads, ``batch``), petastorm
(``make_batch_reader``, if it imports), Hugging Face datasets (``with_format('numpy')`` and
``'jax'``, after the cache is built), and pyarrow's ``iter_batches`` alone (no padding or
reshaping: a floor for reading). The median of ``--repeat`` runs of each; ratios are what to
compare (this machine is shared).

``--device`` times the Parquet source alone with 1, 2, 4, 8, as many readers as cores and
``--readers`` (rows per second and the first batch's latency; ``--readers``' rate is the load
time of a batch), then, for each ``--hidden`` width, a jitted step of an MLP per batch on the first
device (a TPU where there is one), fed three ways: synchronously (batch, then ``device_put``,
then the step), through ``to_mesh`` with ``prefetch`` 0 and 2, and the step alone on one batch
in place. Each loop's time is given over the step alone and over the ideal: the longer of the
steps alone and the loads alone (a loader that hides all its work behind the steps, or the
reverse), and the ``to_mesh`` loops also from their first batch on (the steady state, the
first batch's latency apart). Each loop reads the file ``--epochs`` times. Every signature the
loops meet compiles before the timing.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

BATCH, PAD, SHAPE = 256, 64, (32, 32, 3)


def make_file(folder: str, rows: int) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = os.path.join(folder, f"bench-{rows}.parquet")
    if os.path.exists(path):
        return path
    rng = np.random.default_rng(0)
    size = int(np.prod(SHAPE))
    images = rng.integers(0, 256, (rows, size), dtype=np.uint8)
    offsets = pa.array(np.arange(0, rows * size + 1, size, dtype=np.int32))
    image = pa.ListArray.from_arrays(offsets, pa.array(images.ravel()))
    lengths = rng.integers(1, 100, rows)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    tokens = pa.ListArray.from_arrays(pa.array(offsets), pa.array(rng.integers(0, 50_000, int(offsets[-1]))))
    table = pa.table({"image": image, "label": rng.integers(0, 10, rows), "tokens": tokens})
    pq.write_table(table, path, row_group_size=rows // 20)
    return path


def spec() -> Any:
    from treekit import ShapeDtype

    return {
        "image": ShapeDtype(("batch", *SHAPE), "u8"),
        "label": ShapeDtype(("batch",), "i64"),
        "tokens": ShapeDtype(("batch", PAD), "i64"),
        "tokens_len": ShapeDtype(("batch",), "i32"),
    }


def pad_row(tokens: Any) -> tuple[Any, int]:
    out = np.zeros(PAD, np.int64)
    n = min(len(tokens), PAD)
    out[:n] = tokens[:n]
    return out, n


# -- the pipelines: each a function of (path, readers) giving an iterator of batches ---------


def treekit_batches(path: str, readers: int, with_spec: bool = True) -> Iterator[Any]:
    from treekit import data

    source = data.parquet(path, pad={"tokens": PAD}, reshape={"image": SHAPE}, readers=readers)
    return iter(data.batches(source, BATCH, spec=spec() if with_spec else None))


def pyarrow_alone(path: str, readers: int) -> Iterator[Any]:
    import pyarrow.parquet as pq

    return iter(pq.ParquetFile(path).iter_batches(batch_size=BATCH, use_threads=readers > 1))


def grain_batches(path: str, readers: int) -> Iterator[Any]:
    import grain

    def row(example: dict[str, Any]) -> dict[str, Any]:
        tokens, n = pad_row(np.asarray(example["tokens"]))
        image = np.asarray(example["image"], np.uint8).reshape(SHAPE)
        return {"image": image, "label": np.int64(example["label"]), "tokens": tokens, "tokens_len": np.int32(n)}

    dataset = grain.experimental.ParquetIterDataset(path).map(row).batch(BATCH, drop_remainder=True)
    return iter(dataset)


def petastorm_batches(path: str, readers: int) -> Iterator[Any]:
    from petastorm import make_batch_reader

    reader = make_batch_reader("file://" + os.path.abspath(path), workers_count=readers, num_epochs=1)

    def run() -> Iterator[Any]:
        with reader:
            for group in reader:  # a row group at a time: petastorm's batch size
                image = np.stack(group.image).reshape(-1, *SHAPE)
                padded = [pad_row(t) for t in group.tokens]
                yield {"image": image, "label": group.label, "tokens": np.stack([p for p, _ in padded])}

    return run()


_HF: dict[str, Any] = {}


def hf_batches(fmt: str) -> Callable[[str, int], Iterator[Any]]:
    def run(path: str, readers: int) -> Iterator[Any]:
        return iter(_HF[path].with_format(fmt).iter(batch_size=BATCH, drop_last_batch=True))

    return run


def treekit_from_hf(path: str, readers: int) -> Iterator[Any]:
    """treekit reading the same prepared dataset as HF's rows (its Arrow cache)."""
    from treekit import data

    return iter(data.batches(data.from_hf(_HF[path], reshape={"image": SHAPE}), BATCH, spec=spec()))


def hf_setup(path: str) -> None:
    """The dataset HF reads: loaded into its cache, padded by a batched map (not timed)."""
    import datasets

    datasets.disable_progress_bars()
    ds = datasets.load_dataset("parquet", data_files=path, split="train")

    def padded(batch: dict[str, Any]) -> dict[str, Any]:
        rows = [pad_row(t) for t in batch["tokens"]]
        return {"tokens": [r for r, _ in rows], "tokens_len": np.array([n for _, n in rows], np.int32)}

    _HF[path] = ds.map(padded, batched=True)


PIPELINES: dict[str, Callable[[str, int], Iterator[Any]]] = {
    "treekit (spec checked)": treekit_batches,
    "treekit (no spec)": lambda path, readers: treekit_batches(path, readers, with_spec=False),
    "grain": grain_batches,
    "petastorm": petastorm_batches,
    "treekit from_hf (HF's cache)": treekit_from_hf,
    "HF datasets, numpy format": hf_batches("numpy"),
    "HF datasets, jax format": hf_batches("jax"),
    "pyarrow iter_batches alone": pyarrow_alone,
}


def measure(make: Callable[[str, int], Iterator[Any]], path: str, readers: int) -> tuple[float, float, int]:
    """(rows per second, seconds to the first batch, rows) of one full pass."""
    start = time.perf_counter()
    batches = make(path, readers)
    first = None
    rows = 0
    for batch in batches:
        if first is None:
            first = time.perf_counter() - start
        rows += len(batch["label"]) if isinstance(batch, dict) else batch.num_rows
    total = time.perf_counter() - start
    return rows / total, first or total, rows


def cpu(args: argparse.Namespace) -> dict[str, Any]:
    path = make_file(args.folder, args.rows)
    try:
        hf_setup(path)
    except Exception as exc:  # datasets not installed
        print(f"HF datasets not run: {type(exc).__name__}: {exc}")
    runs: dict[str, list[tuple[float, float, int]]] = {name: [] for name in PIPELINES}
    failed: dict[str, str] = {}
    order = np.random.default_rng(0)
    for _ in range(args.repeat + 1):  # rounds in shuffled orders: no pipeline always after the same one
        for name in order.permutation(list(PIPELINES)):
            make = PIPELINES[name]
            time.sleep(0.5)  # (pyarrow's thread pool keeps cores busy a moment after a pass)
            if name in failed:
                continue
            try:
                runs[name].append(measure(make, path, args.readers))  # (the first round warms up)
            except Exception as exc:  # not installed, or does not run with these versions
                failed[name] = f"{type(exc).__name__}: {str(exc)[:80]}"
    results: dict[str, Any] = dict(failed)
    for name, got in runs.items():
        if name in failed:
            print(f"{name:30} not run: {failed[name]}", flush=True)
            continue
        got = got[1:]
        rate, first = statistics.median(r[0] for r in got), statistics.median(r[1] for r in got)
        results[name] = {"rows_per_s": rate, "first_batch_s": first, "rows": got[0][2]}
        print(f"{name:30} {rate:>10,.0f} rows/s   first batch {first:.3f} s", flush=True)
    base = results.get("treekit (spec checked)")
    if isinstance(base, dict):
        ratios = {}
        for name, r in results.items():
            if isinstance(r, dict):
                r["treekit_over_it"] = ratios[name] = round(base["rows_per_s"] / r["rows_per_s"], 2)
        print("treekit's rows/s over each:", ratios)
    return results


def device(args: argparse.Namespace) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp

    from treekit import data

    path = make_file(args.folder, args.rows)

    def source(readers: int = args.readers, epochs: int = args.epochs) -> Any:
        return data.batches(data.parquet(path, pad={"tokens": PAD}, reshape={"image": SHAPE}, readers=readers,
                                         num_epochs=epochs), BATCH, spec=spec())

    def source_rate(readers: int) -> tuple[float, float]:
        start = time.perf_counter()
        first, rows = None, 0
        for batch in source(readers, 1):
            first = first or time.perf_counter() - start
            rows += len(batch["label"])
        return rows / (time.perf_counter() - start), first or 0.0

    source_rate(args.readers)  # (a warm-up: the file in the page cache)
    results: dict[str, Any] = {"device": str(jax.devices()[0]), "jax": jax.__version__, "readers": args.readers,
                               "epochs": args.epochs}
    for readers in sorted({1, 2, 4, 8, os.cpu_count() or 1, args.readers}):
        got = [source_rate(readers) for _ in range(3)]
        rates = [r for r, _ in got]
        results[f"source readers {readers}"] = {"rows_per_s": statistics.median(rates), "rates": rates,
                                                "first_batch_s": statistics.median(f for _, f in got)}
        print(f"source alone, {readers} readers: {[round(r) for r in rates]} rows/s, first batch "
              f"{statistics.median(f for _, f in got):.3f} s", flush=True)
    load_s = BATCH / results[f"source readers {args.readers}"]["rows_per_s"]
    for hidden in args.hidden:
        results[f"hidden {hidden}"] = one_model(jax, jnp, data, source, hidden, args.epochs * args.rows // BATCH,
                                                 load_s)
    return results


def one_model(jax: Any, jnp: Any, data: Any, source: Any, hidden: int, count: int, load_s: float) -> dict[str, Any]:
    """The loop around one MLP's step (its width sets the step's length), fed three ways."""
    rng = np.random.default_rng(0)
    sizes = [int(np.prod(SHAPE)), hidden, hidden, 10]
    w = jax.device_put([(rng.normal(size=(a, b)) / np.sqrt(a)).astype(np.float32)
                        for a, b in itertools.pairwise(sizes)])

    @jax.jit
    def step(w: Any, batch: dict[str, Any]) -> Any:  # an MLP's forward and backward pass, and an SGD step
        def loss(w: Any) -> Any:
            h = batch["image"].reshape(batch["image"].shape[0], -1).astype(jnp.float32) / 255
            for layer in w[:-1]:
                h = jnp.tanh(h @ layer)
            logits = h @ w[-1]
            return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(h.shape[0]), batch["label"] % 10])

        return jax.tree.map(lambda p, g: p - 1e-3 * g, w, jax.grad(loss)(w))

    placed = jax.device_put(next(iter(source())))
    with data.to_mesh(source(), prefetch=0) as warm:  # every signature the loops meet compiles here:
        committed = next(warm)  # arrays placed on a named device are committed, a step's outputs too
        jax.block_until_ready(step(step(w, placed), placed))
        jax.block_until_ready(step(step(w, committed), committed))
    start = time.perf_counter()
    out = w
    for _ in range(count):
        out = step(out, placed)
    jax.block_until_ready(out)
    alone = time.perf_counter() - start
    got: dict[str, Any] = {"hidden": hidden, "batches": count, "step_ms": 1000 * alone / count,
                           "load_ms": 1000 * load_s, "step_alone_s": alone}

    start = time.perf_counter()
    out = w
    for batch in source():
        out = jax.block_until_ready(step(out, jax.device_put(batch)))  # a synchronous loop: load, put, step
    got["synchronous_s"] = time.perf_counter() - start

    for prefetch in (0, 2):
        start = time.perf_counter()
        out, first = w, 0.0
        with data.to_mesh(source(), prefetch=prefetch) as batches:
            for batch in batches:
                first = first or time.perf_counter() - start
                out = step(out, batch)
        jax.block_until_ready(out)
        got[f"to_mesh_prefetch{prefetch}_s"] = time.perf_counter() - start
        got[f"to_mesh_prefetch{prefetch}_first_batch_s"] = first
        # from the first batch on: the loop's steady state, beside the steps after the first
        got[f"to_mesh_prefetch{prefetch}_after_first_over_step"] = (
            (got[f"to_mesh_prefetch{prefetch}_s"] - first) / (alone * (count - 1) / count))
    ideal = max(alone, load_s * count)  # a loader that hides all loading behind the steps, or the reverse
    for key in ("synchronous_s", "to_mesh_prefetch0_s", "to_mesh_prefetch2_s"):
        got[key.replace("_s", "_over_step")] = got[key] / alone
        got[key.replace("_s", "_over_ideal")] = got[key] / ideal
    for key, value in got.items():
        print(f"{key:32} {value:.4g}" if isinstance(value, float) else f"{key:32} {value}", flush=True)
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--readers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=1, help="--device: passes over the file in each loop")
    parser.add_argument("--hidden", type=int, nargs="+", default=[2048, 6144, 12288],
                        help="--device: the MLPs' widths (the steps' lengths)")
    parser.add_argument("--folder", default=os.path.join(tempfile.gettempdir(), "treekit-bench-data"))
    parser.add_argument("--device", action="store_true", help="the accelerator rows (see the docstring)")
    parser.add_argument("--json")
    args = parser.parse_args()
    os.makedirs(args.folder, exist_ok=True)
    results = device(args) if args.device else cpu(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()

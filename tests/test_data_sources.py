"""treekit.data's sources with real pyarrow and datasets: Parquet folders as Spark writes them
(Hive partitions, _SUCCESS and .crc files), shards, seeds, epochs, padding and reshaping, the
errors; datasets' feature dtypes kept; any iterable, with its own state or a count."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from treekit import data  # noqa: E402


def write_spark_folder(folder: Path, rows: int = 100, group: int = 8) -> Path:
    """A folder as Spark leaves one: Hive-style ``split=`` folders of part files in row groups,
    ``_SUCCESS``, ``.crc`` checksums; an ``index`` column numbers the rows 0 to ``rows - 1``."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(0, 6, rows)
    table = pa.table({
        "index": np.arange(rows),
        "label": rng.integers(0, 10, rows).astype(np.uint8),
        "tokens": pa.array([list(range(n)) for n in lengths], pa.list_(pa.int32())),
        "image": pa.array([rng.integers(0, 255, 6).astype(np.uint8) for _ in range(rows)], pa.list_(pa.uint8())),
        "name": [f"row{i}" for i in range(rows)],
    })
    half = rows // 2
    for split, part in (("0", table.slice(0, half)), ("1", table.slice(half))):
        (folder / f"split={split}").mkdir(parents=True)
        pq.write_table(part, folder / f"split={split}" / "part-00000.snappy.parquet", row_group_size=group)
        (folder / f"split={split}" / ".part-00000.snappy.parquet.crc").write_bytes(b"\x00crc")
    (folder / "_SUCCESS").write_text("")
    (folder / "_common_metadata").write_bytes(b"not parquet")
    return folder


def indices(source: data.Source) -> list[int]:
    return [int(i) for chunk in source for i in chunk["index"]]


def test_a_spark_folder_reads_every_row_with_its_partition(tmp_path: Path) -> None:
    folder = write_spark_folder(tmp_path)
    chunks = list(data.parquet(folder, pad={"tokens": 4}, reshape={"image": (2, 3)}))
    assert sorted(chunks[0]) == ["image", "index", "label", "name", "split", "tokens", "tokens_len"]
    assert [int(i) for c in chunks for i in c["index"]] == list(range(100))
    first = chunks[0]
    assert first["label"].dtype == np.uint8 and first["image"].shape == (8, 2, 3)
    assert first["split"].dtype == np.int64 and set(first["split"]) == {0}
    assert first["tokens"].shape == (8, 4) and first["tokens_len"].dtype == np.int32
    lengths = first["tokens_len"]
    for row, n in zip(first["tokens"], lengths):
        assert row.tolist() == list(range(n)) + [0] * (4 - n)


def test_a_folder_that_spark_wrote(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("pyspark needs Java")
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1").getOrCreate()
    )
    try:
        rows = [(i, i % 3, list(range(i % 5)), bytes([i % 256] * 12)) for i in range(50)]
        frame = spark.createDataFrame(rows, "index long, split int, tokens array<int>, image binary")
        frame.repartition(2).write.partitionBy("split").parquet(str(tmp_path / "out"))
    finally:
        spark.stop()
    names = {name for _, _, files in os.walk(tmp_path / "out") for name in files}
    assert "_SUCCESS" in names and any(name.endswith(".crc") for name in names)  # (what is not read)
    chunks = list(data.parquet(tmp_path / "out", reshape={"image": (3, 4)}, pad={"tokens": 3}))
    assert sorted(int(i) for c in chunks for i in c["index"]) == list(range(50))
    for c in chunks:
        assert c["image"].dtype == np.uint8 and c["image"].shape[1:] == (3, 4)
        assert (c["image"] == (c["index"] % 256).astype(np.uint8)[:, None, None]).all()
        assert (c["split"] == c["index"] % 3).all() and c["split"].dtype == np.int64
        assert (c["tokens_len"] == np.minimum(c["index"] % 5, 3)).all()
    shards = [indices(data.parquet(tmp_path / "out", columns=["index"], shard=(k, 2))) for k in (0, 1)]
    assert sorted(shards[0] + shards[1]) == list(range(50)) and not set(shards[0]) & set(shards[1])


def test_pad_truncates_long_lists(tmp_path: Path) -> None:
    pq.write_table(pa.table({"t": [[1, 2, 3, 4], [5], []]}), tmp_path / "a.parquet")
    (chunk,) = data.parquet(tmp_path, pad={"t": 2})
    assert chunk["t"].tolist() == [[1, 2], [5, 0], [0, 0]] and chunk["t_len"].tolist() == [2, 1, 0]


def test_columns_and_globs(tmp_path: Path) -> None:
    folder = write_spark_folder(tmp_path)
    source = data.parquet(str(folder / "split=*" / "*.parquet"), columns=["index", "label"])
    assert sorted(next(iter(source))) == ["index", "label"]  # a glob gives no partition column
    everything = str(folder / "**" / "*")  # folders, files, _SUCCESS: each data file read once
    assert sorted(indices(data.parquet(everything, columns=["index"]))) == list(range(100))
    with pytest.raises(ValueError, match=r"columns: expected names among .*got \['nope'\]"):
        data.parquet(folder, columns=["index", "nope"])
    with pytest.raises(FileNotFoundError, match="paths"):
        data.parquet(tmp_path / "missing")


def test_a_ragged_column_without_pad_names_the_column_file_row_group_and_rows(tmp_path: Path) -> None:
    folder = write_spark_folder(tmp_path)
    with pytest.raises(ValueError) as err:
        list(data.parquet(folder, columns=["tokens"]))
    message = str(err.value)
    assert message.startswith("column 'tokens' (split=0/part-00000.snappy.parquet row group 0): expected lists of one")
    assert "ragged lists: rows" in message and "pad={'tokens': length}" in message


def test_a_null_is_named(tmp_path: Path) -> None:
    pq.write_table(pa.table({"x": pa.array([1, None, 3])}), tmp_path / "n.parquet")
    with pytest.raises(ValueError, match=r"column 'x' \(n.parquet row group 0\): expected no nulls, got 1, at 1"):
        list(data.parquet(tmp_path))


def test_reshape_checks_every_rows_length_at_once(tmp_path: Path) -> None:
    pq.write_table(pa.table({"im": [[1, 2, 3, 4], [5, 6, 7]]}), tmp_path / "r.parquet")
    with pytest.raises(ValueError, match=r"expected 4 values a row to reshape to \(2, 2\), got rows 1 \(lengths 3\)"):
        list(data.parquet(tmp_path, reshape={"im": (2, 2)}))


def test_a_table_in_several_chunks_reads_as_in_one() -> None:
    from treekit.data._arrow import columns_to_numpy

    whole = pa.table({
        "tokens": pa.array([[1, 2, 3], [4], [], [5, 6]], pa.list_(pa.int64())),
        "im": pa.array([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 14, 15, 16]], pa.list_(pa.uint8())),
        "label": pa.array([7, 8, 9, 10], pa.int8()),
    })
    parts = pa.Table.from_batches([*whole.slice(0, 1).to_batches(), *whole.slice(1).to_batches()])
    assert parts.column("im").num_chunks == 2 and whole.column("im").num_chunks == 1
    args = (["tokens", "im", "label"], {"tokens": 2}, {"im": (2, 2)}, "a table")
    one, several = columns_to_numpy(whole, *args), columns_to_numpy(parts, *args)
    assert one.keys() == several.keys() == {"tokens", "tokens_len", "im", "label"}
    for name in one:
        assert one[name].dtype == several[name].dtype and one[name].tolist() == several[name].tolist()
    assert several["tokens"].tolist() == [[1, 2], [4, 0], [0, 0], [5, 6]] and several["im"].shape == (4, 2, 2)


def test_nothing_is_unpickled_and_hidden_files_are_not_read(tmp_path: Path) -> None:
    folder = write_spark_folder(tmp_path)
    (folder / "_metadata").write_bytes(b"\x80\x04 a pickle")  # would fail to read, were it read
    assert len(indices(data.parquet(folder, columns=["index"]))) == 100


@settings(max_examples=25, deadline=None)
@given(count=st.integers(1, 5), seed=st.none() | st.integers(0, 3))
def test_shards_are_disjoint_and_cover_the_rows(
    tmp_path_factory: pytest.TempPathFactory, count: int, seed: Any
) -> None:
    folder = write_spark_folder(tmp_path_factory.mktemp("spark"), rows=60, group=7)
    shards = [indices(data.parquet(folder, columns=["index"], shard=(k, count), seed=seed)) for k in range(count)]
    everything = [i for shard in shards for i in shard]
    assert sorted(everything) == list(range(60))


def test_a_seed_shuffles_deterministically_and_differently_each_epoch(tmp_path: Path) -> None:
    folder = write_spark_folder(tmp_path)
    one = indices(data.parquet(folder, columns=["index"], seed=1, num_epochs=2))
    assert one == indices(data.parquet(folder, columns=["index"], seed=1, num_epochs=2))
    first, second = one[:100], one[100:]
    assert sorted(first) == sorted(second) == list(range(100))  # every row once per epoch
    assert first != second and first != list(range(100))
    assert one != indices(data.parquet(folder, columns=["index"], seed=2, num_epochs=2))


def test_num_epochs_none_repeats_for_ever(tmp_path: Path) -> None:
    folder = write_spark_folder(tmp_path, rows=16, group=8)
    source = iter(data.parquet(folder, columns=["index"], num_epochs=None))
    seen = [int(i) for _ in range(10) for i in next(source)["index"]]
    assert seen == list(range(16)) * 5


def test_never_more_than_readers_read_at_once_nor_2x_readers_asked_ahead(tmp_path: Path) -> None:
    folder = write_spark_folder(tmp_path, rows=96, group=8)  # 12 row groups
    source = data.parquet(folder, columns=["index"], readers=4)
    read, lock = source._read, threading.Lock()
    now, most, started = [0], [0], [0]

    def counted(position: Any, unit: int) -> Any:
        with lock:
            now[0] += 1
            started[0] += 1
            most[0] = max(most[0], now[0])
        try:
            time.sleep(0.01)
            return read(position, unit)
        finally:
            with lock:
                now[0] -= 1

    source._read = counted  # type: ignore[method-assign]
    chunks = source.chunks()
    first = next(chunks)
    assert started[0] <= 8  # 2 * readers asked for from the start
    rest = []
    for k, chunk in enumerate(chunks, start=2):
        assert started[0] <= k + 7  # at most 2 * readers row groups asked for beyond those taken
        rest.append(chunk)
    assert most[0] <= 4
    assert [int(i) for c in [first, *rest] for i in c.leaves[0]] == list(range(96))


def test_the_state_resumes_at_the_next_chunk(tmp_path: Path) -> None:
    folder = write_spark_folder(tmp_path)
    whole = [c["index"].tolist() for c in data.parquet(folder, columns=["index"], seed=3, num_epochs=2)]
    source = data.parquet(folder, columns=["index"], seed=3, num_epochs=2)
    chunks = source.chunks()
    for _ in range(20):  # into the second epoch (14 row groups an epoch)
        next(chunks)
    state = json.loads(json.dumps(source.get_state()))
    assert state == {"epoch": 1, "index": 6}
    again = data.parquet(folder, columns=["index"], seed=3, num_epochs=2)
    again.set_state(state)
    assert [c["index"].tolist() for c in again] == whole[20:]
    with pytest.raises(ValueError, match="state: expected"):
        again.set_state({"epoch": -1})


def test_without_pyarrow_it_says_which_extra_to_install(tmp_path: Path) -> None:
    code = "import sys; sys.modules['pyarrow'] = None; sys.modules['pyarrow.parquet'] = None\n"
    code += "from treekit import data\ntry:\n    data.parquet('x')\nexcept ImportError as e:\n    print(e)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "treekit.data.parquet needs pyarrow: pip install 'jax-treekit[parquet]'"


def test_import_treekit_data_imports_neither_pyarrow_nor_jax() -> None:
    code = "import sys, treekit.data; print(sorted(m for m in ('pyarrow', 'jax', 'datasets') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# -- Hugging Face datasets -----------------------------------------------------------------


def test_a_datasets_dataset_keeps_its_feature_dtypes(hf_datasets: Any) -> None:
    datasets = hf_datasets
    features = datasets.Features({
        "image": datasets.Array2D(shape=(2, 3), dtype="uint8"),
        "label": datasets.ClassLabel(names=["a", "b"]),
        "ids": datasets.Sequence(datasets.Value("int32")),
        "text": datasets.Value("string"),
    })
    rows = 2500
    ds = datasets.Dataset.from_dict({
        "image": [np.full((2, 3), i % 256, np.uint8) for i in range(rows)],
        "label": [i % 2 for i in range(rows)],
        "ids": [list(range(i % 4)) for i in range(rows)],
        "text": [f"t{i}" for i in range(rows)],
    }, features=features)
    chunks = list(data.from_hf(ds, pad={"ids": 3}))
    assert [c["label"].shape[0] for c in chunks] == [1024, 1024, 452]
    first = chunks[0]
    assert first["image"].dtype == np.uint8 and first["image"].shape == (1024, 2, 3)
    assert first["label"].dtype == np.int64 and first["ids"].dtype == np.int32 and first["ids"].shape == (1024, 3)
    assert first["text"][5] == "t5"
    with pytest.raises(ValueError, match="column 'ids' \\(dataset rows 0-1023\\): expected lists of one length"):
        next(iter(data.from_hf(ds, columns=["ids"])))
    shards = [sorted(int(v) for c in data.from_hf(ds, columns=["label", "image"], shard=(k, 2), seed=1)
                     for v in c["image"][:, 0, 0]) for k in range(2)]
    assert len(shards[0]) + len(shards[1]) == rows
    with pytest.raises(TypeError, match=r"dataset: expected a datasets\.Dataset, got list"):
        data.from_hf([1, 2])


def test_a_dict_of_splits_needs_split_and_names_them(hf_datasets: Any) -> None:
    datasets = hf_datasets
    ds = datasets.Dataset.from_dict({"x": list(range(30))})
    splits = datasets.DatasetDict({"train": ds, "test": ds.select(range(10))})
    with pytest.raises(ValueError, match=r"a dict of splits \['train', 'test'\]: expected split="):
        data.from_hf(splits)
    with pytest.raises(ValueError, match=r"split: expected one of \['train', 'test'\], got 'validation'"):
        data.from_hf(splits, split="validation")
    with pytest.raises(ValueError, match="split: expected None for a Dataset"):
        data.from_hf(ds, split="train")
    assert [c["x"].tolist() for c in data.from_hf(splits, split="test")] == [list(range(10))]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.integers(1, 2600), shards=st.integers(1, 5), batch=st.integers(1, 700), taken=st.integers(0, 6))
def test_a_streaming_dataset_resumes_exactly_from_a_json_state(
    hf_datasets: Any, rows: int, shards: int, batch: int, taken: int
) -> None:
    datasets = hf_datasets  # (the module: the same for every example)
    table = datasets.Dataset.from_dict({"x": list(range(rows)), "y": [[i, -i] for i in range(rows)]})
    stream = table.to_iterable_dataset(num_shards=min(shards, rows))  # (datasets shards no empty table)

    def pipeline() -> Any:
        return data.batches(data.from_hf(stream), batch, drop_remainder=False)

    whole = [b["x"].tolist() for b in pipeline()]
    assert [v for b in whole for v in b] == list(range(rows))
    run = pipeline()
    first = [next(run)["x"].tolist() for _ in range(min(taken, len(whole)))]
    resumed = pipeline()
    resumed.set_state(json.loads(json.dumps(run.get_state())))
    assert first + [b["x"].tolist() for b in resumed] == whole


def test_a_streaming_dataset_shards_by_node_and_refuses_seed_and_epochs(hf_datasets: Any) -> None:
    datasets = hf_datasets
    stream = datasets.Dataset.from_dict({"x": list(range(3000))}).to_iterable_dataset(num_shards=4)
    shares = [sorted(int(v) for c in data.from_hf(stream, shard=(k, 2)) for v in c["x"]) for k in range(2)]
    assert sorted(shares[0] + shares[1]) == list(range(3000)) and not set(shares[0]) & set(shares[1])
    chunk = next(iter(data.from_hf(stream, columns=["x"])))
    assert chunk["x"].dtype == np.int64 and chunk["x"].shape == (1024,)
    for bad in ({"seed": 1}, {"num_epochs": 2}):
        with pytest.raises(ValueError, match="for a streaming dataset"):
            data.from_hf(stream, **bad)


# -- any iterable ----------------------------------------------------------------------------


def test_examples_stack_into_chunks_and_resume_by_count() -> None:
    examples = [{"x": np.full(2, i), "y": i} for i in range(600)]
    source = data.from_iterable(examples)
    chunks = list(source)
    assert [c["y"].shape[0] for c in chunks] == [256, 256, 88]
    again = data.from_iterable(examples)
    again.set_state({"consumed": 256})
    assert next(iter(again))["y"][0] == 256


def test_examples_of_other_shapes_are_named() -> None:
    examples = [{"x": np.zeros(2)}, {"x": np.zeros(2)}, {"x": np.zeros(3)}]
    with pytest.raises(ValueError, match=r"example\['x'\]: expected the shape of row 0 \(f64\[2\]\) in every row, "
                                         r"got rows 2 f64\[3\]"):
        list(data.from_iterable(examples))


def test_a_grain_iterator_resumes_through_its_own_state() -> None:
    grain = pytest.importorskip("grain")
    dataset = grain.MapDataset.source([{"x": np.full(2, i)} for i in range(600)]).to_iter_dataset()

    def pipeline() -> tuple[Any, data.Batches]:
        reader = iter(dataset)
        return reader, data.batches(data.from_iterable(reader), 100)

    whole = [b["x"][:, 0].tolist() for b in pipeline()[1]]
    assert [i for b in whole for i in b] == list(range(600))
    _, first = pipeline()
    for _ in range(3):
        next(first)
    state = json.loads(json.dumps(first.get_state()))
    assert "state" in state["source"]  # grain's own state, not a count
    _, again = pipeline()
    again.set_state(state)
    assert [b["x"][:, 0].tolist() for b in again] == whole[3:]


def test_an_iterable_with_a_state_of_its_own_keeps_it() -> None:
    class Reader:  # a grain DatasetIterator's shape: iterates, and has get_state / set_state
        def __init__(self) -> None:
            self.at = 0

        def __iter__(self) -> Reader:
            return self

        def __next__(self) -> dict[str, Any]:
            if self.at >= 5:
                raise StopIteration
            self.at += 1
            return {"x": np.arange(3) + 10 * self.at}

        def get_state(self) -> dict[str, int]:
            return {"at": self.at}

        def set_state(self, state: dict[str, int]) -> None:
            self.at = state["at"]

    reader = Reader()
    source = data.from_iterable(reader, chunks=True)
    chunks = source.chunks()
    next(chunks)
    next(chunks)
    assert source.get_state() == {"state": {"at": 2}}
    other = Reader()
    resumed = data.from_iterable(other, chunks=True)
    resumed.set_state({"state": {"at": 2}})
    assert [int(c["x"][0]) for c in resumed] == [30, 40, 50]

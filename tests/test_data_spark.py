"""treekit.data.from_spark with real pyspark (local mode; skipped without Java): Spark writes the
Parquet cache once per DataFrame plan, the rows and the spec come back from it, shards split
it, an unfinished cache is written again, and columns a batch cannot hold are refused first."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")
if shutil.which("java") is None:
    pytest.skip("pyspark needs Java", allow_module_level=True)

from treekit import data  # noqa: E402
from treekit.checks import check_spec  # noqa: E402


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2").getOrCreate()
    )
    yield session
    session.stop()


def _frame(spark: Any, rows: int = 60) -> Any:
    made = [(i, i % 3, list(range(i % 5)), i / 2, bytes([i % 256] * 6)) for i in range(rows)]
    return spark.createDataFrame(made, "index long, label int, tokens array<int>, x double, image binary")


def _written(folder: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}


def test_spark_writes_the_cache_once_and_the_rows_come_back_as_the_schema_says(spark: Any, tmp_path: Path) -> None:
    df = _frame(spark).repartition(3)
    source = data.from_spark(df, cache=str(tmp_path), pad={"tokens": 4}, reshape={"image": (2, 3)})
    (folder,) = tmp_path.iterdir()
    assert (folder / "_SUCCESS").exists() and folder.name.startswith("df-")
    first = _written(folder)
    seen = []
    for batch in data.batches(source, 8, spec=source.spec, drop_remainder=False):
        check_spec(batch, source.spec)
        assert (batch["label"] == batch["index"] % 3).all() and (batch["x"] == batch["index"] / 2).all()
        assert (batch["tokens_len"] == np.minimum(batch["index"] % 5, 4)).all()
        assert (batch["image"] == (batch["index"] % 256).astype(np.uint8)[:, None, None]).all()
        seen += batch["index"].tolist()
    assert sorted(seen) == list(range(60))
    assert source.spec["image"].dtype == "uint8" and source.spec["tokens"].shape == ("batch", 4)
    again = data.from_spark(df, cache=str(tmp_path), pad={"tokens": 4}, reshape={"image": (2, 3)})
    assert _written(folder) == first  # (the same plan: read, not written again)
    shards = [[int(i) for c in data.from_spark(df, cache=str(tmp_path), pad={"tokens": 4}, reshape={"image": (2, 3)},
                                               shard=(k, 2)) for i in c["index"]] for k in (0, 1)]
    assert sorted(shards[0] + shards[1]) == list(range(60)) and not set(shards[0]) & set(shards[1])
    del again
    os.remove(folder / "_SUCCESS")  # (a write that did not finish: written again)
    data.from_spark(df, cache=str(tmp_path), pad={"tokens": 4}, reshape={"image": (2, 3)})
    assert (folder / "_SUCCESS").exists() and _written(folder) != first


def test_columns_a_batch_cannot_hold_are_refused_before_spark_writes(spark: Any, tmp_path: Path) -> None:
    df = spark.createDataFrame([("a", 1, b"xy")], "name string, i int, raw binary")
    with pytest.raises(ValueError, match=r"(?s)df\['name'\]: expected numbers.*got string.*df.drop\('name'\)"):
        data.from_spark(df, cache=str(tmp_path))
    with pytest.raises(ValueError, match=r"(?s)df\['raw'\]: .*pass reshape=\{'raw': shape\}"):
        data.from_spark(df.drop("name"), cache=str(tmp_path))
    assert not list(tmp_path.iterdir())
    with pytest.raises(TypeError, match=r"df: expected a pyspark\.sql\.DataFrame, got list"):
        data.from_spark([1, 2], cache=str(tmp_path))

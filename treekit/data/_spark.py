"""A Spark DataFrame as a source, petastorm's converter's job: Spark itself writes the DataFrame as
Parquet into a cache folder (in the cluster, not through the driver), once per DataFrame plan,
and the folder is read as any Parquet folder; the spec comes from the DataFrame's schema, whose
types a training batch cannot hold are refused up front."""

from __future__ import annotations

import hashlib
import sys
from typing import Any

from treekit.core import ShapeDtype, printable
from treekit.data._chunks import Source
from treekit.files import locate, read_bytes

__all__ = ["from_spark"]

_NUMBERS = {
    "ByteType": "int8", "ShortType": "int16", "IntegerType": "int32", "LongType": "int64",
    "FloatType": "float32", "DoubleType": "float64", "BooleanType": "bool",
}
_HINTS = {
    "StringType": "encode it first (token ids: an array<int>), or leave it out: df.drop({name!r})",
    "VectorUDT": "turn it into an array first: pyspark.ml.functions.vector_to_array(df[{name!r}])",
    "TimestampType": "cast it first: df.withColumn({name!r}, df[{name!r}].cast('long'))",
    "DateType": "cast it first: df.withColumn({name!r}, F.unix_date(df[{name!r}]))",
    "DecimalType": "cast it first: df.withColumn({name!r}, df[{name!r}].cast('double'))",
}


def _leaf(name: str, kind: Any, reshape: dict[str, Any]) -> ShapeDtype:
    """The spec of column ``name`` of Spark type ``kind``, or a ValueError saying what to do."""
    dims: list[Any] = ["batch"]
    while type(kind).__name__ == "ArrayType":
        dims.append(None)
        kind = kind.elementType
    kind_name = type(kind).__name__
    if kind_name == "BinaryType" and len(dims) == 1 and name in reshape:
        return ShapeDtype(("batch", *reshape[name]), "uint8")
    if kind_name in _NUMBERS:
        return ShapeDtype(("batch", *reshape[name]) if name in reshape else tuple(dims), _NUMBERS[kind_name])
    hint = _HINTS.get(kind_name, "select the columns a batch holds: df.select(...)")
    if kind_name == "BinaryType":
        hint = "pass reshape={{{name!r}: shape}} for raw bytes of one shape a row (uint8)"
    raise ValueError(
        f"df[{name!r}]: expected numbers, bools or arrays of them (or binary with reshape=), got "
        f"{printable(kind.simpleString())}\n{hint.format(name=name)}"
    )


def spark_spec(schema: Any, reshape: dict[str, Any], pad: dict[str, int]) -> dict[str, ShapeDtype]:
    """The spec of the rows a DataFrame of ``schema`` gives (array columns: ``None`` dims, or
    ``pad``'s length with a ``<name>_len`` leaf).

    Raises:
        ValueError: Naming the first column a batch cannot hold, and what to do with it.
    """
    spec = {}
    for field in schema.fields:
        leaf = _leaf(field.name, field.dataType, reshape)
        if field.name in pad:
            leaf = ShapeDtype(("batch", pad[field.name], *leaf.shape[2:]), leaf.dtype)
            spec[f"{field.name}_len"] = ShapeDtype(("batch",), "int32")
        spec[field.name] = leaf
    return spec


def cache_key(df: Any) -> str:
    """The cache folder's name for ``df``: a digest of its plan's semantic hash (Spark's own:
    equal for DataFrames of the same result) and its schema."""
    text = f"{df.semanticHash()} {df.schema.json()}"
    return "df-" + hashlib.sha256(text.encode()).hexdigest()[:24]


def from_spark(
    df: Any,
    *,
    cache: str,
    shard: Any = None,
    seed: int | None = None,
    num_epochs: int | None = 1,
    pad: dict[str, int] | None = None,
    reshape: dict[str, tuple[int, ...]] | None = None,
    readers: int = 2,
    storage_options: dict[str, Any] | None = None,
) -> Source:
    """A source of a Spark DataFrame's rows: Spark writes them as Parquet into ``cache`` once,
    in the cluster, then they are read as :func:`treekit.data.parquet` reads a folder.

    >>> import tempfile
    >>> from pyspark.sql import SparkSession
    >>> from treekit.data import batches
    >>> spark = SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false').getOrCreate()
    >>> df = spark.createDataFrame([(i, [i] * (i % 3)) for i in range(10)], 'id long, tokens array<int>')
    >>> source = from_spark(df, cache=tempfile.mkdtemp(), pad={'tokens': 2})
    >>> source.spec['tokens']
    ShapeDtype(shape=('batch', 2), dtype='int32')
    >>> sorted(int(i) for batch in batches(source, 5) for i in batch['id'])
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    >>> spark.stop()

    The write runs where Spark runs (its executors write the part files; nothing goes through
    this process), into ``cache/df-<key>/``, keyed by the DataFrame's plan (``semanticHash``)
    and schema: the same DataFrame again, in this run or another, reads what was written. The
    key knows the plan, not the input files' contents: after the input changes, pass a new
    ``cache`` or delete the folder. A folder whose write did not finish (no ``_SUCCESS``) is
    written again.

    The source's ``spec`` comes from the schema: numbers and bools as their dtypes, arrays as
    ``None`` dims (``pad=`` gives one length and a ``<name>_len`` leaf), ``binary`` with
    ``reshape=`` as uint8 of that shape. Other types are refused before anything is written,
    saying what to do (strings: encode or drop them; ML vectors: ``vector_to_array``).

    Args:
        df: A ``pyspark.sql.DataFrame``.
        cache: A folder both Spark and this process reach: a local path (one machine, or a
            shared disk) or a URL (``s3a://``, ``gs://``; fsspec reads ``s3a://`` as ``s3://``).
        shard: As :func:`~treekit.data.parquet` takes it; with ``'process'`` and several
            processes, every process calls this with the same DataFrame (its plan: nothing is
            computed before the write), process 0 has Spark write the cache, and the others
            wait for it.
        seed: As :func:`~treekit.data.parquet` takes it.
        num_epochs: As :func:`~treekit.data.parquet` takes it.
        pad: As :func:`~treekit.data.parquet` takes it.
        reshape: As :func:`~treekit.data.parquet` takes it.
        readers: As :func:`~treekit.data.parquet` takes it.
        storage_options: As :func:`~treekit.data.parquet` takes them, for reading the cache.

    Returns:
        The source; its ``spec`` attribute is the rows' spec.

    Raises:
        ImportError: Without pyarrow.
        ValueError: For a column of a type a batch cannot hold (before Spark writes anything).
    """
    from treekit.data._parquet import ParquetSource, pyarrow_parquet

    pyarrow_parquet()
    if not all(hasattr(df, name) for name in ("semanticHash", "schema", "write")):
        raise TypeError(f"df: expected a pyspark.sql.DataFrame, got {type(df).__name__}")
    spec = spark_spec(df.schema, dict(reshape or {}), dict(pad or {}))
    folder = f"{str(cache).rstrip('/')}/{cache_key(df)}"
    where = locate(folder, None, storage_options, "cache")
    group = None
    jax = sys.modules.get("jax")
    if shard == "process" and jax is not None and jax.process_count() > 1:
        from treekit.checkpoint import Group

        group = Group(f"from_spark {folder}", kind="data-spark")
    failed = b""
    if group is None or group.me == 0:
        try:
            read_bytes(where.join("_SUCCESS"), 1 << 20)
        except FileNotFoundError:
            try:
                df.write.mode("overwrite").parquet(folder)  # (Spark's committer writes _SUCCESS last)
            except Exception as exc:
                if group is None:
                    raise
                failed = f"{type(exc).__name__}: {exc}".encode()[:2000]
    if group is not None:
        failed = group.exchange("written", failed)[0]
        group.barrier("read")  # (every process has read the keys close deletes)
        group.close()
        if failed:
            said = failed.decode(errors="replace")
            raise RuntimeError(f"from_spark: process 0's Spark write of {folder} failed: {said}")
    source = ParquetSource(
        folder, columns=list(df.schema.names), shard=shard, seed=seed, num_epochs=num_epochs, pad=pad,
        reshape=reshape, readers=readers, storage_options=storage_options,
    )
    source.spec = spec
    return source

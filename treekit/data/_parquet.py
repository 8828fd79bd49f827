"""Parquet as Spark and petastorm write it: files, folders and globs, on a local disk or in an
object store, Hive-style ``key=value/`` folders (the key a column), row groups as the units a
shard reads, read ahead in threads."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from treekit.core import printable
from treekit.data._arrow import check_pad_reshape, columns_to_numpy
from treekit.data._chunks import Chunk, Source, check_rows
from treekit.data._dataset import (
    MANIFEST,
    MANIFEST_LIMIT,
    SPEC_KEY,
    Column,
    Written,
    check_written_type,
    columns_from_text,
    dims_of,
    read_manifest,
    read_spec,
)
from treekit.data._plan import Plan, PlannedSource
from treekit.files import Where, arrow_filesystem, find, locate, matches, read_bytes

__all__ = ["ParquetSource", "find_files", "parquet", "pyarrow_parquet"]

_NEEDS = "treekit.data.parquet needs pyarrow: pip install 'jax-treekit[parquet]'"
_SHARED = ("S3FileSystem", "GcsFileSystem")  # pyarrow's own clients, whose files read at offsets from any thread


def pyarrow_parquet() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ImportError(_NEEDS) from exc
    return pq


def _hidden(name: str) -> bool:
    """Spark's and Hive's files that are no data: ``_SUCCESS``, ``_metadata``, ``.part-0.crc``."""
    return name.startswith(("_", "."))


def _written(folder: Where) -> Written | None:
    """The manifest of the dataset :func:`treekit.data.write_parquet` wrote in ``folder``, if any."""
    manifest = folder.join(MANIFEST)
    try:
        raw = read_bytes(manifest, MANIFEST_LIMIT)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    return read_manifest(raw, str(manifest))


def find_files(
    paths: Any, filesystem: Any = None, storage_options: Any = None
) -> tuple[list[tuple[Where, str]], Written | None]:
    """``(file, name relative to its folder)`` for each data file that ``paths`` names, sorted,
    and the manifest of the dataset they are, where ``paths`` names a folder that
    :func:`treekit.data.write_parquet` wrote (then its listed files alone are read).

    ``paths`` is a file, a folder (walked; hidden and ``_``-prefixed files and folders left
    out, as Spark and pyarrow leave them out), a glob, or a list of those; local, or URLs
    (``filesystem`` and ``storage_options`` as :func:`treekit.files.locate` takes them).

    Raises:
        FileNotFoundError: If a path names nothing, or all of them name no data file, or a
            written dataset's manifest lists a file that is missing.
        ValueError: If a written dataset's folder is named beside other paths.
    """
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    found: list[tuple[Where, str]] = []
    written = None
    for item in items:
        where = locate(item, filesystem, storage_options, "paths")
        named = matches(where)
        if not named:
            raise FileNotFoundError(f"paths: expected files, folders or globs that exist, got {str(where)!r}")
        for match, is_file in named:
            if is_file:
                if not (match is not where and _hidden(match.name)):  # a glob's _SUCCESS
                    found.append((match, match.name))
                continue
            base = len(match.path.rstrip("/\\")) + 1
            listed = [(file, file.path[base:].replace(os.sep, "/")) for file in find(match, _hidden)]
            dataset = _written(match)
            if dataset is not None:
                if len(items) > 1 or len(named) > 1:
                    shown = str(match)
                    raise ValueError(f"paths: expected a written dataset's folder alone, got {shown!r} among others")
                there = {rel: (file, rel) for file, rel in listed}
                missing = [name for name, _ in dataset.files if name not in there]
                if missing:
                    gone = printable(missing[0])
                    raise FileNotFoundError(f"{match.join(MANIFEST)}: lists '{gone}', which is missing")
                listed, written = [there[name] for name, _ in dataset.files], dataset
            found += listed
    if not found:
        raise FileNotFoundError(f"paths: expected Parquet files, found none in {paths!r}")
    once: dict[str, tuple[Where, str]] = {}  # (a file that two paths name is read once)
    for file, rel in found:
        once.setdefault(os.path.abspath(file.path) if file.local else file.path, (file, rel))
    return list(once.values()), written


def _partitions(files: list[tuple[Where, str]]) -> tuple[list[dict[str, str]], dict[str, bool]]:
    """Each file's Hive-style ``key=value`` folders, and whether each key's values are all ints."""
    parts = []
    for _, rel in files:
        folders = rel.split("/")[:-1]
        parts.append(dict(f.split("=", 1) for f in folders if "=" in f))
    keys = {k for p in parts for k in p}
    for k in keys:
        missing = [rel for (_, rel), p in zip(files, parts) if k not in p]
        if missing:
            raise ValueError(f"paths: expected every file under a {k}=... folder, got {missing[0]!r} outside one")
    ints = {k: all(p[k].lstrip("-").isdigit() for p in parts) for k in keys}
    return parts, ints


class ParquetSource(PlannedSource):
    """Chunks of Parquet rows, a row group at a time: see :func:`treekit.data.parquet`."""

    def __init__(
        self, paths: Any, *, columns: Sequence[str] | None, shard: Any, seed: int | None, num_epochs: int | None,
        pad: Any, reshape: Any, readers: int, filesystem: Any = None, storage_options: Any = None,
    ) -> None:
        pyarrow_parquet()  # (its ImportError first)
        self.pads, self.shapes = check_pad_reshape(pad, reshape)
        if type(readers) is not int or readers < 1:
            raise ValueError(f"readers: expected an int >= 1, got {readers!r}")
        self.files, self.written = find_files(paths, filesystem, storage_options)
        self.parts, self.ints = _partitions(self.files)
        made: dict[Any, Any] = {}  # (one pyarrow filesystem for the files of a bucket)
        self.arrow = [arrow_filesystem(where, made) for where, _ in self.files]
        # a remote file that pyarrow's own client reads is a dataset fragment, made with the size
        # the listing gave (opening a file asks the store for it: a round trip) and kept from its
        # footer on (its reads at offsets are safe from several threads)
        self.fragments: list[Any] = [None] * len(self.files)
        self.units: list[tuple[int, int]] = []
        # each file's footer (kept: a read then needs no request for it), several at once: an
        # object store answers each after a round trip
        with ThreadPoolExecutor(min(16, len(self.files)), thread_name_prefix="treekit-parquet") as pool:
            self.metas = list(pool.map(self._footer, range(len(self.files))))
        schema = self.metas[0].schema.to_arrow_schema()
        for i, meta in enumerate(self.metas):
            self.units += [(i, g) for g in range(meta.num_row_groups)]
        self._spec_of(reshape)
        file_columns = list(schema.names)
        known = file_columns + sorted(self.ints)
        self.columns = list(columns) if columns is not None else known
        unknown = [c for c in self.columns if c not in known]
        if unknown:
            raise ValueError(f"columns: expected names among {known}, got {unknown}")
        self.spec: Any = None
        if self.dataset is not None:
            self.dataset = [c for c in self.dataset if c.name in self.columns]
            self._written_columns(schema)
            self.spec = read_spec(self.dataset, self.pads)
        odd = sorted((set(self.pads) | set(self.shapes)) - set(self.columns))
        if odd:
            raise ValueError(f"pad and reshape: expected columns that are read, got {odd}")
        self.read_columns = [c for c in self.columns if c in file_columns]
        self.plan = Plan(len(self.units), shard=shard, seed=seed, num_epochs=num_epochs)
        self.readers = readers
        self.position: dict[str, Any] = {"epoch": 0, "index": 0}

    exact: frozenset[str] = frozenset()  # ragged columns padded to the longest row written: never cut
    dataset: list[Column] | None = None  # a written dataset's columns (those read)

    def _spec_of(self, reshape: Any) -> None:
        """The columns of the spec a written dataset's files hold (``self.dataset``; ``None`` for
        other files): every file's, one spec, and only through the dataset's manifest."""
        texts = [(meta.schema.to_arrow_schema().metadata or {}).get(SPEC_KEY) for meta in self.metas]
        self.dataset = None
        marked = [rel for (_, rel), text in zip(self.files, texts) if text is not None]
        if not marked:
            return
        first = printable(marked[0])
        if self.written is None:
            raise ValueError(
                f"{first}: expected the folder of a committed dataset (with its {MANIFEST}), got a file "
                "treekit.data.write_parquet wrote, of a write that did not finish (or was killed) or read "
                "apart from its folder\nread the dataset's folder, or delete that write's part files"
            )
        for (_, rel), text in zip(self.files, texts):
            if text != texts[0]:
                raise ValueError(f"{printable(rel)}: expected the spec of {first} (one dataset), got another")
        assert texts[0] is not None  # (every file's is the first's, and one is there)
        self.dataset = columns_from_text(texts[0], first)
        if reshape:
            raise ValueError("reshape: expected none for a written dataset (its spec gives every shape)")

    def _written_columns(self, schema: Any) -> None:
        """Check the columns read against the spec (the Arrow types a write gives them, and the
        manifest's longest rows against what the files hold), and set their padding (``pad=``'s,
        else the longest row written) and shapes."""
        assert self.written is not None and self.dataset is not None
        exact = set()
        for c in self.dataset:
            dims = dims_of(c, self.written.sizes)
            where = f"{printable(self.files[0][1])} column {c.name!r}"
            if c.name not in schema.names:
                raise ValueError(f"{where}: expected the column the spec names, got none")
            check_written_type(schema.field(c.name).type, c, dims, where)
            if c.ragged:
                if c.name not in self.pads:
                    longest = self.written.longest.get(c.name, 0)
                    index = schema.names.index(c.name)
                    held = max((m.row_group(g).column(index).num_values for m in self.metas
                                for g in range(m.num_row_groups)), default=0)
                    if longest * max(1, math.prod(dims)) > held:
                        raise ValueError(
                            f"{MANIFEST}: expected the longest row of {c.name!r} among the values the files hold "
                            f"({held} in a row group at most), got {longest}"
                        )
                    self.pads[c.name] = longest
                    exact.add(c.name)
            elif dims:  # (stored as one flat fixed-size list a row)
                self.shapes[c.name] = dims
        odd = sorted(set(self.pads) - {c.name for c in self.dataset if c.ragged})
        if odd:
            raise ValueError(f"pad: expected the written dataset's ragged columns that are read, got {odd}")
        self.exact = frozenset(exact)

    def _footer(self, file: int) -> Any:
        """File ``file``'s Parquet metadata."""
        fs, path = self.arrow[file]
        where = self.files[file][0]
        try:
            if not where.local and type(fs).__name__ in _SHARED:
                import pyarrow.dataset as ds

                fragment = ds.ParquetFileFormat().make_fragment(path, filesystem=fs, file_size=where.size)
                fragment.ensure_complete_metadata()
                self.fragments[file] = fragment
                return fragment.metadata
            with fs.open_input_file(path) as f:
                return pyarrow_parquet().read_metadata(f)
        except Exception as exc:
            rel = self.files[file][1]
            raise ValueError(
                f"{printable(rel)}: expected a Parquet file, got one pyarrow cannot read ({printable(exc)})"
            ) from exc

    def _read(self, position: dict[str, Any], unit: int) -> Chunk:
        import numpy as np

        file, group = self.units[unit]
        rel = self.files[file][1]
        where = f"{printable(rel)} row group {group}"
        fragment = self.fragments[file]
        if fragment is not None:  # (the row group's columns asked for together, no size asked)
            table = fragment.subset(row_group_ids=[group]).to_table(columns=self.read_columns, use_threads=False)
        else:
            fs, path = self.arrow[file]
            remote = not self.files[file][0].local  # (then the row group's columns in one request)
            with fs.open_input_file(path) as f:
                handle = pyarrow_parquet().ParquetFile(f, metadata=self.metas[file], pre_buffer=remote)
                table = handle.read_row_group(group, columns=self.read_columns, use_threads=False)
        arrays: Any = columns_to_numpy(table, self.read_columns, self.pads, self.shapes, where, self.exact)
        for key, value in self.parts[file].items():
            if key in self.columns:
                arrays[key] = np.full(table.num_rows, int(value) if self.ints[key] else value)
        if self.dataset is not None:
            assert self.written is not None
            arrays = _as_spec(arrays, [c for c in self.dataset if c.name in self.columns], self.written.sizes)
        return check_rows(self.shuffled(arrays, position, unit, table.num_rows), where, dict(position))

    def chunks(self) -> Iterator[Chunk]:
        units = self.plan.units(self.position)
        # ``2 * readers`` row groups are asked for at once: ``readers`` read while read chunks
        # wait for the caller, so a read that runs late hides behind them. Each read decodes in
        # its own thread (``use_threads=False``): reads given to pyarrow's shared pool queued
        # their columns behind each other's, so the first chunk waited for all and reads
        # scaled to half the cores (docs/performance.md, "Data in").
        with ThreadPoolExecutor(self.readers, thread_name_prefix="treekit-parquet") as pool:
            ahead: list[Future[Chunk]] = []
            try:
                while True:
                    while len(ahead) < 2 * self.readers:
                        nxt = next(units, None)
                        if nxt is None:
                            break
                        ahead.append(pool.submit(self._read, *nxt))
                    if not ahead:
                        return
                    chunk = ahead.pop(0).result()
                    self.read_from(chunk.state)
                    yield chunk
            finally:
                for future in ahead:
                    future.cancel()


def _as_spec(arrays: dict[str, Any], columns: list[Column], sizes: dict[str, int]) -> dict[str, Any]:
    """A written dataset's columns as the tree its spec is, in its dtypes (bfloat16 from its bits),
    a ragged leaf's elements in their dims."""
    tree: dict[str, Any] = {}
    for c in columns:
        node = tree
        for key in c.path[:-1]:
            node = node.setdefault(key, {})
        value = arrays[c.name]
        if c.ragged:
            value = value.reshape(*value.shape[:2], *dims_of(c, sizes))
        node[c.path[-1]] = value.view(c.numpy_dtype()) if c.storage != c.dtype else value
        if c.ragged:
            node[f"{c.path[-1]}_len"] = arrays[f"{c.name}_len"]
    return tree


def parquet(
    paths: Any,
    *,
    columns: Sequence[str] | None = None,
    shard: Any = None,
    seed: int | None = None,
    num_epochs: int | None = 1,
    pad: dict[str, int] | None = None,
    reshape: dict[str, tuple[int, ...]] | None = None,
    readers: int = 2,
    filesystem: Any = None,
    storage_options: dict[str, Any] | None = None,
) -> Source:
    """A source of Parquet rows, a row group at a time, as a dict of numpy arrays by column.

    >>> import os, tempfile
    >>> import pyarrow as pa, pyarrow.parquet as pq
    >>> folder = tempfile.mkdtemp()
    >>> table = pa.table({'label': list(range(6)), 'tokens': [[1, 2, 3], [4], [], [5, 6], [7], [8]]})
    >>> pq.write_table(table, os.path.join(folder, 'part-0.parquet'), row_group_size=3)
    >>> open(os.path.join(folder, '_SUCCESS'), 'w').close()  # as Spark leaves it: not read
    >>> source = parquet(folder, pad={'tokens': 2})
    >>> [chunk['tokens'].tolist() for chunk in source]
    [[[1, 2], [4, 0], [0, 0]], [[5, 6], [7, 0], [8, 0]]]

    Args:
        paths: A file, a folder (every file below it but hidden and ``_``-prefixed ones, such as
            Spark's ``_SUCCESS`` and ``.crc`` files), a glob, or a list of those; paths or URLs
            (``s3://bucket/data``, ``gs://...``, any fsspec filesystem's). Hive-style
            folders (``year=2024/``) give a column of that name (ints where every value is one).
        columns: The columns to read (partition keys too); all by default.
        shard: ``(index, count)``: this reader's share of the row groups (shards are disjoint and
            cover them all); ``'process'`` for ``(jax.process_index(), jax.process_count())``.
        seed: Shuffles the order of row groups and of the rows in each, differently each epoch;
            ``None`` reads them as stored.
        num_epochs: How many times to read the data; ``None`` for ever.
        pad: ``{column: length}``: a column of lists padded with zeros or truncated to that
            length, with a ``<column>_len`` column of the lengths kept.
        reshape: ``{column: shape}``: a column of lists (one flat image a row), or of raw bytes
            (Spark's ``binary``, as uint8), as arrays of that shape, after one check that every
            row has that many values.
        readers: Row groups read at once, each in a thread of its own (pyarrow reads
            without the GIL); as many more, read, may wait for the caller (at most
            ``2 * readers`` row groups held). Over an object store, where each read waits a
            round trip, more readers keep the link busy (8-16 for small row groups).
        filesystem: The pyarrow or fsspec filesystem ``paths`` are on (``None``: the one their
            URLs' scheme names, else the local disk).
        storage_options: Options for the filesystem a URL names, as fsspec takes them
            (``{'endpoint_url': ...}`` for s3fs); without them, ``s3://`` and ``gs://`` URLs are
            read by pyarrow's own S3 and GCS classes, configured from the standard environment
            and credential chains (``AWS_*``, ``GOOGLE_APPLICATION_CREDENTIALS``).

    Returns:
        The source: iterate it for its chunks, or give it to :func:`treekit.data.batches`.

    Nothing from the dataset is ever unpickled (petastorm's ``Unischema`` codecs are not
    read): columns are plain Parquet types.

    Raises:
        ImportError: Without pyarrow (``pip install 'jax-treekit[parquet]'``).
        FileNotFoundError: If ``paths`` names no file.
        ValueError: For an unknown column, a file pyarrow cannot read, and when reading, a null,
            or a ragged list column without ``pad``: named with its file, row group and rows.
    """
    return ParquetSource(
        paths, columns=columns, shard=shard, seed=seed, num_epochs=num_epochs, pad=pad, reshape=reshape,
        readers=readers, filesystem=filesystem, storage_options=storage_options,
    )

"""Writing a dataset: trees of numpy arrays (examples, or chunks of rows) checked against a spec,
turned into Arrow columns without a Python object per value (fixed dims as fixed-size lists over
the leaf's own buffer, a ragged dim as offsets), written as Parquet row groups into part files,
and committed by one small file written last (``_dataset.py``): several processes each write
their parts, and process 0 commits them together."""

from __future__ import annotations

import json
import math
import os
import secrets
import sys
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

from treekit.core import describe_leaf, flatten, keystr, printable
from treekit.data._casts import fits
from treekit.data._chunks import Source
from treekit.data._dataset import MANIFEST, SPEC_KEY, Column, columns_of, manifest_text, spec_text
from treekit.files import (
    Where,
    create_exclusive,
    find,
    fsync_folder,
    listdir,
    locate,
    makedirs,
    mode_for,
    remove,
    remove_tree,
    write_bytes,
    writing,
)

__all__ = ["write_parquet"]

GROUP_BYTES = 64 << 20  # the default row group: about this many bytes of values
EXAMPLES_PER_BLOCK = 1024


class _Columns:
    """The rows waiting to be written, column by column: numpy arrays of rows (fixed columns),
    lists of each row's array (ragged ones); checked, cast to the spec's dtypes and counted."""

    def __init__(self, columns: list[Column]) -> None:
        self.columns = columns
        self.dtypes = [c.numpy_dtype() for c in columns]
        self.parts: list[list[Any]] = [[] for _ in columns]
        self.rows = 0  # waiting
        self.seen = 0  # rows taken in so far (the row numbers errors name)
        self.sizes: dict[str, int] = {}  # named dims' sizes
        self.longest = {c.name: 0 for c in columns if c.ragged}

    def _dims(self, column: Column, shape: tuple[int, ...], first_axis: int, where: str) -> None:
        """Check the dims of ``shape`` (from ``first_axis`` of the spec's shape on) against the spec."""
        want = column.shape[first_axis:]
        if len(shape) != len(want):
            raise ValueError(f"{where}: expected {len(want)} dims ({list(want)}), got shape {shape}")
        for dim, got in zip(want, shape):
            if isinstance(dim, int) and dim != got:
                raise ValueError(f"{where}: expected dims {list(want)}, got shape {shape}")
            if isinstance(dim, str):
                if self.sizes.setdefault(dim, got) != got:
                    raise ValueError(
                        f"{where}: expected {dim}={self.sizes[dim]} (as in the rows before), got shape {shape}"
                    )

    def _cast(self, i: int, array: Any, where: str, first: int | None) -> Any:
        """``array`` as the spec's dtype where its values are the dtype's values too (``first``:
        the row number of its first row, for an array of rows; ``None`` for one row's array)."""
        import numpy as np

        column, target = self.columns[i], self.dtypes[i]
        if array.dtype == target:
            return array
        if column.storage == column.dtype:
            if array.size == 0 or np.can_cast(array.dtype, target, "safe"):
                return array.astype(target)
            ok = fits(array.reshape(1, -1) if first is None else array, target)
            if ok is not None and ok.all():
                with np.errstate(invalid="ignore", over="ignore"):
                    return array.astype(target)
            if ok is not None and first is not None:
                bad = int(np.flatnonzero(~ok)[0])
                where = f"{where.split(' (')[0]} (row {first + bad})"
                raise ValueError(f"{where}: expected values that fit {column.dtype}, got {array[bad].tolist()!r:.80}")
        raise ValueError(f"{where}: expected values of {column.dtype}, got {describe_leaf(array)}")

    def _ragged_rows(self, i: int, values: list[Any], label: str, first: int) -> None:
        """Check (and cast, in place) the rows of ragged column ``i``: each row's dims after its
        first are the spec's; a row whose shape or dtype is not the common one is looked at alone."""
        column, target = self.columns[i], self.dtypes[i]
        tail = tuple(self.sizes.get(d, -1) if isinstance(d, str) else d for d in column.shape[2:])
        for k, v in enumerate(values):
            if v.dtype != target or v.ndim != len(column.shape) - 1 or v.shape[1:] != tail:
                where = f"{label} (row {first + k})"
                self._dims(column, v.shape, 1, where)
                tail = tuple(self.sizes.get(d, -1) if isinstance(d, str) else d for d in column.shape[2:])
                values[k] = self._cast(i, v, where, None)

    def add_examples(self, examples: list[Any], treedef: Any, paths: list[Any]) -> None:
        """Take ``examples`` (trees of the spec's structure, one row each)."""
        import numpy as np

        first = self.seen
        rows = [treedef.flatten_up_to(example) for example in examples]
        for i, column in enumerate(self.columns):
            values = [np.asarray(row[i]) for row in rows]
            label = f"example{keystr(paths[i])}"
            if column.ragged:
                self._ragged_rows(i, values, label, first)
                self.parts[i].append(values)
                continue
            shape = values[0].shape if values else ()
            for k, v in enumerate(values):
                if v.shape != shape:
                    raise ValueError(
                        f"{label} (row {first + k}): expected the shape of row {first} ({list(shape)}), "
                        f"got {list(v.shape)}"
                    )
            self._dims(column, shape, 1, f"{label} (rows {first}-{first + len(values) - 1})")
            stacked = np.stack(values) if values else np.zeros((0, *shape), self.dtypes[i])
            self.parts[i].append(self._cast(i, stacked, f"{label} (rows {first}-{first + len(values) - 1})", first))
        self.rows += len(examples)
        self.seen += len(examples)

    def add_chunk(self, leaves: list[Any], paths: list[Any]) -> None:
        """Take a chunk: leaves of rows (a ragged leaf as a list of its rows' arrays)."""
        import numpy as np

        first, count = self.seen, None
        taken = []
        for i, column in enumerate(self.columns):
            leaf = leaves[i]
            label = f"chunk{keystr(paths[i])} (rows from {first})"
            if column.ragged and isinstance(leaf, (list, tuple)):
                values = [np.asarray(v) for v in leaf]
                self._ragged_rows(i, values, f"chunk{keystr(paths[i])}", first)
                taken.append(values)
                n = len(values)
            elif column.ragged:
                got = describe_leaf(leaf)
                raise TypeError(f"{label}: expected a list of each row's array (a ragged leaf), got {got}")
            else:
                array = np.asarray(leaf)
                if array.ndim == 0:
                    raise ValueError(f"{label}: expected an array of rows, got a scalar")
                self._dims(column, array.shape[1:], 1, label)
                taken.append(self._cast(i, array, label, first))
                n = array.shape[0]
            if count is None:
                count = n
            elif n != count:
                raise ValueError(f"{label}: expected {count} rows (as the chunk's first leaf), got {n}")
        for i, value in enumerate(taken):
            self.parts[i].append(value)
        self.rows += count or 0
        self.seen += count or 0

    def take(self, n: int) -> list[Any]:
        """The first ``n`` waiting rows, column by column, taken out."""
        import numpy as np

        out: list[Any] = []
        for i, column in enumerate(self.columns):
            parts: list[Any] = self.parts[i]
            if column.ragged:
                flat = [row for part in parts for row in part]
                out.append(flat[:n])
                self.parts[i] = [flat[n:]] if len(flat) > n else []
                continue
            if not parts:
                dims = [self.sizes.get(d, 1) if isinstance(d, str) else d for d in column.shape[1:]]
                parts = [np.zeros((0, *dims), self.dtypes[i])]
            joined = parts[0] if len(parts) == 1 else np.concatenate(parts)
            out.append(joined[:n])
            self.parts[i] = [joined[n:]] if joined.shape[0] > n else []
        self.rows -= n
        return out

    def row_bytes(self) -> int:
        """Bytes of values a row holds, from the rows waiting (the default row group's size)."""
        total = 0
        for i, column in enumerate(self.columns):
            for part in self.parts[i]:
                total += sum(v.nbytes for v in part) if column.ragged else part.nbytes
        return max(1, total // max(1, self.rows))

    def table(self, values: list[Any], spec: str) -> Any:
        """Arrow table of one row group's ``values``, the spec in its schema's metadata."""
        import numpy as np
        import pyarrow as pa

        arrays = []
        for i, column in enumerate(self.columns):
            storage = np.dtype(column.storage)
            value = values[i]
            if column.ragged:
                lengths = np.fromiter((v.shape[0] for v in value), np.int64, len(value))
                inner = value[0].shape[1:] if value else tuple(self.sizes.get(d, 1) if isinstance(d, str) else d
                                                               for d in column.shape[2:])
                flat = np.concatenate([v.reshape(-1) for v in value]) if value else np.zeros(0, self.dtypes[i])
                if lengths.size:
                    self.longest[column.name] = max(self.longest[column.name], int(lengths.max()))
                array = _fixed_lists(pa.array(flat.view(storage)), math.prod(inner))
                offsets = np.zeros(len(value) + 1, np.int64)
                np.cumsum(lengths, out=offsets[1:])
                if offsets[-1] >= 2**31:
                    raise ValueError(
                        f"{column.name}: expected fewer than 2**31 list elements in a row group, got {offsets[-1]}\n"
                        "pass a smaller row_group_size"
                    )
                kind = pa.list_(pa.field("element", array.type, nullable=False))
                arrays.append(pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), array, type=kind))
            else:
                flat = np.ascontiguousarray(value).reshape(-1).view(storage)
                arrays.append(_fixed_lists(pa.array(flat), math.prod(value.shape[1:])))
        schema = pa.schema([pa.field(c.name, a.type, nullable=False) for c, a in zip(self.columns, arrays)],
                           metadata={SPEC_KEY: spec.encode()})
        return pa.Table.from_arrays(arrays, schema=schema)


def _fixed_lists(values: Any, size: int) -> Any:
    """``values`` in fixed-size lists of ``size`` (a leaf's fixed dims, flattened: one list level
    encodes at about twice the speed of one per dim), of non-null values; ``values`` for 1."""
    import pyarrow as pa

    if size == 1 and not pa.types.is_fixed_size_list(values.type):
        return values
    kind = pa.list_(pa.field("element", values.type, nullable=False), size)
    return pa.FixedSizeListArray.from_arrays(values, type=kind)


def _items(source: Any, chunks: bool) -> tuple[Iterator[Any], bool]:
    """The items to write and whether each is a chunk of rows (a treekit source's are)."""
    if isinstance(source, Source):
        return iter(source), True
    if not isinstance(source, Iterable):
        raise TypeError(f"source: expected an iterable of trees or a treekit.data source, got {type(source).__name__}")
    return iter(source), chunks


def _rows(columns: list[Column], spec_tree: Any, source: Any, chunks: bool) -> Iterator[_Columns]:
    """The rows of ``source``, taken into one :class:`_Columns` in blocks (yielded after each)."""
    _, treedef, paths = flatten(spec_tree, with_path=True)
    assert paths is not None
    items, of_chunks = _items(source, chunks)
    pending = _Columns(columns)
    block: list[Any] = []
    for item in items:
        if of_chunks:
            pending.add_chunk(treedef.flatten_up_to(item), paths)
            yield pending
            continue
        block.append(item)
        if len(block) == EXAMPLES_PER_BLOCK:
            pending.add_examples(block, treedef, paths)
            block = []
            yield pending
    if block:
        pending.add_examples(block, treedef, paths)
    yield pending


def _existing(where: Where, overwrite: bool) -> list[str]:
    """The names in folder ``where`` that a write replaces (``[]`` for none or no folder).

    Raises:
        FileExistsError: If it holds anything and ``overwrite`` is false, or holds a file that
            is no Parquet data (a write replaces data, never a folder of other files).
    """
    if where.local and os.path.exists(where.path) and not os.path.isdir(where.path):
        raise FileExistsError(f"folder: expected a folder, got the file {str(where)!r}")
    names = listdir(where) if not where.local or os.path.isdir(where.path) else []
    if not names:
        return []
    if not overwrite:
        raise FileExistsError(
            f"folder: expected a folder that is missing or empty, got {str(where)!r} holding {len(names)} "
            "entries\npass overwrite=True to replace its data whole"
        )
    for file in find(where, lambda name: False):
        name = file.name
        if not (name.endswith(".parquet") or name.startswith(("_", "."))):
            raise FileExistsError(
                f"folder: expected a folder of Parquet data to replace, got {str(where)!r} holding "
                f"{printable(file.path[len(where.path):].lstrip('/'))!r}\nremove the folder by hand to write there"
            )
    return names


_Parts = tuple[list[tuple[str, int]], dict[str, int], dict[str, int]]


def _write_file(where: Where, table: Any) -> None:
    """``table`` as the new Parquet file ``where``, one row group (none for no rows). Locally it is
    created where it goes, never through a link, and not synced (see :func:`_synced`); remotely
    uploaded whole. Its name is new: it is data only once the manifest lists it."""
    import pyarrow.parquet as pq

    if where.local:
        fd = create_exclusive(where.path, mode_for(where.path))
        with os.fdopen(fd, "wb") as f, pq.ParquetWriter(f, table.schema) as writer:
            if table.num_rows:
                writer.write_table(table, row_group_size=table.num_rows)
        return
    with writing(where) as upload, pq.ParquetWriter(upload, table.schema) as writer:
        if table.num_rows:
            writer.write_table(table, row_group_size=table.num_rows)


def _synced(where: Where, names: list[str], pool: ThreadPoolExecutor) -> None:
    """The local part files ``names`` and their folder synced to the disk, the files at once
    (the disk orders the writes; a sync after each file cost a third of the write)."""
    if not where.local:
        return

    def sync(name: str) -> None:
        fd = os.open(where.join(name).path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    list(pool.map(sync, names))
    fsync_folder(where.path)


def _write_parts(where: Where, tag: str, process: int, columns: list[Column], spec_tree: Any, source: Any,
                 chunks: bool, row_group_size: int | None, writers: int) -> _Parts:
    """Write this process's part files, a row group each, ``writers`` at once in threads (pyarrow
    encodes without the GIL; the source is read meanwhile): their ``(name, rows)`` in the
    source's order, the ragged columns' longest rows and the named dims' sizes. At most
    ``2 * writers`` row groups wait. On an error, the parts written are deleted."""
    spec = spec_text(columns)
    names: list[tuple[str, int]] = []
    ahead: list[Future[None]] = []
    size = row_group_size

    def part(values: list[Any], n: int) -> None:
        name = f"part-{process:05d}-{len(names):05d}-{tag}.parquet"
        names.append((name, n))
        ahead.append(pool.submit(_write_file, where.join(name), pending.table(values, spec)))
        while len(ahead) > 2 * writers:
            ahead.pop(0).result()

    pending = _Columns(columns)
    with ThreadPoolExecutor(writers, thread_name_prefix="treekit-write") as pool:
        try:
            for pending in _rows(columns, spec_tree, source, chunks):
                if size is None and pending.rows:
                    size = max(1, GROUP_BYTES // pending.row_bytes())
                while size is not None and pending.rows >= size:
                    part(pending.take(size), size)
            if pending.rows or not names:  # (an empty dataset: one file with its schema)
                n = pending.rows
                part(pending.take(n), n)
            for future in ahead:
                future.result()
            _synced(where, [name for name, _ in names], pool)
        except BaseException:
            for future in ahead:
                future.cancel()
            wait(ahead)
            for name, _ in names:
                remove(where.join(name))
            raise
    return names, pending.longest, pending.sizes


def write_parquet(
    folder: Any,
    source: Any,
    *,
    spec: Any,
    chunks: bool = False,
    row_group_size: int | None = None,
    writers: int = 4,
    overwrite: bool = False,
    shard: str | None = None,
    filesystem: Any = None,
    storage_options: dict[str, Any] | None = None,
) -> int:
    """Write a dataset: the rows of ``source``, checked against ``spec``, as a folder of Parquet
    files that :func:`treekit.data.parquet` reads back with every dtype and shape known.

    >>> import tempfile
    >>> import numpy as np
    >>> from treekit import ShapeDtype
    >>> from treekit.data import batches, parquet
    >>> folder = tempfile.mkdtemp() + '/digits'
    >>> spec = {'image': ShapeDtype(('batch', 2, 2), 'u8'), 'tokens': ShapeDtype(('batch', None), 'i32')}
    >>> examples = [{'image': np.full((2, 2), i, np.uint8), 'tokens': np.arange(i % 3)} for i in range(6)]
    >>> write_parquet(folder, examples, spec=spec, row_group_size=4)
    6
    >>> batch = next(iter(batches(parquet(folder), 3)))
    >>> batch['image'].shape, batch['tokens'].tolist(), batch['tokens_len'].tolist()
    ((3, 2, 2), [[0, 0], [0, 0], [0, 1]], [0, 1, 2])

    Each leaf is a column (nested dicts' keys joined with ``.``): fixed dims (ints, and names,
    whose size the first row sets) as fixed-size lists, a ``None`` dim right after the rows
    (a ragged leaf) as a list column. The spec is stored as JSON in every file's schema metadata
    (never a pickle), and the dataset is committed by ``_treekit_dataset.json``, written last:
    it lists the part files and each ragged leaf's longest row, which reading pads to. Readers
    read the listed files only, so an unfinished write (no such file) is refused, and an
    overwrite shows the old rows or the new, never both.

    Args:
        folder: A path or URL (``s3://bucket/data``, any fsspec filesystem's) of a folder that is
            missing or empty (or, with ``overwrite=True``, holds Parquet data to replace).
        source: An iterable of examples: trees of ``spec``'s structure, each leaf one row (the
            spec's shape without its first dim). With ``chunks=True``, or a treekit.data source
            (:func:`~treekit.data.parquet`, :func:`~treekit.data.from_hf`, ...), chunks of rows
            instead: each leaf an array of rows, a ragged leaf a list of its rows' arrays.
        spec: A :class:`~treekit.ShapeDtype` or a dict of them (nested dicts of str keys): each
            shape's first dim the rows (a name or ``None``), then ints >= 1, names, or one
            ``None`` right after the rows; dtypes bool, ints, floats, or bfloat16, float8 and
            int4 (stored as their bits, read back as themselves). Values are cast to them
            where every value fits (an int64 1 to int8), else refused naming the row.
        chunks: The iterable's items are chunks of rows, not examples.
        row_group_size: Rows a row group holds (the unit a reader reads and shards); by
            default about 64 MiB of values. Each row group is a part file of its own.
        writers: Part files written at once, each in a thread (pyarrow encodes without the GIL)
            while the source is read; at most ``2 * writers`` row groups wait in memory.
        overwrite: Replace the data in ``folder``: the new rows are committed, then every other
            file there deleted. A folder holding anything but Parquet data, Spark's ``_SUCCESS``
            and other ``_``- or ``.``-prefixed files is refused either way.
        shard: ``'process'``: every process of the ``jax.distributed`` job calls this with its
            own rows; each writes its parts, and process 0 commits all of them once every
            process has written (an error in one is raised in all, and nothing is committed).
        filesystem: As :func:`~treekit.data.parquet` takes it.
        storage_options: As :func:`~treekit.data.parquet` takes them.

    Returns:
        The rows committed (every process's).

    Raises:
        ImportError: Without pyarrow (``pip install 'jax-treekit[parquet]'``).
        FileExistsError: If ``folder`` holds files and ``overwrite`` is false, or holds other
            files than Parquet data.
        ValueError: For a spec Parquet cannot hold so, or a row that does not fit it: naming the
            leaf's key path, the row and what was expected. Nothing is committed then.
        TimeoutError: With ``shard='process'``, if a process does not come.
    """
    from treekit.data._parquet import _pyarrow_parquet

    _pyarrow_parquet()
    columns = columns_of(spec)
    if row_group_size is not None and (type(row_group_size) is not int or row_group_size < 1):
        raise ValueError(f"row_group_size: expected an int >= 1 (rows), got {row_group_size!r}")
    if type(writers) is not int or writers < 1:
        raise ValueError(f"writers: expected an int >= 1, got {writers!r}")
    if shard not in (None, "process"):
        raise ValueError(f"shard: expected None or 'process', got {shard!r}")
    where = locate(folder, filesystem, storage_options, "folder")
    group = _group(where) if shard == "process" else None
    if group is None:
        old = _existing(where, overwrite)
        makedirs(where)
        tag = secrets.token_hex(6)
        files, longest, sizes = _write_parts(where, tag, 0, columns, spec, source, chunks, row_group_size, writers)
        _commit(where, files, longest, sizes, columns, old)
        return sum(n for _, n in files)
    return _write_together(group, where, overwrite, columns, spec, source, chunks, row_group_size, writers)


def _commit(where: Where, files: list[tuple[str, int]], longest: dict[str, int], sizes: dict[str, int],
            columns: list[Column], old: list[str]) -> None:
    """Write the manifest (the commit), then delete what the write replaced."""
    write_bytes(where.join(MANIFEST), manifest_text(files, longest, sizes, spec_text(columns)))
    kept = {name for name, _ in files} | {MANIFEST}
    for name in old:
        if name not in kept:
            entry = where.join(name)
            if not where.local or os.path.isdir(entry.path):
                remove_tree(entry)  # (remotely, a file or a prefix alike)
            else:
                remove(entry)


def _group(where: Where) -> Any:
    jax = sys.modules.get("jax")
    if jax is None or jax.process_count() == 1:
        return None
    from treekit.checkpoint import Group

    return Group(f"write_parquet {where}", kind="data-write")


def _write_together(group: Any, where: Where, overwrite: bool, columns: list[Column], spec: Any, source: Any,
                    chunks: bool, row_group_size: int | None, writers: int) -> int:
    """:func:`write_parquet` with ``shard='process'`` across the processes of ``group``."""
    start: dict[str, Any] = {}
    if group.me == 0:
        try:
            start = {"old": _existing(where, overwrite), "tag": secrets.token_hex(6)}
            makedirs(where)
        except Exception as exc:
            start = {"error": f"{type(exc).__name__}: {exc}"}
    start = json.loads(group.exchange("start", json.dumps(start).encode())[0])
    if "error" in start:
        raise FileExistsError(f"write_parquet (process 0): {start['error']}")
    mine: dict[str, Any]
    try:
        files, longest, sizes = _write_parts(where, start["tag"], group.me, columns, spec, source, chunks,
                                             row_group_size, writers)
        mine = {"files": files, "longest": longest, "sizes": sizes, "spec": spec_text(columns)}
    except Exception as exc:
        mine = {"error": f"{type(exc).__name__}: {exc}"}
        error: BaseException | None = exc
    else:
        error = None
    told = [json.loads(t) for t in group.exchange("written", json.dumps(mine).encode())]
    failed = [(p, t["error"]) for p, t in enumerate(told) if "error" in t]
    if not failed:
        specs = {t["spec"] for t in told}
        sizes_seen: dict[str, set[int]] = {}
        for t in told:
            for name, size in t["sizes"].items():
                sizes_seen.setdefault(name, set()).add(size)
        odd = {name: sorted(s) for name, s in sizes_seen.items() if len(s) > 1}
        if len(specs) > 1:
            failed = [(0, "ValueError: expected the same spec in every process, got different ones")]
        elif odd:
            failed = [(0, f"ValueError: expected each named dim's one size in every process, got {odd}")]
    if failed:
        if group.me == 0:
            for t in told:
                for name, _ in t.get("files", []):
                    remove(where.join(name))
        if error is not None:
            raise error
        p, text = failed[0]
        raise ValueError(f"write_parquet: process {p} failed, so nothing was committed: {text}")
    files = [tuple(f) for t in told for f in t["files"]]
    longest = {c.name: max(t["longest"].get(c.name, 0) for t in told) for c in columns if c.ragged}
    done = b"ok"
    if group.me == 0:
        try:
            all_sizes = {name: size for t in told for name, size in t["sizes"].items()}
            _commit(where, files, longest, all_sizes, columns, start["old"])
        except Exception as exc:
            done = f"{type(exc).__name__}: {exc}".encode()
            error = exc
    done = group.exchange("committed", done)[0]
    if error is not None:
        raise error
    if done != b"ok":
        raise OSError(f"write_parquet: process 0 could not commit: {done.decode(errors='replace')}")
    group.close()
    return sum(n for _, n in files)

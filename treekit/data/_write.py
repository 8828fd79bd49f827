"""Writing a dataset: the rows (``_rows.py``) as Parquet part files, a row group each, encoded in
threads, and committed by one small file written last (``_dataset.py``): several processes each
write their parts, and process 0 commits them together."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import sys
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

from treekit.core import printable
from treekit.data._dataset import (
    MANIFEST,
    MANIFEST_LIMIT,
    Column,
    columns_of,
    manifest_text,
    read_manifest,
    spec_text,
)
from treekit.data._rows import Rows, rows_of
from treekit.files import (
    Where,
    atomic_file,
    create_exclusive,
    find,
    fsync_folder,
    listdir,
    locate,
    makedirs,
    mode_for,
    read_bytes,
    remove,
    remove_tree,
    write_bytes,
    writing,
)

__all__ = ["write_parquet"]

GROUP_BYTES = 64 << 20  # the default row group: about this many bytes of values
# what a folder of Parquet data holds beside its data files (Spark's, pyarrow's, treekit's):
# an overwrite replaces a folder of these and .parquet, .crc and temporary .tmp files alone
_NOT_DATA = {MANIFEST, "_SUCCESS", "_metadata", "_common_metadata"}
_SPARK_MARKS = ("_committed_", "_started_")
_PART = re.compile(r"part-\d{5}-\d{5}-[0-9a-f]{12}\.parquet")  # (a write_parquet part)


def _existing(where: Where, overwrite: bool) -> list[str]:
    """The names in folder ``where`` that a write replaces (``[]`` for none or no folder).

    Raises:
        FileExistsError: If it holds anything and ``overwrite`` is false, or holds a file that
            is no Parquet data (a write replaces data, never a folder of other files: a file of
            another name than ``*.parquet``, Spark's and pyarrow's markers and checksums).
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
        if not (name.endswith((".parquet", ".crc", ".tmp")) or name in _NOT_DATA or name.startswith(_SPARK_MARKS)):
            raise FileExistsError(
                f"folder: expected a folder of Parquet data to replace, got {str(where)!r} holding "
                f"'{printable(file.path[len(where.path):].lstrip('/'))}'\nremove the folder by hand to write there"
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

    pending = Rows(columns)
    with ThreadPoolExecutor(writers, thread_name_prefix="treekit-write") as pool:
        try:
            for pending in rows_of(columns, spec_tree, source, chunks):
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
        spec: A dict of :class:`~treekit.ShapeDtype` (nested dicts of str keys; the keys name
            the columns): each shape's first dim the rows (a name or ``None``), then ints >= 1,
            names, or one ``None`` right after the rows; dtypes bool, ints, floats, or bfloat16, float8 and
            int4 (stored as their bits, read back as themselves). Values are cast to them
            where every value fits (an int64 1 to int8), else refused naming the row.
        chunks: The iterable's items are chunks of rows, not examples.
        row_group_size: Rows a row group holds (the unit a reader reads and shards); by
            default about 64 MiB of values. Each row group is a part file of its own.
        writers: Part files written at once, each in a thread (pyarrow encodes without the GIL)
            while the source is read; at most ``2 * writers`` row groups wait in memory.
        overwrite: Replace the data in ``folder``: the new rows are committed, then the files
            there before are deleted (but parts of another write not yet committed). A folder
            holding other files than ``.parquet``, ``.crc`` and temporary ``.tmp`` files and
            Spark's and pyarrow's markers (``_SUCCESS``, ``_metadata``) is refused either way.
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
    from treekit.data._parquet import pyarrow_parquet

    pyarrow_parquet()
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
        _commit(where, files, longest, sizes, columns, old, overwrite)
        return sum(n for _, n in files)
    return _write_together(group, where, overwrite, columns, spec, source, chunks, row_group_size, writers)


def _commit(where: Where, files: list[tuple[str, int]], longest: dict[str, int], sizes: dict[str, int],
            columns: list[Column], old: list[str], overwrite: bool) -> None:
    """Write the manifest (the commit), then delete what the write replaced: what was there
    when it began, but parts of another write not yet committed (a writer beside this one
    commits its own; a killed write's parts are never read)."""
    target = where.join(MANIFEST)
    listed = set()
    if MANIFEST in old:
        with contextlib.suppress(Exception):  # (the parts the manifest replaced lists, where it is readable)
            listed = {name for name, _ in read_manifest(read_bytes(target, MANIFEST_LIMIT), MANIFEST).files}
    text = manifest_text(files, longest, sizes, spec_text(columns))
    if overwrite or not where.local:
        write_bytes(target, text)
    else:  # (a writer beside this one into the same new folder: the first commit wins, never both)
        staged = f"{target.path}.{secrets.token_hex(6)}.new"
        with atomic_file(staged) as f:
            f.write(text)
        try:
            os.link(staged, target.path)
        except FileExistsError:  # (this write's parts are never read: deleted)
            for name, _ in files:
                remove(where.join(name))
            raise FileExistsError(
                f"folder: expected no other write into {str(where)!r} at once, got one committed first"
            ) from None
        finally:
            os.unlink(staged)
        fsync_folder(where.path)
    kept = {name for name, _ in files} | {MANIFEST}
    for name in old:
        if name in kept or (_PART.fullmatch(name) and name not in listed):
            continue
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
    began: BaseException | None = None
    if group.me == 0:
        try:
            start = {"old": _existing(where, overwrite), "tag": secrets.token_hex(6)}
            makedirs(where)
        except Exception as exc:
            start, began = {"error": f"{type(exc).__name__}: {exc}"}, exc
    start = json.loads(group.exchange("start", json.dumps(start).encode())[0])
    if began is not None:
        raise began
    if "error" in start:
        raise RuntimeError(f"write_parquet: process 0 could not begin, so nothing was written: {start['error']}")
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
            _commit(where, files, longest, all_sizes, columns, start["old"], overwrite)
        except Exception as exc:
            done = f"{type(exc).__name__}: {exc}".encode()
            error = exc
    done = group.exchange("committed", done)[0]
    group.barrier("read")  # (every process has read the keys close deletes)
    group.close()
    if error is not None:
        raise error
    if done != b"ok":
        raise OSError(f"write_parquet: process 0 could not commit: {done.decode(errors='replace')}")
    return sum(n for _, n in files)

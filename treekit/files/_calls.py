"""The calls checkpoints and data make on files, each for a local path (today's calls: mmap, fsync,
rename) or a remote one (fsspec: whole-object uploads, ranged reads, listings asked anew).

What is atomic where: a local file is written to a temporary file beside it and renamed over it
(:func:`treekit.files.atomic_file`); a remote one is uploaded as one object, which an object store
shows only once its upload has completed: whole or not at all. The bytes are written to a local
temporary file first, then uploaded by the filesystem's own ``put_file`` (s3fs sends the parts of
a multipart upload 10 at a time; a stream written as made would send them one after another:
1.4-1.7x s3fs's upload time against 1.1-1.3x, measured on a loopback S3 server). Object stores have no rename: what must
appear at once (a checkpoint step) is committed by writing a small object last.
"""

from __future__ import annotations

import contextlib
import glob as globbing
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import IO

from treekit.files._atomic import atomic_file
from treekit.files._remote import RangeFile, size
from treekit.files._where import Where

__all__ = [
    "file_size", "find", "glob", "listdir", "local_copy", "makedirs", "matches", "open_read",
    "read_bytes", "remove", "remove_tree", "write_bytes", "writing",
]


def open_read(where: Where) -> IO[bytes]:
    """``where`` opened for reading (binary, seekable); a remote file reads in ranged requests."""
    if where.local:
        return open(where.path, "rb")
    return RangeFile(where)  # type: ignore[return-value]


def file_size(where: Where) -> int:
    """The size of the file ``where``.

    Raises:
        FileNotFoundError: If there is no such file.
    """
    return os.path.getsize(where.path) if where.local else size(where)


@contextlib.contextmanager
def writing(where: Where) -> Iterator[IO[bytes]]:
    """A binary file to write ``where``'s new contents to; they replace ``where`` only when the
    block ends without an error (locally, :func:`atomic_file`; remotely, a local temporary file
    uploaded as one object, which the store shows once complete). An error leaves the old file,
    or none. The file is a real local one, seekable and mappable, either way.

    >>> from treekit.files import locate
    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     with writing(locate(os.path.join(d, 'f.bin'))) as f:
    ...         _ = f.write(b'new')
    ...     os.listdir(d)
    ['f.bin']
    """
    if where.local:
        with atomic_file(where.path) as f:
            yield f
        return
    folder = tempfile.mkdtemp(prefix="treekit-upload-")
    try:
        staged = os.path.join(folder, where.name or "file")
        with open(staged, "w+b") as f:
            yield f
        where.fs.put_file(staged, where.path)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def local_copy(where: Where, limit: int | None) -> Iterator[str]:
    """A local path holding the file ``where``: itself where local, else a temporary copy of the
    remote file (of at most ``limit`` bytes, checked before it is fetched), removed afterwards.

    Raises:
        ValueError: If the remote file is larger than ``limit``.
    """
    if where.local:
        yield where.path
        return
    n = size(where)
    if limit is not None and n > limit:
        raise ValueError(f"{where}: expected at most {limit:,} bytes to fetch, got a file of {n:,}")
    folder = tempfile.mkdtemp(prefix="treekit-fetch-")
    try:
        local = os.path.join(folder, where.name or "file")
        where.fs.get_file(where.path, local)
        yield local
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def write_bytes(where: Where, data: bytes) -> None:
    """``data`` as the whole file ``where``, atomically (one upload where remote)."""
    if where.local:
        with atomic_file(where.path) as f:
            f.write(data)
        return
    where.fs.pipe_file(where.path, data)


def read_bytes(where: Where, limit: int) -> bytes:
    """The whole file ``where``, which must hold at most ``limit`` bytes (checked first).

    Raises:
        ValueError: If it is larger.
    """
    with open_read(where) as f:
        n = f.seek(0, os.SEEK_END)
        if n > limit:
            raise ValueError(f"{where}: expected at most {limit:,} bytes, got {n:,}")
        f.seek(0)
        return f.read(limit + 1)[:limit]


def listdir(where: Where) -> list[str]:
    """The names in folder ``where`` (files and folders); ``[]`` for a folder that is missing
    (an object store has no empty folders)."""
    if where.local:
        return os.listdir(where.path)
    where.fs.invalidate_cache()
    try:
        paths = where.fs.ls(where.path, detail=False)
    except FileNotFoundError:
        return []
    return [p.rstrip("/").rsplit("/", 1)[-1] for p in paths]


def glob(where: Where, pattern: str) -> list[str]:
    """The paths below folder ``where`` that ``pattern`` (``/``-separated, ``*`` and ``?`` within a
    name) matches, relative to it and ``/``-separated, sorted (asked of the store now).

    >>> import os, tempfile
    >>> from treekit.files import locate
    >>> with tempfile.TemporaryDirectory() as d:
    ...     os.makedirs(os.path.join(d, 'step_1'))
    ...     open(os.path.join(d, 'step_1', 'step.json'), 'w').close()
    ...     glob(locate(d), 'step_*/step.json')
    ['step_1/step.json']
    """
    if where.local:
        base = where.path
        found = globbing.glob(os.path.join(globbing.escape(base), *pattern.split("/")))
        return sorted(os.path.relpath(p, base).replace(os.sep, "/") for p in found)
    where.fs.invalidate_cache()
    base = where.path.rstrip("/")
    found = where.fs.glob(f"{globbing.escape(base)}/{pattern}")
    return sorted(p[len(base) + 1 :] for p in found if p.startswith(base + "/"))


def matches(where: Where) -> list[tuple[Where, bool]]:
    """What ``where`` names, sorted: the files and folders its glob matches (``*``, ``?``, ``[``,
    ``**``), else itself; ``(match, is a file)`` each; ``[]`` if nothing is there."""
    if where.local:
        path = where.path
        found = sorted(globbing.glob(path, recursive=True)) if globbing.has_magic(path) else [path]
        return [(where.at(m), os.path.isfile(m)) for m in found if os.path.exists(m)]
    fs = where.fs
    fs.invalidate_cache()
    if globbing.has_magic(where.path):
        infos = fs.glob(where.path, detail=True)
    else:
        try:
            infos = {where.path: fs.info(where.path)}
        except FileNotFoundError:
            return []
    named = []
    for p, info in sorted(infos.items()):
        is_file = info.get("type") != "directory"
        at = where if p == where.path else where.at(p)
        named.append((replace(at, size=info.get("size")) if is_file else at, is_file))
    return named


def find(where: Where, skip: Callable[[str], bool]) -> list[Where]:
    """Every file below folder ``where`` whose path has no file or folder name ``skip`` is true
    of (those folders are not entered), in ``os.walk``'s order with sorted names: a folder's
    files, then each of its folders' files, depth first. Remote ones carry their ``size``."""
    if where.local:
        found = []
        for folder, dirs, files in os.walk(where.path):
            dirs[:] = sorted(d for d in dirs if not skip(d))
            found += [where.at(os.path.join(folder, f)) for f in sorted(files) if not skip(f)]
        return found
    base = where.path.rstrip("/") + "/"
    infos = where.fs.find(where.path, detail=True)
    rels = [p[len(base) :].split("/") for p in infos if p.startswith(base)]
    kept = [parts for parts in rels if not any(map(skip, parts))]
    kept.sort(key=lambda parts: [(k < len(parts) - 1, name) for k, name in enumerate(parts)])  # (os.walk's order)
    return [replace(where.join(*parts), size=infos[base + "/".join(parts)].get("size")) for parts in kept]


def makedirs(where: Where) -> None:
    """Folder ``where`` and those above it; remotely nothing (object stores have no folders,
    a key's prefix is one)."""
    if where.local:
        os.makedirs(where.path, exist_ok=True)


def remove(where: Where) -> None:
    """Delete the file ``where``, if it exists."""
    with contextlib.suppress(FileNotFoundError):
        if where.local:
            os.unlink(where.path)
        else:
            where.fs.rm_file(where.path)


def remove_tree(where: Where) -> None:
    """Delete folder ``where`` and everything below it, if it exists."""
    if where.local:
        shutil.rmtree(where.path, ignore_errors=True)
        return
    where.fs.invalidate_cache()
    with contextlib.suppress(FileNotFoundError):
        where.fs.rm(where.path, recursive=True)

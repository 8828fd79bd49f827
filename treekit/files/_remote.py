"""An object store's files read as treekit's readers need them: a seekable file whose reads are
ranged requests, and byte ranges fetched concurrently into their places.

Object stores answer each request after a round trip (milliseconds on a cloud's network), and one
connection gives a fraction of the link: a file is read in pieces of :data:`PIECE` bytes, up to
:data:`THREADS` at once, each copied straight into its place (never the whole file held twice).
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from treekit.files._where import Where

__all__ = ["PIECE", "THREADS", "RangeFile", "read_into", "size"]

PIECE = 1 << 25  # bytes per ranged read when fetching ranges (8 MB: 2x slower on the loopback S3 server)
THREADS = 16  # ranged reads in flight at once
_AHEAD = 1 << 16  # bytes a short read fetches (a safetensors header, a zip's directory: one request)


def size(where: Where) -> int:
    """The size of the remote file ``where``, asked of the store now (never a cached listing).

    Raises:
        FileNotFoundError: If there is no such file (a folder is no file).
    """
    fs = where.fs
    try:
        fs.invalidate_cache(where.path)
        info = fs.info(where.path)
    except FileNotFoundError:
        raise FileNotFoundError(f"{where}: expected a file, found none") from None
    if info.get("type") == "directory":
        raise IsADirectoryError(f"{where}: expected a file, got a folder")
    return int(info["size"])


class RangeFile(io.RawIOBase):
    """A remote file opened for reading: ``seek``, ``tell``, ``read`` and ``readinto`` as a local
    file's, each read one ranged request (a short one fetches :data:`_AHEAD` bytes and serves the
    next short reads from them).

    Its size is taken once, when it is opened: a file replaced meanwhile reads as the old size
    says, and a read past what the store then has is a ``ValueError``.
    """

    def __init__(self, where: Where) -> None:
        super().__init__()
        self.where, self.name = where, str(where)
        self.size = size(where)
        self.position = 0
        self.block, self.block_at = b"", 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self.position, os.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise ValueError(f"{self.name}: cannot seek to {base + offset}")
        self.position = base + offset
        return self.position

    def tell(self) -> int:
        return self.position

    def fileno(self) -> int:
        raise io.UnsupportedOperation(f"{self.name} is remote: it has no file descriptor (and no memory map)")

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        n = max(0, min(len(view), self.size - self.position))
        if n == 0:
            return 0
        at = self.position - self.block_at
        if not (0 <= at and at + n <= len(self.block)):
            if n >= _AHEAD:
                read_into(self.where, [(self.position, self.position + n, view[:n])])
                self.position += n
                return n
            end = min(self.size, self.position + _AHEAD)
            self.block, self.block_at, at = _fetch(self.where, self.position, end), self.position, 0
        view[:n] = self.block[at : at + n]
        self.position += n
        return n


def _fetch(where: Where, begin: int, end: int) -> bytes:
    if where.arrow is not None:  # (pyarrow's own reads; fsspec's wrapper of it reads whole files in some versions)
        with where.arrow.open_input_file(where.path) as f:
            data: bytes = bytes(f.read_at(end - begin, begin))
    else:
        data = where.fs.cat_file(where.path, start=begin, end=end)
    if len(data) != end - begin:
        raise ValueError(f"{where}: expected bytes [{begin}, {end}), got {len(data)} of them (the file changed?)")
    return data


def read_into(where: Where, ranges: Sequence[tuple[int, int, Any]]) -> None:
    """Fetch each ``(begin, end, target)`` of ``ranges`` (``target`` a writable buffer of
    ``end - begin`` bytes) from the remote file ``where``: pieces of :data:`PIECE` bytes, up to
    :data:`THREADS` requests at once, each copied into its place as it arrives.

    Raises:
        ValueError: If the file is shorter than a range (it changed since its size was read).
    """
    jobs = []
    for begin, end, target in ranges:
        view = memoryview(target).cast("B")
        jobs += [(at, min(end, at + PIECE), view[at - begin : min(end, at + PIECE) - begin])
                 for at in range(begin, end, PIECE)]  # fmt: skip

    def one(job: tuple[int, int, memoryview]) -> None:
        begin, end, view = job
        view[:] = _fetch(where, begin, end)

    if len(jobs) <= 1:
        for job in jobs:
            one(job)
        return
    with ThreadPoolExecutor(min(THREADS, len(jobs)), thread_name_prefix="treekit-fetch") as pool:
        for _ in pool.map(one, jobs):  # (the first error raised, once all requests are done)
            pass

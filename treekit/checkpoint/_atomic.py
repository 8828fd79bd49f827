"""A file written whole or not at all: a temporary file in the same folder, synced, then renamed
over the target; an error leaves the old file (or none) and no temporary file."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from typing import IO


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike[str]) -> Iterator[IO[bytes]]:
    """A binary file to write ``path``'s new contents to; they replace ``path`` only when the
    block ends without an error.

    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     name = os.path.join(d, 'f.bin')
    ...     with atomic_file(name) as f:
    ...         _ = f.write(b'new')
    ...     open(name, 'rb').read(), os.listdir(d)
    (b'new', ['f.bin'])
    """
    target = os.fspath(path)
    handle, temp = tempfile.mkstemp(
        dir=os.path.dirname(os.path.abspath(target)), prefix=f".{os.path.basename(target)}.", suffix=".tmp"
    )
    try:
        with os.fdopen(handle, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, target)
    except BaseException:
        os.unlink(temp)
        raise

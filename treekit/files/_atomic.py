"""A file written whole or not at all: a temporary file created exclusively in the same folder,
synced, given the mode a plain write would give, then renamed over the target and the folder
synced; an error leaves the old file (or none) and no temporary file, and a later save to the
same path removes what a killed one left."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
import stat
import tempfile
from collections.abc import Iterator
from typing import IO

__all__ = ["atomic_file", "create_exclusive", "fsync_folder", "mode_for"]

# whose temporary file this is: this host (hashed), then the writing process's id (taken at each
# save: a forked child is another writer), so a save removes only those left by processes of
# this host that are gone, never another host's or a live writer's
_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # (elsewhere: read by setting it; restored at once)
    os.umask(mask)
    return mask


def mode_for(target: str) -> int:
    """The permission bits a new ``target`` gets: those of the file it replaces, else what
    ``open(target, 'w')`` would give under the process's umask.

    >>> mode_for('/nonexistent/file') == 0o666 & ~_umask()
    True
    """
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        return 0o666 & ~_umask()


def fsync_folder(path: str) -> None:
    """Sync folder ``path``: a rename into it survives a crash."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def create_exclusive(path: str, mode: int) -> int:
    """A new file at ``path`` opened for writing (its descriptor), never through a link: a file
    or link already there is removed first, and one planted after that makes this fail."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # (a link itself, not what it points to)
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), mode)


def _remove_leftovers(folder: str, base: str) -> None:
    """Remove the temporary files of earlier saves to ``base`` by processes of this host that
    no longer run (a save killed mid-write)."""
    pattern = re.compile(re.escape(f".{base}.") + r"([0-9a-f]{8})-(\d+)-[^.]*\.tmp")
    for name in os.listdir(folder):
        match = pattern.fullmatch(name)
        if match is None or match.group(1) != _HOST or int(match.group(2)) == os.getpid():
            continue
        try:
            os.kill(int(match.group(2)), 0)
            continue  # (its writer still runs)
        except ProcessLookupError:
            pass
        except (PermissionError, OverflowError):
            continue
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(folder, name))


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
    folder, base = os.path.split(os.path.abspath(target))
    _remove_leftovers(folder, base)
    # mkstemp: O_EXCL | O_NOFOLLOW, an unpredictable name
    handle, temp = tempfile.mkstemp(dir=folder, prefix=f".{base}.{_HOST}-{os.getpid()}-", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as f:
            yield f
            f.flush()
            os.fchmod(f.fileno(), mode_for(target))
            os.fsync(f.fileno())
        os.replace(temp, target)
        fsync_folder(folder)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise

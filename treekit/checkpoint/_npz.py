"""Reading ``.npz`` files without unpickling: a pickle, or an array stored with pickle, is
refused (:class:`PickleRefused`), a file that is no zip told from a damaged one."""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Callable
from typing import IO, Any

from treekit.files import Where, locate, open_read

__all__ = [
    "INFLATION", "INFLATION_FLOOR", "NPY_MAGIC", "PICKLE_FILE", "PICKLE_WHY", "ZIP_HEADS", "PickleRefused",
    "check_members", "default_bound", "default_over", "file_head", "may_be_pickle", "npy_header", "read_npz",
]

ZIP_HEADS = (b"PK\x03\x04", b"PK\x05\x06")  # a zip file's first member, or an empty zip file
PICKLE_WHY = "unpickling runs code chosen by whoever wrote the file"
PICKLE_FILE = f"refusing to load a pickle file: {PICKLE_WHY}"


class PickleRefused(ValueError):
    """A file, or an array in it, that only unpickling could read; :func:`load` never unpickles.

    >>> import os, pickle, tempfile
    >>> from treekit import load
    >>> with tempfile.TemporaryDirectory() as d:
    ...     name = os.path.join(d, 'ckpt.npz')
    ...     with open(name, 'wb') as f:
    ...         pickle.dump({'w': 1}, f)
    ...     load(name)
    Traceback (most recent call last):
    ...
    treekit.PickleRefused: refusing to load a pickle file: unpickling runs code chosen by whoever wrote the file
    """

    __module__ = "treekit"  # tracebacks and reprs show the public name


def read_npz(path: str | os.PathLike[str] | Where, max_bytes: int | None = None) -> dict[str, Any]:
    """The arrays in the ``.npz`` file ``path``, by member name, read without pickle.

    Tells a file that is not a zip, or a damaged one (``not a valid .npz (zip) file: ...``)
    from a pickle, or an array stored with pickle (:class:`PickleRefused`). Before anything is
    allocated, each member's claims are checked against the file (:func:`check_members`), so
    memory follows the file's real size, not what it says: what the members inflate to is at
    most ``max_bytes``, or by default :func:`default_bound` (100x the file's size, at least
    256 MiB).

    Raises:
        PickleRefused: For a pickle, or an array stored with pickle.
        ValueError: For a file that is not a zip, or a damaged one, or a member whose claims
            the file cannot hold, or arrays over ``max_bytes``.
        OSError: If the file cannot be read.
    """
    import numpy as np

    where = path if isinstance(path, Where) else locate(path)
    with open_read(where) as f:
        return _read_npz(f, str(where), max_bytes, np)


INFLATION = 100  # what a .npz may inflate to by default: this many times its size...
INFLATION_FLOOR = 1 << 28  # ... or 256 MiB, whichever is more


def default_bound(size: int) -> int:
    """What the members of a ``.npz`` of ``size`` bytes may inflate to unless told otherwise:
    :data:`INFLATION` times its size, at least :data:`INFLATION_FLOOR` bytes. (A deflated member
    of zeros gives 1,000x its compressed bytes: a 1 MB file would otherwise make 1 GB.)

    >>> default_bound(1_000), default_bound(10_000_000)
    (268435456, 1000000000)
    """
    return max(INFLATION_FLOOR, INFLATION * size)


def default_over(size: int) -> Callable[[int], str]:
    """How a ``.npz`` of ``size`` bytes is over :func:`default_bound` (``check_members``'s ``over``)."""

    def over(bound: int) -> str:
        return (
            f"more than the default bound of {bound:,} ({INFLATION}x the file's {size:,} bytes, at least "
            f"{INFLATION_FLOOR:,}: a zip bomb?); pass max_bytes=N to read it anyway"
        )

    return over


def _read_npz(f: IO[bytes], p: str, max_bytes: int | None, np: Any) -> dict[str, Any]:
    head = f.read(4)
    if may_be_pickle(head):
        raise PickleRefused(PICKLE_FILE)
    if head not in ZIP_HEADS:
        raise ValueError("not a valid .npz (zip) file: it does not start as a zip file does")
    out: dict[str, Any] = {}
    try:
        with zipfile.ZipFile(f) as archive:
            try:
                size = f.seek(0, os.SEEK_END)
                if max_bytes is None:
                    check_members(archive, size, default_bound(size), over=default_over(size))
                else:
                    check_members(archive, size, max_bytes)
            except ValueError as exc:
                raise ValueError(f"{p}: {exc}") from None
        f.seek(0)
        with np.load(f, allow_pickle=False) as data:
            for key in data.files:
                try:
                    out[key] = data[key]
                except ValueError as exc:
                    if "allow_pickle" not in str(exc):
                        raise
                    raise PickleRefused(f"refusing to load array {key!r}, stored with pickle: {PICKLE_WHY}") from None
    except (zipfile.BadZipFile, EOFError, OSError) as exc:
        if isinstance(exc, (FileNotFoundError, PermissionError)):
            raise
        raise ValueError(f"not a valid .npz (zip) file: {exc}") from None
    return out


_RATIO = 1100  # deflate gives at most about 1032 bytes for each compressed byte
NPY_HEADER_LIMIT = 10_000  # numpy's own limit on headers it parses without allow_pickle
NPY_MAGIC = b"\x93NUMPY"


def _over(max_bytes: int) -> str:
    return f"more than max_bytes={max_bytes:,}"


def check_members(
    archive: zipfile.ZipFile,
    size: int,
    max_bytes: int | None,
    allow_pickle: bool = False,
    over: Callable[[int], str] = _over,
    advice: str = "",
) -> None:
    """Each member of ``archive`` (a file of ``size`` bytes) holds what it claims, read from the
    zip's directory and each ``.npy`` header alone: members lie inside the file, compressed ones
    claim no more than deflate can give, each array's shape and dtype fit its member; what the
    members inflate to is at most ``max_bytes`` (``over(max_bytes)`` says how it is over;
    ``advice`` ends the message on a long ``.npy`` header).

    >>> import io, zipfile
    >>> import numpy as np
    >>> buf = io.BytesIO()
    >>> np.savez(buf, w=np.zeros(1000))
    >>> check_members(zipfile.ZipFile(buf), len(buf.getvalue()), max_bytes=100)
    Traceback (most recent call last):
    ...
    ValueError: inflates to 8,128 bytes, more than max_bytes=100

    Raises:
        ValueError: Naming the array and what it claims.
    """
    members = archive.infolist()
    total = sum(info.file_size for info in members)
    if max_bytes is not None and total > max_bytes:
        raise ValueError(f"inflates to {total:,} bytes, {over(max_bytes)}")
    for info in members:
        key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
        if info.flag_bits & 0x1:
            raise ValueError(f"array {key!r}: expected a zip member as numpy writes it, got an encrypted one")
        if info.header_offset + info.compress_size > size:
            raise ValueError(f"array {key!r}: claims {info.compress_size:,} bytes past the file's end ({size:,} bytes)")
        if info.file_size > max(info.compress_size, 1) * _RATIO:
            raise ValueError(
                f"array {key!r}: expected at most {_RATIO}x its {info.compress_size:,} compressed bytes, "
                f"got a claim of {info.file_size:,} (a zip bomb?)"
            )
        try:
            with archive.open(info) as member:
                npy_header(member, f"array {key!r}: ", info.file_size, max_bytes, allow_pickle, over, advice)
        except (RuntimeError, NotImplementedError) as exc:  # zipfile's words for what it cannot read
            raise ValueError(f"array {key!r}: cannot read it from the zip file ({exc})") from exc


def npy_header(
    fp: IO[bytes],
    name: str,
    available: int,
    max_bytes: int | None,
    allow_pickle: bool,
    over: Callable[[int], str] = _over,
    advice: str = "",
) -> bool:
    """Check the ``.npy`` header at ``fp`` against the ``available`` bytes of the file (or zip
    member) and ``max_bytes``, without reading the data; return whether it holds objects.

    ``name`` starts each message (``"array 'w': "`` in a ``.npz``, ``""`` for a ``.npy`` file).
    Raises ValueError for a malformed header, a header that declares more data than the file
    has, an oversized header (unless ``allow_pickle``; ``advice`` ends that message) or an array
    over the limit (``over(max_bytes)`` says how it is over).

    >>> import io
    >>> import numpy as np
    >>> buf = io.BytesIO()
    >>> np.save(buf, np.zeros(3))
    >>> size = buf.tell()
    >>> _ = buf.seek(0)
    >>> npy_header(buf, '', size, None, False)  # (no objects: not pickled)
    False
    >>> npy_header(io.BytesIO(buf.getvalue()[:100]), 'w: ', 100, None, False)
    Traceback (most recent call last):
    ...
    ValueError: w: expected a .npy header of 118 bytes, got 90 (truncated file)
    """
    import numpy as np
    from numpy.lib import format as npy

    start = fp.read(8)
    if len(start) < 8 or not start.startswith(NPY_MAGIC):
        raise ValueError(f"{name}expected a .npy header starting with {NPY_MAGIC!r}, got {start[:6]!r}")
    major = start[6]
    width = 2 if major == 1 else 4
    if major not in (1, 2, 3):
        raise ValueError(f"{name}expected .npy format version 1, 2 or 3, got {major}.{start[7]}")
    size_bytes = fp.read(width)
    header_len = int.from_bytes(size_bytes, "little")
    if header_len > NPY_HEADER_LIMIT and not allow_pickle:
        raise ValueError(
            f"{name}expected a .npy header of at most {NPY_HEADER_LIMIT:,} bytes, got {header_len:,} bytes "
            f"(a header this long is slow to parse safely{advice})"
        )
    text = fp.read(header_len)
    if len(text) < header_len:
        raise ValueError(f"{name}expected a .npy header of {header_len:,} bytes, got {len(text):,} (truncated file)")

    reader = npy.read_array_header_1_0 if major == 1 else npy.read_array_header_2_0
    fake = io.BytesIO(size_bytes + text)
    try:
        shape, _, dtype = reader(fake, max_header_size=max(header_len + 1, NPY_HEADER_LIMIT))
    except (ValueError, SyntaxError, TypeError) as exc:
        raise ValueError(f"{name}expected a .npy header, got one numpy cannot read ({exc})") from None
    if dtype.hasobject:  # stored with pickle: no size to check; the caller refuses or unpickles
        return True
    if any(dim < 0 for dim in shape):
        raise ValueError(f"{name}expected a .npy header whose shape has sizes >= 0, got shape {shape}")
    count = 1
    for dim in shape:
        count *= dim
    nbytes = count * dtype.itemsize
    data = available - (8 + width + header_len)
    if nbytes > data:
        raise ValueError(
            f"{name}expected {nbytes:,} bytes of data for shape {shape} {np.dtype(dtype).name}, "
            f"got {max(data, 0):,} (a truncated or corrupt file)"
        )
    if max_bytes is not None and nbytes > max_bytes:
        raise ValueError(f"{name}array of {nbytes:,} bytes, {over(max_bytes)}")
    return False


def file_head(path: str | os.PathLike[str] | Where) -> bytes:
    """The first 4 bytes of a file (local, or remote: one ranged request)."""
    with open_read(path if isinstance(path, Where) else locate(path)) as f:
        return f.read(4)


def may_be_pickle(head: bytes) -> bool:
    """Whether a file starting with ``head`` may be a pickle (protocol 2 or later: 0x80). A
    safetensors file may start so too (its header length's low byte): it is read as one first."""
    return head[:1] == b"\x80"

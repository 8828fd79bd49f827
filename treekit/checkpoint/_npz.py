"""Reading ``.npz`` files without unpickling: a pickle, or an array stored with pickle, is
refused (:class:`PickleRefused`), a file that is no zip told from a damaged one."""

from __future__ import annotations

import ast
import math
import os
import zipfile
from typing import Any

__all__ = [
    "PICKLE_FILE", "PICKLE_WHY", "ZIP_HEADS", "PickleRefused", "check_members", "file_head", "may_be_pickle", "read_npz"
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


def read_npz(path: str | os.PathLike[str], max_bytes: int | None = None) -> dict[str, Any]:
    """The arrays in the ``.npz`` file ``path``, by member name, read without pickle.

    Tells a file that is not a zip, or a damaged one (``not a valid .npz (zip) file: ...``)
    from a pickle, or an array stored with pickle (:class:`PickleRefused`). Before anything is
    allocated, each member's claims are checked against the file (:func:`check_members`), so
    memory follows the file's real size, not what it says.

    Raises:
        PickleRefused: For a pickle, or an array stored with pickle.
        ValueError: For a file that is not a zip, or a damaged one, or a member whose claims
            the file cannot hold, or arrays over ``max_bytes``.
        OSError: If the file cannot be read.
    """
    import numpy as np

    head = file_head(path)
    if may_be_pickle(head):
        raise PickleRefused(PICKLE_FILE)
    if head not in ZIP_HEADS:
        raise ValueError("not a valid .npz (zip) file: it does not start as a zip file does")
    out: dict[str, Any] = {}
    try:
        with zipfile.ZipFile(path) as archive:
            try:
                check_members(archive, os.path.getsize(path), max_bytes)
            except ValueError as exc:
                raise ValueError(f"{os.fspath(path)}: {exc}") from None
        with np.load(path, allow_pickle=False) as data:
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
_NPY_HEADER = 1 << 20  # bytes at most of a member's .npy header (numpy's writer makes < 10,000)


def check_members(archive: zipfile.ZipFile, size: int, max_bytes: int | None) -> None:
    """Each member of ``archive`` (a file of ``size`` bytes) holds what it claims: stored
    members lie inside the file, compressed ones claim no more than deflate can give, and each
    ``.npy`` member's header (shape and dtype) matches its size; the arrays hold at most
    ``max_bytes`` in all.

    Raises:
        ValueError: Naming the member and what it claims.
    """
    import numpy as np

    total = 0
    for info in archive.infolist():
        name, claimed = info.filename, info.file_size
        if info.header_offset + info.compress_size > size:
            raise ValueError(f"member {name!r}: claims {info.compress_size} bytes past the file's end ({size} bytes)")
        if claimed > max(info.compress_size, 1) * _RATIO:
            raise ValueError(
                f"member {name!r}: expected at most {_RATIO}x its {info.compress_size} compressed bytes, "
                f"got a claim of {claimed} (a zip bomb?)"
            )
        total += claimed
        if max_bytes is not None and total > max_bytes:
            raise ValueError(f"expected at most max_bytes={max_bytes} bytes of arrays, got {total} or more")
        if not name.endswith(".npy"):
            continue
        with archive.open(info) as f:
            start = f.read(8)
            if start[:6] != b"\x93NUMPY" or start[6:7] not in (b"\x01", b"\x02", b"\x03"):
                continue  # (not an .npy: numpy says what it is)
            width = 2 if start[6] == 1 else 4
            length = int.from_bytes(f.read(width), "little")
            if length > _NPY_HEADER:
                raise ValueError(f"member {name!r}: expected an .npy header under {_NPY_HEADER} bytes, got {length}")
            text = f.read(length).decode("utf-8" if start[6] == 3 else "latin1", "replace")
        try:
            header = ast.literal_eval(text)
            shape, dtype = tuple(header["shape"]), np.lib.format.descr_to_dtype(header["descr"])
            if not all(type(n) is int and n >= 0 for n in shape):
                raise ValueError
        except Exception:
            raise ValueError(f"member {name!r}: expected an .npy header (descr, shape), got {text!r:.80}") from None
        if dtype.hasobject:
            continue  # (stored with pickle: refused when read)
        data = math.prod(shape) * dtype.itemsize
        if 8 + width + length + data != claimed:
            raise ValueError(
                f"member {name!r}: expected {data} bytes of data for shape {shape} of {dtype}, "
                f"got {claimed - 8 - width - length}"
            )


def file_head(path: str | os.PathLike[str]) -> bytes:
    """The first 4 bytes of a file."""
    with open(path, "rb") as f:
        return f.read(4)


def may_be_pickle(head: bytes) -> bool:
    """Whether a file starting with ``head`` may be a pickle (protocol 2 or later: 0x80). A
    safetensors file may start so too (its header length's low byte): it is read as one first."""
    return head[:1] == b"\x80"

"""Reading ``.npz`` files without unpickling: a pickle, or an array stored with pickle, is
refused (:class:`PickleRefused`), a file that is no zip told from a damaged one."""

from __future__ import annotations

import os
import zipfile
from typing import Any

__all__ = ["PICKLE_FILE", "PICKLE_WHY", "ZIP_HEADS", "PickleRefused", "file_head", "may_be_pickle", "read_npz"]

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


def read_npz(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The arrays in the ``.npz`` file ``path``, by member name, read without pickle.

    Tells a file that is not a zip, or a damaged one (``not a valid .npz (zip) file: ...``)
    from a pickle, or an array stored with pickle (:class:`PickleRefused`).

    Raises:
        PickleRefused: For a pickle, or an array stored with pickle.
        ValueError: For a file that is not a zip, or a damaged one.
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


def file_head(path: str | os.PathLike[str]) -> bytes:
    """The first 4 bytes of a file."""
    with open(path, "rb") as f:
        return f.read(4)


def may_be_pickle(head: bytes) -> bool:
    """Whether a file starting with ``head`` may be a pickle (protocol 2 or later: 0x80). A
    safetensors file may start so too (its header length's low byte): it is read as one first."""
    return head[:1] == b"\x80"

"""The pyarrow filesystem a :class:`~treekit.files.Where` is read through (Parquet): pyarrow's own
S3 and GCS classes where the caller gave only a URL (their reads are pyarrow's, without Python in
the way), the pyarrow filesystem the caller gave, or the fsspec one wrapped for pyarrow."""

from __future__ import annotations

import os
from typing import Any

from treekit.files._where import Where, scheme_of

__all__ = ["arrow_filesystem"]

_NATIVE = {"s3": "s3", "s3a": "s3", "gs": "gs", "gcs": "gs"}  # schemes pyarrow opens itself


def arrow_filesystem(where: Where, made: dict[Any, Any] | None = None) -> tuple[Any, str]:
    """``(pyarrow filesystem, path on it)`` for ``where``; ``made`` keeps the filesystems made for
    earlier calls (by scheme and bucket), for the files of one dataset to share one.

    >>> fs, path = arrow_filesystem(Where('data', None, 'data'))
    >>> type(fs).__name__, os.path.isabs(path)
    ('LocalFileSystem', True)
    """
    import pyarrow.fs as pafs

    if where.local:
        return pafs.LocalFileSystem(), os.path.abspath(where.path)
    if where.arrow is not None:
        return where.arrow, where.path
    scheme = scheme_of(where.shown)
    if scheme in _NATIVE and where.native:
        path = where.path.lstrip("/")
        key = (_NATIVE[scheme], path.split("/")[0])
        if made is None or key not in made:
            fs = pafs.FileSystem.from_uri(f"{_NATIVE[scheme]}://{path}")[0]
            if made is None:
                return fs, path
            made[key] = fs
        return made[key], path
    return pafs.PyFileSystem(pafs.FSSpecHandler(where.fs)), where.path

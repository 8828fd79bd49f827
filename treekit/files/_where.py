"""Where a file is: a local path, or a path on an fsspec filesystem (an object store's URL such as
``s3://bucket/run``, ``gs://bucket/run``, ``memory://run``, or any path with ``filesystem=``).

A string that starts with ``scheme://`` is never taken for a local path: ``file://`` names a local
one, any other scheme is opened through fsspec (the ``remote`` extra), and a scheme nothing here
opens is a ``ValueError`` naming it and the extra to install.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

__all__ = ["EXTRA", "MissingExtra", "Where", "locate", "scheme_of"]

EXTRA = "pip install 'jax-treekit[remote]'"
_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*)://")


class MissingExtra(ImportError, ValueError):
    """A URL that treekit opens only with a package that is not installed (fsspec, s3fs, gcsfs):
    an ``ImportError`` (a package is missing) and a ``ValueError`` (the path cannot be opened).

    >>> issubclass(MissingExtra, ImportError) and issubclass(MissingExtra, ValueError)
    True
    """

    __module__ = "treekit"


@dataclass(frozen=True)
class Where:
    """A file or folder: ``path`` on ``fs`` (an fsspec filesystem), or on the local disk where
    ``fs`` is ``None``; ``shown`` is how messages name it (the URL or path as the caller wrote it);
    ``arrow`` is the pyarrow filesystem the caller gave, if any; ``native``: pyarrow may open the
    URL with its own classes (no ``storage_options`` were given, which only fsspec's take);
    ``size``: the file's size where a listing gave it (a reader then need not ask).

    >>> Where('/tmp/run', None, '/tmp/run').join('step_1', 'step.json').path
    '/tmp/run/step_1/step.json'
    """

    path: str
    fs: Any
    shown: str
    arrow: Any = None
    native: bool = False
    size: int | None = None

    @property
    def local(self) -> bool:
        """On the local disk (read with today's calls: mmap, fsync, rename)."""
        return self.fs is None

    def join(self, *names: str) -> Where:
        """The file or folder ``names`` below this one."""
        if self.fs is None:
            path = os.path.join(self.path, *names)
            return Where(path, None, path)
        return replace(self, path=posixpath.join(self.path, *names), shown=posixpath.join(self.shown, *names))

    def sibling(self, name: str) -> Where:
        """The file ``name`` in this file's folder."""
        if self.fs is None:
            path = os.path.join(os.path.dirname(os.path.abspath(self.path)), name)
            return Where(path, None, path)
        path, shown = (posixpath.join(p.rstrip("/").rpartition("/")[0], name) for p in (self.path, self.shown))
        return replace(self, path=path, shown=shown)

    def at(self, path: str) -> Where:
        """Another path on the same filesystem (as its listings give them: no scheme)."""
        if self.fs is None:
            return Where(path, None, path)
        shown = path
        scheme = scheme_of(self.shown)
        if scheme is not None and scheme_of(path) is None:
            shown = f"{scheme}://{path.lstrip('/')}"
        return replace(self, path=path, shown=shown)

    @property
    def name(self) -> str:
        """The last part of the path."""
        if self.fs is None:
            return os.path.basename(self.path)
        return posixpath.basename(self.path.rstrip("/"))

    def __str__(self) -> str:
        return self.shown


def scheme_of(path: str) -> str | None:
    """The scheme of a URL (lower case), ``None`` for anything else.

    >>> scheme_of('S3://bucket/key'), scheme_of('/data/run'), scheme_of('C:/data')
    ('s3', None, None)
    """
    match = _URL.match(path)
    return match.group(1).lower() if match else None


def _fsspec(scheme: str, shown: str) -> Any:
    try:
        import fsspec
    except ImportError as exc:
        raise MissingExtra(f"{shown}: opening {scheme}:// URLs needs fsspec: {EXTRA}") from exc
    try:
        fsspec.get_filesystem_class(scheme)
    except ValueError:
        raise ValueError(
            f"{shown}: expected a local path or a URL fsspec opens, got scheme {scheme!r}, which no installed "
            f"package registers (s3:// and gs:// need {EXTRA}; others their fsspec package)"
        ) from None
    except ImportError as exc:
        raise MissingExtra(f"{shown}: opening {scheme}:// URLs needs a package not installed ({exc}): {EXTRA}") from exc
    return fsspec


def locate(
    path: str | os.PathLike[str] | Where,
    filesystem: Any = None,
    storage_options: Mapping[str, Any] | None = None,
    label: str = "path",
) -> Where:
    """Where ``path`` is: on ``filesystem`` (a pyarrow or fsspec filesystem) if given, else on the
    filesystem its URL's scheme names (``storage_options`` passed to it: credentials, endpoints),
    else the local disk.

    >>> locate('run/ckpt').local, locate('file:///tmp/run').path
    (True, '/tmp/run')

    Raises:
        MissingExtra: For a URL whose filesystem needs a package that is not installed.
        ValueError: For a scheme no installed package opens, or ``storage_options`` without a URL.
        TypeError: For a ``filesystem`` that is neither pyarrow's nor fsspec's.
    """
    if isinstance(path, Where):
        return path
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{label}: expected a path or URL string, got {type(path).__name__}")
    shown = os.fspath(path)
    scheme = scheme_of(shown) if isinstance(shown, str) else None
    if filesystem is not None:
        return _given(shown, filesystem, storage_options, label)
    if scheme is None or scheme == "file":
        if storage_options:
            raise ValueError(f"storage_options: expected a URL (s3://...) or filesystem= with them, got {shown!r}")
        local = shown[len("file://") :] if scheme == "file" else shown
        return Where(local, None, local)
    fsspec = _fsspec(scheme, shown)
    try:
        fs = fsspec.filesystem(scheme, **dict(storage_options or {}))
    except ImportError as exc:
        raise MissingExtra(f"{shown}: opening {scheme}:// URLs needs a package not installed ({exc}): {EXTRA}") from exc
    return Where(fs._strip_protocol(shown), fs, shown, native=not storage_options)


def _given(shown: str, filesystem: Any, storage_options: Mapping[str, Any] | None, label: str) -> Where:
    """``shown`` on the filesystem the caller gave (a pyarrow one wrapped for fsspec's calls)."""
    if storage_options:
        raise ValueError("storage_options: expected them with a URL, not with filesystem= (configure it instead)")
    arrow = None
    if type(filesystem).__module__.startswith("pyarrow") and hasattr(filesystem, "get_file_info"):
        arrow = filesystem
        try:
            from fsspec.implementations.arrow import ArrowFSWrapper
        except ImportError as exc:
            raise MissingExtra(f"filesystem: a pyarrow filesystem is read through fsspec: {EXTRA}") from exc
        filesystem = ArrowFSWrapper(arrow)
    if not all(hasattr(filesystem, name) for name in ("cat_file", "ls", "info")):
        raise TypeError(f"filesystem: expected a pyarrow or fsspec filesystem, got {type(filesystem).__name__}")
    protocols = filesystem.protocol if isinstance(filesystem.protocol, tuple) else (filesystem.protocol,)
    if "file" in protocols and arrow is None:  # (fsspec's LocalFileSystem: the local disk, today's calls)
        return locate(shown, label=label)
    scheme = scheme_of(shown)
    if scheme is not None and scheme not in protocols and arrow is None:
        raise ValueError(f"{label}: expected a path on filesystem {type(filesystem).__name__}, got URL {shown!r}")
    return Where(filesystem._strip_protocol(shown) if arrow is None else shown.split("://")[-1], filesystem, shown,
                 arrow)  # fmt: skip

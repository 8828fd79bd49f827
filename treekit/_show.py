"""``treekit show FILE``: load a tree from .npz, .npy or .json and print its summary.

Nothing in a file is trusted: sizes are checked before anything is inflated or allocated
(zip members' declared sizes, the shape and dtype in each ``.npy`` header), ``.npy`` files are
memory-mapped rather than read, and pickles are refused unless asked for.
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path
from typing import IO, Any, TextIO

from treekit._describe import dtype_name
from treekit._summary import Row, _rows, _size_bytes, summary
from treekit._traverse import flatten
from treekit.params import unflatten_dict

__all__ = ["DEFAULT_MAX_BYTES", "load_tree", "show", "summary_json"]

DEFAULT_MAX_BYTES = 1 << 30
"""What ``show`` inflates or reads at most (1 GiB) unless told otherwise (``--max-bytes``)."""

_PICKLE_WHY = "unpickling runs code chosen by whoever wrote the file; pass --allow-pickle only for files you trust"
_PICKLE_SUFFIXES = (".pkl", ".pickle", ".pck", ".pt", ".pth")
_NPY_HEADER_LIMIT = 10_000  # numpy's own limit on headers it parses without allow_pickle
_NPY_MAGIC = b"\x93NUMPY"


def _limit_hint(max_bytes: int) -> str:
    return f"more than --max-bytes {max_bytes:,}; pass --max-bytes N or --no-limit to read it anyway"


def _npy_header(fp: IO[bytes], name: str, available: int, max_bytes: int | None, allow_pickle: bool) -> bool:
    """Check the ``.npy`` header at ``fp`` against the ``available`` bytes of the file (or zip
    member) and ``max_bytes``, without reading the data; return whether it holds objects.

    ``name`` starts each message (``"array 'w': "`` in a ``.npz``, ``""`` for a ``.npy`` file).
    Raises ValueError for a malformed header, a header that declares more data than the file
    has, an oversized header (unless ``allow_pickle``) or an array over the limit.
    """
    import numpy as np
    from numpy.lib import format as npy

    start = fp.read(8)
    if len(start) < 8 or not start.startswith(_NPY_MAGIC):
        raise ValueError(f"{name}expected a .npy header starting with {_NPY_MAGIC!r}, got {start[:6]!r}")
    major = start[6]
    width = 2 if major == 1 else 4
    if major not in (1, 2, 3):
        raise ValueError(f"{name}expected .npy format version 1, 2 or 3, got {major}.{start[7]}")
    size_bytes = fp.read(width)
    header_len = int.from_bytes(size_bytes, "little")
    if header_len > _NPY_HEADER_LIMIT and not allow_pickle:
        raise ValueError(
            f"{name}expected a .npy header of at most {_NPY_HEADER_LIMIT:,} bytes, got {header_len:,} bytes "
            "(a header this long is slow to parse safely; pass --allow-pickle only for files you trust)"
        )
    text = fp.read(header_len)
    if len(text) < header_len:
        raise ValueError(f"{name}expected a .npy header of {header_len:,} bytes, got {len(text):,} (truncated file)")
    import io

    reader = npy.read_array_header_1_0 if major == 1 else npy.read_array_header_2_0
    fake = io.BytesIO(size_bytes + text)
    try:
        shape, _, dtype = reader(fake, max_header_size=max(header_len + 1, _NPY_HEADER_LIMIT))
    except (ValueError, SyntaxError, TypeError) as exc:
        raise ValueError(f"{name}expected a .npy header, got one numpy cannot read ({exc})") from None
    if dtype.hasobject:  # stored with pickle: no size to check; the caller refuses or unpickles
        return True
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
        raise ValueError(f"{name}array of {nbytes:,} bytes, {_limit_hint(max_bytes)}")
    return False


def _check_npz(path: Path, max_bytes: int | None, allow_pickle: bool) -> None:
    """Check every member's declared size (what it inflates to) and ``.npy`` header first."""
    with zipfile.ZipFile(path) as archive:
        members = archive.infolist()
        total = sum(info.file_size for info in members)
        if max_bytes is not None and total > max_bytes:
            raise ValueError(f"inflates to {total:,} bytes, {_limit_hint(max_bytes)}")
        for info in members:
            key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            with archive.open(info) as member:
                _npy_header(member, f"array {key!r}: ", info.file_size, max_bytes, allow_pickle)


def load_tree(path: str | Path, *, allow_pickle: bool = False, max_bytes: int | None = DEFAULT_MAX_BYTES) -> Any:
    """The tree stored in ``path``: ``.npz`` (as :func:`treekit.load` reads it), ``.npy``, ``.json``.

    Pickle files (by suffix or content) and arrays stored with pickle are refused unless
    ``allow_pickle``: unpickling runs code from the file. A ``.npy`` file comes back
    memory-mapped (read only): nothing is read until used.

    >>> import json, tempfile, os
    >>> with tempfile.TemporaryDirectory() as d:
    ...     name = os.path.join(d, 'tree.json')
    ...     with open(name, 'w') as f:
    ...         json.dump({'lr': 0.1, 'layers': [1, 2]}, f)
    ...     load_tree(name)
    {'lr': 0.1, 'layers': [1, 2]}

    Args:
        path: The file.
        allow_pickle: Also load pickles (this runs code from the file).
        max_bytes: The most bytes a ``.npz`` may inflate to or a ``.json`` file may hold;
            ``None`` for no limit. Checked before anything is read.

    Raises:
        ValueError: For a pickle without ``allow_pickle``, an unknown suffix, a file over
            ``max_bytes``, a malformed or truncated ``.npy`` header, a ``.npz`` that is not a
            valid zip file, JSON nested deeper than Python's parser goes, or ``.npz`` keys that
            are both an array and a group (``'a'`` and ``'a/b'``).
        OSError: If the file cannot be read.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    with path.open("rb") as f:
        pickled = f.read(1) == b"\x80"  # every pickle protocol >= 2 starts so
    if suffix in _PICKLE_SUFFIXES or (pickled and suffix not in (".npz", ".npy")):
        if not allow_pickle:
            raise ValueError(f"refusing to load a pickle file: {_PICKLE_WHY}")
        import pickle

        with path.open("rb") as f:
            return pickle.load(f)
    if suffix == ".json":
        size = path.stat().st_size
        if max_bytes is not None and size > max_bytes:
            raise ValueError(f"a JSON file of {size:,} bytes, {_limit_hint(max_bytes)}")
        with path.open(encoding="utf-8") as f:
            try:
                return json.load(f)
            except RecursionError:
                limit = sys.getrecursionlimit()
                raise ValueError(
                    f"expected JSON nested less than about {limit:,} levels deep (Python's json parser "
                    "recurses), got deeper"
                ) from None
    if suffix not in (".npz", ".npy"):
        got = repr(suffix) if suffix else "no suffix"
        raise ValueError(f"expected a .npz, .npy or .json file (or a pickle, with --allow-pickle), got {got}")
    import numpy as np

    if suffix == ".npy":
        with path.open("rb") as f:
            # memory-mapped: nothing is read, so only the header's honesty matters, not the size
            objects = _npy_header(f, "", path.stat().st_size, None, allow_pickle)
        if objects and not allow_pickle:
            raise ValueError(f"refusing to load a pickled array: {_PICKLE_WHY}")
        return np.load(path, allow_pickle=True) if objects else np.load(path, mmap_mode="r")
    from treekit._io import PickleRefused, load

    if zipfile.is_zipfile(path):  # else load() says what it is: a pickle, or not a zip
        _check_npz(path, max_bytes, allow_pickle)
    try:
        return load(path)  # treekit.save's files, and any .npz without pickles
    except PickleRefused as exc:
        if not allow_pickle:
            raise ValueError(f"{exc}; pass --allow-pickle only for files you trust") from None
    data = np.load(path, allow_pickle=True)
    if not isinstance(data, np.lib.npyio.NpzFile):
        return data  # a pickle named .npz
    with data:
        return unflatten_dict({key: data[key] for key in data.files})


def summary_json(tree: Any, depth: int | None = None) -> dict[str, Any]:
    """The rows of :func:`treekit.summary` as JSON-ready data (what ``show --json`` prints).

    Each row has its ``path`` and the number of ``leaves`` and ``arrays``, the ``size`` and
    ``bytes`` under it; a row of one leaf also its ``type``, ``shape`` and ``dtype`` (``None``
    for a leaf that is not an array). ``depth`` groups rows as ``summary(tree, depth=...)``;
    ``total`` has the counts over the whole tree.

    >>> import numpy as np
    >>> summary_json({'w': np.zeros((2, 3), np.float32), 'step': 7})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'rows': [{'path': "['step']", 'leaves': 1, 'arrays': 0, 'size': None, 'bytes': None,
               'type': 'int', 'shape': None, 'dtype': None},
              {'path': "['w']", 'leaves': 1, 'arrays': 1, 'size': 6, 'bytes': 24,
               'type': 'ndarray', 'shape': [2, 3], 'dtype': 'float32'}],
     'total': {'leaves': 2, 'arrays': 1, 'size': 6, 'bytes': 24}}
    >>> summary_json({'a': {'x': np.zeros(2), 'y': 1}, 'b': np.zeros(3)}, depth=1)['rows'][0]
    {'path': "['a']", 'leaves': 2, 'arrays': 1, 'size': 2, 'bytes': 16}
    """
    leaves, _, paths = flatten(tree, with_path=True)
    assert paths is not None
    rows = [*_rows(leaves, paths, depth), Row("total", leaves, grouped=True, total=True)]
    *out, total = [_row_json(row) for row in rows]
    del total["path"]
    return {"rows": out, "total": total}


def _row_json(row: Row) -> dict[str, Any]:
    arrays = row.arrays
    sizes = [_size_bytes(x) for x in arrays]
    data: dict[str, Any] = {"path": row.name, "leaves": len(row.leaves), "arrays": len(arrays)}
    if not row.grouped:
        x = row.leaves[0]
        size, nbytes = sizes[0] if sizes else (None, None)
        shape, dtype = (list(x.shape), dtype_name(x.dtype)) if arrays else (None, None)
        return {**data, "size": size, "bytes": nbytes, "type": type(x).__name__, "shape": shape, "dtype": dtype}
    return {**data, "size": sum(s or 0 for s, _ in sizes), "bytes": sum(b or 0 for _, b in sizes)}


def show(
    path: str,
    *,
    allow_pickle: bool = False,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
    as_json: bool = False,
    depth: int | None = None,
    prog: str = "treekit",
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Print the :func:`treekit.summary` of the tree in ``path``; return the exit status.

    ``as_json`` prints :func:`summary_json` instead; ``depth`` collapses each subtree at that
    depth into one row of subtotals (``summary(tree, depth=...)``). A file that cannot be read or
    is refused gets one line on ``err`` and status 1. See :func:`load_tree` for the rest.

    >>> import numpy as np, tempfile, os
    >>> with tempfile.TemporaryDirectory() as d:
    ...     name = os.path.join(d, 'ckpt.npz')
    ...     np.savez(name, **{'dense/w': np.zeros((2, 3), np.float32), 'dense/b': np.zeros(3, np.float32)})
    ...     show(name)
    path            shape   dtype    size  bytes
    ['dense']['b']  (3,)    float32     3     12
    ['dense']['w']  (2, 3)  float32     6     24
    total           2 arrays            9     36
    0
    """
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    try:
        tree = load_tree(path, allow_pickle=allow_pickle, max_bytes=max_bytes)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
        message = _one_line(exc).removeprefix(f"{path}: ")  # treekit.load's messages start with it
        print(f"{prog} show: {path}: {message}", file=err)
        return 1
    except MemoryError:
        print(f"{prog} show: {path}: out of memory while loading it (try a smaller --max-bytes)", file=err)
        return 1
    if as_json:
        print(json.dumps(summary_json(tree, depth), indent=2), file=out)
    else:
        print(summary(tree, depth=depth), file=out)
    return 0


def _one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return " ".join(text.split("\n"))

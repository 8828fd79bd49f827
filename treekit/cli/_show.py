"""``treekit show FILE``: load a tree from .safetensors, .npz, .npy or .json and print its summary.

Nothing in a file is trusted: sizes are checked before anything is inflated or allocated
(zip members' declared sizes, the shape and dtype in each ``.npy`` header), ``.npy`` files are
memory-mapped rather than read, and pickles are refused unless asked for.
"""

from __future__ import annotations

import contextlib
import json
import sys
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from treekit.checkpoint import INFLATION, INFLATION_FLOOR, NPY_MAGIC, check_members, default_bound, metadata, npy_header
from treekit.core import dtype_name, flatten, leaf_size, printable
from treekit.files import local_copy, locate
from treekit.look import Row, summary, table_rows, view
from treekit.ops import unflatten_dict

__all__ = ["DEFAULT_MAX_BYTES", "load_tree", "show", "summary_json"]

DEFAULT_MAX_BYTES = 1 << 30
"""What ``show`` inflates or reads at most (1 GiB) unless told otherwise (``--max-bytes``)."""

_PICKLE_WHY = "unpickling runs code chosen by whoever wrote the file; pass --allow-pickle only for files you trust"
_HEADER_ADVICE = "; pass --allow-pickle only for files you trust"
_PICKLE_SUFFIXES = (".pkl", ".pickle", ".pck", ".pt", ".pth")


def _limit_hint(max_bytes: int) -> str:
    return f"more than --max-bytes {max_bytes:,}; pass --max-bytes N or --no-limit to read it anyway"


def _check_npz(path: Path, max_bytes: int | None, allow_pickle: bool) -> None:
    """Check every member's declared size (what it inflates to) and ``.npy`` header first; by
    default (``max_bytes`` is :data:`DEFAULT_MAX_BYTES`) also against the bound ``treekit.load``
    keeps by default (100x the file's size, at least 256 MiB)."""
    size = path.stat().st_size
    over: Callable[[int], str] = _limit_hint
    if max_bytes == DEFAULT_MAX_BYTES and default_bound(size) < max_bytes:
        max_bytes = default_bound(size)
        why = f"{INFLATION}x the file's {size:,} bytes, at least {INFLATION_FLOOR:,}: a zip bomb?"
        over = lambda bound: (  # noqa: E731
            f"more than the default bound of {bound:,} ({why}); pass --max-bytes N or --no-limit to read it"
        )

    try:
        with zipfile.ZipFile(path) as archive:
            check_members(archive, size, max_bytes, allow_pickle, over, _HEADER_ADVICE)
    except zipfile.BadZipFile as exc:
        raise ValueError(f"not a valid .npz (zip) file: {exc}") from exc


def load_tree(path: str | Path, *, allow_pickle: bool = False, max_bytes: int | None = DEFAULT_MAX_BYTES) -> Any:
    """The tree stored in ``path``: ``.safetensors`` (:func:`treekit.metadata`: its arrays as
    ``ShapeDtype`` leaves, read from the header alone), ``.npz`` (as :func:`treekit.load` reads
    it), ``.npy``, ``.json``; a file of another name by its content (a zip, an ``.npy`` or a
    safetensors header: ``treekit.save``'s ``model.ckpt``).

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

    A URL (``s3://bucket/run/ckpt.safetensors``, any fsspec filesystem's) is read as the file:
    a safetensors file's header alone is fetched; any other file is copied to a temporary file
    first (at most ``max_bytes``, checked before it is fetched).

    Args:
        path: The file, or its URL.
        allow_pickle: Also load pickles (this runs code from the file).
        max_bytes: The most bytes a ``.npz`` may inflate to or a ``.json`` file may hold;
            ``None`` for no limit. Checked before anything is read.

    Raises:
        ValueError: For an empty file, a pickle without ``allow_pickle``, a pickle that does not
            unpickle (truncated, naming a module that is not installed, raising as it loads:
            ``could not unpickle it: ModuleNotFoundError: No module named 'x'``), a zip file
            with a pickle's suffix (torch.save's ``.pt``), an unknown suffix, a file over
            ``max_bytes``, a malformed or truncated ``.npy`` header, a ``.npz`` that is not a
            valid zip file (or has members zipfile cannot read), invalid JSON or JSON nested
            deeper than Python's parser goes, or ``.npz`` keys that are both an array and a
            group (``'a'`` and ``'a/b'``).
        OSError: If the file cannot be read.
    """
    where = locate(path)
    if not where.local:
        if where.path.lower().endswith(".safetensors"):
            return metadata(where)
        with local_copy(where, max_bytes) as copy:
            return load_tree(copy, allow_pickle=allow_pickle, max_bytes=max_bytes)
    path = Path(where.path)
    suffix = path.suffix.lower()
    with path.open("rb") as f:
        head = f.read(4)
    if not head:
        raise ValueError("expected a tree, got an empty file")
    if suffix not in (".npz", ".npy", ".safetensors", ".json", *_PICKLE_SUFFIXES):  # by content, whatever its name
        if head in _ZIP_MAGIC or head == NPY_MAGIC[:4]:
            suffix = ".npz" if head in _ZIP_MAGIC else ".npy"
        else:
            with contextlib.suppress(ValueError):
                return metadata(path)  # a safetensors header (treekit.save's model.ckpt)
    pickled = head[:1] == b"\x80"  # every pickle protocol >= 2 starts so (and 1 safetensors file in 32)
    if suffix in _PICKLE_SUFFIXES and head in _ZIP_MAGIC:
        raise ValueError(_ZIP_NOT_PICKLE)
    if suffix in _PICKLE_SUFFIXES or (pickled and suffix not in (".npz", ".npy", ".safetensors")):
        if not allow_pickle:
            raise ValueError(f"refusing to load a pickle file: {_PICKLE_WHY}")
        return _unpickle(path)
    if suffix == ".json":
        return _load_json(path, max_bytes)
    if suffix == ".safetensors":  # the header alone: no array is read, whatever the file's size
        return metadata(path)
    if suffix not in (".npz", ".npy"):
        got = repr(suffix) if suffix else "no suffix"
        raise ValueError(
            f"expected a .safetensors, .npz, .npy or .json file (or a pickle, with --allow-pickle), got {got}"
        )
    import numpy as np

    if suffix == ".npy":
        with path.open("rb") as f:
            # memory-mapped: nothing is read, so only the header's honesty matters, not the size
            objects = npy_header(f, "", path.stat().st_size, None, allow_pickle, _limit_hint, _HEADER_ADVICE)
        if objects and not allow_pickle:
            raise ValueError(f"refusing to load a pickled array: {_PICKLE_WHY}")
        if not objects:
            return np.load(path, mmap_mode="r")
        with _unpickling():
            return np.load(path, allow_pickle=True)
    from treekit.checkpoint import PickleRefused, load

    if zipfile.is_zipfile(path):  # else load() says what it is: a pickle, or not a zip
        _check_npz(path, max_bytes, allow_pickle)
    try:  # (the size checked above: load bounds nothing more)
        return load(path, max_bytes=sys.maxsize if max_bytes is None else max_bytes)
    except PickleRefused as exc:
        if not allow_pickle:
            raise ValueError(f"{exc}; pass --allow-pickle only for files you trust") from None
    if head not in _ZIP_MAGIC:
        return _unpickle(path)  # a pickle named .npz
    with _unpickling(), np.load(path, allow_pickle=True) as data:
        arrays = {key: data[key] for key in data.files}
    return unflatten_dict(arrays)


_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # a zip file's first member, or an empty zip file
_ZIP_NOT_PICKLE = (
    "expected a pickle, got a zip archive (torch.save's format): load it with torch.load, "
    "then treekit.save the tree to show it"
)


@contextlib.contextmanager
def _unpickling() -> Iterator[None]:
    """Turn what unpickling raises into a ValueError that says so (unpickling runs the file's
    code, so any exception may come out of it; MemoryError and OSError go on as themselves)."""
    import pickle

    try:
        yield
    except (MemoryError, OSError):
        raise
    except zipfile.BadZipFile as exc:  # a .npz member after the ones load() has read
        raise ValueError(f"not a valid .npz (zip) file: {exc}") from exc
    except EOFError as exc:
        raise ValueError(f"could not unpickle it: the data ends too soon, a truncated file ({exc})") from exc
    except pickle.UnpicklingError as exc:
        message = _one_line(exc)
        if "persistent" in message:  # torch.save's legacy format keeps its tensors out of the pickle
            message += " (torch.save's format? load it with torch.load)"
        raise ValueError(f"could not unpickle it: {message}") from exc
    except Exception as exc:
        raise ValueError(f"could not unpickle it: {type(exc).__name__}: {_one_line(exc)}") from exc


def _unpickle(path: Path) -> Any:
    import pickle

    with path.open("rb") as f, _unpickling():
        return pickle.load(f)


def _load_json(path: Path, max_bytes: int | None) -> Any:
    size = path.stat().st_size
    if max_bytes is not None and size > max_bytes:
        raise ValueError(f"a JSON file of {size:,} bytes, {_limit_hint(max_bytes)}")
    with path.open("rb") as f:  # at most max_bytes + 1: a file may say it is smaller than it is (/dev/zero)
        data = f.read() if max_bytes is None else f.read(max_bytes + 1)
    if max_bytes is not None and len(data) > max_bytes:
        raise ValueError(f"a JSON file of more than {max_bytes:,} bytes, {_limit_hint(max_bytes)}")
    try:
        return json.loads(data.decode("utf-8"))
    except RecursionError:  # how deep the parser goes depends on the Python: ~1,000 levels on 3.11, ~10,000 on 3.13
        raise ValueError(
            f"expected JSON nested no deeper than Python {sys.version_info.major}.{sys.version_info.minor}'s json "
            "parser reads (it recurses), got deeper"
        ) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"not valid JSON: {exc}") from None
    except ValueError as exc:  # valid JSON that Python's parser refuses (an int of over 4,300 digits)
        raise ValueError(f"could not read it as JSON: {exc}") from None


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
    rows = [*table_rows(leaves, paths, depth), Row("total", leaves, grouped=True, total=True)]
    *out, total = [_row_json(row) for row in rows]
    del total["path"]
    return {"rows": out, "total": total}


def _row_json(row: Row) -> dict[str, Any]:
    arrays = row.arrays
    sizes = [leaf_size(x) for x in arrays]
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
    html: str | None = None,
    prog: str = "treekit",
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Print the :func:`treekit.summary` of the tree in ``path``; return the exit status.

    ``as_json`` prints :func:`summary_json` instead; ``depth`` collapses each subtree at that
    depth into one row of subtotals (``summary(tree, depth=...)``); ``html`` writes the
    :func:`treekit.view` of the tree to that file instead (folded below ``depth``) and prints
    its name. A file that cannot be read or is refused, whatever its reader raises, gets one
    line on ``err`` and status 1, and so does a tree that cannot be summarized (a pickled
    cycle); ``out`` gets nothing then. See :func:`load_tree` for the rest.

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
    except Exception as exc:  # what else a hostile file makes a reader raise: one line all the same
        print(f"{prog} show: {path}: could not read it: {type(exc).__name__}: {_one_line(exc)}", file=err)
        return 1
    try:  # made whole before it is printed: a tree that cannot be summarized prints nothing on out
        if html is not None:
            view(tree, depth=depth).save_html(html)
            text = f"wrote {html}"
        else:
            text = json.dumps(summary_json(tree, depth), indent=2) if as_json else summary(tree, depth=depth)
    except MemoryError:
        print(f"{prog} show: {path}: out of memory while summarizing it", file=err)
        return 1
    except Exception as exc:  # a pickle can hold anything: a cycle, leaves whose attributes raise
        print(f"{prog} show: {path}: could not summarize the tree it holds: {_one_line(exc)}", file=err)
        return 1
    print(text, file=out)
    return 0


def _one_line(exc: BaseException) -> str:
    """``exc``'s message on one line, any text of the file's in it escaped (a last guard: the
    messages escape it where they take it)."""
    text = str(exc) or type(exc).__name__
    return printable(" ".join(text.split("\n")), limit=2000)

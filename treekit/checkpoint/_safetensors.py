"""The safetensors file layout, read and written with numpy alone: the storage of treekit checkpoints.

A file is an 8-byte little-endian length ``N``, then ``N`` bytes of UTF-8 JSON, then the data::

    {"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ..., "__metadata__": {"k": "v"}}

Offsets count from the start of the data, which the tensors cover exactly (no holes, no
overlaps). As safetensors' own writer does, :func:`write` pads the JSON with spaces so that the
data starts 8-byte aligned and lays tensors out by decreasing item size, so each one starts
aligned. Reading checks every claim of the header against the file's size before allocating
anything it claims; nothing in a file is run. numpy (and ``ml_dtypes`` for ``BF16``/``F8_*``) is
imported only when needed.
"""

from __future__ import annotations

import contextlib
import json
import math
import mmap as mapping
import os
from collections.abc import Iterable
from typing import IO, TYPE_CHECKING, Any

from treekit.checkpoint._ahead import Ahead
from treekit.checkpoint._codes import CODES, code_of, dtype_of
from treekit.checkpoint._header import MAX_HEADER, Header, Tensor, parse, short
from treekit.checkpoint._processes import Group
from treekit.checkpoint._progress import Progress
from treekit.checkpoint._shards import pieces, save_together, save_together_remote, write_pieces
from treekit.checkpoint._staged import Staged, Writes
from treekit.files import Where, locate, open_read, read_into, writing

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Header", "Tensor", "code_of", "dtype_name_of", "dtype_of", "read", "read_header", "read_tensor", "write"]

_CHUNK = 1 << 24  # bytes per write() call, and per copied slab of a non-contiguous array
_STAGED = 1 << 26  # bytes of arrays from which a file is written through _staged's buffers
_SMALL = 1 << 20  # bytes: tensors in a run under this are read in one call, then copied out


def dtype_name_of(tensor: Tensor) -> str:
    """The numpy name of a tensor's dtype (``'bfloat16'`` for ``BF16``), importing nothing.

    >>> dtype_name_of(Tensor('BF16', (2,), 8, 12))
    'bfloat16'
    """
    return CODES[tensor.dtype][0]


def write(
    path: str | os.PathLike[str] | Where,
    tensors: Iterable[tuple[str, Any]],
    metadata: dict[str, str] | None = None,
    group: Group | None = None,
) -> None:
    """Write ``tensors`` and ``metadata`` to the safetensors file ``path``, atomically, streaming.

    The header is made from shapes and dtypes first; then each array's bytes are written, a
    ``jax.Array``'s host copy started up to 256 MB ahead (while one is written, the next ones
    come off the device); one sharded over several devices shard by shard, each into its place
    (replicas once), never gathered. A temporary file beside ``path`` is renamed over it once
    complete and synced: an error leaves the old file (or none) and no temporary. A remote
    ``path`` (a URL) is written to a local temporary file, then uploaded as one object.

    >>> import os, tempfile
    >>> import numpy as np
    >>> with tempfile.TemporaryDirectory() as d:
    ...     name = os.path.join(d, 'ckpt.safetensors')
    ...     write(name, [('w', np.ones((2, 3), np.float32)), ('step', np.int64(7))], {'format': 'treekit'})
    ...     read(name)
    ({'step': array(7), 'w': array([[1., 1., 1.], [1., 1., 1.]], dtype=float32)}, {'format': 'treekit'})

    Args:
        path: The file to write (used as given: no suffix is added), or its URL.
        tensors: ``(name, array)`` pairs: unique string names (not ``__metadata__``), arrays of
            a dtype :func:`code_of` knows; laid out by decreasing item size, then as given.
        metadata: String keys to string values, or ``None``.

    Raises:
        TypeError: For a name or metadata that is not a string, or a dtype with no code.
        ValueError: For a repeated or reserved name, a header over 100 MB, or an array whose
            conversion gives another shape or dtype than it claimed.
    """
    import numpy as np

    entries: list[tuple[str, Any, np.dtype[Any], tuple[int, ...], str, int]] = []
    names: set[str] = set()
    together, itemsizes = False, set()
    for name, array in tensors:
        if type(name) is not str:
            raise TypeError(f"tensor name: expected str, got {type(name).__name__} {short(name)}")
        if name == "__metadata__" or name in names:
            raise ValueError(f"tensor {name!r}: expected a unique name other than '__metadata__', got it again")
        if type(array) is np.ndarray:  # (its shape holds ints already)
            dtype, shape = array.dtype, array.shape
        else:
            if not (hasattr(array, "shape") and hasattr(array, "dtype")):
                array = np.asarray(array)
            dtype, shape = np.dtype(array.dtype), tuple(map(int, array.shape))
            together = together or getattr(array, "is_fully_addressable", True) is False
        code = code_of(dtype)
        if code is None:
            raise TypeError(f"tensor {name!r}: expected an array of a dtype with a safetensors code, got dtype {dtype}")
        entries.append((name, array, dtype, shape, code, math.prod(shape) * dtype.itemsize))
        names.add(name)
        itemsizes.add(dtype.itemsize)
    if len(itemsizes) > 1:
        entries.sort(key=lambda e: -e[2].itemsize)  # stable: ties keep the given order
    members = []  # the header's JSON, as json.dumps(header, ensure_ascii=False, separators=(",", ":")) writes it
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(type(k) is str and type(v) is str for k, v in metadata.items()):
            raise TypeError(f"metadata: expected a dict of str to str, got {short(metadata)}")
        members.append('"__metadata__":' + json.dumps(metadata, ensure_ascii=False, separators=(",", ":")))
    offset = 0
    for name, _, _, shape, code, size in entries:  # (formatted here: json.dumps of 20,000 dicts takes twice as long)
        dims, end = ",".join(map(str, shape)), offset + size
        members.append(f'{_quote(name)}:{{"dtype":"{code}","shape":[{dims}],"data_offsets":[{offset},{end}]}}')
        offset = end
    try:
        blob = ("{" + ",".join(members) + "}").encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"tensor names and metadata: expected text UTF-8 encodes, got {exc.object!r:.80}") from None
    blob += b" " * (-len(blob) % 8)
    if len(blob) > MAX_HEADER:
        raise ValueError(f"header: expected at most {MAX_HEADER} bytes of JSON, got {len(blob)}")
    head = len(blob).to_bytes(8, "little") + blob
    where = path if isinstance(path, Where) else locate(path)
    if together:  # arrays sharded across processes: every process writes its own shards
        regions = [(name, array, dtype, shape) for name, array, dtype, shape, _, _ in entries]
        group = group or Group(f"treekit.save {where}")
        if where.local:
            save_together(where.path, head, regions, offset, _write_array, group)
        else:
            save_together_remote(where, head, regions, offset, _write_array, group)
        group.close()
        return
    ndarray = np.ndarray
    parts_of = [None if type(array) is ndarray else pieces(array) for _, array, *_ in entries]
    copies = [[d for _, d in parts] if parts is not None else [a] if hasattr(a, "copy_to_host_async") else []
              for (_, a, *_), parts in zip(entries, parts_of)]  # fmt: skip
    ahead = Ahead(copies, [e[5] for e in entries]) if any(copies) else None
    staged = offset >= _STAGED and all(parts is None for parts in parts_of)  # (see _staged: written from a thread)
    with writing(where) as file, Progress(f"save {where.name}", offset) as progress:
        with Staged(file) if staged else contextlib.nullcontext(file) as f:
            f.write(head)
            for k, ((name, array, dtype, shape, _, size), parts) in enumerate(zip(entries, parts_of)):
                if ahead is not None:
                    ahead.reach(k)  # (the next arrays' device-to-host copies run while this one is written)
                if type(array) is ndarray and size <= _CHUNK and _write_whole(f, array):
                    pass  # (most arrays: one write; their dtype and shape are their own, nothing to check)
                elif parts is None:
                    _write_array(f, name, array, dtype, shape)
                else:  # a sharded jax array: each shard into its place, none gathered
                    write_pieces(file, parts, dtype, shape)  # (never staged: see `staged`)
                progress.advance(size)


def _quote(name: str) -> str:
    """``name`` as a JSON string, as ``json.dumps(name, ensure_ascii=False)`` writes it."""
    plain = name.isprintable() and '"' not in name and "\\" not in name
    return f'"{name}"' if plain else json.dumps(name, ensure_ascii=False)


def _write_whole(f: Writes, a: np.ndarray[Any, Any]) -> bool:
    """Write ``a``'s buffer in one call; ``False``, writing nothing, if it is not C-contiguous
    or its dtype is one numpy exports no buffer for."""
    try:
        f.write(a)
    except (TypeError, ValueError, BufferError):
        return False
    return True


def _write_array(f: Writes, name: str, array: Any, dtype: np.dtype[Any], shape: tuple[int, ...]) -> None:
    import numpy as np

    if getattr(array, "is_fully_addressable", True) is False:  # (replicated over processes: any copy)
        array = array.addressable_shards[0].data
    a = np.asarray(array)
    if a.dtype != dtype or a.shape != shape:
        raise ValueError(f"tensor {name!r}: expected {dtype}{list(shape)} as it claimed, got {a.dtype}{list(a.shape)}")
    if a.nbytes <= _CHUNK and _write_whole(f, a):
        return
    if a.flags.c_contiguous:
        slabs: Iterable[Any] = (a,)
    else:  # copy a few rows at a time, not the whole array
        step = max(1, _CHUNK // max(1, a[0].nbytes))
        slabs = (np.ascontiguousarray(a[i : i + step]) for i in range(0, len(a), step))
    for slab in slabs:
        view = slab.reshape(-1).view(np.uint8).data
        for at in range(0, len(view), _CHUNK):
            f.write(view[at : at + _CHUNK])


def _label(f: Any) -> str:
    name = getattr(f, "name", None)
    return str(os.fspath(name)) if isinstance(name, (str, os.PathLike)) else "<file>"


def read_header(source: str | os.PathLike[str] | Where | IO[bytes]) -> Header:
    """The checked header of a safetensors file, reading only its first ``8 + N`` bytes.

    Every claim is checked against the file's size before anything it claims is allocated: the
    length (at most 100 MB), UTF-8 JSON, each tensor's keys, dtype code, shape and offsets, its
    byte count against its shape, the tensors covering the data exactly (no holes, no overlaps),
    ``__metadata__`` mapping strings to strings.

    >>> import os, tempfile
    >>> import numpy as np
    >>> with tempfile.TemporaryDirectory() as d:
    ...     name = os.path.join(d, 'ckpt.safetensors')
    ...     write(name, [('w', np.ones((2, 3), np.float32))])
    ...     read_header(name)
    Header(tensors={'w': Tensor(dtype='F32', shape=(2, 3), begin=72, end=96)}, metadata={}, data_start=72, size=96)

    Args:
        source: The file's path or URL, or the file open for binary reading.

    Raises:
        ValueError: For anything wrong, as ``<file>: <what>: expected <x>, got <y>``; a file of
            another kind (zip, pickle, ``.npy``, HDF5, gzip) is named as such.
    """
    if isinstance(source, (str, os.PathLike, Where)):
        where = source if isinstance(source, Where) else locate(source)
        with open_read(where) as f:
            return parse(f, str(where))
    return parse(source, _label(source))


def read_tensor(
    source: str | os.PathLike[str] | Where | IO[bytes], header: Header, name: str, mmap: bool = False
) -> np.ndarray[Any, Any]:
    """Tensor ``name`` of a file whose ``header`` :func:`read_header` gave, reading only its bytes.

    >>> import os, tempfile
    >>> import numpy as np
    >>> with tempfile.TemporaryDirectory() as d:
    ...     name = os.path.join(d, 'ckpt.safetensors')
    ...     write(name, [('a', np.arange(3)), ('b', np.zeros(2, bool))])
    ...     read_tensor(name, read_header(name), 'a')
    array([0, 1, 2])

    Args:
        source: The file's path or URL, or the file open for binary reading.
        header: Its header; name: the tensor's name.
        mmap: Give a read-only view of a map of the file instead of reading the tensor: memory
            grows only by the pages touched (a local file only: a remote tensor is read).

    Raises:
        KeyError: If the header has no tensor ``name``.
        ValueError: If the file is now shorter than the header says.
    """
    if isinstance(source, (str, os.PathLike, Where)):
        where = source if isinstance(source, Where) else locate(source)
        with open_read(where) as f:
            return _tensor(f, str(where), header, name, mmap and where.local)
    return _tensor(source, _label(source), header, name, mmap)


def _tensor(f: IO[bytes], p: str, header: Header, name: str, mmap: bool) -> np.ndarray[Any, Any]:

    t = header.tensors.get(name)
    if t is None:
        raise KeyError(f"{p}: no tensor {name!r} in the header")
    dtype = dtype_of(t.dtype)
    size = f.seek(0, os.SEEK_END)
    if size < t.end:
        raise ValueError(f"{p}: tensor {name!r}: expected bytes [{t.begin}, {t.end}], got a {size}-byte file")
    if mmap:
        return _view(_map(f), t, dtype)
    return _read_into(f, p, f"tensor {name!r}", t, dtype)


def _read_into(f: IO[bytes], p: str, what: str, t: Tensor, dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """The bytes ``[t.begin, t.end)`` of ``f`` read into a new array of ``t.shape`` and ``dtype``."""
    import numpy as np

    out: np.ndarray[Any, Any] = np.empty(t.shape, dtype)
    view = out.reshape(-1).view(np.uint8).data
    f.seek(t.begin)
    got = 0
    while got < len(view):
        step = f.readinto(view[got:])  # type: ignore[attr-defined]
        if not step:
            raise ValueError(f"{p}: {what}: expected bytes [{t.begin}, {t.end}], got the end at {t.begin + got}")
        got += step
    return out


def read(
    path: str | os.PathLike[str] | Where, mmap: bool = False
) -> tuple[dict[str, np.ndarray[Any, Any]], dict[str, str]]:
    """All tensors of the safetensors file ``path`` by name (in file order), and its metadata.

    >>> import os, tempfile
    >>> import numpy as np
    >>> with tempfile.TemporaryDirectory() as d:
    ...     name = os.path.join(d, 'ckpt.safetensors')
    ...     write(name, [('b', np.zeros(2, np.float32))], {'step': '10'})
    ...     tensors, metadata = read(name, mmap=True)
    ...     tensors['b'].flags.writeable, metadata
    (False, {'step': '10'})

    Args:
        path: The file, or its URL: a remote file's header is read first, then its data in
            ranges fetched concurrently into one buffer, which the arrays view.
        mmap: Map the tensors read-only (one map of the whole file) instead of reading them
            (a local file only).

    Raises:
        ValueError: For a damaged or foreign file, as :func:`read_header`.
    """
    import numpy as np

    where = path if isinstance(path, Where) else locate(path)
    if not where.local:
        return _read_remote(where)
    p = where.path
    with open(p, "rb") as f:
        header = parse(f, p)
        dtypes = {code: dtype_of(code) for code in {t.dtype for t in header.tensors.values()}}
        if mmap:  # each a view of one map of the file
            whole = _map(f)
            return {name: _view(whole, t, dtypes[t.dtype]) for name, t in header.tensors.items()}, header.metadata
        # Runs of small tensors are read in one call and copied out (a call each costs more than
        # the copy); big ones read into their arrays. Never from a map: a file another process
        # truncates meanwhile is a ValueError here, where a map's reader would die of SIGBUS.
        out: dict[str, np.ndarray[Any, Any]] = {}
        tensors = list(header.tensors.items())
        with Progress(f"load {os.path.basename(p)}", header.size - header.data_start) as progress:
            at = 0
            while at < len(tensors):
                run = at
                while run < len(tensors) and tensors[run][1].end - tensors[at][1].begin < _SMALL:
                    run += 1
                if run == at:  # a big tensor
                    name, t = tensors[at]
                    out[name] = _tensor(f, p, header, name, False)
                    at += 1
                    progress.advance(t.end - t.begin)
                    continue
                first, last = tensors[at][1], tensors[run - 1][1]
                block = Tensor("U8", (last.end - first.begin,), first.begin, last.end)
                what = f"tensors {tensors[at][0]!r} to {tensors[run - 1][0]!r}"
                data = _read_into(f, p, what, block, np.dtype(np.uint8))
                for name, t in tensors[at:run]:  # (each a copy: no array keeps the run's block alive)
                    out[name] = np.ndarray(t.shape, dtypes[t.dtype], data, t.begin - first.begin).copy()
                at = run
                progress.advance(last.end - first.begin)
        return out, header.metadata


def _read_remote(where: Where) -> tuple[dict[str, np.ndarray[Any, Any]], dict[str, str]]:
    """All tensors of a remote file: its header (one request), then its data in ranges fetched
    concurrently into one buffer (never more than the header says the file holds)."""
    import numpy as np

    with open_read(where) as f:
        header = parse(f, str(where))
    data = np.empty(header.size - header.data_start, np.uint8)
    with Progress(f"load {where.name}", len(data)) as progress:
        read_into(where, [(header.data_start, header.size, data)])
        progress.advance(len(data))
    dtypes = {code: dtype_of(code) for code in {t.dtype for t in header.tensors.values()}}
    out = {}
    for name, t in header.tensors.items():  # (views of the one buffer)
        out[name] = np.ndarray(t.shape, dtypes[t.dtype], data, t.begin - header.data_start)
    return out, header.metadata


def _map(f: IO[bytes]) -> mapping.mmap:
    """A read-only map of the whole file (it stays open while an array views it)."""
    return mapping.mmap(f.fileno(), 0, access=mapping.ACCESS_READ)


def _view(whole: mapping.mmap, t: Tensor, dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """Tensor ``t`` as a read-only array viewing the map ``whole``."""
    import numpy as np

    if t.end == t.begin:  # (no bytes to view)
        out: np.ndarray[Any, Any] = np.empty(t.shape, dtype)
        out.flags.writeable = False
        return out
    return np.frombuffer(whole, dtype, (t.end - t.begin) // dtype.itemsize, t.begin).reshape(t.shape)

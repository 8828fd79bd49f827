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

import json
import math
import mmap as mapping
import os
import reprlib
from collections.abc import Iterable
from typing import IO, TYPE_CHECKING, Any, NamedTuple

from treekit.checkpoint._ahead import Ahead
from treekit.checkpoint._atomic import atomic_file
from treekit.checkpoint._codes import CODES, SIZES, code_of, dtype_of
from treekit.checkpoint._json import bounded_json
from treekit.checkpoint._progress import Progress
from treekit.checkpoint._shards import pieces, save_together, write_pieces

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Header", "Tensor", "code_of", "dtype_name_of", "dtype_of", "read", "read_header", "read_tensor", "write"]

MAX_HEADER = 100_000_000  # bytes, safetensors' own limit
MAX_NDIM = 64  # numpy's
_CHUNK = 1 << 24  # bytes per write() call, and per copied slab of a non-contiguous array
_SMALL = 1 << 20  # bytes: tensors in a run under this are read in one call, then copied out
_INT = frozenset({int})
_FOREIGN = (  # how other files start; consulted only once a header length makes no sense
    (b"PK\x03\x04", "a zip file (.npz, or a torch .pt/.bin checkpoint?)"),
    (b"PK\x05\x06", "an empty zip file"),
    (b"\x93NUMPY", "a .npy file"),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file"),
    (b"\x1f\x8b", "a gzip file"),
    *((b"\x80" + bytes([v]), "a pickle (never unpickled)") for v in range(2, 6)),
)
_repr = reprlib.Repr()  # a lying header's values are shown cut short
_repr.maxlist, _repr.maxdict, _repr.maxstring, _repr.maxother, _repr.maxlevel = 8, 4, 40, 40, 2
_short = _repr.repr


class Tensor(NamedTuple):
    """Where one tensor lies: its safetensors ``dtype`` code, ``shape`` and absolute byte range."""

    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int


class Header(NamedTuple):
    """A checked header: ``tensors`` by name in file order, ``metadata``, data offset, file size."""

    tensors: dict[str, Tensor]
    metadata: dict[str, str]
    data_start: int
    size: int


def dtype_name_of(tensor: Tensor) -> str:
    """The numpy name of a tensor's dtype (``'bfloat16'`` for ``BF16``), importing nothing.

    >>> dtype_name_of(Tensor('BF16', (2,), 8, 12))
    'bfloat16'
    """
    return CODES[tensor.dtype][0]


def write(
    path: str | os.PathLike[str], tensors: Iterable[tuple[str, Any]], metadata: dict[str, str] | None = None
) -> None:
    """Write ``tensors`` and ``metadata`` to the safetensors file ``path``, atomically, streaming.

    The header is made from shapes and dtypes first; then each array's bytes are written, a
    ``jax.Array``'s host copy started up to 256 MB ahead (while one is written, the next ones
    come off the device); one sharded over several devices shard by shard, each into its place
    (replicas once), never gathered. A temporary file beside ``path`` is renamed over it once
    complete and synced: an error leaves the old file (or none) and no temporary.

    >>> import os, tempfile
    >>> import numpy as np
    >>> with tempfile.TemporaryDirectory() as d:
    ...     name = os.path.join(d, 'ckpt.safetensors')
    ...     write(name, [('w', np.ones((2, 3), np.float32)), ('step', np.int64(7))], {'format': 'treekit'})
    ...     read(name)
    ({'step': array(7), 'w': array([[1., 1., 1.], [1., 1., 1.]], dtype=float32)}, {'format': 'treekit'})

    Args:
        path: The file to write (used as given: no suffix is added).
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
    for name, array in tensors:
        if type(name) is not str:
            raise TypeError(f"tensor name: expected str, got {type(name).__name__} {_short(name)}")
        if name == "__metadata__" or name in names:
            raise ValueError(f"tensor {name!r}: expected a unique name other than '__metadata__', got it again")
        if type(array) is np.ndarray:  # (its shape holds ints already)
            dtype, shape = array.dtype, array.shape
        else:
            if not (hasattr(array, "shape") and hasattr(array, "dtype")):
                array = np.asarray(array)
            dtype, shape = np.dtype(array.dtype), tuple(map(int, array.shape))
        code = code_of(dtype)
        if code is None:
            raise TypeError(f"tensor {name!r}: expected an array of a dtype with a safetensors code, got dtype {dtype}")
        entries.append((name, array, dtype, shape, code, math.prod(shape) * dtype.itemsize))
        names.add(name)
    together = any(getattr(array, "is_fully_addressable", True) is False for _, array, *_ in entries)
    entries.sort(key=lambda e: -e[2].itemsize)  # stable: ties keep the given order
    header: dict[str, Any] = {}
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(type(k) is str and type(v) is str for k, v in metadata.items()):
            raise TypeError(f"metadata: expected a dict of str to str, got {_short(metadata)}")
        header["__metadata__"] = metadata
    offset = 0
    for name, _, _, shape, code, size in entries:
        header[name] = {"dtype": code, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    try:
        blob = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"tensor names and metadata: expected text UTF-8 encodes, got {exc.object!r:.80}") from None
    blob += b" " * (-len(blob) % 8)
    if len(blob) > MAX_HEADER:
        raise ValueError(f"header: expected at most {MAX_HEADER} bytes of JSON, got {len(blob)}")
    head = len(blob).to_bytes(8, "little") + blob
    if together:  # arrays sharded across processes: every process writes its own shards
        regions = [(name, array, dtype, shape) for name, array, dtype, shape, _, _ in entries]
        save_together(os.fspath(path), head, regions, offset, _write_array)
        return
    parts_of = [pieces(array) for _, array, *_ in entries]
    ahead = Ahead([[d for _, d in parts] if parts is not None else [a] if hasattr(a, "copy_to_host_async") else []
                   for (_, a, *_), parts in zip(entries, parts_of)], [e[5] for e in entries])
    with atomic_file(path) as f, Progress(f"save {os.path.basename(os.fspath(path))}", offset) as progress:
        f.write(head)
        for k, ((name, array, dtype, shape, _, size), parts) in enumerate(zip(entries, parts_of)):
            ahead.reach(k)  # (the next arrays' device-to-host copies run while this one is written)
            if parts is None:
                _write_array(f, name, array, dtype, shape)
            else:  # a sharded jax array: each shard into its place, none gathered
                write_pieces(f, parts, dtype, shape)
            progress.advance(size)


def _write_array(f: IO[bytes], name: str, array: Any, dtype: np.dtype[Any], shape: tuple[int, ...]) -> None:
    import numpy as np

    if getattr(array, "is_fully_addressable", True) is False:  # (replicated over processes: any copy)
        array = array.addressable_shards[0].data
    a = np.asarray(array)
    if a.dtype != dtype or a.shape != shape:
        raise ValueError(f"tensor {name!r}: expected {dtype}{list(shape)} as it claimed, got {a.dtype}{list(a.shape)}")
    if a.flags.c_contiguous and a.nbytes <= _CHUNK:
        try:
            f.write(a.data)  # (most arrays: one write of its buffer)
            return
        except (TypeError, ValueError, BufferError):
            pass  # (a dtype numpy exports no buffer for: its bytes, below)
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


_KINDS = {type(None): "null", bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array"}


def _kind(value: Any) -> str:
    return _KINDS.get(type(value), "an object")


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise ValueError(f"key {twice!r} appears twice in one object")
    return out


def _header(f: IO[bytes], p: str) -> Header:
    size = f.seek(0, os.SEEK_END)
    f.seek(0)
    head = f.read(8)
    n = int.from_bytes(head, "little") if len(head) == 8 else -1
    if not 0 <= n <= min(size - 8, MAX_HEADER):
        what = next((what for magic, what in _FOREIGN if head.startswith(magic)), None)
        if what is not None:
            raise ValueError(f"{p}: expected a safetensors file, got {what}")
        if n < 0:
            raise ValueError(f"{p}: expected a safetensors file (an 8-byte header length, then JSON), got {size} bytes")
        limit = f"{size - 8} (the file is {size} bytes)" if size - 8 < MAX_HEADER else f"{MAX_HEADER} (the limit)"
        raise ValueError(f"{p}: header length: expected at most {limit}, got {n} (not safetensors, or truncated?)")
    obj = bounded_json(f.read(n), f"{p}: header", object_pairs_hook=_pairs)
    if type(obj) is not dict:
        raise ValueError(f"{p}: header: expected a JSON object, got {_kind(obj)}")
    metadata = obj.pop("__metadata__", None)
    if metadata is None:
        metadata = {}
    elif type(metadata) is not dict:
        raise ValueError(f"{p}: __metadata__: expected an object of strings, got {_kind(metadata)}")
    for key, value in metadata.items():
        if type(value) is not str:
            raise ValueError(f"{p}: __metadata__[{key!r}]: expected a string, got {_kind(value)} {_short(value)}")
    data_start, data_size = 8 + n, size - 8 - n
    regions = []
    for name, info in obj.items():
        try:  # (a well-formed entry, checked in few steps; for any other, _region says what is wrong)
            code, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
            good = (
                len(info) == 3
                and code in SIZES
                and type(shape) is list
                and len(shape) <= MAX_NDIM
                and set(map(type, shape)) <= _INT
                and min(shape, default=0) >= 0
                and type(begin) is int
                and type(end) is int
                and 0 <= begin <= end <= data_size
                and end - begin == math.prod(shape) * SIZES[code]
                and (end > begin or 0 not in shape)  # (no bytes, no claims: a zero dim's others checked below)
            )
        except (TypeError, KeyError, ValueError):
            good = False
        if good:
            regions.append((begin, end, name, code, tuple(shape)))
        else:
            regions.append(_region(f"{p}: tensor {name!r}", name, info, data_size))
    regions.sort()
    at, previous = 0, ""
    for begin, end, name, _, _ in regions:
        if begin != at:
            why = f"overlapping tensor {previous!r}" if begin < at else f"{begin - at} bytes before it in no tensor"
            raise ValueError(f"{p}: tensor {name!r}: expected data_offsets from {at}, got [{begin}, {end}] ({why})")
        at, previous = end, name
    if at != data_size:
        raise ValueError(f"{p}: data: expected {at} bytes (all in tensors), got {data_size} (the rest in no tensor)")
    tensors = {name: Tensor(code, shape, data_start + b, data_start + e) for b, e, name, code, shape in regions}
    return Header(tensors, metadata, data_start, size)


def _region(where: str, name: str, info: Any, data_size: int) -> tuple[int, int, str, str, tuple[int, ...]]:
    """``(begin, end, name, dtype code, shape)`` of one header entry, checked."""
    if type(info) is not dict or set(info) != {"dtype", "shape", "data_offsets"}:
        got = f"keys {_short(sorted(info))}" if type(info) is dict else _kind(info)
        raise ValueError(f"{where}: expected an object with keys ['data_offsets', 'dtype', 'shape'], got {got}")
    code, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if type(code) is not str or code not in CODES:
        raise ValueError(f"{where}: dtype: expected one of {', '.join(CODES)}, got {_short(code)}")
    if type(shape) is not list or len(shape) > MAX_NDIM or not all(type(d) is int and d >= 0 for d in shape):
        raise ValueError(f"{where}: shape: expected a list of at most {MAX_NDIM} integers >= 0, got {_short(shape)}")
    if math.prod(d or 1 for d in shape) >= 1 << 63:  # (numpy's limit, even for an array of no bytes)
        raise ValueError(f"{where}: shape: expected fewer than 2**63 elements (zeros aside), got {_short(shape)}")
    if type(offsets) is not list or len(offsets) != 2 or not all(type(o) is int for o in offsets):
        raise ValueError(f"{where}: data_offsets: expected [begin, end], two integers, got {_short(offsets)}")
    begin, end = offsets
    if not 0 <= begin <= end <= data_size:
        why = " (a truncated file?)" if 0 <= begin <= end else ""
        raise ValueError(f"{where}: data_offsets: expected 0 <= begin <= end <= {data_size}, got {offsets}{why}")
    need = math.prod(shape) * CODES[code][1]  # Python ints: no overflow
    if end - begin != need:
        raise ValueError(f"{where}: expected {need} bytes for shape {shape} of {code}, got offsets {offsets}")
    return begin, end, name, code, tuple(shape)


def read_header(source: str | os.PathLike[str] | IO[bytes]) -> Header:
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
        source: The file's path, or the file open for binary reading.

    Raises:
        ValueError: For anything wrong, as ``<file>: <what>: expected <x>, got <y>``; a file of
            another kind (zip, pickle, ``.npy``, HDF5, gzip) is named as such.
    """
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            return _header(f, os.fspath(source))
    return _header(source, _label(source))


def read_tensor(
    source: str | os.PathLike[str] | IO[bytes], header: Header, name: str, mmap: bool = False
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
        source: The file's path, or the file open for binary reading.
        header: Its header; name: the tensor's name.
        mmap: Give a read-only view of a map of the file instead of reading the tensor: memory
            grows only by the pages touched.

    Raises:
        KeyError: If the header has no tensor ``name``.
        ValueError: If the file is now shorter than the header says.
    """
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            return _tensor(f, os.fspath(source), header, name, mmap)
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


def read(path: str | os.PathLike[str], mmap: bool = False) -> tuple[dict[str, np.ndarray[Any, Any]], dict[str, str]]:
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
        path: The file.
        mmap: Map the tensors read-only (one map of the whole file) instead of reading them.

    Raises:
        ValueError: For a damaged or foreign file, as :func:`read_header`.
    """
    import numpy as np

    p = os.fspath(path)
    with open(path, "rb") as f:
        header = _header(f, p)
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
                for name, t in tensors[at:run]:
                    piece = data[t.begin - first.begin : t.end - first.begin]
                    out[name] = piece.view(dtypes[t.dtype]).reshape(t.shape).copy()
                at = run
                progress.advance(last.end - first.begin)
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

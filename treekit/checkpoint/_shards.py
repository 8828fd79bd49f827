"""Checkpoints on a mesh: a sharded ``jax.Array`` written shard by shard into its place in a
file, and a file's arrays built on any mesh, each device reading only its own slice.

The file holds each array whole, in C order, as any other checkpoint (so a file saved on one
mesh loads onto any other, or onto one device, and other tools read it). Saving copies one
shard at a time to the host and straight into its place, through a writable map of the
array's region of the file; replicas of a shard are written once. Loading builds each array
with ``jax.make_array_from_callback`` over a read-only memory map of the file: each device's
callback copies its slice, so a process reads only the byte ranges of its own shards.
"""

from __future__ import annotations

import math
import mmap as mapping
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any

from treekit.checkpoint._codes import code_of
from treekit.checkpoint._processes import Group
from treekit.core import KeyPath, ShapeDtype, flatten, keystr
from treekit.files import (
    Where,
    create_exclusive,
    file_size,
    fsync_folder,
    mode_for,
    read_bytes,
    read_into,
    remove_tree,
    write_bytes,
    writing,
)
from treekit.sharding import put_small

_GROUP = 1 << 25  # bytes of leaves a thread places at a time when loading
_THREADS = 8  # threads at most that place a loaded tree's arrays

__all__ = [
    "OnHost", "check_placements", "pieces", "place", "placed_on_mesh", "save_together", "save_together_remote",
    "write_pieces",
]


def pieces(array: Any) -> list[tuple[tuple[slice, ...], Any]] | None:
    """The shards of a ``jax.Array`` split over several devices that this process writes,
    ``(index, shard data)`` each: its addressable shards that are the first replica of their
    slice (so each slice is written once over all processes); ``None`` for anything else
    (written whole).

    >>> pieces([1, 2]) is None
    True
    """
    sharding = getattr(array, "sharding", None)
    shards = getattr(array, "addressable_shards", None)
    if shards is None or sharding is None or getattr(sharding, "is_fully_replicated", True):
        return None
    return [(tuple(shard.index), shard.data) for shard in shards if shard.replica_id == 0]


class _Shard:
    """A shard of an :class:`OnHost`: where it lies in the array, which replica, its data."""

    __slots__ = ("data", "index", "replica_id")

    def __init__(self, index: tuple[slice, ...], replica_id: int, data: Any) -> None:
        self.index, self.replica_id, self.data = index, replica_id, data


class OnHost:
    """A ``jax.Array`` across processes as this process's shards copied to the host, with its
    shape, dtype and sharding: what an async save writes while the step goes on (the device
    arrays may be changed or donated then). Only the shards this process writes are copied
    (:func:`pieces`' first replicas; one shard of an array replicated over every device)."""

    is_fully_addressable = False

    def __init__(self, array: Any) -> None:
        import numpy as np

        self.shape, self.dtype, self.sharding = tuple(array.shape), array.dtype, array.sharding
        shards = array.addressable_shards
        kept = [s for s in shards if s.replica_id == 0] or shards[:1]
        self.addressable_shards = [_Shard(tuple(s.index), s.replica_id, np.asarray(s.data)) for s in kept]

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        raise TypeError("an array across processes: this process holds only its shards")


def write_pieces(f: IO[bytes], parts: list[tuple[tuple[slice, ...], Any]], dtype: Any, shape: tuple[int, ...]) -> None:
    """Write each shard of ``parts`` (from :func:`pieces`) into its place in the array of
    ``shape`` and ``dtype`` whose bytes start at ``f``'s position, through a writable map of
    that region of the file (numpy copies each shard into its strided place); one shard on the
    host at a time. ``f`` is left at the array's end."""
    import numpy as np

    for index, data in parts:  # (before the map: an error there could not close it)
        if np.dtype(data.dtype) != dtype or len(index) != len(shape):
            raise ValueError(f"a shard of {data.dtype} at {index}: expected {dtype}, {len(shape)} dims")
    f.flush()
    start = f.tell()
    size = math.prod(shape) * dtype.itemsize
    if size:
        fd = f.fileno()
        try:  # the region's blocks allocated at once (faster than a sparse file's, page by page)
            os.posix_fallocate(fd, start, size)
        except (AttributeError, OSError):  # (no such call here, or a file system without it)
            if os.fstat(fd).st_size < start + size:
                os.ftruncate(fd, start + size)
        skip = start % mapping.ALLOCATIONGRANULARITY
        with mapping.mmap(fd, size + skip, offset=start - skip, access=mapping.ACCESS_WRITE) as region:
            whole = np.frombuffer(region, np.uint8, size, skip).view(dtype).reshape(shape)
            for index, data in parts:
                whole[index] = np.asarray(data)
            del whole
    f.seek(start + size)  # (the dirty pages outlive the map; the caller's fsync writes them with the rest)


def _sharding_of(x: Any) -> Any:
    sharding = getattr(x, "sharding", None)
    return sharding if sharding is not None and hasattr(sharding, "shard_shape") else None


def placed_on_mesh(x: Any) -> bool:
    """A template leaf that asks :func:`treekit.load` to place its array: a
    ``ShapeDtypeStruct`` with a sharding, or a ``jax.Array`` sharded over several devices.

    >>> placed_on_mesh(3)
    False
    """
    sharding = _sharding_of(x)
    if sharding is None:
        return False
    return not hasattr(x, "addressable_shards") or len(getattr(sharding, "device_set", ())) > 1


def _given(tree: Any, shardings: Any, like: Any) -> list[Any]:
    """The sharding of each leaf of ``tree``: from ``shardings`` (one sharding for all, or a
    tree with ``tree``'s structure or a prefix of it; ``None`` leaves stay on the host), else
    from ``like``'s leaves (jax arrays, ``ShapeDtypeStruct`` with a sharding)."""
    from treekit.ops import broadcast

    if shardings is None:  # (the tree was restored into like: the same leaves, in order)
        return [_sharding_of(x) if placed_on_mesh(x) else None for x in flatten(like)[0]]
    if _is_sharding(shardings):
        return [shardings] * len(flatten(tree)[0])
    full = broadcast(shardings, tree, _is_sharding, "shardings")
    return list(flatten(full, _is_sharding)[0])


def _is_sharding(x: Any) -> bool:
    return x is None or hasattr(x, "shard_shape")


def _slicer(source: Any) -> Callable[[Any], Any]:
    """make_array_from_callback's callback: a device's slice of ``source``, copied."""
    import numpy as np

    return lambda index: np.array(source[index])


def check_placements(paths: list[KeyPath], leaves: list[Any], given: list[Any]) -> None:
    """Every array's sharding fits its shape (all problems at once, by key path), before any
    array's data is read."""
    problems = []
    verdicts: dict[tuple[int, tuple[int, ...]], list[str]] = {}  # (a sharding and a shape checked once)
    for path, x, sharding in zip(paths, leaves, given):
        if sharding is None:
            continue
        shape = getattr(x, "shape", None)
        if shape is None:
            problems.append(f"file{keystr(path)}: expected an array for {_shown(sharding)}, got {type(x).__name__}")
            continue
        key = (id(sharding), tuple(shape))
        if key not in verdicts:
            verdicts[key] = _misfits(sharding, tuple(shape))
        problems += [f"file{keystr(path)}{p}" for p in verdicts[key]]
    if problems:
        from treekit.sharding import ShardingError

        raise ShardingError(problems)


def _misfits(sharding: Any, shape: tuple[int, ...]) -> list[str]:
    """What keeps ``sharding`` from splitting arrays of ``shape``, each as the end of a message
    that begins with the array's key path (none: it fits)."""
    spec, mesh = getattr(sharding, "spec", None), getattr(sharding, "mesh", None)
    if spec is not None and mesh is not None:
        from treekit.sharding import ShardingError, check_specs

        try:
            check_specs(ShapeDtype(shape, "uint8"), spec, mesh)
        except ShardingError as err:
            return [p[len("tree") :] for p in err.problems]
        return []
    try:
        sharding.shard_shape(shape)
    except Exception as err:  # (jax's own words for another kind of sharding)
        return [f": expected a shape {_shown(sharding)} can split, got {shape} ({err})"]
    return []


def _shown(sharding: Any) -> str:
    """A sharding for a message, whole: a ``NamedSharding`` as its spec and its mesh's axes."""
    spec, mesh = getattr(sharding, "spec", None), getattr(sharding, "mesh", None)
    if spec is not None and mesh is not None:
        return f"{spec} over the mesh {dict(mesh.shape)}"
    return repr(sharding)


def place(tree: Any, shardings: Any, like: Any) -> Any:
    """``tree`` (a loaded tree, arrays mapped from the file) with each array that has a sharding
    built on its devices by ``jax.make_array_from_callback``, each device copying its slice."""
    import jax
    import numpy as np

    leaves, treedef, paths = flatten(tree, with_path=True)
    assert paths is not None
    given = _given(tree, shardings, like)
    check_placements(paths, leaves, given)

    def one(x: Any, sharding: Any) -> Any:
        if sharding is None:
            return x
        if isinstance(x, (np.ndarray, np.generic)):
            source = np.asarray(x)
            return jax.make_array_from_callback(source.shape, sharding, _slicer(source))
        return jax.device_put(x, sharding)  # (a typed key, already a jax array)

    bound = [i for i, s in enumerate(given) if s is not None]  # (small arrays for one device each: in packs)
    packed = {bound[k]: x for k, x in put_small([leaves[i] for i in bound], [given[i] for i in bound]).items()}
    groups: list[list[int]] = [[]]  # leaves in groups of about _GROUP bytes, placed by a pool of threads:
    size = 0  # each thread reads its slices from the file while the others' copies go to the devices
    for i, x in enumerate(leaves):
        if i in packed:
            continue
        if size >= _GROUP:
            groups.append([])
            size = 0
        groups[-1].append(i)
        size += getattr(x, "nbytes", 0) + 4096  # (a leaf's own cost, as a page's worth of bytes)
    out = list(leaves)
    if len(groups) == 1:
        for i in groups[0]:
            out[i] = one(leaves[i], given[i])
    else:
        with ThreadPoolExecutor(min(_THREADS, len(groups), os.cpu_count() or 1)) as pool:
            for group, done in zip(groups, pool.map(lambda group: [one(leaves[i], given[i]) for i in group], groups)):
                for i, x in zip(group, done):
                    out[i] = x
    for i, x in packed.items():
        out[i] = x
    return treedef.unflatten(out)


def save_together(
    path: str, head: bytes, regions: list[tuple[str, Any, Any, tuple[int, ...]]], data_size: int, write_whole: Any,
    group: Group,
) -> None:
    """Write one safetensors file from every process at once: process 0 makes a temporary file
    of the final size beside ``path`` with its own header (its values of the leaves that are not
    arrays across processes), each other process reads where its arrays' regions lie from that
    header and writes the shards it holds (:func:`pieces`), process 0 writes the arrays that are
    not split, then renames the file over ``path``. ``regions``: ``(name, array, dtype,
    shape)`` in the file's order; ``write_whole(f, name, array, dtype, shape)`` writes an array
    at ``f``'s position. ``group``'s barriers separate the steps, so a process that fails or
    dies leaves ``path`` as it was: the old checkpoint, or none."""
    me = group.me
    folder, base = os.path.split(os.path.abspath(path))
    temp = os.path.join(folder, f".{base}.{group.tag}.tmp")  # (the same name in every process, unasked)
    try:
        if me == 0:  # (a name every process knows: made exclusively, never through a planted link)
            with os.fdopen(create_exclusive(temp, mode_for(path)), "wb") as f:
                f.write(head)
                f.truncate(len(head) + data_size)
        group.barrier("made")
        with os.fdopen(os.open(temp, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0)), "r+b") as g:
            places = _places(g, temp) if me else None  # (process 0's header: where each array lies)
            at = len(head)
            for name, array, dtype, shape in regions:
                parts = pieces(array)
                if places is not None:
                    if parts is not None:
                        g.seek(_place_of(places, name, temp, dtype, shape))
                        write_pieces(g, parts, dtype, shape)
                    continue
                g.seek(at)
                if parts is not None:
                    write_pieces(g, parts, dtype, shape)
                else:
                    write_whole(g, name, array, dtype, shape)
                at += math.prod(shape) * dtype.itemsize
            g.flush()
            os.fsync(g.fileno())
        group.barrier("written")
        if me == 0:
            os.replace(temp, path)
            fsync_folder(folder)
        group.barrier("renamed")
    except BaseException:
        if me == 0 and os.path.exists(temp):
            os.unlink(temp)
        raise


def _places(f: IO[bytes], where: str) -> dict[str, tuple[int, Any, list[int]]]:
    """Each tensor's ``(start in the file, dtype code, shape)`` in the safetensors header at the
    start of ``f`` (process 0's, just written)."""
    import json

    f.seek(0)
    size = int.from_bytes(f.read(8), "little")
    header = json.loads(f.read(size))
    return {
        name: (8 + size + int(entry["data_offsets"][0]), entry["dtype"], list(entry["shape"]))
        for name, entry in header.items()
        if name != "__metadata__"
    }


def _place_of(places: dict[str, tuple[int, Any, list[int]]], name: str, where: str, dtype: Any, shape: Any) -> int:
    """Where tensor ``name`` of ``dtype`` and ``shape`` starts in process 0's file."""
    got = places.get(name)
    if got is None or got[1] != code_of(dtype) or got[2] != list(shape):
        raise ValueError(f"{where}: process 0 wrote no tensor {name!r} of {dtype}{list(shape)} (got {got})")
    return got[0]


def save_together_remote(
    where: Where, head: bytes, regions: list[tuple[str, Any, Any, tuple[int, ...]]], data_size: int, write_whole: Any,
    group: Group,
) -> None:
    """:func:`save_together` for a file in an object store, where processes cannot write into one
    object: each process uploads the pieces it holds (their bytes one after another, and a JSON
    index of where each goes) beside ``where``; process 0 downloads them, one array's pieces at a
    time, into a local file of the final layout (its own header and unsplit arrays), uploads that
    file as one object and removes the pieces. ``group``'s barriers between; a process that fails
    or dies leaves ``where`` as it was, the old file or none. Every byte passes through process 0
    (an object store cannot join objects written elsewhere in general)."""
    import json

    import numpy as np

    me = group.me
    parts = where.sibling(f".{where.name}.{group.tag}.parts")
    try:
        index, at = [], 0
        with writing(parts.join(f"process-{me}.bin")) as f:
            for name, array, _, _ in regions:
                for where_in, data in pieces(array) or ():
                    piece = np.ascontiguousarray(np.asarray(data))
                    if piece.nbytes:
                        f.write(piece.reshape(-1).view(np.uint8).data)
                    slices = [[s.start, s.stop] for s in where_in]
                    index.append({"name": name, "index": slices, "shape": list(piece.shape), "at": at})
                    at += piece.nbytes
        write_bytes(parts.join(f"process-{me}.json"), json.dumps(index).encode("utf-8"))
        group.barrier("uploaded")
        if me == 0:
            _assemble(where, parts, group.count, head, regions, data_size, write_whole)
            remove_tree(parts)
        group.barrier("committed")
    except BaseException:
        if me == 0:
            remove_tree(parts)
        raise


def _assemble(
    where: Where, parts: Where, count: int, head: bytes, regions: list[tuple[str, Any, Any, tuple[int, ...]]],
    data_size: int, write_whole: Any,
) -> None:
    """Process 0's part of :func:`save_together_remote`: the file put together from every process's
    uploaded pieces (each checked against the array it belongs to) and uploaded."""
    import json

    import numpy as np

    indexes = []
    for p in range(count):
        bin_ = parts.join(f"process-{p}.bin")
        raw = read_bytes(parts.join(f"process-{p}.json"), 1 << 26)
        indexes.append((bin_, file_size(bin_), json.loads(raw)))
    by_name: dict[str, list[tuple[Where, int, dict[str, Any]]]] = {}
    for bin_, size, entries in indexes:
        for entry in entries:
            by_name.setdefault(str(entry["name"]), []).append((bin_, size, entry))
    with writing(where) as g:
        g.write(head)
        g.truncate(len(head) + data_size)
        at = len(head)
        for name, array, dtype, shape in regions:
            g.seek(at)
            if pieces(array) is None:  # (not split: process 0's own)
                write_whole(g, name, array, dtype, shape)
            else:
                placed = []
                for bin_, size, entry in by_name.pop(name, []):
                    index = tuple(slice(a, b) for a, b in entry["index"])
                    piece = np.empty(tuple(entry["shape"]), dtype)
                    begin = int(entry["at"])
                    if len(index) != len(shape) or begin + piece.nbytes > size:
                        raise ValueError(f"{bin_}: a piece of {name!r} at {index} that its array cannot hold")
                    if piece.nbytes:
                        read_into(bin_, [(begin, begin + piece.nbytes, piece.reshape(-1).view(np.uint8))])
                    placed.append((index, piece))
                write_pieces(g, placed, dtype, shape)
            at += math.prod(shape) * dtype.itemsize
        if by_name:  # (the processes agreed on their arrays first: a file that is not what they uploaded)
            raise ValueError(f"{parts}: pieces of {sorted(by_name)[:3]}, which process 0 does not hold")

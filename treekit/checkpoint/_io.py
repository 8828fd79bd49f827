"""save and load: a tree in one file, its structure recorded as JSON inside, never pickled.

Any name but ``.npz`` gets the safetensors layout (``treekit/checkpoint/_safetensors.py``): each array
leaf a tensor named by its key path, the structure record (``treekit/checkpoint/_saved.py``) in the
header's ``__metadata__`` under ``__treekit__``. A ``.npz`` name gets treekit 0.1's layout:
an ordinary ``.npz`` (a zip of ``.npy`` arrays) whose member ``__treekit__`` holds the UTF-8
bytes of the record. Both load, with the tree's own structure or into a template
(``like=``); safetensors and ``.npz`` files of other tools load by name.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ParamSpec, TypeVar

from treekit.checkpoint import _saved, _values
from treekit.checkpoint._foreign import read_index, rename_rules, renamed
from treekit.checkpoint._npz import PICKLE_FILE, ZIP_HEADS, PickleRefused, file_head, may_be_pickle, read_npz
from treekit.checkpoint._processes import across
from treekit.checkpoint._restore import floating_as, restore
from treekit.checkpoint._shards import place, placed_on_mesh
from treekit.core import dtype_name, flatten, keystr, printable
from treekit.files import Where, file_size, locate, writing
from treekit.sharding import fetch_small

__all__ = ["RECORD", "PickleRefused", "damaged", "load", "parse_record", "read_npz", "save", "uncollected"]

_P = ParamSpec("_P")
_R = TypeVar("_R")
RECORD = "__treekit__"


def uncollected(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """``fn`` run with the cyclic garbage collector paused (as it was before, after): a record
    and a header make objects by the ten thousand, none in a cycle, and the collections their
    making sets off walk them again and again (a fifth of a 20,000-leaf load)."""

    @functools.wraps(fn)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        if not gc.isenabled():
            return fn(*args, **kwargs)
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            gc.enable()

    return run


@uncollected
def save(
    path: str | os.PathLike[str] | Where,
    tree: Any,
    *,
    names: str | None = None,
    filesystem: Any = None,
    storage_options: dict[str, Any] | None = None,
) -> None:
    """Write ``tree`` to the file ``path``, atomically; :func:`load` reads it back.

    A name ending in ``.npz`` gets treekit 0.1's layout (a ``.npz`` of ``.npy`` members); any
    other name the safetensors layout, which ``safetensors.safe_open``, Hugging Face's
    ``from_pretrained`` and other tools read: each array leaf a tensor named as the ecosystem
    names them (``{'params': {'Dense_0': {'bias': b}}}``'s is ``params.Dense_0.bias``; a flat
    dict's keys as they are), ``"format": "pt"`` and the structure (with each leaf's exact
    key path) in the header's metadata. Arrays are written one at a time, a jax array's
    device-to-host copy started ahead of its turn.

    Keeps lists, tuples, ``None``, dicts with keys of any JSON-able type (in insertion order),
    ``OrderedDict``, ``defaultdict``, namedtuples, registered dataclasses and other
    registered nodes whose node data are numbers, strings, tuples, lists, dicts or
    module-level classes and functions. Any other node (registered with JAX only, as
    equinox Modules, nnx ``State``, flax's ``FrozenDict``; or with other node data) and any
    leaf the record cannot hold (a function defined in a function) is saved without what
    only its class knows: :func:`load` rebuilds it into a template (``like=``). Array leaves
    (numpy, jax: saved as numpy; typed PRNG keys as their key data and implementation;
    dtypes the layout has no code for, such as int4, as raw bytes with their dtype) are
    stored as tensors or ``.npy`` members; numbers, strings and bytes in the structure
    record. Nothing is pickled. The file is written to a temporary file in the same folder and renamed over
    ``path`` only once complete: a crash or error leaves the old file (or none), never half
    of a new one. A URL (``s3://bucket/run/params.safetensors``, ``gs://...``, any fsspec
    filesystem's) is written to a local temporary file first, then uploaded as one object,
    which the store shows only once complete (docs/cloud.md).

    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     name = os.path.join(d, 'params.npz')
    ...     save(name, {'layers': [(1, 2.5), None], 3: 'relu'})
    ...     load(name)
    {'layers': [(1, 2.5), None], 3: 'relu'}

    A sharded ``jax.Array`` is written shard by shard into its place (replicas once), never
    gathered. When the tree holds arrays sharded across processes (``jax.distributed``), every
    process must call ``save`` with the same tree and path: each writes its own shards into
    one temporary file beside ``path``, which process 0 renames over ``path`` once all have
    written (barriers through ``jax.distributed``'s key-value store, each with a timeout), so
    the checkpoint is complete or absent. Leaves that are not arrays across processes are
    written as process 0 holds them (:class:`CheckpointManager` keeps every process's). The
    processes' trees must have the same key paths and arrays across processes (dtypes and
    shapes): a difference is a ``ValueError`` in every process, before anything is written.
    To a URL, each uploads the pieces it holds and process 0 puts the file together and
    uploads it (docs/cloud.md, "Many processes").

    Args:
        path: The file to write (used as given: no suffix is added), or its URL.
        tree: Any pytree whose nodes and leaves are of the kinds above.
        names: How tensors are named: ``'.'`` (the default for safetensors files: key entries
            joined by dots, as PyTorch and Hugging Face name them), ``'/'`` (the default for
            ``.npz``: as ``flatten_dict`` joins them) or ``'keystr'`` (``['params']['w']``,
            never ambiguous). :func:`load` finds leaves by the key paths in the record, so any
            choice round-trips exactly.
        filesystem: The pyarrow or fsspec filesystem ``path`` is on (``None``: the one its
            URL's scheme names, else the local disk).
        storage_options: Options for the filesystem a URL names (credentials, an endpoint:
            ``{'endpoint_url': ...}`` for s3fs), as fsspec takes them; the standard environment
            and credential chains apply without them.

    Raises:
        TypeError: If an array leaf cannot be saved without pickle (an object array, one
            numpy cannot read); the message names its key path. Nothing is written then.
        ValueError: If two array leaves get one tensor name (``{'a.b': x, 'a': {'b': y}}``
            with ``'.'``); the message names both key paths.
        OSError: If the file cannot be written.
        treekit.MissingExtra: For a URL whose filesystem needs the ``remote`` extra.
    """
    import numpy as np

    from treekit.checkpoint import _safetensors

    where = locate(path, filesystem, storage_options)
    npz = where.path.endswith(".npz")  # treekit 0.1's layout

    def stored(dtype: Any) -> bool:
        return dtype.num < 256 and dtype.kind != "V" if npz else _safetensors.code_of(dtype) is not None

    record, arrays = _saved.record_of(tree, stored, names or ("/" if npz else "."), fetch_small)
    if not npz:  # ("format": what Hugging Face's loaders ask of a file: "pt", the plain layout)
        group = across(tree, f"treekit.save {where}")  # (arrays across processes: the same in every one)
        _safetensors.write(where, arrays.items(), {"format": "pt", RECORD: record}, group)
        return
    arrays = {name: np.asarray(array) for name, array in arrays.items()}
    arrays[RECORD] = np.frombuffer(record.encode("utf-8"), np.uint8)
    with writing(where) as f:
        np.savez(f, **arrays)


def _read(path: Where, mmap: bool, max_bytes: int | None = None) -> tuple[Any, dict[str, Any], str]:
    """(the structure record, or None for a file treekit did not write; the arrays by name; what
    separates a foreign file's names: '/' in a .npz (flatten_dict's), '.' in a .safetensors (HF's))."""
    if file_head(path) in ZIP_HEADS or path.path.endswith(".npz"):
        arrays = read_npz(path, max_bytes)
        raw = arrays.pop(RECORD, None)
        return (None if raw is None else parse_record(path, bytes(raw))), arrays, "/"
    from treekit.checkpoint import _safetensors

    size = file_size(path)
    if max_bytes is not None and size > max_bytes:  # (a header's claims never pass the file's size)
        raise ValueError(f"{path}: expected at most max_bytes={max_bytes} bytes, got {size}")
    try:
        tensors, metadata = _safetensors.read(path, mmap=mmap)
    except ValueError:
        if may_be_pickle(file_head(path)):
            raise PickleRefused(PICKLE_FILE) from None
        raise
    raw = metadata.get(RECORD)
    record = None if raw is None else parse_record(path, raw.encode("utf-8"), tensors, lambda a: dtype_name(a.dtype))
    return record, tensors, "."


def parse_record(path: Where, raw: bytes, tensors: dict[str, Any] | None = None, dtype: Any = None) -> Any:
    """The structure record; with the header's ``tensors`` by name (``dtype(tensor)``: its dtype's
    name), checked to agree with them: each named once, each dtype the record claims the header's."""
    from treekit.checkpoint._json import bounded_json

    where = str(path)
    record = bounded_json(raw, f"{where}: damaged or unreadable treekit structure record")
    entries = record.get("nodes") if isinstance(record, dict) else None
    if tensors is None or not isinstance(entries, list):
        return record  # (_saved.rebuild says what else is wrong with it)
    leaves = _saved.arrays_of(entries)
    names = [e if type(e) is str else e["array"] for e in leaves]
    try:
        agree = len(names) == len(tensors) and set(names) == tensors.keys()
    except TypeError:  # (an unhashable name)
        agree = False
    if not agree:
        used: set[str] = set()
        for name in names:
            if not isinstance(name, str) or name not in tensors or name in used:
                how = "twice" if name in used else "but the header has no such tensor"
                raise ValueError(f"{where}: the structure record names tensor {name!r:.80} {how}")
            used.add(name)
        extra = [name for name in tensors if name not in used]
        raise ValueError(f"{where}: tensors {extra[:3]} ({len(extra)} in all) are not in the structure record")
    for entry in leaves:
        if type(entry) is str or "dtype" not in entry:
            continue
        claim = "uint8" if "shape" in entry else entry["dtype"]  # (raw bytes: the record has the dtype)
        if dtype(tensors[entry["array"]]) != claim:
            raise ValueError(
                f"{where}: tensor {entry['array']!r:.80}: the structure record says dtype {claim!r:.40}, "
                f"the header {dtype(tensors[entry['array']])}"
            )
    return record


@uncollected
def load(
    path: str | os.PathLike[str] | Where,
    like: Any = None,
    *,
    mmap: bool = False,
    rename: Sequence[tuple[str, str]] = (),
    shardings: Any = None,
    max_bytes: int | None = None,
    strict: bool = True,
    dtype: Any = None,
    filesystem: Any = None,
    storage_options: dict[str, Any] | None = None,
) -> Any:
    r"""The tree :func:`save` wrote to ``path``; with ``like``, restored into that template.

    Array leaves come back as numpy arrays (numpy scalars as numpy scalars). A ``.npz`` that
    :func:`save` did not write (``numpy.savez``'s) loads as nested dicts, its keys split on
    ``/`` (as ``params.unflatten_dict``). Nothing is unpickled and nothing is imported: the
    modules defining the file's namedtuple and dataclass classes must be imported first (and
    registered classes registered). The only code a file can make run is a namedtuple class's
    constructor and a registered class's unflatten function: a record naming any other
    callable there (``os:system``) is refused.

    >>> import os, tempfile
    >>> import numpy as np
    >>> with tempfile.TemporaryDirectory() as d:
    ...     name = os.path.join(d, 'params.npz')
    ...     save(name, {'w': np.zeros((2, 3), np.float32), 'b': np.zeros(3, np.float32)})
    ...     load(name, like={'w': np.zeros((3, 3), np.float32), 'b': np.zeros(3, np.int8)})
    Traceback (most recent call last):
    ...
    treekit.StructureMismatchError: file['b']: expected dtype int8, got dtype float32 (values int8 cannot hold)
    file['w']: expected shape (3, 3), got shape (2, 3)

    Args:
        path: A file written by :func:`save`, any ``.npz`` or ``.safetensors`` file, or a
            Hugging Face ``model.safetensors.index.json`` (its shards are read from its folder);
            or its URL: a remote safetensors file's header is read first, then its arrays'
            bytes in ranges fetched concurrently (a ``.npz`` through its zip directory).
        like: A template: the result has its structure (node types, static fields, node
            data) and the file's leaves, found by key path; array leaves (or anything with
            ``shape`` and ``dtype``) must match the file's in shape, and get ``like``'s dtype
            where the values fit it (integers in its range, floats staying finite; never
            floats into integers), else the dtypes must match too. Needed for
            nodes only their class builds (registered with JAX only, as equinox Modules and
            nnx ``State``; or node data that is not plain data) and leaves the record could
            not hold. ``None``: the file's own structure. A file treekit did not write is
            matched by name: ``like``'s key paths joined by ``.`` (``model.layers.0.weight``)
            for safetensors files, by ``/`` for ``.npz`` files.
        mmap: Map the arrays of a safetensors file read-only instead of reading them: memory
            grows only by what is touched (a local file; a remote one is read).
        rename: ``(regex, replacement)`` rules applied in turn (``re.sub``) to the names of a
            file treekit did not write, before matching: ``[('^model[.]', ''), ('[.]weight$',
            '.kernel')]``.
        shardings: Where the arrays go: one ``jax.sharding.Sharding`` for all, or a tree of
            them (``None`` leaves stay numpy arrays) with the loaded tree's structure or a
            prefix of it, as :func:`treekit.sharding.shardings` gives. Each array is built
            with ``jax.make_array_from_callback`` from a memory map of the file, each device
            copying only its slice, so a file saved on one mesh loads onto any other. Without
            it, where ``like`` holds ``ShapeDtypeStruct`` with a sharding or jax arrays
            sharded over several devices, each leaf of ``like`` gives its sharding.
        max_bytes: The most bytes of arrays to read (``None``: no bound but the file's own,
            and for a ``.npz`` 100x its size, at least 256 MiB). Whatever it is, every size a
            file claims is checked against its real size before anything is allocated; a
            compressed ``.npz`` member can expand to about 1,000x its compressed bytes
            (deflate's most: a 1 MB file of zeros to 1 GB), so a ``.npz`` that inflates further
            than that default needs ``max_bytes`` given (``max_bytes=sys.maxsize``: no bound).
        strict: With ``like``: ``False`` restores what the file has and keeps ``like``'s
            leaves where it has none, and returns ``(tree, missing, unexpected)`` (a
            ``Partial``: ``like``'s key paths the file lacks, the file's leaves ``like`` has
            no place for), as PyTorch's ``load_state_dict(strict=False)``; shapes and dtypes
            that differ are errors all the same.
        dtype: Cast every floating-point array to this dtype (``jnp.bfloat16``, ``'float32'``)
            where its values fit (finite ones stay finite), as ``model.to(dtype)`` would;
            integer arrays are kept.
        filesystem: The pyarrow or fsspec filesystem ``path`` is on (see :func:`save`).
        storage_options: Options for the filesystem a URL names (see :func:`save`).

    Returns:
        The tree.

    Raises:
        StructureMismatchError: If the file differs from ``like``; labelled ``file``, its
            ``path`` the first difference, its message every difference (missing and extra
            paths, shapes, dtypes), one per line, the first 20 and then a count.
        PickleRefused: If the file is a pickle or holds an array stored with pickle (a
            ``ValueError``).
        ValueError: If the file is not a zip or a damaged one, or claims more than it holds,
            or more than ``max_bytes``, or its structure record is damaged or names a class
            that is not defined now.
        treekit.sharding.ShardingError: If a sharding does not fit its array's shape; every
            such array by key path, before any array's data is read.
        OSError: If the file cannot be read.
    """
    on_mesh = shardings is not None or (like is not None and any(map(placed_on_mesh, flatten(like)[0])))
    where = locate(path, filesystem, storage_options)
    loaded = _load(where, like, on_mesh or mmap, rename, max_bytes, strict)

    def finish(tree: Any) -> Any:  # (dtype=, then the devices: each array cast before it is placed)
        tree = tree if dtype is None else floating_as(tree, dtype)
        return place(tree, shardings, like) if on_mesh else tree

    return finish(loaded) if strict else loaded._replace(tree=finish(loaded.tree))


def _load(
    path: Where,
    like: Any,
    mmap: bool,
    rename: Sequence[tuple[str, str]],
    max_bytes: int | None,
    strict: bool = True,
) -> Any:
    if not strict and like is None:
        raise ValueError("strict=False: expected like= too (the template whose leaves the file may lack)")
    rules = rename_rules(rename)
    if path.path.endswith(".index.json"):  # Hugging Face's shards: {"weight_map": {name: file}}
        record, arrays, sep = None, read_index(path, mmap), "."
    else:
        record, arrays, sep = _read(path, mmap, max_bytes)
    if record is None:  # numpy.savez's ('a/b' names, flatten_dict's) or another safetensors file's ('a.b')
        arrays = {renamed(name, rules): array for name, array in arrays.items()}
        if like is not None:
            return restore(like, arrays, lambda p: keystr(p, simple=True, separator=sep), strict)
        if sep == ".":
            return arrays
        from treekit.ops import unflatten_dict

        return unflatten_dict(arrays)
    with damaged(path):
        if like is None:
            return _saved.rebuild(record, arrays)
        flat = _saved.by_path(record, arrays)
    return restore(like, flat, keystr, strict)


@contextlib.contextmanager
def damaged(path: Where) -> Iterator[None]:
    """What reading a structure record raises, as one ValueError naming the file (_saved.NeedsTemplate as itself)."""
    try:
        yield
    except _saved.NeedsTemplate:
        raise
    except _values.Undefined as exc:  # (an intact file, a class this process lacks)
        raise ValueError(f"{path}: {exc}") from None
    except (ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError) as exc:
        detail = f"{type(exc).__name__}: {exc}" if not isinstance(exc, ValueError) else str(exc)
        raise ValueError(f"{path}: damaged or unreadable treekit structure record ({printable(detail)})") from None

"""save and load: a tree in one ``.npz`` file, its structure recorded as JSON inside, never pickled.

The file is an ordinary ``.npz`` (a zip of ``.npy`` arrays, readable by ``numpy.load``): one
array per array leaf, named ``0``, ``1``, ... in leaf order, and ``__treekit__``, the UTF-8
bytes of a JSON record of the structure. The record lists the tree's nodes in post-order
(the order of :class:`~treekit.TreeDef`'s nodes), each leaf either a reference to its array or
its value (numbers, strings, bytes), each node its kind and what rebuilding it needs: dict
keys (of any JSON-able type, tagged, with their insertion order), the class of a namedtuple,
registered dataclass or custom node by import path, and their node data. Rebuilding is a loop
over that list: no recursion, no pickle, no import (a class is looked up in the modules
already imported).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

from treekit._describe import is_array
from treekit._errors import StructureMismatchError
from treekit._keys import KeyPath, keystr
from treekit._registry import NAMEDTUPLE, lookup
from treekit._traverse import flatten
from treekit._treedef import Node

__all__ = ["PickleRefused", "load", "load_leaf", "metadata", "read_npz", "save"]

_RECORD = "__treekit__"
_FORMAT = "treekit.save"
_VERSION = 1
_DICT_KINDS = ("dict", "ordereddict", "defaultdict")
_PICKLE_WHY = "unpickling runs code chosen by whoever wrote the file"


class PickleRefused(ValueError):
    """A file, or an array in it, that only unpickling could read; :func:`load` never unpickles.

    >>> import os, pickle, tempfile
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


class _Unsaveable(Exception):
    """A value the record cannot hold (raised inside encoding; turned into a TypeError with its path)."""


# -- values in the record ---------------------------------------------------------------------
def _ref(obj: Any) -> str:
    """``module:qualname`` of a class or function that can be found again by that name."""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        raise _Unsaveable(f"{type(obj).__name__} {obj!r:.60} (only module-level classes and functions save)")
    if _find(f"{module}:{qualname}") is not obj:
        raise _Unsaveable(f"{module}.{qualname}, which is not the object that name finds (redefined?)")
    return f"{module}:{qualname}"


def _find(ref: str) -> Any:
    """The object ``module:qualname`` names, from an already imported module; ``None`` if none."""
    module, _, qualname = ref.partition(":")
    obj: Any = sys.modules.get(module)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return obj


def _encode(value: Any) -> Any:
    """``value`` as JSON: None, bool, int, float and str as themselves, the rest tagged."""
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if kind is tuple or kind is list:
        return {kind.__name__: [_encode(v) for v in value]}
    if kind is dict:
        return {"dict": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if kind is complex:
        return {"complex": [value.real, value.imag]}
    if kind is bytes:
        return {"bytes": value.hex()}
    if isinstance(value, type) or callable(value):
        return {"ref": _ref(value)}
    raise _Unsaveable(f"{kind.__name__} {value!r:.60}")


def _decode(data: Any) -> Any:
    if not isinstance(data, dict):
        if isinstance(data, list):
            raise ValueError("untagged list")
        return data
    ((tag, body),) = data.items()
    if tag == "tuple":
        return tuple(_decode(v) for v in body)
    if tag == "list":
        return [_decode(v) for v in body]
    if tag == "dict":
        return {_decode(k): _decode(v) for k, v in body}
    if tag == "complex":
        return complex(*body)
    if tag == "bytes":
        return bytes.fromhex(body)
    if tag == "ref":
        obj = _find(body)
        if obj is None:
            module = body.partition(":")[0]
            raise ValueError(f"{body.replace(':', '.')} is not defined (import {module} before loading)")
        return obj
    raise ValueError(f"unknown tag {tag!r}")


# -- save -------------------------------------------------------------------------------------
def _key_impl(leaf: Any) -> str | None:
    """The PRNG implementation's name (``'threefry2x32'``) of a typed jax key array, else None."""
    if "jax" not in sys.modules or not hasattr(leaf, "dtype"):
        return None
    import jax

    if not isinstance(leaf, jax.Array) or not jax.numpy.issubdtype(leaf.dtype, jax.dtypes.prng_key):
        return None
    return str(jax.random.key_impl(leaf))


def _leaf_record(leaf: Any, path: str, arrays: dict[str, Any], stored: Any) -> Any:
    """The record of a leaf; an array leaf goes into ``arrays`` under a name made from its key
    path, as itself where ``stored(dtype)`` (the file layout has the dtype), else as raw bytes."""
    import numpy as np

    if is_array(leaf) or (hasattr(leaf, "__array__") and hasattr(leaf, "dtype")):
        record: dict[str, Any] = {"path": path}
        impl = _key_impl(leaf)
        if impl is not None:  # a typed key: its key data (uint32), and the implementation's name
            import jax

            leaf, record["key_impl"] = jax.random.key_data(leaf), impl
        try:  # (a jax array stays on its device until the writer copies it: one at a time)
            dtype = np.dtype(leaf.dtype)
            array = leaf
        except Exception:
            try:
                array = np.asarray(leaf)
            except Exception as exc:
                raise _Unsaveable(f"{type(leaf).__name__} numpy cannot read ({type(exc).__name__}: {exc})") from None
            dtype = array.dtype
        if dtype.hasobject:
            raise _Unsaveable(f"an array of dtype {dtype} (objects are saved only by pickle)")
        if dtype.byteorder == ">":  # files are little-endian
            dtype = dtype.newbyteorder("<")
            array = np.asarray(array).astype(dtype)
        name = path if path and path not in arrays else f"{path}#{len(arrays)}"
        record.update(array=name, dtype=dtype.name)
        if not stored(dtype):  # bfloat16, float8, int4 in a .npz; complex128 in a .safetensors
            record["shape"] = list(array.shape)
            array = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        arrays[name] = array
        if isinstance(leaf, np.generic):
            record["scalar"] = True
        return record
    try:
        return {"path": path, "value": _encode(leaf)}
    except _Unsaveable:  # a function made in a function, an object: like's leaf takes its place
        return {"path": path, "template": _name(type(leaf))}


def _node_record(ntype: Any, data: Any, arity: int) -> dict[str, Any]:
    kind = ntype.kind
    if kind in ("list", "tuple", "none"):
        return {"node": kind, "n": arity}
    if kind in _DICT_KINDS:
        keys = data[1] if kind == "defaultdict" else data
        record = {"node": kind, "n": arity, "keys": [_encode(k) for k in keys]}
        original = getattr(keys, "original", None)
        if original is not None:
            record["order"] = [_encode(k) for k in original]
        if kind == "defaultdict":
            if data[0] is not None and not isinstance(data[0], type):
                raise _Unsaveable(f"a defaultdict whose default_factory is {data[0]!r:.60} (a class or None saves)")
            record["factory"] = _encode(data[0])
        return record
    if ntype is NAMEDTUPLE:
        return {"node": "namedtuple", "n": arity, "type": _ref(data)}
    if kind == "jax":  # registered with JAX only: its node data is JAX's, rebuilt only into a template
        return {"node": "jax", "n": arity, "type": _name(ntype.type)}
    try:
        return {"node": "registered", "n": arity, "type": _ref(ntype.type), "data": _encode(data)}
    except _Unsaveable:  # node data that is not plain data: rebuilt only into a template
        return {"node": "template", "n": arity, "type": _name(ntype.type)}


def _name(cls: type) -> str:
    return f"{getattr(cls, '__module__', '?')}:{getattr(cls, '__qualname__', cls.__name__)}"


def _path_of_node(tree: Any, nodes: tuple[Node, ...], target: int) -> KeyPath:
    """The key path of post-order node ``target`` (for error messages only)."""
    path: list[Any] = []
    at, node = len(nodes) - 1, tree
    while at != target:
        ntype = lookup(type(node))
        assert ntype is not None
        children, _, keys = ntype.flatten(node, True)
        assert keys is not None
        end = at - 1
        for index in range(len(children) - 1, -1, -1):
            start = end - nodes[end][4] + 1
            if start <= target <= end:
                path.append(keys[index])
                node, at = children[index], end
                break
            end = start - 1
    return tuple(path)


def save(path: str | os.PathLike[str], tree: Any) -> None:
    """Write ``tree`` to the ``.npz`` file ``path``, atomically; :func:`load` reads it back.

    Keeps lists, tuples, ``None``, dicts with keys of any JSON-able type (in insertion order),
    ``OrderedDict``, ``defaultdict``, namedtuples, registered dataclasses and other
    registered nodes whose node data are numbers, strings, tuples, lists, dicts or
    module-level classes and functions. Any other node (registered with JAX only, as
    equinox Modules, nnx ``State``, flax's ``FrozenDict``; or with other node data) and any
    leaf the record cannot hold (a function defined in a function) is saved without what
    only its class knows: :func:`load` rebuilds it into a template (``like=``). Array leaves
    (numpy, jax: saved as numpy; typed PRNG keys as their key data and implementation;
    bfloat16, float8 and other ml_dtypes as raw bytes with their dtype) are stored as
    ``.npy`` members; numbers, strings and bytes in the structure record. Nothing is
    pickled. The file is written to a temporary file in the same folder and renamed over
    ``path`` only once complete: a crash or error leaves the old file (or none), never half
    of a new one.

    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     name = os.path.join(d, 'params.npz')
    ...     save(name, {'layers': [(1, 2.5), None], 3: 'relu'})
    ...     load(name)
    {'layers': [(1, 2.5), None], 3: 'relu'}

    Args:
        path: The file to write (used as given: no suffix is added).
        tree: Any pytree whose nodes and leaves are of the kinds above.

    Raises:
        TypeError: If an array leaf cannot be saved without pickle (an object array, one
            numpy cannot read); the message names its key path. Nothing is written then.
        OSError: If the file cannot be written.
    """
    import numpy as np

    from treekit import _safetensors

    target = os.fspath(path)
    npz = target.endswith(".npz")  # treekit 0.1's layout

    def stored(dtype: Any) -> bool:
        return dtype.num < 256 and dtype.kind != "V" if npz else _safetensors.code_of(dtype) is not None

    leaves, treedef, paths = flatten(tree, with_path=True)
    assert paths is not None
    nodes = treedef._nodes
    arrays: dict[str, Any] = {}
    records: list[Any] = []
    leaf_index = 0
    for at, (ntype, data, arity, _, _) in enumerate(nodes):
        try:
            if ntype is None:
                records.append(_leaf_record(leaves[leaf_index], keystr(paths[leaf_index]), arrays, stored))
                leaf_index += 1
            else:
                records.append(_node_record(ntype, data, arity))
        except _Unsaveable as exc:
            what = "a leaf" if ntype is None else f"a {ntype.type.__qualname__} node"
            where = _path_of_node(tree, nodes, at)
            raise TypeError(
                f"tree{keystr(where)}: expected {what} that saves without pickle, got {exc}"
            ) from None
    record = json.dumps({"format": _FORMAT, "version": _VERSION, "nodes": records}, allow_nan=True)
    if not npz:
        _safetensors.write(target, arrays.items(), {_RECORD: record})
        return
    arrays = {name: np.asarray(array) for name, array in arrays.items()}
    arrays[_RECORD] = np.frombuffer(record.encode("utf-8"), np.uint8)
    folder = os.path.dirname(os.path.abspath(target))
    handle, temp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(target)}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, target)
    except BaseException:
        os.unlink(temp)
        raise


# -- load -------------------------------------------------------------------------------------
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

    with open(path, "rb") as f:
        head = f.read(4)
    if head[:1] == b"\x80":  # every pickle of protocol 2 or later starts so
        raise PickleRefused(f"refusing to load a pickle file: {_PICKLE_WHY}")
    if head not in (b"PK\x03\x04", b"PK\x05\x06"):
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
                    raise PickleRefused(f"refusing to load array {key!r}, stored with pickle: {_PICKLE_WHY}") from None
    except (zipfile.BadZipFile, EOFError, OSError) as exc:
        if isinstance(exc, (FileNotFoundError, PermissionError)):
            raise
        raise ValueError(f"not a valid .npz (zip) file: {exc}") from None
    return out


def _rebuild(record: Any, arrays: dict[str, Any], leaf: Any = None) -> Any:
    if not isinstance(record, dict) or record.get("format") != _FORMAT or type(record.get("nodes")) is not list:
        raise ValueError("not a treekit.save structure record")
    if record.get("version") != _VERSION:
        raise ValueError(f"structure record version {record.get('version')!r}; this treekit reads {_VERSION}")
    stack: list[Any] = []
    firsts: list[str | None] = []  # the key path of each subtree's first leaf (for messages)
    for entry in record["nodes"]:
        if "template" in entry and "node" not in entry:
            raise NeedsTemplate(entry["template"], entry.get("path"), leaf=True)
        if "array" in entry or "value" in entry:
            stack.append((leaf or _leaf)(entry, arrays))
            firsts.append(entry.get("path"))
            continue
        kind, n = entry["node"], entry["n"]
        if type(n) is not int or not 0 <= n <= len(stack):
            raise ValueError(f"a {kind} node with {n!r} children")
        first = next((f for f in firsts[len(firsts) - n :] if f is not None), None)
        if kind in ("jax", "template"):
            raise NeedsTemplate(entry["type"], first)
        children = stack[len(stack) - n :]
        del stack[len(stack) - n :], firsts[len(firsts) - n :]
        stack.append(_node(kind, entry, children))
        firsts.append(first)
    if len(stack) != 1:
        raise ValueError(f"{len(stack)} trees, not one")
    return stack[0]


def _leaf(entry: dict[str, Any], arrays: dict[str, Any]) -> Any:
    if "value" in entry:
        return _decode(entry["value"])
    value = arrays[entry["array"]]
    if value.dtype.name != entry["dtype"]:
        value = value.view(_dtype(entry["dtype"]))
    if "shape" in entry:
        value = value.reshape(entry["shape"])
    if "key_impl" in entry:  # a typed PRNG key array: its key data, wrapped again
        import jax

        return jax.random.wrap_key_data(value, impl=entry["key_impl"])
    return value[()] if entry.get("scalar") else value


class NeedsTemplate(ValueError):
    """A saved node that only its class can rebuild (registered with JAX only, or with node data
    that is not plain data): :func:`load` needs ``like=``."""

    def __init__(self, ref: str, first: str | None, leaf: bool = False) -> None:
        what = "leaf" if leaf else "node holding"
        where = "the root" if first == "" else f"the {what} {first}" if first else "a node without leaves"
        super().__init__(
            f"file: {where} is a {ref.replace(':', '.')}, which only its class can build: pass like= "
            "(a tree of the same structure, such as the model made again) to load into it"
        )


def _dtype(name: str) -> Any:
    import numpy as np

    try:
        return np.dtype(name)
    except TypeError:
        import importlib  # bfloat16, float8_*: jax's extra dtypes (ml_dtypes), stored as raw bytes by .npy

        return np.dtype(getattr(importlib.import_module("ml_dtypes"), name))


def _node(kind: str, entry: dict[str, Any], children: list[Any]) -> Any:
    import collections

    if kind == "list":
        return children
    if kind == "tuple":
        return tuple(children)
    if kind == "none":
        return None
    if kind in _DICT_KINDS:
        keys = [_decode(k) for k in entry["keys"]]
        out = dict(zip(keys, children))
        if "order" in entry:
            out = {k: out[k] for k in map(_decode, entry["order"])}
        if kind == "ordereddict":
            return collections.OrderedDict(out)
        if kind == "defaultdict":
            factory = _decode(entry["factory"])
            if factory is not None and not isinstance(factory, type):
                raise ValueError(f"a defaultdict's default_factory must be a class or None, got {factory!r:.60}")
            return collections.defaultdict(factory, out)
        return out
    if kind not in ("namedtuple", "registered"):
        raise ValueError(f"unknown node kind {kind!r:.40}")
    cls = _decode({"ref": entry["type"]})
    if kind == "namedtuple":
        # Only a namedtuple class is called: a record naming any other callable (os.system)
        # must not run it, or a file could run code as a pickle can.
        if not (isinstance(cls, type) and issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple)):
            raise ValueError(f"{entry['type'].replace(':', '.')} is not a namedtuple class")
        return cls(*children)
    ntype = lookup(cls)
    if ntype is None or ntype.type is not cls:
        raise ValueError(f"{entry['type'].replace(':', '.')} is not registered as a pytree node")
    return ntype.unflatten(_decode(entry["data"]), children)


def _read(path: str | os.PathLike[str], mmap: bool) -> tuple[Any, dict[str, Any], str]:
    """(the structure record, or None for a file treekit did not write; the arrays by name; what
    separates a foreign file's names: '/' in a .npz (flatten_dict's), '.' in a .safetensors (HF's))."""
    with open(path, "rb") as f:
        head = f.read(4)
    if head[:1] == b"\x80":  # every pickle of protocol 2 or later starts so
        raise PickleRefused(f"refusing to load a pickle file: {_PICKLE_WHY}")
    if head in (b"PK\x03\x04", b"PK\x05\x06") or os.fspath(path).endswith(".npz"):
        arrays = read_npz(path)
        raw = arrays.pop(_RECORD, None)
        return (None if raw is None else _parse(path, bytes(raw))), arrays, "/"
    from treekit import _safetensors

    tensors, metadata = _safetensors.read(path, mmap=mmap)
    raw = metadata.get(_RECORD)
    found = {name: (array.dtype.name, array.shape) for name, array in tensors.items()}
    return (None if raw is None else _parse(path, raw.encode("utf-8"), found)), tensors, "."


def _parse(path: str | os.PathLike[str], raw: bytes, tensors: dict[str, tuple[str, Any]] | None = None) -> Any:
    """The structure record; with the header's ``tensors`` (name: (dtype, shape)), checked to agree with them."""
    try:
        record = json.loads(raw.decode("utf-8"))
    except ValueError as exc:
        raise ValueError(f"{os.fspath(path)}: damaged or unreadable treekit structure record ({exc})") from None
    entries = record.get("nodes") if isinstance(record, dict) else None
    if tensors is None or not isinstance(entries, list):
        return record  # (_rebuild says what else is wrong with it)
    used: set[str] = set()
    for entry in entries:
        name = entry.get("array") if isinstance(entry, dict) else None
        if name is None:
            continue
        if not isinstance(name, str) or name not in tensors or name in used:
            how = "twice" if name in used else "but the header has no such tensor"
            raise ValueError(f"{os.fspath(path)}: the structure record names tensor {name!r:.80} {how}")
        used.add(name)
        dtype = "uint8" if "shape" in entry else entry.get("dtype")  # (raw bytes: the record has the dtype)
        if tensors[name][0] != dtype:
            raise ValueError(
                f"{os.fspath(path)}: tensor {name!r:.80}: the structure record says dtype {dtype!r:.40}, "
                f"the header {tensors[name][0]}"
            )
    if extra := [name for name in tensors if name not in used]:
        where = os.fspath(path)
        raise ValueError(f"{where}: tensors {extra[:3]} ({len(extra)} in all) are not in the structure record")
    return record


def load(
    path: str | os.PathLike[str],
    like: Any = None,
    *,
    mmap: bool = False,
    rename: Sequence[tuple[str, str]] = (),
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
    ...     load(name, like={'w': np.zeros((3, 3), np.float32), 'b': np.zeros(3)})
    Traceback (most recent call last):
    ...
    treekit.StructureMismatchError: file['b']: expected dtype float64, got dtype float32
    file['w']: expected shape (3, 3), got shape (2, 3)

    Args:
        path: A file written by :func:`save`, any ``.npz`` or ``.safetensors`` file, or a
            Hugging Face ``model.safetensors.index.json`` (its shards are read from its folder).
        like: A template: the result has its structure (node types, static fields, node
            data) and the file's leaves, found by key path; array leaves (or anything with
            ``shape`` and ``dtype``) must match the file's in shape and dtype. Needed for
            nodes only their class builds (registered with JAX only, as equinox Modules and
            nnx ``State``; or node data that is not plain data) and leaves the record could
            not hold. ``None``: the file's own structure. A file treekit did not write is
            matched by name: ``like``'s key paths joined by ``.`` (``model.layers.0.weight``)
            for safetensors files, by ``/`` for ``.npz`` files.
        mmap: Map the arrays of a safetensors file read-only instead of reading them: memory
            grows only by what is touched.
        rename: ``(regex, replacement)`` rules applied in turn (``re.sub``) to the names of a
            file treekit did not write, before matching: ``[('^model[.]', ''), ('[.]weight$',
            '.kernel')]``.

    Returns:
        The tree.

    Raises:
        StructureMismatchError: If the file differs from ``like``; labelled ``file``, its
            ``path`` the first difference, its message every difference (missing and extra
            paths, shapes, dtypes), one per line, the first 20 and then a count.
        PickleRefused: If the file is a pickle or holds an array stored with pickle (a
            ``ValueError``).
        ValueError: If the file is not a zip or a damaged one, or its structure record is
            damaged or names a class that is not defined now.
        OSError: If the file cannot be read.
    """
    rules = _rules(rename)
    if os.fspath(path).endswith(".index.json"):  # Hugging Face's shards: {"weight_map": {name: file}}
        record, arrays, sep = None, _shards(path, mmap), "."
    else:
        record, arrays, sep = _read(path, mmap)
    if record is None:  # numpy.savez's ('a/b' names, flatten_dict's) or another safetensors file's ('a.b')
        arrays = {_renamed(name, rules): array for name, array in arrays.items()}
        if like is not None:
            return _restore(like, arrays, lambda p: keystr(p, simple=True, separator=sep))
        if sep == ".":
            return arrays
        from treekit.params import unflatten_dict

        return unflatten_dict(arrays)
    with _damaged(path):
        if like is None:
            return _rebuild(record, arrays)
        flat = _by_path(record, arrays)
    return _restore(like, flat, keystr)


@contextlib.contextmanager
def _damaged(path: str | os.PathLike[str]) -> Iterator[None]:
    """What reading a structure record raises, as one ValueError naming the file (NeedsTemplate as itself)."""
    try:
        yield
    except NeedsTemplate:
        raise
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        detail = f"{type(exc).__name__}: {exc}" if not isinstance(exc, ValueError) else str(exc)
        raise ValueError(f"{os.fspath(path)}: damaged or unreadable treekit structure record ({detail})") from None


def _header(path: str | os.PathLike[str]) -> tuple[Any, Any]:
    """(the structure record or None, the safetensors header) of a file, read from its header alone."""
    from treekit import _safetensors

    with open(path, "rb") as f:
        head = f.read(4)
    if head[:1] == b"\x80" or head in (b"PK\x03\x04", b"PK\x05\x06"):
        kind = "pickle" if head[:1] == b"\x80" else ".npz"
        raise ValueError(
            f"{os.fspath(path)}: expected a .safetensors file (treekit.save's layout), got a {kind}; "
            "treekit.load reads a .npz whole"
        )
    header = _safetensors.read_header(path)
    raw = header.metadata.get(_RECORD)
    if raw is None:
        return None, header
    found = {name: (_safetensors.dtype_of(t.dtype).name, t.shape) for name, t in header.tensors.items()}
    return _parse(path, raw.encode("utf-8"), found), header


def metadata(path: str | os.PathLike[str]) -> Any:
    """The tree saved in the ``.safetensors`` file ``path``, with :class:`~treekit.ShapeDtype` leaves for
    its arrays, read from the file's header alone (no array bytes, no jax).

    Other leaves come back as saved; typed PRNG keys as the shape and dtype of their key data.
    Where the structure needs a template (nodes only their class builds: see :func:`load`),
    and for a safetensors file treekit did not write, a flat dict from each array's name (its
    key path, as :func:`treekit.keystr` writes it) to its ``ShapeDtype``.

    >>> import os, tempfile
    >>> import numpy as np
    >>> with tempfile.TemporaryDirectory() as d:
    ...     name = os.path.join(d, 'ckpt.safetensors')
    ...     save(name, {'w': np.zeros((2, 3), np.float32), 'step': 10})
    ...     metadata(name)
    {'w': ShapeDtype(shape=(2, 3), dtype='float32'), 'step': 10}

    Raises:
        ValueError: For a damaged file or one of another kind, naming the file and what is wrong.
    """
    from treekit import _safetensors
    from treekit._specs import ShapeDtype

    record, header = _header(path)
    specs = {
        name: ShapeDtype(t.shape, _safetensors.dtype_of(t.dtype).name) for name, t in header.tensors.items()
    }

    def spec(entry: dict[str, Any], _: Any) -> Any:
        if "value" in entry:
            return _decode(entry["value"])
        found = specs[entry["array"]]
        return ShapeDtype(tuple(entry.get("shape", found.shape)), entry["dtype"])

    if record is None:
        return specs
    try:
        with _damaged(path):
            return _rebuild(record, specs, spec)
    except NeedsTemplate:
        leaves = [e for e in record["nodes"] if "node" not in e and "array" in e]
        return {e["path"]: spec(e, None) for e in leaves}


def load_leaf(path: str | os.PathLike[str], key_path: Any, *, mmap: bool = False) -> Any:
    """One array leaf of the ``.safetensors`` file ``path``, reading only its bytes.

    ``key_path`` is the leaf's key path: a tuple of key entries (as ``tree_flatten_with_path``
    gives), or its :func:`treekit.keystr` string (``"['params']['w']"``); for a safetensors
    file treekit did not write, the tensor's name.

    >>> import os, tempfile
    >>> import numpy as np
    >>> from treekit import DictKey
    >>> with tempfile.TemporaryDirectory() as d:
    ...     name = os.path.join(d, 'ckpt.safetensors')
    ...     save(name, {'params': {'w': np.arange(3.0), 'b': np.zeros(2)}})
    ...     load_leaf(name, "['params']['w']"), load_leaf(name, (DictKey('params'), DictKey('b')))
    (array([0., 1., 2.]), array([0., 0.]))

    Args:
        path: The file.
        key_path: The leaf's key path (entries or keystr), or a tensor's name.
        mmap: Map the array read-only instead of reading it.

    Raises:
        KeyError: If no array leaf has that key path; the message lists a few that do.
        ValueError: For a damaged file or one of another kind.
    """
    from treekit import _safetensors

    record, header = _header(path)
    want = key_path if isinstance(key_path, str) else keystr(tuple(key_path))
    if record is None:
        entry = {"array": want, "dtype": None}
    else:
        found = [e for e in record.get("nodes", ()) if isinstance(e, dict) and "array" in e and e.get("path") == want]
        entry = found[0] if found else {"array": None}
    name = entry["array"]
    if not isinstance(name, str) or name not in header.tensors:
        names = [e["path"] for e in record["nodes"] if "array" in e] if record is not None else list(header.tensors)
        raise KeyError(f"{os.fspath(path)}: no array leaf at {want!r} (there are {len(names)}, e.g. {names[:3]})")
    array = _safetensors.read_tensor(path, header, name, mmap=mmap)
    return array if record is None else _leaf(entry, {name: array})


_KINDS = ("list", "tuple", "none", *_DICT_KINDS, "namedtuple", "registered", "jax", "template")


def _check_nodes(entries: list[Any]) -> None:
    """The post-order records make one tree of known node kinds (as :func:`_rebuild` would find)."""
    depth = 0
    for entry in entries:
        if "node" not in entry:
            depth += 1
            continue
        kind, n = entry["node"], entry["n"]
        if kind not in _KINDS:
            raise ValueError(f"unknown node kind {kind!r:.40}")
        if type(n) is not int or not 0 <= n <= depth:
            raise ValueError(f"a {kind} node with {n!r} children")
        depth += 1 - n
    if depth != 1:
        raise ValueError(f"{depth} trees, not one")


def _rules(rename: Sequence[tuple[str, str]]) -> list[tuple[re.Pattern[str], str]]:
    rules = []
    for rule in rename:
        if not (isinstance(rule, tuple) and len(rule) == 2 and all(isinstance(r, str) for r in rule)):
            raise TypeError(f"rename: expected (regex, replacement) pairs of str, got {rule!r:.60}")
        try:
            rules.append((re.compile(rule[0]), rule[1]))
        except re.error as exc:
            raise ValueError(f"rename: {rule[0]!r} is not a regular expression ({exc})") from None
    return rules


def _renamed(name: str, rules: list[tuple[re.Pattern[str], str]]) -> str:
    for pattern, replacement in rules:  # each rule in turn, on what the ones before made
        name = pattern.sub(replacement, name)
    return name


def _shards(index: str | os.PathLike[str], mmap: bool) -> dict[str, Any]:
    """The tensors of a Hugging Face ``model.safetensors.index.json`` and its shard files, by name."""
    from treekit import _safetensors

    where = os.fspath(index)
    if os.path.getsize(where) > _safetensors.MAX_HEADER:
        raise ValueError(f"{where}: expected an index of at most {_safetensors.MAX_HEADER} bytes, got more")
    try:
        with open(where, "rb") as f:
            weight_map = json.loads(f.read().decode("utf-8"))["weight_map"]
        assert isinstance(weight_map, dict) and all(isinstance(v, str) for v in weight_map.values())
    except (ValueError, KeyError, TypeError, AssertionError):
        raise ValueError(f"{where}: expected JSON with a \"weight_map\" of tensor names to file names") from None
    folder, out = os.path.dirname(os.path.abspath(where)), {}
    for shard in dict.fromkeys(weight_map.values()):
        if os.path.basename(shard) != shard:
            raise ValueError(f"{where}: expected shard file names in its folder, got {shard!r}")
        tensors, _ = _safetensors.read(os.path.join(folder, shard), mmap=mmap)
        out.update({name: tensors[name] for name in tensors if weight_map.get(name) == shard})
    if missing := [name for name in weight_map if name not in out]:
        raise ValueError(f"{where}: tensors {missing[:3]} ({len(missing)} in all) are not in the shards it names")
    return {name: out[name] for name in weight_map}


def _by_path(record: Any, arrays: dict[str, Any]) -> dict[str, Any]:
    """The file's leaves by ``keystr`` of their key paths (files of treekit 0.1 record none: rebuilt)."""
    entries = record.get("nodes") if isinstance(record, dict) else None
    leaves = [e for e in entries or () if isinstance(e, dict) and "node" not in e]
    if leaves and all(isinstance(e.get("path"), str) for e in leaves):
        _check_nodes(entries or [])  # (like= gives the structure; a damaged record is refused all the same)
        return {e["path"]: _TEMPLATE if "template" in e else _leaf(e, arrays) for e in leaves}
    found, _, paths = flatten(_rebuild(record, arrays), with_path=True)
    assert paths is not None
    return {keystr(p): leaf for p, leaf in zip(paths, found)}


_SHOWN = 20  # differences listed in one error; the rest are counted


def _restore(like: Any, flat: dict[str, Any], name: Any) -> Any:
    """``like``'s structure holding the leaves of ``flat`` (found by ``name(key path)``), checked."""
    wanted, treedef, paths = flatten(like, with_path=True)
    assert paths is not None
    out: list[Any] = []
    problems: list[tuple[KeyPath, str, str]] = []
    used = set()
    for path, want in zip(paths, wanted):
        key = name(path)
        if key not in flat:
            problems.append((path, _what(want), "nothing (no such path in the file)"))
            out.append(None)
            continue
        used.add(key)
        value, problem = _fit(flat[key], want)
        if problem is not None:
            problems.append((path, *problem))
        out.append(value)
    extra = [key for key in flat if key not in used]
    if problems or extra:
        _mismatch(problems, [(key, _what(flat[key])) for key in extra])
    return treedef.unflatten(out)


def _mismatch(problems: list[tuple[KeyPath, str, str]], extra: list[tuple[str, str]]) -> NoReturn:
    """One error for every difference, one a line: like's paths first, then the file's extra ones."""
    lines = [f"file{keystr(path)}: expected {expected}, got {got}" for path, expected, got in problems]
    lines += [f"file{key}: expected nothing (like has no such path), got {got}" for key, got in extra]
    rest = "\n".join(lines[1:_SHOWN]) + (f"\n... and {len(lines) - _SHOWN} more" if len(lines) > _SHOWN else "")
    path, expected, got = problems[0] if problems else ((), f"no leaf at {extra[0][0]}", extra[0][1])
    raise StructureMismatchError("file", path, expected, got, None, rest or None)


def _what(leaf: Any) -> str:
    if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
        return f"an array of shape {tuple(leaf.shape)} and dtype {leaf.dtype}"
    return f"{type(leaf).__name__} {leaf!r:.40}"


_TEMPLATE = object()  # a leaf the file did not keep (a function made in a function): like's is used


def _fit(got: Any, want: Any) -> tuple[Any, tuple[str, str] | None]:
    """The file's leaf ``got`` for ``like``'s leaf ``want``, and what differs (None: nothing)."""
    if got is _TEMPLATE:
        return want, None
    if not (hasattr(want, "shape") and hasattr(want, "dtype")):
        return got, None  # numbers, strings, functions: the file's
    if not (hasattr(got, "shape") and hasattr(got, "dtype")):
        return got, (_what(want), _what(got))
    if tuple(got.shape) != tuple(want.shape):
        return got, (f"shape {tuple(want.shape)}", f"shape {tuple(got.shape)}")
    if str(got.dtype) != str(want.dtype):
        import numpy as np

        target = _dtype(str(want.dtype)) if "key<" not in str(want.dtype) else None
        if target is not None and got.dtype.kind == "V" and got.dtype.itemsize == target.itemsize:
            return got.view(target), None  # raw bytes (numpy.savez of bfloat16): like's dtype
        if target is None or np.dtype(got.dtype) != target:
            return got, (f"dtype {want.dtype}", f"dtype {got.dtype}")
    return got, None

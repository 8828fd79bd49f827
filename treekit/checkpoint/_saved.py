"""The structure record of a saved tree: what each node and leaf of a tree becomes in JSON, and
the tree rebuilt from it (treekit.save and load write and read it; treekit/checkpoint/_io.py owns the files).

The record lists the tree's nodes in post-order (the order of :class:`~treekit.TreeDef`'s
nodes). An array leaf is the name of its array, which is its key path (a JSON string); one
the name alone does not describe (raw bytes of a dtype the file has no code for, a typed key,
a numpy scalar, a path another leaf took) is an object with its path, its array's name and
what else rebuilding needs. Any other leaf is its value (numbers, strings, bytes,
module-level classes and functions, tagged) or, for a leaf the record cannot hold, only its
class's name. Each node has its kind and what rebuilding it needs: dict keys (of any JSON-able
type, tagged, with their insertion order), the class of a namedtuple, registered dataclass or
custom node by import path, and their node data; a node only its class can build (registered
with JAX only, or node data that is not plain data) has its class's name, and is rebuilt only
into a template. Rebuilding is a loop over that list: no recursion, no pickle, no import (a
class is looked up in the modules already imported). Version 1 (treekit 0.1's ``.npz`` files)
has no key paths: each array leaf is ``{"array": name, "dtype": ...}``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from treekit.checkpoint._values import Unsaveable, decode, decoded_keys, encode, encoded_keys, ref
from treekit.core import (
    NAMEDTUPLE,
    KeyPath,
    Node,
    dtype_name,
    flatten,
    is_array,
    is_key_dtype,
    jax_alone,
    keystr,
    lookup,
    printable,
)

FORMAT = "treekit.save"
VERSION = 2
READS = (1, 2)  # 1: treekit 0.1, no key paths
DICT_KINDS = ("dict", "ordereddict", "defaultdict")
KINDS = ("list", "tuple", "none", *DICT_KINDS, "namedtuple", "registered", "jax", "template")
TEMPLATE = object()  # a leaf the file did not keep (a function made in a function): like's is used


class NoData(Unsaveable):
    """An array leaf with no data to save: abstract (a shape and dtype alone) or deleted."""


def key_impl(leaf: Any) -> str | None:
    """The PRNG implementation's name (``'threefry2x32'``) of a typed jax key array, else None."""
    if "jax" not in sys.modules or not hasattr(leaf, "dtype"):
        return None
    import jax

    if not isinstance(leaf, jax.Array) or not is_key_dtype(leaf.dtype):
        return None
    return str(jax.random.key_impl(leaf))


def leaf_record(leaf: Any, path: str, name: str, arrays: dict[str, Any], stored: Any) -> Any:
    """The record of a leaf at ``path`` (its keystr); an array leaf goes into ``arrays`` as
    ``name``, as itself where ``stored(dtype)`` (the file layout has the dtype), else as raw bytes."""
    import numpy as np

    if type(leaf) is np.ndarray and leaf.dtype.byteorder != ">" and not leaf.dtype.hasobject and stored(leaf.dtype):
        arrays[name] = leaf
        return name if name == path else {"path": path, "array": name}
    if is_array(leaf) or (hasattr(leaf, "__array__") and hasattr(leaf, "dtype")):
        deleted = getattr(leaf, "is_deleted", None)
        if callable(deleted) and deleted():
            raise NoData("a deleted jax.Array (donated to a jitted step, or deleted): save it before that step")
        if not hasattr(leaf, "__array__"):
            raise NoData(f"a {type(leaf).__name__}, a shape and dtype alone: a template is for load(like=...)")
        record: dict[str, Any] = {"path": path}
        impl = key_impl(leaf)
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
                raise Unsaveable(f"{type(leaf).__name__} numpy cannot read ({type(exc).__name__}: {exc})") from None
            dtype = array.dtype
        if dtype.hasobject:
            raise Unsaveable(f"an array of dtype {dtype} (objects are saved only by pickle)")
        if dtype.byteorder == ">":  # files are little-endian
            dtype = dtype.newbyteorder("<")
            array = np.asarray(array).astype(dtype)
        record["array"] = name
        if not stored(dtype):  # bfloat16, float8, int4 in a .npz; complex128 in a .safetensors
            record.update(dtype=dtype_name(dtype), shape=list(array.shape))
            array = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        arrays[name] = array
        if isinstance(leaf, np.generic):
            record["scalar"] = True
        return name if record == {"path": name, "array": name} else record
    try:
        return {"path": path, "value": encode(leaf)}
    except Unsaveable:  # a function made in a function, an object: like's leaf takes its place
        return {"path": path, "template": class_name(type(leaf))}


NAMES = (".", "/", "keystr")  # how save names tensors: key entries joined by "." or "/", or keystr


def tensor_names(paths: list[KeyPath], names: str) -> list[str]:
    """The tensor name of each leaf at ``paths``, as ``save(names=...)`` makes them: plain
    strings as other tools write them (``params.Dense_0.bias``), or keystrs.

    >>> from treekit.core import DictKey, SequenceKey
    >>> tensor_names([(DictKey('h'), SequenceKey(0), DictKey('attn.bias'))], '.')
    ['h.0.attn.bias']
    """
    if names not in NAMES:
        raise ValueError(f"names: expected one of {', '.join(map(repr, NAMES))}, got {names!r:.40}")
    if names == "keystr":
        return [keystr(p) or "#0" for p in paths]  # ('#0': the root, a tree that is one array)
    return [keystr(p, simple=True, separator=names) or "tensor" for p in paths]


def _clash(first: KeyPath, second: KeyPath, name: str, names: str) -> ValueError:
    return ValueError(
        f"tree{keystr(first)} and tree{keystr(second)}: expected array leaves with distinct tensor "
        f"names, got {name!r} for both (names={names!r}): pass names='keystr' or another separator"
    )


def node_record(ntype: Any, data: Any, arity: int) -> dict[str, Any]:
    kind = ntype.kind
    if kind in ("list", "tuple", "none"):
        return {"node": kind, "n": arity}
    if kind in DICT_KINDS:
        keys = data[1] if kind == "defaultdict" else data
        record = {"node": kind, "n": arity, "keys": encoded_keys(keys)}
        original = getattr(keys, "original", None)
        if original is not None:
            record["order"] = encoded_keys(original)
        if kind == "defaultdict":
            if data[0] is not None and not isinstance(data[0], type):
                raise Unsaveable(f"a defaultdict whose default_factory is {data[0]!r:.60} (a class or None saves)")
            record["factory"] = encode(data[0])
        return record
    if ntype is NAMEDTUPLE:
        return {"node": "namedtuple", "n": arity, "type": ref(data)}
    if kind == "jax" or jax_alone(ntype.type):  # registered with JAX alone: rebuilt only into a template
        return {"node": "jax", "n": arity, "type": class_name(ntype.type)}  # (whichever was imported first)
    try:
        return {"node": "registered", "n": arity, "type": ref(ntype.type), "data": encode(data)}
    except Unsaveable:  # node data that is not plain data: rebuilt only into a template
        return {"node": "template", "n": arity, "type": class_name(ntype.type)}


def class_name(cls: type) -> str:
    return f"{getattr(cls, '__module__', '?')}:{getattr(cls, '__qualname__', cls.__name__)}"


def path_of_node(tree: Any, nodes: tuple[Node, ...], target: int) -> KeyPath:
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


def rebuild(record: Any, arrays: dict[str, Any], leaf: Any = None) -> Any:
    entries = nodes_of(record)
    stack: list[Any] = []
    firsts: list[str | None] = []  # the key path of each subtree's first leaf (for messages)
    value = leaf or leaf_value
    for entry in entries:
        if type(entry) is str:
            stack.append(value(entry, arrays))
            firsts.append(entry)
            continue
        if "node" not in entry:
            if "template" in entry:
                raise NeedsTemplate(entry["template"], entry.get("path"), leaf=True)
            stack.append(value(entry, arrays))
            firsts.append(entry.get("path"))
            continue
        kind, n = entry["node"], entry["n"]
        if type(n) is not int or not 0 <= n <= len(stack):
            raise ValueError(f"a {kind} node with {n!r} children")
        first = firsts[-n] if n else None
        if first is None and n:  # (a first child without leaves: the first leaf of the others)
            first = next((f for f in firsts[len(firsts) - n :] if f is not None), None)
        if kind in ("jax", "template"):
            raise NeedsTemplate(entry["type"], first)
        children = stack[len(stack) - n :]
        del stack[len(stack) - n :], firsts[len(firsts) - n :]
        stack.append(node_value(kind, entry, children))
        firsts.append(first)
    if len(stack) != 1:
        raise ValueError(f"{len(stack)} trees, not one")
    return stack[0]


def nodes_of(record: Any) -> list[Any]:
    """The post-order entries of a structure record of a version this treekit reads."""
    if not isinstance(record, dict) or record.get("format") != FORMAT or type(record.get("nodes")) is not list:
        raise ValueError("not a treekit.save structure record")
    if record.get("version") not in READS:
        raise ValueError(f"structure record version {record.get('version')!r}; this treekit reads {READS}")
    nodes: list[Any] = record["nodes"]
    return nodes


def leaf_value(entry: Any, arrays: dict[str, Any]) -> Any:
    if type(entry) is str:
        return arrays[entry]
    if len(entry) == 2 and "path" in entry and "array" in entry:  # (an array renamed: most, as it is)
        return arrays[entry["array"]]
    if "value" in entry:
        return decode(entry["value"])
    value = arrays[entry["array"]]
    if "dtype" in entry and dtype_name(value.dtype) != entry["dtype"]:
        value = value.view(dtype_named(entry["dtype"]))
    if "shape" in entry:
        value = value.reshape(entry["shape"])
    if "key_impl" in entry:  # a typed PRNG key array: its key data, wrapped again
        import jax

        return jax.random.wrap_key_data(value, impl=entry["key_impl"])
    return value[()] if entry.get("scalar") else value


def arrays_of(entries: list[Any]) -> list[Any]:
    """The array leaves' entries (names, or objects with ``"array"``), in order."""
    return [e for e in entries if type(e) is str or (type(e) is dict and "array" in e)]


def path_of(entry: Any) -> Any:
    """A leaf entry's key path (``keystr``); ``None`` in version 1."""
    return entry if type(entry) is str else entry.get("path")


class NeedsTemplate(ValueError):
    """A saved node that only its class can rebuild (registered with JAX only, or with node data
    that is not plain data): :func:`load` needs ``like=``."""

    def __init__(self, ref: str, first: str | None, leaf: bool = False) -> None:
        what = "leaf" if leaf else "node holding"
        where = "the root" if first == "" else f"the {what} {first}" if first else "a node without leaves"
        what, where = printable(ref.replace(":", ".")), printable(where)  # (a file's text)
        super().__init__(
            f"file: {where} is a {what}, which only its class can build: pass like= "
            "(a tree of the same structure, such as the model made again) to load into it"
        )


def dtype_named(name: str) -> Any:
    import numpy as np

    try:
        return np.dtype(name)
    except TypeError:
        import importlib  # bfloat16, float8_*: jax's extra dtypes (ml_dtypes), stored as raw bytes by .npy

        return np.dtype(getattr(importlib.import_module("ml_dtypes"), name))


def node_value(kind: str, entry: dict[str, Any], children: list[Any]) -> Any:
    import collections

    if kind == "list":
        return children
    if kind == "tuple":
        return tuple(children)
    if kind == "none":
        return None
    if kind in DICT_KINDS:
        out = dict(zip(decoded_keys(entry["keys"]), children))
        if len(out) != len(children):  # (a key listed twice would drop a leaf)
            raise ValueError(f"a {kind} node listing a key twice ({len(children)} children, {len(out)} keys)")
        if "order" in entry:
            ordered = {k: out[k] for k in decoded_keys(entry["order"])}
            if len(ordered) != len(out):
                raise ValueError(f"a {kind} node whose order lists {len(ordered)} of its {len(out)} keys")
            out = ordered
        if kind == "ordereddict":
            return collections.OrderedDict(out)
        if kind == "defaultdict":
            factory = decode(entry["factory"])
            if factory is not None and not isinstance(factory, type):
                raise ValueError(f"a defaultdict's default_factory must be a class or None, got {factory!r:.60}")
            return collections.defaultdict(factory, out)
        return out
    if kind not in ("namedtuple", "registered"):  # (jax and template nodes are rebuilt only into like)
        raise ValueError(f"unknown node kind {kind!r:.40}")
    cls = decode({"ref": entry["type"]})
    if kind == "namedtuple":
        # Only a namedtuple class is called: a record naming any other callable (os.system)
        # must not run it, or a file could run code as a pickle can.
        if not (isinstance(cls, type) and issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple)):
            raise ValueError(f"{printable(entry['type'].replace(':', '.'))} is not a namedtuple class")
        return cls(*children)
    ntype = lookup(cls)
    if ntype is None or ntype.type is not cls:
        raise ValueError(f"{printable(entry['type'].replace(':', '.'))} is not registered as a pytree node")
    if ntype.kind == "jax":  # saved as a dataclass; here jax alone knows it, as treekit cannot read
        raise ValueError(
            f"{printable(entry['type'].replace(':', '.'))} is registered with JAX only, before treekit was imported: "
            "import treekit first, or register it with treekit too, or load with like="
        )
    return ntype.unflatten(decode(entry["data"]), children)


def check_nodes(entries: list[Any]) -> None:
    """The post-order records make one tree of known node kinds (as :func:`rebuild` would find)."""
    depth = 0
    for entry in entries:
        if type(entry) is str or "node" not in entry:
            depth += 1
            continue
        kind, n = entry["node"], entry["n"]
        if kind not in KINDS:
            raise ValueError(f"unknown node kind {kind!r:.40}")
        if type(n) is not int or not 0 <= n <= depth:
            raise ValueError(f"a {kind} node with {n!r} children")
        depth += 1 - n
    if depth != 1:
        raise ValueError(f"{depth} trees, not one")


def by_path(record: Any, arrays: dict[str, Any]) -> dict[str, Any]:
    """The file's leaves by ``keystr`` of their key paths (files of treekit 0.1 record none: rebuilt)."""
    entries = nodes_of(record)
    if record["version"] == 1:
        found, _, paths = flatten(rebuild(record, arrays), with_path=True)
        assert paths is not None
        return {keystr(p): leaf for p, leaf in zip(paths, found)}
    check_nodes(entries)  # (like= gives the structure; a damaged record is refused all the same)
    out = {}
    for e in entries:
        if type(e) is str:
            out[e] = arrays[e]
        elif "node" not in e:
            out[e["path"]] = TEMPLATE if "template" in e else leaf_value(e, arrays)
    return out


def record_of(
    tree: Any, stored: Any, names: str = ".", fetch: Callable[[list[Any]], list[Any]] = list
) -> tuple[str, dict[str, Any]]:
    """The structure record of ``tree`` (JSON) and its arrays by name (:func:`tensor_names`);
    ``stored(dtype)`` says whether the file layout holds a dtype as itself (else: raw bytes,
    the dtype recorded); ``fetch`` is given the leaves first (treekit.save's moves the small
    device arrays to the host in packs).

    >>> import json
    >>> record, arrays = record_of({'w': 1.5, 'n': None}, lambda dtype: True)
    >>> for entry in json.loads(record)['nodes']:  # post-order; dict keys sorted, then their order
    ...     print(entry)
    {'node': 'none', 'n': 0}
    {'path': "['w']", 'value': 1.5}
    {'node': 'dict', 'n': 2, 'keys': ['n', 'w'], 'order': ['w', 'n']}
    >>> arrays
    {}

    Raises:
        TypeError: If an array leaf cannot be saved without pickle; the message names its key path.
    """
    leaves, treedef, paths = flatten(tree, with_path=True)
    assert paths is not None
    leaves = fetch(leaves)
    named = tensor_names(paths, names)
    nodes = treedef._nodes
    arrays: dict[str, Any] = {}
    owners: dict[str, int] = {}  # each tensor name's leaf
    records: list[Any] = []
    leaf_index = 0
    for at, (ntype, data, arity, _, _) in enumerate(nodes):
        try:
            if ntype is None:
                name = named[leaf_index]
                entry = leaf_record(leaves[leaf_index], keystr(paths[leaf_index]), name, arrays, stored)
                if type(entry) is str or "array" in entry:  # (an array leaf: its name must be its own)
                    if name in owners:
                        raise _clash(paths[owners[name]], paths[leaf_index], name, names)
                    owners[name] = leaf_index
                records.append(entry)
                leaf_index += 1
            else:
                records.append(node_record(ntype, data, arity))
        except Unsaveable as exc:
            what = "a leaf" if ntype is None else f"a {ntype.type.__qualname__} node"
            where = paths[leaf_index] if ntype is None else path_of_node(tree, nodes, at)
            expected = "an array with data" if isinstance(exc, NoData) else f"{what} that saves without pickle"
            raise TypeError(f"tree{keystr(where)}: expected {expected}, got {exc}") from None
    record = {"format": FORMAT, "version": VERSION, "nodes": records}
    return json.dumps(record, allow_nan=True, separators=(",", ":")), arrays

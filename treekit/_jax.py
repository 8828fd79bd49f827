"""The bridge between treekit's registry and JAX's, both ways; the only module that imports jax.

It never imports jax itself: it waits until the user does.

* treekit -> JAX: every node type registered with treekit is registered with JAX too, with the
  same children, node data and key entries (converted to JAX's key classes), so ``jax.jit``,
  ``jax.grad``, ``jax.vmap`` and ``jax.tree_util`` see treekit's nodes exactly as treekit does.
  Registrations made before jax is imported are mirrored the moment ``import jax`` finishes:
  an import hook on ``sys.meta_path`` wraps jax's loader in every spec found for ``jax``
  (also by ``importlib.util.find_spec``, or in another thread), and is inert once bridged.
* JAX -> treekit: a type that treekit does not know (not registered, not a namedtuple) and
  that JAX does is traversed through JAX's public API: its children and key entries are the
  ones ``jax.tree_util`` gives, and its node data is JAX's one-level treedef of it.
* Registered with both: each library uses the registration made with it. A type registered
  with JAX before treekit keeps JAX's entry in JAX (treekit's mirror is skipped); one that
  treekit mirrored before JAX was told about it gets JAX's functions from then on, where JAX
  alone would raise "Duplicate custom PyTreeDef type registration" (``_watch_jax``).
* Later JAX registrations: treekit forgets the answers it remembered for unregistered types
  (one of them may have been this type, seen as a leaf), so the new JAX node is seen at once.
* Treedefs: a JAX ``PyTreeDef`` passed where treekit takes a treedef is converted once, at the
  entry point (``treedef_from_jax``); ``treedef_to_jax`` goes the other way.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec
from types import FrameType, ModuleType
from typing import Any

from treekit import _registry, _treedef
from treekit._keys import DictKey, FlattenedIndexKey, GetAttrKey, SequenceKey
from treekit._register import dataclass_entry
from treekit._registry import NodeType
from treekit._traverse import flatten
from treekit._treedef import TreeDef, as_treedef

__all__ = ["connected", "install", "load", "treedef_from_jax", "treedef_to_jax"]

_BUILT_IN = frozenset({"list", "tuple", "dict", "namedtuple", "ordereddict", "defaultdict", "none", "jax"})
_state = {"connected": False}
# Types whose JAX entry is treekit's dispatcher: for them treekit's registry is the truth, also
# after a test unregisters them (JAX cannot unregister).
_MIRRORED: set[type] = set()


def load() -> ModuleType:
    """Import jax on the user's request (``check_node_type``'s jit law); the bridge follows."""
    return importlib.import_module("jax")


def connected() -> bool:
    """Whether jax has been imported and the registries are bridged."""
    return _state["connected"]


def install() -> None:
    """Bridge now if jax is imported, else once it is; called by ``import treekit``."""
    _registry.LISTENERS.append(_on_register)
    _treedef.CONVERTERS.append(_convert)
    _registry.FOREIGN.append(_from_jax)
    if not _jax_ready():
        if not any(isinstance(finder, _ImportHook) for finder in sys.meta_path):
            sys.meta_path.insert(0, _ImportHook())
        if "jax" in sys.modules and not _jax_ready():
            # jax is being imported, in another thread (the hook came too late for it): wait
            # for that import to finish, as `import jax` here would. (In this thread, a
            # circular import, this returns the unfinished module; `resolve` bridges later.)
            try:
                importlib.import_module("jax")
            except Exception:  # that import failed: no jax
                return
        if not _jax_ready():
            return
    _connect()


def _jax_ready() -> bool:
    """Whether ``jax`` is imported and done initializing (not half-way, in another thread)."""
    jax = sys.modules.get("jax")
    spec = getattr(jax, "__spec__", None)
    return jax is not None and hasattr(jax, "tree_util") and not getattr(spec, "_initializing", False)


class _ImportHook:
    """Finds nothing itself: each ``find_spec('jax')`` returns jax's spec with its loader
    wrapped, so whichever spec gets executed (``import jax``, ``importlib.import_module``, a
    ``find_spec`` followed by an import, in any thread) bridges the registries when it is done.
    It stays on ``sys.meta_path`` (inert once bridged): removing a finder while another thread
    walks that list could make the other thread skip a finder.
    """

    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None) -> Any:
        if fullname != "jax" or _state["connected"]:
            return None
        finders = list(sys.meta_path)
        for finder in finders[finders.index(self) + 1 if self in finders else 0 :]:  # as the import system would
            if isinstance(finder, _ImportHook):
                continue
            find = getattr(finder, "find_spec", None)
            spec = None if find is None else find(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and not isinstance(spec.loader, _ThenConnect):
                    spec.loader = _ThenConnect(spec.loader)
                return spec
        return None


class _ThenConnect:
    """Runs jax's own loader, puts it back on the module, then bridges the registries."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)  # type: ignore[no-any-return]

    def exec_module(self, module: ModuleType) -> None:
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        module.__loader__ = self.loader
        self.loader.exec_module(module)
        try:
            _connect()
        except Exception as exc:  # never break the user's `import jax`
            warnings.warn(f"treekit could not bridge its registry to JAX's: {exc!r}", RuntimeWarning, stacklevel=2)

    def __getattr__(self, name: str) -> Any:  # the rest of the loader's API (get_resource_reader, ...)
        return getattr(self.loader, name)


_CONNECT_LOCK = threading.RLock()


def _connect() -> None:
    with _CONNECT_LOCK:
        if _state["connected"]:
            return
        _watch_jax()
        for ntype in list(_registry.REGISTERED.values()):
            _mirror(ntype)
        _state["connected"] = True
        _registry.forget_answers()  # types remembered as leaves may be JAX nodes


def _on_register(ntype: NodeType) -> None:
    if _state["connected"] or _jax_ready():  # ready: imported without the hook seeing it
        _connect()
        _mirror(ntype)  # (if _connect, in another thread, listed the registry before ntype was in it)


# -- treekit -> JAX ---------------------------------------------------------------------------
def _to_jax_key(entry: Any) -> Any:
    import jax.tree_util as jtu

    kind = type(entry)
    if kind is GetAttrKey:
        return jtu.GetAttrKey(entry.name)
    if kind is DictKey:
        return jtu.DictKey(entry.key)
    if kind is SequenceKey:
        return jtu.SequenceKey(entry.idx)
    if kind is FlattenedIndexKey:
        return jtu.FlattenedIndexKey(entry.key)
    return entry


def _mirror(ntype: NodeType) -> None:
    cls = ntype.type
    if ntype.kind in _BUILT_IN or cls in _MIRRORED:
        return  # mirrored once: JAX calls whatever treekit has registered for cls now
    import jax.tree_util as jtu

    def current() -> NodeType:
        entry = _registry.REGISTERED.get(cls)
        if entry is None:
            raise TypeError(f"{cls.__qualname__} was unregistered from treekit; JAX cannot unregister it")
        return entry

    def flatten_with_keys(node: Any) -> tuple[Any, Any]:
        own = _JAX_OWN.get(cls)
        if own is not None:
            return own.flatten_with_keys(node)
        children, data, keys = current().flatten(node, True)
        assert keys is not None
        return [(_to_jax_key(key), child) for key, child in zip(keys, children)], data

    def flatten_plain(node: Any) -> tuple[Any, Any]:
        own = _JAX_OWN.get(cls)
        if own is not None:
            return own.flatten(node)
        children, data, _ = current().flatten(node, False)
        return children, data

    def unflatten_any(data: Any, children: Any) -> Any:
        own = _JAX_OWN.get(cls)
        if own is not None:
            return own.unflatten(data, children)
        return current().unflatten(data, list(children))

    try:
        jtu.register_pytree_with_keys(cls, flatten_with_keys, unflatten_any, flatten_plain)
    except ValueError:
        return  # JAX already has an entry for this type (registered with JAX first): it keeps it
    _MIRRORED.add(cls)


# -- registrations made with JAX itself --------------------------------------------------------
# Every JAX registration (jax.tree_util.register_*, flax and equinox included) ends in one of two
# methods of JAX's registry class, called once per registry JAX keeps. The bridge wraps both
# when it connects. For a type treekit has mirrored, the call is taken instead of raising
# "Duplicate custom PyTreeDef type registration": the mirror's functions, which JAX keeps
# calling, hand such a type to the functions given here (its `_JaxOwn`). For any other type JAX
# registers it, and treekit forgets the answers it remembered, as that type may have been seen
# as a leaf.
@dataclasses.dataclass(frozen=True)
class _JaxOwn:
    """The functions a type was registered with in JAX after treekit mirrored it."""

    flatten: Callable[[Any], tuple[Any, Any]]
    flatten_with_keys: Callable[[Any], tuple[Any, Any]]
    unflatten: Callable[[Any, Any], Any]


_JAX_OWN: dict[type, _JaxOwn] = {}
_TAKEN: set[tuple[int, type]] = set()  # (id of JAX's registry, type): taken there already


def _watch_jax() -> None:
    import jax.tree_util as jtu

    registry_class: Any = type(getattr(jtu, "default_registry", None))
    register_node = getattr(registry_class, "register_node", None)
    register_dataclass_node = getattr(registry_class, "register_dataclass_node", None)
    if register_node is None or register_dataclass_node is None or getattr(registry_class, "_treekit", False):
        return

    def watched_register_node(
        self: Any, type: Any, to_iterable: Any, from_iterable: Any, to_iterable_with_keys: Any = None
    ) -> None:
        if not _take(self, type, lambda: _own_node(to_iterable, from_iterable, to_iterable_with_keys)):
            register_node(self, type, to_iterable, from_iterable, to_iterable_with_keys)
            _jax_registered(type)

    def watched_register_dataclass_node(self: Any, type: Any, data_fields: Any, meta_fields: Any) -> None:
        if not _take(self, type, lambda: _own_dataclass(type, data_fields, meta_fields)):
            register_dataclass_node(self, type, data_fields, meta_fields)
            if self is getattr(jtu, "default_registry", None):
                _note_dataclass(type, data_fields, meta_fields)
            _jax_registered(type)

    try:
        registry_class.register_node = watched_register_node
        registry_class.register_dataclass_node = watched_register_dataclass_node
        registry_class._treekit = True
    except (AttributeError, TypeError):  # a class that cannot be changed: JAX's behaviour stays
        with contextlib.suppress(AttributeError, TypeError):
            registry_class.register_node = register_node


# Classes registered with jax.tree_util.register_dataclass (flax.struct, chex, ...) after the
# bridge was made: their data and meta fields, as JAX took them. treekit walks them as its own
# dataclass entries (the native core reads their fields), not through JAX one node at a time.
_JAX_DATACLASSES: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}


def _note_dataclass(cls: Any, data_fields: Any, meta_fields: Any) -> None:
    try:
        data, meta = tuple(data_fields), tuple(meta_fields)
    except TypeError:
        return
    if isinstance(cls, type) and all(type(n) is str for n in data + meta):
        _JAX_DATACLASSES.setdefault(cls, (data, meta))


def _take(registry: Any, cls: Any, own: Callable[[], _JaxOwn]) -> bool:
    """Take a JAX registration of a mirrored type (once per JAX registry); False: not ours."""
    if cls not in _MIRRORED or (id(registry), cls) in _TAKEN:
        return False
    _JAX_OWN[cls] = own()
    _TAKEN.add((id(registry), cls))
    return True


def _jax_registered(cls: Any) -> None:
    if cls not in _registry.REGISTERED:  # not treekit's own mirror being made
        _registry.forget_answers()


def _own_node(flatten: Any, unflatten: Any, flatten_with_keys: Any) -> _JaxOwn:
    if flatten_with_keys is None:  # as JAX does: each child's key is its flat index

        def flatten_with_keys(node: Any) -> tuple[Any, Any]:
            import jax.tree_util as jtu

            children, data = flatten(node)
            return [(jtu.FlattenedIndexKey(i), child) for i, child in enumerate(children)], data

    return _JaxOwn(flatten, flatten_with_keys, unflatten)


def _own_dataclass(cls: Any, data_fields: Any, meta_fields: Any) -> _JaxOwn:
    import jax.tree_util as jtu

    data_fields, meta_fields = [str(f) for f in data_fields], [str(f) for f in meta_fields]
    keys = [jtu.GetAttrKey(name) for name in data_fields]

    def flatten(node: Any) -> tuple[Any, Any]:
        return [getattr(node, f) for f in data_fields], tuple(getattr(node, f) for f in meta_fields)

    def flatten_with_keys(node: Any) -> tuple[Any, Any]:
        children, meta = flatten(node)
        return list(zip(keys, children)), meta

    def unflatten(meta: Any, children: Any) -> Any:
        return cls(**dict(zip(meta_fields, meta)), **dict(zip(data_fields, children)))

    return _JaxOwn(flatten, flatten_with_keys, unflatten)


# -- JAX -> treekit ---------------------------------------------------------------------------
def _from_treekit_key(entry: Any) -> Any:
    import jax.tree_util as jtu

    kind = type(entry)
    if kind is jtu.GetAttrKey:
        return GetAttrKey(entry.name)
    if kind is jtu.DictKey:
        return DictKey(entry.key)
    if kind is jtu.SequenceKey:
        return SequenceKey(entry.idx)
    if kind is jtu.FlattenedIndexKey:
        return FlattenedIndexKey(entry.key)
    return entry


# The entry made for each type only JAX knows: one per type, so that treedefs of its nodes made
# before and after treekit forgets its answers compare equal (JAX's registry keeps these
# types alive anyway).
_JAX_ONLY: dict[type, NodeType] = {}


def _from_jax(cls: type) -> NodeType | None:
    if not _state["connected"]:
        if not _jax_ready():
            return None
        _connect()  # jax got imported without the hook seeing it (see install)
    if cls in _MIRRORED or not _jax_knows(cls):
        return None
    ntype = _JAX_ONLY.get(cls)
    if ntype is None:
        fields = _JAX_DATACLASSES.get(cls)
        made = _jax_entry(cls) if fields is None else dataclass_entry(cls, *fields)
        ntype = _JAX_ONLY.setdefault(cls, made)
    return ntype


def _jax_entry(cls: type) -> NodeType:
    import jax.tree_util as jtu

    def flatten(node: Any, with_path: bool) -> tuple[list[Any], Any, list[Any] | None]:
        def one_level(x: Any) -> bool:
            return x is not node

        if with_path:
            pairs, treedef = jtu.tree_flatten_with_path(node, is_leaf=one_level)
            return [child for _, child in pairs], treedef, [_from_treekit_key(path[0]) for path, _ in pairs]
        children, treedef = jtu.tree_flatten(node, is_leaf=one_level)
        return children, treedef, None

    return NodeType(cls, flatten, lambda treedef, children: treedef.unflatten(children), "jax")


def _jax_knows(cls: type) -> bool:
    import jax.tree_util as jtu

    is_tree_node = getattr(jtu, "is_tree_node", None)  # public since jax 0.6; older: no bridge
    return is_tree_node is not None and bool(is_tree_node(cls))


# -- treedefs, both ways ----------------------------------------------------------------------
# Both conversions rebuild a tree of placeholder leaves with one library and flatten it with the
# other, so each node is read by the library's own rules (None, dict order, namedtuples, nodes
# registered with either library) and nothing is translated by hand. Unflatten functions get
# placeholder children, as JAX's own code gives them (`treedef.unflatten([object()] * n)`).
_HOLE = object()


def _is_jax_treedef(value: Any) -> bool:
    cls = type(value)
    return cls.__name__ == "PyTreeDef" and cls.__module__.startswith(("jaxlib.", "jax."))


def _convert(value: Any, label: str) -> TreeDef | None:
    return _from_jax_treedef(value, label) if _is_jax_treedef(value) else None


def _from_jax_treedef(theirs: Any, label: str) -> TreeDef:
    _connect()  # a JAX treedef exists, so jax is imported: make sure JAX's nodes are known
    n = theirs.num_leaves
    try:
        leaves, ours, _ = flatten(theirs.unflatten([_HOLE] * n))
    except Exception as exc:
        raise _unrebuilt(label, "treekit", theirs, repr(exc)) from exc
    if len(leaves) != n or any(leaf is not _HOLE for leaf in leaves) or ours.num_nodes != theirs.num_nodes:
        raise _unrebuilt(label, "treekit", theirs, f"treekit reads {ours!r:.80}")
    return ours


def _unrebuilt(label: str, reader: str, treedef: Any, detail: str) -> ValueError:
    return ValueError(f"{label}: expected a treedef {reader} can rebuild, got {treedef!r:.80} ({detail})")


def treedef_from_jax(treedef: Any) -> TreeDef:
    """treekit's :class:`~treekit.TreeDef` for the structure of a JAX ``PyTreeDef``.

    Every treekit function that takes a treedef also takes a JAX ``PyTreeDef`` and converts
    it the same way, on each call; convert once with this function to compare, pickle or
    reuse the result. The two treedefs describe the same trees: same leaves, same nodes
    (``None`` included), same node data.

    >>> import jax.tree_util as jtu
    >>> import treekit as tk
    >>> tree = {'b': [1, None], 'a': (2,)}
    >>> tk.treedef_from_jax(jtu.tree_structure(tree)) == tk.tree_structure(tree)
    True

    Args:
        treedef: A JAX ``PyTreeDef`` (``jax.tree_util.tree_structure(tree)``); a treekit
            ``TreeDef`` is returned as it is.

    Returns:
        The equal treekit :class:`~treekit.TreeDef` (dicts in sorted key order, as JAX keeps them).

    Raises:
        TypeError: If ``treedef`` is neither.
        ValueError: If the structure cannot be rebuilt with placeholder leaves (a node's
            unflatten function raised, or the rebuilt node flattens differently).
    """
    return as_treedef(treedef, "treedef")


def _depth(nodes: tuple[Any, ...]) -> int:
    """How many levels deep the post-order node records go (a leaf alone: 1), in one pass."""
    depths: list[int] = []
    for record in nodes:
        arity = record[2]
        if arity:
            below = max(depths[-arity:])
            del depths[-arity:]
            depths.append(below + 1)
        else:
            depths.append(1)
    return depths[-1] if depths else 0


def _frames() -> int:
    """How many Python frames are on the stack now."""
    count = 0
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        count, frame = count + 1, frame.f_back
    return count


def treedef_to_jax(treedef: Any) -> Any:
    """JAX's ``PyTreeDef`` for the structure of a treekit :class:`~treekit.TreeDef`; imports jax.

    Pass the result to JAX's functions (``jax.tree_util.tree_unflatten``,
    ``jax.tree.transpose``, ...), which only take their own treedefs. Nodes registered with
    treekit are registered with JAX too, so every treekit structure has a JAX one.

    >>> import treekit as tk
    >>> theirs = tk.treedef_to_jax(tk.tree_structure({'w': [1, 2], 'b': None}))
    >>> theirs
    PyTreeDef({'b': None, 'w': [*, *]})
    >>> theirs.unflatten([1, 2])
    {'b': None, 'w': [1, 2]}

    Args:
        treedef: A treekit ``TreeDef`` (a JAX ``PyTreeDef`` is returned as it is).

    Returns:
        The equal ``jax.tree_util.PyTreeDef`` (dicts in sorted key order, as JAX rebuilds them).

    Raises:
        ImportError: If jax is not installed.
        TypeError: If ``treedef`` is not a treedef.
        ValueError: If the structure cannot be rebuilt with placeholder leaves, or is deeper
            than JAX's recursive flattener can go (about ``sys.getrecursionlimit()`` levels).
    """
    if _is_jax_treedef(treedef):
        return treedef
    ours = as_treedef(treedef, "treedef")
    load()
    _connect()
    import jax.tree_util as jtu

    depth, room = _depth(ours._nodes), sys.getrecursionlimit() - _frames() - 50
    if depth > room:  # JAX's flattener recurses a C++ level per tree level: past the limit it fails
        raise _unrebuilt("treedef", "JAX", ours, f"{depth} levels deep; JAX's flattener recurses, {room} fit now")
    n = ours.num_leaves
    try:
        theirs: Any = jtu.tree_structure(ours.unflatten([_HOLE] * n))
    except Exception as exc:
        raise _unrebuilt("treedef", "JAX", ours, repr(exc)) from exc
    if theirs.num_leaves != n or theirs.num_nodes != ours.num_nodes:
        raise _unrebuilt("treedef", "JAX", ours, f"JAX reads {theirs!r:.80}")
    return theirs

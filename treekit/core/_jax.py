"""The bridge between treekit's registry and JAX's, both ways; the only module that imports jax.

It never imports jax itself: it waits until the user does.

* treekit -> JAX: every node type registered with treekit is registered with JAX too, with the
  same children, node data and key entries (converted to JAX's key classes), so ``jax.jit``,
  ``jax.grad``, ``jax.vmap`` and ``jax.tree_util`` see treekit's nodes exactly as treekit does.
  Registrations made before jax is imported are mirrored the moment ``import jax`` finishes:
  an import hook on ``sys.meta_path`` wraps jax's loader in every spec found for ``jax``
  (also by ``importlib.util.find_spec``, or in another thread), and is inert once bridged.
* JAX -> treekit: a type that treekit does not know (not registered, not a namedtuple) and
  that JAX does is walked with what JAX was given. Registered after the bridge was made (as
  ``import treekit`` makes it, and the watch on JAX's registry sees): a
  ``register_dataclass`` class (flax.struct) becomes a treekit dataclass entry of the same
  data and meta fields, and a ``register_pytree_node`` / ``register_pytree_with_keys`` class
  (equinox Modules, nnx State, FrozenDict) an entry calling the functions JAX was given, key
  entries converted to treekit's; node data is then what JAX's treedef shows. Registered
  before: the same, with the flatten and unflatten functions JAX keeps in
  ``jax._src.tree_util._registry`` and JAX's ``flatten_one_level_with_keys`` (which calls the
  class's ``flatten_with_keys``); where a jax lacks those, it is traversed through JAX's
  public API one node at a time, its node data JAX's one-level treedef.
* Registered with both: each library uses the registration made with it. A type registered
  with JAX before treekit keeps JAX's entry in JAX (treekit's mirror is skipped); one that
  treekit mirrored before JAX was told about it gets JAX's functions from then on, where JAX
  alone would raise "Duplicate custom PyTreeDef type registration" (``_watch_jax``).
* Later JAX registrations: treekit forgets the answers it remembered for unregistered types
  (one of them may have been this type, seen as a leaf), so the new JAX node is seen at once.
* Treedefs, both ways: ``_jax_treedefs``.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import importlib
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

from treekit.core import _registry
from treekit.core._errors import noted
from treekit.core._keys import DictKey, FlattenedIndexKey, GetAttrKey, SequenceKey
from treekit.core._known import known_functions
from treekit.core._register import dataclass_entry, make_flatten, tuple_children
from treekit.core._registry import NodeType

__all__ = ["connect", "connected", "install_jax_bridge", "load_jax"]

_BUILT_IN = frozenset({"list", "tuple", "dict", "namedtuple", "ordereddict", "defaultdict", "none", "jax"})
_state = {"connected": False}
# Types whose JAX entry is treekit's dispatcher: for them treekit's registry is the truth, also
# after a test unregisters them (JAX cannot unregister).
_MIRRORED: set[type] = set()


def load_jax() -> ModuleType:
    """Import jax on the user's request (``check_node_type``'s jit law); the bridge follows."""
    return importlib.import_module("jax")


def connected() -> bool:
    """Whether jax has been imported and the registries are bridged."""
    return _state["connected"]


def install_jax_bridge() -> None:
    """Bridge now if jax is imported, else once it is; called by ``import treekit``."""
    _registry.LISTENERS.append(_on_register)
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
    connect()


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
            connect()
        except Exception as exc:  # never break the user's `import jax`
            warnings.warn(f"treekit could not bridge its registry to JAX's: {exc!r}", RuntimeWarning, stacklevel=2)

    def __getattr__(self, name: str) -> Any:  # the rest of the loader's API (get_resource_reader, ...)
        return getattr(self.loader, name)


_CONNECT_LOCK = threading.RLock()


def connect() -> None:
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
        connect()
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

    def flattened(node: Any, with_path: bool) -> tuple[Any, Any, Any]:
        try:
            return current().flatten(node, with_path)
        except Exception as exc:  # (JAX's own walk, as under jit: it gives no key path to name)
            where = "treekit.tree_flatten_with_path(tree) outside jit names its key path"
            noted(exc, f"raised while JAX flattened a {cls.__qualname__} (registered with treekit; {where})")
            raise

    def flatten_with_keys(node: Any) -> tuple[Any, Any]:
        own = _JAX_OWN.get(cls)
        if own is not None:
            return own.flatten_with_keys(node)
        children, data, keys = flattened(node, True)
        assert keys is not None
        return [(_to_jax_key(key), child) for key, child in zip(keys, children)], data

    def flatten_plain(node: Any) -> tuple[Any, Any]:
        own = _JAX_OWN.get(cls)
        if own is not None:
            return own.flatten(node)
        children, data, _ = flattened(node, False)
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
            if self is getattr(jtu, "default_registry", None) and isinstance(type, builtins.type):
                _JAX_NODES.setdefault(type, (to_iterable, from_iterable, to_iterable_with_keys))
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


# Classes registered with JAX's register_pytree_node / register_pytree_with_keys alone
# (equinox Modules, nnx State and Variables, FrozenDict) after the bridge was made: the
# functions JAX was given. treekit calls them itself, as for its own registrations, instead
# of asking JAX for a one-level treedef of each node.
_JAX_NODES: dict[type, tuple[Any, Any, Any]] = {}


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
def _from_jax_key(entry: Any) -> Any:
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
        connect()  # jax got imported without the hook seeing it (see install)
    if cls in _MIRRORED or not _jax_knows(cls):
        return None
    ntype = _JAX_ONLY.get(cls)
    if ntype is None:
        fields, functions = _JAX_DATACLASSES.get(cls), _JAX_NODES.get(cls)
        if fields is not None:
            made = dataclass_entry(cls, *fields)
        elif functions is not None:
            made = _jax_node_entry(cls, *functions)
        else:
            made = _known_before(cls) or _jax_entry(cls)
        ntype = _JAX_ONLY.setdefault(cls, made)
    return ntype


def jax_alone(cls: type) -> bool:
    """Whether ``cls`` is a node type registered with JAX alone (not with treekit), whether
    treekit walks it with the functions JAX was given (registered after treekit saw JAX) or
    through JAX one node at a time (registered before): the same answer in either order.

    >>> jax_alone(dict)
    False
    """
    if cls in _MIRRORED:  # (treekit's own registration, which it gave JAX too)
        return False
    return cls in _JAX_NODES or cls in _JAX_DATACLASSES or cls in _JAX_ONLY


def _known_before(cls: type) -> NodeType | None:
    """The entry of a class JAX was told about before treekit saw JAX: the flatten and unflatten
    functions JAX keeps beside its registry (``jax._src.tree_util._registry``, private) and, for
    key paths, JAX's registry's ``flatten_one_level_with_keys`` (what the public function of that
    name calls; it calls the class's registered ``flatten_with_keys``); ``None`` where this jax
    lacks either."""
    import jax.tree_util as jtu

    # (the registry's own method, which jax.tree_util.flatten_one_level_with_keys calls)
    one_level_with_keys = getattr(getattr(jtu, "default_registry", None), "flatten_one_level_with_keys", None)
    kept = getattr(sys.modules.get("jax._src.tree_util"), "_registry", None)
    entry = kept.get(cls) if isinstance(kept, dict) else None
    flatten, unflatten = getattr(entry, "to_iter", None), getattr(entry, "from_iter", None)
    if one_level_with_keys is None or not callable(flatten) or not callable(unflatten):
        return None
    return _jax_node_entry(cls, flatten, unflatten, one_level_with_keys, own_keys=False)


def _jax_entry(cls: type) -> NodeType:
    import jax.tree_util as jtu

    def flatten(node: Any, with_path: bool) -> tuple[list[Any], Any, list[Any] | None]:
        def one_level(x: Any) -> bool:
            return x is not node

        if with_path:
            pairs, treedef = jtu.tree_flatten_with_path(node, is_leaf=one_level)
            return [child for _, child in pairs], treedef, [_from_jax_key(path[0]) for path, _ in pairs]
        children, treedef = jtu.tree_flatten(node, is_leaf=one_level)
        return children, treedef, None

    return NodeType(cls, flatten, lambda treedef, children: treedef.unflatten(children), "jax")


def _jax_node_entry(cls: type, flatten: Any, unflatten: Any, flatten_with_keys: Any, own_keys: bool = True) -> NodeType:
    """The entry of a class registered with JAX alone, from the functions JAX was given: its
    node data is theirs (JAX's treedef shows the same), its key entries converted to treekit's.
    ``own_keys=False``: ``flatten_with_keys`` is JAX's, which calls the class's. Where they are
    functions ``_known`` knows (equinox's, flax nnx's), the native core does what they do."""
    import jax.tree_util as jtu

    # this class's key entries, converted once each (by JAX class and a str or int field; at
    # most 512 a class), where the native walker reads them too
    kinds: dict[type, tuple[str, dict[Any, Any]]] = {
        jtu.GetAttrKey: ("name", {}), jtu.DictKey: ("key", {}), jtu.SequenceKey: ("idx", {}),
        jtu.FlattenedIndexKey: ("key", {}),
    }

    def convert(key: Any) -> Any:
        kind = kinds.get(type(key))
        value = getattr(key, kind[0]) if kind is not None else None
        if type(value) is not str and type(value) is not int:
            return _from_jax_key(key)
        assert kind is not None
        ours = kind[1].get(value)
        if ours is None:
            ours = _from_jax_key(key)
            if len(kind[1]) < 512:
                kind[1][value] = ours
        return ours

    flatten_fn, unflatten_fn = make_flatten(cls, flatten, flatten_with_keys, convert, kinds), tuple_children(unflatten)
    # (read by the native core only; the pure core calls the functions)
    flatten_fn.known = unflatten_fn.known = known_functions(  # type: ignore[attr-defined]
        cls, flatten, unflatten, flatten_with_keys if own_keys else None
    )
    return NodeType(cls, flatten_fn, unflatten_fn)


def _jax_knows(cls: type) -> bool:
    import jax.tree_util as jtu

    is_tree_node = getattr(jtu, "is_tree_node", None)  # public since jax 0.6; older: no bridge
    return is_tree_node is not None and bool(is_tree_node(cls))

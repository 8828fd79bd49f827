"""The node-type registry: one ``NodeType`` entry per container type, built-ins included."""

from __future__ import annotations

import builtins
import collections
import contextlib
import dataclasses
import gc
import operator
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from treekit._keys import DictKey, FlattenedIndexKey, GetAttrKey, KeyEntry, SequenceKey

__all__ = [
    "NodeType",
    "flatten_one_level",
    "flatten_one_level_with_keys",
    "is_tree_node",
    "lookup",
    "register_dataclass",
    "register_pytree_node",
    "register_pytree_node_class",
    "register_pytree_with_keys",
    "register_pytree_with_keys_class",
    "register_static",
    "static",
]

C = TypeVar("C", bound=type)

# flatten(node, with_path) -> (children, node data, key entries or None)
FlattenFn = Callable[[Any, bool], "tuple[Sequence[Any], Hashable, Sequence[Any] | None]"]
UnflattenFn = Callable[[Any, list[Any]], Any]


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class NodeType:
    """How one container type flattens and unflattens; the walkers' only per-type hook.

    ``flatten(node, with_path)`` returns ``(children, node_data, keys)``, with ``keys``
    ``None`` unless ``with_path``. ``unflatten(node_data, children)`` rebuilds the node.
    ``kind`` selects the repr and the wording of error messages.
    """

    type: builtins.type
    flatten: FlattenFn
    unflatten: UnflattenFn
    kind: str = "custom"

    def __repr__(self) -> str:
        return f"NodeType({self.type.__qualname__})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_by_key, (self.type,))

    def node_class(self, node_data: Any) -> builtins.type:
        """The class of the nodes this entry builds (the namedtuple class for namedtuples)."""
        return node_data if self.kind == "namedtuple" else self.type


def dict_keys(ntype: NodeType, node_data: Any) -> Sequence[Any]:
    """The keys, in leaf order, of a dict-like node's node data."""
    if ntype.kind == "defaultdict":
        return node_data[1]  # type: ignore[no-any-return]
    return node_data  # type: ignore[no-any-return]


# The registry: exact type -> NodeType. Writes hold _LOCK.
REGISTERED: dict[type, NodeType] = {}
# What the walkers read, lock-free: the registry plus the answer for other types seen lately
# (the shared namedtuple entry, another registry's entry, or None for a leaf type). Readers
# never see a registered type missing or wrong: entries of registered types are only ever
# replaced, and answers for other types are added and evicted one by one, under _LOCK.
TYPES: dict[type, NodeType | None] = {}
MISSING: Any = object()
_LOCK = threading.RLock()
# Re-entrant: code that runs while it is held (a class's or a dict key's __hash__ or __eq__, a
# garbage collection's callbacks and finalizers) may call treekit, in the same thread, again.
# _HELD.depth says how deep this thread is inside it (_locked), for the collection's callback.
_HELD = threading.local()


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    with _LOCK:
        _HELD.depth = getattr(_HELD, "depth", 0) + 1
        try:
            yield
        finally:
            _HELD.depth -= 1

# Called with each NodeType registered (the JAX bridge mirrors registrations from here).
LISTENERS: list[Callable[[NodeType], None]] = []
# Asked about types that are neither registered nor namedtuples (the JAX bridge adds one).
FOREIGN: list[Callable[[type], NodeType | None]] = []
# The answers remembered for unregistered types, oldest first: at most _CACHE_LIMIT, so the
# classes a program makes and drops are not kept alive by treekit for long.
_ANSWERED: dict[type, None] = {}
_CACHE_LIMIT = 4096
_generation = [0]  # bumped by forget_answers: an answer worked out before then is not stored


class _NamedTuple:
    """Registry key of the one entry shared by all namedtuple classes."""


def _by_key(key: type) -> NodeType:
    ntype = NAMEDTUPLE if key is _NamedTuple else lookup(key)
    if ntype is None:
        raise ValueError(f"cannot unpickle a treedef: {key.__qualname__} is not registered")
    return ntype


def lookup(cls: type) -> NodeType | None:
    """The entry for ``cls``: exact type, then the namedtuple fallback, then other registries
    (JAX's, once JAX is imported); ``None`` for a leaf type."""
    ntype = TYPES.get(cls, MISSING)
    return resolve(cls) if ntype is MISSING else ntype


def resolve(cls: type) -> NodeType | None:
    """Answer ``lookup`` for a type not in ``TYPES``, and remember the answer.

    Safe against threads registering types, forgetting answers or resolving the same type:
    the answer is stored under the lock, and only if ``cls`` is still unregistered and no
    answers were forgotten since it was worked out.
    """
    registered = REGISTERED.get(cls)
    if registered is not None:
        return registered
    generation = _generation[0]
    ntype: NodeType | None = None
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        ntype = NAMEDTUPLE
    else:
        for find in list(FOREIGN):
            ntype = find(cls)
            if ntype is not None:
                break
    with _locked():
        registered = REGISTERED.get(cls)
        if registered is not None:
            return registered
        if generation == _generation[0] and cls not in _ANSWERED:
            while len(_ANSWERED) >= _CACHE_LIMIT:  # evict the oldest answers first
                oldest = next(iter(_ANSWERED))
                _ANSWERED.pop(oldest, None)  # (its __hash__ may have evicted it already)
                TYPES.pop(oldest, None)
            _ANSWERED[cls] = None
            TYPES[cls] = ntype
    return ntype


def forget_answers() -> None:
    """Drop the answers remembered for unregistered types (when another registry appears).

    One by one: registered types stay in ``TYPES`` throughout, so walkers in other threads
    never miss them.
    """
    with _locked():
        _generation[0] += 1
        _drop_answers()


def _drop_answers() -> None:
    """Forget the answers remembered now (the lock held). Answers that a class's ``__hash__``
    adds meanwhile (it may call treekit) stay: they were worked out after the call began."""
    for cls in list(_ANSWERED):
        _ANSWERED.pop(cls, None)
        TYPES.pop(cls, None)


def _forget_before_full_collection(phase: str, info: dict[str, Any]) -> None:
    """Before each full garbage collection, drop the answers remembered for unregistered
    types (and namedtuple classes' field keys): classes the program has dropped are then
    collected by that very collection, not kept alive by treekit. (A class refers to itself
    through its ``__mro__``, so only a collection frees it.) Skipped when another thread, or
    the code the collection interrupted, holds the lock: the next full collection does it.
    """
    if phase != "start" or info.get("generation") != 2 or getattr(_HELD, "depth", 0):
        return
    if not _LOCK.acquire(blocking=False):
        return
    try:
        _drop_answers()
        _FIELD_KEYS.clear()
    finally:
        _LOCK.release()


gc.callbacks.append(_forget_before_full_collection)


def _add(ntype: NodeType) -> None:
    with _locked():
        if ntype.type in REGISTERED:
            name = f"{ntype.type.__module__}.{ntype.type.__qualname__}"
            raise ValueError(f"{name} is already registered as a pytree node")
        REGISTERED[ntype.type] = ntype
        _ANSWERED.pop(ntype.type, None)
        TYPES[ntype.type] = ntype
    for listener in list(LISTENERS):
        listener(ntype)


def _remove(cls: type) -> None:
    """Forget ``cls`` (tests' fixtures use it; JAX's registry, if mirrored, keeps it)."""
    with _locked():
        del REGISTERED[cls]
        TYPES.pop(cls, None)


# -- key entries, shared so that flattening with paths allocates no keys ----------------------
_SEQ_KEYS: list[SequenceKey] = [SequenceKey(i) for i in range(256)]
_SEQ_LOCK = threading.RLock()  # (re-entrant, as _LOCK)
_SEQ_KEYS_LIMIT = 1 << 14  # about 1.4 MB of keys at most; longer sequences get fresh keys past it


def sequence_keys(n: int) -> list[SequenceKey]:
    """``[SequenceKey(0), ..., SequenceKey(n - 1)]``, the first ``_SEQ_KEYS_LIMIT`` of them
    from a shared cache.

    The cache only grows, under a lock and by one ``extend`` of a finished list, so that a
    thread reading ``_SEQ_KEYS[:n]`` never sees keys out of order; it stops growing at
    ``_SEQ_KEYS_LIMIT``, so a very long list flattened once does not leave its keys behind.
    """
    if n > len(_SEQ_KEYS):
        if n > _SEQ_KEYS_LIMIT:
            return [*sequence_keys(_SEQ_KEYS_LIMIT), *map(SequenceKey, range(_SEQ_KEYS_LIMIT, n))]
        with _SEQ_LOCK:
            start = len(_SEQ_KEYS)
            if n > start:
                more = [SequenceKey(i) for i in range(start, n)]
                if len(_SEQ_KEYS) == start:  # (code run by a collection meanwhile may have grown it)
                    _SEQ_KEYS.extend(more)
    return _SEQ_KEYS[:n]


def _flat_keys(n: int) -> list[FlattenedIndexKey]:
    return [FlattenedIndexKey(i) for i in range(n)]


_FIELD_KEYS: dict[type, list[GetAttrKey]] = {}  # namedtuple class -> its fields' entries (writes hold _LOCK)


def _field_keys(cls: Any) -> list[GetAttrKey]:
    keys = _FIELD_KEYS.get(cls)
    if keys is None:
        keys = [GetAttrKey(name) for name in cls._fields]
        with _locked():
            if len(_FIELD_KEYS) >= _CACHE_LIMIT:
                _FIELD_KEYS.clear()
            _FIELD_KEYS[cls] = keys
    return keys


_new = object.__new__
_set_dict_key: Callable[[DictKey, Any], None] = DictKey.__dict__["key"].__set__


def _dict_entries(keys: Iterable[Any]) -> list[DictKey]:
    """``[DictKey(k) for k in keys]``, made without the frozen dataclass's ``__init__``: a dict
    flattened with paths makes one per key, and that ``__init__`` was half the cost."""
    out: list[DictKey] = []
    add = out.append
    for key in keys:
        entry = _new(DictKey)
        _set_dict_key(entry, key)
        add(entry)
    return out


# -- dict key order -----------------------------------------------------------------------------
class SortedKeys(tuple):  # type: ignore[type-arg]
    """Sorted dict keys (compared and hashed as a tuple) that remember insertion order.

    ``original`` is the insertion order; ``take(d)`` gives a dict's values in sorted-key order
    and ``put(children)`` children given in sorted-key order in insertion order (both tuples:
    a ``SortedKeys`` has at least two keys). One is made per insertion order and shared.
    """

    original: tuple[Any, ...]
    take: Callable[[Any], tuple[Any, ...]]
    put: Callable[[Any], tuple[Any, ...]]
    positions: tuple[int, ...]  # where each key, in insertion order, is in leaf order

    def __reduce__(self) -> tuple[Any, ...]:
        return (_make_order, (self.original, list(self)))


def _make_order(keys: tuple[Any, ...], ordered: list[Any]) -> SortedKeys:
    out = SortedKeys(ordered)
    out.original = keys
    out.take = operator.itemgetter(*ordered)
    position = {key: i for i, key in enumerate(ordered)}
    out.positions = tuple([position[key] for key in keys])
    out.put = operator.itemgetter(*out.positions)
    return out


# insertion order -> its shared `SortedKeys` (dicts inserted in sorted order need none), oldest
# first. Bounded by keys, all orders together (the oldest go first; a bigger dict's order is
# not kept), so that big dicts flattened once leave little behind; an entry is used only for
# the very key objects it was made from (a dict with a key equal to but not the same as
# another's, as 1.0 and 1, gets a `SortedKeys` of its own keys).
ORDERS: dict[tuple[Any, ...], SortedKeys] = {}
_ORDERS_LIMIT = 4096  # orders
_ORDERS_KEYS = 1 << 16  # keys
_orders_held = [0]  # keys in ORDERS


def sort_keys(keys: Iterable[Any]) -> list[Any]:
    """Leaf order of dict keys: sorted; keys that do not compare, grouped by type.

    Keys are sorted as ``sorted`` does. If they cannot be compared (``{1: .., 'a': ..}``), they
    are grouped by the type's module and qualified name, groups in that order, and each group
    is sorted if its keys compare and left in insertion order if not.

    >>> sort_keys(['b', 'a']), sort_keys(['a', 2, 1, (0,)])
    (['a', 'b'], [1, 2, 'a', (0,)])
    """
    keys = list(keys)
    try:
        return sorted(keys)
    except TypeError:
        groups: dict[tuple[str, str], list[Any]] = {}
        for key in keys:
            groups.setdefault((type(key).__module__, type(key).__qualname__), []).append(key)
        out: list[Any] = []
        for name in sorted(groups):
            group = groups[name]
            try:
                group = sorted(group)
            except TypeError:
                pass
            out.extend(group)
        return out


def dict_order(d: dict[Any, Any]) -> tuple[Any, ...]:
    """A dict's node data: its keys in leaf order; a plain tuple when that is insertion order."""
    keys = tuple(d)
    try:
        order = ORDERS.get(keys)
    except Exception:  # a key whose hash now raises: no cache (the native walker skips it too)
        order = None
    if order is not None and all(map(operator.is_, order.original, keys)):
        return order
    try:
        ordered = sorted(keys)
    except TypeError:
        ordered = sort_keys(keys)
    if ordered == list(keys):
        return keys
    order = _make_order(keys, ordered)
    if len(keys) <= _ORDERS_KEYS // 4:
        with _locked():
            if keys not in ORDERS:
                while ORDERS and (len(ORDERS) >= _ORDERS_LIMIT or _orders_held[0] + len(keys) > _ORDERS_KEYS):
                    _orders_held[0] -= len(ORDERS.pop(next(iter(ORDERS)), ()))  # (a key's __eq__ may pop it first)
                _orders_held[0] += len(keys)
            ORDERS[keys] = order
    return order


# -- built-in entries ---------------------------------------------------------------------------
def _flatten_list(node: Any, with_path: bool) -> tuple[Any, None, Any]:
    return node, None, sequence_keys(len(node)) if with_path else None


def _flatten_dict(node: dict[Any, Any], with_path: bool) -> tuple[Sequence[Any], tuple[Any, ...], Any]:
    keys = dict_order(node)
    # a plain tuple: insertion order is leaf order (else the sorted `SortedKeys`)
    try:
        children = list(node.values()) if type(keys) is tuple else keys.take(node)  # type: ignore[attr-defined]
    except KeyError:  # a key gone: code run while the keys were sorted (a key's __lt__, a finalizer)
        children = None
    if children is None or len(children) != len(keys):
        raise _changed(node, keys)
    return children, keys, _dict_entries(keys) if with_path else None


def _changed(node: dict[Any, Any], keys: Sequence[Any]) -> RuntimeError:
    return RuntimeError(
        f"expected the {type(node).__name__} to keep its {len(keys)} keys while it is flattened, got {len(node)} "
        "(code run meanwhile changed it: a key's __hash__ or __lt__, a finalizer, a gc callback)"
    )


_GONE = object()


def _values(node: dict[Any, Any], keys: Sequence[Any]) -> list[Any]:
    """``[node[k] for k in keys]``, read without ``__missing__`` (a defaultdict's would add the key);
    a key gone meanwhile (a finalizer, a gc callback run by an allocation here) is an error."""
    children = [dict.get(node, k, _GONE) for k in keys]
    if len(node) != len(keys) or any(child is _GONE for child in children):
        raise _changed(node, keys)
    return children


def _unflatten_dict(keys: tuple[Any, ...], children: Sequence[Any]) -> dict[Any, Any]:
    if type(keys) is SortedKeys:
        return dict(zip(keys.original, keys.put(children)))
    return dict(zip(keys, children))


def _flatten_namedtuple(node: Any, with_path: bool) -> tuple[Any, type, Any]:
    cls = type(node)
    keys = _field_keys(cls)
    if len(keys) != len(node):  # a tuple subclass with a _fields that does not fit it
        raise ValueError(
            f"expected one name in {cls.__qualname__}._fields per item, got {len(keys)} for {len(node)} items"
        )
    return node, cls, keys if with_path else None


def _flatten_ordereddict(node: Any, with_path: bool) -> tuple[list[Any], tuple[Any, ...], Any]:
    keys = tuple(node)
    return _values(node, keys), keys, _dict_entries(keys) if with_path else None


def _flatten_defaultdict(node: Any, with_path: bool) -> tuple[list[Any], Any, Any]:
    keys = dict_order(node)
    return _values(node, keys), (node.default_factory, keys), _dict_entries(keys) if with_path else None


def _flatten_none(node: None, with_path: bool) -> tuple[tuple[()], None, Any]:
    return (), None, () if with_path else None


LIST = NodeType(list, _flatten_list, lambda _, c: c, "list")
TUPLE = NodeType(tuple, _flatten_list, lambda _, c: tuple(c), "tuple")
DICT = NodeType(dict, _flatten_dict, _unflatten_dict, "dict")
NAMEDTUPLE = NodeType(_NamedTuple, _flatten_namedtuple, lambda cls, c: cls(*c), "namedtuple")
ORDEREDDICT = NodeType(
    collections.OrderedDict,
    _flatten_ordereddict,
    lambda keys, c: collections.OrderedDict(zip(keys, c)),
    "ordereddict",
)
DEFAULTDICT = NodeType(
    collections.defaultdict,
    _flatten_defaultdict,
    lambda data, c: collections.defaultdict(data[0], _unflatten_dict(data[1], c)),
    "defaultdict",
)
NONE = NodeType(type(None), _flatten_none, lambda _, c: None, "none")
for _ntype in (LIST, TUPLE, DICT, ORDEREDDICT, DEFAULTDICT, NONE):
    REGISTERED[_ntype.type] = _ntype
TYPES.update(REGISTERED)


# -- user registrations -------------------------------------------------------------------------
def _pair(cls: type, what: str, out: Any) -> tuple[Any, Any]:
    if type(out) is not tuple or len(out) != 2:
        raise ValueError(
            f"the {what} function registered for {cls.__qualname__} returned {type(out).__name__} {out!r:.60}; "
            "expected a (children, node data) pair"
        )
    return out


def _children(cls: type, what: str, children: Any) -> Sequence[Any]:
    """The children as the function gave them if a list or tuple (no copy), else listed."""
    if type(children) is list or type(children) is tuple:
        return children
    try:
        return list(children)
    except TypeError:
        raise ValueError(
            f"the {what} function registered for {cls.__qualname__} returned children of type "
            f"{type(children).__name__}; expected an iterable"
        ) from None


def _unzip_keyed(cls: type, pairs: Any) -> tuple[list[Any], list[Any]]:
    keys, children = [], []
    for item in _children(cls, "flatten_with_keys", pairs):
        if type(item) is not tuple or len(item) != 2:
            raise ValueError(
                f"the flatten_with_keys function registered for {cls.__qualname__} returned "
                f"{item!r:.60} among its children; expected (key entry, child) pairs"
            )
        keys.append(item[0])
        children.append(item[1])
    return keys, children


def _check_class(label: str, cls: Any) -> None:
    """Registration arguments are checked when given, not when a walk first meets them."""
    if not isinstance(cls, type):
        raise TypeError(f"{label}: expected a class, got {type(cls).__name__}")


def _check_function(label: str, fn: Any, optional: bool = False) -> None:
    if not (callable(fn) or (optional and fn is None)):
        raise TypeError(f"{label}: expected a function{' or None' if optional else ''}, got {type(fn).__name__}")


def _check_methods(cls: Any, *names: str) -> None:
    _check_class("cls", cls)
    for name in names:
        _check_function(f"cls.{name}", getattr(cls, name, None))


def _make_flatten(
    cls: type,
    flatten: Callable[[Any], tuple[Any, Any]] | None,
    flatten_with_keys: Callable[[Any], tuple[Any, Any]] | None,
) -> FlattenFn:
    def finish(out: Any, keyed: bool, with_path: bool) -> tuple[Sequence[Any], Any, list[Any] | None]:
        """What the user's function returned (``flatten_with_keys``'s if ``keyed``), checked and
        made (children, node data, keys)."""
        if keyed:
            pairs, data = _pair(cls, "flatten_with_keys", out)
            keys, children = _unzip_keyed(cls, pairs)
            return children, data, keys if with_path else None
        children_it, data = _pair(cls, "flatten", out)
        kids = _children(cls, "flatten", children_it)
        return kids, data, _flat_keys(len(kids)) if with_path else None

    def flatten_node(node: Any, with_path: bool) -> tuple[Sequence[Any], Any, list[Any] | None]:
        if flatten is None or (with_path and flatten_with_keys is not None):
            assert flatten_with_keys is not None
            return finish(flatten_with_keys(node), True, with_path)
        return finish(flatten(node), False, with_path)

    # The native walker calls these itself (`keyed` with key paths, `plain` without, where
    # given), and hands what they return to `finish` when it is not of the usual shape.
    flatten_node.plain = flatten  # type: ignore[attr-defined]
    flatten_node.keyed = flatten_with_keys  # type: ignore[attr-defined]
    flatten_node.finish = finish  # type: ignore[attr-defined]
    return flatten_node


def _tuple_children(unflatten_func: Callable[[Any, Any], Any]) -> UnflattenFn:
    """``unflatten_func`` called with the children as a tuple, as jax calls it."""

    def unflatten(data: Any, children: Sequence[Any]) -> Any:
        return unflatten_func(data, children if type(children) is tuple else tuple(children))

    # The native builder calls it itself, with the children as a tuple.
    unflatten.func = unflatten_func  # type: ignore[attr-defined]
    return unflatten


def register_pytree_node(
    nodetype: type[Any],
    flatten_func: Callable[[Any], tuple[Iterable[Any], Hashable]],
    unflatten_func: Callable[[Any, Iterable[Any]], Any],
    flatten_with_keys_func: Callable[[Any], tuple[Iterable[tuple[KeyEntry, Any]], Hashable]] | None = None,
) -> None:
    """Register ``nodetype`` as a container with children and node data (jax's signature).

    >>> class Pair:
    ...     def __init__(self, a, b): self.a, self.b = a, b
    >>> register_pytree_node(Pair, lambda p: ((p.a, p.b), None), lambda _, c: Pair(*c))
    >>> from treekit import tree_leaves_with_path
    >>> tree_leaves_with_path(Pair(1, [2]))
    [((FlattenedIndexKey(key=0),), 1), ((FlattenedIndexKey(key=1), SequenceKey(idx=0)), 2)]
    >>> _remove(Pair)

    Args:
        nodetype: The class; matched exactly (subclasses are leaves unless registered too).
        flatten_func: ``node -> (children, node_data)``; ``node_data`` must be hashable and
            comparable, it becomes part of the treedef.
        unflatten_func: ``(node_data, children) -> node``; ``children`` is a tuple.
        flatten_with_keys_func: ``node -> ((key entry, child) pairs, node_data)``; without it
            the children's key entries are :class:`FlattenedIndexKey`.

    Raises:
        TypeError: If ``nodetype`` is not a class or a function is not callable.
        ValueError: If ``nodetype`` is already registered.
    """
    _check_class("nodetype", nodetype)
    _check_function("flatten_func", flatten_func)
    _check_function("unflatten_func", unflatten_func)
    _check_function("flatten_with_keys_func", flatten_with_keys_func, optional=True)
    flatten = _make_flatten(nodetype, flatten_func, flatten_with_keys_func)
    _add(NodeType(nodetype, flatten, _tuple_children(unflatten_func)))


def register_pytree_with_keys(
    nodetype: type[Any],
    flatten_with_keys: Callable[[Any], tuple[Iterable[tuple[KeyEntry, Any]], Hashable]],
    unflatten_func: Callable[[Any, Iterable[Any]], Any],
    flatten_func: Callable[[Any], tuple[Iterable[Any], Hashable]] | None = None,
) -> None:
    """Register ``nodetype`` with a flatten function that names each child (jax's signature).

    >>> class Point:
    ...     def __init__(self, x, y): self.x, self.y = x, y
    >>> register_pytree_with_keys(
    ...     Point,
    ...     lambda p: (((GetAttrKey('x'), p.x), (GetAttrKey('y'), p.y)), None),
    ...     lambda _, c: Point(*c))
    >>> from treekit import keystr, tree_leaves_with_path
    >>> [(keystr(path), leaf) for path, leaf in tree_leaves_with_path([Point(1, 2)])]
    [('[0].x', 1), ('[0].y', 2)]
    >>> _remove(Point)

    Args:
        nodetype: The class; matched exactly.
        flatten_with_keys: ``node -> ((key entry, child) pairs, node_data)``.
        unflatten_func: ``(node_data, children) -> node``; ``children`` is a tuple.
        flatten_func: ``node -> (children, node_data)``, a faster equivalent used when no
            key paths are asked for; without it ``flatten_with_keys`` serves both.

    Raises:
        TypeError: If ``nodetype`` is not a class or a function is not callable.
        ValueError: If ``nodetype`` is already registered.
    """
    _check_class("nodetype", nodetype)
    _check_function("flatten_with_keys", flatten_with_keys)
    _check_function("unflatten_func", unflatten_func)
    _check_function("flatten_func", flatten_func, optional=True)
    flatten = _make_flatten(nodetype, flatten_func, flatten_with_keys)
    _add(NodeType(nodetype, flatten, _tuple_children(unflatten_func)))


def register_pytree_node_class(cls: C) -> C:
    """Class decorator: register ``cls`` with its ``tree_flatten`` / ``tree_unflatten`` methods.

    >>> @register_pytree_node_class
    ... class Box:
    ...     def __init__(self, v): self.v = v
    ...     def tree_flatten(self): return (self.v,), None
    ...     @classmethod
    ...     def tree_unflatten(cls, data, children): return cls(*children)
    >>> from treekit import tree_leaves
    >>> tree_leaves([Box(1), Box((2, 3))])
    [1, 2, 3]
    >>> _remove(Box)

    Args:
        cls: A class with a ``tree_flatten(self) -> (children, node_data)`` method and a
            ``tree_unflatten(cls, node_data, children)`` classmethod.

    Returns:
        ``cls``, unchanged.

    Raises:
        TypeError: If ``cls`` is not a class or lacks one of the two methods.
        ValueError: If ``cls`` is already registered.
    """
    _check_methods(cls, "tree_flatten", "tree_unflatten")
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)  # type: ignore[attr-defined]
    return cls


def register_pytree_with_keys_class(cls: C) -> C:
    """Class decorator: register ``cls`` with ``tree_flatten_with_keys`` / ``tree_unflatten``.

    A ``tree_flatten`` method, if the class has one, serves flattening without paths.

    >>> @register_pytree_with_keys_class
    ... class Box:
    ...     def __init__(self, v): self.v = v
    ...     def tree_flatten_with_keys(self): return ((GetAttrKey('v'), self.v),), None
    ...     @classmethod
    ...     def tree_unflatten(cls, data, children): return cls(*children)
    >>> from treekit import keystr, tree_leaves_with_path
    >>> [keystr(path) for path, _ in tree_leaves_with_path({'box': Box(1)})]
    ["['box'].v"]
    >>> _remove(Box)

    Args:
        cls: A class with a ``tree_flatten_with_keys(self) -> ((key entry, child) pairs,
            node_data)`` method and a ``tree_unflatten(cls, node_data, children)`` classmethod.

    Returns:
        ``cls``, unchanged.

    Raises:
        TypeError: If ``cls`` is not a class or lacks one of the two methods.
        ValueError: If ``cls`` is already registered.
    """
    _check_methods(cls, "tree_flatten_with_keys", "tree_unflatten")
    flatten = getattr(cls, "tree_flatten", None)
    register_pytree_with_keys(
        cls,
        lambda x: x.tree_flatten_with_keys(),
        cls.tree_unflatten,  # type: ignore[attr-defined]
        (lambda x: x.tree_flatten()) if flatten is not None else None,
    )
    return cls


def register_dataclass(
    nodetype: C,
    data_fields: Sequence[str] | None = None,
    meta_fields: Sequence[str] | None = None,
    drop_fields: Sequence[str] = (),
) -> C:
    """Register a dataclass: data fields are children, meta fields go to the treedef (jax's rules).

    Without ``data_fields`` / ``meta_fields``, fields marked ``static`` (``field(metadata=
    {'static': True})`` or :func:`static`) are meta fields and the others data fields.

    >>> import dataclasses
    >>> @register_dataclass
    ... @dataclasses.dataclass
    ... class Layer:
    ...     w: float
    ...     b: float
    ...     act: str = static(default='relu')
    >>> from treekit import tree_flatten_with_path, keystr
    >>> pairs, treedef = tree_flatten_with_path(Layer(1.0, 0.0))
    >>> [(keystr(p), v) for p, v in pairs], treedef
    ([('.w', 1.0), ('.b', 0.0)], PyTreeDef(CustomNode(Layer[('relu',)], [*, *])))
    >>> _remove(Layer)

    Args:
        nodetype: The class, returned unchanged (so this works as a decorator).
        data_fields: Attribute names whose values are children (key entries :class:`GetAttrKey`).
        meta_fields: Attribute names whose values are node data; they must be hashable.
        drop_fields: Dataclass ``init`` fields that are neither (rebuilt by their defaults).

    Returns:
        ``nodetype``, unchanged.

    Raises:
        TypeError: If only one of ``data_fields`` / ``meta_fields`` is given, or neither for a
            class that is not a dataclass.
        ValueError: If the fields do not cover the dataclass's ``init`` fields exactly, overlap,
            or the class is already registered.
    """
    _check_class("nodetype", nodetype)
    for label, names in (("data_fields", data_fields), ("meta_fields", meta_fields), ("drop_fields", drop_fields)):
        if names is None:
            continue
        if isinstance(names, str) or not isinstance(names, Iterable) or not all(isinstance(n, str) for n in names):
            what = type(names).__name__ if isinstance(names, str) or not isinstance(names, Iterable) else "other items"
            hint = f" (one name goes in a list: {label}=[{names!r}])" if isinstance(names, str) else ""
            raise TypeError(f"{label}: expected a sequence of attribute names (str), got {what}{hint}")
    if data_fields is None or meta_fields is None:
        if (data_fields is None) != (meta_fields is None):
            raise TypeError(
                "register_dataclass: pass both data_fields and meta_fields, or neither; "
                f"got data_fields={data_fields!r}, meta_fields={meta_fields!r}"
            )
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError(
                f"register_dataclass: {nodetype.__qualname__} is not a dataclass; "
                "pass data_fields and meta_fields"
            )
        fields = [f for f in dataclasses.fields(nodetype) if f.name not in drop_fields]
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
    data = tuple(data_fields)
    meta = tuple(meta_fields)
    if dataclasses.is_dataclass(nodetype):
        init = {f.name for f in dataclasses.fields(nodetype) if f.init} - set(drop_fields)
        if set(data) | set(meta) != init:
            missing = sorted(init - set(data) - set(meta))
            extra = sorted((set(data) | set(meta)) - init)
            raise ValueError(
                f"register_dataclass: {nodetype.__qualname__}: data_fields and meta_fields must list "
                f"every init field exactly once (missing {missing}; not init fields {extra}; "
                "put fields to leave out in drop_fields)"
            )
    if overlap := sorted(set(data) & set(meta)):
        raise ValueError(f"register_dataclass: {nodetype.__qualname__}: fields {overlap} are both data and meta")
    keys = [GetAttrKey(name) for name in data]

    def flatten(node: Any, with_path: bool) -> tuple[list[Any], tuple[Any, ...], list[Any] | None]:
        return (
            [getattr(node, name) for name in data],
            tuple(getattr(node, name) for name in meta),
            keys if with_path else None,
        )

    def unflatten(meta_values: tuple[Any, ...], children: list[Any]) -> Any:
        return nodetype(**dict(zip(meta, meta_values)), **dict(zip(data, children)))

    _add(NodeType(nodetype, flatten, unflatten, "dataclass"))
    return nodetype


def static(**kwargs: Any) -> Any:
    """A ``dataclasses.field`` marked static: a meta field for :func:`register_dataclass`.

    >>> import dataclasses
    >>> dataclasses.field(metadata={'static': True}, default=1).metadata == static(default=1).metadata
    True

    Args:
        **kwargs: Passed to ``dataclasses.field``; a ``metadata`` mapping is copied and gets
            ``'static': True`` unless it says ``'static'`` itself.

    Returns:
        The field, for a dataclass body (``act: str = static(default='relu')``).
    """
    metadata = dict(kwargs.pop("metadata", None) or {})
    metadata.setdefault("static", True)
    return dataclasses.field(metadata=metadata, **kwargs)


def register_static(cls: C) -> C:
    """Register ``cls`` as a node with no children whose instances are node data.

    Instances must be hashable; two trees holding equal instances have equal treedefs.

    >>> @register_static
    ... class Tag(str): pass
    >>> from treekit import tree_flatten
    >>> tree_flatten([1, Tag('relu')])
    ([1], PyTreeDef([*, CustomNode(Tag[relu], [])]))
    >>> _remove(Tag)

    Args:
        cls: The class; matched exactly.

    Returns:
        ``cls``, unchanged.

    Raises:
        TypeError: If ``cls`` is not a class.
        ValueError: If ``cls`` is already registered.
    """
    _check_class("cls", cls)

    def flatten(node: Any, with_path: bool) -> tuple[tuple[()], Any, Any]:
        return (), node, () if with_path else None

    _add(NodeType(cls, flatten, lambda node, _: node, "static"))
    return cls


def is_tree_node(typ: object) -> bool:
    """Whether instances of ``typ`` are nodes (built-in, namedtuple or registered), not leaves.

    >>> is_tree_node(dict), is_tree_node(type(None)), is_tree_node(int), is_tree_node([1])
    (True, True, False, False)

    Args:
        typ: A class. Anything else (an instance such as ``[1]``) gives ``False``, as in jax.

    Returns:
        ``True`` for built-in containers, ``NoneType``, namedtuple classes and registered
        classes; ``False`` for everything else, subclasses of registered classes included.
    """
    return isinstance(typ, type) and lookup(typ) is not None


def _one_level(tree: Any, with_path: bool) -> tuple[NodeType, Any, Any, Any]:
    ntype = lookup(type(tree))
    if ntype is None:
        raise ValueError(f"can't tree-flatten type: {type(tree)}")
    children, data, keys = ntype.flatten(tree, with_path)
    return ntype, children, plain_data(ntype, data), keys


def plain_data(ntype: NodeType, node_data: Any) -> Any:
    """Node data as jax shows it: dict keys as a plain tuple (not the private ``SortedKeys``)."""
    if ntype.kind == "dict":
        return tuple(node_data)
    if ntype.kind == "defaultdict":
        return node_data[0], tuple(node_data[1])
    return node_data


def flatten_one_level(tree: Any) -> tuple[Iterable[Any], Hashable]:
    """Children and node data of one node, as jax's ``flatten_one_level`` gives them.

    >>> flatten_one_level({'b': [1, 2], 'a': 3})
    ((3, [1, 2]), ('a', 'b'))

    Args:
        tree: A node (not a leaf).

    Returns:
        ``(children, node_data)``: the root's children in leaf order, and its node data
        (sorted keys for a dict, the class for a namedtuple, ``None`` for lists and tuples).
        The children come as jax gives them: a list or tuple node itself, a tuple for a
        dict, a list for other built-in nodes and dataclasses, and for a registered class
        what its flatten function returned (a list if that was neither list nor tuple).

    Raises:
        ValueError: If ``tree`` is a leaf.
    """
    ntype, children, data, _ = _one_level(tree, False)
    kind = ntype.kind
    if kind == "dict":
        return tuple(children), data
    if kind == "namedtuple":
        return list(children), data
    return children, data


def flatten_one_level_with_keys(tree: Any) -> tuple[Iterable[tuple[KeyEntry, Any]], Hashable]:
    """``(key entry, child)`` pairs and node data of one node, as jax's function of that name.

    >>> flatten_one_level_with_keys([1, 2])
    (((SequenceKey(idx=0), 1), (SequenceKey(idx=1), 2)), None)

    Args:
        tree: A node (not a leaf).

    Returns:
        ``(pairs, node_data)``: a tuple of ``(key entry, child)`` pairs and the node data,
        as :func:`flatten_one_level`.

    Raises:
        ValueError: If ``tree`` is a leaf.
    """
    _, children, data, keys = _one_level(tree, True)
    return tuple(zip(keys, children)), data


def node_record_data(ntype: NodeType, cls: type, data: Any, arity: int) -> tuple[Any, list[int]]:
    """A TreeDef record's node data for ``(cls, data)`` as ``node_data()`` shows it over
    ``arity`` children, and the order the children go in (dict keys go in leaf order)."""
    kind = ntype.kind
    order = list(range(arity))
    if kind in ("dict", "defaultdict", "ordereddict"):
        keys = list(data[1] if kind == "defaultdict" else data)
        if len(keys) != arity or len(set(keys)) != arity:
            raise ValueError(f"node_data: expected {arity} distinct keys, one per child, got {keys!r:.80}")
        if kind == "ordereddict":
            return tuple(keys), order
        position = dict(zip(keys, order))
        ordered = dict_order(position)
        order = [position[key] for key in ordered]
        return ((data[0], ordered) if kind == "defaultdict" else ordered), order
    if kind == "namedtuple":
        if len(cls._fields) != arity:  # type: ignore[attr-defined]
            raise ValueError(f"children: expected {len(cls._fields)} for {cls.__qualname__}, got {arity}")  # type: ignore[attr-defined]
        return cls, order
    if kind in ("list", "tuple", "none"):
        if kind == "none" and arity:
            raise ValueError(f"children: expected none for None, got {arity}")
        return None, order
    return data, order

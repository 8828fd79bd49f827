"""The node-type registry: one ``NodeType`` entry per container type, built-ins included."""

from __future__ import annotations

import builtins
import collections
import contextlib
import dataclasses
import gc
import operator
import sys
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from typing import Any

from treekit.core._core import NATIVE
from treekit.core._keys import DictKey, FlattenedIndexKey, GetAttrKey, SequenceKey

__all__ = ["NodeType", "lookup", "resolve"]


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


def _forget_before_full_collection(
    phase: str, info: dict[str, Any], _finalizing: Callable[[], bool] = sys.is_finalizing
) -> None:
    """Before each full garbage collection, the native core drops its dataclass nodes' kept
    node data and records (their node types hold their classes), and the registry the answers
    remembered for unregistered types (and namedtuple classes' field keys): classes the
    program has dropped are then collected by that very collection, not kept alive by
    treekit. (A class refers to itself through its ``__mro__``, so only a collection frees
    it.) The answers are kept when another thread, or the code the collection interrupted,
    holds the lock: the next full collection drops them. Skipped at interpreter exit, whose
    collections run while modules' globals are cleared (``sys.is_finalizing`` is bound as a
    default, so it is there then).
    """
    if _finalizing() or phase != "start" or info.get("generation") != 2:
        return
    forget = getattr(NATIVE, "forget_node_data", None)  # (None: the pure core)
    if forget is not None:
        forget()
    if getattr(_HELD, "depth", 0) or not _LOCK.acquire(blocking=False):
        return
    try:
        _drop_answers()
        _FIELD_KEYS.clear()
    finally:
        _LOCK.release()


gc.callbacks.append(_forget_before_full_collection)


def add_type(ntype: NodeType) -> None:
    with _locked():
        if ntype.type in REGISTERED:
            name = f"{ntype.type.__module__}.{ntype.type.__qualname__}"
            raise ValueError(f"{name} is already registered as a pytree node")
        REGISTERED[ntype.type] = ntype
        _ANSWERED.pop(ntype.type, None)
        TYPES[ntype.type] = ntype
    for listener in list(LISTENERS):
        listener(ntype)


def remove_type(cls: type) -> None:
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


def flat_keys(n: int) -> list[FlattenedIndexKey]:
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

"""GC pressure (issue 21): every native entry point with user code run in the middle of a walk.

The native core holds references it borrowed and lengths it read while it calls into code
that may run Python: an allocation can collect garbage (``gc.callbacks``, finalizers), a type
lookup can call a metaclass's ``__hash__``/``__eq__``, comparing node data calls its
``__eq__``, and registered flatten / unflatten functions, ``is_leaf`` and ``tree_map``'s ``f``
are the user's. Each example builds a tree from primitive draws (lists, tuples, small and big
dicts with str keys inserted sorted and unsorted and with other keys, layers of dicts of one
key set, namedtuples, None, OrderedDict, defaultdict, a registered dataclass, classes
registered with and without keys), draws one entry point and its arguments, and asks the pure
core for the answer (the oracle: nothing hostile runs). Then, under ``gc.set_threshold(1)`` (a
collection at every second container allocation):

1. the call twice, every list the collector tracks walked at each collection (a half-built
   list holds NULLs: a crash), once each way of falling on the allocations: the oracle's
   answer exactly; these runs also count the events of the example's *site*;
2. the call with a *chaos*: one drawn action run at the K-th event of the site (K drawn), or
   at each one. Sites: a collection, seen by a ``gc.callbacks`` callback or by the finalizer
   of a cycle that the collection frees; a leaf type's metaclass; a node data ``__eq__``; a
   flatten or unflatten function; ``f``; ``is_leaf``. Actions: clear, shrink, grow, reorder,
   replace an item of, insert a key into one container of the trees, every one, or "its own"
   (the one holding the leaf the event is about, or the list the last flatten function gave);
   call treekit again (on another tree, on the same one, on big dicts of many key sets and on
   thousands of key orders, to evict the native core's caches); ``gc.collect()``; walk every
   list; clear the young lists holding only this example's leaves; make the next flatten or
   unflatten call raise, once. The free lists of small tuples and lists are mostly drained
   first (``_drain``): a tuple made then comes from the collector's allocator, so that nearly
   every allocation is a point where user code runs.

The verdict (``_judge``): a call whose chaos changed nothing gives exactly the oracle's
answer; one whose chaos changed the trees gives an answer that keeps the laws (as many leaves
as the treedef says, an unflatten that works and flattens back to the same structure, as
many paths as leaves, as many subtrees as the structure's leaves, every object alive), or
raises one of ``ACCEPTED`` with a message; a flatten or unflatten function that raised makes
the call raise (its error is not swallowed by calling the function again); never
SystemError, and a crash fails the run (run it under ``PYTHONMALLOC=debug`` or the sanitizer
build to turn reads of freed memory into crashes). With the pure core in use, the oracle is
the core under test. The ``test_flaky_*`` tests pin the flaky-function rule exactly.
"""

from __future__ import annotations

import collections
import gc
import importlib.util
import itertools
import pickle
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

import pytest
from garbage import DC, NT  # (the fuzz's own namedtuple and dataclass)

pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

import treekit
from treekit import _keys, _ops, _registry, _traverse, _treedef
from treekit.core._build import interpret
from treekit.core._treedef import TreeDef

# Examples per site: 3x the profile's ("ci": 180, the whole file about 40 s here; "few", for the sanitizer
# build, 30). No shrinking: an example makes 3 calls under pressure, and a failure's message says which
# call, site and action failed.
EXAMPLES = max(1, settings().max_examples * 3)


class ChaosError(Exception):
    """The user's own exception: what the flaky functions raise."""


# What a call may raise when the chaos changed its tree: the user's exception, and treekit's
# errors for a tree that changed under it (a shortened node: ValueError; "dictionary changed
# size during iteration": RuntimeError). A chaos that changed nothing allows no exception.
ACCEPTED: tuple[type[Exception], ...] = (ChaosError, ValueError, TypeError, RuntimeError)
# Where it changed treekit's own state (a TreeDef's records list, lists of the walk's found through
# gc.get_objects()), any exception but SystemError.
ACCEPTED_HOSTILE: tuple[type[Exception], ...] = (Exception,)


# -- the objects of the trees ---------------------------------------------------------------------
class Leaf:
    __slots__ = ("__weakref__", "n")

    def __init__(self, n: int) -> None:
        self.n = n

    def __repr__(self) -> str:
        return f"Leaf({self.n})"


class ChaosMeta(type):
    """A leaf type's metaclass: looking the type up in the registry runs the chaos."""

    def __hash__(cls) -> int:
        CHAOS.hit("meta", cls)
        return hash(list) if cls.collide else type.__hash__(cls)  # type: ignore[attr-defined]

    def __eq__(cls, other: object) -> bool:  # met when the hash collides with list's entry
        CHAOS.hit("meta", cls)
        return cls is other


class MetaLeaf(metaclass=ChaosMeta):
    __slots__ = ("n",)
    collide = False

    def __init__(self, n: int) -> None:
        self.n = n

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.n})"


class MetaLeafB(MetaLeaf):
    __slots__ = ()


class MetaLeafEq(MetaLeaf):
    __slots__ = ()
    collide = True


class MetaLeafEqB(MetaLeaf):
    __slots__ = ()
    collide = True


META_LEAVES = (MetaLeaf, MetaLeafB, MetaLeafEq, MetaLeafEqB)


class Data:
    """Node data whose ``__eq__`` runs the chaos (a fresh one per flatten: never the same object)."""

    __slots__ = ("tag",)

    def __init__(self, tag: str) -> None:
        self.tag = tag

    def __eq__(self, other: object) -> bool:
        CHAOS.hit("data_eq")  # (its own node's list: the one its flatten function just gave, CURRENT)
        return type(other) is Data and other.tag == self.tag

    def __hash__(self) -> int:
        return hash(self.tag)

    def __repr__(self) -> str:
        return f"Data({self.tag!r})"


class Box:
    """register_pytree_node: ``children`` is the very list its flatten function returns."""

    def __init__(self, tag: str, children: list[Any]) -> None:
        self.tag, self.children = tag, children


class BoxK(Box):
    """register_pytree_node with a flatten_with_keys function."""


class Keyed:
    """register_pytree_with_keys: ``pairs`` is the very list of (key, child) pairs returned."""

    def __init__(self, tag: str, pairs: list[tuple[Any, Any]]) -> None:
        self.tag, self.pairs = tag, pairs


class KeyedF(Keyed):
    """register_pytree_with_keys with a flatten function for walks without paths."""


class Out:
    """What ``f`` returns: its arguments."""

    __slots__ = ("args",)

    def __init__(self, args: tuple[Any, ...]) -> None:
        self.args = args

    def __repr__(self) -> str:
        return f"Out{self.args!r}"


CURRENT: list[Any] = [None]  # the list the last flatten function handed the walker (its "own" container)


def _user(site: str, own: Any = None) -> Any:
    """A user function's start: the chaos's event, and the flaky error. Returns ``own``."""
    CURRENT[0] = own
    CHAOS.hit(site)
    if CHAOS.flaky:
        CHAOS.flaky = False
        CHAOS.flaky_raised = True
        raise ChaosError(f"a flaky {site} function raised (once)")
    return own


def _box_flatten(b: Box) -> tuple[list[Any], Data]:
    return _user("flatten", b.children), Data(b.tag)


def _box_keys(b: Box) -> tuple[list[tuple[Any, Any]], Data]:
    return _user("flatten", [(treekit.GetAttrKey(f"k{i}"), c) for i, c in enumerate(b.children)]), Data(b.tag)


def _keyed_flatten_with_keys(k: Keyed) -> tuple[list[tuple[Any, Any]], Data]:
    return _user("flatten", k.pairs), Data(k.tag)


def _keyed_flatten(k: Keyed) -> tuple[list[Any], Data]:
    return _user("flatten", [c for _, c in k.pairs]), Data(k.tag)


def _unflatten_as(cls: type) -> Callable[[Data, tuple[Any, ...]], Any]:
    def unflatten(data: Data, children: tuple[Any, ...]) -> Any:
        _user("unflatten")
        if issubclass(cls, Keyed):
            return cls(data.tag, [(treekit.GetAttrKey(f"c{i}"), c) for i, c in enumerate(children)])
        return cls(data.tag, list(children))

    return unflatten


# -- the chaos ------------------------------------------------------------------------------------
class Chaos:
    """One action, run at the ``countdown``-th event of ``site`` while armed (at each, with
    ``every``); what it raises is an error of the example (it never raises into the walk)."""

    def __init__(self) -> None:
        self.armed = False
        self.flaky = False
        self.reset("none", 0, lambda: None, "none", "none")

    def reset(self, site: str, countdown: int, action: Callable[[], Any], effect: str, label: str) -> None:
        self.site, self.countdown, self.action, self.effect, self.label = site, countdown, action, effect, label
        self.fired = self.busy = self.every = False
        self.flaky = self.flaky_raised = False
        self.context: Any = None  # what the event is about: a leaf or leaf type (its container is "its own")
        self.errors: list[str] = []  # what went wrong inside the action (a SystemError, a wrong answer)

    def hit(self, site: str, context: Any = None) -> None:
        if not self.armed or self.busy or site != self.site:
            return
        self.countdown -= 1
        if self.countdown <= 0 or self.every:
            self.context = context
            self.fire()

    def fire(self) -> None:
        self.armed = self.every  # once (or at every event); nothing the action runs counts
        self.fired = self.busy = True
        try:
            self.action()
        except BaseException as exc:  # (in a gc callback or a finalizer: noted here, not raised)
            self.errors.append(f"the chaos action raised {type(exc).__name__}: {exc} (at {_where(exc)})")
        finally:
            self.busy = False


CHAOS = Chaos()


def _on_gc(phase: str, info: dict[str, Any]) -> None:
    if phase != CHAOS_PHASE[0]:
        return
    if HOARD and not CHAOS.busy and len(HOARD) < HOARD_LIMIT:
        _drain(16)
    if SWEEP[0] and not CHAOS.busy:
        _walk_lists()
    CHAOS.hit("gc")


CHAOS_PHASE = ["start"]  # the phase of a collection the callback acts in
SWEEP = [False]  # every collection walks every list (a half-built one holds NULLs: a crash)
HOARD: list[Any] = []  # objects taken off the interpreter's free lists, held while the call runs
HOARD_LIMIT = 100_000


def _drain(each: int) -> None:
    """Empty the free lists of small tuples and of lists (``each`` tuples of each size, fewer
    of the bigger): a tuple or list made then comes from the collector's allocator, which may
    collect, so that almost every allocation in the native core is a point where user code
    may run."""
    for n in range(1, 17):
        HOARD.extend([tuple(range(n)) for _ in range(each if n <= 8 else each // 8 + 1)])
    HOARD.extend([[] for _ in range(80 if each > 80 else 2)])


class _Finalizer:
    """A cycle whose finalizer, run by the collection that frees it, makes the next one: each
    collection runs one, in the middle of whatever allocated."""

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        if CHAOS.armed and CHAOS.site == "finalizer":
            _Finalizer()
            CHAOS.hit("finalizer")


@contextmanager
def pressure(site: str, pad: int, sweep: bool, drain: bool) -> Iterator[None]:
    """The chaos armed, a collection at every second allocation (``pad`` young objects more
    shift which), with ``drain`` at nearly every one (see ``_drain``), with ``sweep`` every
    list walked at each; all put back after."""
    threshold = gc.get_threshold()
    gc.freeze()  # what is older than the example is not walked at each collection
    gc.collect(0)
    if drain:
        _drain(2000)  # (the most a tuple free list holds)
    gc.set_threshold(1)
    gc.callbacks.append(_on_gc)
    SWEEP[0] = sweep
    try:
        CHAOS.armed = True
        if site == "finalizer":
            _Finalizer()
        padding = [[] for _ in range(pad)]
        yield
        del padding
    finally:
        CHAOS.armed = CHAOS.flaky = SWEEP[0] = False
        HOARD.clear()
        CURRENT[0] = CHAOS.context = None
        gc.callbacks.remove(_on_gc)
        gc.set_threshold(*threshold)
        gc.unfreeze()


def _where(exc: BaseException) -> str:
    """Where in treekit ``exc`` was raised: the innermost treekit frame, ``file:line``."""
    tb, last = exc.__traceback__, "outside treekit"
    while tb is not None:
        if "/treekit/" in tb.tb_frame.f_code.co_filename:
            last = f"{tb.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno}"
        tb = tb.tb_next
    return last


def _has(exc: BaseException | None, cls: type[BaseException]) -> bool:
    """``exc`` or an exception it was raised from (or during) is a ``cls``."""
    seen = 0
    while exc is not None and seen < 20:
        if isinstance(exc, cls):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


# -- the pure core, in this very process ------------------------------------------------------------
PURE = [False]


@contextmanager
def pure_core() -> Iterator[None]:
    """The public functions on the pure core (the module globals they read, swapped)."""
    saved = (_ops.NATIVE, _ops.flatten, _ops._leaves, _ops._structure, _ops.flatten_pairs, _treedef.NATIVE)
    _ops.NATIVE = None
    _ops.flatten = _traverse.pure_flatten
    _ops._leaves = lambda tree, is_leaf=None: _traverse.pure_flatten(tree, is_leaf)[0]
    _ops._structure = lambda tree, is_leaf=None: _traverse.pure_flatten(tree, is_leaf)[1]
    _ops.flatten_pairs = _traverse.pure_flatten_pairs
    _treedef.NATIVE = None
    PURE[0] = True
    try:
        yield
    finally:
        _ops.NATIVE, _ops.flatten, _ops._leaves, _ops._structure, _ops.flatten_pairs, _treedef.NATIVE = saved
        PURE[0] = False


def keystr(*args: Any, **kwargs: Any) -> str:
    return (_keys._pure_keystr if PURE[0] else treekit.keystr)(*args, **kwargs)


# -- trees from draws ----------------------------------------------------------------------------------
KEYS = [sys.intern(f"k{i:02d}") for i in range(48)]  # shared key objects: the native caches hit
SMALL, BIG = (1, 8), (9, 14)  # dict sizes: the native core keeps big dicts' key orders apart


# classes registered with JAX through functions treekit knows (test_known_functions: equinox's
# generated ones, nnx's Variable and State), where jax is installed: the native core reads them itself
GENERATED: tuple[type, ...] = ()
if importlib.util.find_spec("jax") is not None:
    from test_known_functions import KINDS as GENERATED
    from test_known_functions import State, Variable, _variable
    from test_known_functions import _node as generated_node
KINDS = tuple(range(14 + 2 * bool(GENERATED)))  # node kinds (see World.node): 9-12 are the registered classes
KINDS_AT = {site: (*KINDS, 9, 10, 11, 12, 9, 10, 11, 12) for site in ("data_eq", "flatten", "unflatten")}


class World:
    """One example: its draws, its trees, the containers a chaos may change."""

    def __init__(self, data: st.DataObject, site: str) -> None:
        self.data = data
        self.site = site
        self.count = itertools.count()
        self.budget = 40  # leaves, about

    def int(self, lo: int, hi: int) -> int:
        return self.data.draw(st.integers(lo, hi))

    def pick(self, *options: Any) -> Any:
        return options[self.int(0, len(options) - 1)]

    def leaf(self) -> Any:
        self.budget -= 1
        choice = self.int(0, 9)
        if self.site == "meta" and choice < 5:
            return META_LEAVES[choice % 4](next(self.count))
        if choice < 8:
            return Leaf(next(self.count))
        return self.pick(0, 7, "s", 2.5, b"b")

    def keys(self, n: int) -> list[Any]:
        how = self.int(0, 5)
        if how <= 3:  # str keys from the shared pool (a few key sets: they repeat), sorted (0, 1) or not
            start = min(self.pick(0, 0, 5, 20), len(KEYS) - n)
            keys = KEYS[start : start + n]
            if how == 2:
                keys = keys[::-1]
            elif how == 3:
                keys = self.data.draw(st.permutations(keys))
            return list(keys)
        if how == 4:  # int keys, in some order
            return list(self.data.draw(st.permutations(range(n))))
        return [self.pick(i, f"m{i}", (i,)) for i in range(n)]  # keys of types that do not compare: by type

    def node(self, depth: int, root: bool = False) -> Any:
        if not root and (depth <= 0 or self.budget <= 0 or self.int(0, 3) == 3):
            return self.leaf()
        kind = self.data.draw(st.sampled_from(KINDS_AT.get(self.site, KINDS)))
        if root and kind == 5:
            kind = 0
        if kind in (3, 4):
            size = self.int(*(BIG if kind == 4 else SMALL))
            keys = self.keys(size)
            return {k: self.node(depth - 2 if kind == 4 else depth - 1) for k in keys}
        if kind == 5:
            return None
        n = 0 if self.int(0, 7) == 7 else 3 - self.int(0, 2)  # (hypothesis draws small numbers most)
        kids = [self.node(depth - 1) for _ in range(n)]
        if kind == 0:
            return kids
        if kind == 1:
            return tuple(kids)
        if kind == 2:
            return NT(*[*kids, None, None][:2])
        if kind == 6:
            return collections.OrderedDict(zip(self.keys(n), kids))
        if kind == 7:
            return collections.defaultdict(list, zip(self.keys(n), kids))
        if kind == 8:
            return DC(*[*kids, None, None][:2])
        if kind in (9, 10):
            return (Box, BoxK)[kind - 9](self.pick("a", "b"), kids)
        if kind in (11, 12):
            cls = (Keyed, KeyedF)[kind - 11]
            return cls(self.pick("a", "b"), [(treekit.GetAttrKey(f"c{i}"), c) for i, c in enumerate(kids)])
        if kind == 14:  # w, size (static), b, act (static); a wrapper field and one more item drawn
            w, b = [*kids, None, None][:2]
            values = {"w": w, "size": self.pick(1, 2), "b": b, "act": "relu"}
            return generated_node(GENERATED[3], values, {"__doc__": "d"} if self.int(0, 1) else {}, self.int(0, 1) == 1)
        if kind == 15:  # an nnx-like State of str keys, every other child in a Variable of metadata
            return State({f"s{i}": _variable(kid, {"b": i, "a": 0}) if i % 2 else kid for i, kid in enumerate(kids)})
        keys = self.keys(self.int(*(BIG if self.int(0, 2) == 0 else SMALL)))  # layers: dicts of one key set
        return [{k: self.node(depth - 2) for k in keys} for _ in range(n or 2)]

    def tree(self) -> Any:
        return self.node(5 - self.int(0, 3), root=True)

    def like(self, treedef: TreeDef) -> Any:
        """A tree of ``treedef``'s structure with fresh leaves, some of them whole subtrees."""
        leaves = [
            [Leaf(next(self.count)), Leaf(next(self.count))] if self.int(0, 5) == 0 else Leaf(next(self.count))
            for _ in range(treedef.num_leaves)
        ]
        return interpret(treedef._nodes, leaves)


def containers(tree: Any) -> list[Any]:
    """The mutable containers of ``tree`` (registered nodes' children and pairs lists too)."""
    out: list[Any] = []
    stack = [tree]
    while stack:
        x = stack.pop()
        if type(x) in (list, dict, collections.OrderedDict, collections.defaultdict):
            out.append(x)
            stack.extend(x.values() if isinstance(x, dict) else x)
        elif type(x) in (tuple, NT):
            stack.extend(x)
        elif type(x) is DC:
            stack += [x.x, x.y]
        elif type(x) in GENERATED:  # (its __dict__ is not changed: equinox's functions keep the laws
            stack.extend(x.__dict__.values())  # only for a dict holding all its fields, or other than as many items)
        elif GENERATED and type(x) in (State, Variable):  # (not changed: nnx's functions sort the keys)
            stack.extend(x._mapping.values() if type(x) is State else [x._raw_value])
        elif isinstance(x, Box):
            out.append(x.children)
            stack.extend(x.children)
        elif isinstance(x, Keyed):
            out.append(x.pairs)
            stack.extend(c for _, c in x.pairs)
    return out


# -- a canonical description: equal descriptions, equal answers ----------------------------------------
def describe(x: Any) -> Any:
    """Types, dict key order, node data and leaves by identity (no reference to a leaf kept)."""
    t = type(x)
    if t is list or t is tuple:
        return (t.__name__, tuple(map(describe, x)))
    if t in (dict, collections.OrderedDict, collections.defaultdict):
        factory = getattr(x, "default_factory", None)
        return (t.__name__, factory, tuple((describe(k), describe(v)) for k, v in x.items()))
    if t is NT:
        return ("NT", describe(x.a), describe(x.b))
    if t is DC:
        return ("DC", describe(x.x), describe(x.y), x.tag)
    if t in GENERATED:
        return (t.__name__, tuple((k, describe(v)) for k, v in x.__dict__.items()))
    if GENERATED and t is State:
        return ("State", tuple((k, describe(v)) for k, v in x._mapping.items()))
    if GENERATED and t is Variable:
        return ("Variable", describe(x._raw_value), tuple(sorted(x._var_metadata.items())))
    if isinstance(x, Box):
        return (t.__name__, x.tag, describe(x.children))
    if isinstance(x, Keyed):
        return (t.__name__, x.tag, tuple((repr(k), describe(c)) for k, c in x.pairs))
    if t is Out:
        return ("Out", describe(x.args))
    if t is TreeDef:
        return ("TreeDef", repr(x), x._nodes)
    if t in (treekit.SequenceKey, treekit.DictKey, treekit.GetAttrKey, treekit.FlattenedIndexKey):
        return ("key", repr(x))
    if x is None or t in (int, str, float, bytes):
        return (t.__name__, x)
    return ("leaf", id(x))


def alive(x: Any) -> None:
    """Every object in an answer is a live object: its repr works (a freed one crashes)."""
    repr(x)


# -- the entry points ---------------------------------------------------------------------------------
class Call(NamedTuple):
    name: str
    prepare: Callable[[World, Any], dict[str, Any]]  # the arguments, drawn
    run: Callable[[dict[str, Any]], Any]  # the public API call (on the core in use, or under pure_core())
    laws: Callable[[dict[str, Any], Any], None]  # what an answer must keep when the tree changed


def _is_leaf(w: World, takes_path: bool = False) -> Any:
    how = w.int(0, 4)
    if how <= 1:
        return None
    test = (lambda x: type(x) is tuple, lambda x: isinstance(x, Box), lambda x: False)[how - 2]
    if takes_path:
        return lambda path, x: (CHAOS.hit("is_leaf", x), test(x))[1]
    return lambda x: (CHAOS.hit("is_leaf", x), test(x))[1]


def _f(*args: Any) -> Out:
    CHAOS.hit("f", args[-1])
    return Out(args)


def _flat_args(takes: bool) -> Callable[[World, Any], dict[str, Any]]:
    """The tree and an ``is_leaf`` (one taking the key path too, if ``takes``)."""

    def prepare(w: World, tree: Any) -> dict[str, Any]:
        takes_path = takes and w.int(0, 1) == 1
        return {"tree": tree, "is_leaf": _is_leaf(w, takes_path), "takes_path": takes_path}

    return prepare


def _structure(tree: Any, a: dict[str, Any]) -> TreeDef:
    """``tree``'s structure under the call's ``is_leaf``, from the pure core."""
    with pure_core():
        return treekit.tree_flatten_with_path(tree, a["is_leaf"], a["takes_path"])[1]


def _flatten_laws(a: dict[str, Any], out: tuple[list[Any], TreeDef]) -> None:
    leaves, treedef = out
    alive(leaves)
    assert len(leaves) == treedef.num_leaves, f"{len(leaves)} leaves for {treedef}"
    with pure_core():
        rebuilt = treekit.tree_unflatten(treedef, leaves)
    assert _structure(rebuilt, a) == treedef


def _paths_laws(a: dict[str, Any], pairs: list[tuple[Any, Any]]) -> None:
    alive(pairs)
    for path, _ in pairs:
        assert type(path) is tuple
        keystr(path)


def _pairs_laws(a: dict[str, Any], out: tuple[list[tuple[Any, Any]], TreeDef]) -> None:
    pairs, treedef = out
    _paths_laws(a, pairs)
    _flatten_laws(a, ([x for _, x in pairs], treedef))


def _structure_laws(a: dict[str, Any], treedef: TreeDef) -> None:
    _flatten_laws(a, ([Leaf(-1) for _ in range(treedef.num_leaves)], treedef))


def _treedef_args(w: World, tree: Any) -> dict[str, Any]:
    with pure_core():
        treedef = treekit.tree_structure(tree)
    records = w.int(0, 3) == 0  # a TreeDef made from a list of records (a changed list: "hostile")
    nodes = list(treedef._nodes) if records else treedef._nodes
    return {
        "treedef": TreeDef(nodes),  # type: ignore[arg-type]
        "records": nodes if records else None,
        "leaves": [Leaf(next(w.count)) for _ in range(treedef.num_leaves)],
        "plain": treedef,
    }


def _unflatten_laws(a: dict[str, Any], out: Any) -> None:
    alive(out)
    with pure_core():
        assert treekit.tree_structure(out) == a["plain"]


def _up_to_args(w: World, tree: Any) -> dict[str, Any]:
    a = _treedef_args(w, tree)
    a["other"] = w.like(a["plain"])
    return a


def _up_to_laws(a: dict[str, Any], out: list[Any]) -> None:
    alive(out)
    assert type(out) is list and len(out) == a["plain"].num_leaves, f"{len(out)} subtrees for {a['plain']}"


def _map_args(path: bool) -> Callable[[World, Any], dict[str, Any]]:
    def prepare(w: World, tree: Any) -> dict[str, Any]:
        a = _flat_args(path)(w, tree)
        a["rest"] = [w.like(_structure(tree, a)) for _ in range(w.int(0, 2))]
        return a

    return prepare


def _map_laws(a: dict[str, Any], out: Any) -> None:
    alive(out)
    with pure_core():
        leaves = treekit.tree_leaves(out)
    assert all(type(x) is Out for x in leaves), f"not all leaves are f's: {leaves!r:.200}"


def _keystr_args(w: World, tree: Any) -> dict[str, Any]:
    with pure_core():
        paths = [p for p, _ in treekit.tree_leaves_with_path(tree)] or [()]
    path = list(paths[w.int(0, len(paths) - 1)])
    if w.int(0, 1):
        path.append(treekit.DictKey(Leaf(next(w.count))))  # read through repr(): the slow path
    return {"path": path if w.int(0, 1) else tuple(path), "simple": w.int(0, 1) == 1, "sep": w.pick("", "/")}


def _entries(a: dict[str, Any]) -> list[Any]:
    v = Leaf(a["n"])
    return [
        treekit.SequenceKey(0), treekit.DictKey("a"), treekit.GetAttrKey("w"), treekit.FlattenedIndexKey(1),
        treekit.SequenceKey(idx=3), treekit.DictKey(key=v), treekit.GetAttrKey(name="x" * a["n"]),
        treekit.FlattenedIndexKey(key=2**70), treekit.DictKey(v),
    ]


def _pickled(a: dict[str, Any]) -> Any:
    treedef = pickle.loads(pickle.dumps(a["treedef"]))
    return treedef, treekit.tree_unflatten(treedef, a["leaves"])


def _no_laws(a: dict[str, Any], out: Any) -> None:
    alive(out)


CALLS = [
    Call("tree_flatten", _flat_args(False), lambda a: treekit.tree_flatten(a["tree"], a["is_leaf"]), _flatten_laws),
    Call("tree_leaves", _flat_args(False), lambda a: treekit.tree_leaves(a["tree"], a["is_leaf"]), _no_laws),
    Call(
        "tree_structure", _flat_args(False), lambda a: treekit.tree_structure(a["tree"], a["is_leaf"]), _structure_laws
    ),
    Call(
        "tree_flatten_with_path",
        _flat_args(True),
        lambda a: treekit.tree_flatten_with_path(a["tree"], a["is_leaf"], a["takes_path"]),
        _pairs_laws,
    ),
    Call(  # the native flatten with paths itself: what tree_map_with_path's fallback, tree_at, summary, ... call
        "flatten with paths",
        _flat_args(True),
        lambda a: (_traverse.pure_flatten if PURE[0] else _traverse.flatten)(
            a["tree"], a["is_leaf"], True, a["takes_path"]
        ),
        lambda a, out: _pairs_laws(a, (list(zip(out[2], out[0])), out[1])),
    ),
    Call(
        "tree_leaves_with_path",
        _flat_args(True),
        lambda a: treekit.tree_leaves_with_path(a["tree"], a["is_leaf"], a["takes_path"]),
        _paths_laws,
    ),
    Call("tree_unflatten", _treedef_args, lambda a: treekit.tree_unflatten(a["treedef"], a["leaves"]), _unflatten_laws),
    Call("pickle", _treedef_args, _pickled, lambda a, out: _unflatten_laws(a, out[1])),
    Call("flatten_up_to", _up_to_args, lambda a: a["treedef"].flatten_up_to(a["other"]), _up_to_laws),
    Call(
        "tree_map",
        _map_args(False),
        lambda a: treekit.tree_map(_f, a["tree"], *a["rest"], is_leaf=a["is_leaf"]),
        _map_laws,
    ),
    Call(
        "tree_map_with_path",
        _map_args(True),
        lambda a: treekit.tree_map_with_path(
            _f, a["tree"], *a["rest"], is_leaf=a["is_leaf"], is_leaf_takes_path=a["takes_path"]
        ),
        _map_laws,
    ),
    Call(
        "keystr",
        _keystr_args,
        lambda a: keystr(a["path"], simple=a["simple"], separator=a["sep"]),
        _no_laws,
    ),
    Call("key entries", lambda w, tree: {"n": w.int(0, 3)}, _entries, _no_laws),
]


# -- the actions ------------------------------------------------------------------------------------------
def _unlocked(action: Callable[[], None]) -> Callable[[], None]:
    """``action`` (it calls treekit) run unless treekit's registry lock is a plain lock that is
    held: code that holds it may be what the collection, or the metaclass ``__hash__``,
    interrupted, and a call would wait on it for ever (a re-entrant lock lets it through)."""

    def run() -> None:
        locked = getattr(_registry._LOCK, "locked", None)  # (an RLock has none: it never blocks this thread)
        if locked is None or not locked():
            action()

    return run


@_unlocked
def _evict_caches() -> None:
    """Big dicts of more key sets than the native core keeps (and small ones), flattened with
    and without paths and built twice: every slot of its big-dict caches goes to these."""
    for j in range(10):
        keys = [f"e{j}_{i:02d}" for i in range(9 + j)]  # fresh key objects each time
        if j % 2:
            keys.reverse()
        d = {k: Leaf(i) for i, k in enumerate(keys)}
        leaves, treedef = treekit.tree_flatten(d)
        treekit.tree_flatten_with_path(d)
        treekit.tree_unflatten(treedef, leaves)
        treekit.tree_unflatten(treedef, leaves)
        treekit.tree_map(lambda x: x, [d, {k: 0 for k in keys[:j % 8 + 1]}])


_ORDER_ROUND = itertools.count()


@_unlocked
def _evict_orders() -> None:
    """More insertion orders than the registry keeps (4,096): every `SortedKeys` before goes."""
    r = next(_ORDER_ROUND)
    treekit.tree_leaves([{f"o{r}_{i}b": 0, f"o{r}_{i}a": 1} for i in range(4200)])


def _walk_lists() -> None:
    """Every list the collector tracks, read item by item (a half-built one holds NULLs)."""
    for x in gc.get_objects():
        if type(x) is list and x is not HOARD:
            for item in x:
                type(item)


def _clear_leaf_lists() -> None:
    """Clear the young lists that hold only this example's leaves (the walk's own among them)."""
    for x in gc.get_objects(0) + gc.get_objects(1):
        if type(x) is list and x and all(type(i) in (Leaf, Out, *META_LEAVES) for i in x):
            x.clear()


def _items(container: Any) -> Iterator[Any]:
    """A container's children (a pairs list's: the second items)."""
    for x in container.values() if isinstance(container, dict) else container:
        yield x[1] if type(x) is tuple and len(x) == 2 and isinstance(x[0], treekit.GetAttrKey) else x


def _own(pool: list[Any]) -> list[Any]:
    """The container the event is about: the one holding the leaf (or an instance of the leaf
    type) it names, else the list the last flatten function gave."""
    context = CHAOS.context
    if context is not None:
        test = (lambda x: type(x) is context) if isinstance(context, type) else (lambda x: x is context)
        for container in pool:
            if any(map(test, _items(container))):
                return [container]
    return [CURRENT[0]] if CURRENT[0] is not None else pool[-1:]  # (else: the leaves or records given)


def _change(target: Any, how: str, count: Iterator[int]) -> None:
    new = Leaf(next(count))
    if isinstance(target, dict):
        keys = list(target)
        if how == "clear":
            target.clear()
        elif how == "shrink":
            for k in keys[len(keys) // 2 :]:
                del target[k]
        elif how == "grow":
            target[sys.intern("k99")] = new
        elif how == "reorder":
            items = list(target.items())
            target.clear()
            target.update(reversed(items))
        elif how == "replace" and keys:
            target[keys[0]] = new
        elif how == "insert":
            target[KEYS[len(keys) % len(KEYS)]] = new
        return
    if how == "clear":
        target.clear()
    elif how == "shrink":
        del target[len(target) // 2 :]
    elif how == "reorder":
        target.reverse()
    else:  # a (key, child) pairs list, or a records list, gets one of its own items
        item = target[-1] if target and type(target[-1]) is tuple else new
        if how == "grow":
            target.append(item)
        elif how == "insert":
            target.insert(0, item)
        elif target:
            target[0] = item


CHANGES = ("clear", "shrink", "grow", "reorder", "replace", "insert")
ACTIONS = (*CHANGES, "reenter", "reenter_same", "evict", "evict", "evict_orders", "collect", "walk_lists")
ACTIONS += ("clear_lists", "flaky", "flaky")


def _action(w: World, args: dict[str, Any], tree: Any) -> tuple[Callable[[], Any], str, str]:
    """A drawn action, its effect and what it is: "none" (nothing the call reads changes),
    "changed" (the tree does), "hostile" (the TreeDef's records or the walk's own lists may)."""
    name = w.data.draw(st.sampled_from(ACTIONS))
    if name in CHANGES:
        pool = containers(tree) + [x for key in ("rest", "other") for x in containers(args.get(key))]
        pool += [args["leaves"]] if args.get("leaves") is not None else []
        records = args.get("records")
        pool += [records] if records is not None else []
        if not pool:
            return (lambda: None), "none", "nothing to change"
        which = w.data.draw(st.sampled_from(("its own", "every", "one")))
        one = pool[w.int(0, len(pool) - 1)]
        count = w.count

        def change() -> None:
            for target in _own(pool) if which == "its own" else pool if which == "every" else [one]:
                if target is records:
                    CHAOS.effect = "hostile"
                _change(target, name, count)

        return change, "changed", f"{name} {which} container"
    if name == "flaky":
        return (lambda: setattr(CHAOS, "flaky", True)), "none", "the next flatten/unflatten call raises"
    if name in ("reenter", "reenter_same"):
        again = w.data.draw(st.sampled_from([c for c in CALLS if c.name != "key entries"]))
        again_args = again.prepare(w, tree if name == "reenter_same" else w.tree())
        with pure_core():
            expected = describe(again.run(again_args))

        @_unlocked
        def reenter() -> None:
            try:
                got = describe(again.run(again_args))
            except Exception as exc:
                CHAOS.errors.append(f"{again.name} called in the chaos raised {type(exc).__name__}: {exc}")
                return
            if got != expected:
                CHAOS.errors.append(f"{again.name} in the chaos: {got!r:.300}\nthe pure core: {expected!r:.300}")

        return reenter, "none", f"{again.name} on {'the same' if name == 'reenter_same' else 'another'} tree"
    actions = {
        "evict": (_evict_caches, "none"),
        "evict_orders": (_evict_orders, "none"),
        "collect": (gc.collect, "none"),
        "walk_lists": (_walk_lists, "none"),
        "clear_lists": (_clear_leaf_lists, "hostile"),
    }
    return (*actions[name], name)


# -- one example ----------------------------------------------------------------------------------------
NEVER = 1 << 40
# the actions that run once (by label: the others may run at each event; growing at each would never end)
ONCE = ("nothing", "the next", "evict_orders", "grow", "insert")
SITES = ("gc", "finalizer", "meta", "data_eq", "flatten", "unflatten", "f", "is_leaf")
CALLS_AT = {  # the calls that meet each site (every call meets the collector)
    "meta": [c for c in CALLS if c.name not in ("keystr", "key entries", "tree_unflatten", "pickle")],
    "data_eq": [c for c in CALLS if c.name in ("flatten_up_to", "tree_map", "tree_map_with_path", "pickle")],
    "flatten": [c for c in CALLS if c.name not in ("keystr", "key entries", "tree_unflatten", "pickle")],
    "unflatten": [c for c in CALLS if c.name in ("tree_unflatten", "pickle", "tree_map", "tree_map_with_path")],
    "f": [c for c in CALLS if c.name in ("tree_map", "tree_map_with_path")],
    "is_leaf": [c for c in CALLS if c.name.startswith(("tree_", "flatten with")) and c.name != "tree_unflatten"],
}


def _outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", fn()
    except Exception as exc:
        return "raised", exc


def _judge(call: Call, args: dict[str, Any], expected: Any, got: tuple[str, Any]) -> None:
    """The verdict on one call (see the module's docstring)."""
    kind, value = got
    effect = CHAOS.effect if CHAOS.fired else "none"
    where = f"{call.name}, chaos {CHAOS.label} ({'run' if CHAOS.fired else 'not run'})"
    assert not CHAOS.errors, f"{where}: {CHAOS.errors}"
    if kind == "raised":
        assert not _has(value, SystemError), f"{where}: raised {value!r} (at {_where(value)})"
        if CHAOS.flaky_raised:
            assert _has(value, ChaosError), f"{where}: a flaky function raised, then the call raised {value!r}"
            return
        allowed = {"none": (), "changed": ACCEPTED, "hostile": ACCEPTED_HOSTILE}[effect]
        assert isinstance(value, allowed) and (str(value) or effect == "hostile"), (
            f"{where}: raised {type(value).__name__}: {value} (at {_where(value)})"
        )
        return
    assert not CHAOS.flaky_raised, f"{where}: a flatten/unflatten function raised once, and the call returned"
    if effect == "none":
        described = describe(value)
        assert described == expected, f"{where}: {described!r:.600}\nthe pure core: {expected!r:.600}"
    else:
        try:
            (call.laws if effect == "changed" else _no_laws)(args, value)
        except Exception as exc:
            raise AssertionError(f"{where}: the answer breaks the laws: {exc!r}") from exc


def _example(data: st.DataObject, site: str) -> None:
    w = World(data, site)
    tree = w.tree()
    call = data.draw(st.sampled_from(CALLS_AT.get(site, CALLS)), label="call")
    args = call.prepare(w, tree)
    with pure_core():
        expected = describe(call.run(args))  # the oracle (nothing hostile runs yet)
    CHAOS_PHASE[0] = w.pick("start", "stop")
    # Under pressure with every list walked at each collection, twice (collections fall at
    # every second allocation: both ways): the same answer, and how many events the site sees.
    events = NEVER
    for pad in (0, 1):
        CHAOS.reset(site, NEVER, lambda: None, "none", f"none, lists walked at each collection (pad {pad})")
        with pressure(site, pad, sweep=True, drain=False):
            got = _outcome(lambda: call.run(args))
        _judge(call, args, expected, got)
        events = min(events, NEVER - CHAOS.countdown)
        del got
    action, effect, label = _action(w, args, tree)
    k = 1 + w.int(0, 99) * events // 100  # the action runs at the K-th event of the site
    every = not label.startswith(ONCE) and w.int(0, 1) == 0
    CHAOS.reset(site, k, action, effect, f"{site} {'every one' if every else f'#{k}'} of {events}: {label}")
    CHAOS.every = every
    with pressure(site, w.int(0, 1), sweep=w.int(0, 3) == 0, drain=w.int(0, 3) > 0):
        got = _outcome(lambda: call.run(args))
    event(f"{call.name}: {'run' if CHAOS.fired else 'not run'}, {got[0]}")
    try:
        _judge(call, args, expected, got)
    finally:
        del got


@pytest.fixture(scope="module")
def chaos_types() -> Iterator[None]:
    """Register the node types of these trees; unregistered after the module."""
    treekit.register_dataclass(DC)
    treekit.register_pytree_node(Box, _box_flatten, _unflatten_as(Box))
    treekit.register_pytree_node(BoxK, _box_flatten, _unflatten_as(BoxK), _box_keys)
    treekit.register_pytree_with_keys(Keyed, _keyed_flatten_with_keys, _unflatten_as(Keyed))
    treekit.register_pytree_with_keys(KeyedF, _keyed_flatten_with_keys, _unflatten_as(KeyedF), _keyed_flatten)
    treekit.register_pytree_node(Flaky, _flaky_flatten, _flaky_unflatten_as(Flaky))
    treekit.register_pytree_with_keys(FlakyK, _flaky_keys, _flaky_unflatten_as(FlakyK))
    try:
        yield
    finally:
        for cls in (DC, Box, BoxK, Keyed, KeyedF, Flaky, FlakyK):
            _registry.remove_type(cls)


@pytest.mark.parametrize("site", SITES)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), phases=[Phase.generate])
@given(data=st.data())
def test_chaos_mid_walk(chaos_types: None, site: str, data: st.DataObject) -> None:
    """Every entry point, with one action run at the K-th event of ``site``."""
    _example(data, site)




# -- flaky functions: the error of a function that raised once is raised, not called away ---------------
class Flaky:
    """A registered node whose flatten function raises at its first call if ``raises``."""

    def __init__(self, children: list[Any], raises: bool = False) -> None:
        self.children, self.raises, self.calls = children, raises, 0


class FlakyK(Flaky):
    """The same, registered with keys."""


FLAKY_UNFLATTEN = {"calls": 0, "raises": False}


def _flaky_flatten(node: Flaky) -> tuple[list[Any], None]:
    node.calls += 1
    if node.raises:
        node.raises = False
        raise ChaosError("the flatten function raised at its first call")
    return node.children, None


def _flaky_keys(node: Flaky) -> tuple[list[tuple[Any, Any]], None]:
    children, data = _flaky_flatten(node)
    return [(treekit.GetAttrKey(f"c{i}"), c) for i, c in enumerate(children)], data


def _flaky_unflatten_as(cls: type) -> Callable[[None, tuple[Any, ...]], Flaky]:
    def unflatten(data: None, children: tuple[Any, ...]) -> Flaky:
        FLAKY_UNFLATTEN["calls"] += 1
        if FLAKY_UNFLATTEN["raises"]:
            FLAKY_UNFLATTEN["raises"] = False
            raise ChaosError("the unflatten function raised at its first call")
        return cls(list(children))

    return unflatten


FLAKY_CLASSES = pytest.mark.parametrize("cls", [Flaky, FlakyK], ids=["node", "with_keys"])
FLAKY_FLATTEN: dict[str, Callable[[Any], Any]] = {
    "tree_flatten": treekit.tree_flatten,
    "tree_leaves": treekit.tree_leaves,
    "tree_structure": treekit.tree_structure,
    "tree_flatten_with_path": treekit.tree_flatten_with_path,
    "tree_leaves_with_path": treekit.tree_leaves_with_path,
    "tree_map": lambda tree: treekit.tree_map(lambda x: x, tree),
    "tree_map_with_path": lambda tree: treekit.tree_map_with_path(lambda p, x: x, tree),
}


@FLAKY_CLASSES
@pytest.mark.parametrize("name", FLAKY_FLATTEN)
def test_flaky_flatten_raises(chaos_types: None, name: str, cls: type[Flaky]) -> None:
    """A flatten function that raises at its first call only: the call raises, after one call."""
    node = cls([Leaf(1), Leaf(2)], raises=True)
    with pytest.raises(ChaosError, match="first call"):
        FLAKY_FLATTEN[name]({"a": [Leaf(0)], "b": node})
    assert node.calls == 1, f"the flatten function was called {node.calls} times"


@FLAKY_CLASSES
@pytest.mark.parametrize("where", ["flatten_up_to", "tree_map_rest"])
def test_flaky_flatten_in_guided_walk_raises(chaos_types: None, where: str, cls: type[Flaky]) -> None:
    """The same in the guided walk: ``flatten_up_to``, and ``tree_map``'s other trees."""
    tree = {"a": [Leaf(0)], "b": cls([Leaf(1), Leaf(2)])}
    node = cls([Leaf(4), Leaf(5)], raises=True)
    other = {"a": [Leaf(3)], "b": node}
    treedef = treekit.tree_structure(tree)
    with pytest.raises(ChaosError, match="first call"):
        if where == "flatten_up_to":
            treedef.flatten_up_to(other)
        else:
            treekit.tree_map(lambda x, y: y, tree, other)
    assert node.calls == 1, f"the flatten function was called {node.calls} times"


@FLAKY_CLASSES
@pytest.mark.parametrize("name", ["tree_unflatten", "TreeDef.unflatten", "tree_map", "tree_map_with_path"])
def test_flaky_unflatten_raises(chaos_types: None, name: str, cls: type[Flaky]) -> None:
    """An unflatten function that raises at its first call only: the call raises, after one call."""
    tree = {"a": [Leaf(0)], "b": cls([Leaf(1), Leaf(2)])}
    leaves, treedef = treekit.tree_flatten(tree)
    FLAKY_UNFLATTEN.update(calls=0, raises=True)
    try:
        with pytest.raises(ChaosError, match="first call"):
            if name == "tree_unflatten":
                treekit.tree_unflatten(treedef, leaves)
            elif name == "TreeDef.unflatten":
                treedef.unflatten(leaves)
            elif name == "tree_map":
                treekit.tree_map(lambda x: x, tree)
            else:
                treekit.tree_map_with_path(lambda p, x: x, tree)
    finally:
        FLAKY_UNFLATTEN["raises"] = False
    assert FLAKY_UNFLATTEN["calls"] == 1, f"the unflatten function was called {FLAKY_UNFLATTEN['calls']} times"

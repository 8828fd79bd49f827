"""Classes registered with JAX through functions treekit.core._known knows (equinox's generated
Module functions, flax nnx's Variable and State flatten): where it proves a class's functions are
exactly those, the native core does what they do without calling them; both cores give what the
functions give (and what jax gives).

Classes here are registered as equinox and flax register theirs, with functions made from the
copies treekit keeps (so the fast path is tested whatever equinox or flax is installed); real
equinox Modules and nnx states are checked against jax, imported after treekit and before it."""

from __future__ import annotations
import __future__

import dataclasses
import functools
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal, TypeVar

import pytest

pytest.importorskip("hypothesis")
jax = pytest.importorskip("jax")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import treekit  # noqa: E402
from treekit.core import _known  # noqa: E402
from treekit.core._build import interpret  # noqa: E402
from treekit.core._core import NATIVE  # noqa: E402
from treekit.core._traverse import pure_flatten  # noqa: E402

jtu = jax.tree_util
native_only = pytest.mark.skipif(NATIVE is None, reason="the native core is not in use")


class _Missing:
    def __repr__(self) -> str:
        return "Missing"

    def __reduce__(self) -> str:
        return "MISSING"  # (this module's one: a pickled treedef keeps it)


MISSING = _Missing()


def _functions(cls: type, names: tuple[str, ...], static: frozenset[str]) -> tuple[Any, Any, Any]:
    """flatten, flatten_with_keys, unflatten as equinox writes them for cls (the kept templates)."""
    dynamic = tuple(n for n in names if n not in static)
    texts = _known._sources(cls.__qualname__, dynamic, tuple(n for n in names if n in static))
    made = []
    for text, kind, name in zip(
        texts, ("flatten", "flatten_with_keys", "unflatten"), ("flatten", "flatten_with_keys", "unflatten")
    ):
        ns = {
            "object": object,
            "Any": Any,
            "tuple": tuple,
            "Literal": Literal,
            "MISSING": MISSING,
            "module_cls": cls,
            "jtu": jtu,
            "type": type,
            "T": TypeVar("T"),
        }
        exec(compile(text, f"<generated_{kind}_{cls.__qualname__}>", "exec", dont_inherit=True), ns)
        fn = ns[name]
        fn.__source__ = text
        made.append(fn)
    return made[0], made[1], made[2]


def _module_class(names: tuple[str, ...], static: frozenset[str], *, register: bool = True) -> type:
    fields = [(n, Any, dataclasses.field(default=None, metadata={"static": n in static})) for n in names]
    cls = dataclasses.make_dataclass(f"M{len(_CLASSES)}", fields)
    cls.__module__ = __name__
    globals()[cls.__name__] = cls  # (pickled by name, as a treedef holding it is)
    if register:
        flatten, with_keys, unflatten = _functions(cls, names, static)
        jtu.register_pytree_with_keys(cls, with_keys, functools.partial(unflatten, cls), flatten_func=flatten)
    _CLASSES.append(cls)
    return cls


_CLASSES: list[type] = []
# a few shapes, registered once (JAX cannot unregister): no fields, dynamic only, static only, both
SHAPES = [
    ((), frozenset()),
    (("w", "b"), frozenset()),
    (("n",), frozenset({"n"})),
    (("w", "size", "b", "act"), frozenset({"size", "act"})),
]
KINDS = [_module_class(names, static) for names, static in SHAPES]
WRAPPERS = _known.WRAPPER_FIELD_NAMES


def _node(cls: type, values: dict[str, Any], wrappers: dict[str, Any], extra: bool) -> Any:
    """An instance with these fields set (the others MISSING, as equinox's functions see them)."""
    obj = object.__new__(cls)
    for name, value in values.items():
        object.__setattr__(obj, name, value)
    obj.__dict__.update(wrappers)
    if extra:
        obj.__dict__["_cache"] = 0  # (one more item than fields: the wrapper fields are read)
    return obj


@st.composite
def modules(draw: st.DrawFn, depth: int = 2) -> Any:
    cls = draw(st.sampled_from(KINDS))
    names = [f.name for f in dataclasses.fields(cls)]
    children = st.integers(0, 9) | st.lists(st.integers(0, 9), max_size=2)
    if depth:
        children = children | modules(depth - 1)
    present = draw(st.lists(st.sampled_from(names), unique=True)) if names else []
    values = {n: draw(children) if n in present else None for n in present}
    wrappers = {n: f"w-{n}" for n in draw(st.lists(st.sampled_from(WRAPPERS), unique=True))}
    return _node(cls, values, wrappers, draw(st.booleans()))


def _fields_of(x: Any) -> Any:
    """x's type and __dict__, recursively (how two rebuilt trees are compared)."""
    if type(x) in KINDS:
        return type(x), {k: _fields_of(v) for k, v in x.__dict__.items()}
    if isinstance(x, list):
        return [_fields_of(v) for v in x]
    return x


@settings(max_examples=150, deadline=None)
@given(tree=st.lists(modules(), max_size=3))
def test_generated_classes_walk_and_build_as_their_functions_do(tree: Any) -> None:
    leaves, treedef = treekit.tree_flatten(tree)
    jleaves, jdef = jtu.tree_flatten(tree)
    assert len(leaves) == len(jleaves) and all(a is b for a, b in zip(leaves, jleaves))
    assert pure_flatten(tree)[1] == treedef
    paths = [treekit.keystr(p) for p, _ in treekit.tree_flatten_with_path(tree)[0]]
    assert paths == [jtu.keystr(p) for p, _ in jtu.tree_flatten_with_path(tree)[0]]
    rebuilt = treekit.tree_unflatten(treedef, leaves)
    assert _fields_of(rebuilt) == _fields_of(jtu.tree_unflatten(jdef, jleaves))  # (wrappers MISSING or all 5)
    assert _fields_of(treekit.tree_map(str, tree)) == _fields_of(jtu.tree_map(str, tree))


def test_each_shape_is_proven() -> None:
    for cls in KINDS:
        entry = treekit.core._registry.lookup(cls)
        assert entry.flatten.known is not None and entry.unflatten.known is not None, cls


def _entry_functions(cls: type) -> tuple[Any, Any, Any]:
    registered = sys.modules["jax._src.tree_util"]._registry[cls]
    fields = tuple(f.name for f in dataclasses.fields(cls))
    static = frozenset(f.name for f in dataclasses.fields(cls) if f.metadata.get("static"))
    return registered.to_iter, registered.from_iter, _functions(cls, fields, static)[1]


def _changed(fn: Any, **changes: Any) -> Any:
    other = type(fn)(fn.__code__, {**fn.__globals__, **changes.pop("globals", {})}, fn.__name__)
    other.__source__ = changes.pop("source", fn.__source__)
    return other


CHANGES: list[tuple[str, Callable[[type, Any, Any, Any], tuple[type, Any, Any, Any]]]] = [
    ("source", lambda c, f, u, k: (c, _changed(f, source=f.__source__ + " "), u, k)),
    ("code", lambda c, f, u, k: (c, _changed(k, source=f.__source__), u, k)),
    ("MISSING", lambda c, f, u, k: (c, f, functools.partial(_changed(u.func, globals={"MISSING": None}), c), k)),
    ("len", lambda c, f, u, k: (c, _changed(f, globals={"len": lambda d: 0}), u, k)),
    ("partial", lambda c, f, u, k: (c, f, functools.partial(u.func, c, data=()), k)),
    ("keys", lambda c, f, u, k: (c, f, u, f)),
    ("class", lambda c, f, u, k: (KINDS[2], f, u, k)),
]


@pytest.mark.parametrize("change", [c for _, c in CHANGES], ids=[n for n, _ in CHANGES])
def test_functions_other_than_the_generated_ones_are_not_taken(change: Any) -> None:
    cls = KINDS[3]
    assert _known.known_functions(cls, *_entry_functions(cls)) is not None
    assert _known.known_functions(*change(cls, *_entry_functions(cls))) is None


@dataclasses.dataclass
class _OwnGetattribute:
    w: Any = None

    def __getattribute__(self, name: str) -> Any:
        return object.__getattribute__(self, name)


@dataclasses.dataclass
class _NotObject(Exception):
    w: Any = None


@pytest.mark.parametrize("cls", [_OwnGetattribute, _NotObject])
def test_a_class_that_reads_or_makes_itself_otherwise_is_not_taken(cls: type) -> None:
    flatten, with_keys, unflatten = _functions(cls, ("w",), frozenset())
    assert _known.known_functions(cls, flatten, functools.partial(unflatten, cls), with_keys) is None


@contextmanager
def _calls_of_generated() -> Iterator[list[str]]:
    called: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith("<generated_"):
            called.append(frame.f_code.co_filename)

    sys.setprofile(profile)
    try:
        yield called
    finally:
        sys.setprofile(None)


@native_only
def test_the_native_core_calls_no_generated_function() -> None:
    tree = [
        _node(KINDS[3], {"w": 1, "size": 2, "b": [3], "act": "relu"}, {"__doc__": "d"}, True),
        _node(KINDS[1], {"w": _node(KINDS[1], {"w": 4}, {}, False)}, {}, False),
    ]
    with _calls_of_generated() as called:
        leaves, treedef = treekit.tree_flatten(tree)
        treekit.tree_flatten_with_path(tree)
        rebuilt = treekit.tree_unflatten(treedef, leaves)
    assert called == []
    with _calls_of_generated() as called:
        theirs = jtu.tree_unflatten(*reversed(jtu.tree_flatten(tree)))
    assert called and _fields_of(rebuilt) == _fields_of(theirs)  # (the probe sees them where they run)


def test_a_field_that_cannot_be_stored_raises_as_the_function_does() -> None:
    cls = _module_class(("w", "v"), frozenset())
    tree = _node(cls, {"w": 1, "v": 2}, {}, False)
    leaves, treedef = treekit.tree_flatten(tree)
    cls.v = property(lambda self: 0)  # a data descriptor: object.__setattr__ raises
    with pytest.raises(AttributeError) as theirs:
        jtu.tree_unflatten(jtu.tree_structure(tree), leaves)
    with pytest.raises(AttributeError) as ours:
        treekit.tree_unflatten(treedef, leaves)
    assert type(ours.value) is type(theirs.value)
    assert str(ours.value) == str(theirs.value)


def test_a_dict_subclass_as_dict_is_walked_by_the_function() -> None:
    cls = KINDS[1]
    node = _node(cls, {"w": 1, "b": 2}, {}, False)

    class Dict(dict):  # type: ignore[type-arg]
        pass

    node.__dict__ = Dict(node.__dict__)
    assert treekit.tree_leaves(node) == jtu.tree_leaves(node) == [1, 2]


EQX_TREE = """
import equinox as eqx, jax, jax.numpy as jnp
class Block(eqx.Module):
    linear: eqx.nn.Linear
    scale: jax.Array
    name: str = eqx.field(static=True, default="block")
key = jax.random.PRNGKey(0)
tree = {"mlp": eqx.nn.MLP(3, 2, 4, 2, key=key), "block": Block(eqx.nn.Linear(2, 2, key=key), jnp.ones(2)),
        "att": eqx.nn.MultiheadAttention(2, 4, key=key), "jit": eqx.filter_jit(lambda x: x)}
"""
CHECK = """
import jax.tree_util as jtu
leaves, treedef = tk.tree_flatten(tree)
jleaves, jdef = jtu.tree_flatten(tree)
assert len(leaves) == len(jleaves) and all(a is b for a, b in zip(leaves, jleaves))
paths = [tk.keystr(p) for p, _ in tk.tree_flatten_with_path(tree)[0]]
assert paths == [jtu.keystr(p) for p, _ in jtu.tree_flatten_with_path(tree)[0]], paths
assert jtu.tree_structure(tk.tree_unflatten(treedef, leaves)) == jdef
assert jtu.tree_structure(tk.tree_map(lambda x: x, tree)) == jdef
print(len(leaves))
"""

# where the library is a version whose functions treekit kept: its classes are proved, whichever
# was imported first (the proof compiles the copy as the library's module holds it)
PROVED = """
from treekit.core._registry import lookup
if {version}.startswith("{prefix}"):
    for cls in ({classes}):
        known = lookup(cls).flatten.known
        assert known is not None and known[-1] is not None, (cls, known)
"""


@pytest.mark.parametrize("treekit_first", [True, False])
def test_equinox_modules_walk_as_jax_walks_them(treekit_first: bool) -> None:
    pytest.importorskip("equinox")
    from test_jax import _run

    first, then = ("import treekit as tk\n", EQX_TREE) if treekit_first else (EQX_TREE, "import treekit as tk\n")
    proved = PROVED.format(version="eqx.__version__", prefix="0.13.", classes="eqx.nn.Linear, Block")
    assert int(_run(first + then + CHECK + proved)) > 10


# -- flax nnx: Variable and State ------------------------------------------------------------
class TraceState:
    """nnx's: made for each Variable made (what JAX's trace is then)."""

    def __eq__(self, other: object) -> bool:
        return type(other) is TraceState

    __hash__ = None  # type: ignore[assignment]


TRACERS = types.SimpleNamespace(TraceState=TraceState)  # (the module flax's _new reads it from)


def _flax_copy(text: str, ns: dict[str, Any]) -> None:
    """Run the kept copy of a flax function where flax's module holds its like (line 10 on, the
    names it imports imported, `from __future__ import annotations`)."""
    source = _known._as_in_module(text, 10, _known._FLAX_IMPORTS)
    assert source is not None
    exec(compile(source, "<flax copy>", "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True), ns)


def _flax_functions(texts: tuple[str, str]) -> tuple[Any, Any]:
    ns: dict[str, Any] = {"jtu": jtu}
    for text in texts:
        _flax_copy(text, ns)
    name = texts[0].split("(")[0].removeprefix("def ")
    return ns[name], ns[f"{name}_with_keys"]


def _variable_made(ns: dict[str, Any]) -> tuple[Any, Any]:
    """nnx's _variable_unflatten and Variable._new (a classmethod), their globals ns."""
    for text in _known._VARIABLE_MADE:
        _flax_copy(text, ns)
    return ns["_variable_unflatten"], ns["_new"]


_variable_unflatten, _new = _variable_made({"tracers": TRACERS})


class Variable:
    __slots__ = ("_raw_value", "_trace_state", "_var_metadata")
    _new = _new

    def __getattr__(self, name: str) -> Any:  # (as nnx's: only for what is not found)
        raise AttributeError(f"no {name}")


class State:
    def __init__(self, mapping: Any) -> None:
        self._mapping = dict(mapping)


_variable_flatten, _variable_keys = _flax_functions(_known._VARIABLE)
_state_flatten, _state_keys = _flax_functions(_known._STATE)
jtu.register_pytree_with_keys(
    Variable, _variable_keys, functools.partial(_variable_unflatten, Variable), flatten_func=_variable_flatten
)
jtu.register_pytree_with_keys(
    State, _state_keys, lambda keys, leaves: State(zip(keys, leaves)), flatten_func=_state_flatten
)


def _variable(value: Any, metadata: Any) -> Variable:
    return Variable._new(value, metadata)  # type: ignore[no-any-return]


def _nnx_fields(x: Any) -> Any:
    if type(x) is Variable:
        return "V", _nnx_fields(x._raw_value), x._var_metadata, x._trace_state
    if type(x) is State:
        return "S", {k: _nnx_fields(v) for k, v in x._mapping.items()}
    if isinstance(x, dict):
        return {k: _nnx_fields(v) for k, v in x.items()}
    return x


@st.composite
def states(draw: st.DrawFn, depth: int = 2) -> Any:
    """States of str or int keys (as nnx's: attribute names, list indexes) holding Variables,
    dicts and States; Variables of str-keyed metadata."""
    keys = st.lists(st.text("abc", max_size=2), unique=True, max_size=3) | st.lists(
        st.integers(0, 9), unique=True, max_size=3
    )
    values = st.integers() | st.builds(
        _variable, st.integers(), st.dictionaries(st.text("xyz", max_size=2), st.integers(), max_size=3)
    )
    if depth:
        values = values | states(depth - 1)
    return State({k: draw(values) for k in draw(keys)})


@settings(max_examples=150, deadline=None)
@given(tree=states())
def test_nnx_like_states_walk_as_their_functions_do(tree: Any) -> None:
    leaves, treedef = treekit.tree_flatten(tree)
    jleaves = jtu.tree_leaves(tree)
    assert len(leaves) == len(jleaves) and all(a is b for a, b in zip(leaves, jleaves))
    assert pure_flatten(tree)[1] == treedef
    paths = [treekit.keystr(p) for p, _ in treekit.tree_flatten_with_path(tree)[0]]
    assert paths == [jtu.keystr(p) for p, _ in jtu.tree_flatten_with_path(tree)[0]]
    assert _nnx_fields(treekit.tree_unflatten(treedef, leaves)) == _nnx_fields(tree)
    assert _nnx_fields(treekit.tree_map(str, tree)) == _nnx_fields(jtu.tree_map(str, tree))


def test_the_nnx_like_classes_are_proven() -> None:
    known = treekit.core._registry.lookup(Variable).flatten.known
    assert known[0] == _known.VARIABLE and known[5] == (Variable, _new.__func__)
    assert treekit.core._registry.lookup(State).flatten.known[0] == _known.STATE


@native_only
def test_the_native_core_calls_no_nnx_function_but_trace_state() -> None:
    tree = State({"a": _variable(1, {"y": 2, "x": 1}), "b": State({1: _variable(4, {}), 0: 3})})
    names: list[str] = []
    sys.setprofile(lambda frame, event, arg: names.append(frame.f_code.co_name) if event == "call" else None)
    try:
        leaves, treedef = treekit.tree_flatten(tree)
        treekit.tree_flatten_with_path(tree)
        made = treekit.tree_unflatten(treedef, leaves)
    finally:
        sys.setprofile(None)
    assert _nnx_fields(made) == _nnx_fields(tree)
    assert not [n for n in names if n.startswith(("_variable_", "_state_flatten", "_new"))], names


def _unflatten_outcome(unflatten: Callable[[Any, list[Any]], Any], treedef: Any, leaves: list[Any]) -> Any:
    try:
        return _nnx_fields(unflatten(treedef, leaves))
    except Exception as e:  # (each raises what the function raises)
        return type(e), str(e)


def _unflattens_alike(tree: Any) -> Any:
    """What treekit's cores make of tree's leaves (or raise), as jax does."""
    leaves, treedef = jtu.tree_flatten(tree)
    want = _unflatten_outcome(jtu.tree_unflatten, treedef, leaves)
    assert _unflatten_outcome(treekit.tree_unflatten, treekit.tree_structure(tree), leaves) == want
    pure = pure_flatten(tree)[1]._nodes
    assert _unflatten_outcome(interpret, pure, leaves) == want
    return want


def test_a_variable_new_replaced_after_registration_makes_the_variables() -> None:
    tree = State({"a": _variable(1, {"x": 1})})

    def other(cls: type, value: Any, metadata: Any) -> Any:
        return ("made", cls.__name__, value, metadata)

    Variable._new = classmethod(other)  # type: ignore[assignment]
    try:
        assert _unflattens_alike(tree) == ("S", {"a": ("made", "Variable", 1, {"x": 1})})
    finally:
        Variable._new = _new  # type: ignore[assignment]


def test_a_trace_state_that_raises_raises_as_the_function_does() -> None:
    tree = State({"a": _variable(1, {"x": 1})})

    def fail() -> None:
        raise RuntimeError("no trace here")

    TRACERS.TraceState = fail
    try:
        assert _unflattens_alike(tree)[0] is RuntimeError
    finally:
        TRACERS.TraceState = TraceState


class NoTracers:  # (a Variable like nnx's whose _new reads a `tracers` its module lacks)
    __slots__ = ("_raw_value", "_trace_state", "_var_metadata")


_no_tracers_unflatten, NoTracers._new = _variable_made({})  # type: ignore[attr-defined]
jtu.register_pytree_with_keys(
    NoTracers,
    _variable_keys,
    functools.partial(_no_tracers_unflatten, NoTracers),
    flatten_func=_variable_flatten,
)


def test_a_variable_new_that_finds_no_tracers_raises_as_it_does() -> None:
    node = object.__new__(NoTracers)
    node._raw_value, node._var_metadata = 1, {}
    assert treekit.core._registry.lookup(NoTracers).unflatten.known[5] is not None
    assert _unflattens_alike([node])[0] is NameError


class _IntBased(int):
    pass


@pytest.mark.parametrize(
    "unflatten, why",
    [
        (functools.partial(_variable_unflatten, Variable, None), "another call"),
        (functools.partial(_variable_unflatten, cls=Variable), "a keyword"),
        (functools.partial(_variable_unflatten, _IntBased), "not made by object.__new__"),
        (functools.partial(_variable_made({})[0], State), "no _new"),
        (lambda meta, children: _variable(children[0], dict(meta)), "another function"),
    ],
)
def test_a_variable_unflatten_other_than_nnx_s_is_called(unflatten: Any, why: str) -> None:
    known = _known.known_functions(Variable, _variable_flatten, unflatten, _variable_keys)
    assert known is not None and known[5] is None, why


def test_a_changed_variable_new_is_not_taken() -> None:
    ns: dict[str, Any] = {"tracers": TRACERS}
    _flax_copy(_known._VARIABLE_MADE[1].replace("TraceState()", "TraceState() or 1"), ns)

    class Changed(Variable):
        __slots__ = ()
        _new = ns["_new"]

    unflatten = functools.partial(_variable_unflatten, Changed)
    assert _known.known_functions(Changed, _variable_flatten, unflatten, _variable_keys)[5] is None  # type: ignore[index]
    Changed._new = _new  # type: ignore[assignment]
    assert _known.known_functions(Changed, _variable_flatten, unflatten, _variable_keys)[5] == (Changed, _new.__func__)  # type: ignore[index]


ODD = [
    ("unset value", lambda: Variable()),
    ("metadata not a dict", lambda: _variable(1, [("a", 1)])),
    ("metadata keys not str", lambda: _variable(1, {1: "a", 2: "b"})),
    ("mixed keys", lambda: State({"a": 1, 2: 2})),
    ("bool keys", lambda: State({True: 1, False: 2})),
    ("no mapping", lambda: object.__new__(State)),
]


@pytest.mark.parametrize("make", [m for _, m in ODD], ids=[n for n, _ in ODD])
def test_odd_nnx_like_nodes_go_to_their_functions(make: Callable[[], Any]) -> None:
    def outcome(flatten: Callable[[Any], Any]) -> Any:
        try:
            return [repr(x) for x in flatten([make()])[0]]
        except Exception as e:  # (jax's and treekit's walks raise the function's error)
            return type(e)

    assert outcome(treekit.tree_flatten) == outcome(jtu.tree_flatten)


@dataclasses.dataclass
class _Proxy:
    w: Any = None

    def __getattribute__(self, name: str) -> Any:
        return object.__getattribute__(self, name)


class _Mapped(State):
    @property
    def _mapping(self) -> Any:  # type: ignore[override]
        return {"a": 1}


@pytest.mark.parametrize(
    "cls, texts", [(_Proxy, _known._VARIABLE), (_Mapped, _known._STATE), (Variable, _known._STATE)]
)
def test_an_nnx_like_class_that_reads_its_fields_otherwise_is_not_taken(cls: type, texts: Any) -> None:
    flatten, with_keys = _flax_functions(texts)
    assert _known.known_functions(cls, flatten, None, with_keys) is None


def test_a_changed_flax_function_is_not_taken() -> None:
    flatten, with_keys = _flax_functions((_known._VARIABLE[0].replace("sorted(", "list("), _known._VARIABLE[1]))
    assert _known.known_functions(Variable, flatten, None, with_keys) is None
    flatten, with_keys = _flax_functions(_known._VARIABLE)
    assert _known.known_functions(Variable, flatten, None, with_keys) is not None


NNX_TREE = """
import jax
from flax import nnx
class Model(nnx.Module):
    def __init__(self, rngs):
        self.layers = nnx.List([nnx.Linear(2, 3, rngs=rngs), nnx.Linear(3, 2, rngs=rngs)])
        self.norm = nnx.BatchNorm(2, rngs=rngs)
        self.rngs = rngs
tree = nnx.state(Model(nnx.Rngs(0)))
"""


@pytest.mark.parametrize("treekit_first", [True, False])
def test_nnx_states_walk_as_jax_walks_them(treekit_first: bool) -> None:
    pytest.importorskip("flax.nnx")
    from test_jax import _run

    first, then = ("import treekit as tk\n", NNX_TREE) if treekit_first else (NNX_TREE, "import treekit as tk\n")
    proved = PROVED.format(version="flax.__version__", prefix="0.12.", classes="nnx.State, nnx.Param, nnx.BatchStat")
    assert int(_run(first + then + "import flax\n" + CHECK + proved)) > 5

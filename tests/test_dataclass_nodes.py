"""Dataclass nodes on both cores and in jax: treekit's register_dataclass (the native core
reads their fields and calls the class itself) and classes registered with
jax.tree_util.register_dataclass alone (flax.struct's way), which treekit learns from jax.

Hypothesis-made trees of many kinds of dataclass (static fields, drop_fields, init=False,
inheritance, frozen, slotted, an __init__ that does more than assign, a property field) give
the same leaves, treedefs, key paths, rebuilt trees and errors as jax.tree_util and as the
pure core."""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("hypothesis")
jax = pytest.importorskip("jax")

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import treekit  # noqa: E402
from treekit.core._build import interpret  # noqa: E402
from treekit.core._core import NATIVE  # noqa: E402
from treekit.core._registry import TYPES, remove_type  # noqa: E402
from treekit.core._traverse import pure_flatten  # noqa: E402

jtu = jax.tree_util
native_only = pytest.mark.skipif(NATIVE is None, reason="the native core is not in use")


@dataclasses.dataclass
class Plain:
    w: Any
    b: Any
    name: str = dataclasses.field(default="plain", metadata={"static": True})


@dataclasses.dataclass(frozen=True)
class Frozen:
    w: Any
    tag: int = dataclasses.field(default=0, metadata={"static": True})


@dataclasses.dataclass(slots=True)
class Slotted:
    a: Any
    b: Any


@dataclasses.dataclass(frozen=True, slots=True)
class FrozenSlotted:
    a: Any
    meta: str = dataclasses.field(default="m", metadata={"static": True})


@dataclasses.dataclass
class Base:
    x: Any


@dataclasses.dataclass
class Child(Base):
    y: Any
    kind: str = dataclasses.field(default="child", metadata={"static": True})


@dataclasses.dataclass
class Validated:
    """An __init__ that does more than assign: __post_init__ checks and derives a field."""

    value: Any
    count: int = dataclasses.field(init=False, default=0, metadata={"static": True})

    def __post_init__(self) -> None:
        if self.value is None:
            raise ValueError("Validated.value must not be None")
        self.count = 1


@dataclasses.dataclass
class Dropped:
    """drop_fields: ``cache`` is rebuilt by its default."""

    p: Any
    cache: Any = None


class WithProperty:
    """A data field read through a property (the class's own getattr runs Python code)."""

    def __init__(self, v: Any) -> None:
        self._v = v

    @property
    def v(self) -> Any:
        return self._v


# (class, treekit's registration, jax's registration): each library its own, jax's made once
# per process (at import: jax cannot unregister) and first, so it keeps it.
REGISTERED: list[tuple[type, Callable[[type], Any], Callable[[type], Any]]] = [
    (Plain, treekit.register_dataclass, jtu.register_dataclass),
    (Frozen, treekit.register_dataclass, jtu.register_dataclass),
    (Slotted, treekit.register_dataclass, jtu.register_dataclass),
    (FrozenSlotted, treekit.register_dataclass, jtu.register_dataclass),
    (Child, treekit.register_dataclass, jtu.register_dataclass),
    (
        Validated,
        lambda c: treekit.register_dataclass(c, ["value"], []),
        lambda c: jtu.register_dataclass(c, ["value"], []),
    ),
    (
        Dropped,
        lambda c: treekit.register_dataclass(c, ["p"], [], drop_fields=["cache"]),
        lambda c: jtu.register_dataclass(c, ["p"], [], drop_fields=["cache"]),
    ),
]
for _cls, _, _theirs in REGISTERED:
    _theirs(_cls)


# Registered with jax alone (after treekit's bridge is made, as `import treekit` made it):
# treekit learns their fields from the registration.
@jtu.register_dataclass
@dataclasses.dataclass
class JaxPair:
    w: Any
    b: Any


@jtu.register_dataclass
@dataclasses.dataclass(frozen=True)
class JaxOne:
    w: Any
    name: str = dataclasses.field(default="one", metadata={"static": True})


JAX_ONLY: list[type] = [JaxPair, JaxOne]


@pytest.fixture(scope="module", autouse=True)
def _registered() -> Iterator[None]:
    for cls, ours, _ in REGISTERED:
        ours(cls)
    yield
    for cls, _, _ in REGISTERED:
        remove_type(cls)


def _leaf() -> st.SearchStrategy[Any]:
    return st.one_of(st.integers(-3, 3), st.floats(allow_nan=False, width=16), st.text("ab", max_size=2))


def _node(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    meta = st.sampled_from(["a", "b"])
    return st.one_of(
        st.builds(Plain, children, children, meta),
        st.builds(Frozen, children, st.integers(0, 2)),
        st.builds(Slotted, children, children),
        st.builds(FrozenSlotted, children, meta),
        st.builds(Child, children, children, meta),
        st.builds(Validated, children.filter(lambda v: v is not None)),
        st.builds(Dropped, children),
        st.builds(JaxPair, children, children),
        st.builds(JaxOne, children, meta),
        st.lists(children, max_size=3),
        st.dictionaries(st.sampled_from("xyz"), children, max_size=3),
    )


TREES = st.recursive(_leaf(), _node, max_leaves=12)


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return ("ok", call())
    except Exception as exc:  # its message and the notes treekit adds (the key path)
        text = "\n".join([str(exc), *getattr(exc, "__notes__", [])])
        return ("raised", type(exc), re.sub(r"0x[0-9a-f]+", "0x?", text))


def test_jax_only_dataclasses_are_walked_as_dataclass_entries() -> None:
    treekit.tree_leaves([JaxPair(1, 2), JaxOne(3)])
    for cls in JAX_ONLY:
        assert TYPES[cls] is not None and TYPES[cls].kind == "dataclass"


@given(TREES)
def test_leaves_treedef_and_paths_are_jaxs(tree: Any) -> None:
    pairs, treedef = treekit.tree_flatten_with_path(tree)
    theirs, their_treedef = jtu.tree_flatten_with_path(tree)
    assert [x for _, x in pairs] == [x for _, x in theirs]
    assert [treekit.keystr(p) for p, _ in pairs] == [jtu.keystr(p) for p, _ in theirs]
    assert str(treedef) == str(their_treedef)
    assert treekit.tree_leaves(tree) == jtu.tree_leaves(tree)


@given(TREES)
def test_unflatten_and_map_are_jaxs(tree: Any) -> None:
    leaves, treedef = treekit.tree_flatten(tree)
    assert treekit.tree_unflatten(treedef, leaves) == tree == jtu.tree_unflatten(jtu.tree_structure(tree), leaves)
    assert treekit.tree_map(repr, tree) == jtu.tree_map(repr, tree)
    assert treekit.tree_map_with_path(lambda p, x: treekit.keystr(p), tree) == jtu.tree_map_with_path(
        lambda p, x: jtu.keystr(p), tree
    )


@given(TREES, st.booleans())
def test_both_cores_agree(tree: Any, with_path: bool) -> None:
    ours = treekit.tree_flatten_with_path(tree) if with_path else treekit.tree_flatten(tree)
    leaves, treedef, paths = pure_flatten(tree, None, with_path)
    if with_path:
        assert [p for p, _ in ours[0]] == paths and [id(x) for _, x in ours[0]] == list(map(id, leaves))
    else:
        assert list(map(id, ours[0])) == list(map(id, leaves))
    assert ours[1] == treedef and ours[1]._nodes == treedef._nodes
    assert repr(treedef.unflatten(leaves)) == repr(interpret(treedef._nodes, leaves)) == repr(tree)


def test_a_field_read_through_a_property() -> None:
    treekit.register_dataclass(WithProperty, ["v"], [])
    try:
        tree = [WithProperty(1), WithProperty([2, 3])]
        assert treekit.tree_leaves(tree) == [1, 2, 3]
        paths = [treekit.keystr(p) for p, _ in treekit.tree_flatten_with_path(tree)[0]]
        assert paths == ["[0].v", "[1].v[0]", "[1].v[1]"]
        assert pure_flatten(tree)[1] == treekit.tree_structure(tree)
    finally:
        remove_type(WithProperty)


def test_a_field_that_raises_is_reported_alike_on_both_cores() -> None:
    class Boom:
        def __init__(self) -> None:
            self.ok = 1

        @property
        def bad(self) -> Any:
            raise RuntimeError("bad field")

    treekit.register_dataclass(Boom, ["ok", "bad"], [])
    try:
        got = _outcome(lambda: treekit.tree_leaves({"a": [Boom()]}))
        assert got[0] == "raised" and "bad field" in got[2] and "['a'][0]" in got[2]
        assert got == _outcome(lambda: pure_flatten({"a": [Boom()]}))
    finally:
        remove_type(Boom)


def test_an_init_that_raises_is_reported_alike_on_both_cores() -> None:
    tree = [Validated(1)]
    treedef = treekit.tree_structure(tree)
    got = _outcome(lambda: treedef.unflatten([None]))
    assert got[0] == "raised" and "must not be None" in got[2]
    assert got == _outcome(lambda: interpret(treedef._nodes, [None]))


def test_node_data_of_another_length_is_rebuilt_as_the_pure_core_does() -> None:
    # a record whose node data has fewer meta values than the class has meta fields: zip() in
    # the entry's function keeps the shorter, and the native core leaves it to that function
    treedef = treekit.tree_structure(Plain(1, 2, "x"))
    ntype, _, arity, leaves, nodes = treedef._nodes[-1]
    nodes_short = (*treedef._nodes[:-1], (ntype, (), arity, leaves, nodes))
    got = _outcome(lambda: treekit.TreeDef(nodes_short).unflatten([1, 2]))
    assert got == _outcome(lambda: interpret(nodes_short, [1, 2]))
    assert got[0] == "ok" and got[1] == Plain(1, 2)


@native_only
def test_the_native_core_reads_the_fields_itself() -> None:
    """Neither the entry's flatten function nor its unflatten function runs: a property's caller
    and a __post_init__'s caller's caller are not treekit.core._register's functions."""
    callers: list[str] = []

    class Probe:
        def __init__(self, x: Any) -> None:
            self._x = x

        @property
        def x(self) -> Any:
            callers.append(sys._getframe(1).f_code.co_filename)
            return self._x

    treekit.register_dataclass(Probe, ["x"], [])
    try:
        tree = [Probe(1), Probe(2)]
        callers.clear()
        treekit.tree_flatten(tree)
        treekit.tree_flatten_with_path(tree)
        assert len(callers) == 4 and not any(c.endswith("_register.py") for c in callers), callers
    finally:
        remove_type(Probe)

    @dataclasses.dataclass
    class Made:
        x: Any

        def __post_init__(self) -> None:
            callers.append(sys._getframe(2).f_code.co_filename)

    treekit.register_dataclass(Made)
    try:
        treedef = treekit.tree_structure([Made(1), Made(2)])
        callers.clear()
        built = treedef.unflatten([3, 4])
        assert len(callers) == 2 and not any(c.endswith("_register.py") for c in callers), callers
        assert built == [Made(3), Made(4)]
    finally:
        remove_type(Made)


def test_a_jax_only_dataclass_loads_into_a_template_whatever_the_import_order(tmp_path: Any) -> None:
    """Registered with JAX alone: saved by class name, as when JAX's registration came before
    treekit's import (then treekit cannot read its fields), so that one tree makes one file."""
    np = pytest.importorskip("numpy")
    pair = JaxPair
    tree = {"layer": pair(np.arange(3.0), JaxOne(np.ones(2), "x"))}
    treekit.save(tmp_path / "t.safetensors", tree)
    needs = r"the node holding \['layer'\]\.b\.w is a test_dataclass_nodes\.JaxOne.*pass like="
    with pytest.raises(ValueError, match=needs):
        treekit.load(tmp_path / "t.safetensors")
    back = treekit.load(tmp_path / "t.safetensors", like=tree)
    assert type(back["layer"]) is pair and back["layer"].b.name == "x"
    assert all((a == b).all() for a, b in zip(treekit.tree_leaves(back), treekit.tree_leaves(tree)))


def test_a_jax_only_node_keeps_at_most_512_converted_key_entries() -> None:
    class Wide:
        def __init__(self, n: int) -> None:
            self.n = n

    jtu.register_pytree_with_keys(
        Wide,
        lambda w: ([(jtu.DictKey(f"k{i}"), i) for i in range(w.n)], w.n),
        lambda n, children: Wide(n),
    )
    for _ in range(10):  # (until the answer is remembered: a JAX registration elsewhere, in another
        # thread, makes treekit forget the answers it is working out)
        pairs, _ = treekit.tree_flatten_with_path(Wide(2000))
        entry = TYPES.get(Wide)
        if entry is not None:
            break
    assert [treekit.keystr(p) for p, _ in pairs[:2]] == ["['k0']", "['k1']"] and len(pairs) == 2000
    assert entry is not None and entry.kind == "custom"

    sizes = [len(made) for _, made in entry.flatten.key_kinds.values() if made]  # the entries made, by kind
    assert sizes == [512]
    assert pairs[1999][0] == (treekit.DictKey("k1999"),)


# -- rebuilt without calling the class: only where its __init__ is the one dataclasses wrote --


class Logged:
    """A non-frozen dataclass base whose __setattr__ logs each store, in order."""

    log: list[str]

    def __setattr__(self, name: str, value: Any) -> None:
        type(self).log.append(name)
        object.__setattr__(self, name, value)


@dataclasses.dataclass
class LoggedFields(Logged):
    b: Any
    a: Any = 0
    c: Any = dataclasses.field(default_factory=list, kw_only=True)
    d: Any = 1


class Counted(type):
    calls = 0

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        Counted.calls += 1
        return super().__call__(*args, **kwargs)


@dataclasses.dataclass
class CalledByItsMetaclass(metaclass=Counted):
    a: Any


@dataclasses.dataclass
class OwnNew:
    a: Any

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        made = super().__new__(cls)
        made.tag = "new"  # type: ignore[attr-defined]
        return made


@dataclasses.dataclass
class Doubling:
    a: Any

    def __init__(self, a: Any) -> None:
        self.a = 2 * a


@dataclasses.dataclass
class Posted:
    a: Any

    def __post_init__(self) -> None:
        self.a = f"posted {self.a}"


@dataclasses.dataclass
class WithInitVar:
    a: Any
    scale: dataclasses.InitVar[int] = 1


DIRECT = [Plain, Frozen, Slotted, FrozenSlotted, LoggedFields]
CALLED = [CalledByItsMetaclass, OwnNew, Doubling, Posted, WithInitVar]


def _state(x: Any) -> list[tuple[str, Any]]:
    """An instance's stored attributes, in the order they were stored."""
    if hasattr(x, "__dict__"):
        return list(vars(x).items())
    return [(name, getattr(x, name)) for name in type(x).__slots__]


@pytest.mark.parametrize("cls", DIRECT + CALLED, ids=lambda c: c.__name__)
def test_a_rebuilt_dataclass_is_what_calling_the_class_makes(cls: type) -> None:
    """On both cores: the same type, attributes stored in the same order (one __setattr__
    each), __new__, __post_init__ and a metaclass's __call__ run as calling the class runs them."""
    registered = cls not in TYPES
    if registered:
        treekit.register_dataclass(cls)
    try:
        fields = [f for f in dataclasses.fields(cls) if f.init]
        meta = {f.name for f in fields if f.metadata.get("static", False)}
        treedef = treekit.tree_structure([cls(**{f.name: f"old {f.name}" for f in fields})])
        new = {f.name: f"old {f.name}" if f.name in meta else f"new {f.name}" for f in fields}
        leaves = [new[f.name] for f in fields if f.name not in meta]
        for build in (treedef.unflatten, lambda leaves: interpret(treedef._nodes, leaves)):
            Logged.log, Counted.calls = [], 0
            got = build(leaves)[0]
            log, calls = Logged.log, Counted.calls
            Logged.log, Counted.calls = [], 0
            want = cls(**new)
            assert type(got) is cls
            assert _state(got) == _state(want)
            assert (log, calls) == (Logged.log, Counted.calls)
    finally:
        if registered:
            remove_type(cls)


def test_only_an_init_dataclasses_wrote_is_skipped() -> None:
    from treekit.core._register import _stores

    for cls in DIRECT:
        names = tuple(f.name for f in dataclasses.fields(cls))
        assert _stores(cls, names)[:2] == (tuple(range(len(names))), cls.__dataclass_params__.frozen)  # type: ignore[attr-defined]
    for cls in CALLED:
        assert _stores(cls, tuple(f.name for f in dataclasses.fields(cls))) == (), cls
    assert _stores(Plain, ("w", "b")) == ()  # (a field left out: __init__ gives it its default)
    assert _stores(Validated, ("value",)) == ()  # (an init=False field: __init__ stores it too)


@native_only
def test_an_init_replaced_after_registering_is_called() -> None:
    @dataclasses.dataclass
    class Later:
        a: Any

    treekit.register_dataclass(Later)
    try:
        treedef = treekit.tree_structure(Later(1))
        assert treedef.unflatten([2]) == Later(2)
        written = Later.__init__

        def doubled(self: Any, a: Any) -> None:
            written(self, 2 * a)

        Later.__init__ = doubled  # type: ignore[method-assign]
        assert treedef.unflatten([2]).a == 4
    finally:
        remove_type(Later)

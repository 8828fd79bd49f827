"""The native core (treekit.core._native) against the pure-Python reference, and its memory safety.

C walks, Python speaks: on random trees the C functions give what the pure core gives
(the very leaves, equal treedefs, equal key paths, equal built trees), and on every
input they hand back to Python (user code raising, garbage from a flatten function, a
tree changed or a type registered mid-walk) the exception is the pure core's. These tests
call the C module directly, so they run under either core (``TREEKIT_PURE=1`` too); they
skip only where the extension was not built.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import gc
import inspect
import os
import pickle
import re
import subprocess
import sys
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

native = pytest.importorskip("treekit.core._native", reason="the C extension is not built here")
pytest.importorskip("hypothesis")

from cases import Point, case_types  # noqa: E402
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from strategies import LEAVES, trees  # noqa: E402

import treekit  # noqa: E402
import treekit.core._build  # noqa: E402
import treekit.core._keys  # noqa: E402
import treekit.core._treedef  # noqa: E402
import treekit.ops._ops  # noqa: E402
from treekit.core._build import interpret  # noqa: E402
from treekit.core._registry import remove_type  # noqa: E402
from treekit.core._traverse import pure_flatten  # noqa: E402
from treekit.ops._ops import _map_failed  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _types() -> Iterator[None]:
    with case_types():
        yield


def _mixed_keys(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    keys = st.one_of(st.integers(0, 3), st.text("ab", max_size=1), st.just((0,)))
    return st.dictionaries(keys, children, max_size=4)


TREES = st.one_of(trees(), st.recursive(LEAVES | st.none(), lambda c: _mixed_keys(c) | st.lists(c, max_size=2)))


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return ("ok", call())
    except Exception as exc:  # (addresses in reprs differ from call to call)
        return ("raised", type(exc), re.sub(r"0x[0-9a-f]+", "0x?", str(exc)))


def _same(a: Any, b: Any) -> None:
    """Two (leaves, treedef, paths) results: the same leaf objects, equal treedefs and paths."""
    assert [id(x) for x in a[0]] == [id(x) for x in b[0]]
    assert a[1] == b[1] and repr(a[1]) == repr(b[1])
    assert a[1]._nodes == b[1]._nodes
    assert a[2] == b[2]


# -- the same results as the pure core (and as jax) -----------------------------------------
@given(TREES, st.booleans())
def test_flatten_is_the_pure_cores(tree: Any, with_path: bool) -> None:
    _same(native.flatten(tree, None, with_path), pure_flatten(tree, None, with_path))


@given(TREES)
def test_flatten_with_is_leaf_is_the_pure_cores(tree: Any) -> None:
    def is_leaf(x: Any) -> bool:
        return x is None or type(x) is tuple

    _same(native.flatten(tree, is_leaf), pure_flatten(tree, is_leaf))
    _same(native.flatten(tree, is_leaf, True), pure_flatten(tree, is_leaf, True))


@given(TREES)
def test_structure_is_the_pure_cores(tree: Any) -> None:
    def is_leaf(x: Any) -> bool:
        return x is None or type(x) is tuple

    for given_is_leaf in (None, is_leaf):
        got, want = native.structure(tree, given_is_leaf), pure_flatten(tree, given_is_leaf)[1]
        assert got == want and repr(got) == repr(want) and got._nodes == want._nodes
    assert native.structure(tree) == native.flatten(tree)[1]


def test_structure_hands_what_it_does_not_finish_to_the_pure_core() -> None:
    cycle: list[Any] = [1, [2]]
    cycle[1].append(cycle)

    def is_leaf(x: Any) -> bool:
        raise ValueError("is_leaf says no")

    for tree, f in ((cycle, None), ([1, (2,)], is_leaf)):
        got = _outcome(lambda t=tree, f=f: native.structure(t, f))
        assert got[0] == "raised" and got == _outcome(lambda t=tree, f=f: pure_flatten(t, f)[1])
    assert _outcome(lambda: native.structure())[1] is TypeError


class JaxKeyed:
    """A node registered with JAX alone, whose flatten_with_keys gives the key entries it holds."""

    def __init__(self, keys: tuple[Any, ...], children: list[Any]) -> None:
        self.keys, self.children = keys, children


@functools.cache
def _jax_keyed() -> Any:
    jtu = pytest.importorskip("jax.tree_util")
    jtu.register_pytree_with_keys(
        JaxKeyed,
        lambda n: (list(zip(n.keys, n.children)), n.keys),
        lambda keys, children: JaxKeyed(keys, list(children)),
    )
    return jtu


def _jax_keys(jtu: Any) -> st.SearchStrategy[Any]:
    dict_keys = st.one_of(st.integers(0, 2), st.booleans(), st.text("ab", max_size=2), st.just(1.0))
    return st.one_of(
        st.text("ab", max_size=2).map(jtu.GetAttrKey), dict_keys.map(jtu.DictKey),
        st.integers(0, 2).map(jtu.SequenceKey), st.integers(0, 2).map(jtu.FlattenedIndexKey),
    )


def _entries(paths: list[Any]) -> list[Any]:
    """Key paths as what tells entries apart that compare equal: DictKey(True) is not DictKey(1)."""
    return [[(type(e), type(getattr(e, "key", getattr(e, "name", getattr(e, "idx", None))))) for e in p] for p in paths]


@given(st.data())
def test_jax_key_entries_are_made_treekits_as_the_pure_core_makes_them(data: Any) -> None:
    # each JAX entry of a class registered with JAX alone becomes treekit's, from the class's
    # table of entries made (filled by the first walk, read by the next) or made anew
    jtu = _jax_keyed()
    nodes = data.draw(st.lists(st.lists(_jax_keys(jtu), max_size=4), min_size=1, max_size=3))
    tree = [JaxKeyed(tuple(keys), [float(i) for i in range(len(keys))]) for keys in nodes]
    for _ in range(2):
        got, want = native.flatten(tree, None, True), pure_flatten(tree, None, True)
        _same(got, want)
        assert [treekit.keystr(p) for p in got[2]] == [treekit.keystr(p) for p in want[2]]
        assert _entries(got[2]) == _entries(want[2])
    assert all(type(e).__module__ == "treekit.core._keys" for p in got[2] for e in p)


def _notes(call: Callable[[], Any]) -> Any:
    try:
        call()
    except RuntimeError as exc:
        return str(exc), getattr(exc, "__notes__", None)
    raise AssertionError("expected a RuntimeError")


def test_jax_pairs_as_namedtuples_a_failing_conversion_and_no_table_are_the_pure_cores() -> None:
    jtu = _jax_keyed()
    Pair = collections.namedtuple("Pair", "key child")

    class Named:
        pass

    jtu.register_pytree_with_keys(Named, lambda n: ([Pair(jtu.GetAttrKey("a"), 1.5)], None), lambda d, c: Named())
    _same(native.flatten(Named(), None, True), pure_flatten(Named(), None, True))  # (jax takes such pairs)

    class Meta(type):
        def __hash__(cls) -> int:
            raise RuntimeError("the hash of a key class")

        __eq__ = type.__eq__

    class Odd(metaclass=Meta):
        pass

    class Raising:
        pass

    jtu.register_pytree_with_keys(Raising, lambda n: (((Odd(), 1.5),), None), lambda d, c: Raising())
    tree = {"a": Raising()}  # the conversion raises in the entry's flatten: noted with its path
    got, want = _notes(lambda: native.flatten(tree, None, True)), _notes(lambda: pure_flatten(tree, None, True))
    assert got == want and want[1]

    class Bare:
        pass

    from treekit.core._register import make_flatten, tuple_children

    def keyed(n: Bare) -> Any:
        return (("raw", 1.5),), None

    flatten = make_flatten(Bare, None, keyed, convert_key=lambda k: treekit.GetAttrKey("converted"))
    with _added(treekit.core._registry.NodeType(Bare, flatten, tuple_children(lambda d, c: Bare()))):
        _same(native.flatten([Bare()], None, True), pure_flatten([Bare()], None, True))  # no table: each converted


@contextlib.contextmanager
def _added(ntype: Any) -> Iterator[None]:
    treekit.core._registry.add_type(ntype)
    try:
        yield
    finally:
        remove_type(ntype.type)


def pure_flatten_pairs(tree: Any, is_leaf: Any, takes_path: bool) -> Any:
    leaves, treedef, paths = pure_flatten(tree, is_leaf, True, takes_path)
    return list(zip(paths, leaves)), treedef


@given(TREES, st.sampled_from(["none", "tuples", "by path"]))
def test_flatten_pairs_is_the_pure_cores(tree: Any, is_leaf_kind: str) -> None:
    is_leaf = {"none": None, "tuples": lambda x: type(x) is tuple, "by path": lambda path, x: len(path) == 2}
    takes_path = is_leaf_kind == "by path"
    got = _outcome(lambda: native.flatten_pairs(tree, is_leaf[is_leaf_kind], takes_path))
    want = _outcome(lambda: pure_flatten_pairs(tree, is_leaf[is_leaf_kind], takes_path))
    assert got[0] == want[0] == "ok"
    assert [(path, id(x)) for path, x in got[1][0]] == [(path, id(x)) for path, x in want[1][0]]
    assert got[1][1] == want[1][1]


def test_flatten_pairs_of_a_cycle_is_the_pure_cores_error() -> None:
    tree: list[Any] = [1.0, {"a": 2.0}]
    tree[1]["b"] = tree
    got = _outcome(lambda: native.flatten_pairs(tree, None, False))
    assert got[0] == "raised" and got == _outcome(lambda: pure_flatten_pairs(tree, None, False))


@given(TREES)
def test_build_is_the_pure_cores(tree: Any) -> None:
    leaves, treedef, _ = pure_flatten(tree)
    built = native.build(treedef._nodes, leaves)
    assert built == interpret(treedef._nodes, leaves) == tree
    assert repr(built) == repr(tree)  # dicts in the input's key order
    assert pure_flatten(built)[1] == treedef


@given(trees(custom=False))
def test_leaves_and_structure_are_jaxs(tree: Any) -> None:
    jtu = pytest.importorskip("jax.tree_util")
    leaves, treedef, _ = native.flatten(tree)
    assert [id(x) for x in leaves] == [id(x) for x in jtu.tree_leaves(tree)]
    assert repr(treedef) == repr(jtu.tree_structure(tree))


@given(trees(custom=False), st.booleans())
def test_map_with_path_and_keystr_are_jaxs(tree: Any, simple: bool) -> None:
    jtu = pytest.importorskip("jax.tree_util")

    def text(keystr: Any) -> Callable[..., Any]:
        return lambda path, x, y: f"{keystr(path, simple=simple, separator='/')}={x!r}:{y!r}"

    got = _map(text(treekit.keystr), tree, _extended(tree), with_path=True)
    want = jtu.tree_map_with_path(text(jtu.keystr), tree, _extended(tree))
    assert got == want and jtu.tree_leaves(got) == jtu.tree_leaves(want)  # (jax sorts dicts it builds)


def test_a_dict_in_any_key_order_has_one_treedef() -> None:
    ab, ba = native.flatten({"a": 1, "b": 2})[1], native.flatten({"b": 2, "a": 1})[1]
    assert ab == ba and hash(ab) == hash(ba)
    assert native.build(ba._nodes, [1, 2]) == {"b": 2, "a": 1}
    assert list(native.build(ba._nodes, [1, 2])) == ["b", "a"]


def test_equal_keys_of_other_types_are_kept() -> None:
    # 1.0 == 1: a shared key order must not give one dict the other's key objects
    first, second = {2: "x", 1: "y"}, {2.0: "x", 1.0: "y"}
    for tree in (first, second, first):
        leaves, treedef, _ = native.flatten(tree)
        rebuilt = native.build(treedef._nodes, leaves)
        assert [type(k) for k in rebuilt] == [type(k) for k in tree]


def test_deep_trees_work() -> None:
    tree: Any = 0
    for _ in range(100_000):
        tree = [tree]
    leaves, treedef, _ = native.flatten(tree)
    assert leaves == [0] and treedef.num_nodes == 100_001
    assert treedef._nodes == pure_flatten(tree)[1]._nodes
    assert native.build(treedef._nodes, [1]) is not None


def test_deep_trees_map_and_match() -> None:
    tree: Any = 0
    for _ in range(100_000):
        tree = [tree, 1]
    doubled = _map(lambda x, y: x + y, tree, tree)
    assert native.leaves(doubled) == [0] + [2] * 100_000
    assert len(native.guide(native.flatten(tree)[1]._nodes, doubled, True)) == 100_001


@pytest.mark.parametrize("depth", [2, 9, 33, 70, 600])
def test_deep_key_paths_are_the_pure_cores(depth: int) -> None:
    # the walk's own array of keys, past its first frames; equal copies of the shared
    # SequenceKeys at most positions of a path; records kept from the walk before
    tree: Any = [0.5]
    for i in range(depth - 1):
        tree = [float(i), (tree, i)] if i % 3 else [float(i), tree]
    for _ in range(2):
        _same(native.flatten(tree, None, True), pure_flatten(tree, None, True))

    def is_leaf(seen: list[Any]) -> Callable[[Any, Any], bool]:
        return lambda path, x: bool(seen.append(path))

    seen_native: list[Any] = []
    seen_pure: list[Any] = []
    _same(native.flatten(tree, is_leaf(seen_native), True, True), pure_flatten(tree, is_leaf(seen_pure), True, True))
    assert seen_native == seen_pure and len(seen_native) > depth
    paths = native.flatten(tree, None, True)[2]
    assert [treekit.keystr(p) for p in paths] == [treekit.keystr(p) for p in pure_flatten(tree, None, True)[2]]


@pytest.mark.parametrize("depth", [1, 3000])
def test_a_cycle_is_the_pure_cores_error(depth: int) -> None:
    tree: Any = []
    inner = tree
    for _ in range(depth):
        inner.append([])
        inner = inner[0]
    inner.append(tree)
    wide: list[Any] = [1] * 50_000
    wide.append(wide)
    for t in (tree, wide):
        assert _outcome(lambda t=t: native.flatten(t)) == _outcome(lambda t=t: pure_flatten(t))
        assert _outcome(lambda t=t: native.flatten(t))[0] == "raised"


@contextlib.contextmanager
def _pure_core() -> Iterator[None]:
    """tree_map, the guided walk and keystr as the pure core runs them: no native step inside."""
    saved = [(treekit.ops._ops, "flatten", treekit.ops._ops.flatten)]
    saved += [(m, "NATIVE", m.NATIVE) for m in (treekit.ops._ops, treekit.core._treedef, treekit.core._keys)]
    saved += [(treekit, "keystr", treekit.keystr)]
    for module, name, _ in saved:
        pure = {"flatten": pure_flatten, "keystr": treekit.core._keys._pure_keystr}
        setattr(module, name, pure.get(name))
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def _pure(call: Callable[[], Any]) -> Any:
    with _pure_core():
        return _outcome(call)


def _extended(tree: Any) -> Any:
    """``tree`` with each leaf in a list: a tree whose structure extends ``tree``'s."""
    leaves, treedef, _ = pure_flatten(tree)
    return interpret(treedef._nodes, [[x] for x in leaves])


def _map(f: Any, tree: Any, *rest: Any, is_leaf: Any = None, with_path: bool = False, takes_path: bool = False) -> Any:
    return native.map(f, tree, rest, is_leaf, _map_failed, with_path=with_path, leaf_takes_path=takes_path)


def _pure_map(f: Any, tree: Any, *rest: Any, with_path: bool = False, **kwargs: Any) -> Any:
    mapper = treekit.tree_map_with_path if with_path else treekit.tree_map
    return _pure(lambda: mapper(f, tree, *rest, **kwargs))


@given(TREES, st.integers(0, 2), st.booleans())
def test_map_is_the_pure_cores(tree: Any, n_rest: int, with_path: bool) -> None:
    rest = [tree, _extended(tree)][:n_rest]
    got = _outcome(lambda: _map(lambda *xs: xs, tree, *rest, with_path=with_path))
    want = _pure_map(lambda *xs: xs, tree, *rest, with_path=with_path)
    assert got == want and repr(got) == repr(want)


@given(TREES, TREES, st.booleans())
def test_map_over_trees_that_differ_raises_as_the_pure_core(tree: Any, other: Any, with_path: bool) -> None:
    def pair(*xs: Any) -> Any:
        return xs

    got = _map(pair, tree, other, with_path=with_path)
    want = _pure_map(pair, tree, other, with_path=with_path)
    if got is native.DEFER:  # handed back: tree_map gives the pure core's answer
        got = _outcome(lambda: (treekit.tree_map_with_path if with_path else treekit.tree_map)(pair, tree, other))
    else:
        got = ("ok", got)
    assert got == want and repr(got) == repr(want)


@given(TREES)
def test_map_with_is_leaf_is_the_pure_cores(tree: Any) -> None:
    def is_leaf(x: Any) -> bool:
        return x is None or type(x) is tuple

    def is_leaf_with_path(path: Any, x: Any) -> bool:
        return len(path) == 2 or x is None

    assert _outcome(lambda: _map(repr, tree, is_leaf=is_leaf)) == _pure_map(repr, tree, is_leaf=is_leaf)
    got = _outcome(lambda: _map(lambda p, x: (p, x), tree, is_leaf=is_leaf_with_path, with_path=True, takes_path=True))
    want = _pure_map(lambda p, x: (p, x), tree, with_path=True, is_leaf=is_leaf_with_path, is_leaf_takes_path=True)
    assert got == want
    _same(native.flatten(tree, is_leaf_with_path, True, True), pure_flatten(tree, is_leaf_with_path, True, True))


@given(TREES, st.booleans())
def test_map_keeps_f_s_exception_and_its_note(tree: Any, with_path: bool) -> None:
    def f(*xs: Any) -> Any:
        if xs[-1] is not None and type(xs[-1]) is not int:
            raise Boom(f"no {type(xs[-1]).__name__}")
        return xs

    got = _outcome(lambda: _map(f, tree, tree, with_path=with_path))
    want = _pure_map(f, tree, tree, with_path=with_path)
    assert got == want
    if got[0] == "raised":  # the note names the leaf, as the pure core's does
        with pytest.raises(Boom) as native_error:
            _map(f, tree, tree, with_path=with_path)
        with _pure_core(), pytest.raises(Boom) as pure_error:
            (treekit.tree_map_with_path if with_path else treekit.tree_map)(f, tree, tree)
        assert native_error.value.__notes__ == pure_error.value.__notes__


def test_map_lets_base_exceptions_through_without_a_note() -> None:
    def stop(x: Any) -> Any:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as caught:
        _map(stop, [1, 2])
    assert not hasattr(caught.value, "__notes__")


@given(TREES, TREES, st.booleans())
def test_up_to_is_the_pure_walk(tree: Any, other: Any, strict: bool) -> None:
    nodes = pure_flatten(tree)[1]._nodes
    treedef = pure_flatten(tree)[1]
    for target in (tree, _extended(tree), other):
        for is_leaf in (None, lambda x: x is None):
            got = native.guide(nodes, target, strict, is_leaf)
            want = _outcome(lambda t=target, f=is_leaf: treedef._guide(t, "tree", strict, f, []))  # with keys: pure
            if got is not native.DEFER:
                assert want[0] == "ok" and [id(x) for x in got] == [id(x) for x in want[1]]
            else:
                assert _outcome(lambda t=target, f=is_leaf: treedef._guide(t, "tree", strict, f)) == want


@given(TREES, st.sampled_from(["", "/", "."]))
def test_keystr_is_the_pure_cores(tree: Any, separator: str) -> None:
    for path in pure_flatten(tree, None, True)[2] or []:
        for simple in (False, True):
            got = _outcome(lambda p=path, s=simple: native.keystr(p, s, separator))
            assert got == _pure(lambda p=path, s=simple: treekit.keystr(p, simple=s, separator=separator))


class _Entry:
    def __init__(self, text: Any) -> None:
        self.text = text

    def __str__(self) -> Any:
        return self.text


@pytest.mark.parametrize(
    "keys",
    [
        (treekit.SequenceKey(True), treekit.DictKey(1.0), treekit.GetAttrKey("x"), treekit.FlattenedIndexKey(3)),
        [treekit.DictKey("a"), _Entry("<user>")],
        iter([treekit.DictKey(("t", 1))]),
        (_Entry(3),),
        5,
        (treekit.GetAttrKey(7),),
    ],
    ids=["builtin", "user", "iterator", "bad-str", "not-iterable", "name-not-str"],
)
@pytest.mark.parametrize("simple", [False, True, 1])
@pytest.mark.parametrize("separator", ["", "/", None])
def test_keystr_of_odd_keys_is_the_pure_cores(keys: Any, simple: Any, separator: Any) -> None:
    items = list(keys) if hasattr(keys, "__next__") else keys  # an iterator is read once per call

    def fresh() -> Any:
        return iter(items) if hasattr(keys, "__next__") else items

    got = _outcome(lambda: treekit.keystr(fresh(), simple=simple, separator=separator))
    assert got == _pure(lambda: treekit.keystr(fresh(), simple=simple, separator=separator))


def test_keystr_is_a_builtin_function_with_the_pure_ones_signature_docstring_and_errors() -> None:
    pure, path = treekit.core._keys._pure_keystr, (treekit.DictKey("a"), treekit.SequenceKey(300))
    if treekit.backend() == "native":
        assert inspect.isbuiltin(treekit.keystr) and treekit.keystr.__module__ == "treekit.core._keys"
    else:
        assert treekit.keystr is pure
    assert inspect.getdoc(treekit.keystr) == inspect.getdoc(pure)
    shape = [(p.name, p.kind, p.default) for p in inspect.signature(pure).parameters.values()]
    assert [(p.name, p.kind, p.default) for p in inspect.signature(treekit.keystr).parameters.values()] == shape
    assert pickle.loads(pickle.dumps(treekit.keystr)) is treekit.keystr
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((path,), {}),
        ((), {"keys": path, "simple": True, "separator": "/"}),
        ((path,), {"separator": "", "simple": False}),
        ((path, True), {}),
        ((), {}),
        ((path,), {"keys": path}),
        ((path,), {"sep": "/"}),
        ((path,), {"separator": b"/"}),
        ((path,), {"simple": 1}),
    ]
    for args, kwargs in calls:
        got = _outcome(lambda a=args, k=kwargs: treekit.keystr(*a, **k))
        assert got == _outcome(lambda a=args, k=kwargs: pure(*a, **k)), (args, kwargs)


@pytest.mark.parametrize(
    ("cls", "field"),
    [
        (treekit.SequenceKey, "idx"),
        (treekit.DictKey, "key"),
        (treekit.GetAttrKey, "name"),
        (treekit.FlattenedIndexKey, "key"),
    ],
)
def test_key_entries_are_made_as_their_dataclass_makes_them(cls: Any, field: str) -> None:
    if treekit.backend() == "native":  # an __init__ in C, as a method of the class
        assert type(cls.__dict__["__init__"]).__name__ == "method_descriptor"
    value = "".join(["va", "lue"])
    count = sys.getrefcount(value)
    made = [cls(value) for _ in range(1000)] + [cls(**{field: value}) for _ in range(1000)]
    assert all(getattr(entry, field) is value for entry in made) and made[0] == cls(value)
    assert sys.getrefcount(value) == count + 2000
    made[0].__init__("other")  # as object.__setattr__ in the dataclass's __init__: the old value goes
    assert getattr(made[0], field) == "other" and sys.getrefcount(value) == count + 1999
    del made
    assert sys.getrefcount(value) == count
    name = cls.__qualname__
    calls = [
        ((), {}, f"{name}.__init__() missing 1 required positional argument: '{field}'"),
        ((1, 2), {}, f"{name}.__init__() takes 2 positional arguments but 3 were given"),
        ((), {"other": 1}, f"{name}.__init__() got an unexpected keyword argument 'other'"),
        ((1,), {field: 1}, f"{name}.__init__() got multiple values for argument '{field}'"),
    ]
    for args, kwargs, message in calls:
        with pytest.raises(TypeError, match=re.escape(message)):
            cls(*args, **kwargs)
    sub = type("Sub", (cls,), {})(value)  # a subclass: the dataclass's __init__
    assert getattr(sub, field) is value
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(sub, field, 1)
    assert pickle.loads(pickle.dumps(cls(3))) == cls(3)


@pytest.mark.parametrize("cls", [treekit.SequenceKey, treekit.DictKey, treekit.GetAttrKey, treekit.FlattenedIndexKey])
def test_key_entry_classes_given_another_init_call_it(cls: Any) -> None:
    # The native core makes `cls(value)` without type.__call__ while the class's __init__ is
    # its own; a class patched afterwards is called as Python calls it.
    calls: list[Any] = []
    own_init = cls.__dict__["__init__"]

    def init(self: Any, value: Any) -> None:
        calls.append(value)
        own_init(self, value)

    try:
        cls.__init__ = init
        assert cls(1) == cls(value=1) and calls == [1, 1]
    finally:
        cls.__init__ = own_init
    assert cls(3) == cls(3) and getattr(cls(3), next(iter(cls.__dataclass_fields__))) == 3 and calls == [1, 1]


def test_dicts_of_alternating_key_sets_flatten_as_the_pure_core() -> None:
    # the same first key with other keys after it, other lengths, orders and equal keys
    block = [{"w": 1.0, "b": 2.0}, {"w": 3.0, "s": 4.0}, {"w": 5.0, "b": 6.0, "s": 7.0}, {"b": 8.0, "w": 9.0}]
    tree = [*block, {"".join(["w"]): 0.5, "b": 0.25}, {"x": block}, *block, {}, {"w": None}]
    for with_path in (False, True):
        _same(native.flatten(tree, None, with_path), pure_flatten(tree, None, with_path))


def _big_dicts() -> list[Any]:
    """Dicts of more than 8 keys (the C core remembers their key objects and node data)."""
    inserted_sorted = {f"k{i:05d}": float(i) for i in range(3000)}
    natural = {f"param_{i}": float(i) for i in range(3000)}  # param_10 sorts before param_2
    reordered = dict(reversed(list(inserted_sorted.items())))  # the same key objects, reversed
    dropped = dict(inserted_sorted)
    del dropped["k00007"]
    copied = {"".join(["k0", k[2:]]): v for k, v in inserted_sorted.items()}  # equal keys, other objects
    nested = {f"k{i:02d}": [float(i), {"b": 1.0, "a": 2.0}] for i in range(40)}
    ints = {i: float(i) for i in range(20)}
    return [inserted_sorted, natural, reordered, inserted_sorted, dropped, natural, copied, nested, ints]


def test_big_dicts_flatten_and_build_as_the_pure_core_each_time() -> None:
    for _ in range(3):  # remembered after the first time; a template to build from after the second
        for tree in [*_big_dicts(), [_big_dicts()[0], _big_dicts()[1]]]:
            for with_path in (False, True):
                _same(native.flatten(tree, None, with_path), pure_flatten(tree, None, with_path))
            leaves, treedef, _ = pure_flatten(tree)
            built = native.build(treedef._nodes, leaves)
            assert repr(built) == repr(interpret(treedef._nodes, leaves)) and built == tree
            assert [id(x) for x in pure_flatten(built)[0]] == [id(x) for x in leaves]


def test_big_dicts_used_in_turn_flatten_as_the_pure_core() -> None:
    # More big dicts than the C core remembers (any may take any slot), met again and again
    # in turn, as tree_map over several trees meets them: each flatten is the pure core's.
    trees = _big_dicts()[:7]
    for _ in range(4):
        for tree in trees:
            for with_path in (False, True):
                _same(native.flatten(tree, None, with_path), pure_flatten(tree, None, with_path))


class _Shifty:
    """A dict key whose hash changes when told to."""

    def __init__(self, name: str) -> None:
        self.name, self.shift = name, 0

    def __hash__(self) -> int:
        return hash(self.name) + self.shift

    def __eq__(self, other: object) -> bool:
        return self is other

    def __lt__(self, other: _Shifty) -> bool:
        return self.name < other.name

    def __repr__(self) -> str:
        return f"_Shifty({self.name!r})"


def test_a_big_dict_whose_key_hash_changed_builds_as_the_pure_core() -> None:
    keys = [_Shifty(f"k{i:02d}") for i in range(12)]
    leaves, treedef, _ = pure_flatten(dict.fromkeys(keys, 1.0))
    for _ in range(3):  # the third build copies the kept dict of these keys
        assert repr(native.build(treedef._nodes, leaves)) == repr(interpret(treedef._nodes, leaves))
    keys[3].shift = 1
    built = native.build(treedef._nodes, leaves)
    assert len(built) == 12 and repr(built) == repr(interpret(treedef._nodes, leaves))


def test_what_is_kept_for_big_dicts_is_bounded() -> None:
    def flattened_and_built(tag: int) -> None:
        tree = {f"{tag}-{i:05d}": float(i) for i in range(5000)}
        for _ in range(3):
            leaves, treedef, _paths = native.flatten(tree, None, True)
            assert native.build(treedef._nodes, leaves) == tree

    flattened_and_built(-1)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for tag in range(30):  # 150,000 keys in all
            flattened_and_built(tag)
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 12 * 2**20, f"{kept / 2**20:.1f} MiB kept"


def test_a_big_dict_holding_the_builders_own_spare_keys_builds_as_the_pure_core() -> None:
    # The C builder copies big dicts from a kept dict whose table it grew with str keys of
    # its own, deleted again; a user's dict may hold those very strings.
    tree = {f"\x01treekit-spread-{i}": float(i) for i in range(0, 2000, 2)} | {f"k{i}": 1.0 for i in range(500)}
    leaves, treedef, _ = pure_flatten(tree)
    for _ in range(3):  # the third build copies the kept dict
        built = native.build(treedef._nodes, leaves)
        assert built == tree and list(built) == list(tree)
        built["new"] = 2.0  # a copy, not the kept dict
    assert "new" not in native.build(treedef._nodes, leaves)


class _Key:
    """A dict key the garbage collector tracks: it can hold the tree it is a key of."""

    def __init__(self) -> None:
        self.held: Any = None

    def __lt__(self, other: _Key) -> bool:
        return id(self) < id(other)


def _keyed(size: int) -> tuple[list[_Key], dict[_Key, float]]:
    keys = sorted(_Key() for _ in range(size))  # inserted sorted: no key order is cached
    return keys, {k: float(i) for i, k in enumerate(keys)}


def test_cycles_through_key_paths_are_collected() -> None:
    # The C core untracks the key entries, paths and pairs it makes where no cycle can pass
    # through them (str and int keys, leaves the collector does not track); those holding a
    # tracked key stay tracked, so a cycle through a key path is still collected.
    import weakref

    for _ in range(3):
        keys, tree = _keyed(2)
        pairs = treekit.tree_flatten_with_path({"outer": tree})[0]  # (the treedef holds the keys)
        keys[0].held = [pairs, treekit.tree_flatten_with_path(tree)[0]]  # key -> pairs -> path -> DictKey -> key
        gone = weakref.ref(keys[0])
        del keys, tree, pairs
        gc.collect()
        assert gone() is None
    _, big = _keyed(20)  # a big dict at the root: its paths are kept with its entries
    for _ in range(3):
        for pair in treekit.tree_flatten_with_path(big)[0]:
            assert gc.is_tracked(pair) and gc.is_tracked(pair[0]) and gc.is_tracked(pair[0][0])
    entry = treekit.DictKey("a")
    holder = _Key()
    entry.__init__(holder)  # type: ignore[misc]  # a str key entry given a tracked key
    holder.held = entry
    gone = weakref.ref(holder)
    del entry, holder
    gc.collect()
    assert gone() is None


class _Indexed(collections.namedtuple("_Indexed", "a b")):
    def __getitem__(self, i: Any) -> Any:  # what the pure walker's children[i] calls
        return ("via getitem", tuple.__getitem__(self, i))


def test_a_namedtuple_that_reads_otherwise_is_read_as_the_pure_core_reads_it() -> None:
    tree = [_Indexed(1, [2]), collections.namedtuple("Plain", "a b")(3, 4)]
    for with_path in (False, True):
        _same(native.flatten(tree, None, with_path), pure_flatten(tree, None, with_path))


# -- user code that misbehaves: the pure core's exception, no crash ------------------------
class Odd:
    def __init__(self, *children: Any) -> None:
        self.children = list(children)


class Boom(Exception):
    pass


def _behaviours() -> dict[str, Callable[[Odd], Any]]:
    def raises(node: Odd) -> Any:
        raise Boom("flatten failed")

    def not_a_pair(node: Odd) -> Any:
        return node.children

    def a_generator(node: Odd) -> Any:
        return (c for c in node.children), None

    def unhashable_data(node: Odd) -> Any:
        return node.children, []

    def mutates(node: Odd) -> Any:
        out = list(node.children)
        node.children.clear()
        TREE_BOX[0].clear()  # the list holding this node
        return out, None

    def registers(node: Odd) -> Any:
        fresh = type("Fresh", (), {})
        treekit.register_pytree_node(fresh, lambda x: ((), None), lambda d, c: fresh())
        return node.children, None

    return {f.__name__: f for f in (raises, not_a_pair, a_generator, unhashable_data, mutates, registers)}


TREE_BOX: list[Any] = [None]


@pytest.mark.parametrize("behaviour", sorted(_behaviours()))
@pytest.mark.parametrize("with_path", [False, True])
def test_misbehaving_flatten_functions_raise_as_the_pure_core(behaviour: str, with_path: bool) -> None:
    treekit.register_pytree_node(Odd, _behaviours()[behaviour], lambda d, c: Odd(*c))
    try:
        outcomes = []
        for walk in (native.flatten, pure_flatten):
            TREE_BOX[0] = [1, Odd(2, [3]), {"k": Odd(4)}]
            outcomes.append(_outcome(lambda walk=walk: walk(TREE_BOX[0], None, with_path)))
        if outcomes[0][0] == "ok":  # the walk finished: the same leaves and structure
            assert outcomes[1][0] == "ok"
            assert outcomes[0][1][0] == outcomes[1][1][0] and outcomes[0][1][1] == outcomes[1][1][1]
        else:
            assert outcomes[0] == outcomes[1]
        mapped = []
        for pure in (False, True):  # tree_map over two trees: the native map, then the pure core's
            TREE_BOX[0] = [1, Odd(2, [3]), {"k": Odd(4)}]
            other = [1, Odd(2, [3]), {"k": Odd(4)}]
            mapper = treekit.tree_map_with_path if with_path else treekit.tree_map
            with _pure_core() if pure else contextlib.nullcontext():
                mapped.append(_outcome(lambda m=mapper, o=other: m(lambda *xs: xs[-1], TREE_BOX[0], o)))
        assert mapped[0][0] == mapped[1][0] and (mapped[0][0] == "ok" or mapped[0] == mapped[1])
    finally:
        remove_type(Odd)


@pytest.mark.parametrize(
    "keyed",
    [
        lambda o: ([(treekit.GetAttrKey("c"), c) for c in o.children], None),  # fine
        lambda o: ((treekit.GetAttrKey("c"), c) for c in o.children),  # not a pair
        lambda o: (iter([(treekit.GetAttrKey("c"), c) for c in o.children]), None),  # an iterator of pairs
        lambda o: ([[treekit.GetAttrKey("c"), c] for c in o.children], None),  # lists, not pairs
        lambda o: ([(treekit.GetAttrKey("c"),) for c in o.children], None),  # one item each
        lambda o: 1 // 0,  # raises
    ],
    ids=["fine", "not-a-pair", "iterator", "lists", "short", "raises"],
)
def test_misbehaving_flatten_with_keys_functions_raise_as_the_pure_core(keyed: Callable[[Odd], Any]) -> None:
    treekit.register_pytree_with_keys(Odd, keyed, lambda d, c: Odd(*c), lambda o: (o.children, None))
    try:
        tree = [1, Odd(2, [3]), {"k": Odd(4)}]
        got = _outcome(lambda: native.flatten(tree, None, True))
        want = _outcome(lambda: pure_flatten(tree, None, True))
        assert (got[0], got[1][0], got[1][2]) == (want[0], want[1][0], want[1][2]) if got[0] == "ok" else got == want
    finally:
        remove_type(Odd)


def test_raising_is_leaf_and_unflatten_are_the_pure_cores() -> None:
    def is_leaf(x: Any) -> bool:
        if x == 3:
            raise Boom("is_leaf")
        return False

    assert _outcome(lambda: native.flatten([1, [3]], is_leaf)) == _outcome(lambda: pure_flatten([1, [3]], is_leaf))
    treekit.register_pytree_node(Odd, lambda o: (o.children, None), lambda d, c: 1 // 0)
    try:
        nodes = pure_flatten([Odd(1)])[1]._nodes
        assert _outcome(lambda: native.build(nodes, [1])) == _outcome(lambda: interpret(nodes, [1]))
    finally:
        remove_type(Odd)


def test_custom_unflatten_functions_are_called_as_the_pure_core_calls_them() -> None:
    calls: list[Any] = []

    def unflatten(data: Any, children: Any) -> Any:
        calls.append((data, children))
        if data == "bad":
            raise Boom("unflatten")
        if data == "stop":
            raise KeyboardInterrupt
        return Odd(*children)

    treekit.register_pytree_node(Odd, lambda o: (o.children, o.children[0]), unflatten)
    try:
        nodes = pure_flatten([Odd("ok", 2), {"k": Odd("ok")}])[1]._nodes
        built = native.build(nodes, ["ok", 2, "ok"])
        assert [type(x) for x in built] == [Odd, dict] and built[0].children == ["ok", 2]
        assert calls == [("ok", ("ok", 2)), ("ok", ("ok",))]  # once each, children as a tuple
        nodes = pure_flatten([Odd("ok"), Odd("bad", 1)])[1]._nodes
        got = _outcome(lambda: native.build(nodes, ["ok", "bad", 1]))
        assert got == _outcome(lambda: interpret(nodes, ["ok", "bad", 1])) and got[0] == "raised"
        with pytest.raises(Boom) as info:
            native.build(nodes, ["ok", "bad", 1])
        note = f"raised by the unflatten function registered for {Odd.__qualname__} (node data 'bad', 2 children)"
        assert info.value.__notes__ == [note]
        with pytest.raises(KeyboardInterrupt):  # not an Exception: it goes on as it is
            native.build(pure_flatten([Odd("stop")])[1]._nodes, ["stop"])
    finally:
        remove_type(Odd)


# -- memory safety ------------------------------------------------------------------------------
def _workload() -> tuple[Callable[[], None], list[Any]]:
    """Calls through every native function, some raising from user code; and the objects
    whose reference counts they must leave alone."""
    leaf, key, label = object(), "".join(["wei", "ghts"]), "".join(["la", "bel"])
    tree = {key: [leaf, (leaf, None)], "b": Point(leaf, {"z": leaf, "a": 2}, label=label)}
    treedef = pure_flatten(tree)[1]
    leaves = pure_flatten(tree)[0]

    def bad_leaf(x: Any) -> bool:
        if x is leaf:
            raise Boom
        return False

    def run() -> None:
        native.flatten(tree)
        native.flatten(tree, None, True)
        native.flatten(tree, lambda x: x is None)
        native.build(treedef._nodes, leaves)
        treekit.tree_map(lambda x: x, tree)
        treekit.tree_map_with_path(lambda p, x, y: y, tree, tree)
        native.guide(treedef._nodes, tree, True)
        native.guide(treedef._nodes, [1], False)  # a mismatch: DEFER
        treekit.keystr((treekit.DictKey(key), treekit.SequenceKey(1)))
        try:
            treekit.tree_map(bad_leaf, tree)
        except Boom:
            pass
        try:
            native.flatten(tree, bad_leaf)
        except Boom:
            pass

    return run, [leaf, key, label, tree, treedef, leaves]


def test_reference_counts_do_not_change() -> None:
    run, objects = _workload()
    for _ in range(treekit.core._build._COMPILE_AT + 1):  # caches fill: key orders at once, builders once compiled
        run()
    gc.collect()
    before = [sys.getrefcount(x) for x in objects]
    for _ in range(10_000):
        run()
    gc.collect()
    assert [sys.getrefcount(x) for x in objects] == before


# -- threads ----------------------------------------------------------------------------------------
def test_sixteen_threads_agree_while_types_are_registered() -> None:
    tree = [{"weights": [1.0, 2.0], "biases": (3.0, None)}, Point(4.0, {"b": 5.0, "a": 6.0}), "x"]
    expected = (pure_flatten(tree)[0], pure_flatten(tree)[1], treekit.tree_map(str, tree))
    stop = threading.Event()
    failures: list[Any] = []

    def register() -> None:
        while not stop.is_set():
            fresh = type("Fresh", (), {})
            treekit.register_pytree_node(fresh, lambda x: ((), None), lambda d, c, cls=fresh: cls())
            remove_type(fresh)

    def work() -> None:
        for _ in range(300):
            leaves, treedef, _ = native.flatten(tree)
            got = (leaves, treedef, treekit.tree_map(str, tree))
            if got != expected:
                failures.append(got)

    registrar = threading.Thread(target=register)
    registrar.start()
    workers = [threading.Thread(target=work) for _ in range(16)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    stop.set()
    registrar.join()
    assert failures == []


def test_the_environment_picks_the_core() -> None:
    code = "import treekit, sys; print(treekit.backend(), 'jax' in sys.modules, 'numpy' in sys.modules)"
    for value, want in (("1", "pure"), ("", "native")):
        env = dict(os.environ, TREEKIT_PURE=value)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        assert out.stdout.split() == [want, "False", "False"]


def test_ordered_and_default_dicts_go_through_their_entries() -> None:
    tree = [collections.OrderedDict(b=1, a=2), collections.defaultdict(list, {"b": 3, "a": 4})]
    _same(native.flatten(tree), pure_flatten(tree))
    _same(native.flatten(tree, None, True), pure_flatten(tree, None, True))
    leaves, treedef, _ = native.flatten(tree)
    assert native.build(treedef._nodes, leaves) == tree

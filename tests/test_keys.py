"""Key entries and keystr: jax's repr and str, frozen, hashable, ``get``."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
import pydoc
from typing import Any

import pytest

from treekit import DictKey, FlattenedIndexKey, GetAttrKey, SequenceKey, UserKey, keystr, tree_leaves_with_path

ENTRIES = [
    (SequenceKey(0), "SequenceKey(idx=0)", "[0]"),
    (SequenceKey(12), "SequenceKey(idx=12)", "[12]"),
    (DictKey("a"), "DictKey(key='a')", "['a']"),
    (DictKey(1), "DictKey(key=1)", "[1]"),
    (DictKey(("a", 1)), "DictKey(key=('a', 1))", "[('a', 1)]"),
    (DictKey(None), "DictKey(key=None)", "[None]"),
    (GetAttrKey("name"), "GetAttrKey(name='name')", ".name"),
    (FlattenedIndexKey(2), "FlattenedIndexKey(key=2)", "[<flat index 2>]"),
]


@pytest.mark.parametrize(("entry", "text", "string"), ENTRIES, ids=lambda x: repr(x))
def test_repr_and_str(entry: Any, text: str, string: str) -> None:
    assert repr(entry) == text
    assert str(entry) == string


@pytest.mark.parametrize(("entry", "text", "string"), ENTRIES, ids=lambda x: repr(x))
def test_frozen_hashable_and_picklable(entry: Any, text: str, string: str) -> None:
    field = dataclasses.fields(entry)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(entry, field, 0)
    copy = type(entry)(getattr(entry, field))
    assert copy == entry and hash(copy) == hash(entry)
    assert pickle.loads(pickle.dumps(entry)) == entry
    assert len({entry, copy}) == 1


def test_entries_of_different_kinds_differ() -> None:
    assert DictKey(0) != SequenceKey(0) != FlattenedIndexKey(0)
    assert DictKey("a") != GetAttrKey("a")
    assert SequenceKey(0) != SequenceKey(1)


@pytest.mark.parametrize("value", [0, 1, 7, 255])
def test_entries_of_different_kinds_hash_apart(value: int) -> None:
    # As jax's: a path through [1] and one through ['1'] or <flat index 1> do not collide.
    hashes = {hash(SequenceKey(value)), hash(FlattenedIndexKey(value)), hash(DictKey(value))}
    assert len(hashes) == 3
    assert len({SequenceKey(value), FlattenedIndexKey(value), DictKey(value)}) == 3


def test_get() -> None:
    class Obj:
        w = 3

    assert SequenceKey(1).get(["a", "b"]) == "b"
    assert SequenceKey(0).get((5,)) == 5
    assert DictKey("w").get({"w": 1}) == 1
    assert GetAttrKey("w").get(Obj()) == 3
    assert not hasattr(FlattenedIndexKey(0), "get")


KEYSTRS = [
    ((), {}, ""),
    ((), {"simple": True, "separator": "/"}, ""),
    ((DictKey("layers"), SequenceKey(1), GetAttrKey("w")), {}, "['layers'][1].w"),
    ((DictKey("layers"), SequenceKey(1), GetAttrKey("w")), {"simple": True}, "layers1w"),
    ((DictKey("layers"), SequenceKey(1), GetAttrKey("w")), {"simple": True, "separator": "/"}, "layers/1/w"),
    ((DictKey("a"), FlattenedIndexKey(2)), {}, "['a'][<flat index 2>]"),
    ((DictKey("a"), FlattenedIndexKey(2)), {"simple": True, "separator": "."}, "a.2"),
    ((DictKey(None), DictKey(1.5), DictKey("a b")), {}, "[None][1.5]['a b']"),
    ((DictKey(None), DictKey(1.5)), {"simple": True, "separator": "."}, "None.1.5"),
    ((SequenceKey(0),), {"separator": "/"}, "[0]"),
    ((SequenceKey(0), SequenceKey(1)), {"separator": "/"}, "[0]/[1]"),
]


@pytest.mark.parametrize(("path", "kwargs", "expected"), KEYSTRS)
def test_keystr(path: tuple[Any, ...], kwargs: dict[str, Any], expected: str) -> None:
    assert keystr(path, **kwargs) == expected


@pytest.mark.parametrize(("path", "kwargs", "expected"), KEYSTRS)
def test_keystr_matches_jax(path: tuple[Any, ...], kwargs: dict[str, Any], expected: str) -> None:
    jtu = pytest.importorskip("jax.tree_util")
    to_jax = {
        SequenceKey: lambda e: jtu.SequenceKey(e.idx),
        DictKey: lambda e: jtu.DictKey(e.key),
        GetAttrKey: lambda e: jtu.GetAttrKey(e.name),
        FlattenedIndexKey: lambda e: jtu.FlattenedIndexKey(e.key),
    }
    assert jtu.keystr(tuple(to_jax[type(e)](e) for e in path), **kwargs) == expected


@pytest.mark.parametrize(("entry", "text", "string"), ENTRIES, ids=lambda x: repr(x))
def test_repr_and_str_match_jax(entry: Any, text: str, string: str) -> None:
    jtu = pytest.importorskip("jax.tree_util")
    field = dataclasses.fields(entry)[0].name
    theirs = getattr(jtu, type(entry).__name__)(getattr(entry, field))
    assert (repr(theirs), str(theirs)) == (text, string)


JAX_TWINS = [
    SequenceKey(0),
    SequenceKey(3),
    SequenceKey(-1),
    FlattenedIndexKey(0),
    FlattenedIndexKey(5),
    DictKey("a"),
    DictKey(1),
    DictKey(None),
    DictKey(("a", 1)),
    GetAttrKey("w"),
]


@pytest.mark.parametrize("entry", JAX_TWINS, ids=repr)
def test_entries_equal_and_hash_as_jax_entries(entry: Any) -> None:
    jtu = pytest.importorskip("jax.tree_util")
    field = dataclasses.fields(entry)[0].name
    theirs = getattr(jtu, type(entry).__name__)(getattr(entry, field))
    assert entry == theirs and not entry != theirs
    assert hash(entry) == hash(theirs)
    assert entry != getattr(jtu, type(entry).__name__)("x" if field == "name" else 99)


def test_paths_of_both_libraries_find_each_other() -> None:
    jtu = pytest.importorskip("jax.tree_util")
    tree = {"layers": [{"w": 1, "b": 2}], "step": 3}
    ours = dict(tree_leaves_with_path(tree))
    # jax's key paths look up entries keyed by treekit's paths, and land in the same set slots.
    for path, leaf in jtu.tree_leaves_with_path(tree):
        assert ours[path] == leaf
    assert len(set(ours) | {path for path, _ in jtu.tree_leaves_with_path(tree)}) == 3


def test_jax_keys_do_not_equal_treekit_keys() -> None:
    # docs/migration.md "Key entries equal JAX's, one way": JAX's __eq__ answers False for
    # other classes (not NotImplemented), and treekit does not patch it.
    jtu = pytest.importorskip("jax.tree_util")
    assert (jtu.DictKey("a") == DictKey("a")) is False
    assert {(jtu.DictKey("a"),): 1}.get((DictKey("a"),)) is None


def test_jax_keys_of_another_class_are_not_equal() -> None:
    jtu = pytest.importorskip("jax.tree_util")
    assert SequenceKey(1) != jtu.DictKey(1)
    assert DictKey("a") != jtu.GetAttrKey("a")
    assert FlattenedIndexKey(1) != jtu.SequenceKey(1)


class Slot:
    """A user key entry: a ``str``, a hash and ``get``."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __str__(self) -> str:
        return f"<slot {self.n}>"

    def __hash__(self) -> int:
        return hash(self.n)

    def get(self, parent: Any) -> Any:
        return parent.slots[self.n]


def test_user_keys() -> None:
    assert isinstance(Slot(0), UserKey)
    assert not isinstance(object(), UserKey)
    assert keystr((DictKey("a"), Slot(1))) == "['a']<slot 1>"
    assert keystr((Slot(1), SequenceKey(0)), simple=True, separator="/") == "<slot 1>/0"


@pytest.mark.parametrize(
    ("cls", "field"),
    [(SequenceKey, "idx"), (DictKey, "key"), (GetAttrKey, "name"), (FlattenedIndexKey, "key")],
)
def test_key_classes_have_their_dataclass_signature(cls: type, field: str) -> None:
    # help(), IDEs and Sphinx read it; under the native core the class's __init__ is in C
    # (Python 3.13's inspect cannot bind it to the class: the signature says the fields).
    signature = inspect.signature(cls)
    assert list(signature.parameters) == [field]
    assert signature.parameters[field].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert signature.bind(1).arguments == {field: 1}
    assert f"{cls.__name__}({field}:" in pydoc.render_doc(cls, renderer=pydoc.plaintext)


class _Tagged(GetAttrKey):
    """A subclass: called as any class is (the C call is the exact class's only)."""


@pytest.mark.parametrize(("cls", "field"), [(SequenceKey, "idx"), (DictKey, "key"), (GetAttrKey, "name"),
                                            (FlattenedIndexKey, "key")])  # fmt: skip
def test_key_classes_called_in_c_behave_as_the_dataclasses(cls: type, field: str) -> None:
    # (the native core makes cls(v) and cls(field=v) itself, through the class's tp_vectorcall)
    value = "w" if cls in (DictKey, GetAttrKey) else 3
    for entry in (cls(value), cls(**{field: value})):
        assert type(entry) is cls and getattr(entry, field) == value
        assert pickle.loads(pickle.dumps(entry)) == entry and hash(entry) == hash(cls(value))
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(entry, field, value)
    with pytest.raises(TypeError, match="missing 1 required positional argument"):
        cls()
    with pytest.raises(TypeError, match="takes 2 positional arguments but 3 were given"):
        cls(value, value)
    with pytest.raises(TypeError, match="unexpected keyword argument 'other'"):
        cls(other=value)


def test_a_subclass_and_a_replaced_init_are_called_as_any_class_is() -> None:
    tagged = _Tagged("w")
    assert type(tagged) is _Tagged and tagged.name == "w" and pickle.loads(pickle.dumps(tagged)) == tagged
    calls = []
    mine = GetAttrKey.__init__

    def init(self: Any, name: str) -> None:
        calls.append(name)
        mine(self, name)

    GetAttrKey.__init__ = init  # type: ignore[method-assign]
    try:
        assert GetAttrKey("w").name == "w" and calls == ["w"]
    finally:
        GetAttrKey.__init__ = mine  # type: ignore[method-assign]
    assert GetAttrKey("v").name == "v" and calls == ["w"]

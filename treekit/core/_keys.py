"""Key entries and key paths: how a leaf is reached from the root of a tree."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Union, runtime_checkable

from treekit.core._core import NATIVE

__all__ = [
    "DictKey",
    "FlattenedIndexKey",
    "GetAttrKey",
    "KeyEntry",
    "KeyPath",
    "SequenceKey",
    "UserKey",
    "keystr",
]


# Equality and hashes match jax.tree_util's key classes (jaxlib's pytree.cc: a SequenceKey
# hashes as idx + 1, a FlattenedIndexKey as key + 42, the others as their value), so key paths
# from both libraries find each other in dicts and sets, and each class hashes apart from the
# others. JAX's classes are recognised by their module, without importing jax.
def _is_jax(other: object, name: str) -> bool:
    cls = type(other)
    return cls.__name__ == name and cls.__module__.startswith(("jaxlib.", "jax."))


def _same(a: Any, b: Any) -> bool:
    return a is b or bool(a == b)


@dataclass(frozen=True, slots=True)
class SequenceKey:
    """Position ``idx`` in a list, tuple or other sequence node.

    >>> SequenceKey(0), str(SequenceKey(0)), SequenceKey(1).get(['a', 'b'])
    (SequenceKey(idx=0), '[0]', 'b')
    """

    idx: int

    def __eq__(self, other: object) -> bool:
        if type(other) is type(self) or _is_jax(other, "SequenceKey"):
            return _same(self.idx, other.idx)  # type: ignore[attr-defined]
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.idx + 1)

    def __str__(self) -> str:
        return f"[{self.idx}]"

    def get(self, parent: Any) -> Any:
        """Return ``parent[idx]``."""
        return parent[self.idx]


@dataclass(frozen=True, slots=True)
class DictKey:
    """Key ``key`` of a dict-like node.

    >>> DictKey('w'), str(DictKey('w')), DictKey('w').get({'w': 1})
    (DictKey(key='w'), "['w']", 1)
    """

    key: Hashable

    def __eq__(self, other: object) -> bool:
        if type(other) is type(self) or _is_jax(other, "DictKey"):
            return _same(self.key, other.key)  # type: ignore[attr-defined]
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.key)

    def __str__(self) -> str:
        return f"[{self.key!r}]"

    def get(self, parent: Any) -> Any:
        """Return ``parent[key]``."""
        return parent[self.key]


@dataclass(frozen=True, slots=True)
class GetAttrKey:
    """Attribute ``name`` of a namedtuple, dataclass or other object node.

    >>> GetAttrKey('x'), str(GetAttrKey('x'))
    (GetAttrKey(name='x'), '.x')
    """

    name: str

    def __eq__(self, other: object) -> bool:
        if type(other) is type(self) or _is_jax(other, "GetAttrKey"):
            return _same(self.name, other.name)  # type: ignore[attr-defined]
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.name)

    def __str__(self) -> str:
        return f".{self.name}"

    def get(self, parent: Any) -> Any:
        """Return ``getattr(parent, name)``."""
        return getattr(parent, self.name)


@dataclass(frozen=True, slots=True)
class FlattenedIndexKey:
    """Child ``key`` of a node whose registration gives no keys (jax's fallback).

    It has no ``get``: only the node's registration knows its children's order
    (``treekit.tree_get`` handles it).

    >>> FlattenedIndexKey(2), str(FlattenedIndexKey(2))
    (FlattenedIndexKey(key=2), '[<flat index 2>]')
    """

    key: int

    def __eq__(self, other: object) -> bool:
        if type(other) is type(self) or _is_jax(other, "FlattenedIndexKey"):
            return _same(self.key, other.key)  # type: ignore[attr-defined]
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.key + 42)

    def __str__(self) -> str:
        return f"[<flat index {self.key}>]"


if NATIVE is not None and not TYPE_CHECKING:
    # A user's flatten_with_keys function makes an entry per child: each class gets an
    # __init__ in C that stores its field's slot, as the dataclass's own __init__ does (it
    # calls that one for any other call), without its Python frame (docs/performance.md,
    # "Key entries", has its cost).
    # The class's signature stays the dataclass's: inspect.signature (help(), IDEs, Sphinx)
    # reads __signature__ first; on Python 3.13 it cannot bind a C method to the class.
    for _k, _cls in enumerate((SequenceKey, DictKey, GetAttrKey, FlattenedIndexKey)):
        _init = NATIVE.entry_init(_k, _cls)
        if _init is not None:
            _own = inspect.signature(_cls.__init__)
            _cls.__signature__ = _own.replace(parameters=list(_own.parameters.values())[1:])
            _cls.__init__ = _init
            NATIVE.entry_call(_k, _cls)  # (last: calls to the class make its instances in C)


@runtime_checkable
class UserKey(Protocol):
    """What a user-defined key entry provides: a ``str``, a hash and ``get(parent)``.

    Any object with these three works as a key entry in ``flatten_with_keys`` functions;
    :func:`keystr` joins the ``str`` of each entry.

    >>> class ItemKey:
    ...     def __init__(self, name): self.name = name
    ...     def __str__(self): return f'<{self.name}>'
    ...     def __hash__(self): return hash(self.name)
    ...     def get(self, parent): return parent.items[self.name]
    >>> isinstance(ItemKey('w'), UserKey), keystr((DictKey('layer'), ItemKey('w')))
    (True, "['layer']<w>")
    """

    def __str__(self) -> str: ...

    def __hash__(self) -> int: ...

    def get(self, parent: Any) -> Any: ...


KeyEntry = Union[SequenceKey, DictKey, GetAttrKey, FlattenedIndexKey, UserKey]
"""One step of a key path: one of the four built-in entries or a :class:`UserKey`."""

KeyPath = tuple[Any, ...]
"""A tuple of key entries, from the root to a leaf."""


def plain_key(entry: Any) -> Any:
    """The plain key inside a key entry (``DictKey('w')`` -> ``'w'``); the entry itself else."""
    kind = type(entry)
    if kind is DictKey:
        return entry.key
    if kind is SequenceKey:
        return entry.idx
    if kind is GetAttrKey:
        return entry.name
    if kind is FlattenedIndexKey:
        return entry.key
    return entry


def simple_text(entry: Any) -> str:
    if type(entry) is SequenceKey:
        return str(entry.idx)
    if type(entry) is DictKey:
        return str(entry.key)
    if type(entry) is GetAttrKey:
        return entry.name
    if type(entry) is FlattenedIndexKey:
        return str(entry.key)
    return str(entry)


def keystr(keys: KeyPath, *, simple: bool = False, separator: str = "") -> str:
    """Join the ``str`` of each entry of a key path, exactly as ``jax.tree_util.keystr``.

    >>> path = (DictKey('layers'), SequenceKey(1), GetAttrKey('w'))
    >>> keystr(path)
    "['layers'][1].w"
    >>> keystr(path, simple=True, separator='/')
    'layers/1/w'

    Args:
        keys: A key path (a tuple of key entries or anything with a ``str``).
        simple: Use the bare key values (``layers``, ``1``, ``w``); shorter but ambiguous
            (``0`` may be a list index or the dict key ``0`` or ``'0'``).
        separator: Put between the entries' strings.

    Returns:
        The joined string; ``''`` for the empty path (the root).

    Raises:
        TypeError: If ``separator`` is not a string.
    """
    if not isinstance(separator, str):
        raise TypeError(f"keystr: separator: expected str, got {type(separator).__name__}")
    return separator.join(map(simple_text if simple else str, keys))


_pure_keystr = keystr

if NATIVE is not None and not TYPE_CHECKING:
    # The same function (name, docstring, signature, errors) as a built-in one, whose calls
    # run in C without a Python frame; the function above takes any call whose arguments
    # need checking.
    keystr = NATIVE.keystr_function(_pure_keystr, sys.modules[__name__])

"""Values in a structure record (treekit/checkpoint/_saved.py): plain data as JSON, other data
tagged (``{"tuple": [...]}``, ``{"bytes": "00ff"}``), module-level classes and functions by name
(``{"ref": "module:qualname"}``), found again in the modules already imported: nothing is
imported or unpickled."""

from __future__ import annotations

import sys
from typing import Any

from treekit.core import current_module, printable


class Unsaveable(Exception):
    """A value the record cannot hold (raised inside encoding; turned into a TypeError with its path)."""


class Undefined(ValueError):
    """A class or function the record names that is not defined in this process (the file is
    intact: its module is not imported, or it was the saving script's ``__main__``)."""

    def __init__(self, ref: str) -> None:
        module, name = printable(ref.partition(":")[0]), printable(ref.replace(":", "."))  # (a file's text)
        if module == "__main__":
            how = "it was defined in the script that saved the file: define it in this script too"
        else:
            how = f"import {module} first (load imports nothing)"
        super().__init__(f"{name} is not defined here: {how}, or pass like= (a tree of the same structure)")


def ref(obj: Any) -> str:
    """``module:qualname`` of a class or function that can be found again by that name."""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        raise Unsaveable(f"{type(obj).__name__} {obj!r:.60} (only module-level classes and functions save)")
    if find(f"{module}:{qualname}") is not obj:
        raise Unsaveable(f"{module}.{qualname}, which is not the object that name finds (redefined?)")
    return f"{module}:{qualname}"


def find(ref: str) -> Any:
    """The object ``module:qualname`` names, from an already imported module; ``None`` if none.

    Looked up in the module's and classes' ``__dict__`` alone: no module ``__getattr__`` (which
    may import a module) and no property runs.

    >>> find('collections:OrderedDict') is __import__('collections').OrderedDict
    True
    """
    module, _, qualname = ref.partition(":")
    obj: Any = sys.modules.get(current_module(module))  # (0.2 named modules now moved)
    for part in qualname.split("."):
        try:
            obj = vars(obj).get(part)
        except TypeError:  # (no __dict__: None, or a builtin without one)
            return None
    return obj


_PLAIN = frozenset((str, int, float, bool, type(None)))  # what a record holds as itself (JSON's own)


def encode(value: Any) -> Any:
    """``value`` as JSON: None, bool, int, float and str as themselves, the rest tagged."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is tuple or kind is list:
        return {kind.__name__: [encode(v) for v in value]}
    if kind is dict:
        return {"dict": [[encode(k), encode(v)] for k, v in value.items()]}
    if kind is complex:
        return {"complex": [value.real, value.imag]}
    if kind is bytes:
        return {"bytes": value.hex()}
    if isinstance(value, type) or callable(value):
        return {"ref": ref(value)}
    raise Unsaveable(f"{kind.__name__} {value!r:.60}")


def decode(data: Any) -> Any:
    if not isinstance(data, dict):
        if isinstance(data, list):
            raise ValueError("untagged list")
        return data
    ((tag, body),) = data.items()
    if tag == "tuple":
        return tuple(decode(v) for v in body)
    if tag == "list":
        return [decode(v) for v in body]
    if tag == "dict":
        return {decode(k): decode(v) for k, v in body}
    if tag == "complex":
        return complex(*body)
    if tag == "bytes":
        return bytes.fromhex(body)
    if tag == "ref":
        obj = find(body)
        if obj is None:
            raise Undefined(body)
        if not (isinstance(obj, type) or callable(obj)):  # (what save records by name: nothing else)
            kind = type(obj).__name__
            raise ValueError(f"{printable(body.replace(':', '.'))} is a {kind}: a record names classes and functions")
        return obj
    raise ValueError(f"unknown tag {tag!r}")


def encoded_keys(keys: Any) -> list[Any]:
    """A dict node's keys as a record holds them, each :func:`encode`'d (all plain, as most are: as they are).

    >>> encoded_keys(['a', 1, (2, 3)])
    ['a', 1, {'tuple': [2, 3]}]
    """
    return list(keys) if _PLAIN.issuperset(map(type, keys)) else [encode(k) for k in keys]


def decoded_keys(data: Any) -> Any:
    """A dict node's recorded keys, each :func:`decode`'d (all plain, as most are: the list itself).

    >>> list(decoded_keys(['a', {'tuple': [2, 3]}]))
    ['a', (2, 3)]
    """
    return data if type(data) is list and _PLAIN.issuperset(map(type, data)) else map(decode, data)

"""A file's leaves restored into a template (load's ``like=``): found by key path, every
difference in one error, raw bytes in the template's dtype."""

from __future__ import annotations

from typing import Any, NoReturn

from treekit.checkpoint import _saved
from treekit.checks import SpecWildcard
from treekit.core import KeyPath, StructureMismatchError, dtype_name, flatten, is_key_dtype, keystr

__all__ = ["restore"]


_SHOWN = 20  # differences listed in one error; the rest are counted


def restore(like: Any, flat: dict[str, Any], name: Any) -> Any:
    """``like``'s structure holding the leaves of ``flat`` (found by ``name(key path)``), checked."""
    wanted, treedef, paths = flatten(like, with_path=True)
    assert paths is not None
    out: list[Any] = []
    problems: list[tuple[KeyPath, str, str]] = []
    used = set()
    for path, want in zip(paths, wanted):
        key = name(path)
        if key not in flat:
            where = "no such path in the file" if key == keystr(path) else f"no tensor {key!r} in the file"
            problems.append((path, _what(want), f"nothing ({where})"))
            out.append(None)
            continue
        used.add(key)
        value, problem = _fit(flat[key], want)
        if problem is not None:
            problems.append((path, *problem))
        out.append(value)
    extra = [key for key in flat if key not in used]
    if problems or extra:
        _mismatch(problems, [(key, _what(flat[key])) for key in extra])
    return treedef.unflatten(out)


def _mismatch(problems: list[tuple[KeyPath, str, str]], extra: list[tuple[str, str]]) -> NoReturn:
    """One error for every difference, one a line: like's paths first, then the file's extra ones."""
    lines = [f"file{keystr(path)}: expected {expected}, got {got}" for path, expected, got in problems]
    lines += [f"{_file(key)}: expected nothing (like has no such path), got {got}" for key, got in extra]
    rest = "\n".join(lines[1:_SHOWN]) + (f"\n... and {len(lines) - _SHOWN} more" if len(lines) > _SHOWN else "")
    path, expected, got = problems[0] if problems else ((), f"no leaf at {extra[0][0]}", extra[0][1])
    raise StructureMismatchError("file", path, expected, got, None, rest or None)


def _file(key: str) -> str:
    """How a file's leaf is named in a message: ``file['a'][0]`` by its key path where the file
    records key paths, else ``file: tensor 'a.0'`` by its name (never the two glued)."""
    return f"file{key}" if key.startswith(("[", ".")) else f"file: tensor {key!r}"


def _what(leaf: Any) -> str:
    if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
        return f"an array of shape {tuple(leaf.shape)} and dtype {leaf.dtype}"
    return f"{type(leaf).__name__} {leaf!r:.40}"


def _fit(got: Any, want: Any) -> tuple[Any, tuple[str, str] | None]:
    """The file's leaf ``got`` for ``like``'s leaf ``want``, and what differs (None: nothing)."""
    if got is _saved.TEMPLATE:  # saved without its value (an equinox lambda): like's
        if type(want) is SpecWildcard:
            return want, ("a value from like (the file holds none here)", f"{want!r}, a spec leaf, in like")
        return want, None
    if not (hasattr(want, "shape") and hasattr(want, "dtype")):
        return got, None  # numbers, strings, functions: the file's
    if not (hasattr(got, "shape") and hasattr(got, "dtype")):
        return got, (_what(want), _what(got))
    if tuple(got.shape) != tuple(want.shape):
        return got, (f"shape {tuple(want.shape)}", f"shape {tuple(got.shape)}")
    wanted = dtype_name(want.dtype)
    if dtype_name(got.dtype) != wanted:
        import numpy as np

        target = None if is_key_dtype(wanted) else _saved.dtype_named(wanted)
        if target is not None and got.dtype.kind == "V" and got.dtype.itemsize == target.itemsize:
            return got.view(target), None  # raw bytes (numpy.savez of bfloat16): like's dtype
        if target is None or np.dtype(got.dtype) != target:
            return got, (f"dtype {want.dtype}", f"dtype {got.dtype}")
    return got, None

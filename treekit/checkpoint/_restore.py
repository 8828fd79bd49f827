"""A file's leaves restored into a template (load's ``like=``): found by key path, every
difference in one error, raw bytes in the template's dtype."""

from __future__ import annotations

from typing import Any, NamedTuple, NoReturn

from treekit.checkpoint import _saved
from treekit.checks import SpecWildcard
from treekit.core import KeyPath, StructureMismatchError, dtype_name, flatten, is_key_dtype, keystr

__all__ = ["Partial", "floating_as", "restore"]


_SHOWN = 20  # differences listed in one error; the rest are counted


class Partial(NamedTuple):
    """What ``load(..., like=..., strict=False)`` gives: the tree (``like``'s leaves where the
    file has none), the key paths of ``like`` the file lacks, and the file's leaves ``like``
    has no place for (as PyTorch's ``load_state_dict(strict=False)`` reports them)."""

    tree: Any
    missing: list[str]
    unexpected: list[str]


def restore(like: Any, flat: dict[str, Any], name: Any, strict: bool = True) -> Any:
    """``like``'s structure holding the leaves of ``flat`` (found by ``name(key path)``), checked;
    each array cast to ``like``'s dtype where its values fit. ``strict=False``: a :class:`Partial`."""
    wanted, treedef, paths = flatten(like, with_path=True)
    assert paths is not None
    out: list[Any] = []
    problems: list[tuple[KeyPath, str, str]] = []
    missing, used = [], set()
    for path, want in zip(paths, wanted):
        key = name(path)
        if key not in flat:
            missing.append(keystr(path))
            if strict:
                where = "no such path in the file" if key == keystr(path) else f"no tensor {key!r} in the file"
                problems.append((path, _what(want), f"nothing ({where})"))
            out.append(want)
            continue
        used.add(key)
        value, problem = _fit(flat[key], want)
        if problem is not None:
            problems.append((path, *problem))
        out.append(value)
    extra = [key for key in flat if key not in used]
    if problems or (extra and strict):
        _mismatch(problems, [(key, _what(flat[key])) for key in extra] if strict else [])
    return treedef.unflatten(out) if strict else Partial(treedef.unflatten(out), missing, extra)


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
            cast = None if target is None or is_key_dtype(dtype_name(got.dtype)) else _cast(got, target)
            if cast is None:
                why = "" if target is None else f" (values {np.dtype(target).name} cannot hold)"
                return got, (f"dtype {want.dtype}", f"dtype {got.dtype}{why}")
            return cast, None
    return got, None


def _floating(dtype: Any) -> bool:
    return dtype.kind == "f" or dtype_name(dtype).startswith(("bfloat16", "float8"))  # (ml_dtypes: kind 'V')


def _cast(got: Any, target: Any) -> Any:
    """``got`` in dtype ``target`` if its values fit there, else ``None``: integers within the
    target's range, floats (and integers into floats) whose finite values stay finite; never
    floats into integers. Precision may round, as any cast to a narrower float does."""
    import numpy as np

    a = np.asarray(got)
    source = a.dtype
    if not (source.kind in "biu" or _floating(source)) or not (target.kind in "biu" or _floating(target)):
        return None
    if np.can_cast(source, target, "safe"):
        return a.astype(target)
    if source.kind in "biu" and target.kind in "biu":
        info: Any = (0, 1) if target.kind == "b" else (np.iinfo(target).min, np.iinfo(target).max)
        return a.astype(target) if a.size == 0 or (info[0] <= a.min() and a.max() <= info[1]) else None
    if _floating(target):
        with np.errstate(over="ignore"):  # (an overflow is what the check below finds)
            out = a.astype(target)
        return out if np.array_equal(np.isfinite(a), np.isfinite(out)) else None
    return None


def floating_as(tree: Any, dtype: Any) -> Any:
    """``tree`` with every floating-point array in ``dtype`` (``load``'s ``dtype=``), checked as
    ``like``'s dtypes are: each array's finite values must stay finite.

    >>> import numpy as np
    >>> floating_as({'w': np.ones(2), 'step': np.int64(3)}, np.float32)['w'].dtype
    dtype('float32')

    Raises:
        ValueError: Naming the first array whose values ``dtype`` cannot hold.
    """
    import numpy as np

    target = np.dtype(dtype)
    if not _floating(target):
        raise ValueError(f"dtype: expected a floating-point dtype (float32, bfloat16, ...), got {target}")
    leaves, treedef, paths = flatten(tree, with_path=True)
    assert paths is not None
    out = []
    for path, x in zip(paths, leaves):
        if isinstance(x, np.ndarray) and _floating(x.dtype) and x.dtype != target:
            cast = _cast(x, target)
            if cast is None:
                why = f"expected values {target.name} can hold, got {x.dtype} ones it cannot"
                raise ValueError(f"file{keystr(path)}: {why}")
            x = cast
        out.append(x)
    return treedef.unflatten(out)

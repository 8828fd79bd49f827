"""How two leaves' values differ: shape, dtype, type and value differences, closeness with
NaN matching NaN (typed PRNG keys by their key data), and the element errors put in words."""

from __future__ import annotations

import math
import numbers
import sys
from typing import Any

from treekit.core import dtype_name, is_array, is_key_dtype

__all__ = ["beyond_tolerance", "element_errors", "is_number", "leaf_differences"]


def is_number(x: Any) -> bool:
    return isinstance(x, numbers.Number)


def leaf_differences(
    x: Any, y: Any, shapes: bool, dtypes: bool, values: bool, rtol: float, atol: float,
    scalars: bool = False, of_y: bool = False,
) -> list[tuple[str, Any, Any]]:
    """How leaf ``y`` differs from leaf ``x``: ``(kind, left, right)`` of each :class:`Difference`.

    ``scalars``: a scalar (0-d) against an array compares with each of its elements, as
    ``numpy.testing.assert_array_equal`` does (chex's non-strict asserts); ``of_y``: ``rtol``
    is a fraction of ``|y|``, not of ``|x|`` (``assert_allclose(x, y)``, as chex calls it).
    """
    if scalars and values and _one_scalar(x, y):
        import numpy as np

        x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
        return [] if _close(x, y, rtol, atol, of_y) else [("value", x, y)]
    if is_array(x) and is_array(y):
        out: list[tuple[str, Any, Any]] = []
        same_shape = tuple(x.shape) == tuple(y.shape)
        if not same_shape and (shapes or values):
            out.append(("shape", tuple(x.shape), tuple(y.shape)))
        if dtypes and dtype_name(x.dtype) != dtype_name(y.dtype):
            out.append(("dtype", dtype_name(x.dtype), dtype_name(y.dtype)))
        if values and same_shape and not _close(x, y, rtol, atol, of_y):
            out.append(("value", x, y))
        return out
    if dtypes and (is_array(x) or is_array(y) or type(x) is not type(y)):
        return [("type", x, y)]
    if not values:
        return []
    if (is_array(x) or is_number(x)) and (is_array(y) or is_number(y)):
        import numpy as np

        if np.shape(x) != np.shape(y):
            return [("shape", np.shape(x), np.shape(y))]
        return [] if _close(x, y, rtol, atol, of_y) else [("value", x, y)]
    return [] if _equal(x, y) else [("value", x, y)]


def _one_scalar(x: Any, y: Any) -> bool:
    """Whether ``x`` and ``y`` are numbers or numeric arrays of other shapes, one of them 0-d."""
    import numpy as np

    if not all((is_array(v) and not is_key_dtype(v.dtype)) or is_number(v) for v in (x, y)):
        return False
    sx, sy = np.shape(x), np.shape(y)
    return bool(sx != sy and (sx == () or sy == ()))


def _equal(x: Any, y: Any) -> bool:
    if x is y:
        return True
    try:
        return bool(x == y)
    except Exception:  # arrays without a truth value, objects whose == raises
        return False


def _numeric(a: Any) -> Any:
    """``a`` as float64 or complex128 (for errors), or ``None`` if it does not convert."""
    import numpy as np

    target = np.complex128 if a.dtype.kind == "c" else np.float64
    try:
        return a.astype(target)
    except (TypeError, ValueError):
        return None


def _unequal_mask(x: Any, y: Any) -> tuple[Any, Any, Any]:
    """(elements that are not equal, NaN matching NaN; a and b as numbers or ``None``)."""
    import numpy as np

    keys = [is_array(v) and is_key_dtype(v.dtype) for v in (x, y)]
    if any(keys):  # typed PRNG keys: equal where their key data is (they have no numbers)
        shape = np.shape(x if keys[0] else y)
        if not all(keys) or np.shape(y) != shape or dtype_name(x.dtype) != dtype_name(y.dtype):
            return np.ones(shape, dtype=bool), None, None
        jax = sys.modules["jax"]  # (a key exists only once jax is imported)
        a, b = (np.asarray(jax.random.key_data(v)).reshape(*shape, -1) for v in (x, y))
        return (a != b).any(axis=-1), None, None
    a, b = np.asarray(x), np.asarray(y)
    af, bf = _numeric(a), _numeric(b)
    try:
        equal = np.asarray(a == b, dtype=bool)
    except (TypeError, ValueError):
        equal = np.zeros(a.shape, dtype=bool)
    if equal.shape != a.shape:  # == gave up elementwise (e.g. str against float)
        equal = np.zeros(a.shape, dtype=bool)
    if af is not None and bf is not None:
        equal |= np.isnan(af) & np.isnan(bf)
    return ~equal, af, bf


def _close(x: Any, y: Any, rtol: float, atol: float, of_y: bool = False) -> bool:
    """Whether ``|y - x| <= atol + rtol * |x|`` everywhere (``|y|`` with ``of_y``), NaN matching NaN."""
    import numpy as np

    unequal, af, bf = _unequal_mask(x, y)
    if not unequal.any():
        return True
    if af is None or bf is None or (rtol == 0 and atol == 0):
        return False
    with np.errstate(invalid="ignore"):
        return not beyond_tolerance(np, af[unequal], bf[unequal], rtol, atol, of_y).any()


def beyond_tolerance(xp: Any, a: Any, b: Any, rtol: float, atol: float, of_y: bool) -> Any:
    """Where ``b`` is neither ``a`` (NaN matching NaN) nor within ``atol + rtol * |a|`` of it
    (``|b|`` with ``of_y``), elementwise with ``xp`` (numpy on the host, ``jax.numpy`` under
    ``chexify``): the one rule of the value asserts. ``a`` and ``b``: numbers of one shape, in
    the float or complex type to compare in."""
    unequal = ~((a == b) | (xp.isnan(a) & xp.isnan(b)))
    if rtol or atol:
        ref, other = (b, a) if of_y else (a, b)
        unequal = unequal & ~xp.isclose(other, ref, rtol=rtol, atol=atol)
    return unequal


def element_errors(x: Any, y: Any, scalar: bool = False) -> tuple[int, int, str | None]:
    """(unequal elements, elements, the largest abs and rel errors in words, or ``None``)."""
    import numpy as np

    unequal, af, bf = _unequal_mask(x, y)
    count, total = int(unequal.sum()), int(unequal.size)
    if af is None or bf is None or not count:
        return count, total, None
    a, b = np.asarray(x), np.asarray(y)
    with np.errstate(divide="ignore", invalid="ignore"):
        abs_error = np.abs(bf[unequal] - af[unequal])
        rel_error = abs_error / np.abs(af[unequal])
    nan = np.isnan(abs_error)
    words = []
    if not nan.all():
        most = "" if scalar else "max "
        rel = rel_error[~nan & ~np.isnan(rel_error)]
        words.append(f"{most}abs error {float(abs_error[~nan].max()):.3g}")
        words.append(f"{most}rel error {float(rel.max()) if rel.size else math.nan:.3g}")
    if nan.any() and not scalar:
        words.append(f"{int(nan.sum())} NaN on one side")
    if scalar:
        return count, total, ", ".join(words) or None
    # chex's information too: which elements (the one farthest apart, or the first), both values, the dtypes
    places = np.argwhere(unequal)
    at = tuple(int(i) for i in places[0 if nan.all() else int(np.nanargmax(abs_error))])
    which = "the first" if nan.all() else "the farthest apart"
    kinds = [dtype_name(a.dtype), dtype_name(b.dtype)]
    where = f"{a[at]!s} in a, {b[at]!s} in b"  # (numpy's shortest form)
    where = f"{which} at [{', '.join(map(str, at))}]: {where}" if at else where  # (a 0-d array: no index)
    dtypes = kinds[0] if kinds[0] == kinds[1] else f"{kinds[0]} in a, {kinds[1]} in b"
    return count, total, "; ".join([", ".join(words), where, dtypes] if words else [where, dtypes])


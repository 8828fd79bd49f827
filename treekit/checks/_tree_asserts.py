"""chex's assertions over several trees: every tree compared with the first, for values (close,
equal), structures, shapes, dtypes or sizes; the first tree that differs raises, listing every
difference by key path (``b`` the tree checked, ``a`` the first)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from treekit.checks._checks import Difference, TreeDiff, diff_trees, report
from treekit.checks._leaf_values import is_number
from treekit.checks._traced import format_custom, traced_checks
from treekit.core import IsLeaf, KeyPath, LeafPaths, describe_leaf, flatten, is_array, is_key_dtype, keystr

__all__ = [
    "assert_trees_all_close",
    "assert_trees_all_close_ulp",
    "assert_trees_all_equal",
    "assert_trees_all_equal_dtypes",
    "assert_trees_all_equal_shapes",
    "assert_trees_all_equal_shapes_and_dtypes",
    "assert_trees_all_equal_sizes",
    "assert_trees_all_equal_structs",
]


def _assert_all(
    trees: tuple[Any, ...], what: str, name: str, compare: Callable[[Any, Any], TreeDiff], tolerance: str = "",
    first: str | None = None, last: str = "",
) -> None:
    """chex's comparison of ``trees[0]`` with each later tree; the first that differs raises
    (``first`` and ``last``: lines the message starts and ends with)."""
    __tracebackhide__ = True
    if len(trees) < 2:
        raise ValueError(f"{name}: expected at least 2 trees, got {len(trees)}")
    for i, tree in enumerate(trees[1:], start=1):
        diff = compare(trees[0], tree)
        if diff:
            header = (f"b {what} a" if len(trees) == 2 else f"tree {i} (b) {what} tree 0 (a)") + tolerance
            raise AssertionError((f"{first}\n" if first else "") + report(header, diff) + last)


def _per_leaf(a: Any, b: Any, shapes: bool, problem: Callable[[KeyPath, Any, Any], tuple[str, str] | None]) -> TreeDiff:
    """``b``'s differences from ``a`` in structure (and shapes), or else ``problem(path, x,
    y)``'s ``(expected, got)`` for each pair of leaves it finds one in."""
    diff = diff_trees(a, b, shapes, False, False, 0.0, 0.0, None)
    if diff:
        return diff
    leaves, treedef, _ = flatten(a)
    paths = LeafPaths(a, treedef)  # (made only for the leaves that differ)
    for k, (x, y) in enumerate(zip(leaves, flatten(b)[0])):
        if (found := problem(paths[k], x, y)) is not None:
            diff.append(Difference(paths[k], "node", *found))
    return diff


def _custom(message: str | None, format_vars: Sequence[Any]) -> str | None:
    """chex's ``custom_message``, formatted with ``custom_message_format_vars``: the error's first line."""
    return format_custom(message, format_vars) if message else None


def assert_trees_all_close(
    *trees: Any,
    rtol: float = 1e-6,
    atol: float = 0.0,
    strict: bool = False,
    is_leaf: IsLeaf | None = None,
    custom_message: str | None = None,
    custom_message_format_vars: Sequence[Any] = (),
) -> None:
    """Assert every tree has the first's structure and values within tolerance (chex's).

    Each leaf ``x`` of ``trees[0]`` and ``y`` of a later tree must satisfy
    ``|x - y| <= atol + rtol * |y|`` elementwise (``numpy.testing.assert_allclose(x, y)``, as
    chex; NaN equals NaN). As chex's, by default a scalar matches an array of equal values and
    dtypes are not compared; ``strict=True`` compares shapes and dtypes too.

    >>> import numpy as np
    >>> assert_trees_all_close({'w': np.ones(3)}, {'w': np.ones(3) + 1e-9}, {'w': np.ones(3)})
    >>> assert_trees_all_close({'w': np.ones(4), 'b': 0.5}, {'w': np.array([1, 1.5, 1, 3]), 'b': 0.5})
    Traceback (most recent call last):
    ...
    AssertionError: b is not close to a (rtol=1e-06, atol=0.0): 1 difference
    b['w']: expected the values of a['w'], got 2 of 4 different (max abs error 2, max rel error 2; the farthest apart
    at [3]: 1.0 in a, 3.0 in b; float64)

    Args:
        *trees: Two or more trees; each is compared with the first.
        rtol: Relative tolerance, a fraction of the later tree's ``|y|`` (chex's default).
        atol: Absolute tolerance.
        strict: Shapes and dtypes must match exactly (chex's ``strict``).
        is_leaf: As in :func:`tree_diff`.
        custom_message: A first line for the error (``str.format``-ted with
            ``custom_message_format_vars``), as chex's.
        custom_message_format_vars: The arguments of that ``format``.

    Raises:
        AssertionError: Listing every difference (structure, shapes, values) between the first
            tree and the first later tree that differs, one per line, with the largest absolute
            and relative error of each leaf.
        ValueError: Given fewer than 2 trees.
    """
    __tracebackhide__ = True
    custom = _custom(custom_message, custom_message_format_vars)
    checks = traced_checks(trees, "assert_trees_all_close", custom_message, custom_message_format_vars, is_leaf)

    def compare(a: Any, b: Any) -> TreeDiff:
        return diff_trees(a, b, strict, strict, True, rtol, atol, is_leaf, scalars=not strict, of_y=True, checks=checks)

    numbers = [j for j, t in enumerate(trees) if j >= 2 and is_number(t)]  # (rtol and atol were positional once)
    hint = "" if not numbers or is_number(trees[0]) else (
        "\nassert_trees_all_close takes rtol and atol as keywords (as chex's); every positional argument is a "
        f"tree: got {trees[numbers[0]]!r} as tree {numbers[0]}")
    _assert_all(trees, "is not close to", "assert_trees_all_close", compare, f" (rtol={rtol}, atol={atol})",
                custom, hint)


def assert_trees_all_equal(
    *trees: Any,
    strict: bool = False,
    is_leaf: IsLeaf | None = None,
    custom_message: str | None = None,
    custom_message_format_vars: Sequence[Any] = (),
) -> None:
    """Assert every tree equals the first: structure and values (chex's); with ``strict=True``,
    shapes and dtypes (types for non-arrays) too.

    As chex's, by default ``1`` equals ``1.0`` and a scalar equals an array of that value;
    NaN equals NaN.

    >>> import numpy as np
    >>> assert_trees_all_equal([np.arange(3), 'relu'], [np.arange(3.0), 'relu'])
    >>> assert_trees_all_equal([np.arange(3), 'relu'], [np.arange(3.0), 'gelu'], strict=True)
    Traceback (most recent call last):
    ...
    AssertionError: b is not equal to a: 2 differences
    b[0]: expected dtype int64, got dtype float64
    b[1]: expected 'relu', got 'gelu'

    Args:
        *trees: Two or more trees; each is compared with the first.
        strict: Shapes and dtypes (and the types of non-array leaves) must match too.
        is_leaf: As in :func:`tree_diff`.
        custom_message: A first line for the error, as in :func:`assert_trees_all_close`.
        custom_message_format_vars: The arguments of its ``format``.

    Raises:
        AssertionError: Listing every difference between the first tree and the first later
            tree that differs, one per line.
        ValueError: Given fewer than 2 trees.
    """
    __tracebackhide__ = True
    custom = _custom(custom_message, custom_message_format_vars)
    checks = traced_checks(trees, "assert_trees_all_equal", custom_message, custom_message_format_vars, is_leaf)

    def compare(a: Any, b: Any) -> TreeDiff:
        return diff_trees(a, b, strict, strict, True, 0.0, 0.0, is_leaf, scalars=not strict, of_y=True, checks=checks)

    _assert_all(trees, "is not equal to", "assert_trees_all_equal", compare, "", custom)


def assert_trees_all_equal_structs(*trees: Any) -> None:
    """Assert every tree has the first's structure (chex's ``assert_trees_all_equal_structs``).

    >>> import numpy as np
    >>> assert_trees_all_equal_structs({'w': 1, 'b': [2]}, {'w': 'x', 'b': [np.zeros(3)]})
    >>> assert_trees_all_equal_structs({'w': 1}, {'w': 1, 'b': 2})
    Traceback (most recent call last):
    ...
    AssertionError: b does not have the structure of a: 1 difference
    b['b']: expected no such key, got 2

    Args:
        *trees: Two or more trees.

    Raises:
        AssertionError: Naming every place the first tree that differs does.
        ValueError: Given fewer than 2 trees.
    """
    __tracebackhide__ = True
    _assert_all(trees, "does not have the structure of", "assert_trees_all_equal_structs",
                lambda a, b: diff_trees(a, b, False, False, False, 0.0, 0.0, None))


def assert_trees_all_equal_shapes(*trees: Any) -> None:
    """Assert every tree has the first's structure and leaf shapes (chex's).

    >>> import numpy as np
    >>> assert_trees_all_equal_shapes([np.zeros((2, 3))], [np.ones((2, 3), np.int8)])

    Args:
        *trees: Two or more trees of arrays.

    Raises:
        AssertionError: Naming every leaf whose shape differs (and every structure difference).
        ValueError: Given fewer than 2 trees.
    """
    __tracebackhide__ = True
    _assert_all(trees, "does not have the shapes of", "assert_trees_all_equal_shapes",
                lambda a, b: diff_trees(a, b, True, False, False, 0.0, 0.0, None))


def assert_trees_all_equal_dtypes(*trees: Any) -> None:
    """Assert every tree has the first's structure and leaf dtypes (chex's).

    >>> import numpy as np
    >>> assert_trees_all_equal_dtypes([np.zeros(2, np.float32)], [np.ones(5, np.float32)])

    Args:
        *trees: Two or more trees of arrays.

    Raises:
        AssertionError: Naming every leaf whose dtype differs (and every structure difference).
        ValueError: Given fewer than 2 trees.
    """
    __tracebackhide__ = True
    _assert_all(trees, "does not have the dtypes of", "assert_trees_all_equal_dtypes",
                lambda a, b: diff_trees(a, b, False, True, False, 0.0, 0.0, None))


def assert_trees_all_equal_shapes_and_dtypes(*trees: Any) -> None:
    """Assert every tree has the first's structure, leaf shapes and dtypes (chex's).

    >>> import numpy as np
    >>> assert_trees_all_equal_shapes_and_dtypes({'w': np.zeros(2)}, {'w': np.ones(2)})

    Args:
        *trees: Two or more trees of arrays.

    Raises:
        AssertionError: Naming every leaf whose shape or dtype differs.
        ValueError: Given fewer than 2 trees.
    """
    __tracebackhide__ = True
    _assert_all(trees, "does not have the shapes and dtypes of", "assert_trees_all_equal_shapes_and_dtypes",
                lambda a, b: diff_trees(a, b, True, True, False, 0.0, 0.0, None))


def assert_trees_all_equal_sizes(*trees: Any) -> None:
    """Assert every tree has the first's structure and leaf sizes (chex's): shapes may differ
    where the number of entries does not.

    >>> import numpy as np
    >>> assert_trees_all_equal_sizes([np.zeros((2, 3))], [np.zeros(6)])

    Args:
        *trees: Two or more trees of arrays.

    Raises:
        AssertionError: Naming every leaf whose size differs.
        ValueError: Given fewer than 2 trees.
    """
    __tracebackhide__ = True

    def problem(path: KeyPath, x: Any, y: Any) -> tuple[str, str] | None:
        if _size(x) == _size(y):
            return None
        return f"size {_size(x)} ({describe_leaf(x)})", f"size {_size(y)} ({describe_leaf(y)})"

    _assert_all(trees, "does not have the sizes of", "assert_trees_all_equal_sizes",
                lambda a, b: _per_leaf(a, b, False, problem))


def _size(x: Any) -> int:
    import numpy as np

    return int(np.prod(x.shape)) if is_array(x) else int(np.size(x))


def assert_trees_all_close_ulp(*trees: Any, maxulp: int = 1) -> None:
    """Assert every tree has the first's structure and shapes, and float values at most
    ``maxulp`` units in the last place apart (chex's ``assert_trees_all_close_ulp``: numpy's
    ``assert_array_max_ulp``, and chex's count for ``bfloat16``).

    >>> import numpy as np
    >>> one = np.float32(1)
    >>> assert_trees_all_close_ulp({'w': np.array([one])}, {'w': np.array([np.nextafter(one, np.float32(2))])})
    >>> assert_trees_all_close_ulp({'w': np.array([one])}, {'w': np.array([one + 1e-6])})
    Traceback (most recent call last):
    ...
    AssertionError: b is not within 1 ULP of a: 1 difference
    b['w']: expected values at most 1 ULP from a['w'], got values 8 ULP apart

    Args:
        *trees: Two or more trees of float arrays.
        maxulp: The most units in the last place two values may differ by.

    Raises:
        AssertionError: Naming every leaf whose values differ by more (and every structure or
            shape difference).
        ValueError: Given fewer than 2 trees.
    """
    __tracebackhide__ = True
    checks = traced_checks(trees, "assert_trees_all_close_ulp")

    def problem(path: KeyPath, x: Any, y: Any) -> tuple[str, str] | None:
        if any(is_array(v) and is_key_dtype(v.dtype) for v in (x, y)):
            raise TypeError(f"assert_trees_all_close_ulp: b{keystr(path)}: expected float arrays, got typed PRNG "
                            "keys, which have no ULPs (compare them with assert_trees_all_equal)")
        if checks is not None and checks.traced(x, y):
            checks.ulps(path, x, y, maxulp)
            return None
        apart = _ulps_apart(x, y)
        if apart <= maxulp:
            return None
        return f"values at most {maxulp} ULP from a{keystr(path)}", f"values {apart:g} ULP apart"

    _assert_all(trees, f"is not within {maxulp} ULP of", "assert_trees_all_close_ulp",
                lambda a, b: _per_leaf(a, b, True, problem))


def _ulps_apart(x: Any, y: Any) -> float:
    """The most units in the last place between ``x``'s and ``y``'s values (as numpy's
    ``nulp_diff`` and chex count them: the bits as signed ints, made monotonic)."""
    import numpy as np

    a, b = np.asarray(x), np.asarray(y)
    if str(getattr(x, "dtype", "")) == "bfloat16":
        kind: Any = a.dtype
    else:
        kind = np.result_type(a, b)
        if kind.kind not in "fc":
            return 0.0 if np.array_equal(a, b) else math.inf
        if kind.kind == "c":  # the real and imaginary parts, each
            return max(_ulps_apart(a.real, b.real), _ulps_apart(a.imag, b.imag))
        a, b = a.astype(kind), b.astype(kind)
    both_nan = np.isnan(a.astype(np.float64)) & np.isnan(b.astype(np.float64))
    bits: Any = {2: np.int16, 4: np.int32, 8: np.int64}[kind.itemsize]
    least = np.array(np.iinfo(bits).min, bits)
    ra, rb = (np.where(r < 0, least - r, r).astype(np.float64) for r in (a.view(bits), b.view(bits)))
    apart = np.where(both_nan, 0.0, np.abs(ra - rb))
    return float(apart.max(initial=0.0))

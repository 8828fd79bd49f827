"""Leaf-by-leaf assertions for test suites (chex's names): finite values, no None, arrays only,
shapes, shape prefixes and suffixes, ranks.

Each lists every leaf that fails, one line per key path in the error format
(``tree['w']: expected <what>, got <what>``), and raises an ``AssertionError`` from a frame
that pytest hides (``__tracebackhide__``), so a failing test shows the test's line and the
message, not treekit's source.
"""

from __future__ import annotations

import cmath
import numbers
import sys
from collections.abc import Sequence
from typing import Any

from treekit.checks._traced import traced_checks
from treekit.core import (
    IsLeaf,
    LeafPaths,
    describe_leaf,
    flatten,
    format_message,
    is_array,
    is_inexact_dtype,
)
from treekit.ops import leaf_stats

__all__ = [
    "assert_rank", "assert_shape", "assert_tree_all_finite", "assert_tree_has_only_ndarrays", "assert_tree_no_nones",
    "assert_tree_shape", "assert_tree_shape_prefix", "assert_tree_shape_suffix",
]


def _fail(header: str, lines: list[str]) -> None:
    __tracebackhide__ = True
    n = len(lines)
    raise AssertionError(f"{header}: {n} {'leaf' if n == 1 else 'leaves'}\n" + "\n".join(lines))


def _with_paths(tree: Any, is_leaf: IsLeaf | None) -> tuple[list[Any], LeafPaths]:
    """The leaves, and their key paths made for those that fail (all of them cost depth squared)."""
    leaves, treedef, _ = flatten(tree, is_leaf)
    return leaves, LeafPaths(tree, treedef)


def assert_tree_all_finite(tree: Any, *, is_leaf: IsLeaf | None = None) -> None:
    """Assert every number in ``tree`` is finite (no NaN, no inf), naming each leaf that is not.

    Numeric arrays and numbers are checked; other leaves (strings, ``None`` under
    ``is_leaf``, ...) are not numbers and pass. Like chex's ``assert_tree_all_finite``.

    >>> import numpy as np
    >>> assert_tree_all_finite({'w': np.ones(3), 'name': 'mlp'})
    >>> assert_tree_all_finite({'w': np.array([1.0, np.nan, np.inf]), 'b': np.zeros(2), 'lr': float('inf')})
    Traceback (most recent call last):
    ...
    AssertionError: tree is not all finite: 2 leaves
    tree['lr']: expected a finite number, got inf
    tree['w']: expected finite values, got 2 of 3 not finite (1 NaN, 1 inf)

    Args:
        tree: Any pytree.
        is_leaf: As in :func:`treekit.tree_flatten`.

    Raises:
        AssertionError: Listing every leaf holding NaN or inf.
        TypeError: If an array has no values to read here (a tracer under ``jit`` outside
            :func:`chexify`, a ``ShapeDtypeStruct``, a deleted array, an array other processes
            hold part of), naming each.
    """
    __tracebackhide__ = True
    lines: dict[int, str] = {}
    leaves, paths = _with_paths(tree, is_leaf)
    checks = traced_checks((tree,), "assert_tree_all_finite", is_leaf=is_leaf)
    arrays = []  # bool and int arrays are always finite
    for i, x in enumerate(leaves):
        if is_array(x):
            if not is_inexact_dtype(x.dtype):
                continue
            if checks is not None and checks.traced(x):
                checks.finite(paths[i], x)
            else:
                arrays.append(i)
        # ints are always finite (and may be too big for a complex)
        elif isinstance(x, numbers.Complex) and not isinstance(x, numbers.Integral) and not cmath.isfinite(x):
            lines[i] = format_message("tree", paths[i], "a finite number", repr(x), None, None)
    # (read where the arrays live, together: see treekit.ops.leaf_stats)
    unread = []
    for i, stats in zip(arrays, leaf_stats([leaves[i] for i in arrays])):
        if stats is None:
            why = "a tracer, an abstract or deleted array, or one other processes hold part of"
            got = f"{describe_leaf(leaves[i])} with no values to read here ({why})"
            unread.append(format_message("tree", paths[i], "an array of values", got, None, None))
        elif stats.nans + stats.infs:
            parts = [f"{stats.nans} NaN"] if stats.nans else []
            parts += [f"{stats.infs} inf"] if stats.infs else []
            got = f"{stats.nans + stats.infs} of {leaves[i].size} not finite"
            lines[i] = format_message("tree", paths[i], "finite values", got, ", ".join(parts), None)
    if unread:
        raise TypeError("assert_tree_all_finite reads values:\n" + "\n".join(unread))
    if lines:
        _fail("tree is not all finite", [lines[i] for i in sorted(lines)])


def assert_tree_no_nones(tree: Any) -> None:
    """Assert ``tree`` holds no ``None`` (a node without leaves, so easily missed), naming each.

    Like chex's ``assert_tree_no_nones``.

    >>> assert_tree_no_nones({'w': 1.0, 'layers': [2.0]})
    >>> assert_tree_no_nones({'w': 1.0, 'b': None, 'layers': [None, 2.0]})
    Traceback (most recent call last):
    ...
    AssertionError: tree holds None: 2 leaves
    tree['b']: expected no None, got None
    tree['layers'][0]: expected no None, got None

    Args:
        tree: Any pytree.

    Raises:
        AssertionError: Listing the key path of every ``None``.
    """
    __tracebackhide__ = True
    leaves, paths = _with_paths(tree, lambda x: x is None)
    lines = [format_message("tree", paths[i], "no None", "None", None, None) for i, x in enumerate(leaves) if x is None]
    if lines:
        _fail("tree holds None", lines)


def _dim_text(dim: Any) -> str:
    if dim is Ellipsis:
        return "..."
    if isinstance(dim, (set, frozenset)):
        return "{" + ", ".join(map(str, sorted(dim))) + "}"
    return str(dim)


def _shape_text(shape: Sequence[Any]) -> str:
    dims = [_dim_text(d) for d in shape]
    return f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(dims)})"  # () for a scalar


def _leaf_text(x: Any) -> str:
    return f"{type(x).__name__} {describe_leaf(x, 40)}"


def _is_dim(d: Any) -> bool:
    return (
        d is None
        or d is Ellipsis
        or (isinstance(d, int) and not isinstance(d, bool))
        or (isinstance(d, (set, frozenset)) and all(isinstance(v, int) for v in d))
    )


def _is_shape(x: Any) -> bool:
    return isinstance(x, (tuple, list)) and all(_is_dim(d) for d in x) and sum(d is Ellipsis for d in x) <= 1


def _shape_of(x: Any) -> tuple[int, ...] | None:
    if is_array(x):
        return tuple(x.shape)
    if isinstance(x, numbers.Number):
        return ()
    return None


def _shape_problem(got: tuple[int, ...], want: Sequence[Any]) -> str | None:
    """Why ``got`` is not ``want`` (``None``: any size; ``...``: any number of dims; a set: any of)."""
    if Ellipsis in want:
        cut = list(want).index(Ellipsis)
        head, tail = list(want[:cut]), list(want[cut + 1 :])
        if len(got) < len(head) + len(tail):
            return f"rank {len(got)}, not at least {len(head) + len(tail)}"
        pairs = list(zip(range(len(head)), got[: len(head)], head))
        offset = len(got) - len(tail)
        pairs += list(zip(range(offset, len(got)), got[offset:], tail))
    else:
        if len(got) != len(want):
            return f"rank {len(got)}, not {len(want)}"
        pairs = list(zip(range(len(got)), got, want))
    words = []
    for axis, size, dim in pairs:
        if dim is None:
            continue
        if isinstance(dim, (set, frozenset)):
            if size not in dim:
                words.append(f"dim {axis} is {size}, not one of {_dim_text(dim)}")
        elif size != dim:
            words.append(f"dim {axis} is {size}, not {dim}")
    return "; ".join(words) or None


def _per_leaf(leaves: list[Any], expected: Any, single: bool, name: str) -> list[Any]:
    if single:
        return [expected] * len(leaves)
    wants = list(expected)
    if len(wants) != len(leaves):
        raise TypeError(f"{name}: expected one per leaf of tree ({len(leaves)}), got {len(wants)}")
    return wants


def assert_shape(tree: Any, expected_shapes: Any, *, is_leaf: IsLeaf | None = None) -> None:
    """Assert the leaves of ``tree`` have the expected shapes (chex's ``assert_shape``, on trees).

    A shape is a tuple or list of dims: an int, ``None`` (any size), a set of ints (any of
    them), and at most one ``...`` (any number of dims). ``expected_shapes`` is one shape, which
    every leaf must have, or a sequence of shapes, one per leaf in leaf order (chex's list of
    inputs). Numbers have shape ``()``. For a tree of shapes by key path, see
    :func:`treekit.assert_tree_shapes`.

    >>> import numpy as np
    >>> batch = {'x': np.zeros((8, 3)), 'y': np.zeros((8, 1))}
    >>> assert_shape(batch, (8, None))
    >>> assert_shape(batch, (..., {1, 3}))
    >>> assert_shape(batch, (8, 3))
    Traceback (most recent call last):
    ...
    AssertionError: tree does not have shape (8, 3): 1 leaf
    tree['y']: expected shape (8, 3), got shape (8, 1) (dim 1 is 1, not 3)

    Args:
        tree: Any pytree of arrays (or numbers).
        expected_shapes: One shape, or a sequence of shapes, one per leaf.
        is_leaf: As in :func:`treekit.tree_flatten`.

    Raises:
        AssertionError: Listing every leaf whose shape differs (or that has no shape).
        TypeError: If ``expected_shapes`` is neither a shape nor a sequence of them, or has
            another length than the leaves.
    """
    __tracebackhide__ = True
    leaves, paths = _with_paths(tree, is_leaf)
    single = _is_shape(expected_shapes)
    if not single and not (isinstance(expected_shapes, (tuple, list)) and all(map(_is_shape, expected_shapes))):
        raise TypeError(
            f"expected_shapes: expected a shape (a tuple of ints, None, sets of ints and one ...) or a "
            f"sequence of them, got {expected_shapes!r:.60}"
        )
    lines = []
    for i, (x, want) in enumerate(zip(leaves, _per_leaf(leaves, expected_shapes, single, "expected_shapes"))):
        got = _shape_of(x)
        expected = f"shape {_shape_text(want)}"
        if got is None:
            lines.append(format_message("tree", paths[i], expected, _leaf_text(x), "no shape", None))
        elif (problem := _shape_problem(got, want)) is not None:
            lines.append(format_message("tree", paths[i], expected, f"shape {_shape_text(got)}", problem, None))
    if lines:
        header = f"have shape {_shape_text(expected_shapes)}" if single else "have the expected shapes"
        _fail(f"tree does not {header}", lines)


def assert_tree_shape(tree: Any, expected_shape: Sequence[Any]) -> None:
    """Assert every leaf of ``tree`` has the shape ``expected_shape`` (chex's
    ``assert_tree_shape``): dims as :func:`assert_shape` takes them (``None``, sets, ``...``).

    >>> import numpy as np
    >>> assert_tree_shape({'x': np.zeros((8, 3)), 'y': np.zeros((8, 1))}, (8, None))

    Args:
        tree: A tree of arrays (or numbers).
        expected_shape: One shape.

    Raises:
        AssertionError: Listing every leaf whose shape differs.
        TypeError: If ``expected_shape`` is not a shape.
    """
    __tracebackhide__ = True
    if not _is_shape(expected_shape):
        raise TypeError(f"expected_shape: expected a shape (a tuple of ints, None, sets of ints and one ...), "
                        f"got {expected_shape!r:.60}")
    assert_shape(tree, expected_shape)


def _is_rank(r: Any) -> bool:
    return (isinstance(r, int) and not isinstance(r, bool)) or (
        isinstance(r, (set, frozenset)) and all(isinstance(v, int) for v in r)
    )


def assert_rank(tree: Any, expected_ranks: Any, *, is_leaf: IsLeaf | None = None) -> None:
    """Assert the leaves of ``tree`` have the expected ranks (chex's ``assert_rank``, on trees).

    ``expected_ranks`` is a rank (an int, or a set of allowed ints) every leaf must have, or a
    sequence of them, one per leaf in leaf order. Numbers have rank 0.

    >>> import numpy as np
    >>> params = {'w': np.zeros((2, 3)), 'b': np.zeros(3), 'scale': 1.0}
    >>> assert_rank(params, {0, 1, 2})
    >>> assert_rank(params, 2)
    Traceback (most recent call last):
    ...
    AssertionError: tree does not have rank 2: 2 leaves
    tree['b']: expected rank 2, got rank 1 (shape (3,))
    tree['scale']: expected rank 2, got rank 0 (shape ())

    Args:
        tree: Any pytree of arrays (or numbers).
        expected_ranks: A rank or set of ranks, or a sequence of them, one per leaf.
        is_leaf: As in :func:`treekit.tree_flatten`.

    Raises:
        AssertionError: Listing every leaf whose rank differs (or that has no shape).
        TypeError: If ``expected_ranks`` is neither a rank nor a sequence of them, or has
            another length than the leaves.
    """
    __tracebackhide__ = True
    leaves, paths = _with_paths(tree, is_leaf)
    single = _is_rank(expected_ranks)
    if not single and not (isinstance(expected_ranks, (tuple, list)) and all(map(_is_rank, expected_ranks))):
        raise TypeError(
            f"expected_ranks: expected an int, a set of ints or a sequence of them, got {expected_ranks!r:.60}"
        )
    lines = []
    for i, (x, want) in enumerate(zip(leaves, _per_leaf(leaves, expected_ranks, single, "expected_ranks"))):
        got = _shape_of(x)
        expected = f"rank {_dim_text(want)}" if isinstance(want, int) else f"rank in {_dim_text(want)}"
        if got is None:
            lines.append(format_message("tree", paths[i], expected, _leaf_text(x), "no shape", None))
        elif not (len(got) == want if isinstance(want, int) else len(got) in want):
            lines.append(
                format_message("tree", paths[i], expected, f"rank {len(got)}", f"shape {_shape_text(got)}", None)
            )
    if lines:
        header = f"rank {_dim_text(expected_ranks)}" if single else "the expected ranks"
        if single and not isinstance(expected_ranks, int):
            header = f"a rank in {_dim_text(expected_ranks)}"
        _fail(f"tree does not have {header}", lines)


def _shape_ends(tree: Any, dims: Sequence[int], end: str) -> None:
    """Raise, naming each array of ``tree`` whose shape does not start (or end) with ``dims``."""
    __tracebackhide__ = True
    want = tuple(dims)
    leaves, paths = _with_paths(tree, None)
    lines = []
    for i, x in enumerate(leaves):
        shape = _shape_of(x)
        got = None
        if shape is not None and len(shape) >= len(want):
            got = shape[: len(want)] if end == "prefix" else shape[len(shape) - len(want) :]
        if got != want:
            seen = f"shape {_shape_text(shape)}" if shape is not None else _leaf_text(x)
            lines.append(format_message("tree", paths[i], f"a shape {end} {_shape_text(want)}", seen, None, None))
    if lines:
        _fail(f"tree does not have the shape {end} {_shape_text(want)}", lines)


def assert_tree_shape_prefix(tree: Any, shape_prefix: Sequence[int]) -> None:
    """Assert every leaf's shape starts with ``shape_prefix`` (chex's ``assert_tree_shape_prefix``).

    >>> import numpy as np
    >>> assert_tree_shape_prefix({'x': np.zeros((8, 3)), 'y': np.zeros(8)}, (8,))
    >>> assert_tree_shape_prefix({'x': np.zeros((8, 3)), 'y': np.zeros(4)}, (8,))
    Traceback (most recent call last):
    ...
    AssertionError: tree does not have the shape prefix (8,): 1 leaf
    tree['y']: expected a shape prefix (8,), got shape (4,)

    Args:
        tree: A tree of arrays.
        shape_prefix: The leading dims every leaf has (a batch dim, say).

    Raises:
        AssertionError: Naming every leaf whose shape does not start so.
    """
    __tracebackhide__ = True
    _shape_ends(tree, shape_prefix, "prefix")


def assert_tree_shape_suffix(tree: Any, shape_suffix: Sequence[int]) -> None:
    """Assert every leaf's shape ends with ``shape_suffix`` (chex's ``assert_tree_shape_suffix``).

    >>> import numpy as np
    >>> assert_tree_shape_suffix({'x': np.zeros((8, 3)), 'y': np.zeros((2, 3))}, (3,))

    Args:
        tree: A tree of arrays.
        shape_suffix: The trailing dims every leaf has.

    Raises:
        AssertionError: Naming every leaf whose shape does not end so.
    """
    __tracebackhide__ = True
    _shape_ends(tree, shape_suffix, "suffix")


def assert_tree_has_only_ndarrays(tree: Any) -> None:
    """Assert every leaf is a numpy or jax array (chex's ``assert_tree_has_only_ndarrays``):
    no Python numbers, strings or other objects.

    >>> import numpy as np
    >>> assert_tree_has_only_ndarrays({'w': np.ones(2)})
    >>> assert_tree_has_only_ndarrays({'w': np.ones(2), 'lr': 0.1})
    Traceback (most recent call last):
    ...
    AssertionError: tree holds leaves that are not arrays: 1 leaf
    tree['lr']: expected an array, got float 0.1

    Args:
        tree: Any pytree.

    Raises:
        AssertionError: Naming every leaf that is no array.
    """
    __tracebackhide__ = True
    import numpy as np

    jax = sys.modules.get("jax")
    kinds: tuple[type, ...] = (np.ndarray, jax.Array) if jax is not None else (np.ndarray,)
    leaves, paths = _with_paths(tree, None)
    lines = [
        format_message("tree", paths[i], "an array", f"{type(x).__name__} {describe_leaf(x, 40)}", None, None)
        for i, x in enumerate(leaves)
        if not isinstance(x, kinds)
    ]
    if lines:
        _fail("tree holds leaves that are not arrays", lines)

"""Folding a tree's leaves into one value: tree_reduce, tree_reduce_associative, tree_all,
all_leaves (jax's names)."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, overload

from treekit.core import IsLeaf, flatten, lookup, noted, where_text
from treekit.ops._ops import PyTree, leaf_path

T = TypeVar("T")

__all__ = ["all_leaves", "tree_all", "tree_reduce", "tree_reduce_associative"]


class _Unspecified:
    def __repr__(self) -> str:
        return "<unspecified>"


_UNSPECIFIED: Any = _Unspecified()


@overload
def tree_reduce(function: Callable[[T, Any], T], tree: PyTree, *, is_leaf: IsLeaf | None = None) -> T: ...


@overload
def tree_reduce(function: Callable[[T, Any], T], tree: PyTree, initializer: T, is_leaf: IsLeaf | None = None) -> T: ...


def tree_reduce(
    function: Callable[[T, Any], T], tree: PyTree, initializer: Any = _UNSPECIFIED, is_leaf: IsLeaf | None = None
) -> T:
    """``functools.reduce`` over the leaves of ``tree``.

    >>> import operator
    >>> tree_reduce(operator.add, {'a': 1, 'b': (2, 3)})
    6
    >>> tree_reduce(operator.add, [], 0)
    0

    Args:
        function: Called as ``function(accumulated, leaf)``, left to right.
        tree: Any pytree.
        initializer: The starting value; without it, the first leaf.
        is_leaf: As in :func:`tree_flatten`.

    Returns:
        The last value ``function`` returned (or ``initializer`` / the single leaf).

    Raises:
        TypeError: If ``tree`` has no leaves and no ``initializer`` is given.
        TreeCycleError: If ``tree`` holds a cycle.
    """
    leaves = flatten(tree, is_leaf)[0]
    it = iter(leaves)
    try:
        if initializer is _UNSPECIFIED:
            return functools.reduce(function, it)  # type: ignore[no-any-return]
        return functools.reduce(function, it, initializer)  # type: ignore[no-any-return]
    except Exception as exc:
        if not leaves:  # functools.reduce's own TypeError: nothing to reduce
            raise
        where = where_text(leaf_path(tree, is_leaf, len(leaves) - operator.length_hint(it) - 1))
        noted(exc, f"tree_reduce: function raised at {where} (arguments: the value so far, that leaf of tree)")
        raise


def tree_reduce_associative(
    operation: Callable[[T, T], T], tree: PyTree, *, identity: Any = _UNSPECIFIED, is_leaf: IsLeaf | None = None
) -> T:
    """Reduce the leaves pairwise as a balanced tree (fewer sequential steps than reduce).

    >>> import operator
    >>> tree_reduce_associative(operator.add, [1, 2, 3, 4, 5])
    15

    Args:
        operation: An associative ``(a, b) -> c``; leaves are paired as jax pairs them
            (split at ``len // 2``), so a non-associative one gives jax's result.
        tree: Any pytree.
        identity: Returned for a tree without leaves.
        is_leaf: As in :func:`tree_flatten`.

    Returns:
        The combined value.

    Raises:
        TypeError: If ``tree`` has no leaves and no ``identity`` is given.
        TreeCycleError: If ``tree`` holds a cycle.
    """
    level = flatten(tree, is_leaf)[0]
    if not level:
        if identity is _UNSPECIFIED:
            raise TypeError("tree_reduce_associative: the tree has no leaves; pass identity=")
        return identity  # type: ignore[no-any-return]
    # Bottom-up pairing, iterative: the same grouping as jax's halving recursion.
    return _halve(level, operation)  # type: ignore[no-any-return]


def _halve(seq: list[Any], op: Callable[[Any, Any], Any]) -> Any:
    # jax splits at len // 2 recursively; mirror that exactly with an explicit stack.
    stack: list[tuple[int, int, bool]] = [(0, len(seq), False)]
    results: list[Any] = []
    while stack:
        lo, hi, combine = stack.pop()
        if combine:
            b = results.pop()
            a = results.pop()
            results.append(op(a, b))
        elif hi - lo == 1:
            results.append(seq[lo])
        else:
            mid = lo + (hi - lo) // 2
            stack += [(lo, hi, True), (mid, hi, False), (lo, mid, False)]
    return results[0]


def tree_all(tree: PyTree, *, is_leaf: IsLeaf | None = None) -> bool:
    """Whether every leaf is truthy (``True`` for a tree without leaves).

    >>> tree_all([True, {'a': 1}]), tree_all([True, 0]), tree_all([])
    (True, False, True)

    Args:
        tree: Any pytree.
        is_leaf: As in :func:`tree_flatten`.

    Returns:
        ``all(tree_leaves(tree))``.

    Raises:
        TreeCycleError: If ``tree`` holds a cycle.
    """
    return all(flatten(tree, is_leaf)[0])


def all_leaves(iterable: Iterable[Any], is_leaf: IsLeaf | None = None) -> bool:
    """Whether every item of ``iterable`` is a leaf (``None`` is not: it is a node).

    >>> all_leaves([1, 'a', 2.0]), all_leaves([1, [2]]), all_leaves([None])
    (True, False, False)

    Args:
        iterable: The items to test (not a tree: its own type does not matter).
        is_leaf: As in :func:`tree_flatten`; an item it accepts is a leaf.

    Returns:
        Whether flattening each item would give that item back as a single leaf.
    """
    if is_leaf is None:
        return all(lookup(type(x)) is None for x in iterable)
    items = list(iterable)
    leaves = flatten(items, is_leaf)[0]
    return len(leaves) == len(items) and all(a is b for a, b in zip(items, leaves))

"""Stacking: many trees of one structure into one tree of stacked arrays, and back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from treekit.core import StructureMismatchError, flatten, keystr, shape_text
from treekit.ops._ops import tree_leaves_with_path
from treekit.ops._tree_math import namespace


def tree_stack(trees: Sequence[Any]) -> Any:
    """One tree whose leaves stack the matching leaves of ``trees`` along a new axis 0.

    Batches a list of example dicts into one tree of arrays, or replicates params per device.

    >>> import numpy as np
    >>> tree_stack([{'x': np.array([1, 2]), 'y': 0}, {'x': np.array([3, 4]), 'y': 1}])
    {'x': array([[1, 2],
           [3, 4]]), 'y': array([0, 1])}

    Args:
        trees: A list or tuple of trees of one structure whose matching leaves have one
            shape (a tuple subclass, such as a namedtuple, is taken as a sequence too).

    Returns:
        A tree of that structure whose leaves have a new leading axis of length
        ``len(trees)`` (``jax.numpy.stack`` for jax leaves, ``numpy.stack`` otherwise).

    Raises:
        TypeError: If ``trees`` is not a list or tuple (a dict, a single tree, a generator:
            ``trees: expected a list or tuple of trees, got dict``).
        ValueError: If ``trees`` is empty, or leaves at one key path have different shapes
            (``trees[1]['x']: expected a leaf of shape (2,) (as trees[0]['x']), got (3,)``).
        StructureMismatchError: If a tree differs from the first; labelled ``trees[k]``, the
            message names the key path of the first difference.
    """
    if not isinstance(trees, (list, tuple)):
        got = "None" if trees is None else type(trees).__name__
        raise TypeError(f"trees: expected a list or tuple of trees, got {got}")
    if not trees:
        raise ValueError("trees: expected at least one tree, got an empty sequence")
    first, treedef, _ = flatten(trees[0], label="trees[0]")
    columns = [first] + [treedef._guide(t, f"trees[{k}]", strict=True) for k, t in enumerate(trees) if k]
    stacked = []
    for j, xs in enumerate(zip(*columns)):
        try:
            stacked.append(namespace(*xs).stack(xs))
        except (ValueError, TypeError) as exc:
            raise _stack_error(trees[0], j, xs, exc) from exc
    return treedef._build(stacked)


def _stack_error(tree: Any, j: int, xs: tuple[Any, ...], exc: Exception) -> Exception:
    """The error for leaves ``xs`` (leaf ``j`` of each tree) that do not stack: the first tree
    whose leaf's shape differs from ``trees[0]``'s, named by its key path."""
    path = keystr(tree_leaves_with_path(tree)[j][0])
    shapes = [shape_text(x) for x in xs]
    k = next((k for k, shape in enumerate(shapes) if shape != shapes[0]), None)
    if k is None:
        return type(exc)(f"trees[*]{path}: expected leaves that stack, got {shapes[0]}: {exc}")
    return type(exc)(f"trees[{k}]{path}: expected a leaf of shape {shapes[0]} (as trees[0]{path}), got {shapes[k]}")


def tree_unstack(tree: Any) -> list[Any]:
    """The trees ``tree_stack`` was given: one tree per index along the leaves' axis 0.

    >>> import numpy as np
    >>> tree_unstack({'x': np.array([[1, 2], [3, 4]]), 'y': np.array([[0], [1]])})
    [{'x': array([1, 2]), 'y': array([0])}, {'x': array([3, 4]), 'y': array([1])}]

    Args:
        tree: A tree whose leaves are arrays with one leading axis length.

    Returns:
        A list of trees of ``tree``'s structure, one per index along that axis.

    Raises:
        ValueError: If ``tree`` has no leaves.
        StructureMismatchError: If a leaf has no axis 0, or one of another length than the
            first leaf's; the message names its key path.
    """
    leaves, treedef, _ = flatten(tree)
    if not leaves:
        raise ValueError("tree: expected at least one leaf to unstack, got none")
    lengths = [np.shape(x)[0] if np.ndim(x) else None for x in leaves]
    if lengths[0] is None:  # checked first: the first leaf's length is what the others must have
        _, _, paths = flatten(tree, with_path=True)
        assert paths is not None
        raise StructureMismatchError("tree", paths[0], "an array with a leading axis", "shape ()")
    if any(n != lengths[0] for n in lengths):
        _, _, paths = flatten(tree, with_path=True)
        assert paths is not None
        k = next(k for k, n in enumerate(lengths) if n != lengths[0])
        got = f"shape {tuple(np.shape(leaves[k]))}"
        raise StructureMismatchError("tree", paths[k], f"an array with leading axis of length {lengths[0]}", got)
    return [treedef._build([x[i] for x in leaves]) for i in range(lengths[0])]

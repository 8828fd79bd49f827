"""Freezing: filters that pick leaves, and partition/combine, which split a tree in two and join it again."""

from __future__ import annotations

from typing import Any

from treekit._describe import is_inexact_dtype
from treekit._errors import Caller
from treekit._ops import leafwise, tree_leaves_with_path, tree_map
from treekit._traverse import flatten


def is_array(x: Any) -> bool:
    """Whether ``x`` is an array that holds data: a numpy array or scalar, a jax array (or a
    tracer under ``jit``), a torch tensor; not a Python number or a ``ShapeDtypeStruct`` (as
    equinox's ``is_array``). A filter for :func:`partition`.

    >>> import numpy as np
    >>> is_array(np.zeros(3)), is_array(np.float32(1)), is_array(1.0), is_array('relu')
    (True, True, False, False)
    >>> partition({'w': np.ones(2), 'act': 'relu'}, is_array)
    ({'w': array([1., 1.]), 'act': None}, {'w': None, 'act': 'relu'})

    Args:
        x: Any object.

    Returns:
        ``True`` if ``x`` has a ``shape``, a ``dtype`` and ``__array__``.
    """
    return hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "__array__")



def is_inexact_array(x: Any) -> bool:
    """Whether ``x`` is an array (:func:`is_array`) of floating-point or complex numbers: the
    leaves a gradient is taken for (as equinox's ``is_inexact_array``). A filter for
    :func:`partition`, to train the float params and keep int counters and masks out.

    >>> import numpy as np
    >>> is_inexact_array(np.zeros(2, np.float32)), is_inexact_array(np.zeros(2, np.int32)), is_inexact_array(0.5)
    (True, False, False)
    >>> params = {'w': np.ones(2), 'step': np.array(3)}
    >>> trainable, static = partition(params, is_inexact_array)
    >>> trainable, static
    ({'w': array([1., 1.]), 'step': None}, {'w': None, 'step': array(3)})

    Args:
        x: Any object.

    Returns:
        ``True`` for arrays of ``float*``, ``bfloat16`` and ``complex*`` dtypes.
    """
    return is_array(x) and is_inexact_dtype(x.dtype)


# -- freezing ------------------------------------------------------------------------------------
def _is_none(x: Any) -> bool:
    return x is None


def partition(tree: Any, predicate_or_mask: Any) -> tuple[Any, Any]:
    """Split ``tree`` into the selected leaves and the rest, ``None`` in place of the others.

    Train only the selected part: differentiate with respect to ``selected`` through
    ``combine(selected, rest)``; ``rest`` gets no gradient (``None`` is a node without
    leaves, so ``jax.grad`` and the optimizers skip it), as equinox's ``partition``.

    >>> params = [{'w': 1.0, 'b': 0.0}, {'w': 2.0, 'b': 0.0}]
    >>> trained, frozen = partition(params, [False, True])
    >>> trained
    [{'w': None, 'b': None}, {'w': 2.0, 'b': 0.0}]
    >>> frozen
    [{'w': 1.0, 'b': 0.0}, {'w': None, 'b': None}]
    >>> combine(trained, frozen) == params
    True
    >>> partition({'w': 3.0, 'b': -1.0}, lambda x: x > 0)
    ({'w': 3.0, 'b': None}, {'w': None, 'b': -1.0})

    Args:
        tree: Any pytree.
        predicate_or_mask: A function ``leaf -> bool`` (:func:`is_array` and
            :func:`is_inexact_array` are two), or a tree of bools whose structure
            is a prefix of ``tree``'s: a ``True`` selects the whole subtree under it. Masks
            by key path come from ``tree_map_with_path(lambda path, _: ..., tree)``.

    Returns:
        ``(selected, rest)``: two trees of ``tree``'s structure, with ``None`` at the leaves
        the other one holds.

    Raises:
        StructureMismatchError: If ``tree`` does not extend the mask's structure; labelled
            ``tree``.
    """
    if callable(predicate_or_mask):
        leaves, treedef, _ = flatten(tree)
        picks = leafwise(
            lambda x: bool(predicate_or_mask(x)),
            [leaves],
            lambda i: tree_leaves_with_path(tree)[i][0],
            Caller("partition: predicate_or_mask", "the leaf of tree"),
        )
        subtrees = leaves
    else:
        picks, treedef, _ = flatten(predicate_or_mask)
        picks = [bool(m) for m in picks]
        subtrees = treedef._guide(tree, "tree")
    selected = [sub if pick else tree_map(_none, sub) for pick, sub in zip(picks, subtrees)]
    rest = [tree_map(_none, sub) if pick else sub for pick, sub in zip(picks, subtrees)]
    return treedef._build(selected), treedef._build(rest)


def _none(_: Any) -> None:
    return None


def combine(*trees: Any) -> Any:
    """Merge trees that hold ``None`` in place of leaves: each leaf from the first tree that
    has one there (the inverse of :func:`partition`, as equinox's ``combine``).

    >>> combine({'w': None, 'b': 0.5}, {'w': 2.0, 'b': None})
    {'w': 2.0, 'b': 0.5}

    Args:
        *trees: Trees of one structure, except for ``None`` in place of leaves (or of whole
            subtrees).

    Returns:
        A tree of the first tree's structure, ``None`` replaced from the later trees.

    Raises:
        StructureMismatchError: If the trees differ other than by ``None`` at leaves;
            labelled ``rest[k]`` for the ``k + 1``-th tree.
    """
    return tree_map(_first_not_none, *trees, is_leaf=_is_none)


def _first_not_none(*xs: Any) -> Any:
    return next((x for x in xs if x is not None), None)

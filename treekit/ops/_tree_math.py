"""Arithmetic over trees of arrays (optax.tree_utils' names and argument orders), on any array module.

Every function works leaf by leaf with the operators of the leaves themselves (``x + y``), or
with the array module the leaves come from (``numpy`` for numpy arrays, ``jax.numpy`` for jax
arrays and tracers, found through ``__array_namespace__``), so that numpy trees need no jax and
jax trees work under ``jit`` and ``grad``. Public through :mod:`treekit.params`.
"""

from __future__ import annotations

import functools
import operator
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from treekit.core import Caller, KeyPath, flatten
from treekit.ops._ops import leafwise

__all__ = [
    "dtype_of",
    "loaded_jax",
    "namespace",
    "tree_add",
    "tree_add_scale",
    "tree_axpy",
    "tree_batch_shape",
    "tree_cast",
    "tree_cast_like",
    "tree_clip",
    "tree_conj",
    "tree_div",
    "tree_full_like",
    "tree_mul",
    "tree_ones_like",
    "tree_real",
    "tree_scale",
    "tree_sub",
    "tree_where",
    "tree_zeros_like",
]


def dtype_of(x: Any) -> Any:
    """``x.dtype``, or the dtype its array module gives a Python number (``1.0``: float64).

    >>> dtype_of(1.0), dtype_of(True)
    (dtype('float64'), dtype('bool'))
    """
    dtype = getattr(x, "dtype", None)
    return dtype if dtype is not None else namespace(x).asarray(x).dtype


def namespace(*arrays: Any) -> ModuleType:
    """The array module of ``arrays``: the first one that is not numpy's, else numpy.

    Uses the array API's ``__array_namespace__`` (numpy 2 arrays, jax arrays and tracers;
    ``jax.numpy`` for jax's typed PRNG keys, which have none); Python scalars and objects
    without it count as numpy. Never imports jax.

    >>> import numpy as np
    >>> namespace(np.ones(2), 1.0).__name__
    'numpy'

    Args:
        *arrays: Arrays, tracers or numbers.

    Returns:
        The module: ``numpy``, ``jax.numpy``, or another array API namespace.
    """
    import numpy as np

    for x in arrays:
        get = getattr(x, "__array_namespace__", None)
        if get is not None:
            try:
                xp: ModuleType = get()
            except NotImplementedError:  # jax's typed PRNG keys: no namespace, but jax.numpy stacks them
                jax = loaded_jax()
                if jax is None:
                    raise
                xp = jax.numpy
            if xp is not np:
                return xp
    return np


def loaded_jax() -> ModuleType | None:
    """The ``jax`` module if something imported it already, else ``None`` (never imports it).

    A jax array or PRNG key exists only once jax is imported, so code that meets one can
    reach jax this way.

    Returns:
        The module, or ``None``.
    """
    return sys.modules.get("jax")


def _is_none(x: Any) -> bool:
    return x is None


def zip_trees(
    name: str, f: Callable[..., Any], tree_x: Any, others: dict[str, Any], first: str = "tree_x", nones: bool = False
) -> Any:
    """``f`` over the leaves of ``tree_x`` and the matching leaves of the other trees.

    Each other tree must have ``tree_x``'s structure exactly (a leaf where it has one); a
    mismatch raises StructureMismatchError labelled with that tree's argument name. If ``f``
    raises, the error gets a note naming ``name``, the key path and the trees (as
    :func:`treekit.tree_map`'s): ``tree_add: x + y raised at ['w'] (leaves of tree_x, tree_y)``.
    With ``nones``, ``None`` is a leaf (``f`` gets it), as optax's ``is_leaf=lambda x: x is None``.
    """
    is_leaf = _is_none if nones else None
    leaves, treedef, _ = flatten(tree_x, is_leaf)
    columns = [leaves, *(treedef._guide(tree, label, strict=True, is_leaf=is_leaf) for label, tree in others.items())]

    def path_of(index: int) -> KeyPath:
        paths = flatten(tree_x, None, True)[2]
        assert paths is not None
        return paths[index]

    caller = Caller(name, f"leaves of {', '.join([first, *others])}")
    return treedef._build(leafwise(f, columns, path_of, caller))


def tree_add(tree_x: Any, tree_y: Any, *other_trees: Any) -> Any:
    """The leafwise sum of two or more trees of the same structure (optax's signature).

    >>> tree_add({'a': 1, 'b': [2]}, {'a': 10, 'b': [20]}, {'a': 100, 'b': [200]})
    {'a': 111, 'b': [222]}

    Args:
        tree_x: A tree of arrays or numbers.
        tree_y: A tree of ``tree_x``'s structure.
        *other_trees: More trees of that structure.

    Returns:
        A tree of ``tree_x``'s structure holding ``x + y + ...`` at each leaf.

    Raises:
        StructureMismatchError: If a tree differs from ``tree_x``; the message names it
            (``tree_y``, ``other_trees[0]``, ...) and the key path.
    """
    if not other_trees:
        return zip_trees("tree_add: x + y", operator.add, tree_x, {"tree_y": tree_y})
    others = {"tree_y": tree_y, **{f"other_trees[{k}]": t for k, t in enumerate(other_trees)}}
    return zip_trees("tree_add: x + y + ...", lambda *xs: functools.reduce(operator.add, xs), tree_x, others)


def tree_sub(tree_x: Any, tree_y: Any) -> Any:
    """The leafwise difference ``tree_x - tree_y`` (optax's signature).

    >>> tree_sub([5, (3,)], [1, (1,)])
    [4, (2,)]

    Args:
        tree_x: A tree of arrays or numbers.
        tree_y: A tree of ``tree_x``'s structure.

    Returns:
        A tree of ``tree_x``'s structure holding ``x - y`` at each leaf.

    Raises:
        StructureMismatchError: If ``tree_y`` differs from ``tree_x``; labelled ``tree_y``.
    """
    return zip_trees("tree_sub: x - y", operator.sub, tree_x, {"tree_y": tree_y})


def tree_mul(tree_x: Any, tree_y: Any) -> Any:
    """The leafwise product ``tree_x * tree_y`` (optax's signature).

    >>> tree_mul({'a': 2, 'b': [3]}, {'a': 5, 'b': [-1]})
    {'a': 10, 'b': [-3]}

    Args:
        tree_x: A tree of arrays or numbers.
        tree_y: A tree of ``tree_x``'s structure.

    Returns:
        A tree of ``tree_x``'s structure holding ``x * y`` at each leaf.

    Raises:
        StructureMismatchError: If ``tree_y`` differs from ``tree_x``; labelled ``tree_y``.
    """
    return zip_trees("tree_mul: x * y", operator.mul, tree_x, {"tree_y": tree_y})


def tree_div(tree_x: Any, tree_y: Any) -> Any:
    """The leafwise quotient ``tree_x / tree_y`` (optax's signature).

    >>> tree_div({'a': 1, 'b': [3.0]}, {'a': 4, 'b': [2]})
    {'a': 0.25, 'b': [1.5]}

    Args:
        tree_x: A tree of arrays or numbers.
        tree_y: A tree of ``tree_x``'s structure.

    Returns:
        A tree of ``tree_x``'s structure holding ``x / y`` at each leaf.

    Raises:
        StructureMismatchError: If ``tree_y`` differs from ``tree_x``; labelled ``tree_y``.
    """
    return zip_trees("tree_div: x / y", operator.truediv, tree_x, {"tree_y": tree_y})


def tree_where(condition: Any, tree_x: Any, tree_y: Any) -> Any:
    """``where(condition, x, y)`` at each leaf: ``tree_x``'s values where ``condition`` holds,
    else ``tree_y``'s (optax's signature; ``condition`` is one array or bool for all leaves).

    >>> import numpy as np
    >>> tree_where(np.array([True, False]), {'w': np.array([1, 2])}, {'w': np.array([-1, -2])})
    {'w': array([ 1, -2])}

    Args:
        condition: A bool or an array of bools that broadcasts against every leaf.
        tree_x: A tree of arrays or numbers, chosen where ``condition`` is true.
        tree_y: A tree of ``tree_x``'s structure, chosen elsewhere.

    Returns:
        A tree of ``tree_x``'s structure; each leaf an array of the leaves' module.

    Raises:
        StructureMismatchError: If ``tree_y`` differs from ``tree_x``; labelled ``tree_y``.
    """
    where = lambda x, y: namespace(condition, x, y).where(condition, x, y)  # noqa: E731
    return zip_trees("tree_where: where(condition, x, y)", where, tree_x, {"tree_y": tree_y})


def tree_clip(tree: Any, min_value: Any = None, max_value: Any = None) -> Any:
    """Every entry clipped to ``[min_value, max_value]`` (optax's signature).

    >>> import numpy as np
    >>> tree_clip({'w': np.array([-3.0, 0.5, 9.0])}, -1.0, 1.0)
    {'w': array([-1. ,  0.5,  1. ])}

    Args:
        tree: A tree of arrays or numbers.
        min_value: The lower bound, or ``None`` for none.
        max_value: The upper bound, or ``None`` for none.

    Returns:
        A tree of ``tree``'s structure holding the clipped arrays.
    """
    clip = lambda x: namespace(x, min_value, max_value).clip(x, min_value, max_value)  # noqa: E731
    return zip_trees("tree_clip: clip(x, min_value, max_value)", clip, tree, {}, "tree")


def tree_conj(tree: Any) -> Any:
    """The complex conjugate of every leaf (optax's ``tree_conj``).

    >>> import numpy as np
    >>> tree_conj([np.array([1 + 2j])])
    [array([1.-2.j])]

    Args:
        tree: A tree of arrays or numbers.

    Returns:
        A tree of ``tree``'s structure holding ``conj(x)`` at each leaf.
    """
    return zip_trees("tree_conj: conj(x)", lambda x: namespace(x).conj(x), tree, {}, "tree")


def tree_real(tree: Any) -> Any:
    """The real part of every leaf (optax's ``tree_real``).

    >>> import numpy as np
    >>> tree_real([np.array([1 + 2j])])
    [array([1.])]

    Args:
        tree: A tree of arrays or numbers.

    Returns:
        A tree of ``tree``'s structure holding ``real(x)`` at each leaf.
    """
    return zip_trees("tree_real: real(x)", lambda x: namespace(x).real(x), tree, {}, "tree")


def tree_scale(scalar: Any, tree: Any) -> Any:
    """``scalar * tree``, leaf by leaf; the scalar comes first, as in optax.

    >>> tree_scale(2, {'w': 1.5, 'b': 3})
    {'w': 3.0, 'b': 6}

    Args:
        scalar: A number or 0-d array.
        tree: A tree of arrays or numbers.

    Returns:
        A tree of ``tree``'s structure holding ``scalar * x`` at each leaf.
    """
    return zip_trees("tree_scale: scalar * x", lambda x: scalar * x, tree, {}, "tree")


def tree_add_scale(tree_x: Any, scalar: Any, tree_y: Any) -> Any:
    """``tree_x + scalar * tree_y``, leaf by leaf (optax's ``tree_add_scale``, same order).

    >>> tree_add_scale({'w': 1.0}, 0.5, {'w': 4.0})
    {'w': 3.0}

    A ``None`` in ``tree_x`` stays ``None`` (a frozen leaf; as optax), whatever leaf ``tree_y`` holds there:

    >>> tree_add_scale({'w': 1.0, 'frozen': None}, 0.5, {'w': 4.0, 'frozen': 2.0})
    {'w': 3.0, 'frozen': None}

    Args:
        tree_x: A tree of arrays or numbers.
        scalar: A number or 0-d array.
        tree_y: A tree of ``tree_x``'s structure.

    Returns:
        A tree of ``tree_x``'s structure holding ``x + scalar * y`` at each leaf.

    Raises:
        StructureMismatchError: If ``tree_y`` differs from ``tree_x``; labelled ``tree_y``.
    """
    def add_scale(x: Any, y: Any) -> Any:
        return None if x is None else x + scalar * y

    return zip_trees("tree_add_scale: x + scalar * y", add_scale, tree_x, {"tree_y": tree_y}, nones=True)


def tree_axpy(scalar: Any, tree_x: Any, tree_y: Any) -> Any:
    """``scalar * tree_x + tree_y`` in BLAS's argument order.

    The same result as optax's ``tree_add_scale(tree_y, scalar, tree_x)`` (also here as
    :func:`tree_add_scale`); kept under the BLAS name for code written against ``axpy``.

    >>> tree_axpy(0.5, {'w': 4.0}, {'w': 1.0})
    {'w': 3.0}

    Args:
        scalar: A number or 0-d array.
        tree_x: A tree of arrays or numbers.
        tree_y: A tree of ``tree_x``'s structure.

    Returns:
        A tree of ``tree_x``'s structure holding ``scalar * x + y`` at each leaf.

    Raises:
        StructureMismatchError: If ``tree_y`` differs from ``tree_x``; labelled ``tree_y``.
    """
    return zip_trees("tree_axpy: scalar * x + y", lambda x, y: scalar * x + y, tree_x, {"tree_y": tree_y})


def tree_zeros_like(tree: Any, dtype: Any = None) -> Any:
    """A tree of zeros shaped like ``tree``'s leaves (optax's signature).

    >>> import numpy as np
    >>> tree_zeros_like({'w': np.ones((2,), np.float32)})
    {'w': array([0., 0.], dtype=float32)}

    Args:
        tree: A tree of arrays or numbers.
        dtype: The dtype of every new leaf; ``None`` keeps each leaf's own.

    Returns:
        A tree of ``tree``'s structure holding, at each leaf, an array of zeros of that
        leaf's shape.
    """
    return zip_trees(
        "tree_zeros_like: zeros_like(x)", lambda x: namespace(x).zeros_like(x, dtype=dtype), tree, {}, "tree"
    )


def tree_ones_like(tree: Any, dtype: Any = None) -> Any:
    """A tree of ones shaped like ``tree``'s leaves (optax's signature).

    >>> import numpy as np
    >>> tree_ones_like([np.zeros(2)], dtype=np.int32)
    [array([1, 1], dtype=int32)]

    Args:
        tree: A tree of arrays or numbers.
        dtype: The dtype of every new leaf; ``None`` keeps each leaf's own.

    Returns:
        A tree of ``tree``'s structure holding, at each leaf, an array of ones of that
        leaf's shape.
    """
    return zip_trees("tree_ones_like: ones_like(x)", lambda x: namespace(x).ones_like(x, dtype=dtype), tree, {}, "tree")


def tree_full_like(tree: Any, fill_value: Any, dtype: Any = None) -> Any:
    """A tree of ``fill_value`` shaped like ``tree``'s leaves (optax's signature).

    >>> import numpy as np
    >>> tree_full_like({'b': np.zeros(3)}, 7.5)
    {'b': array([7.5, 7.5, 7.5])}

    Args:
        tree: A tree of arrays or numbers.
        fill_value: The value of every entry.
        dtype: The dtype of every new leaf; ``None`` keeps each leaf's own.

    Returns:
        A tree of ``tree``'s structure holding, at each leaf, an array of ``fill_value`` of that
        leaf's shape.
    """
    fill = lambda x: namespace(x).full_like(x, fill_value, dtype=dtype)  # noqa: E731
    return zip_trees("tree_full_like: full_like(x)", fill, tree, {}, "tree")


def tree_cast(tree: Any, dtype: Any) -> Any:
    """Every leaf as an array of ``dtype``; ``dtype=None`` returns ``tree`` itself (as optax).

    Python numbers become 0-d arrays of the leaf module (numpy for plain numbers).

    >>> import numpy as np
    >>> tree_cast({'w': np.array([1.5]), 'n': 2}, np.float32)
    {'w': array([1.5], dtype=float32), 'n': array(2., dtype=float32)}

    Args:
        tree: A tree of arrays or numbers.
        dtype: The dtype to cast every leaf to, or ``None``.

    Returns:
        A tree of ``tree``'s structure with each leaf as an array of ``dtype``.
    """
    if dtype is None:
        return tree
    return zip_trees("tree_cast: asarray(x, dtype)", lambda x: namespace(x).asarray(x, dtype=dtype), tree, {}, "tree")


def tree_cast_like(tree: Any, other_tree: Any) -> Any:
    """Each leaf of ``tree`` cast to the dtype of the matching leaf of ``other_tree`` (optax's).

    A leaf of ``other_tree`` without a ``dtype`` (a Python number) leaves its leaf as it is.

    >>> import numpy as np
    >>> tree_cast_like({'w': np.array([1.5]), 'n': 3}, {'w': np.zeros(1, np.float32), 'n': 0})
    {'w': array([1.5], dtype=float32), 'n': 3}

    Args:
        tree: A tree of arrays or numbers.
        other_tree: A tree of ``tree``'s structure whose leaves give the dtypes.

    Returns:
        A tree of ``tree``'s structure.

    Raises:
        StructureMismatchError: If ``other_tree`` differs from ``tree``; labelled ``other_tree``.
    """

    def cast(x: Any, other: Any) -> Any:
        dtype = getattr(other, "dtype", None)
        if dtype is None:
            return x
        return x.astype(dtype) if hasattr(x, "astype") else namespace(x).asarray(x, dtype=dtype)

    return zip_trees("tree_cast_like: x.astype(other.dtype)", cast, tree, {"other_tree": other_tree}, "tree")


def tree_batch_shape(tree: Any, shape: tuple[int, ...] = ()) -> Any:
    """Every leaf broadcast to the leading batch dimensions ``shape`` (optax's signature).

    >>> import numpy as np
    >>> tree_batch_shape({'b': np.array([1.0, 2.0])}, (3,))['b'].shape
    (3, 2)

    Args:
        tree: A tree of arrays or numbers.
        shape: The dimensions to put in front of each leaf's own.

    Returns:
        A tree of ``tree``'s structure holding arrays of shape ``(*shape, *x.shape)`` (numpy
        returns read-only broadcast views, jax new arrays).
    """
    broadcast = lambda x: (xp := namespace(x)).broadcast_to(x, (*shape, *xp.shape(x)))  # noqa: E731
    return zip_trees("tree_batch_shape: broadcast_to(x, (*shape, *x.shape))", broadcast, tree, {}, "tree")

"""Arithmetic over trees of arrays (optax.tree_utils' names and argument orders), on any array module.

Every function works leaf by leaf with the operators of the leaves themselves (``x + y``), or
with the array module the leaves come from (``numpy`` for numpy arrays, ``jax.numpy`` for jax
arrays and tracers, found through ``__array_namespace__``), so that numpy trees need no jax and
jax trees work under ``jit`` and ``grad``. Public through :mod:`treekit.params`.
"""

from __future__ import annotations

import functools
import math
import operator
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from treekit._keys import KeyPath
from treekit._ops import leafwise, tree_leaves, tree_reduce
from treekit._traverse import flatten

__all__ = [
    "loaded_jax",
    "namespace",
    "tree_add",
    "tree_add_scale",
    "tree_axpy",
    "tree_bytes",
    "tree_cast",
    "tree_full_like",
    "tree_norm",
    "tree_ones_like",
    "tree_scale",
    "tree_size",
    "tree_sub",
    "tree_vdot",
    "tree_zeros_like",
]


def namespace(*arrays: Any) -> ModuleType:
    """The array module of ``arrays``: the first one that is not numpy's, else numpy.

    Uses the array API's ``__array_namespace__`` (numpy 2 arrays, jax arrays and tracers);
    Python scalars and objects without it count as numpy. Never imports jax.

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
            xp: ModuleType = get()
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


def _zip(name: str, f: Callable[..., Any], tree_x: Any, others: dict[str, Any], first: str = "tree_x") -> Any:
    """``f`` over the leaves of ``tree_x`` and the matching leaves of the other trees.

    Each other tree must have ``tree_x``'s structure exactly (a leaf where it has one); a
    mismatch raises StructureMismatchError labelled with that tree's argument name. If ``f``
    raises, the error gets a note naming ``name``, the key path and the trees (as
    :func:`treekit.tree_map`'s): ``tree_add: x + y raised at ['w'] (leaves of tree_x, tree_y)``.
    """
    leaves, treedef, _ = flatten(tree_x)
    columns = [leaves, *(treedef._walk(tree, label, strict=True) for label, tree in others.items())]

    def path_of(index: int) -> KeyPath:
        paths = flatten(tree_x, None, True)[2]
        assert paths is not None
        return paths[index]

    where = f"{name}|leaves of {', '.join([first, *others])}"
    return treedef._build(leafwise(f, columns, path_of, where))


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
        return _zip("tree_add: x + y", operator.add, tree_x, {"tree_y": tree_y})
    others = {"tree_y": tree_y, **{f"other_trees[{k}]": t for k, t in enumerate(other_trees)}}
    return _zip("tree_add: x + y + ...", lambda *xs: functools.reduce(operator.add, xs), tree_x, others)


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
    return _zip("tree_sub: x - y", operator.sub, tree_x, {"tree_y": tree_y})


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
    return _zip("tree_scale: scalar * x", lambda x: scalar * x, tree, {}, "tree")


def tree_add_scale(tree_x: Any, scalar: Any, tree_y: Any) -> Any:
    """``tree_x + scalar * tree_y``, leaf by leaf (optax's ``tree_add_scale``, same order).

    >>> tree_add_scale({'w': 1.0}, 0.5, {'w': 4.0})
    {'w': 3.0}

    Args:
        tree_x: A tree of arrays or numbers.
        scalar: A number or 0-d array.
        tree_y: A tree of ``tree_x``'s structure.

    Returns:
        A tree of ``tree_x``'s structure holding ``x + scalar * y`` at each leaf.

    Raises:
        StructureMismatchError: If ``tree_y`` differs from ``tree_x``; labelled ``tree_y``.
    """
    return _zip("tree_add_scale: x + scalar * y", lambda x, y: x + scalar * y, tree_x, {"tree_y": tree_y})


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
    return _zip("tree_axpy: scalar * x + y", lambda x, y: scalar * x + y, tree_x, {"tree_y": tree_y})


def tree_vdot(tree_x: Any, tree_y: Any) -> Any:
    """The inner product of two trees: the sum of ``vdot`` over matching leaves (optax's).

    >>> import numpy as np
    >>> float(tree_vdot({'a': np.array([1.0, 2.0]), 'b': 3.0}, {'a': np.array([3.0, 4.0]), 'b': 2.0}))
    17.0

    Args:
        tree_x: A tree of arrays or numbers; complex leaves are conjugated, as
            ``numpy.vdot`` does.
        tree_y: A tree of ``tree_x``'s structure.

    Returns:
        A scalar of the leaves' array module (``0`` for trees without leaves).

    Raises:
        StructureMismatchError: If ``tree_y`` differs from ``tree_x``; labelled ``tree_y``.
    """
    vdots = _zip("tree_vdot: vdot(x, y)", lambda x, y: namespace(x, y).vdot(x, y), tree_x, {"tree_y": tree_y})
    return tree_reduce(operator.add, vdots, 0)


def tree_norm(tree: Any, ord: int | float | str | None = None, squared: bool = False) -> Any:
    """The vector norm of all the leaves' entries taken together (optax's signature).

    >>> import numpy as np
    >>> tree = {'a': np.array([3.0]), 'b': np.array([[-4.0]])}
    >>> float(tree_norm(tree)), float(tree_norm(tree, ord=1)), float(tree_norm(tree, ord='inf'))
    (5.0, 7.0, 4.0)
    >>> float(tree_norm(tree, squared=True))
    25.0

    Args:
        tree: A tree of arrays (or numbers).
        ord: ``None`` or ``2`` (Euclidean), ``1`` (sum of magnitudes), or ``math.inf`` /
            ``'inf'`` / ``'infinity'`` (largest magnitude).
        squared: Return the norm squared.

    Returns:
        A 0-d array of the leaves' array module (numpy for a tree without leaves, where the
        norm is ``0``, or ``-inf`` for ``ord=inf`` as in optax).

    Raises:
        ValueError: If ``ord`` is none of those.
    """
    leaves = tree_leaves(tree)
    xp = namespace(*leaves)
    if ord is None or ord == 2:
        sq = functools.reduce(operator.add, [xp.sum(_abs_sq(xp, x)) for x in leaves], 0)
        return xp.asarray(sq) if squared else xp.sqrt(xp.asarray(sq))
    out: Any
    if ord == 1:
        out = functools.reduce(operator.add, [xp.sum(xp.abs(x)) for x in leaves], 0)
    elif ord in (math.inf, "inf", "infinity"):
        maxes = [xp.max(xp.abs(x)) for x in leaves if _size(x)]
        out = functools.reduce(xp.maximum, maxes, -math.inf)
    else:
        raise ValueError(f"ord: expected None, 1, 2, inf, 'inf' or 'infinity', got {ord!r}")
    out = xp.asarray(out)
    return out * out if squared else out


def _abs_sq(xp: ModuleType, x: Any) -> Any:
    if xp.iscomplexobj(x):
        return xp.real(x) ** 2 + xp.imag(x) ** 2
    return x * x


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
    return _zip("tree_zeros_like: zeros_like(x)", lambda x: namespace(x).zeros_like(x, dtype=dtype), tree, {}, "tree")


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
    return _zip("tree_ones_like: ones_like(x)", lambda x: namespace(x).ones_like(x, dtype=dtype), tree, {}, "tree")


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
    return _zip("tree_full_like: full_like(x)", fill, tree, {}, "tree")


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
    return _zip("tree_cast: asarray(x, dtype)", lambda x: namespace(x).asarray(x, dtype=dtype), tree, {}, "tree")


def _size(x: Any) -> int:
    size = getattr(x, "size", None)
    if size is None or callable(size):  # a Python number, or torch's size() method
        size = math.prod(getattr(x, "shape", ()))
    return int(size)


def tree_size(tree: Any) -> int:
    """The number of scalars in ``tree``: the sum of the leaves' sizes (a number counts 1).

    >>> import numpy as np
    >>> tree_size({'w': np.zeros((3, 4)), 'b': np.zeros(4), 'scale': 1.0})
    17

    Args:
        tree: A tree of arrays or numbers.

    Returns:
        The total number of entries, a Python int.
    """
    return sum(_size(x) for x in tree_leaves(tree))


def tree_bytes(tree: Any) -> int:
    """The bytes the leaves' data take: the sum of ``nbytes`` (not in optax).

    A leaf without ``nbytes`` (a Python number) counts as the numpy array it would become.

    >>> import numpy as np
    >>> tree_bytes({'w': np.zeros((3, 4), np.float32), 'b': np.zeros(4, np.float64)})
    80

    Args:
        tree: A tree of arrays or numbers.

    Returns:
        The total size of the leaves' data in bytes, a Python int.
    """
    import numpy as np

    total = 0
    for x in tree_leaves(tree):
        nbytes = getattr(x, "nbytes", None)
        total += int(np.asarray(x).nbytes if nbytes is None else nbytes)
    return total

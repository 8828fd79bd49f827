"""Reductions over trees of arrays (optax.tree_utils' names and argument orders): one number or
dtype from all the leaves.

Like :mod:`treekit.ops._tree_math`, every function uses the array module the leaves come from
(numpy, or ``jax.numpy`` for jax arrays and tracers), so numpy trees need no jax and jax trees
work under ``jit`` and ``grad``; the reduction order is optax's, so jax results equal optax's.
Public through :mod:`treekit.params`.
"""

from __future__ import annotations

import functools
import math
import operator
from typing import Any

from treekit.core import LeafPaths, describe_leaf, flatten, is_array, keystr, leaf_size
from treekit.ops._fold import tree_reduce, tree_reduce_associative
from treekit.ops._ops import tree_leaves, tree_map
from treekit.ops._tree_math import loaded_jax, namespace, zip_trees

__all__ = [
    "tree_allclose",
    "tree_bytes",
    "tree_dtype",
    "tree_max",
    "tree_min",
    "tree_norm",
    "tree_size",
    "tree_sum",
    "tree_vdot",
]


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
    vdots = zip_trees("tree_vdot: vdot(x, y)", lambda x, y: namespace(x, y).vdot(x, y), tree_x, {"tree_y": tree_y})
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
    xp = namespace(*tree_leaves(tree))
    ret: Any
    if ord is None or ord == 2:  # optax's operations, so jax results are bit-equal to optax's
        sqnorm = tree_sum(tree_map(_square, tree))
        return xp.asarray(sqnorm if squared else xp.sqrt(sqnorm))
    if ord == 1:
        ret = tree_sum(tree_map(lambda x: namespace(x).abs(x), tree))
    elif ord in (math.inf, "inf", "infinity"):
        ret = tree_max(tree_map(lambda x: namespace(x).abs(x), tree))
    else:
        raise ValueError(f"ord: expected None, 1, 2, inf, 'inf' or 'infinity', got {ord!r}")
    return xp.asarray(_square(ret) if squared else ret)


def _square(x: Any) -> Any:
    """``|x|**2`` entry by entry, as optax computes it (``real**2 + imag**2``)."""
    xp = namespace(x)
    return xp.square(xp.real(x)) + xp.square(xp.imag(x))


def _sizes(tree: Any, index: int, name: str, others: int = 0) -> int:
    """The sum of the leaves' :func:`~treekit.core._describe.leaf_size` entry ``index``, and
    ``others`` for each leaf that is no array."""
    leaves, treedef, _ = flatten(tree)
    total = 0
    for k, x in enumerate(leaves):
        value = leaf_size(x)[index] if is_array(x) else others
        if value is None:
            path = keystr(LeafPaths(tree, treedef)[k])
            raise ValueError(f"tree{path}: expected a leaf whose {name} is known, got {describe_leaf(x)}")
        total += value
    return total


def tree_size(tree: Any, *, arrays_only: bool = False) -> int:
    """The number of entries in ``tree``: the sum of its leaves' sizes (optax's ``tree_size``).

    As optax's (``jnp.size``), a leaf without shape and dtype (a Python number, a function, a
    string) counts 1. With ``arrays_only=True`` it counts 0, as :func:`treekit.summary` counts
    it (naming it) and as flax and equinox count parameters. See :doc:`params` ("What counts
    in sizes").

    >>> import numpy as np
    >>> tree = {'w': np.zeros((3, 4)), 'b': np.zeros(4), 'scale': np.float32(1), 'act': np.tanh}
    >>> tree_size(tree), tree_size(tree, arrays_only=True)
    (18, 17)

    Args:
        tree: A tree of arrays (numpy, jax, torch, ``ShapeDtypeStruct``, typed PRNG keys).
        arrays_only: Count arrays alone.

    Returns:
        The total number of entries, a Python int.

    Raises:
        ValueError: If an array's shape has a dim that is not an int (a symbolic one); the
            message names its key path.
    """
    return _sizes(tree, 0, "size", 0 if arrays_only else 1)


def tree_bytes(tree: Any) -> int:
    """The bytes the arrays in ``tree`` take: the sum of their ``nbytes`` (not in optax).

    A leaf without shape and dtype counts 0 (the rule of ``tree_size(arrays_only=True)``).

    >>> import numpy as np
    >>> tree_bytes({'w': np.zeros((3, 4), np.float32), 'b': np.zeros(4, np.float64), 'act': 'relu'})
    80

    Args:
        tree: A tree of arrays.

    Returns:
        The total size of the arrays' data in bytes, a Python int.

    Raises:
        ValueError: If an array's shape or dtype size is unknown (a symbolic dim); the
            message names its key path.
    """
    return _sizes(tree, 1, "size in bytes")


def tree_sum(tree: Any, associative_reduction: bool = False) -> Any:
    """The sum of all the entries of all the leaves (optax's signature).

    >>> import numpy as np
    >>> float(tree_sum({'w': np.array([[1.0, 2.0]]), 'b': np.array([3.5])}))
    6.5

    Args:
        tree: A tree of arrays or numbers.
        associative_reduction: Add the leaves' sums as a balanced tree (as
            :func:`~treekit.tree_reduce_associative`) instead of left to right; the result
            may differ in the last bits.

    Returns:
        A scalar of the leaves' array module; ``0`` for a tree without leaves.
    """
    sums = [namespace(x).sum(x) for x in tree_leaves(tree)]
    if associative_reduction:
        return tree_reduce_associative(operator.add, sums, identity=0)
    return functools.reduce(operator.add, sums, 0)


def _extreme(tree: Any, pick: str, start: float) -> Any:
    leaves = [x for x in tree_leaves(tree) if not is_array(x) or leaf_size(x)[0] != 0]
    xp = namespace(*leaves)
    reduce_leaf = getattr(xp, pick)
    combine = getattr(xp, "maximum" if pick == "max" else "minimum")
    return functools.reduce(combine, [reduce_leaf(x) for x in leaves], start)


def tree_max(tree: Any) -> Any:
    """The largest entry of all the leaves (optax's ``tree_max``); empty leaves are skipped.

    >>> import numpy as np
    >>> float(tree_max({'w': np.array([1.0, 7.0]), 'b': np.zeros(0), 'c': -2.0}))
    7.0

    Args:
        tree: A tree of arrays or numbers.

    Returns:
        A scalar of the leaves' array module; ``-inf`` for a tree without entries.
    """
    return _extreme(tree, "max", -math.inf)


def tree_min(tree: Any) -> Any:
    """The smallest entry of all the leaves (optax's ``tree_min``); empty leaves are skipped.

    >>> import numpy as np
    >>> float(tree_min({'w': np.array([1.0, 7.0]), 'c': -2.0}))
    -2.0

    Args:
        tree: A tree of arrays or numbers.

    Returns:
        A scalar of the leaves' array module; ``inf`` for a tree without entries.
    """
    return _extreme(tree, "min", math.inf)


def tree_equal(*pytrees: Any, typematch: bool = False, rtol: Any = 0.0, atol: Any = 0.0) -> Any:
    """Whether the trees are equal (equinox's ``tree_equal``): one structure, arrays of the same
    shape and dtype holding equal values (within ``rtol``/``atol``; NaN is not equal to NaN,
    as ``==``), other leaves equal by ``==``.

    ``True`` or ``False``, or a 0-d jax bool array where a leaf is a jax array (a traced one
    under ``jit`` too), as equinox.

    >>> import numpy as np
    >>> tree_equal({'w': np.ones(2), 'act': 'relu'}, {'w': np.ones(2), 'act': 'relu'})
    True
    >>> tree_equal([np.ones(2)], [np.ones(2, np.float32)])  # dtypes differ
    False
    >>> tree_equal([1], [1.0]), tree_equal([1], [1.0], typematch=True)
    (True, False)

    Args:
        *pytrees: The trees, compared with the first.
        typematch: Leaves must also have the same type.
        rtol: Relative tolerance for array values (``isclose``).
        atol: Absolute tolerance for array values.

    Returns:
        A bool, or a 0-d jax bool array.
    """
    from treekit.ops._partition import is_array as has_data  # (equinox's is_array: not a ShapeDtypeStruct)

    first, treedef, _ = flatten(pytrees[0])
    result: Any = True
    for tree in pytrees[1:]:
        leaves, other, _ = flatten(tree)
        if other != treedef:
            return False
        for x, y in zip(first, leaves):
            if (typematch and type(x) is not type(y)) or has_data(x) != has_data(y):
                return False
            if not has_data(x):  # (a ShapeDtypeStruct too, compared by ==, as equinox)
                if x != y:
                    return False
                continue
            if tuple(x.shape) != tuple(y.shape) or x.dtype != y.dtype:
                return False
            xp = namespace(x, y)
            same = xp.all(x == y) if (rtol == 0 and atol == 0) else xp.all(xp.isclose(x, y, rtol=rtol, atol=atol))
            if xp.__name__.startswith("numpy"):
                if not bool(same):
                    return False
            else:  # a jax array: the answer stays an array (traced under jit)
                result = result & same
    return result


def tree_allclose(a: Any, b: Any, rtol: Any = 1e-05, atol: Any = 1e-08, equal_nan: bool = False) -> Any:
    """Whether every leaf of ``a`` is ``allclose`` to the matching leaf of ``b`` (optax's).

    >>> import numpy as np
    >>> bool(tree_allclose({'w': np.array([1.0])}, {'w': np.array([1.0 + 1e-9])}))
    True
    >>> bool(tree_allclose([1.0, 2.0], [1.0, 2.5]))
    False

    Args:
        a: A tree of arrays or numbers.
        b: A tree of ``a``'s structure.
        rtol: The relative tolerance, as in ``numpy.allclose``.
        atol: The absolute tolerance.
        equal_nan: Count NaNs in the same places as equal.

    Returns:
        A bool (a 0-d bool array of the leaves' module); ``True`` for trees without leaves.

    Raises:
        StructureMismatchError: If ``b`` differs from ``a``; labelled ``b``.
    """

    def close(x: Any, y: Any) -> Any:
        return namespace(x, y).allclose(x, y, rtol=rtol, atol=atol, equal_nan=equal_nan)

    closes = zip_trees("tree_allclose: allclose(x, y)", close, a, {"b": b}, "a")
    return functools.reduce(operator.and_, tree_leaves(closes), True)


_DTYPE_HANDLERS = (None, "promote", "highest", "lowest")


def tree_dtype(tree: Any, mixed_dtype_handler: str | None = None) -> Any:
    """The dtype of the leaves (optax's ``tree_dtype``).

    >>> import numpy as np
    >>> tree = {'a': np.zeros(1, np.float16), 'b': np.zeros(1, np.float32)}
    >>> tree_dtype(tree, 'lowest'), tree_dtype(tree, 'highest'), tree_dtype(tree, 'promote')
    (dtype('float16'), dtype('float32'), dtype('float32'))

    Args:
        tree: A tree of arrays or numbers.
        mixed_dtype_handler: What to do when the leaves' dtypes differ: ``None`` raises,
            ``'promote'`` returns the dtype they all promote to, ``'highest'`` / ``'lowest'``
            the one every other promotes to / the one that promotes to every other.

    Returns:
        A dtype of the leaves' array module. For a tree without leaves, jax's default float
        (``float32`` unless x64 is on) where jax is imported, as optax; else numpy's
        (``float64``).

    Raises:
        ValueError: If the dtypes differ and ``mixed_dtype_handler`` is ``None``, or they
            have no highest (lowest) one; the message names the two leaves' key paths.
        TypeError: If ``mixed_dtype_handler`` is none of the above.
    """
    if mixed_dtype_handler not in _DTYPE_HANDLERS:
        raise TypeError(
            f"mixed_dtype_handler: expected None, 'promote', 'highest' or 'lowest', got {mixed_dtype_handler!r}"
        )
    leaves, treedef, _ = flatten(tree)
    paths = LeafPaths(tree, treedef)  # for the error's two leaves
    xp = namespace(*leaves)
    if not leaves:  # the default float: jax's where jax is loaded (float32 unless x64), as optax
        jax = loaded_jax()
        return jax.numpy.asarray(0.0).dtype if jax is not None else xp.asarray([]).dtype
    dtypes = [xp.asarray(x).dtype for x in leaves]
    if mixed_dtype_handler == "promote":
        return functools.reduce(xp.promote_types, dtypes)
    best, where = dtypes[0], 0
    for k, dtype in enumerate(dtypes[1:], 1):
        if dtype == best:
            continue
        if mixed_dtype_handler is None:
            raise ValueError(
                f"tree{keystr(paths[k])}: expected dtype {best} (the dtype of tree{keystr(paths[0])}), got {dtype}\n"
                "pass mixed_dtype_handler='promote', 'highest' or 'lowest' to allow mixed dtypes"
            )
        promoted = xp.promote_types(best, dtype)
        keep_best = promoted == best if mixed_dtype_handler == "highest" else promoted == dtype
        if promoted not in (best, dtype):
            raise ValueError(
                f"tree{keystr(paths[k])}: expected a dtype ordered by promotion with {best} "
                f"(the {mixed_dtype_handler} so far, at tree{keystr(paths[where])}), got {dtype}"
            )
        if not keep_best:
            best, where = dtype, k
    return best


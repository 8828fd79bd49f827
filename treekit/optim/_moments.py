"""The tree arithmetic of optimizer states: moment averages, bias correction, a saturating
count, and mapping over the params-shaped parts of a state.

optax.tree_utils' ``tree_update_moment``, ``tree_update_moment_per_elem_norm``,
``tree_update_infinity_moment``, ``tree_bias_correction`` and ``tree_map_params``, with optax's operations in
optax's order (so jax results are bit-equal), on numpy arrays too. ``None`` in the updates
(a frozen leaf) stays ``None``. Public through :mod:`treekit.optim`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from treekit.core import register_pytree_node
from treekit.ops import dtype_of, loaded_jax, namespace, tree_map

__all__ = [
    "safe_increment",
    "tree_bias_correction",
    "tree_map_params",
    "tree_update_infinity_moment",
    "tree_update_moment",
    "tree_update_moment_per_elem_norm",
]


def _is_none(x: Any) -> bool:
    return x is None


def safe_increment(count: Any) -> Any:
    """``count + 1``, except that the largest value of ``count``'s dtype stays as it is
    (optax's ``safe_increment``): an int32 step count saturates at ``2**31 - 1`` instead of
    wrapping to a negative number.

    >>> import numpy as np
    >>> int(safe_increment(np.int32(1))), int(safe_increment(np.int32(2**31 - 1)))
    (2, 2147483647)

    Args:
        count: An integer or floating-point scalar array.

    Returns:
        A scalar of ``count``'s dtype and array module.

    Raises:
        TypeError: If ``count``'s dtype is neither integer nor floating point.
    """
    xp = namespace(count)
    dtype = xp.asarray(count).dtype
    if xp.issubdtype(dtype, xp.integer):
        max_value = xp.iinfo(dtype).max
    elif xp.issubdtype(dtype, xp.floating):
        max_value = xp.finfo(dtype).max
    else:
        raise TypeError(f"count: expected an integer or floating-point scalar, got dtype {dtype}")
    top = xp.array(max_value, dtype)
    return xp.where(count < top, count + xp.array(1, dtype), top)


def tree_update_moment(updates: Any, moments: Any, decay: Any, order: Any) -> Any:
    """The exponential moving average of the ``order``-th power (optax's signature):
    ``(1 - decay) * g**order + decay * m`` at each leaf.

    >>> tree_update_moment({'w': 2.0}, {'w': 1.0}, 0.5, 2)
    {'w': 2.5}

    Args:
        updates: A tree of arrays (``None`` at frozen leaves).
        moments: The moments, a tree of ``updates``' structure.
        decay: The weight of the old moment.
        order: The power of the updates.

    Returns:
        The new moments, a tree of ``updates``' structure.
    """
    return tree_map(
        lambda g, t: None if g is None else (1 - decay) * (g**order) + decay * t, updates, moments, is_leaf=_is_none
    )


def tree_update_infinity_moment(updates: Any, moments: Any, decay: Any, eps: Any) -> Any:
    """The exponentially weighted infinity norm (optax's signature):
    ``maximum(|g| + eps, decay * m)`` at each leaf.

    >>> import numpy as np
    >>> tree_update_infinity_moment([np.array([-3.0, 0.5])], [np.array([1.0, 4.0])], 0.5, 0.0)
    [array([3., 2.])]

    Args:
        updates: A tree of arrays (``None`` at frozen leaves).
        moments: The moments, a tree of ``updates``' structure.
        decay: The weight of the old moment.
        eps: Added to ``|g|``.

    Returns:
        The new moments, a tree of ``updates``' structure.
    """

    def update(g: Any, t: Any) -> Any:
        if g is None:
            return None
        xp = namespace(g, t)
        return xp.maximum(xp.abs(g) + eps, decay * t)

    return tree_map(update, updates, moments, is_leaf=_is_none)


def tree_update_moment_per_elem_norm(updates: Any, moments: Any, decay: Any, order: Any) -> Any:
    """The moving average of the ``order``-th power of each entry's magnitude (optax's
    signature): as :func:`tree_update_moment`, with ``|g|**order`` for complex ``g``.

    >>> import numpy as np
    >>> tree_update_moment_per_elem_norm([np.array([3 + 4j])], [np.array([0.0])], 0.5, 2)
    [array([12.5])]

    Args:
        updates: A tree of arrays (``None`` at frozen leaves).
        moments: The moments, a tree of ``updates``' structure.
        decay: The weight of the old moment.
        order: The power of the magnitudes.

    Returns:
        The new moments, a tree of ``updates``' structure.
    """

    def orderth_norm(g: Any) -> Any:
        xp = namespace(g)
        if xp.isrealobj(g):
            return g**order
        half_order = order / 2
        if half_order.is_integer():  # jax traces int and float powers differently, as optax
            half_order = int(half_order)
        return (xp.real(g) ** 2 + xp.imag(g) ** 2) ** half_order

    return tree_map(
        lambda g, t: None if g is None else (1 - decay) * orderth_norm(g) + decay * t,
        updates,
        moments,
        is_leaf=_is_none,
    )


_JITTED: dict[str, Any] = {}


def _bias_correction(moment: Any, decay: Any, count: Any) -> Any:
    bias_correction = 1 - decay**count
    xp = namespace(bias_correction)
    return tree_map(lambda t: t / xp.asarray(bias_correction).astype(dtype_of(t)), moment)


def tree_bias_correction(moment: Any, decay: Any, count: Any) -> Any:
    """``moment / (1 - decay**count)`` at each leaf, in the leaf's dtype (optax's signature).

    On jax arrays this is one ``jax.jit`` over the whole tree, as optax's: outside jit, jax
    evaluates ``decay**count`` by repeated multiplication, and XLA may divide through a
    shared reciprocal, so anything else can differ from optax in the last bit.

    >>> import numpy as np
    >>> tree_bias_correction({'m': np.array([0.5], np.float32)}, 0.5, np.int32(1))
    {'m': array([1.], dtype=float32)}

    Args:
        moment: A tree of arrays.
        decay: The moment's decay.
        count: The step count, an integer scalar array (at least 1).

    Returns:
        The corrected moment, a tree of ``moment``'s structure.
    """
    jax = loaded_jax()
    if jax is None or namespace(count) is not jax.numpy:
        return _bias_correction(moment, decay, namespace(count).asarray(count))
    if "bias" not in _JITTED:
        _JITTED["bias"] = jax.jit(_bias_correction, inline=True)
    return _JITTED["bias"](moment, decay, count)


class ParamsPlaceholder:
    """Stands for the params in :func:`tree_map_params`: a node without leaves."""


register_pytree_node(ParamsPlaceholder, lambda x: ((), None), lambda _, __: ParamsPlaceholder())


def tree_map_params(
    initable: Any,
    f: Callable[..., Any],
    state: Any,
    /,
    *rest: Any,
    transform_non_params: Callable[..., Any] | None = None,
    is_leaf: Callable[[Any], bool] | None = None,
) -> Any:
    """``f`` over every params-shaped tree inside an optimizer state (optax's signature):
    e.g. to give the moments the params' sharding, or to cast them.

    >>> import numpy as np
    >>> from treekit.optim import adam
    >>> params = {'w': np.zeros(2)}
    >>> opt = adam(0.1)
    >>> state = tree_map_params(opt, lambda x: x.astype(np.float32), opt.init(params))
    >>> state[0].mu['w'].dtype, state[0].count.dtype
    (dtype('float32'), dtype('int32'))

    Args:
        initable: The optimizer (anything with ``init``) or its ``init`` function.
        f: Called per params leaf, with the matching leaves of ``rest``.
        state: A state of that optimizer.
        *rest: Trees of the params' structure.
        transform_non_params: Called on every other leaf of the state (the counts); ``None``
            keeps them.
        is_leaf: As in :func:`~treekit.tree_map`, for the params trees.

    Returns:
        A state of ``state``'s structure.
    """
    placeholder = ParamsPlaceholder()
    init = initable.init if hasattr(initable, "init") else initable
    with_placeholders = init(placeholder)

    def map_params(maybe_placeholder: Any, value: Any) -> Any:
        if isinstance(maybe_placeholder, ParamsPlaceholder):
            return tree_map(f, value, *rest, is_leaf=is_leaf)
        if transform_non_params is not None:
            return transform_non_params(value)
        return value

    return tree_map(map_params, with_placeholders, state, is_leaf=lambda v: isinstance(v, ParamsPlaceholder))

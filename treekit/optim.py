"""Optimizers as pure functions of trees, in optax's shape: ``sgd``, ``adam``, ``apply_updates``.

``opt = adam(1e-3)``; ``state = opt.init(params)``; ``updates, state = opt.update(grads, state,
params)``; ``params = apply_updates(params, updates)``. States are NamedTuples of trees, so they
go through ``jax.jit`` and ``jax.lax.scan`` as they are. The arithmetic is optax's, operation
for operation, so results equal optax's on the same inputs; it runs on numpy arrays without jax.
Also available from :mod:`treekit.params`.

>>> import numpy as np
>>> params = {'w': np.array([1.0, -2.0])}
>>> opt = sgd(0.1)
>>> state = opt.init(params)
>>> updates, state = opt.update({'w': np.array([1.0, 1.0])}, state, params)
>>> apply_updates(params, updates)
{'w': array([ 0.9, -2.1])}
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from treekit._ops import tree_leaves, tree_map
from treekit._traverse import flatten
from treekit._tree_math import loaded_jax, namespace, tree_zeros_like
from treekit._treedef import TreeDef

__all__ = ["AdamState", "GradientTransformation", "SgdState", "adam", "apply_updates", "sgd"]


class GradientTransformation(NamedTuple):
    """An optimizer: ``init(params) -> state`` and ``update(grads, state, params=None) ->
    (updates, state)``, as in optax."""

    init: Callable[[Any], Any]
    update: Callable[..., tuple[Any, Any]]


class SgdState(NamedTuple):
    """The state of :func:`sgd`: the momentum trace (``None``, a node without leaves, when
    there is no momentum)."""

    trace: Any


class AdamState(NamedTuple):
    """The state of :func:`adam`: the step ``count`` (an int32 scalar) and the first and
    second moment trees ``mu`` and ``nu``."""

    count: Any
    mu: Any
    nu: Any


def sgd(learning_rate: float, momentum: float | None = None) -> GradientTransformation:
    """Stochastic gradient descent, optionally with momentum (optax's ``sgd``).

    The updates are ``-learning_rate * g``, or with momentum ``-learning_rate * t`` where the
    trace ``t = g + momentum * t_previous``: optax's ``trace`` followed by
    ``scale_by_learning_rate``. The state differs in shape from optax's chain of two states.

    >>> import numpy as np
    >>> opt = sgd(0.5, momentum=0.9)
    >>> params = [np.array([0.0])]
    >>> state = opt.init(params)
    >>> for _ in range(2):
    ...     updates, state = opt.update([np.array([1.0])], state)
    ...     params = apply_updates(params, updates)
    >>> params, state.trace
    ([array([-1.45])], [array([1.9])])

    Args:
        learning_rate: The step size, a number (schedules are not supported).
        momentum: The trace's decay; ``None`` for plain SGD, which keeps no trace.

    Returns:
        The optimizer: ``init(params) -> SgdState`` and ``update(grads, state, params=None)
        -> (updates, state)``; ``update`` raises StructureMismatchError labelled ``grads``
        if the gradients differ from the params' structure.
    """
    step = -learning_rate

    def init(params: Any) -> SgdState:
        return SgdState(None if momentum is None else tree_zeros_like(params))

    def update(grads: Any, state: SgdState, params: Any = None) -> tuple[Any, SgdState]:
        if momentum is None:
            return tree_map(lambda g: step * g, grads), state
        treedef, traces, gs = _against(state.trace, grads)
        traces = [g + momentum * t for g, t in zip(gs, traces)]
        return treedef._build([step * t for t in traces]), SgdState(treedef._build(traces))

    return GradientTransformation(init, update)


def adam(learning_rate: float, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> GradientTransformation:
    """Adam (Kingma and Ba, 2014), with optax's arithmetic and defaults (optax's ``adam``).

    ``mu = (1 - b1) * g + b1 * mu``, ``nu = (1 - b2) * g**2 + b2 * nu``, and the update is
    ``-learning_rate * mu_hat / (sqrt(nu_hat) + eps)`` with the bias corrections
    ``mu_hat = mu / (1 - b1**count)``, ``nu_hat = nu / (1 - b2**count)`` computed as optax
    does. Real-valued leaves only; no ``eps_root``, ``mu_dtype`` or Nesterov variant.

    >>> import numpy as np
    >>> opt = adam(0.1)
    >>> params = {'w': np.array([1.0, 1.0])}
    >>> state = opt.init(params)
    >>> updates, state = opt.update({'w': np.array([3.0, -0.5])}, state, params)
    >>> apply_updates(params, updates), int(state.count)
    ({'w': array([0.9, 1.1])}, 1)

    Args:
        learning_rate: The step size, a number (schedules are not supported).
        b1: The decay of the first moment (the mean of the gradients).
        b2: The decay of the second moment (the mean of their squares).
        eps: Added to ``sqrt(nu_hat)`` so that the division is safe.

    Returns:
        The optimizer: ``init(params) -> AdamState`` and ``update(grads, state, params=None)
        -> (updates, state)``; ``update`` raises StructureMismatchError labelled ``grads``
        if the gradients differ from the params' structure.
    """

    def init(params: Any) -> AdamState:
        xp = namespace(*tree_leaves(params))
        return AdamState(xp.zeros((), dtype=xp.int32), tree_zeros_like(params), tree_zeros_like(params))

    def update(grads: Any, state: AdamState, params: Any = None) -> tuple[Any, AdamState]:
        treedef, mus, gs = _against(state.mu, grads)
        mu = treedef._build([(1 - b1) * g + b1 * m for g, m in zip(gs, mus)])
        nu = treedef._build([(1 - b2) * (g**2) + b2 * v for g, v in zip(gs, flatten(state.nu)[0])])
        count = state.count + 1
        xp = namespace(count)
        mu_hat = _bias_corrected(xp, mu, b1, count)
        nu_hat = _bias_corrected(xp, nu, b2, count)
        updates = tree_map(lambda m, v: -learning_rate * (m / (xp.sqrt(v) + eps)), mu_hat, nu_hat)
        return updates, AdamState(count, mu, nu)

    return GradientTransformation(init, update)


def _against(state_tree: Any, grads: Any) -> tuple[TreeDef, list[Any], list[Any]]:
    """The structure and leaves of ``state_tree``, and the leaves of ``grads`` matched to them.

    A mismatch raises StructureMismatchError labelled ``grads``.
    """
    leaves, treedef, _ = flatten(state_tree)
    return treedef, leaves, treedef._walk(grads, "grads", strict=True)


_JITTED: dict[str, Any] = {}


def _bias_corrected(xp: Any, moment: Any, decay: float, count: Any) -> Any:
    """``moment / (1 - decay**count)``, leaf by leaf, computed as optax computes it.

    For jax arrays that is one ``jax.jit`` over the whole tree, as optax's
    ``tree_bias_correction``: outside jit, jax evaluates ``decay**count`` by repeated
    multiplication, and XLA may divide by a shared denominator through its reciprocal, so
    anything else can differ from optax in the last bit.
    """
    jax = loaded_jax()
    if jax is None or xp is not jax.numpy:
        correction = xp.asarray(1 - decay**count)
        return tree_map(lambda t: t / correction.astype(t.dtype), moment)
    if "bias" not in _JITTED:

        def corrected(moment: Any, decay: Any, count: Any) -> Any:
            correction = 1 - decay**count
            return tree_map(lambda t: t / correction.astype(t.dtype), moment)

        _JITTED["bias"] = jax.jit(corrected)
    return _JITTED["bias"](moment, decay, count)


def apply_updates(params: Any, updates: Any) -> Any:
    """``params + updates``, leaf by leaf, each result cast to its parameter's dtype (optax's).

    >>> import numpy as np
    >>> apply_updates({'w': np.array([1.0], np.float32)}, {'w': np.array([0.5])})
    {'w': array([1.5], dtype=float32)}

    Args:
        params: A tree of arrays.
        updates: A tree of ``params``' structure (``None`` where ``params`` has ``None``).

    Returns:
        The new params, each leaf an array of its old dtype.

    Raises:
        StructureMismatchError: If ``updates`` differs from ``params``; labelled ``updates``.
    """
    leaves, treedef, _ = flatten(params)
    out = []
    for p, u in zip(leaves, treedef._walk(updates, "updates", strict=True)):
        new = p + u
        if type(new) is not type(p) or new.dtype != p.dtype:  # as optax: an array of p's dtype
            xp = namespace(p, u)
            new = xp.asarray(new).astype(xp.asarray(p).dtype)
        out.append(new)
    return treedef._build(out)

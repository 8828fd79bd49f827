"""The building blocks of optimizers, in optax's shape: GradientTransformation, its states, and
the transformations chained into sgd, adam and adamw (public through :mod:`treekit.optim`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Union

from treekit.core import flatten
from treekit.ops import (
    dtype_of,
    loaded_jax,
    namespace,
    tree_cast,
    tree_cast_like,
    tree_leaves,
    tree_map,
    tree_norm,
    tree_zeros_like,
)
from treekit.optim._moments import (
    ParamsPlaceholder,
    safe_increment,
    tree_bias_correction,
    tree_update_moment,
    tree_update_moment_per_elem_norm,
)

__all__ = [
    "EmptyState",
    "GradientTransformation",
    "MaskedNode",
    "MaskedState",
    "ScaleByAdamState",
    "ScaleByScheduleState",
    "ScalarOrSchedule",
    "TraceState",
    "WeightDecaySchedule",
    "add_decayed_weights",
    "chain",
    "clip_by_global_norm",
    "identity",
    "masked",
    "scale",
    "scale_by_adam",
    "scale_by_learning_rate",
    "scale_by_schedule",
    "trace",
]


ScalarOrSchedule = Union[float, Callable[[Any], Any]]


class GradientTransformation(NamedTuple):
    """An optimizer: ``init(params) -> state`` and ``update(updates, state, params=None) ->
    (updates, state)``, as in optax."""

    init: Callable[[Any], Any]
    update: Callable[..., tuple[Any, Any]]


class EmptyState(NamedTuple):
    """The state of a transformation that keeps none (a node without leaves)."""


class TraceState(NamedTuple):
    """The state of :func:`trace`: the momentum ``trace``, a tree of the params' structure."""

    trace: Any


class ScaleByAdamState(NamedTuple):
    """The state of :func:`scale_by_adam`: the step ``count`` (an int32 scalar that stops at
    ``2**31 - 1``) and the moment trees ``mu`` and ``nu``."""

    count: Any
    mu: Any
    nu: Any


class ScaleByScheduleState(NamedTuple):
    """The state of :func:`scale_by_schedule`: the step ``count`` the schedule is called with."""

    count: Any


class WeightDecaySchedule(NamedTuple):
    """The state of :func:`add_decayed_weights` with a scheduled weight decay: the ``count``."""

    count: Any


class MaskedState(NamedTuple):
    """The state of :func:`masked`: the inner transformation's state."""

    inner_state: Any


class MaskedNode(NamedTuple):
    """What :func:`masked` puts in place of the leaves its mask leaves out (a node without
    leaves, so the inner transformation skips them)."""


def _check_transformation(label: str, t: Any) -> None:
    if not (callable(getattr(t, "init", None)) and callable(getattr(t, "update", None))):
        raise TypeError(
            f"{label}: expected a GradientTransformation (callable init and update), got {type(t).__name__}"
        )


def _zeros_count(params: Any) -> Any:
    xp = namespace(*tree_leaves(params))
    return xp.zeros((), dtype=xp.int32)


def identity() -> GradientTransformation:
    """The transformation that returns the updates unchanged and keeps no state.

    >>> identity().update([1.0], EmptyState())
    ([1.0], EmptyState())

    Returns:
        The transformation.
    """
    return GradientTransformation(lambda params: EmptyState(), lambda updates, state, params=None: (updates, state))


def chain(*transformations: GradientTransformation) -> GradientTransformation:
    """The transformations applied one after the other; the state is the tuple of theirs
    (optax's ``chain``).

    >>> opt = chain(scale(2.0), scale(-0.5))
    >>> opt.update([4.0], opt.init([0.0]))
    ([-4.0], (EmptyState(), EmptyState()))

    Args:
        *transformations: Transformations, applied left to right.

    Returns:
        The transformation; its ``update`` raises ValueError if the state is not a tuple of
        one state per transformation.

    Raises:
        TypeError: If one of ``transformations`` is not a transformation (no ``init`` and
            ``update``); the message names which.
    """
    for k, t in enumerate(transformations):
        _check_transformation(f"transformations[{k}]", t)
    init_fns = [t.init for t in transformations]
    update_fns = [t.update for t in transformations]

    def init(params: Any) -> tuple[Any, ...]:
        return tuple(fn(params) for fn in init_fns)

    def update(updates: Any, state: Any, params: Any = None) -> tuple[Any, tuple[Any, ...]]:
        if not isinstance(state, tuple) or len(state) != len(update_fns):
            got = f"tuple of length {len(state)}" if isinstance(state, tuple) else type(state).__name__
            raise ValueError(f"state: expected a tuple of {len(update_fns)} states (one per transformation), got {got}")
        new_state = []
        for s, fn in zip(state, update_fns):
            updates, s = fn(updates, s, params)
            new_state.append(s)
        return updates, tuple(new_state)

    return GradientTransformation(init, update)


def scale(step_size: Any) -> GradientTransformation:
    """Multiply the updates by ``step_size`` (optax's ``scale``).

    >>> scale(0.5).update({'w': 3.0}, EmptyState())
    ({'w': 1.5}, EmptyState())

    Args:
        step_size: A number or scalar array.

    Returns:
        The transformation (state :class:`EmptyState`).
    """

    def update(updates: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        return tree_map(lambda g: step_size * g, updates), state

    return GradientTransformation(lambda params: EmptyState(), update)


def scale_by_schedule(step_size_fn: Callable[[Any], Any]) -> GradientTransformation:
    """Multiply the updates by ``step_size_fn(count)``, then count the step (optax's).

    >>> import numpy as np
    >>> opt = scale_by_schedule(lambda count: 1.0 / (count + 1))
    >>> state = opt.init({'w': np.zeros(1)})
    >>> for _ in range(2):
    ...     updates, state = opt.update({'w': np.ones(1)}, state)
    >>> updates, int(state.count)
    ({'w': array([0.5])}, 2)

    Args:
        step_size_fn: A schedule: a function of the step count (from 0).

    Returns:
        The transformation (state :class:`ScaleByScheduleState`).
    """

    def init(params: Any) -> ScaleByScheduleState:
        return ScaleByScheduleState(_zeros_count(params))

    def update(updates: Any, state: ScaleByScheduleState, params: Any = None) -> tuple[Any, ScaleByScheduleState]:
        step_size = step_size_fn(state.count)
        updates = tree_map(lambda g: namespace(g, step_size).array(step_size, dtype=dtype_of(g)) * g, updates)
        return updates, ScaleByScheduleState(safe_increment(state.count))

    return GradientTransformation(init, update)


def scale_by_learning_rate(
    learning_rate: ScalarOrSchedule | None = None, *, flip_sign: bool = True
) -> GradientTransformation:
    """Multiply the updates by ``-learning_rate`` (optax's; a schedule is called per step).

    >>> scale_by_learning_rate(0.1).update([2.0], EmptyState())
    ([-0.2], EmptyState())

    Args:
        learning_rate: A number, a schedule, or ``None`` for :func:`identity`.
        flip_sign: Descend (multiply by ``-learning_rate``); ``False`` keeps the sign.

    Returns:
        The transformation.
    """
    if learning_rate is None:
        return identity()
    m = -1 if flip_sign else 1
    if callable(learning_rate):
        schedule = learning_rate
        return scale_by_schedule(lambda count: m * schedule(count))
    return scale(m * learning_rate)


def trace(decay: Any, nesterov: bool = False, accumulator_dtype: Any = None) -> GradientTransformation:
    """Momentum: ``t = g + decay * t_previous``; the updates are ``t`` (or, with Nesterov,
    ``g + decay * t``), as optax's ``trace``.

    >>> import numpy as np
    >>> opt = trace(0.9)
    >>> state = opt.init([np.zeros(1)])
    >>> for _ in range(2):
    ...     updates, state = opt.update([np.ones(1)], state)
    >>> updates
    [array([1.9])]

    Args:
        decay: The momentum.
        nesterov: Use Nesterov momentum.
        accumulator_dtype: The dtype of the trace; ``None`` keeps the params'.

    Returns:
        The transformation (state :class:`TraceState`); ``update`` raises
        StructureMismatchError labelled ``grads`` if the updates differ from the trace.
    """

    def init(params: Any) -> TraceState:
        return TraceState(tree_zeros_like(params, dtype=accumulator_dtype))

    def update(updates: Any, state: TraceState, params: Any = None) -> tuple[Any, TraceState]:
        def f(g: Any, t: Any) -> Any:
            return g + decay * t

        trace = _against(state.trace, updates)
        new_trace = tree_map(lambda g, t: None if g is None else f(g, t), updates, trace, is_leaf=_is_none)
        updates = tree_map(f, updates, new_trace) if nesterov else new_trace
        return updates, TraceState(tree_cast(new_trace, accumulator_dtype))

    return GradientTransformation(init, update)


def _is_none(x: Any) -> bool:
    return x is None


def scale_by_adam(
    b1: Any = 0.9,
    b2: Any = 0.999,
    eps: Any = 1e-8,
    eps_root: Any = 0.0,
    mu_dtype: Any = None,
    *,
    nesterov: bool = False,
) -> GradientTransformation:
    """Adam's rescaling (Kingma and Ba, 2014), optax's ``scale_by_adam``: the update is
    ``mu_hat / (sqrt(nu_hat + eps_root) + eps)`` with bias-corrected moment averages.

    The step count saturates at ``2**31 - 1`` (:func:`safe_increment`), as in optax.

    >>> import numpy as np
    >>> opt = scale_by_adam()
    >>> updates, state = opt.update([np.array([3.0])], opt.init([np.zeros(1)]))
    >>> np.round(updates[0], 6), int(state.count)
    (array([1.]), 1)

    Args:
        b1: The decay of the first moment (the mean of the gradients).
        b2: The decay of the second moment (the mean of their squared magnitudes).
        eps: Added to the root of the second moment.
        eps_root: Added to the second moment under the root.
        mu_dtype: The dtype of the first moment; ``None`` keeps the params'.
        nesterov: Use Nesterov momentum (NAdam).

    Returns:
        The transformation (state :class:`ScaleByAdamState`).
    """

    def init(params: Any) -> ScaleByAdamState:
        return ScaleByAdamState(_zeros_count(params), tree_zeros_like(params, dtype=mu_dtype), tree_zeros_like(params))

    def update(updates: Any, state: ScaleByAdamState, params: Any = None) -> tuple[Any, ScaleByAdamState]:
        mu = tree_update_moment(updates, _against(state.mu, updates), b1, 1)
        nu = tree_update_moment_per_elem_norm(updates, state.nu, b2, 2)
        count_inc = safe_increment(state.count)
        if nesterov:
            mu_hat = tree_map(
                lambda m, g: b1 * m + (1 - b1) * g,
                tree_bias_correction(mu, b1, safe_increment(count_inc)),
                tree_bias_correction(updates, b1, count_inc),
            )
        else:
            mu_hat = tree_bias_correction(mu, b1, count_inc)
        nu_hat = tree_bias_correction(nu, b2, count_inc)
        updates = tree_map(
            lambda m, v: None if m is None else m / (namespace(v).sqrt(v + eps_root) + eps),
            mu_hat,
            nu_hat,
            is_leaf=_is_none,
        )
        return updates, ScaleByAdamState(count_inc, tree_cast(mu, mu_dtype), tree_cast_like(nu, state.nu))

    return GradientTransformation(init, update)


def _against(state_tree: Any, grads: Any) -> Any:
    """``state_tree``, after checking that ``grads`` has its structure (labelled ``grads``)."""
    _, treedef, _ = flatten(state_tree)
    treedef._guide(grads, "grads", strict=True)
    return state_tree


def masked(inner: GradientTransformation, mask: Any) -> GradientTransformation:
    """Apply ``inner`` only to the leaves where ``mask`` is true; the others pass unchanged
    (optax's ``masked``).

    >>> opt = masked(scale(0.0), {'w': True, 'b': False})
    >>> opt.update({'w': 1.0, 'b': 2.0}, opt.init({'w': 0.0, 'b': 0.0}))[0]
    {'w': 0.0, 'b': 2.0}

    Args:
        inner: The transformation to apply.
        mask: A tree of bools whose structure is a prefix of the params' (``True`` selects a
            whole subtree), or a function ``params -> mask`` (called with the updates in
            ``update``).

    Returns:
        The transformation (state :class:`MaskedState`).

    Raises:
        TypeError: If ``inner`` is not a transformation.
    """
    _check_transformation("inner", inner)

    def mask_tree(tree: Any, mask_tree: Any) -> Any:
        return tree_map(lambda m, p: p if m else MaskedNode(), mask_tree, tree)

    def init(params: Any) -> MaskedState:
        if isinstance(params, ParamsPlaceholder):
            return MaskedState(inner.init(params))
        m = mask(params) if callable(mask) else mask
        return MaskedState(inner.init(mask_tree(params, m)))

    def update(updates: Any, state: MaskedState, params: Any = None) -> tuple[Any, MaskedState]:
        m = mask(updates) if callable(mask) else mask
        masked_params = None if params is None else mask_tree(params, m)
        new_updates, inner_state = inner.update(mask_tree(updates, m), state.inner_state, masked_params)
        new_updates = tree_map(lambda keep, new, old: new if keep else old, m, new_updates, updates)
        return new_updates, MaskedState(inner_state)

    return GradientTransformation(init, update)


def add_decayed_weights(weight_decay: ScalarOrSchedule = 0.0, mask: Any = None) -> GradientTransformation:
    """Add ``weight_decay * params`` to the updates: decoupled weight decay (optax's).

    >>> add_decayed_weights(0.1).update({'w': 1.0}, EmptyState(), {'w': 5.0})
    ({'w': 1.5}, EmptyState())

    Args:
        weight_decay: A number or a schedule.
        mask: Decay only where this tree of bools (or function of the params giving one) is
            true, as :func:`masked`; typically ``lambda p: tree_map(lambda x: x.ndim > 1, p)``
            to spare biases and norms.

    Returns:
        The transformation; ``update`` raises ValueError without ``params``.
    """

    def init(params: Any) -> Any:
        return WeightDecaySchedule(_zeros_count(params)) if callable(weight_decay) else EmptyState()

    def update(updates: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        if params is None:
            raise ValueError("params: expected the params (add_decayed_weights needs them), got None")
        new_state = WeightDecaySchedule(safe_increment(state.count)) if callable(weight_decay) else state
        if isinstance(weight_decay, (int, float)) and weight_decay == 0.0:
            return updates, new_state
        s = weight_decay(state.count) if callable(weight_decay) else weight_decay
        updates = tree_map(lambda g, p: None if g is None else g + s * p, updates, params, is_leaf=_is_none)
        return updates, new_state

    if mask is not None:
        return masked(GradientTransformation(init, update), mask)
    return GradientTransformation(init, update)


def clip_by_global_norm(max_norm: Any) -> GradientTransformation:
    """Scale the updates down to global norm ``max_norm`` when it is larger (optax's;
    Pascanu et al., 2012). The norm is :func:`~treekit.tree_norm` of all the updates.

    >>> import numpy as np
    >>> clip_by_global_norm(1.0).update({'w': np.array([3.0, 4.0])}, EmptyState())[0]
    {'w': array([0.6, 0.8])}

    Args:
        max_norm: The largest global norm let through unchanged.

    Returns:
        The transformation (state :class:`EmptyState`).
    """

    def update(updates: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        g_norm = tree_norm(updates)
        xp = namespace(g_norm)
        trigger = xp.squeeze(g_norm < max_norm)
        jax = loaded_jax()
        select = jax.lax.select if jax is not None and xp is jax.numpy else xp.where

        def clip(t: Any) -> Any:
            return select(trigger, t, t / xp.asarray(g_norm).astype(dtype_of(t)) * max_norm)

        return tree_map(clip, updates), state

    return GradientTransformation(lambda params: EmptyState(), update)


for _public in (
    GradientTransformation,
    EmptyState,
    TraceState,
    ScaleByAdamState,
    ScaleByScheduleState,
    WeightDecaySchedule,
    MaskedState,
    MaskedNode,
):
    _public.__module__ = "treekit.optim"  # (their public name: reprs, pickles and saved files say it)

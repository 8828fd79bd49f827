"""The optimizers: sgd, adam, adamw, apply_updates; the public names of treekit.optim (its docstring says how)."""

from __future__ import annotations

from typing import Any

from treekit.core import describe_leaf, flatten, keystr
from treekit.ops import dtype_of, namespace, tree_leaves_with_path
from treekit.optim._moments import safe_increment as safe_increment
from treekit.optim._moments import tree_bias_correction as tree_bias_correction
from treekit.optim._moments import tree_map_params as tree_map_params
from treekit.optim._moments import tree_update_infinity_moment as tree_update_infinity_moment
from treekit.optim._moments import tree_update_moment as tree_update_moment
from treekit.optim._moments import tree_update_moment_per_elem_norm as tree_update_moment_per_elem_norm
from treekit.optim._transforms import EmptyState as EmptyState
from treekit.optim._transforms import GradientTransformation as GradientTransformation
from treekit.optim._transforms import MaskedNode as MaskedNode
from treekit.optim._transforms import MaskedState as MaskedState
from treekit.optim._transforms import ScalarOrSchedule as ScalarOrSchedule
from treekit.optim._transforms import ScaleByAdamState as ScaleByAdamState
from treekit.optim._transforms import ScaleByScheduleState as ScaleByScheduleState
from treekit.optim._transforms import TraceState as TraceState
from treekit.optim._transforms import WeightDecaySchedule as WeightDecaySchedule
from treekit.optim._transforms import add_decayed_weights as add_decayed_weights
from treekit.optim._transforms import chain as chain
from treekit.optim._transforms import clip_by_global_norm as clip_by_global_norm
from treekit.optim._transforms import identity as identity
from treekit.optim._transforms import masked as masked
from treekit.optim._transforms import scale as scale
from treekit.optim._transforms import scale_by_adam as scale_by_adam
from treekit.optim._transforms import scale_by_learning_rate as scale_by_learning_rate
from treekit.optim._transforms import scale_by_schedule as scale_by_schedule
from treekit.optim._transforms import trace as trace

# The public names are listed once, in treekit.optim's __all__.

"""A number, or a schedule (a function of the step count, see :mod:`treekit.schedules`)."""


def sgd(learning_rate: ScalarOrSchedule, momentum: Any = None, nesterov: bool = False) -> GradientTransformation:
    """Stochastic gradient descent, with optional (Nesterov) momentum (optax's ``sgd``):
    ``chain(trace(momentum, nesterov), scale_by_learning_rate(learning_rate))``.

    >>> import numpy as np
    >>> opt = sgd(0.5, momentum=0.9)
    >>> params = [np.array([0.0])]
    >>> state = opt.init(params)
    >>> for _ in range(2):
    ...     updates, state = opt.update([np.array([1.0])], state)
    ...     params = apply_updates(params, updates)
    >>> params, state[0].trace
    ([array([-1.45])], [array([1.9])])

    Args:
        learning_rate: The step size: a number or a schedule.
        momentum: The trace's decay; ``None`` for plain SGD (no trace kept).
        nesterov: Use Nesterov momentum.

    Returns:
        The optimizer; its state is ``(TraceState or EmptyState, EmptyState or
        ScaleByScheduleState)``, as optax's.
    """
    first = identity() if momentum is None else trace(momentum, nesterov)
    return chain(first, scale_by_learning_rate(learning_rate))


def adam(
    learning_rate: ScalarOrSchedule,
    b1: Any = 0.9,
    b2: Any = 0.999,
    eps: Any = 1e-8,
    eps_root: Any = 0.0,
    mu_dtype: Any = None,
    *,
    nesterov: bool = False,
) -> GradientTransformation:
    """Adam, with optax's arithmetic and defaults: ``chain(scale_by_adam(...),
    scale_by_learning_rate(learning_rate))``.

    >>> import numpy as np
    >>> opt = adam(0.1)
    >>> params = {'w': np.array([1.0, 1.0])}
    >>> state = opt.init(params)
    >>> updates, state = opt.update({'w': np.array([3.0, -0.5])}, state, params)
    >>> apply_updates(params, updates), int(state[0].count)
    ({'w': array([0.9, 1.1])}, 1)

    Args:
        learning_rate: The step size: a number or a schedule.
        b1: See :func:`scale_by_adam`.
        b2: See :func:`scale_by_adam`.
        eps: See :func:`scale_by_adam`.
        eps_root: See :func:`scale_by_adam`.
        mu_dtype: See :func:`scale_by_adam`.
        nesterov: See :func:`scale_by_adam`.

    Returns:
        The optimizer; its state is ``(ScaleByAdamState, EmptyState or
        ScaleByScheduleState)``; ``update`` raises StructureMismatchError labelled ``grads``
        if the gradients differ from the params' structure.
    """
    return chain(
        scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov), scale_by_learning_rate(learning_rate)
    )


def adamw(
    learning_rate: ScalarOrSchedule,
    b1: Any = 0.9,
    b2: Any = 0.999,
    eps: Any = 1e-8,
    eps_root: Any = 0.0,
    mu_dtype: Any = None,
    weight_decay: ScalarOrSchedule = 1e-4,
    mask: Any = None,
    *,
    nesterov: bool = False,
) -> GradientTransformation:
    """Adam with decoupled weight decay (Loshchilov and Hutter, 2019), optax's ``adamw``:
    ``chain(scale_by_adam(...), add_decayed_weights(weight_decay, mask),
    scale_by_learning_rate(learning_rate))``.

    >>> import numpy as np
    >>> from treekit import tree_map
    >>> params = {'w': np.ones((2, 2)), 'b': np.ones(2)}
    >>> opt = adamw(0.1, weight_decay=0.5, mask=lambda p: tree_map(lambda x: x.ndim > 1, p))
    >>> updates, _ = opt.update(tree_map(np.zeros_like, params), opt.init(params), params)
    >>> updates['w'][0], updates['b']
    (array([-0.05, -0.05]), array([-0., -0.]))

    Args:
        learning_rate: The step size: a number or a schedule.
        b1: See :func:`scale_by_adam`.
        b2: See :func:`scale_by_adam`.
        eps: See :func:`scale_by_adam`.
        eps_root: See :func:`scale_by_adam`.
        mu_dtype: See :func:`scale_by_adam`.
        weight_decay: The decay, a number or a schedule (multiplied by the learning rate).
        mask: Where to decay, as in :func:`add_decayed_weights`.
        nesterov: See :func:`scale_by_adam`.

    Returns:
        The optimizer; its state is ``(ScaleByAdamState, EmptyState or MaskedState,
        EmptyState or ScaleByScheduleState)``, as optax's.
    """
    return chain(
        scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov),
        add_decayed_weights(weight_decay, mask),
        scale_by_learning_rate(learning_rate),
    )


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
    for j, (p, u) in enumerate(zip(leaves, treedef._guide(updates, "updates", strict=True))):
        try:
            new = p + u
            if type(new) is not type(p) or dtype_of(new) != dtype_of(p):  # as optax: an array of p's dtype
                xp = namespace(p, u)
                new = xp.asarray(new).astype(xp.asarray(p).dtype)
        except (TypeError, ValueError, AttributeError) as exc:
            path = keystr(tree_leaves_with_path(params)[j][0])
            raise (ValueError if isinstance(exc, ValueError) else TypeError)(
                f"updates{path}: expected an update that adds to params{path} ({_what(p)}), got {_what(u)}: {exc}"
            ) from exc
        out.append(new)
    return treedef._build(out)


def _what(x: Any) -> str:
    return describe_leaf(x) if hasattr(x, "dtype") else type(x).__name__

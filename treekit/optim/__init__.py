# Lives here: _transforms.py (the building blocks, chain), _optimizers.py (sgd, adam, adamw),
# _moments.py, _schedules.py (treekit.schedules re-exports it), _mlp.py (the demo's MLP).
# May import: core, ops. Start at _transforms.py.
"""Optimizers as pure functions of trees, in optax's shape: small transformations and ``chain``.

``opt = adam(1e-3)``; ``state = opt.init(params)``; ``updates, state = opt.update(grads, state,
params)``; ``params = apply_updates(params, updates)``. An optimizer is a
:class:`GradientTransformation`; ``sgd``, ``adam`` and ``adamw`` are chains of the building
blocks below, built as optax builds them, so their states have optax's shape (tuples of
NamedTuples of trees, which go through ``jax.jit`` and ``jax.lax.scan`` as they are) and their
results equal optax's bit for bit on jax arrays, eagerly and under ``jit``. The same code runs
on numpy arrays without jax (float64 arithmetic on the Python numbers, so results are close
to optax's, not equal: within ``rtol=2e-6`` after a few float32 steps in the tests).
Every learning rate (and weight decay) may be a number or a schedule, a function of the step
count (see :mod:`treekit.schedules`). Also available from :mod:`treekit.params`.

>>> import numpy as np
>>> from treekit.schedules import linear_schedule
>>> params = {'w': np.array([1.0, -2.0])}
>>> opt = chain(clip_by_global_norm(1.0), sgd(linear_schedule(0.1, 0.0, transition_steps=10)))
>>> state = opt.init(params)
>>> updates, state = opt.update({'w': np.array([3.0, 4.0])}, state, params)
>>> apply_updates(params, updates)
{'w': array([ 0.94, -2.08])}
"""

# Importable from treekit.optim before 0.3, when optim.py imported them for its own use:
from treekit.core import describe_leaf as describe_leaf
from treekit.core import flatten as flatten
from treekit.core import keystr as keystr
from treekit.ops import dtype_of as dtype_of
from treekit.ops import namespace as namespace
from treekit.ops import tree_leaves_with_path as tree_leaves_with_path
from treekit.optim._mlp import init_mlp_params as init_mlp_params
from treekit.optim._mlp import mlp_forward as mlp_forward
from treekit.optim._mlp import mse_loss as mse_loss
from treekit.optim._mlp import mse_loss_and_grad as mse_loss_and_grad
from treekit.optim._optimizers import EmptyState as EmptyState
from treekit.optim._optimizers import GradientTransformation as GradientTransformation
from treekit.optim._optimizers import MaskedNode as MaskedNode
from treekit.optim._optimizers import MaskedState as MaskedState
from treekit.optim._optimizers import ScalarOrSchedule as ScalarOrSchedule
from treekit.optim._optimizers import ScaleByAdamState as ScaleByAdamState
from treekit.optim._optimizers import ScaleByScheduleState as ScaleByScheduleState
from treekit.optim._optimizers import TraceState as TraceState
from treekit.optim._optimizers import WeightDecaySchedule as WeightDecaySchedule
from treekit.optim._optimizers import adam as adam
from treekit.optim._optimizers import adamw as adamw
from treekit.optim._optimizers import add_decayed_weights as add_decayed_weights
from treekit.optim._optimizers import apply_updates as apply_updates
from treekit.optim._optimizers import chain as chain
from treekit.optim._optimizers import clip_by_global_norm as clip_by_global_norm
from treekit.optim._optimizers import identity as identity
from treekit.optim._optimizers import masked as masked
from treekit.optim._optimizers import safe_increment as safe_increment
from treekit.optim._optimizers import scale as scale
from treekit.optim._optimizers import scale_by_adam as scale_by_adam
from treekit.optim._optimizers import scale_by_learning_rate as scale_by_learning_rate
from treekit.optim._optimizers import scale_by_schedule as scale_by_schedule
from treekit.optim._optimizers import sgd as sgd
from treekit.optim._optimizers import trace as trace
from treekit.optim._optimizers import tree_bias_correction as tree_bias_correction
from treekit.optim._optimizers import tree_map_params as tree_map_params
from treekit.optim._optimizers import tree_update_infinity_moment as tree_update_infinity_moment
from treekit.optim._optimizers import tree_update_moment as tree_update_moment
from treekit.optim._optimizers import tree_update_moment_per_elem_norm as tree_update_moment_per_elem_norm
from treekit.optim._schedules import Schedule as Schedule
from treekit.optim._schedules import constant_schedule as constant_schedule
from treekit.optim._schedules import cosine_decay_schedule as cosine_decay_schedule
from treekit.optim._schedules import exponential_decay as exponential_decay
from treekit.optim._schedules import linear_schedule as linear_schedule
from treekit.optim._schedules import warmup_cosine_decay_schedule as warmup_cosine_decay_schedule

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
    "adam",
    "adamw",
    "add_decayed_weights",
    "apply_updates",
    "chain",
    "clip_by_global_norm",
    "identity",
    "masked",
    "safe_increment",
    "scale",
    "scale_by_adam",
    "scale_by_learning_rate",
    "scale_by_schedule",
    "sgd",
    "trace",
    "tree_bias_correction",
    "tree_map_params",
    "tree_update_infinity_moment",
    "tree_update_moment",
    "tree_update_moment_per_elem_norm",
]

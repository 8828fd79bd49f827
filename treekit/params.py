"""Param-tree helpers for model code: tree math, init, an MLP, optimizers, freezing, paths, stacking.

Import it as ``from treekit import params`` (``import treekit`` alone does not load numpy).
Everything works on numpy arrays without jax, and on jax arrays under ``jit`` and ``grad``:
functions use the array module the leaves come from.

>>> import numpy as np
>>> from treekit.params import adam, apply_updates, init_mlp_params, mse_loss, mse_loss_and_grad
>>> params = init_mlp_params([1, 8, 1], rng=0)
>>> x = np.linspace(-1, 1, 16)[:, None]
>>> opt = adam(0.05)
>>> state = opt.init(params)
>>> first = mse_loss(params, x, x**2)
>>> for _ in range(50):
...     loss, grads = mse_loss_and_grad(params, x, x**2)
...     updates, state = opt.update(grads, state, params)
...     params = apply_updates(params, updates)
>>> bool(mse_loss(params, x, x**2) < first / 10)
True

The tree math (:func:`~treekit.tree_add`, ...) lives in ``treekit.ops._tree_math``, ``treekit.ops._tree_reduce``
and ``treekit.ops._tree_random``, the path functions in
``treekit.ops._at`` and the optimizers in :mod:`treekit.optim`; they are all re-exported here.
"""

from __future__ import annotations

from treekit.ops import NamedTupleKey as NamedTupleKey
from treekit.ops import Path as Path
from treekit.ops import combine as combine
from treekit.ops import filter as filter
from treekit.ops import flatten_dict as flatten_dict
from treekit.ops import is_array as is_array
from treekit.ops import is_array_like as is_array_like
from treekit.ops import is_inexact_array as is_inexact_array
from treekit.ops import is_inexact_array_like as is_inexact_array_like
from treekit.ops import partition as partition
from treekit.ops import tree_add as tree_add
from treekit.ops import tree_add_scale as tree_add_scale
from treekit.ops import tree_allclose as tree_allclose
from treekit.ops import tree_at as tree_at
from treekit.ops import tree_axpy as tree_axpy
from treekit.ops import tree_batch_shape as tree_batch_shape
from treekit.ops import tree_bytes as tree_bytes
from treekit.ops import tree_cast as tree_cast
from treekit.ops import tree_cast_like as tree_cast_like
from treekit.ops import tree_clip as tree_clip
from treekit.ops import tree_conj as tree_conj
from treekit.ops import tree_div as tree_div
from treekit.ops import tree_dtype as tree_dtype
from treekit.ops import tree_equal as tree_equal
from treekit.ops import tree_full_like as tree_full_like
from treekit.ops import tree_get as tree_get
from treekit.ops import tree_get_all_with_path as tree_get_all_with_path
from treekit.ops import tree_max as tree_max
from treekit.ops import tree_min as tree_min
from treekit.ops import tree_mul as tree_mul
from treekit.ops import tree_norm as tree_norm
from treekit.ops import tree_ones_like as tree_ones_like
from treekit.ops import tree_random_like as tree_random_like
from treekit.ops import tree_real as tree_real
from treekit.ops import tree_scale as tree_scale
from treekit.ops import tree_set as tree_set
from treekit.ops import tree_size as tree_size
from treekit.ops import tree_split_key_like as tree_split_key_like
from treekit.ops import tree_stack as tree_stack
from treekit.ops import tree_sub as tree_sub
from treekit.ops import tree_sum as tree_sum
from treekit.ops import tree_unstack as tree_unstack
from treekit.ops import tree_unwrap_random_key_data as tree_unwrap_random_key_data
from treekit.ops import tree_vdot as tree_vdot
from treekit.ops import tree_where as tree_where
from treekit.ops import tree_zeros_like as tree_zeros_like
from treekit.ops import unflatten_dict as unflatten_dict
from treekit.optim import GradientTransformation as GradientTransformation
from treekit.optim import adam as adam
from treekit.optim import adamw as adamw
from treekit.optim import apply_updates as apply_updates
from treekit.optim import chain as chain
from treekit.optim import clip_by_global_norm as clip_by_global_norm
from treekit.optim import init_mlp_params as init_mlp_params
from treekit.optim import mlp_forward as mlp_forward
from treekit.optim import mse_loss as mse_loss
from treekit.optim import mse_loss_and_grad as mse_loss_and_grad
from treekit.optim import sgd as sgd
from treekit.optim import tree_bias_correction as tree_bias_correction
from treekit.optim import tree_map_params as tree_map_params
from treekit.optim import tree_update_infinity_moment as tree_update_infinity_moment
from treekit.optim import tree_update_moment as tree_update_moment
from treekit.optim import tree_update_moment_per_elem_norm as tree_update_moment_per_elem_norm

__all__ = [
    "NamedTupleKey",
    "GradientTransformation",
    "Path",
    "adam",
    "adamw",
    "apply_updates",
    "chain",
    "clip_by_global_norm",
    "combine",
    "flatten_dict",
    "init_mlp_params",
    "is_array",
    "filter",
    "is_array_like",
    "is_inexact_array",
    "is_inexact_array_like",
    "mlp_forward",
    "mse_loss",
    "mse_loss_and_grad",
    "partition",
    "sgd",
    "tree_add",
    "tree_add_scale",
    "tree_allclose",
    "tree_at",
    "tree_axpy",
    "tree_batch_shape",
    "tree_bias_correction",
    "tree_bytes",
    "tree_cast",
    "tree_cast_like",
    "tree_clip",
    "tree_conj",
    "tree_div",
    "tree_dtype",
    "tree_equal",
    "tree_full_like",
    "tree_get",
    "tree_get_all_with_path",
    "tree_map_params",
    "tree_max",
    "tree_min",
    "tree_mul",
    "tree_norm",
    "tree_ones_like",
    "tree_random_like",
    "tree_real",
    "tree_scale",
    "tree_set",
    "tree_size",
    "tree_split_key_like",
    "tree_stack",
    "tree_sub",
    "tree_sum",
    "tree_unstack",
    "tree_unwrap_random_key_data",
    "tree_update_infinity_moment",
    "tree_update_moment",
    "tree_update_moment_per_elem_norm",
    "tree_vdot",
    "tree_where",
    "tree_zeros_like",
    "unflatten_dict",
]

# Lives here: _ops.py (flatten, map), _fold.py, _rearrange.py, _tree_math.py, _tree_reduce.py, _stats.py,
# _tree_random.py, _at.py and _where.py (tree_at), _named.py (optax's search by key name), _partition.py,
# _stack.py, _flat_dicts.py, ...;
# those that import numpy at load, and the seldom used, give their names on first use.
# May import: core. Start at _ops.py (tree_flatten, tree_map), then _fold.py (reduce).
"""Whole-tree functions: flatten/map/reduce/transpose, tree math, tree_at/get/set, partition, stacking, flat dicts."""

from typing import TYPE_CHECKING

from treekit.core import lazy_names
from treekit.ops._at import Path as Path
from treekit.ops._at import tree_at as tree_at
from treekit.ops._at import tree_get as tree_get
from treekit.ops._at import tree_set as tree_set
from treekit.ops._default_registry import default_registry as default_registry
from treekit.ops._fold import all_leaves as all_leaves
from treekit.ops._fold import tree_all as tree_all
from treekit.ops._fold import tree_reduce as tree_reduce
from treekit.ops._fold import tree_reduce_associative as tree_reduce_associative
from treekit.ops._named import NamedTupleKey as NamedTupleKey
from treekit.ops._named import tree_get_all_with_path as tree_get_all_with_path
from treekit.ops._ops import PyTree as PyTree
from treekit.ops._ops import tree_flatten as tree_flatten
from treekit.ops._ops import tree_flatten_with_path as tree_flatten_with_path
from treekit.ops._ops import tree_leaves as tree_leaves
from treekit.ops._ops import tree_leaves_with_path as tree_leaves_with_path
from treekit.ops._ops import tree_map as tree_map
from treekit.ops._ops import tree_map_with_path as tree_map_with_path
from treekit.ops._ops import tree_structure as tree_structure
from treekit.ops._ops import tree_unflatten as tree_unflatten
from treekit.ops._partial import Partial as Partial
from treekit.ops._rearrange import broadcast as broadcast
from treekit.ops._rearrange import tree_broadcast as tree_broadcast
from treekit.ops._rearrange import tree_transpose as tree_transpose
from treekit.ops._rearrange import treedef_children as treedef_children
from treekit.ops._rearrange import treedef_is_leaf as treedef_is_leaf
from treekit.ops._rearrange import treedef_is_strict_leaf as treedef_is_strict_leaf
from treekit.ops._rearrange import treedef_tuple as treedef_tuple
from treekit.ops._stats import Stats as Stats
from treekit.ops._stats import leaf_stats as leaf_stats
from treekit.ops._stats import merge_stats as merge_stats
from treekit.ops._tree_math import dtype_of as dtype_of
from treekit.ops._tree_math import loaded_jax as loaded_jax
from treekit.ops._tree_math import namespace as namespace
from treekit.ops._tree_math import tree_add as tree_add
from treekit.ops._tree_math import tree_add_scale as tree_add_scale
from treekit.ops._tree_math import tree_axpy as tree_axpy
from treekit.ops._tree_math import tree_batch_shape as tree_batch_shape
from treekit.ops._tree_math import tree_cast as tree_cast
from treekit.ops._tree_math import tree_cast_like as tree_cast_like
from treekit.ops._tree_math import tree_clip as tree_clip
from treekit.ops._tree_math import tree_conj as tree_conj
from treekit.ops._tree_math import tree_div as tree_div
from treekit.ops._tree_math import tree_full_like as tree_full_like
from treekit.ops._tree_math import tree_mul as tree_mul
from treekit.ops._tree_math import tree_ones_like as tree_ones_like
from treekit.ops._tree_math import tree_real as tree_real
from treekit.ops._tree_math import tree_scale as tree_scale
from treekit.ops._tree_math import tree_sub as tree_sub
from treekit.ops._tree_math import tree_where as tree_where
from treekit.ops._tree_math import tree_zeros_like as tree_zeros_like
from treekit.ops._tree_reduce import tree_allclose as tree_allclose
from treekit.ops._tree_reduce import tree_bytes as tree_bytes
from treekit.ops._tree_reduce import tree_dtype as tree_dtype
from treekit.ops._tree_reduce import tree_equal as tree_equal
from treekit.ops._tree_reduce import tree_max as tree_max
from treekit.ops._tree_reduce import tree_min as tree_min
from treekit.ops._tree_reduce import tree_norm as tree_norm
from treekit.ops._tree_reduce import tree_size as tree_size
from treekit.ops._tree_reduce import tree_sum as tree_sum
from treekit.ops._tree_reduce import tree_vdot as tree_vdot

if TYPE_CHECKING:
    from treekit.ops._flat_dicts import flatten_dict as flatten_dict
    from treekit.ops._flat_dicts import unflatten_dict as unflatten_dict
    from treekit.ops._partition import combine as combine
    from treekit.ops._partition import filter as filter
    from treekit.ops._partition import is_array as is_array
    from treekit.ops._partition import is_array_like as is_array_like
    from treekit.ops._partition import is_inexact_array as is_inexact_array
    from treekit.ops._partition import is_inexact_array_like as is_inexact_array_like
    from treekit.ops._partition import partition as partition
    from treekit.ops._stack import tree_stack as tree_stack
    from treekit.ops._stack import tree_unstack as tree_unstack
    from treekit.ops._tree_random import generator_of as generator_of
    from treekit.ops._tree_random import tree_random_like as tree_random_like
    from treekit.ops._tree_random import tree_split_key_like as tree_split_key_like
    from treekit.ops._tree_random import tree_unwrap_random_key_data as tree_unwrap_random_key_data

__getattr__, __dir__ = lazy_names(
    __name__,
    {
        "_flat_dicts": ["flatten_dict", "unflatten_dict"],
        "_partition": [
            "combine", "filter", "is_array", "is_array_like", "is_inexact_array", "is_inexact_array_like", "partition"
        ],
        "_stack": ["tree_stack", "tree_unstack"],
        "_tree_random": ["generator_of", "tree_random_like", "tree_split_key_like", "tree_unwrap_random_key_data"],
    },
)

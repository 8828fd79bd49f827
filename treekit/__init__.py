"""treekit: pytrees with jax.tree_util's API, errors that name the key path, and the helpers
model code keeps rewriting.

>>> import treekit
>>> treekit.tree_map(lambda x: x * 2, {'w': [1, 2], 'b': 3})
{'w': [2, 4], 'b': 6}
"""

import typing as _typing

from treekit import tree as tree
from treekit.checks import ANY as ANY
from treekit.checks import NON_ARRAY as NON_ARRAY
from treekit.checks import Difference as Difference
from treekit.checks import SpecMismatchError as SpecMismatchError
from treekit.checks import SpecWildcard as SpecWildcard
from treekit.checks import TreeDiff as TreeDiff
from treekit.checks import assert_rank as assert_rank
from treekit.checks import assert_same_structure as assert_same_structure
from treekit.checks import assert_shape as assert_shape
from treekit.checks import assert_tree_all_finite as assert_tree_all_finite
from treekit.checks import assert_tree_has_only_ndarrays as assert_tree_has_only_ndarrays
from treekit.checks import assert_tree_is_on_device as assert_tree_is_on_device
from treekit.checks import assert_tree_is_on_host as assert_tree_is_on_host
from treekit.checks import assert_tree_is_sharded as assert_tree_is_sharded
from treekit.checks import assert_tree_no_nones as assert_tree_no_nones
from treekit.checks import assert_tree_shape as assert_tree_shape
from treekit.checks import assert_tree_shape_prefix as assert_tree_shape_prefix
from treekit.checks import assert_tree_shape_suffix as assert_tree_shape_suffix
from treekit.checks import assert_tree_shapes as assert_tree_shapes
from treekit.checks import assert_trees_all_close as assert_trees_all_close
from treekit.checks import assert_trees_all_close_ulp as assert_trees_all_close_ulp
from treekit.checks import assert_trees_all_equal as assert_trees_all_equal
from treekit.checks import assert_trees_all_equal_dtypes as assert_trees_all_equal_dtypes
from treekit.checks import assert_trees_all_equal_shapes as assert_trees_all_equal_shapes
from treekit.checks import assert_trees_all_equal_shapes_and_dtypes as assert_trees_all_equal_shapes_and_dtypes
from treekit.checks import assert_trees_all_equal_sizes as assert_trees_all_equal_sizes
from treekit.checks import assert_trees_all_equal_structs as assert_trees_all_equal_structs
from treekit.checks import block_until_chexify_assertions_complete as block_until_chexify_assertions_complete
from treekit.checks import check_spec as check_spec
from treekit.checks import chexify as chexify
from treekit.checks import same_structure as same_structure
from treekit.checks import tree_check as tree_check
from treekit.checks import tree_diff as tree_diff
from treekit.checks import tree_spec as tree_spec
from treekit.core import DictKey as DictKey
from treekit.core import FlattenedIndexKey as FlattenedIndexKey
from treekit.core import GetAttrKey as GetAttrKey
from treekit.core import KeyEntry as KeyEntry
from treekit.core import KeyPath as KeyPath
from treekit.core import SequenceKey as SequenceKey
from treekit.core import ShapeDtype as ShapeDtype
from treekit.core import StructureAssertionError as StructureAssertionError
from treekit.core import StructureKeyError as StructureKeyError
from treekit.core import StructureMismatchError as StructureMismatchError
from treekit.core import TransposeMismatchError as TransposeMismatchError
from treekit.core import TreeCycleError as TreeCycleError
from treekit.core import TreeDef as PyTreeDef
from treekit.core import TreeDef as TreeDef
from treekit.core import UserKey as UserKey
from treekit.core import backend as backend
from treekit.core import flatten_one_level as flatten_one_level
from treekit.core import flatten_one_level_with_keys as flatten_one_level_with_keys
from treekit.core import install_jax_bridge as _install_jax_bridge
from treekit.core import is_tree_node as is_tree_node
from treekit.core import keystr as keystr
from treekit.core import lazy_names as _lazy_names
from treekit.core import register_dataclass as register_dataclass
from treekit.core import register_pytree_node as register_pytree_node
from treekit.core import register_pytree_node_class as register_pytree_node_class
from treekit.core import register_pytree_with_keys as register_pytree_with_keys
from treekit.core import register_pytree_with_keys_class as register_pytree_with_keys_class
from treekit.core import register_static as register_static
from treekit.core import static as static
from treekit.core import treedef_from_jax as treedef_from_jax
from treekit.core import treedef_to_jax as treedef_to_jax
from treekit.look import View as View
from treekit.look import format_tree as format_tree
from treekit.look import summary as summary
from treekit.look import view as view
from treekit.ops import Partial as Partial
from treekit.ops import PyTree as PyTree
from treekit.ops import all_leaves as all_leaves
from treekit.ops import default_registry as default_registry
from treekit.ops import tree_add as tree_add
from treekit.ops import tree_add_scale as tree_add_scale
from treekit.ops import tree_all as tree_all
from treekit.ops import tree_allclose as tree_allclose
from treekit.ops import tree_at as tree_at
from treekit.ops import tree_axpy as tree_axpy
from treekit.ops import tree_batch_shape as tree_batch_shape
from treekit.ops import tree_broadcast as tree_broadcast
from treekit.ops import tree_bytes as tree_bytes
from treekit.ops import tree_cast as tree_cast
from treekit.ops import tree_cast_like as tree_cast_like
from treekit.ops import tree_clip as tree_clip
from treekit.ops import tree_conj as tree_conj
from treekit.ops import tree_div as tree_div
from treekit.ops import tree_dtype as tree_dtype
from treekit.ops import tree_equal as tree_equal
from treekit.ops import tree_flatten as tree_flatten
from treekit.ops import tree_flatten_with_path as tree_flatten_with_path
from treekit.ops import tree_full_like as tree_full_like
from treekit.ops import tree_get as tree_get
from treekit.ops import tree_leaves as tree_leaves
from treekit.ops import tree_leaves_with_path as tree_leaves_with_path
from treekit.ops import tree_map as tree_map
from treekit.ops import tree_map_with_path as tree_map_with_path
from treekit.ops import tree_max as tree_max
from treekit.ops import tree_min as tree_min
from treekit.ops import tree_mul as tree_mul
from treekit.ops import tree_norm as tree_norm
from treekit.ops import tree_ones_like as tree_ones_like
from treekit.ops import tree_real as tree_real
from treekit.ops import tree_reduce as tree_reduce
from treekit.ops import tree_reduce_associative as tree_reduce_associative
from treekit.ops import tree_scale as tree_scale
from treekit.ops import tree_set as tree_set
from treekit.ops import tree_size as tree_size
from treekit.ops import tree_structure as tree_structure
from treekit.ops import tree_sub as tree_sub
from treekit.ops import tree_sum as tree_sum
from treekit.ops import tree_transpose as tree_transpose
from treekit.ops import tree_unflatten as tree_unflatten
from treekit.ops import tree_vdot as tree_vdot
from treekit.ops import tree_where as tree_where
from treekit.ops import tree_zeros_like as tree_zeros_like
from treekit.ops import treedef_children as treedef_children
from treekit.ops import treedef_is_leaf as treedef_is_leaf
from treekit.ops import treedef_is_strict_leaf as treedef_is_strict_leaf
from treekit.ops import treedef_tuple as treedef_tuple

if _typing.TYPE_CHECKING:
    from treekit.checkpoint import CheckpointManager as CheckpointManager
    from treekit.checkpoint import PickleRefused as PickleRefused
    from treekit.checkpoint import load as load
    from treekit.checkpoint import load_leaf as load_leaf
    from treekit.checkpoint import metadata as metadata
    from treekit.checkpoint import save as save
    from treekit.files import MissingExtra as MissingExtra
    from treekit.params import combine as combine
    from treekit.params import is_array as is_array
    from treekit.params import is_array_like as is_array_like
    from treekit.params import is_inexact_array as is_inexact_array
    from treekit.params import is_inexact_array_like as is_inexact_array_like
    from treekit.params import partition as partition
    from treekit.params import tree_random_like as tree_random_like
    from treekit.params import tree_stack as tree_stack
    from treekit.params import tree_unstack as tree_unstack

# Given on first use (PEP 562): treekit.params imports numpy, which `import treekit` must not,
# and the checkpoint modules are only loaded by programs that read or write files.
__getattr__, __dir__ = _lazy_names(
    __name__,
    {
        "checkpoint": ["CheckpointManager", "PickleRefused", "load", "load_leaf", "metadata", "save"],
        "files": ["MissingExtra"],
        "params": [
            "combine", "is_array", "is_array_like", "is_inexact_array", "is_inexact_array_like", "partition",
            "tree_random_like", "tree_stack", "tree_unstack",
        ],
    },
)

__version__ = "0.2.0"

__all__ = [
    "ANY",
    "CheckpointManager",
    "NON_ARRAY",
    "DictKey",
    "Difference",
    "FlattenedIndexKey",
    "GetAttrKey",
    "KeyEntry",
    "KeyPath",
    "Partial",
    "MissingExtra",
    "PickleRefused",
    "PyTree",
    "PyTreeDef",
    "SequenceKey",
    "ShapeDtype",
    "SpecMismatchError",
    "SpecWildcard",
    "StructureAssertionError",
    "StructureKeyError",
    "StructureMismatchError",
    "TransposeMismatchError",
    "TreeCycleError",
    "TreeDef",
    "TreeDiff",
    "UserKey",
    "all_leaves",
    "assert_rank",
    "assert_same_structure",
    "assert_shape",
    "assert_tree_all_finite",
    "assert_tree_has_only_ndarrays",
    "assert_tree_is_on_device",
    "assert_tree_is_on_host",
    "assert_tree_is_sharded",
    "assert_tree_no_nones",
    "assert_tree_shape",
    "assert_tree_shape_prefix",
    "assert_tree_shape_suffix",
    "assert_tree_shapes",
    "assert_trees_all_close",
    "assert_trees_all_close_ulp",
    "assert_trees_all_equal",
    "assert_trees_all_equal_dtypes",
    "assert_trees_all_equal_shapes",
    "assert_trees_all_equal_shapes_and_dtypes",
    "assert_trees_all_equal_sizes",
    "assert_trees_all_equal_structs",
    "backend",
    "block_until_chexify_assertions_complete",
    "check_spec",
    "chexify",
    "combine",
    "default_registry",
    "flatten_one_level",
    "flatten_one_level_with_keys",
    "format_tree",
    "is_array",
    "is_array_like",
    "is_inexact_array",
    "is_inexact_array_like",
    "is_tree_node",
    "keystr",
    "load",
    "load_leaf",
    "metadata",
    "partition",
    "register_dataclass",
    "register_pytree_node",
    "register_pytree_node_class",
    "register_pytree_with_keys",
    "register_pytree_with_keys_class",
    "register_static",
    "same_structure",
    "save",
    "static",
    "summary",
    "tree",
    "tree_add",
    "tree_add_scale",
    "tree_all",
    "tree_allclose",
    "tree_at",
    "tree_axpy",
    "tree_batch_shape",
    "tree_broadcast",
    "tree_bytes",
    "tree_cast",
    "tree_cast_like",
    "tree_check",
    "tree_clip",
    "tree_conj",
    "tree_diff",
    "tree_div",
    "tree_dtype",
    "tree_equal",
    "tree_flatten",
    "tree_flatten_with_path",
    "tree_full_like",
    "tree_get",
    "tree_leaves",
    "tree_leaves_with_path",
    "tree_map",
    "tree_map_with_path",
    "tree_max",
    "tree_min",
    "tree_mul",
    "tree_norm",
    "tree_ones_like",
    "tree_random_like",
    "tree_real",
    "tree_reduce",
    "tree_reduce_associative",
    "tree_scale",
    "tree_set",
    "tree_size",
    "tree_spec",
    "tree_stack",
    "tree_structure",
    "tree_sub",
    "tree_sum",
    "tree_transpose",
    "tree_unflatten",
    "tree_unstack",
    "tree_vdot",
    "tree_where",
    "tree_zeros_like",
    "treedef_children",
    "treedef_from_jax",
    "treedef_is_leaf",
    "treedef_is_strict_leaf",
    "treedef_to_jax",
    "treedef_tuple",
    "View",
    "view",
]

_install_jax_bridge()  # bridge to JAX's registry now if jax is imported, else when it is

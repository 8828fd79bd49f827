"""treekit: pytrees with jax.tree_util's API, errors that name the key path, and the helpers
model code keeps rewriting.

>>> import treekit
>>> treekit.tree_map(lambda x: x * 2, {'w': [1, 2], 'b': 3})
{'w': [2, 4], 'b': 6}
"""

import typing as _typing

from treekit import _jax
from treekit import tree as tree
from treekit._asserts import assert_rank as assert_rank
from treekit._asserts import assert_shape as assert_shape
from treekit._asserts import assert_tree_all_finite as assert_tree_all_finite
from treekit._asserts import assert_tree_no_nones as assert_tree_no_nones
from treekit._at import tree_at as tree_at
from treekit._at import tree_get as tree_get
from treekit._at import tree_set as tree_set
from treekit._checks import Difference as Difference
from treekit._checks import TreeDiff as TreeDiff
from treekit._checks import assert_same_structure as assert_same_structure
from treekit._checks import assert_trees_all_close as assert_trees_all_close
from treekit._checks import assert_trees_all_equal as assert_trees_all_equal
from treekit._checks import same_structure as same_structure
from treekit._checks import tree_diff as tree_diff
from treekit._core import backend as backend
from treekit._default_registry import default_registry as default_registry
from treekit._errors import StructureAssertionError as StructureAssertionError
from treekit._errors import StructureMismatchError as StructureMismatchError
from treekit._errors import TransposeMismatchError as TransposeMismatchError
from treekit._errors import TreeCycleError as TreeCycleError
from treekit._fold import all_leaves as all_leaves
from treekit._fold import tree_all as tree_all
from treekit._fold import tree_reduce as tree_reduce
from treekit._fold import tree_reduce_associative as tree_reduce_associative
from treekit._format import format_tree as format_tree
from treekit._io import PickleRefused as PickleRefused
from treekit._io import load as load
from treekit._io import load_leaf as load_leaf
from treekit._io import metadata as metadata
from treekit._io import save as save
from treekit._jax_treedefs import treedef_from_jax as treedef_from_jax
from treekit._jax_treedefs import treedef_to_jax as treedef_to_jax
from treekit._keys import DictKey as DictKey
from treekit._keys import FlattenedIndexKey as FlattenedIndexKey
from treekit._keys import GetAttrKey as GetAttrKey
from treekit._keys import KeyEntry as KeyEntry
from treekit._keys import KeyPath as KeyPath
from treekit._keys import SequenceKey as SequenceKey
from treekit._keys import UserKey as UserKey
from treekit._keys import keystr as keystr
from treekit._one_level import flatten_one_level as flatten_one_level
from treekit._one_level import flatten_one_level_with_keys as flatten_one_level_with_keys
from treekit._one_level import is_tree_node as is_tree_node
from treekit._ops import PyTree as PyTree
from treekit._ops import tree_flatten as tree_flatten
from treekit._ops import tree_flatten_with_path as tree_flatten_with_path
from treekit._ops import tree_leaves as tree_leaves
from treekit._ops import tree_leaves_with_path as tree_leaves_with_path
from treekit._ops import tree_map as tree_map
from treekit._ops import tree_map_with_path as tree_map_with_path
from treekit._ops import tree_structure as tree_structure
from treekit._ops import tree_unflatten as tree_unflatten
from treekit._partial import Partial as Partial
from treekit._rearrange import tree_broadcast as tree_broadcast
from treekit._rearrange import tree_transpose as tree_transpose
from treekit._rearrange import treedef_children as treedef_children
from treekit._rearrange import treedef_is_leaf as treedef_is_leaf
from treekit._rearrange import treedef_is_strict_leaf as treedef_is_strict_leaf
from treekit._rearrange import treedef_tuple as treedef_tuple
from treekit._register import register_dataclass as register_dataclass
from treekit._register import register_pytree_node as register_pytree_node
from treekit._register import register_pytree_node_class as register_pytree_node_class
from treekit._register import register_pytree_with_keys as register_pytree_with_keys
from treekit._register import register_pytree_with_keys_class as register_pytree_with_keys_class
from treekit._register import register_static as register_static
from treekit._register import static as static
from treekit._specs import ANY as ANY
from treekit._specs import NON_ARRAY as NON_ARRAY
from treekit._specs import ShapeDtype as ShapeDtype
from treekit._specs import SpecMismatchError as SpecMismatchError
from treekit._specs import SpecWildcard as SpecWildcard
from treekit._specs import assert_tree_shapes as assert_tree_shapes
from treekit._specs import check_spec as check_spec
from treekit._specs import tree_spec as tree_spec
from treekit._summary import summary as summary
from treekit._tree_math import tree_add as tree_add
from treekit._tree_math import tree_add_scale as tree_add_scale
from treekit._tree_math import tree_axpy as tree_axpy
from treekit._tree_math import tree_batch_shape as tree_batch_shape
from treekit._tree_math import tree_cast as tree_cast
from treekit._tree_math import tree_cast_like as tree_cast_like
from treekit._tree_math import tree_clip as tree_clip
from treekit._tree_math import tree_conj as tree_conj
from treekit._tree_math import tree_div as tree_div
from treekit._tree_math import tree_full_like as tree_full_like
from treekit._tree_math import tree_mul as tree_mul
from treekit._tree_math import tree_ones_like as tree_ones_like
from treekit._tree_math import tree_real as tree_real
from treekit._tree_math import tree_scale as tree_scale
from treekit._tree_math import tree_sub as tree_sub
from treekit._tree_math import tree_where as tree_where
from treekit._tree_math import tree_zeros_like as tree_zeros_like
from treekit._tree_reduce import tree_allclose as tree_allclose
from treekit._tree_reduce import tree_bytes as tree_bytes
from treekit._tree_reduce import tree_dtype as tree_dtype
from treekit._tree_reduce import tree_max as tree_max
from treekit._tree_reduce import tree_min as tree_min
from treekit._tree_reduce import tree_norm as tree_norm
from treekit._tree_reduce import tree_size as tree_size
from treekit._tree_reduce import tree_sum as tree_sum
from treekit._tree_reduce import tree_vdot as tree_vdot
from treekit._treedef import TreeDef as PyTreeDef
from treekit._treedef import TreeDef as TreeDef
from treekit._view import View as View
from treekit._view import view as view

if _typing.TYPE_CHECKING:
    from treekit.params import combine as combine
    from treekit.params import is_array as is_array
    from treekit.params import is_inexact_array as is_inexact_array
    from treekit.params import partition as partition
    from treekit.params import tree_random_like as tree_random_like
    from treekit.params import tree_stack as tree_stack
    from treekit.params import tree_unstack as tree_unstack

# Re-exported from treekit.params on first use (PEP 562): that module imports numpy, and
# `import treekit` must not.
_FROM_PARAMS = (
    "combine",
    "is_array",
    "is_inexact_array",
    "partition",
    "tree_random_like",
    "tree_stack",
    "tree_unstack",
)


def __getattr__(name: str) -> _typing.Any:
    if name in _FROM_PARAMS:
        from treekit import params

        value = getattr(params, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'treekit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_FROM_PARAMS})

__version__ = "0.2.0"

__all__ = [
    "ANY",
    "NON_ARRAY",
    "DictKey",
    "Difference",
    "FlattenedIndexKey",
    "GetAttrKey",
    "KeyEntry",
    "KeyPath",
    "Partial",
    "PickleRefused",
    "PyTree",
    "PyTreeDef",
    "SequenceKey",
    "ShapeDtype",
    "SpecMismatchError",
    "SpecWildcard",
    "StructureAssertionError",
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
    "assert_tree_no_nones",
    "assert_tree_shapes",
    "assert_trees_all_close",
    "assert_trees_all_equal",
    "backend",
    "check_spec",
    "combine",
    "default_registry",
    "flatten_one_level",
    "flatten_one_level_with_keys",
    "format_tree",
    "is_array",
    "is_inexact_array",
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
    "tree_clip",
    "tree_conj",
    "tree_diff",
    "tree_div",
    "tree_dtype",
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

_jax.install()  # bridge to JAX's registry now if jax is imported, else when it is

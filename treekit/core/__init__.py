# Lives here: keys, errors, registry and registration, records, TreeDef, the building and guided
# walkers, unflatten's builders, the JAX bridge, ShapeDtype, names given on first use (_lazy.py),
# 0.2's module paths (_moved.py); the C core mirrors these modules.
# May import: nothing of treekit's (the bottom layer). Start at _registry.py (NodeType), then
# _traverse.py (flatten); _core.py says which core runs.
"""The tree core: key entries, the registry of node types, node records, TreeDef, the walkers."""

from treekit.core._build import unflatten_node as unflatten_node
from treekit.core._core import NATIVE as NATIVE
from treekit.core._core import backend as backend
from treekit.core._describe import SHORT_DTYPES as SHORT_DTYPES
from treekit.core._describe import describe_leaf as describe_leaf
from treekit.core._describe import dim_text as dim_text
from treekit.core._describe import dtype_name as dtype_name
from treekit.core._describe import is_array as is_array
from treekit.core._describe import is_inexact_dtype as is_inexact_dtype
from treekit.core._describe import is_key_dtype as is_key_dtype
from treekit.core._describe import itemsize as itemsize
from treekit.core._describe import leaf_size as leaf_size
from treekit.core._describe import printable as printable
from treekit.core._describe import shape_text as shape_text
from treekit.core._errors import Caller as Caller
from treekit.core._errors import StructureAssertionError as StructureAssertionError
from treekit.core._errors import StructureKeyError as StructureKeyError
from treekit.core._errors import StructureMismatchError as StructureMismatchError
from treekit.core._errors import TransposeMismatchError as TransposeMismatchError
from treekit.core._errors import TreeCycleError as TreeCycleError
from treekit.core._errors import flatten_noted as flatten_noted
from treekit.core._errors import format_message as format_message
from treekit.core._errors import noted as noted
from treekit.core._errors import safe_keystr as safe_keystr
from treekit.core._errors import safe_repr as safe_repr
from treekit.core._errors import where_text as where_text
from treekit.core._html import HtmlText as HtmlText
from treekit.core._html import fragment as fragment
from treekit.core._html import pair as pair
from treekit.core._jax import install_jax_bridge as install_jax_bridge
from treekit.core._jax import jax_alone as jax_alone
from treekit.core._jax import load_jax as load_jax
from treekit.core._jax_treedefs import treedef_from_jax as treedef_from_jax
from treekit.core._jax_treedefs import treedef_to_jax as treedef_to_jax
from treekit.core._keys import DictKey as DictKey
from treekit.core._keys import FlattenedIndexKey as FlattenedIndexKey
from treekit.core._keys import GetAttrKey as GetAttrKey
from treekit.core._keys import KeyEntry as KeyEntry
from treekit.core._keys import KeyPath as KeyPath
from treekit.core._keys import SequenceKey as SequenceKey
from treekit.core._keys import UserKey as UserKey
from treekit.core._keys import keystr as keystr
from treekit.core._keys import plain_key as plain_key
from treekit.core._keys import simple_text as simple_text
from treekit.core._lazy import lazy_names as lazy_names
from treekit.core._mismatch import Incomparable as Incomparable
from treekit.core._mismatch import describe as describe
from treekit.core._mismatch import describe_value as describe_value
from treekit.core._mismatch import same_node_data as same_node_data
from treekit.core._moved import current_module as current_module
from treekit.core._moved import install_moved_modules as install_moved_modules
from treekit.core._one_level import flatten_one_level as flatten_one_level
from treekit.core._one_level import flatten_one_level_with_keys as flatten_one_level_with_keys
from treekit.core._one_level import is_tree_node as is_tree_node
from treekit.core._records import Node as Node
from treekit.core._register import register_dataclass as register_dataclass
from treekit.core._register import register_pytree_node as register_pytree_node
from treekit.core._register import register_pytree_node_class as register_pytree_node_class
from treekit.core._register import register_pytree_with_keys as register_pytree_with_keys
from treekit.core._register import register_pytree_with_keys_class as register_pytree_with_keys_class
from treekit.core._register import register_static as register_static
from treekit.core._register import static as static
from treekit.core._registry import LIST as LIST
from treekit.core._registry import NAMEDTUPLE as NAMEDTUPLE
from treekit.core._registry import TUPLE as TUPLE
from treekit.core._registry import NodeType as NodeType
from treekit.core._registry import dict_keys as dict_keys
from treekit.core._registry import lookup as lookup
from treekit.core._registry import sort_keys as sort_keys
from treekit.core._shape_dtype import Dim as Dim
from treekit.core._shape_dtype import ShapeDtype as ShapeDtype
from treekit.core._shape_dtype import is_variadic as is_variadic
from treekit.core._traverse import IsLeaf as IsLeaf
from treekit.core._traverse import LeafPaths as LeafPaths
from treekit.core._traverse import flatten as flatten
from treekit.core._traverse import flatten_pairs as flatten_pairs
from treekit.core._traverse import leaves as leaves
from treekit.core._traverse import structure as structure
from treekit.core._treedef import TreeDef as TreeDef
from treekit.core._treedef import as_treedef as as_treedef
from treekit.core._treedef import tuple_of as tuple_of

install_moved_modules()  # pickles and checkpoints written by 0.2 name modules by their old paths

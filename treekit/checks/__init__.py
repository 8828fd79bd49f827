# Lives here: _checks.py (tree_diff, the one diff behind same_structure and the asserts),
# _leaf_values.py, _asserts.py, _tree_asserts.py, _traced.py (value asserts under jit, chexify), _placement.py,
# _shared_nodes.py (tree_check), _specs.py (check_spec), and the hypothesis modules
# (_strategies, _array_strategies, _laws), which give their names on first use.
# May import: core, ops, sharding, look (diffs render with look's HTML). Start at _checks.py.
"""Checking trees: structure diffs and asserts, value asserts, specs, node-type laws, hypothesis strategies."""

from typing import TYPE_CHECKING

from treekit.checks._asserts import assert_rank as assert_rank
from treekit.checks._asserts import assert_shape as assert_shape
from treekit.checks._asserts import assert_tree_all_finite as assert_tree_all_finite
from treekit.checks._asserts import assert_tree_has_only_ndarrays as assert_tree_has_only_ndarrays
from treekit.checks._asserts import assert_tree_no_nones as assert_tree_no_nones
from treekit.checks._asserts import assert_tree_shape as assert_tree_shape
from treekit.checks._asserts import assert_tree_shape_prefix as assert_tree_shape_prefix
from treekit.checks._asserts import assert_tree_shape_suffix as assert_tree_shape_suffix
from treekit.checks._checks import Difference as Difference
from treekit.checks._checks import TreeDiff as TreeDiff
from treekit.checks._checks import assert_same_structure as assert_same_structure
from treekit.checks._checks import same_structure as same_structure
from treekit.checks._checks import tree_diff as tree_diff
from treekit.checks._placement import assert_tree_is_on_device as assert_tree_is_on_device
from treekit.checks._placement import assert_tree_is_on_host as assert_tree_is_on_host
from treekit.checks._placement import assert_tree_is_sharded as assert_tree_is_sharded
from treekit.checks._shared_nodes import tree_check as tree_check
from treekit.checks._specs import ANY as ANY
from treekit.checks._specs import NON_ARRAY as NON_ARRAY
from treekit.checks._specs import SpecMismatchError as SpecMismatchError
from treekit.checks._specs import SpecWildcard as SpecWildcard
from treekit.checks._specs import assert_tree_shapes as assert_tree_shapes
from treekit.checks._specs import check_spec as check_spec
from treekit.checks._specs import tree_spec as tree_spec
from treekit.checks._traced import block_until_chexify_assertions_complete as block_until_chexify_assertions_complete
from treekit.checks._traced import chexify as chexify
from treekit.checks._tree_asserts import assert_trees_all_close as assert_trees_all_close
from treekit.checks._tree_asserts import assert_trees_all_close_ulp as assert_trees_all_close_ulp
from treekit.checks._tree_asserts import assert_trees_all_equal as assert_trees_all_equal
from treekit.checks._tree_asserts import assert_trees_all_equal_dtypes as assert_trees_all_equal_dtypes
from treekit.checks._tree_asserts import assert_trees_all_equal_shapes as assert_trees_all_equal_shapes
from treekit.checks._tree_asserts import (
    assert_trees_all_equal_shapes_and_dtypes as assert_trees_all_equal_shapes_and_dtypes,
)
from treekit.checks._tree_asserts import assert_trees_all_equal_sizes as assert_trees_all_equal_sizes
from treekit.checks._tree_asserts import assert_trees_all_equal_structs as assert_trees_all_equal_structs
from treekit.core import lazy_names

if TYPE_CHECKING:
    from treekit.checks._array_strategies import array_strategy as array_strategy
    from treekit.checks._array_strategies import array_trees as array_trees
    from treekit.checks._array_strategies import arrays_like as arrays_like
    from treekit.checks._array_strategies import param_trees as param_trees
    from treekit.checks._array_strategies import same_structure_trees as same_structure_trees
    from treekit.checks._laws import LAWS as LAWS
    from treekit.checks._laws import BrokenLaw as BrokenLaw
    from treekit.checks._laws import NodeTypeLawError as NodeTypeLawError
    from treekit.checks._laws import NodeTypeReport as NodeTypeReport
    from treekit.checks._laws import check_node_type as check_node_type
    from treekit.checks._strategies import BUILTIN_NODE_TYPES as BUILTIN_NODE_TYPES
    from treekit.checks._strategies import NodeMaker as NodeMaker
    from treekit.checks._strategies import Pair as Pair
    from treekit.checks._strategies import key_paths as key_paths
    from treekit.checks._strategies import trees as trees
    from treekit.checks._strategies import trees_like as trees_like

__getattr__, __dir__ = lazy_names(
    __name__,
    {
        "_array_strategies": ["array_strategy", "array_trees", "arrays_like", "param_trees", "same_structure_trees"],
        "_laws": ["BrokenLaw", "LAWS", "NodeTypeLawError", "NodeTypeReport", "check_node_type"],
        "_strategies": ["BUILTIN_NODE_TYPES", "NodeMaker", "Pair", "key_paths", "trees", "trees_like"],
    },
)

"""jax.tree-style short names: ``treekit.tree.map`` is ``treekit.tree_map``, and so on.

>>> from treekit import tree
>>> tree.map(lambda x: x + 1, {'a': 1})
{'a': 2}
"""

from treekit.core import static as static
from treekit.ops import all_leaves as all_leaves
from treekit.ops import tree_all as all
from treekit.ops import tree_broadcast as broadcast
from treekit.ops import tree_flatten as flatten
from treekit.ops import tree_flatten_with_path as flatten_with_path
from treekit.ops import tree_leaves as leaves
from treekit.ops import tree_leaves_with_path as leaves_with_path
from treekit.ops import tree_map as map
from treekit.ops import tree_map_with_path as map_with_path
from treekit.ops import tree_reduce as reduce
from treekit.ops import tree_reduce_associative as reduce_associative
from treekit.ops import tree_structure as structure
from treekit.ops import tree_transpose as transpose
from treekit.ops import tree_unflatten as unflatten

__all__ = [
    "all",
    "broadcast",
    "flatten",
    "flatten_with_path",
    "leaves",
    "leaves_with_path",
    "map",
    "map_with_path",
    "reduce",
    "reduce_associative",
    "static",
    "structure",
    "transpose",
    "unflatten",
]

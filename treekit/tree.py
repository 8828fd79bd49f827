"""Short names: jax.tree's (``treekit.tree.map`` is ``treekit.tree_map``) and optax.tree's
(``treekit.tree.add`` is ``treekit.params.tree_add``); none of the two sets clashes.

>>> from treekit import tree
>>> tree.map(lambda x: x + 1, {'a': 1})
{'a': 2}
>>> tree.add({'a': 1}, {'a': 2}), tree.get({'adam': {'count': 3}}, 'count')
({'a': 3}, 3)
"""

from treekit.core import lazy_names
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

# optax.tree's names (``tree_`` and the name in treekit), given on first use: some of their
# modules import numpy, which `import treekit` must not
__getattr__, __dir__ = lazy_names(
    __name__,
    {
        ".ops": [
            "add", "add_scale", "allclose", "batch_shape", "cast", "cast_like", "clip", "conj", "div", "dtype",
            "full_like", "get", "get_all_with_path", "max", "min", "mul", "norm", "ones_like", "random_like", "real",
            "scale", "set", "size", "split_key_like", "sub", "sum", "unwrap_random_key_data", "vdot", "where",
            "zeros_like",
        ],
        ".optim": [
            "bias_correction", "map_params", "update_infinity_moment", "update_moment", "update_moment_per_elem_norm",
        ],
    },
    prefix="tree_",
)  # fmt: skip

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

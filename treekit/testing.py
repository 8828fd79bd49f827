"""Hypothesis strategies for pytrees, and a checker for node registrations (the ``testing`` extra).

The strategies live in ``treekit.checks._strategies``, the checker in ``treekit.checks._laws``; this module
re-exports both. ``import treekit`` does not import it; ``import treekit.testing`` imports
hypothesis (numpy only when an array strategy is built, jax only for jax arrays).

>>> from hypothesis import find, settings
>>> quick = settings(max_examples=300, database=None, derandomize=True)
>>> example = find(trees(), lambda t: isinstance(t, list) and len(t) == 2, settings=quick)
>>> type(example), len(example)
(<class 'list'>, 2)
"""

from __future__ import annotations

from treekit.checks import BUILTIN_NODE_TYPES as BUILTIN_NODE_TYPES
from treekit.checks import LAWS as LAWS
from treekit.checks import BrokenLaw as BrokenLaw
from treekit.checks import NodeMaker as NodeMaker
from treekit.checks import NodeTypeLawError as NodeTypeLawError
from treekit.checks import NodeTypeReport as NodeTypeReport
from treekit.checks import Pair as Pair
from treekit.checks import array_strategy as array_strategy
from treekit.checks import array_trees as array_trees
from treekit.checks import arrays_like as arrays_like
from treekit.checks import check_node_type as check_node_type
from treekit.checks import key_paths as key_paths
from treekit.checks import param_trees as param_trees
from treekit.checks import same_structure_trees as same_structure_trees
from treekit.checks import trees as trees
from treekit.checks import trees_like as trees_like

__all__ = [
    "BUILTIN_NODE_TYPES",
    "LAWS",
    "BrokenLaw",
    "NodeMaker",
    "NodeTypeLawError",
    "NodeTypeReport",
    "Pair",
    "array_strategy",
    "array_trees",
    "arrays_like",
    "check_node_type",
    "key_paths",
    "param_trees",
    "same_structure_trees",
    "trees",
    "trees_like",
]

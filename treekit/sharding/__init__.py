"""Param trees across devices: PartitionSpecs by key-path rules, checked and placed (treekit.sharding).

Lives here: _rules.py (the public functions, loaded on first use of their names), _layout.py
(how a leaf lays out on a mesh; summary and view print it), _annotations.py (flax's boxes).
May import: core, ops. Start at _rules.py (match_rules), then _layout.py.
"""

from typing import TYPE_CHECKING

# Importable from treekit.sharding before 0.3, when sharding.py imported them for its own use:
from treekit.core import KeyPath as KeyPath
from treekit.core import ShapeDtype as ShapeDtype
from treekit.core import flatten as flatten
from treekit.core import keystr as keystr
from treekit.core import lazy_names
from treekit.ops import broadcast as broadcast
from treekit.sharding._annotations import annotation as annotation
from treekit.sharding._annotations import box_level as box_level
from treekit.sharding._layout import Layout as Layout
from treekit.sharding._layout import device_nbytes as device_nbytes
from treekit.sharding._layout import entry_axes as entry_axes
from treekit.sharding._layout import layout_of as layout_of
from treekit.sharding._layout import mesh_axes as mesh_axes
from treekit.sharding._layout import mesh_str as mesh_str
from treekit.sharding._layout import named_layout as named_layout
from treekit.sharding._layout import spec_str as spec_str

if TYPE_CHECKING:
    from treekit.sharding._rules import PyTree as PyTree
    from treekit.sharding._rules import Rules as Rules
    from treekit.sharding._rules import ShardingError as ShardingError
    from treekit.sharding._rules import UnusedRuleWarning as UnusedRuleWarning
    from treekit.sharding._rules import check_specs as check_specs
    from treekit.sharding._rules import device_bytes as device_bytes
    from treekit.sharding._rules import match_rules as match_rules
    from treekit.sharding._rules import shard as shard
    from treekit.sharding._rules import shardings as shardings

__getattr__, __dir__ = lazy_names(
    __name__,
    {
        "_rules": [
            "PyTree",
            "Rules",
            "ShardingError",
            "UnusedRuleWarning",
            "check_specs",
            "device_bytes",
            "match_rules",
            "shard",
            "shardings",
        ],
    },
)

__all__ = [
    "ShardingError",
    "UnusedRuleWarning",
    "check_specs",
    "device_bytes",
    "match_rules",
    "mesh_axes",
    "spec_str",
    "shard",
    "shardings",
]

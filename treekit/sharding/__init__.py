# Lives here: _rules.py (the public functions, loaded on first use of their names), _layout.py
# (how a leaf lays out on a mesh; summary and view print it), _annotations.py (flax's boxes),
# _transfer.py (many small arrays between host and device in packs: device_get, device_put).
# May import: core, ops. Start at _rules.py (match_rules), then _layout.py.
"""Param trees across devices: PartitionSpecs chosen by key-path rules, checked, and placed.

JAX's SPMD engine (:class:`jax.sharding.Mesh`, :class:`~jax.sharding.NamedSharding`,
:class:`~jax.sharding.PartitionSpec`, ``jax.jit`` with shardings) does the work; this module is
the tree glue every large-model codebase writes by hand:

- :func:`match_rules`: ``(pattern, spec)`` rules over each leaf's key path give a tree of specs;
- :func:`check_specs`: each spec fits its leaf's rank, names axes the mesh has, and splits
  dims that divide evenly; every problem is reported with its key path, all at once;
- :func:`shardings` / :func:`shard`: the tree of ``NamedSharding`` for ``jax.jit``'s
  ``in_shardings`` / ``out_shardings``, and ``jax.device_put`` with it;
- :func:`device_bytes`: bytes each leaf takes on one device, for "does it fit?";
- :func:`device_get` / :func:`device_put`: ``jax.device_get`` / ``jax.device_put`` for trees
  of many small arrays, which cross between host and accelerator in packs (one transfer for up
  to 256 arrays instead of one each: 20,000 leaves in 0.19 s instead of 1.9 s on a TPU v5e).

A pattern is a regular expression searched (``re.search``) in two forms of each leaf's path:
the ``'a/b/0'`` form of :func:`treekit.params.flatten_dict` and the :func:`treekit.keystr`
form ``['a']['b'][0]``; a rule matches a leaf if it is found in either. The first matching rule
wins. A mesh is a :class:`jax.sharding.Mesh`, or, where no devices are needed (checks and
sizes), a mapping of axis names to sizes such as ``{'data': 2, 'model': 4}``.

jax is imported when a function that makes specs or shardings runs, not when this module is
imported.

>>> from jax.sharding import PartitionSpec as P
>>> from treekit.sharding import check_specs, device_bytes, match_rules, spec_str
>>> params = {'dense': {'kernel': ShapeDtype((512, 1024), 'f32'), 'bias': ShapeDtype((1024,), 'f32')}}
>>> specs = match_rules(params, [('kernel', P(None, 'model')), ('bias', P('model'))])
>>> spec_str(specs['dense']['kernel'])
"P(None, 'model')"
>>> check_specs(params, specs, {'data': 2, 'model': 4})
>>> device_bytes(params, specs, {'data': 2, 'model': 4})
{'dense': {'kernel': 524288, 'bias': 1024}}
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
    from treekit.sharding._transfer import device_get as device_get
    from treekit.sharding._transfer import device_put as device_put
    from treekit.sharding._transfer import fetch_small as fetch_small
    from treekit.sharding._transfer import put_small as put_small

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
        "_transfer": ["device_get", "device_put", "fetch_small", "put_small"],
    },
)

__all__ = [
    "ShardingError",
    "UnusedRuleWarning",
    "check_specs",
    "device_bytes",
    "device_get",
    "device_put",
    "match_rules",
    "mesh_axes",
    "spec_str",
    "shard",
    "shardings",
]

# Lives here: _io.py (the public functions), _manager.py (CheckpointManager), _saved.py (the record),
# _values.py (values in it), _restore.py (into like=), _npz.py, _safetensors.py, _shards.py (arrays
# shard by shard), _processes.py (processes agreeing via jax.distributed's key-value store), _progress.py,
# _ahead.py (device-to-host copies ahead), _codes.py (dtype codes), _foreign.py (other tools' files),
# _header.py (a header in bounded memory), _json.py (records, indexes). May import: core, ops,
# sharding, checks, files. Start at _io.py.
"""Checkpoints: save, load, load_leaf and metadata over .npz and .safetensors files."""

from treekit.checkpoint._io import load as load
from treekit.checkpoint._io import save as save
from treekit.checkpoint._lookup import load_leaf as load_leaf
from treekit.checkpoint._lookup import metadata as metadata
from treekit.checkpoint._manager import CheckpointManager as CheckpointManager
from treekit.checkpoint._npz import INFLATION as INFLATION
from treekit.checkpoint._npz import INFLATION_FLOOR as INFLATION_FLOOR
from treekit.checkpoint._npz import NPY_MAGIC as NPY_MAGIC
from treekit.checkpoint._npz import PickleRefused as PickleRefused
from treekit.checkpoint._npz import check_members as check_members
from treekit.checkpoint._npz import default_bound as default_bound
from treekit.checkpoint._npz import npy_header as npy_header
from treekit.checkpoint._processes import Group as Group

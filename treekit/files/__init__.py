# Lives here: _where.py (a path or URL: the local disk, or an fsspec filesystem's), _calls.py (the
# calls checkpoints and data make: open, list, write whole, delete), _atomic.py (a local file
# written whole), _remote.py (a remote file read in ranges, concurrently), _arrow.py (the pyarrow
# filesystem Parquet is read through).
# May import: nothing of treekit (no trees); fsspec and pyarrow only inside the functions that use them.
# Start at _where.py, then _calls.py.
"""Files on the local disk or in an object store (``s3://``, ``gs://``, any fsspec filesystem),
opened, listed, written whole and deleted one way for checkpoints and data."""

from treekit.files._arrow import arrow_filesystem as arrow_filesystem
from treekit.files._atomic import atomic_file as atomic_file
from treekit.files._atomic import create_exclusive as create_exclusive
from treekit.files._atomic import fsync_folder as fsync_folder
from treekit.files._atomic import mode_for as mode_for
from treekit.files._calls import file_size as file_size
from treekit.files._calls import find as find
from treekit.files._calls import glob as glob
from treekit.files._calls import listdir as listdir
from treekit.files._calls import local_copy as local_copy
from treekit.files._calls import makedirs as makedirs
from treekit.files._calls import matches as matches
from treekit.files._calls import open_read as open_read
from treekit.files._calls import read_bytes as read_bytes
from treekit.files._calls import remove as remove
from treekit.files._calls import remove_tree as remove_tree
from treekit.files._calls import write_bytes as write_bytes
from treekit.files._calls import writing as writing
from treekit.files._remote import read_into as read_into
from treekit.files._where import MissingExtra as MissingExtra
from treekit.files._where import Where as Where
from treekit.files._where import locate as locate

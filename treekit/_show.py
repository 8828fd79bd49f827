"""``python -m treekit show FILE``: load a tree from .npz, .npy or .json and print its summary."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path
from typing import Any, TextIO

from treekit._summary import summary
from treekit.params import unflatten_dict

__all__ = ["load_tree", "show"]

_PICKLE_WHY = (
    "unpickling runs code chosen by whoever wrote the file; "
    "pass --allow-pickle only for files you trust"
)
_PICKLE_SUFFIXES = (".pkl", ".pickle", ".pck", ".pt", ".pth")


def load_tree(path: str | Path, *, allow_pickle: bool = False) -> Any:
    """The tree stored in ``path``: ``.npz`` (as :func:`treekit.load` reads it), ``.npy``, ``.json``.

    Pickle files (by suffix or content) and arrays stored with pickle are refused unless
    ``allow_pickle``: unpickling runs code from the file.

    >>> import json, tempfile, os
    >>> with tempfile.TemporaryDirectory() as d:
    ...     name = os.path.join(d, 'tree.json')
    ...     with open(name, 'w') as f:
    ...         json.dump({'lr': 0.1, 'layers': [1, 2]}, f)
    ...     load_tree(name)
    {'lr': 0.1, 'layers': [1, 2]}

    Raises:
        ValueError: For a pickle without ``allow_pickle``, an unknown suffix, a ``.npz`` that is
            not a valid zip file, or ``.npz`` keys that are both an array and a group (``'a'``
            and ``'a/b'``).
        OSError: If the file cannot be read.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    with path.open("rb") as f:
        pickled = f.read(1) == b"\x80"  # every pickle protocol >= 2 starts so
    if suffix in _PICKLE_SUFFIXES or (pickled and suffix not in (".npz", ".npy")):
        if not allow_pickle:
            raise ValueError(f"refusing to load a pickle file: {_PICKLE_WHY}")
        import pickle

        with path.open("rb") as f:
            return pickle.load(f)
    if suffix == ".json":
        with path.open(encoding="utf-8") as f:
            return json.load(f)
    if suffix not in (".npz", ".npy"):
        got = repr(suffix) if suffix else "no suffix"
        raise ValueError(f"expected a .npz, .npy or .json file (or a pickle, with --allow-pickle), got {got}")
    import numpy as np

    if suffix == ".npz":
        from treekit._io import PickleRefused, load

        try:
            return load(path)  # treekit.save's files, and any .npz without pickles
        except PickleRefused as exc:
            if not allow_pickle:
                raise ValueError(f"{exc}; pass --allow-pickle only for files you trust") from None
        data = np.load(path, allow_pickle=True)
        if not isinstance(data, np.lib.npyio.NpzFile):
            return data  # a pickle named .npz
        with data:
            return unflatten_dict({key: data[key] for key in data.files})
    try:
        return np.load(path, allow_pickle=allow_pickle)
    except ValueError as exc:
        if "allow_pickle" not in str(exc):
            raise
        raise ValueError(f"refusing to load a pickled array: {_PICKLE_WHY}") from None


def show(path: str, *, allow_pickle: bool = False, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Print the :func:`treekit.summary` of the tree in ``path``; return the exit status.

    >>> import numpy as np, tempfile, os
    >>> with tempfile.TemporaryDirectory() as d:
    ...     name = os.path.join(d, 'ckpt.npz')
    ...     np.savez(name, **{'dense/w': np.zeros((2, 3), np.float32), 'dense/b': np.zeros(3, np.float32)})
    ...     show(name)
    path            shape   dtype    size  bytes
    ['dense']['b']  (3,)    float32     3     12
    ['dense']['w']  (2, 3)  float32     6     24
    total           2 arrays            9     36
    0
    """
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    try:
        tree = load_tree(path, allow_pickle=allow_pickle)
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        print(f"python -m treekit show: {path}: {exc}", file=err)
        return 1
    print(summary(tree), file=out)
    return 0

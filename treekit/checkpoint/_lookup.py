"""What a safetensors checkpoint holds, read from its header alone: its tree with the shapes and
dtypes of its arrays (:func:`metadata`), and one leaf, reading only its bytes (:func:`load_leaf`);
local files or URLs, whose header is one ranged request."""

from __future__ import annotations

import os
from typing import Any

from treekit.checkpoint import _saved, _values
from treekit.checkpoint._io import RECORD, damaged, parse_record, uncollected
from treekit.checkpoint._npz import PICKLE_FILE, ZIP_HEADS, PickleRefused, file_head, may_be_pickle
from treekit.core import flatten, keystr
from treekit.files import Where, locate

__all__ = ["load_leaf", "metadata"]


def _header(path: Where) -> tuple[Any, Any]:
    """(the structure record or None, the safetensors header) of a file, read from its header alone."""
    from treekit.checkpoint import _safetensors

    if file_head(path) in ZIP_HEADS:
        raise ValueError(
            f"{path}: expected a .safetensors file (treekit.save's layout), got a .npz; "
            "treekit.load reads a .npz whole"
        )
    try:
        header = _safetensors.read_header(path)
    except ValueError:
        if may_be_pickle(file_head(path)):
            raise PickleRefused(PICKLE_FILE) from None
        raise
    raw = header.metadata.get(RECORD)
    dtype = _safetensors.dtype_name_of
    record = None if raw is None else parse_record(path, raw.encode("utf-8"), header.tensors, dtype)
    return record, header


@uncollected
def metadata(
    path: str | os.PathLike[str] | Where, *, filesystem: Any = None, storage_options: dict[str, Any] | None = None
) -> Any:
    """The tree saved in the ``.safetensors`` file ``path``, with :class:`~treekit.ShapeDtype` leaves for
    its arrays, read from the file's header alone (no array bytes, no jax).

    Other leaves come back as saved; typed PRNG keys as the shape and dtype of their key data.
    Where the structure needs a template (nodes only their class builds: see :func:`load`),
    and for a safetensors file treekit did not write, a flat dict from each array's name (its
    key path, as :func:`treekit.keystr` writes it) to its ``ShapeDtype``.

    >>> import os, tempfile
    >>> import numpy as np
    >>> from treekit import save
    >>> with tempfile.TemporaryDirectory() as d:
    ...     name = os.path.join(d, 'ckpt.safetensors')
    ...     save(name, {'w': np.zeros((2, 3), np.float32), 'step': 10})
    ...     metadata(name)
    {'w': ShapeDtype(shape=(2, 3), dtype='float32'), 'step': 10}

    Args:
        path: A ``.safetensors`` file (treekit's, or another tool's), or its URL (its header
            alone is fetched).
        filesystem: The pyarrow or fsspec filesystem ``path`` is on (see :func:`save`).
        storage_options: Options for the filesystem a URL names (see :func:`save`).

    Returns:
        The tree with ``ShapeDtype`` leaves for its arrays, or a flat dict (see above).

    Raises:
        ValueError: For a damaged file or one of another kind, naming the file and what is wrong.
    """
    from treekit.checkpoint import _safetensors
    from treekit.core import ShapeDtype

    where = locate(path, filesystem, storage_options)
    record, header = _header(where)
    specs = {name: ShapeDtype(t.shape, _safetensors.dtype_name_of(t)) for name, t in header.tensors.items()}

    def spec(entry: Any, _: Any) -> Any:
        if type(entry) is str:
            return specs[entry]
        if "value" in entry:
            return _values.decode(entry["value"])
        saved = specs[entry["array"]]
        return ShapeDtype(tuple(entry["shape"]), entry["dtype"]) if "shape" in entry else saved

    if record is None:
        return specs
    with damaged(where):
        try:
            return _saved.rebuild(record, specs, spec)
        except _saved.NeedsTemplate:
            return {_saved.path_of(e): spec(e, None) for e in _saved.arrays_of(record["nodes"])}


@uncollected
def load_leaf(
    path: str | os.PathLike[str] | Where,
    key_path: Any,
    *,
    mmap: bool = False,
    filesystem: Any = None,
    storage_options: dict[str, Any] | None = None,
) -> Any:
    """One array leaf of the ``.safetensors`` file ``path``, reading only its bytes.

    ``key_path`` is the leaf's key path: a tuple of key entries (as ``tree_flatten_with_path``
    gives), or its :func:`treekit.keystr` string (``"['params']['w']"``), or its tensor's name
    (``'params.w'``), or its plain keys joined by ``/`` or ``.`` (``'params/w'``, as
    ``flatten_dict`` and :func:`treekit.view` print them).

    >>> import os, tempfile
    >>> import numpy as np
    >>> from treekit import DictKey, save
    >>> with tempfile.TemporaryDirectory() as d:
    ...     name = os.path.join(d, 'ckpt.safetensors')
    ...     save(name, {'params': {'w': np.arange(3.0), 'b': np.zeros(2)}})
    ...     w, b = load_leaf(name, "['params']['w']"), load_leaf(name, (DictKey('params'), DictKey('b')))
    ...     w, b, load_leaf(name, 'params.b')  # (by keystr, by key entries, by tensor name)
    (array([0., 1., 2.]), array([0., 0.]), array([0., 0.]))

    Args:
        path: The file, or its URL (its header, then the leaf's bytes alone, are fetched).
        key_path: The leaf's key path (entries or keystr), or a tensor's name.
        mmap: Map the array read-only instead of reading it (a local file).
        filesystem: The pyarrow or fsspec filesystem ``path`` is on (see :func:`save`).
        storage_options: Options for the filesystem a URL names (see :func:`save`).

    Returns:
        The array (a typed PRNG key array for a saved key; a numpy scalar for a saved scalar).

    Raises:
        KeyError: If no array leaf has that key path; the message lists a few that do.
        ValueError: For a damaged file or one of another kind.
    """
    from treekit.checkpoint import _safetensors

    where = locate(path, filesystem, storage_options)
    record, header = _header(where)
    want = key_path if isinstance(key_path, str) else keystr(tuple(key_path))
    leaves = [] if record is None else _saved.arrays_of(record["nodes"])
    if record is None:
        entry: Any = want if want in header.tensors else None
    elif want in leaves:  # (an entry that is a name is the leaf at that path)
        entry = want
    else:  # by its key path, else by its tensor's name (params.w)
        entry = next((e for e in leaves if type(e) is dict and e.get("path") == want), None)
        entry = entry or next((e for e in leaves if type(e) is dict and e.get("array") == want), None)
        if entry is None and isinstance(key_path, str):  # its plain keys joined by / or . ('layers/0/b')
            found = _plain_path(where, want)
            entry = next((e for e in leaves if _saved.path_of(e) == found), None) if found else None
    if entry is None:
        names = [_saved.path_of(e) for e in leaves] if record is not None else list(header.tensors)
        raise KeyError(f"{where}: no array leaf at {want!r} (there are {len(names)}, e.g. {names[:3]})")
    name = entry if type(entry) is str else entry["array"]
    array = _safetensors.read_tensor(where, header, name, mmap=mmap)
    with damaged(where):
        return _saved.leaf_value(entry, {name: array})


def _plain_path(path: Where, want: str) -> str | None:
    """The keystr of the leaf of ``path``'s tree whose plain keys joined by ``/`` or ``.`` are
    ``want`` (as ``flatten_dict`` and the HTML view print them); ``None`` if none."""
    try:
        spec = metadata(path)
    except ValueError:
        return None
    paths = flatten(spec, with_path=True)[2]
    assert paths is not None
    for p in paths:
        if want in (keystr(p, simple=True, separator="/"), keystr(p, simple=True, separator=".")):
            return keystr(p)
    return None

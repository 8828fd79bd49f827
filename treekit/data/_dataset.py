"""A dataset :func:`treekit.data.write_parquet` wrote: a column per leaf of its spec (fixed dims as
fixed-size lists, a ``None`` dim as a list), the spec as JSON in every file's Parquet schema
metadata (never a pickle), and ``_treekit_dataset.json``, written last, which commits the write:
the files it lists (a write's parts, from every process), their rows, and each ragged leaf's
longest row. A reader reads the listed files only, so rows of an earlier or unfinished write
never mix in."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from treekit.core import ShapeDtype, dtype_name, flatten, keystr, printable
from treekit.data._arrow import list_levels

__all__ = ["MANIFEST", "SPEC_KEY", "Column", "Written", "columns_of", "read_manifest", "spec_text"]

MANIFEST = "_treekit_dataset.json"
SPEC_KEY = b"treekit.spec"
FORMAT = "treekit.data"
MANIFEST_LIMIT = 256 << 20  # (a manifest lists files: 100,000 of them take about 10 MB)
_KINDS = "biuf"  # bool, ints, floats: Parquet holds them as they are


@dataclass(frozen=True)
class Column:
    """One leaf of a written dataset's spec: its Parquet column ``name`` (the dict keys joined
    with ``.``), its key ``path``, its spec ``shape`` (rows first) and ``dtype``, and the dtype
    its values are stored as (``storage``: the same, or the unsigned ints of its width for
    jax's dtypes that Parquet has no type for, bfloat16, float8 and int4: their bits)."""

    name: str
    path: tuple[str, ...]
    shape: tuple[Any, ...]
    dtype: str
    storage: str

    @property
    def ragged(self) -> bool:
        return None in self.shape[1:]

    def numpy_dtype(self) -> Any:
        """The spec's dtype as numpy's (jax's extra dtypes through ml_dtypes)."""
        return numpy_dtype(self.dtype)

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "path": list(self.path), "shape": list(self.shape), "dtype": self.dtype}


def numpy_dtype(name: str) -> Any:
    import numpy as np

    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))


def _storage(dtype: Any, label: str) -> str:
    """The numpy dtype name ``dtype``'s values are stored as, or a ValueError naming ``label``."""
    name = dtype_name(dtype) if dtype is not None else None
    try:
        np_dtype = numpy_dtype(name) if name is not None else None
    except (TypeError, AttributeError, ImportError):
        np_dtype = None
    if np_dtype is not None and np_dtype.kind in _KINDS and np_dtype.itemsize <= 8:
        return str(np_dtype.name)
    if np_dtype is not None and name is not None and name.startswith(("bfloat", "float8", "int4", "uint4", "float4")):
        return f"uint{8 * np_dtype.itemsize}"
    raise ValueError(
        f"{label}: expected a dtype Parquet can hold (bool, ints, floats; bfloat16, float8 and int4 as their "
        f"bits), got {name}"
    )


def columns_of(spec: Any, label: str = "spec") -> list[Column]:
    """The columns of ``spec``: a dict of :class:`~treekit.ShapeDtype` (nested dicts of str
    keys), each shape's first dim the rows (a name or ``None``), the others ints >= 1,
    names, or one ``None`` (a ragged dim) right after the rows.

    >>> [c.name for c in columns_of({'x': ShapeDtype(('batch', 3), 'f32'), 'y': {'z': ShapeDtype(('batch',), 'i8')}})]
    ['x', 'y.z']

    Raises:
        ValueError: Naming the leaf: a dim or dtype Parquet cannot hold so, a key that is no
            str or holds ``.``, or two columns of one name (a ragged leaf's ``<name>_len`` too).
        TypeError: If a leaf is no ShapeDtype, or a node no dict (a bare ShapeDtype too).
    """
    if type(spec) is ShapeDtype:
        raise TypeError(f"{label}: expected a dict of ShapeDtype (its keys name the columns), got one ShapeDtype\n"
                        f"write {{'x': {spec!r}}}")
    leaves, _, paths = flatten(spec, with_path=True)
    assert paths is not None
    if not leaves:
        raise ValueError(f"{label}: expected at least one ShapeDtype leaf, got a tree of none")
    columns: list[Column] = []
    for path, leaf in zip(paths, leaves):
        where = f"{label}{keystr(path)}"
        keys = []
        for entry in path:
            key = getattr(entry, "key", None)
            if not isinstance(key, str) or type(entry).__name__ != "DictKey":
                raise TypeError(f"{where}: expected dicts of str keys down to each leaf, got {entry!r}")
            if not key or "." in key:
                raise ValueError(f"{where}: expected keys without '.' (it joins column names), got {key!r}")
            keys.append(key)
        if type(leaf) is not ShapeDtype:
            raise TypeError(f"{where}: expected a ShapeDtype, got {type(leaf).__name__}")
        shape = leaf.shape
        if not shape or not (shape[0] is None or (isinstance(shape[0], str) and not shape[0].startswith("*"))):
            raise ValueError(f"{where}: expected a shape whose first dim is the rows (a name or None), got {shape}")
        for axis, dim in enumerate(shape[1:], 1):
            fixed = isinstance(dim, int) and dim >= 1
            named = isinstance(dim, str) and not dim.startswith("*")
            if not (fixed or named or (dim is None and axis == 1)):
                raise ValueError(
                    f"{where}: expected dims after the rows that are ints >= 1, names, or None right after "
                    f"the rows (a ragged dim), got {dim!r} at axis {axis} of {shape}"
                )
        columns.append(Column(".".join(keys), tuple(keys), tuple(shape), str(dtype_name(leaf.dtype)) if leaf.dtype
                              is not None else "", _storage(leaf.dtype, where)))
    names = [c.name for c in columns] + [f"{c.name}_len" for c in columns if c.ragged]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(
            f"{label}: expected one column of each name, got {twice} twice "
            "(a ragged leaf adds <name>_len)"
        )
    return columns


def spec_text(columns: list[Column]) -> str:
    """The spec as it is stored in the schema metadata: JSON, one entry per column."""
    return json.dumps({"format": FORMAT, "version": 1, "columns": [c.as_json() for c in columns]}, sort_keys=True)


def _shape_dim(dim: Any) -> bool:
    return dim is None or (isinstance(dim, int) and not isinstance(dim, bool) and dim >= 1) or isinstance(dim, str)


def columns_from_text(text: bytes, where: str) -> list[Column]:
    """The columns a file's ``treekit.spec`` metadata holds, checked as a hostile file's would be.

    Raises:
        ValueError: Naming ``where`` and what is wrong (file text escaped).
    """
    try:
        raw = json.loads(text)
        assert isinstance(raw, dict) and raw.get("format") == FORMAT and raw.get("version") == 1
        spec: dict[str, Any] = {}
        for item in raw["columns"]:
            path, shape = item["path"], item["shape"]
            assert isinstance(path, list) and path and all(isinstance(k, str) for k in path)
            assert isinstance(shape, list) and all(map(_shape_dim, shape)) and isinstance(item["dtype"], str)
            node = spec
            for key in path[:-1]:
                node = node.setdefault(key, {})
                assert isinstance(node, dict)
            assert path[-1] not in node
            node[path[-1]] = ShapeDtype(tuple(shape), item["dtype"])
        columns = columns_of(spec, "spec")
    except Exception as exc:
        raise ValueError(
            f"{where}: expected treekit's spec (JSON of format {FORMAT!r}, version 1) in its schema metadata, "
            f"got {printable(text[:120])!s} ({type(exc).__name__}: {printable(exc, 160)})"
        ) from None
    return columns


@dataclass(frozen=True)
class Written:
    """A committed dataset's manifest: its files (names in its folder) and their rows, and each
    ragged column's longest row, and the named dims' sizes."""

    files: list[tuple[str, int]]
    longest: dict[str, int]
    sizes: dict[str, int]


def manifest_text(files: list[tuple[str, int]], longest: dict[str, int], sizes: dict[str, int], spec: str) -> bytes:
    body = {
        "format": FORMAT, "version": 1, "rows": sum(n for _, n in files),
        "files": [{"name": name, "rows": rows} for name, rows in files], "longest": longest, "sizes": sizes,
        "spec": json.loads(spec),
    }
    return (json.dumps(body, indent=1, sort_keys=True) + "\n").encode()


def read_manifest(raw: bytes, where: str) -> Written:
    """The manifest ``raw`` (the bytes of ``where``), checked as a hostile file's would be.

    >>> read_manifest(manifest_text([('part-0.parquet', 3)], {}, {}, '{}'), 'm').files
    [('part-0.parquet', 3)]

    Raises:
        ValueError: Naming ``where`` and what is wrong (file text escaped).
    """
    try:
        body = json.loads(raw)
        assert isinstance(body, dict) and body.get("format") == FORMAT and body.get("version") == 1
        files = []
        for item in body["files"]:
            name, rows = item["name"], item["rows"]
            assert isinstance(name, str) and name and "/" not in name and "\\" not in name
            assert not name.startswith((".", "_")) and type(rows) is int and rows >= 0
            files.append((name, rows))
        assert len({n for n, _ in files}) == len(files)
        longest, sizes = body["longest"], body["sizes"]
        for counts in (longest, sizes):
            assert isinstance(counts, dict)
            assert all(isinstance(k, str) and type(v) is int and v >= 0 for k, v in counts.items())
    except Exception as exc:
        raise ValueError(
            f"{where}: expected treekit's dataset manifest (JSON of format {FORMAT!r}, version 1, listing "
            f"plain file names), got {printable(raw[:120])!s} ({type(exc).__name__}: {printable(exc, 160)})"
        ) from None
    return Written(files, dict(longest), dict(sizes))


def dims_of(column: Column, sizes: dict[str, int]) -> tuple[int, ...]:
    """A column's dims after the rows (after its ragged dim, for a ragged one), names resolved."""
    dims = column.shape[2:] if column.ragged else column.shape[1:]
    return tuple(sizes.get(d, 1) if isinstance(d, str) else d for d in dims)


def check_written_type(kind: Any, column: Column, dims: tuple[int, ...], where: str) -> None:
    """Check that Arrow type ``kind`` is the one a write gives ``column`` (its dims after the rows,
    or after its ragged dim, ``dims``, names resolved): a list for the ragged dim, one fixed-size
    list of their product, of the stored dtype.

    Raises:
        ValueError: Naming ``where``, what the spec says and the type found.
    """
    import math

    import numpy as np

    want: list[int | None] = []
    if column.ragged:
        want.append(None)
    if math.prod(dims) != 1:  # (a write stores a block of one value as the value)
        want.append(math.prod(dims))
    got, value = list_levels(kind)
    if got != want or math.prod(dims) == 0:
        ok = False
    else:
        try:
            ok = value.to_pandas_dtype() == np.dtype(column.storage)
        except (NotImplementedError, TypeError):
            ok = False
    if not ok:
        raise ValueError(f"{where}: expected the type a write gives {column.dtype}{list(column.shape)}, got {kind}")


def read_spec(columns: list[Column], pads: dict[str, int]) -> Any:
    """The spec of what a written dataset's chunks hold: ragged dims padded to ``pads``, with
    their ``<name>_len`` leaves (int32)."""
    spec: dict[str, Any] = {}
    for c in columns:
        node = spec
        for key in c.path[:-1]:
            node = node.setdefault(key, {})
        if c.ragged:
            node[c.path[-1]] = ShapeDtype((c.shape[0], pads[c.name], *c.shape[2:]), c.dtype)
            node[f"{c.path[-1]}_len"] = ShapeDtype((c.shape[0],), "int32")
        else:
            node[c.path[-1]] = ShapeDtype(c.shape, c.dtype)
    return spec

"""Arrow columns as numpy arrays of rows, vectorized: numbers and strings as they are (a
``uint8`` column stays uint8), list columns of one length per level as fixed dims, ragged
ones padded or truncated to ``pad`` (with a ``<name>_len`` column), or reshaped to
``reshape`` (a binary column too, as uint8: raw image bytes); a ragged column without either,
or a null, is an error naming it and its rows."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["check_pad_reshape", "columns_to_numpy", "list_levels"]


def check_pad_reshape(pad: Any, reshape: Any) -> tuple[dict[str, int], dict[str, tuple[int, ...]]]:
    """``pad`` and ``reshape`` checked: ``{column: length >= 0}`` and ``{column: shape}``."""
    pads = dict(pad or {})
    shapes = {name: tuple(shape) for name, shape in dict(reshape or {}).items()}
    for name, length in pads.items():
        if type(length) is not int or length < 0:
            raise ValueError(f"pad[{name!r}]: expected a length (an int >= 0), got {length!r}")
    for name, shape in shapes.items():
        if not all(type(d) is int and d >= 0 for d in shape):
            raise ValueError(f"reshape[{name!r}]: expected a shape of ints >= 0, got {shape!r}")
    both = sorted(set(pads) & set(shapes))
    if both:
        raise ValueError(f"pad and reshape: expected each column in one of them, got {both} in both")
    return pads, shapes


def _rows_text(rows: Any, values: Any = None, limit: int = 5) -> str:
    shown = [int(r) for r in rows[:limit]]
    text = ", ".join(str(r) for r in shown) + (f" and {len(rows) - limit} more" if len(rows) > limit else "")
    if values is not None:
        text += " (lengths " + ", ".join(str(int(v)) for v in values[:limit]) + ")"
    return text


def _no_nulls(array: Any, name: str, where: str) -> None:
    """Raise, naming the rows, if the Arrow ``array`` holds a null."""
    import numpy as np

    if array.null_count:
        nulls = np.flatnonzero(np.asarray(array.is_null()))
        raise ValueError(f"column {name!r} ({where}): expected no nulls, got {len(nulls)}, at {_rows_text(nulls)}")


def _numpy(array: Any, name: str, where: str) -> Any:
    """A flat Arrow array of values (no lists) as numpy; nulls are an error naming the rows."""
    _no_nulls(array, name, where)
    return array.to_numpy(zero_copy_only=False)


def _bytes(array: Any, name: str, where: str) -> tuple[Any, list[Any]]:
    """A binary column (raw bytes a row, as Spark's ``binary``) as uint8 values and row lengths."""
    import numpy as np
    import pyarrow as pa

    _no_nulls(array, name, where)
    width = np.int64 if pa.types.is_large_binary(array.type) else np.int32
    _, offsets, data = array.buffers()
    offsets = np.frombuffer(offsets, width)[array.offset : array.offset + len(array) + 1]
    values = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    return pa.array(values[offsets[0] : offsets[-1]]), [np.diff(offsets)]


def _lengths(array: Any) -> Any:
    """A list array's list lengths, from its offsets (pyarrow.compute costs 0.3 s to import)."""
    import numpy as np
    import pyarrow as pa

    if pa.types.is_fixed_size_list(array.type):
        return np.full(len(array), array.type.list_size, dtype=np.int64)
    return np.diff(np.asarray(array.offsets))


def _unlist(array: Any, name: str, where: str, rows: int) -> tuple[Any, list[Any]]:
    """A list column flattened level by level: (the values, each level's per-element lengths)."""
    import pyarrow as pa

    levels = []
    while pa.types.is_list(array.type) or pa.types.is_large_list(array.type) or pa.types.is_fixed_size_list(array.type):
        _no_nulls(array, name, where)
        levels.append(_lengths(array))
        array = array.flatten()
        if isinstance(array, pa.ExtensionArray):
            array = array.storage
    return array, levels


def list_levels(kind: Any) -> tuple[list[int | None], Any]:
    """Arrow type ``kind``'s list levels, outermost first: each one's fixed size (``None`` for a
    variable-length one); and the type of the values inside them all."""
    import pyarrow as pa

    sizes: list[int | None] = []
    while pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        sizes.append(kind.list_size if pa.types.is_fixed_size_list(kind) else None)
        kind = kind.value_type
    return sizes, kind


def _per_row(levels: list[Any], depth: int) -> Any:
    """How many elements of level ``depth`` (``len(levels)``: values) each row holds."""
    import numpy as np

    counts = levels[0]
    for lengths in levels[1:depth]:
        ends = np.cumsum(counts)
        sums = np.concatenate([[0], np.cumsum(lengths)])
        counts = sums[ends] - sums[ends - counts]
    return counts


def _fixed(values: Any, levels: list[Any], sizes: list[int | None], name: str, where: str, rows: int) -> Any:
    """Rows of a list column whose every level has one length: an array ``[rows, *lengths]``."""
    import numpy as np

    shape = []
    for depth, lengths in enumerate(levels):
        if lengths.size and (lengths != lengths[0]).any():
            odd = np.flatnonzero(lengths != lengths[0])
            if depth:  # the rows holding lists of another length, once each
                rows_of = np.unique(np.repeat(np.arange(rows), _per_row(levels, depth))[odd])
                got = f"rows {_rows_text(rows_of)} hold lists of other lengths than row 0's first, {int(lengths[0])}"
            else:
                got = f"rows {_rows_text(odd, lengths[odd])} where row 0 has {int(lengths[0])}"
            raise ValueError(
                f"column {name!r} ({where}): expected lists of one length, got ragged lists: {got}\n"
                f"pass pad={{{name!r}: length}} to pad or truncate them to one length"
            )
        shape.append(int(lengths[0]) if lengths.size else sizes[depth] or 0)
    return _numpy(values, name, where).reshape(rows, *shape)


def _reshaped(values: Any, levels: list[Any], shape: tuple[int, ...], name: str, where: str, rows: int) -> Any:
    """Rows of a list column reshaped to ``shape``, after one check of each row's element count."""
    import numpy as np

    counts = _per_row(levels, len(levels)) if levels else np.ones(rows, dtype=np.int64)
    size = math.prod(shape)
    odd = np.flatnonzero(counts != size)
    if odd.size:
        raise ValueError(
            f"column {name!r} ({where}): expected {size} values a row to reshape to {shape}, got rows "
            f"{_rows_text(odd, counts[odd])}"
        )
    return _numpy(values, name, where).reshape(rows, *shape)


def _padded(
    values: Any, levels: list[Any], sizes: list[int | None], length: int, name: str, where: str, rows: int
) -> tuple[Any, Any]:
    """A list column padded with zeros or truncated to ``length`` elements a row; the kept
    lengths. Each element is a value, or (``levels`` past the first, of one length each: a
    written dataset's ``(rows, None, 16)``) an array of those lengths."""
    import numpy as np

    lengths, inner = levels[0], []
    for depth, (counts, fixed) in enumerate(zip(levels[1:], sizes[1:]), 1):
        if fixed is None and counts.size and (counts != counts[0]).any():
            raise ValueError(
                f"pad[{name!r}] ({where}): expected lists of values, or of lists of one length each, "
                f"got lists of other lengths at depth {depth}"
            )
        inner.append(fixed if fixed is not None else int(counts[0]) if counts.size else 0)
    flat = _numpy(values, name, where)
    block = math.prod(inner)
    flat = flat.reshape(-1, block) if block else np.zeros((int(lengths.sum()), 0), flat.dtype)
    out = np.zeros((rows, length, block), dtype=flat.dtype)
    starts = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    kept = np.minimum(lengths, length)
    row_of = np.repeat(np.arange(rows), kept)
    at = np.arange(row_of.size) - np.repeat(np.cumsum(kept) - kept, kept)
    out[row_of, at] = flat[np.repeat(starts[:-1], kept) + at]
    return out.reshape(rows, length, *inner), kept.astype(np.int32)


def columns_to_numpy(
    table: Any, names: Sequence[str], pads: Mapping[str, int], shapes: Mapping[str, tuple[int, ...]], where: str,
    exact: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The columns ``names`` of the Arrow ``table`` as numpy arrays of its rows.

    >>> import pyarrow as pa
    >>> table = pa.table({'x': pa.array([1, 2], pa.uint8()), 'tokens': [[5, 6, 7], [8]]})
    >>> out = columns_to_numpy(table, ['x', 'tokens'], {'tokens': 2}, {}, 'a table')
    >>> out['x'].dtype, out['tokens'].tolist(), out['tokens_len'].tolist()
    (dtype('uint8'), [[5, 6], [8, 0]], [2, 1])

    ``exact``: columns whose ``pad`` is the longest row there is (a written dataset's): a longer
    row is an error, not cut.

    Raises:
        ValueError: For a null, a ragged list column without ``pad`` or ``reshape``, rows
            whose values do not fill ``reshape``'s shape, or a row longer than an ``exact``
            column's pad; the message names the column, ``where`` and the rows.
    """
    import numpy as np
    import pyarrow as pa

    out = {}
    rows = table.num_rows
    for name in names:
        column = table.column(name)  # (combine_chunks copies even one chunk: 15 MB of images a row group)
        array = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
        if isinstance(array, pa.ExtensionArray):  # HF datasets' ArrayND: its storage holds the lists
            array = array.storage
        raw = pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type)
        if raw and (name in pads or name in shapes):
            values, levels = _bytes(array, name, where)
        else:
            values, levels = _unlist(array, name, where, rows)
        if name in pads:
            if not levels:
                raise ValueError(f"pad[{name!r}] ({where}): expected a column of lists, got {array.type}")
            if name in exact and levels[0].size and levels[0].max() > pads[name]:
                odd = np.flatnonzero(levels[0] > pads[name])
                raise ValueError(
                    f"column {name!r} ({where}): expected rows of at most {pads[name]} (the longest its dataset's "
                    f"manifest records), got rows {_rows_text(odd, levels[0][odd])}"
                )
            sizes = list_levels(array.type)[0]
            out[name], out[f"{name}_len"] = _padded(values, levels, sizes, pads[name], name, where, rows)
        elif name in shapes:
            out[name] = _reshaped(values, levels, shapes[name], name, where, rows)
        elif levels:
            out[name] = _fixed(values, levels, list_levels(array.type)[0], name, where, rows)
        else:
            out[name] = _numpy(values, name, where)
    return out

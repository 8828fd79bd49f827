"""Rows to write, as Arrow columns: trees of numpy arrays (examples, or chunks of rows) taken in
blocks, checked against a written dataset's columns (dims, named dims' sizes, dtypes: a value
cast where it fits, else an error naming its key path and row) and turned into an Arrow table
a row group at a time without a Python object per value (fixed dims as one fixed-size list
over the leaf's own buffer, a ragged dim as offsets)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any

from treekit.core import describe_leaf, flatten, keystr
from treekit.data._casts import fits
from treekit.data._chunks import Source
from treekit.data._dataset import SPEC_KEY, Column

__all__ = ["Rows", "rows_of"]

EXAMPLES_PER_BLOCK = 1024


class Rows:
    """The rows waiting to be written, column by column: numpy arrays of rows (fixed columns),
    lists of each row's array (ragged ones); checked, cast to the spec's dtypes and counted."""

    def __init__(self, columns: list[Column]) -> None:
        self.columns = columns
        self.dtypes = [c.numpy_dtype() for c in columns]
        self.parts: list[list[Any]] = [[] for _ in columns]
        self.rows = 0  # waiting
        self.seen = 0  # rows taken in so far (the row numbers errors name)
        self.sizes: dict[str, int] = {}  # named dims' sizes
        self.longest = {c.name: 0 for c in columns if c.ragged}

    def _dims(self, column: Column, shape: tuple[int, ...], first_axis: int, where: str) -> None:
        """Check the dims of ``shape`` (from ``first_axis`` of the spec's shape on) against the spec."""
        want = column.shape[first_axis:]
        if len(shape) != len(want):
            raise ValueError(f"{where}: expected {len(want)} dims ({list(want)}), got shape {shape}")
        for dim, got in zip(want, shape):
            if isinstance(dim, int) and dim != got:
                raise ValueError(f"{where}: expected dims {list(want)}, got shape {shape}")
            if isinstance(dim, str):
                if self.sizes.setdefault(dim, got) != got:
                    raise ValueError(
                        f"{where}: expected {dim}={self.sizes[dim]} (as in the rows before), got shape {shape}"
                    )

    def _cast(self, i: int, array: Any, where: str, first: int | None) -> Any:
        """``array`` as the spec's dtype where its values are the dtype's values too (``first``:
        the row number of its first row, for an array of rows; ``None`` for one row's array)."""
        import numpy as np

        column, target = self.columns[i], self.dtypes[i]
        if array.dtype == target:
            return array
        if column.storage == column.dtype:
            exact = not (array.dtype.kind in "iu" and target.kind == "f")  # (2**53 + 1 fits no float64)
            if array.size == 0 or (exact and np.can_cast(array.dtype, target, "safe")):
                return array.astype(target)
            ok = fits(array.reshape(1, -1) if first is None else array, target)
            if ok is not None and ok.all():
                with np.errstate(invalid="ignore", over="ignore"):
                    return array.astype(target)
            if ok is not None and first is not None:
                bad = int(np.flatnonzero(~ok)[0])
                where = f"{where.split(' (')[0]} (row {first + bad})"
                raise ValueError(f"{where}: expected values that fit {column.dtype}, got {array[bad].tolist()!r:.80}")
        raise ValueError(f"{where}: expected values of {column.dtype}, got {describe_leaf(array)}")

    def _ragged_rows(self, i: int, values: list[Any], label: str, first: int) -> None:
        """Check (and cast, in place) the rows of ragged column ``i``: each row's dims after its
        first are the spec's; a row whose shape or dtype is not the common one is looked at alone."""
        column, target = self.columns[i], self.dtypes[i]
        tail = tuple(self.sizes.get(d, -1) if isinstance(d, str) else d for d in column.shape[2:])
        for k, v in enumerate(values):
            if v.dtype != target or v.ndim != len(column.shape) - 1 or v.shape[1:] != tail:
                where = f"{label} (row {first + k})"
                self._dims(column, v.shape, 1, where)
                tail = tuple(self.sizes.get(d, -1) if isinstance(d, str) else d for d in column.shape[2:])
                values[k] = self._cast(i, v, where, None)

    def add_examples(self, examples: list[Any], treedef: Any, paths: list[Any]) -> None:
        """Take ``examples`` (trees of the spec's structure, one row each)."""
        import numpy as np

        first = self.seen
        rows = []
        for k, example in enumerate(examples):
            try:
                rows.append(treedef.flatten_up_to(example))
            except (ValueError, TypeError) as exc:  # (the structure's difference, with the row)
                raise ValueError(f"example (row {first + k}): {exc}") from None
        for i, column in enumerate(self.columns):
            values = [np.asarray(row[i]) for row in rows]
            label = f"example{keystr(paths[i])}"
            if column.ragged:
                self._ragged_rows(i, values, label, first)
                self.parts[i].append(values)
                continue
            shape = values[0].shape if values else ()
            for k, v in enumerate(values):
                if v.shape != shape:
                    raise ValueError(
                        f"{label} (row {first + k}): expected the shape of row {first} ({list(shape)}), "
                        f"got {list(v.shape)}"
                    )
            self._dims(column, shape, 1, f"{label} (rows {first}-{first + len(values) - 1})")
            stacked = np.stack(values) if values else np.zeros((0, *shape), self.dtypes[i])
            self.parts[i].append(self._cast(i, stacked, f"{label} (rows {first}-{first + len(values) - 1})", first))
        self.rows += len(examples)
        self.seen += len(examples)

    def add_chunk(self, leaves: list[Any], paths: list[Any]) -> None:
        """Take a chunk: leaves of rows (a ragged leaf as a list of its rows' arrays)."""
        import numpy as np

        first, count = self.seen, None
        taken = []
        for i, column in enumerate(self.columns):
            leaf = leaves[i]
            label = f"chunk{keystr(paths[i])} (rows from {first})"
            if column.ragged and isinstance(leaf, (list, tuple)):
                values = [np.asarray(v) for v in leaf]
                self._ragged_rows(i, values, f"chunk{keystr(paths[i])}", first)
                taken.append(values)
                n = len(values)
            elif column.ragged:
                got = describe_leaf(leaf)
                raise TypeError(f"{label}: expected a list of each row's array (a ragged leaf), got {got}")
            else:
                array = np.asarray(leaf)
                if array.ndim == 0:
                    raise ValueError(f"{label}: expected an array of rows, got a scalar")
                self._dims(column, array.shape[1:], 1, label)
                taken.append(self._cast(i, array, label, first))
                n = array.shape[0]
            if count is None:
                count = n
            elif n != count:
                raise ValueError(f"{label}: expected {count} rows (as the chunk's first leaf), got {n}")
        for i, value in enumerate(taken):
            self.parts[i].append(value)
        self.rows += count or 0
        self.seen += count or 0

    def take(self, n: int) -> list[Any]:
        """The first ``n`` waiting rows, column by column, taken out."""
        import numpy as np

        out: list[Any] = []
        for i, column in enumerate(self.columns):
            parts: list[Any] = self.parts[i]
            if column.ragged:
                flat = [row for part in parts for row in part]
                out.append(flat[:n])
                self.parts[i] = [flat[n:]] if len(flat) > n else []
                continue
            if not parts:
                dims = [self.sizes.get(d, 1) if isinstance(d, str) else d for d in column.shape[1:]]
                parts = [np.zeros((0, *dims), self.dtypes[i])]
            joined = parts[0] if len(parts) == 1 else np.concatenate(parts)
            out.append(joined[:n])
            self.parts[i] = [joined[n:]] if joined.shape[0] > n else []
        self.rows -= n
        return out

    def row_bytes(self) -> int:
        """Bytes of values a row holds, from the rows waiting (the default row group's size)."""
        total = 0
        for i, column in enumerate(self.columns):
            for part in self.parts[i]:
                # (a ragged row is a numpy array of its own: about 100 bytes besides its values)
                total += sum(v.nbytes + 100 for v in part) if column.ragged else part.nbytes
        return max(1, total // max(1, self.rows))

    def table(self, values: list[Any], spec: str) -> Any:
        """Arrow table of one row group's ``values``, the spec in its schema's metadata."""
        import numpy as np
        import pyarrow as pa

        arrays = []
        for i, column in enumerate(self.columns):
            storage = np.dtype(column.storage)
            value = values[i]
            if column.ragged:
                lengths = np.fromiter((v.shape[0] for v in value), np.int64, len(value))
                inner = value[0].shape[1:] if value else tuple(self.sizes.get(d, 1) if isinstance(d, str) else d
                                                               for d in column.shape[2:])
                flat = np.concatenate([v.reshape(-1) for v in value]) if value else np.zeros(0, self.dtypes[i])
                if lengths.size:
                    self.longest[column.name] = max(self.longest[column.name], int(lengths.max()))
                array = _fixed_lists(pa.array(flat.view(storage)), math.prod(inner))
                offsets = np.zeros(len(value) + 1, np.int64)
                np.cumsum(lengths, out=offsets[1:])
                if offsets[-1] >= 2**31:
                    raise ValueError(
                        f"{column.name}: expected fewer than 2**31 list elements in a row group, got {offsets[-1]}\n"
                        "pass a smaller row_group_size"
                    )
                kind = pa.list_(pa.field("element", array.type, nullable=False))
                arrays.append(pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), array, type=kind))
            else:
                flat = np.ascontiguousarray(value).reshape(-1).view(storage)
                arrays.append(_fixed_lists(pa.array(flat), math.prod(value.shape[1:])))
        schema = pa.schema([pa.field(c.name, a.type, nullable=False) for c, a in zip(self.columns, arrays)],
                           metadata={SPEC_KEY: spec.encode()})
        return pa.Table.from_arrays(arrays, schema=schema)


def _fixed_lists(values: Any, size: int) -> Any:
    """``values`` in fixed-size lists of ``size`` (a leaf's fixed dims, flattened: one list level
    encodes at about twice the speed of one per dim), of non-null values; ``values`` for 1."""
    import pyarrow as pa

    if size == 1 and not pa.types.is_fixed_size_list(values.type):
        return values
    kind = pa.list_(pa.field("element", values.type, nullable=False), size)
    return pa.FixedSizeListArray.from_arrays(values, type=kind)


def _items(source: Any, chunks: bool) -> tuple[Iterator[Any], bool]:
    """The items to write and whether each is a chunk of rows (a treekit source's are)."""
    if isinstance(source, Source):
        return iter(source), True
    if not isinstance(source, Iterable):
        raise TypeError(f"source: expected an iterable of trees or a treekit.data source, got {type(source).__name__}")
    return iter(source), chunks


def rows_of(columns: list[Column], spec_tree: Any, source: Any, chunks: bool) -> Iterator[Rows]:
    """The rows of ``source``, taken into one :class:`Rows` in blocks (yielded after each)."""
    _, treedef, paths = flatten(spec_tree, with_path=True)
    assert paths is not None
    items, of_chunks = _items(source, chunks)
    pending = Rows(columns)
    block: list[Any] = []
    for item in items:
        if of_chunks:
            pending.add_chunk(treedef.flatten_up_to(item), paths)
            yield pending
            continue
        block.append(item)
        if len(block) == EXAMPLES_PER_BLOCK:
            pending.add_examples(block, treedef, paths)
            block = []
            yield pending
    if block:
        pending.add_examples(block, treedef, paths)
    yield pending

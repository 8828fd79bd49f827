"""A Hugging Face ``datasets.Dataset`` read through its Arrow table, slice by slice, so that
every column keeps its feature's dtype (``with_format('numpy')`` makes a uint8 feature int64,
``with_format('jax')`` int32)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from treekit.data._arrow import check_pad_reshape, columns_to_numpy
from treekit.data._chunks import Chunk, Source, check_rows
from treekit.data._plan import Plan, PlannedSource

__all__ = ["HFSource", "from_hf"]

SLICE_ROWS = 1024  # the rows of one unit: what a shard takes and a seed shuffles


class HFSource(PlannedSource):
    """Chunks of a ``datasets.Dataset``'s rows: see :func:`treekit.data.from_hf`."""

    def __init__(
        self, dataset: Any, *, columns: Sequence[str] | None, shard: Any, seed: int | None, num_epochs: int | None,
        pad: Any, reshape: Any,
    ) -> None:
        names = list(getattr(dataset, "column_names", None) or [])
        if not names or not hasattr(dataset, "with_format"):
            raise TypeError(f"dataset: expected a datasets.Dataset, got {type(dataset).__name__}")
        self.columns = list(columns) if columns is not None else names
        unknown = [c for c in self.columns if c not in names]
        if unknown:
            raise ValueError(f"columns: expected names among {names}, got {unknown}")
        self.pads, self.shapes = check_pad_reshape(pad, reshape)
        self.table = dataset.with_format("arrow")
        self.rows = len(dataset)
        self.plan = Plan(-(-self.rows // SLICE_ROWS), shard=shard, seed=seed, num_epochs=num_epochs)
        self.position: dict[str, Any] = {"epoch": 0, "index": 0}

    def chunks(self) -> Iterator[Chunk]:
        for position, unit in self.plan.units(self.position):
            start, stop = unit * SLICE_ROWS, min((unit + 1) * SLICE_ROWS, self.rows)
            where = f"dataset rows {start}-{stop - 1}"
            table = self.table[start:stop].select(self.columns)
            arrays = columns_to_numpy(table, self.columns, self.pads, self.shapes, where)
            chunk = check_rows(self.shuffled(arrays, position, unit, stop - start), where, position)
            self.read_from(position)
            yield chunk


def from_hf(
    dataset: Any,
    *,
    columns: Sequence[str] | None = None,
    shard: Any = None,
    seed: int | None = None,
    num_epochs: int | None = 1,
    pad: dict[str, int] | None = None,
    reshape: dict[str, tuple[int, ...]] | None = None,
) -> Source:
    """A source of a Hugging Face ``datasets.Dataset``'s rows, read from its Arrow table.

    Each column keeps its feature's dtype: a ``Value('uint8')`` or an ``Array2D(dtype='uint8')``
    stays uint8, a ``ClassLabel`` int64; a ``Sequence`` of one length per row becomes a fixed
    dim, a ragged one needs ``pad``. Rows are read 1,024 at a time; ``shard`` and ``seed``
    work on those slices as :func:`treekit.data.parquet`'s do on row groups.

    >>> import datasets
    >>> ds = datasets.Dataset.from_dict({'pixels': [[1, 2], [3, 4], [5, 6]], 'label': [0, 1, 0]},
    ...     features=datasets.Features({'pixels': datasets.Sequence(datasets.Value('uint8'), length=2),
    ...                                 'label': datasets.ClassLabel(names=['a', 'b'])}))
    >>> chunk = next(iter(from_hf(ds)))
    >>> chunk['pixels'].dtype, chunk['pixels'].shape, chunk['label'].tolist()
    (dtype('uint8'), (3, 2), [0, 1, 0])

    Args:
        dataset: A ``datasets.Dataset`` (after any ``map``, ``select`` or ``shuffle``).
        columns: The columns to read; all by default.
        shard: ``(index, count)`` or ``'process'``, as for :func:`treekit.data.parquet`.
        seed: Shuffles the slices and the rows in each, differently each epoch.
        num_epochs: How many times to read the data; ``None`` for ever.
        pad: ``{column: length}``, as for :func:`treekit.data.parquet`.
        reshape: ``{column: shape}``, as for :func:`treekit.data.parquet`.

    Returns:
        The source.

    Raises:
        TypeError: If ``dataset`` is not a ``datasets.Dataset``.
        ValueError: For an unknown column, and when reading, a null or a ragged column without
            ``pad``, named with its rows.
    """
    return HFSource(dataset, columns=columns, shard=shard, seed=seed, num_epochs=num_epochs, pad=pad, reshape=reshape)

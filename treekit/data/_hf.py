"""A Hugging Face ``datasets.Dataset`` read through its Arrow table, slice by slice, so that
every column keeps its feature's dtype (``with_format('numpy')`` makes a uint8 feature int64,
``with_format('jax')`` int32); a streaming ``IterableDataset`` through its Arrow batches, its
state datasets' own ``state_dict()``; a ``DatasetDict``'s split by name."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from treekit.data._arrow import check_pad_reshape, columns_to_numpy
from treekit.data._chunks import Chunk, Source, check_rows
from treekit.data._plan import Plan, PlannedSource, resolve_shard

__all__ = ["HFSource", "HFStreamSource", "from_hf"]

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


class HFStreamSource(Source):
    """Chunks of a streaming ``datasets.IterableDataset``: see :func:`treekit.data.from_hf`."""

    def __init__(self, dataset: Any, *, columns: Sequence[str] | None, pad: Any, reshape: Any) -> None:
        names = list(getattr(dataset, "column_names", None) or [])  # (None where the features are unknown)
        unknown = [c for c in columns or () if names and c not in names]
        if unknown:
            raise ValueError(f"columns: expected names among {names}, got {unknown}")
        self.columns = list(columns) if columns is not None else None
        self.pads, self.shapes = check_pad_reshape(pad, reshape)
        self.dataset = dataset.with_format("arrow")
        self.state: dict[str, Any] = {"stream": copy.deepcopy(self.dataset.state_dict()), "rows": 0}

    def get_state(self) -> dict[str, Any]:
        return copy.deepcopy(self.state)

    def set_state(self, state: dict[str, Any]) -> None:
        ok = isinstance(state, dict) and isinstance(state.get("stream"), dict) and type(state.get("rows")) is int
        if not ok:
            raise ValueError(f"state: expected a dict with 'stream' and 'rows' (from get_state), got {state!r:.200}")
        self.state = copy.deepcopy(state)

    def chunks(self) -> Iterator[Chunk]:
        self.dataset.load_state_dict(copy.deepcopy(self.state["stream"]))
        for table in self.dataset.iter(batch_size=SLICE_ROWS):
            state, first = self.get_state(), self.state["rows"]
            where = f"stream rows {first}-{first + table.num_rows - 1}"
            columns = self.columns if self.columns is not None else list(table.column_names)
            arrays = columns_to_numpy(table.select(columns), columns, self.pads, self.shapes, where)
            self.state = {"stream": copy.deepcopy(self.dataset.state_dict()), "rows": first + table.num_rows}
            yield check_rows(arrays, where, state)


def _split(dataset: Any, split: str | None) -> Any:
    """``dataset``, or its split ``split`` where it is a ``DatasetDict``."""
    if isinstance(dataset, Mapping):  # (a DatasetDict or IterableDatasetDict is a dict of splits)
        names = list(dataset)
        if split is None:
            raise ValueError(f"dataset: a dict of splits {names}: expected split= naming one (split={names[0]!r})")
        if split not in dataset:
            raise ValueError(f"split: expected one of {names}, got {split!r}")
        return dataset[split]
    if split is not None:
        raise ValueError(f"split: expected None for a {type(dataset).__name__} (a split already), got {split!r}")
    return dataset


def from_hf(
    dataset: Any,
    *,
    split: str | None = None,
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

    A streaming ``IterableDataset`` (``load_dataset(..., streaming=True)``) is read through its
    Arrow batches of 1,024 rows; the source's state holds datasets' own ``state_dict()``, so a
    pipeline resumes exactly where it stopped. ``shard`` splits it with datasets'
    ``split_dataset_by_node`` (by shards where it has as many as the processes, else by
    example); shuffle it with its own ``shuffle(seed=..., buffer_size=...)``, and read it for
    more epochs by reading it again (``seed`` and ``num_epochs`` are the table's alone).

    >>> import datasets
    >>> ds = datasets.Dataset.from_dict({'pixels': [[1, 2], [3, 4], [5, 6]], 'label': [0, 1, 0]},
    ...     features=datasets.Features({'pixels': datasets.Sequence(datasets.Value('uint8'), length=2),
    ...                                 'label': datasets.ClassLabel(names=['a', 'b'])}))
    >>> chunk = next(iter(from_hf(ds)))
    >>> chunk['pixels'].dtype, chunk['pixels'].shape, chunk['label'].tolist()
    (dtype('uint8'), (3, 2), [0, 1, 0])

    Args:
        dataset: A ``datasets.Dataset`` (after any ``map``, ``select`` or ``shuffle``), a
            streaming ``datasets.IterableDataset``, or a ``DatasetDict`` with ``split``.
        split: The split of a ``DatasetDict`` (or ``IterableDatasetDict``) to read.
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
        ValueError: For a dict of splits without ``split`` (naming them) or an unknown split,
            an unknown column, ``seed`` or ``num_epochs`` other than 1 for a stream, and when
            reading, a null or a ragged column without ``pad``, named with its rows.
    """
    dataset = _split(dataset, split)
    if type(dataset).__name__ != "IterableDataset" or not hasattr(dataset, "state_dict"):
        return HFSource(
            dataset, columns=columns, shard=shard, seed=seed, num_epochs=num_epochs, pad=pad, reshape=reshape
        )
    if seed is not None or num_epochs != 1:
        raise ValueError(
            f"seed={seed!r}, num_epochs={num_epochs!r}: expected None and 1 for a streaming dataset (shuffle it "
            "with its own shuffle(seed=..., buffer_size=...); read it again for another epoch)"
        )
    if shard is not None:
        import importlib

        split_by_node = importlib.import_module("datasets.distributed").split_dataset_by_node
        index, count = resolve_shard(shard)
        dataset = split_by_node(dataset, rank=index, world_size=count)
    return HFStreamSource(dataset, columns=columns, pad=pad, reshape=reshape)

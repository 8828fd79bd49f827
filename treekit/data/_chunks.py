"""Chunks: a tree of numpy arrays sharing a leading axis of rows, where they came from, and the
source's state to read them again; the base of every source, and the checks a chunk gets."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from treekit.core import KeyPath, TreeDef, describe_leaf, flatten, keystr

__all__ = ["Chunk", "Source", "check_rows", "origin_text"]


@dataclass(frozen=True)
class Chunk:
    """Rows read together: ``leaves`` (numpy arrays, one per leaf of ``treedef``, all with
    ``rows`` rows), ``where`` they came from (a file's row group, a slice), and ``state``, the
    source's state that reads this chunk next (the one to resume from)."""

    leaves: list[Any]
    treedef: TreeDef
    paths: list[KeyPath]
    rows: int
    where: str
    state: dict[str, Any]


class Source(ABC):
    """What every source gives: its chunks as trees (``for chunk in source``), and a state.

    ``get_state()`` is a JSON-able dict; ``set_state(state)`` on a source made with the same
    arguments goes on from there. :func:`treekit.data.batches` reads ``chunks()``, which also
    says where each chunk came from and the state that reads it again.

    >>> import numpy as np
    >>> from treekit.data import from_iterable
    >>> source = from_iterable([{'x': np.arange(3)}, {'x': np.arange(2)}], chunks=True)
    >>> [chunk['x'].tolist() for chunk in source], source.get_state()
    ([[0, 1, 2], [0, 1]], {'consumed': 2})
    """

    @abstractmethod
    def chunks(self) -> Iterator[Chunk]:
        """The chunks from the current state on, each with where it came from."""

    @abstractmethod
    def get_state(self) -> dict[str, Any]:
        """The state that reads the next chunk: a JSON-able dict."""

    @abstractmethod
    def set_state(self, state: dict[str, Any]) -> None:
        """Go on from ``state`` (from :meth:`get_state` of a source made with the same arguments)."""

    def __iter__(self) -> Iterator[Any]:
        for chunk in self.chunks():
            yield chunk.treedef.unflatten(chunk.leaves)


def origin_text(where: str, start: int, stop: int) -> str:
    """``where``'s rows ``start`` to ``stop - 1``, in words: ``part-0.parquet row group 3 rows 0-9``."""
    return f"{where} row {start}" if stop - start == 1 else f"{where} rows {start}-{stop - 1}"


def check_rows(tree: Any, where: str, state: dict[str, Any]) -> Chunk:
    """``tree`` as a :class:`Chunk`: every leaf an array with the same leading dim (its rows).

    >>> import numpy as np
    >>> check_rows({'x': np.zeros((4, 2)), 'y': np.arange(4)}, 'a list', {}).rows
    4
    >>> check_rows({'x': np.zeros((4, 2)), 'y': np.arange(3)}, 'a list', {})
    Traceback (most recent call last):
    ...
    ValueError: chunk['y'] (a list): expected 4 rows (as chunk['x']), got 3 rows (i64[3])

    Raises:
        ValueError: If a leaf has no leading dim, or its rows differ from the first leaf's.
        TypeError: If a leaf is not an array.
    """
    leaves, treedef, paths = flatten(tree, with_path=True)
    assert paths is not None
    if not leaves:
        raise ValueError(f"chunk ({where}): expected at least one array, got a tree with no leaves")
    rows, first = None, ()
    for path, leaf in zip(paths, leaves):
        shape = getattr(leaf, "shape", None)
        if shape is None or not hasattr(leaf, "dtype"):
            raise TypeError(f"chunk{keystr(path)} ({where}): expected an array, got {type(leaf).__name__}")
        if len(shape) == 0:
            raise ValueError(f"chunk{keystr(path)} ({where}): expected an array of rows, got a scalar")
        if rows is None:
            rows, first = int(shape[0]), path
        elif int(shape[0]) != rows:
            raise ValueError(
                f"chunk{keystr(path)} ({where}): expected {rows} rows (as chunk{keystr(first)}), "
                f"got {int(shape[0])} rows ({describe_leaf(leaf)})"
            )
    assert rows is not None
    return Chunk(leaves, treedef, paths, rows, where, state)

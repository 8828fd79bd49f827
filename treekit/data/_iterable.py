"""Any iterable as a source: of examples (trees, stacked a few hundred at a time) or of chunks
(a petastorm reader's batches, a grain iterator's, a generator's); its state is what it has
consumed, or the iterable's own ``get_state()`` where it has one (grain's)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from treekit.core import describe_leaf, flatten, keystr
from treekit.data._chunks import Chunk, Source, check_rows

__all__ = ["IterableSource", "from_iterable"]

EXAMPLES_PER_CHUNK = 256


def _stack(examples: list[Any], first: int) -> Any:
    """``examples`` (trees of one structure) stacked leaf by leaf into one tree of rows."""
    import numpy as np

    leaves, treedef, paths = flatten(examples[0], with_path=True)
    assert paths is not None
    columns: list[list[Any]] = [[leaf] for leaf in leaves]
    for example in examples[1:]:
        other = treedef.flatten_up_to(example)
        for column, leaf in zip(columns, other):
            column.append(leaf)
    out = []
    for path, column in zip(paths, columns):
        shapes = [np.shape(x) for x in column]
        if any(shape != shapes[0] for shape in shapes):
            odd = [k for k, shape in enumerate(shapes) if shape != shapes[0]]
            rows = ", ".join(f"{first + k} {describe_leaf(np.asarray(column[k]))}" for k in odd[:5])
            raise ValueError(
                f"example{keystr(path)}: expected the shape of row {first} ({describe_leaf(np.asarray(column[0]))}) "
                f"in every row, got rows {rows}{' ...' if len(odd) > 5 else ''}\n"
                "pad the leaf to one shape in the examples, or give chunks (chunks=True) of one shape"
            )
        out.append(np.stack([np.asarray(x) for x in column]))
    return treedef.unflatten(out)


class IterableSource(Source):
    """Chunks from any iterable: see :func:`treekit.data.from_iterable`."""

    def __init__(self, iterable: Iterable[Any], *, chunks: bool) -> None:
        if not isinstance(iterable, Iterable):
            raise TypeError(f"iterable: expected an iterable of trees, got {type(iterable).__name__}")
        self.iterable, self.of_chunks = iterable, chunks
        self.own_state = all(callable(getattr(iterable, name, None)) for name in ("get_state", "set_state"))
        self.consumed = 0
        self.restored: dict[str, Any] | None = None

    def get_state(self) -> dict[str, Any]:
        if self.own_state:
            return {"state": self.iterable.get_state()}  # type: ignore[attr-defined]
        return {"consumed": self.consumed}

    def set_state(self, state: dict[str, Any]) -> None:
        key = "state" if self.own_state else "consumed"
        if not isinstance(state, dict) or key not in state:
            raise ValueError(f"state: expected a dict with {key!r} (from get_state), got {state!r}")
        if self.own_state:
            self.iterable.set_state(state["state"])  # type: ignore[attr-defined]
        elif type(state["consumed"]) is not int or state["consumed"] < 0:
            raise ValueError(f"state['consumed']: expected an int >= 0, got {state['consumed']!r}")
        else:
            self.consumed = state["consumed"]

    def chunks(self) -> Iterator[Chunk]:
        items = iter(self.iterable)
        if not self.own_state:  # start where the state says: skip what was consumed
            for _ in range(self.consumed):
                if next(items, _END) is _END:
                    return
        while True:
            state = self.get_state()
            first = self.consumed
            if self.of_chunks:
                item = next(items, _END)
                if item is _END:
                    return
                self.consumed += 1
                yield check_rows(item, f"chunk {first}", state)
                continue
            examples = []
            failed = None
            try:
                for item in items:
                    examples.append(item)
                    if len(examples) == EXAMPLES_PER_CHUNK:
                        break
            except Exception as error:  # (the examples before it are a chunk first: batched, not lost)
                failed = error
            if examples:
                self.consumed += len(examples)
                yield check_rows(_stack(examples, first), f"examples {first}-{first + len(examples) - 1}", state)
            if failed is not None:
                raise failed
            if not examples:
                return


_END: Any = object()


def from_iterable(iterable: Iterable[Any], *, chunks: bool = False) -> Source:
    """A source of any iterable: of examples (trees), or with ``chunks=True`` of chunks (trees
    of arrays sharing a leading axis, such as a petastorm reader's or a grain iterator's batches).

    >>> import numpy as np
    >>> examples = [{'x': np.full(2, i), 'y': i} for i in range(5)]
    >>> chunk = next(iter(from_iterable(examples)))
    >>> chunk['x'].shape, chunk['y'].tolist()
    ((5, 2), [0, 1, 2, 3, 4])

    The state is the count of items consumed (``set_state`` skips as many from a fresh
    iterator: give an iterable that starts again, a list or a dataset, not a spent iterator),
    unless the iterable has ``get_state``/``set_state`` of its own (grain's iterators), which
    are used instead.

    Args:
        iterable: Examples or chunks.
        chunks: Whether its items are chunks (rows stacked already) rather than examples.

    Returns:
        The source.

    Raises:
        TypeError: If ``iterable`` is not iterable, or a leaf is not an array-like.
        ValueError: When reading, examples of different structures or of different shapes at
            a leaf (named with the rows and shapes), or a chunk whose leaves' rows differ.
    """
    return IterableSource(iterable, chunks=chunks)

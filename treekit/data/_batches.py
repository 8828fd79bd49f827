"""Batches of exactly ``batch_size`` rows from a source's chunks: cast to a spec's dtypes where
the values fit, checked against the spec, mixed in shuffle windows, and resumable: the state
is where the next batch's first row is (a source state, rows to skip, a window, counts).

An error in a row (a value its dtype cannot hold) or in the source is raised by the ``next()``
that would return the batch holding that row (with a shuffle buffer: the first batch that needs
a row of its window): every batch before it comes whole, and the state then points at that
batch, so a run resumed after a fix goes on there."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from treekit.checks import SpecMismatchError, check_spec
from treekit.core import StructureMismatchError, keystr
from treekit.data._casts import CASTS, cast_leaves
from treekit.data._chunks import Chunk, Source, origin_text

__all__ = ["Batches", "batches"]


@dataclass
class _Piece:
    """A chunk (from the source, or a shuffle window) and the first of its rows not yet batched.
    ``anchor`` is the state that reads it again: (source state, rows to skip, window, skipped)."""

    chunk: Chunk
    start: int
    anchor: dict[str, Any]
    error: BaseException | None = None  # raised where a batch needs a row after the chunk's


class Batches:
    """Batches of a source's rows: see :func:`treekit.data.batches`. An iterator with a state.

    >>> import numpy as np
    >>> from treekit.data import batches, from_iterable
    >>> it = batches(from_iterable([{'x': np.int64(i)} for i in range(5)]), 2)
    >>> next(it)['x'].tolist(), it.get_state()['batches']
    ([0, 1], 1)
    """

    def __init__(
        self, source: Source, batch_size: int, *, spec: Any, drop_remainder: bool, pad_remainder: bool, cast: str,
        on_bad_row: str, shuffle_buffer: int, seed: int,
    ) -> None:
        if not isinstance(source, Source):
            raise TypeError(f"source: expected a treekit.data source, got {type(source).__name__}")
        if type(batch_size) is not int or batch_size < 1:
            raise ValueError(f"batch_size: expected an int >= 1, got {batch_size!r}")
        if cast not in CASTS:
            raise ValueError(f"cast: expected one of {sorted(CASTS)}, got {cast!r}")
        if on_bad_row not in ("raise", "skip"):
            raise ValueError(f"on_bad_row: expected 'raise' or 'skip', got {on_bad_row!r}")
        if type(shuffle_buffer) is not int or shuffle_buffer < 0:
            raise ValueError(f"shuffle_buffer: expected an int >= 0 (rows), got {shuffle_buffer!r}")
        self.source, self.batch_size, self.spec = source, batch_size, spec
        self.drop_remainder, self.pad_remainder = drop_remainder, pad_remainder
        self.cast, self.on_bad_row, self.shuffle_buffer, self.seed = cast, on_bad_row, shuffle_buffer, seed
        self.state: dict[str, Any] = {"source": source.get_state(), "skip": 0, "window": 0, "offset": 0}
        self.state.update(batches=0, skipped=0, recount=0)
        self._run: Iterator[Any] | None = None

    def get_state(self) -> dict[str, Any]:
        """Where the next batch starts: a JSON-able dict (``batches``: those handed out;
        ``skipped``: rows dropped by ``on_bad_row='skip'`` in the chunks read so far)."""
        return dict(self.state)

    def set_state(self, state: dict[str, Any]) -> None:
        """Go on from ``state`` (from :meth:`get_state` of batches made with the same arguments)."""
        keys = ("source", "skip", "window", "offset", "batches", "skipped", "recount")
        if not isinstance(state, dict) or any(k not in state for k in keys):
            raise ValueError(f"state: expected a dict with {list(keys)} (from get_state), got {state!r}")
        self.state = {k: state[k] for k in keys}
        self._run = None

    def __iter__(self) -> Batches:
        return self

    def __next__(self) -> Any:
        if self._run is None:
            self._run = self._batches()
        return next(self._run)

    # -- the row stream: source chunks, cleaned, then (with a shuffle buffer) mixed in windows --
    def _cleaned(self, state: dict[str, Any]) -> Iterator[_Piece]:
        """The source's chunks from ``state`` on, cast (bad rows dropped or raised), each with
        the anchor that reads it again; the first one's first ``state['skip']`` rows left out."""
        self.source.set_state(state["source"])
        skipped, skip = state["skipped"] - state["recount"], state["skip"]
        first = None
        for chunk in self.source.chunks():
            if first is None:
                first = chunk
            else:
                _check_alike(chunk, first)
            anchor = {"source": chunk.state, "skip": 0, "skipped": skipped}
            chunk, bad, error = cast_leaves(chunk, self.spec, self.cast, self.on_bad_row)
            skipped += bad
            self._skipped = skipped
            yield _Piece(chunk, min(skip, chunk.rows), anchor, error)  # (the rows before a bad one, and its error)
            if error is not None:
                return
            skip = 0

    def _windows(self, pieces: Iterator[_Piece], window: int, offset: int) -> Iterator[_Piece]:
        """Rows in windows of ``shuffle_buffer``, each shuffled by (seed, its number)."""
        import numpy as np

        pending: deque[_Piece] = deque()
        while True:
            anchor = None
            rows = 0
            parts = []
            failed: BaseException | None = None  # (a bad row or the source's error: this window holds it)
            while rows < self.shuffle_buffer:
                if not pending:
                    if not self._pull(pieces, pending):
                        break
                piece = pending[0]
                if anchor is None:
                    anchor = {**piece.anchor, "skip": piece.start}
                take = min(piece.chunk.rows - piece.start, self.shuffle_buffer - rows)
                parts.append((piece.chunk, piece.start, piece.start + take))
                rows += take
                piece.start += take
                if piece.start == piece.chunk.rows:
                    if piece.error is None:
                        pending.popleft()
                    elif rows < self.shuffle_buffer:
                        failed = piece.error
                        break
                    else:  # (this window is whole: the next one raises the error)
                        break
            if failed is not None:  # (raised by the first batch that needs a row of this window)
                assert anchor is not None
                yield _Piece(_EMPTY, 0, {**anchor, "window": window}, failed)
                return
            if not parts:
                return
            assert anchor is not None
            order = np.random.default_rng([self.seed, window]).permutation(rows)
            first = parts[0][0]
            leaves = [np.concatenate([c.leaves[i][a:b] for c, a, b in parts])[order] for i in range(len(first.leaves))]
            where = f"shuffle window {window} (from {origin_text(first.where, parts[0][1], parts[0][2])} on)"
            mixed = Chunk(leaves, first.treedef, first.paths, rows, where, {})
            yield _Piece(mixed, min(offset, rows), {**anchor, "window": window})
            window, offset = window + 1, 0

    def _batches(self) -> Iterator[Any]:
        import numpy as np

        state = self.state
        self._skipped = state["skipped"] - state["recount"]
        pieces = self._cleaned(state)
        if self.shuffle_buffer:
            pieces = self._windows(pieces, state["window"], state["offset"])
        pending: deque[_Piece] = deque()
        count = state["batches"]
        passed = None  # the structure, dtypes and shapes of a batch that matched the spec
        while True:
            rows = sum(p.chunk.rows - p.start for p in pending)
            while rows < self.batch_size and not (pending and pending[-1].error) and self._pull(pieces, pending):
                rows += pending[-1].chunk.rows - pending[-1].start
            if rows < self.batch_size and pending and pending[-1].error is not None:
                self._run = None  # (the next next() reads again from the state: this batch)
                raise pending[-1].error
            size = min(rows, self.batch_size)
            if size == 0 or (size < self.batch_size and self.drop_remainder and not self.pad_remainder):
                return
            parts: list[tuple[Chunk, int, int]] = []
            taken = 0
            while taken < size:
                piece = pending[0]
                take = min(piece.chunk.rows - piece.start, size - taken)
                taken += take
                parts.append((piece.chunk, piece.start, piece.start + take))
                piece.start += take
                if piece.start == piece.chunk.rows and piece.error is None:
                    pending.popleft()  # (one with an error stays: the next batch raises it)
            first = parts[0][0]
            if len(parts) == 1:
                leaves = [leaf[parts[0][1] : parts[0][2]] for leaf in first.leaves]
            else:
                leaves = [np.concatenate([c.leaves[i][a:b] for c, a, b in parts]) for i in range(len(first.leaves))]
            batch = first.treedef.unflatten(leaves)
            if self.spec is not None and passed != (looks := (first.treedef, [(x.dtype, x.shape) for x in leaves])):
                try:
                    check_spec(batch, self.spec)
                except SpecMismatchError as err:
                    origin = "; ".join(origin_text(c.where, a, b) for c, a, b in parts)
                    raise SpecMismatchError(f"batch {count} (rows from {origin}): {err}") from None
                passed = looks  # (a batch that looks the same matches the spec the same: not checked again)
            if self.pad_remainder:
                batch = _padded(batch, leaves, first, size, self.batch_size)
            count += 1
            if not pending:  # the next batch's first row: in the next piece, read now
                self._pull(pieces, pending)
            self.state = self._state_at(pending, count)
            yield batch

    def _pull(self, pieces: Iterator[_Piece], pending: deque[_Piece]) -> bool:
        """Append the next piece to ``pending``; ``False`` at the end of the rows. What the source
        raises is appended as an empty piece holding it, at the source's state then (the next
        batch that needs a row raises it)."""
        try:
            piece = next(pieces, None)
        except Exception as error:
            state = {"source": self.source.get_state(), "skip": 0, "window": 0, "skipped": self._skipped}
            piece = _Piece(_EMPTY, 0, state, error)
        if piece is None:
            return False
        pending.append(piece)
        return True

    def _state_at(self, pending: deque[_Piece], count: int) -> dict[str, Any]:
        """The state that reads the next batch: the first pending piece's anchor and place."""
        counts = {"batches": count, "skipped": self._skipped}
        if not pending:  # the end: a state that reads nothing more
            return {**self.state, "source": self.source.get_state(), "skip": 0, "offset": 0, **counts, "recount": 0}
        piece = pending[0]
        anchor = piece.anchor
        counts["recount"] = self._skipped - anchor["skipped"]  # (the chunks read again count them again)
        if self.shuffle_buffer:
            return {"source": anchor["source"], "skip": anchor["skip"], "window": anchor["window"],
                    "offset": piece.start, **counts}
        return {"source": anchor["source"], "skip": piece.start, "window": 0, "offset": 0, **counts}


_EMPTY = Chunk([], None, [], 0, "", {})  # type: ignore[arg-type]  # (the rows of a piece that holds only an error)


def _check_alike(chunk: Chunk, first: Chunk) -> None:
    """Raise unless ``chunk``'s rows have ``first``'s structure and trailing shapes (they are batched together)."""
    if chunk.treedef != first.treedef:
        raise StructureMismatchError(
            f"chunk ({chunk.where})", (), f"the structure of the chunks before, {first.treedef}", str(chunk.treedef)
        )
    for path, leaf, before in zip(chunk.paths, chunk.leaves, first.leaves):
        if leaf.shape[1:] != before.shape[1:]:
            raise ValueError(
                f"chunk{keystr(path)} ({chunk.where}): expected rows of shape {before.shape[1:]}, as in "
                f"{first.where}, got rows of shape {leaf.shape[1:]}"
            )


def _padded(batch: Any, leaves: list[Any], first: Chunk, size: int, batch_size: int) -> Any:
    """``batch`` of ``size`` rows padded with zeros to ``batch_size`` rows (the last one), with a
    ``mask`` leaf: ``True`` for its real rows (all of them but in the last)."""
    import numpy as np

    if not isinstance(batch, dict) or "mask" in batch:
        what = "a dict with a 'mask' key" if isinstance(batch, dict) else type(batch).__name__
        raise TypeError(f"pad_remainder: expected batches that are dicts without a 'mask' key, got {what}")
    if size < batch_size:
        full = [np.concatenate([leaf, np.zeros((batch_size - size, *leaf.shape[1:]), leaf.dtype)]) for leaf in leaves]
        batch = first.treedef.unflatten(full)
    out = dict(batch)
    out["mask"] = np.arange(batch_size) < size
    return out


def batches(
    source: Source,
    batch_size: int,
    *,
    spec: Any = None,
    drop_remainder: bool = True,
    pad_remainder: bool = False,
    cast: str = "safe",
    on_bad_row: str = "raise",
    shuffle_buffer: int = 0,
    seed: int = 0,
) -> Batches:
    """Batches of exactly ``batch_size`` rows from ``source``, checked against ``spec``.

    >>> import numpy as np
    >>> from treekit import ShapeDtype
    >>> from treekit.data import from_iterable
    >>> rows = [{'x': np.full(2, i, np.int64), 'y': i} for i in range(7)]
    >>> spec = {'x': ShapeDtype(('batch', 2), 'i32'), 'y': ShapeDtype(('batch',), 'i64')}
    >>> out = list(batches(from_iterable(rows), 3, spec=spec))
    >>> [b['y'].tolist() for b in out], out[0]['x'].dtype
    ([[0, 1, 2], [3, 4, 5]], dtype('int32'))

    Args:
        source: A source of :mod:`treekit.data` (``parquet``, ``from_hf``, ``from_iterable``).
        batch_size: The rows of every batch.
        spec: A treekit spec of a batch (:class:`treekit.ShapeDtype` leaves, ``'batch'`` or
            ``'*batch'`` dims); every batch is checked, and a mismatch names the key path, the
            batch number and the source rows it came from.
        drop_remainder: Whether to leave out a last batch of fewer rows (else it is smaller).
        pad_remainder: Pad the last batch with zeros to ``batch_size`` rows, with a ``mask`` leaf
            (``True`` for real rows); the batches must be dicts.
        cast: ``'safe'``: cast to the spec's dtypes where the values fit (a uint8 column to
            int32; int64 to int32 when every value is in int32's range), else a bad row;
            ``'unsafe'``: ``astype`` whatever the values; ``'none'``: leave dtypes as they are.
        on_bad_row: ``'raise'``, or ``'skip'``: drop rows whose values do not fit the spec's
            dtype, counted in the state's ``skipped``.
        shuffle_buffer: Mix rows in windows of this many (each shuffled by ``seed`` and its
            number, so a resumed run mixes them the same); 0 leaves the source's order.
        seed: The windows' seed.

    Returns:
        An iterator of batches, with ``get_state()`` and ``set_state()``.

    The state (:meth:`Batches.get_state`) is a JSON-able dict: ``set_state`` on batches made
    the same way (a fresh source included) goes on with exactly the next batch.

    Raises:
        SpecMismatchError: A batch that does not match ``spec``.
        ValueError: A row whose values do not fit (``on_bad_row='raise'``), bad arguments.

    Each error of a row, and anything the source raises, comes at the ``next()`` that would
    return the batch holding that row (with ``shuffle_buffer``: the first batch that needs a row
    of its window); every batch before it is delivered whole and in order, and ``get_state()``
    then points at that batch: a run resumed from it after a fix goes on there.
    """
    return Batches(
        source, batch_size, spec=spec, drop_remainder=drop_remainder, pad_remainder=pad_remainder, cast=cast,
        on_bad_row=on_bad_row, shuffle_buffer=shuffle_buffer, seed=seed,
    )


"""Which units a source reads, in which order: a shard's share of the units (a file's row
groups, a table's slices), shuffled differently each epoch when there is a seed, epoch after
epoch; the position is ``{'epoch', 'index'}``, the next unit's place in its epoch's order."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from treekit.data._chunks import Source

__all__ = ["Plan", "PlannedSource", "check_position", "resolve_shard"]


def resolve_shard(shard: Any) -> tuple[int, int]:
    """``shard`` as ``(index, count)``: ``None`` is ``(0, 1)``, ``'process'`` this process's.

    >>> resolve_shard(None), resolve_shard((1, 4))
    ((0, 1), (1, 4))
    >>> resolve_shard((4, 4))
    Traceback (most recent call last):
    ...
    ValueError: shard: expected (index, count) with 0 <= index < count, got (4, 4)

    Raises:
        ValueError: If ``shard`` is none of those.
    """
    if shard is None:
        return 0, 1
    if shard == "process":
        import jax

        return jax.process_index(), jax.process_count()
    ok = isinstance(shard, (tuple, list)) and len(shard) == 2 and all(type(v) is int for v in shard)
    if not ok or not 0 <= shard[0] < shard[1]:
        raise ValueError(f"shard: expected (index, count) with 0 <= index < count, got {shard!r}")
    return int(shard[0]), int(shard[1])


def _check_epochs(num_epochs: Any) -> int | None:
    if num_epochs is not None and (type(num_epochs) is not int or num_epochs < 1):
        raise ValueError(f"num_epochs: expected an int >= 1 or None (for ever), got {num_epochs!r}")
    return num_epochs


class Plan:
    """The order in which one shard reads ``count`` units.

    Shard ``i`` of ``n`` reads units ``i, i + n, i + 2n, ...`` (so shards are disjoint and cover
    every unit); with a ``seed``, each epoch reads them in its own order, and each unit's rows
    in an order of their own (:meth:`row_order`), the same for the same seed, epoch and unit.

    >>> plan = Plan(6, shard=(1, 2), seed=None, num_epochs=2)
    >>> [unit for _, unit in plan.units({'epoch': 0, 'index': 0})]
    [1, 3, 5, 1, 3, 5]
    """

    def __init__(self, count: int, *, shard: Any, seed: int | None, num_epochs: int | None) -> None:
        self.index, self.shards = resolve_shard(shard)
        if seed is not None and type(seed) is not int:
            raise TypeError(f"seed: expected an int or None, got {type(seed).__name__}")
        self.count, self.seed, self.num_epochs = count, seed, _check_epochs(num_epochs)
        self.mine = list(range(self.index, count, self.shards))

    def order(self, epoch: int) -> list[int]:
        """This shard's units in epoch ``epoch``'s order."""
        if self.seed is None:
            return self.mine
        import numpy as np

        return [self.mine[i] for i in np.random.default_rng([self.seed, epoch]).permutation(len(self.mine))]

    def row_order(self, epoch: int, unit: int, rows: int) -> Any:
        """The order of a unit's ``rows`` in epoch ``epoch``: ``None`` (as stored) without a seed."""
        if self.seed is None:
            return None
        import numpy as np

        return np.random.default_rng([self.seed, epoch, unit, 1]).permutation(rows)

    def units(self, position: dict[str, Any]) -> Iterator[tuple[dict[str, Any], int]]:
        """``(position, unit)`` from ``position`` on: each unit with the position that reads it."""
        epoch, index = check_position(position)
        while self.num_epochs is None or epoch < self.num_epochs:
            if not self.mine:
                return
            order = self.order(epoch)
            for k in range(index, len(order)):
                yield {"epoch": epoch, "index": k}, order[k]
            epoch, index = epoch + 1, 0


def check_position(position: Any) -> tuple[int, int]:
    """``(epoch, index)`` of a position from a state, or a ValueError naming what is wrong."""
    keys = ("epoch", "index")
    ok = isinstance(position, dict) and all(type(position.get(k)) is int and position[k] >= 0 for k in keys)
    if not ok:
        raise ValueError(f"state: expected {{'epoch': int >= 0, 'index': int >= 0}}, got {position!r}")
    return position["epoch"], position["index"]


class PlannedSource(Source):
    """A source whose units a :class:`Plan` orders: its state is the position of its next unit."""

    plan: Plan
    position: dict[str, Any]

    def get_state(self) -> dict[str, Any]:
        return dict(self.position)

    def set_state(self, state: dict[str, Any]) -> None:
        epoch, index = check_position(state)
        self.position = {"epoch": epoch, "index": index}

    def read_from(self, position: dict[str, Any]) -> None:
        """Note that the unit at ``position`` has been read: the next one is after it."""
        if position["index"] + 1 < len(self.plan.mine):
            self.position = {"epoch": position["epoch"], "index": position["index"] + 1}
        else:
            self.position = {"epoch": position["epoch"] + 1, "index": 0}

    def shuffled(self, arrays: dict[str, Any], position: dict[str, Any], unit: int, rows: int) -> dict[str, Any]:
        """``arrays``' rows in the plan's order for ``unit`` at ``position`` (as they are without a seed)."""
        order = self.plan.row_order(position["epoch"], unit, rows)
        return arrays if order is None else {k: v[order] for k, v in arrays.items()}

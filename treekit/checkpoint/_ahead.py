"""Device-to-host copies started ahead of a writer: while one array is written to the file, the
copies of the next ones (up to a byte budget) run on the device's DMA engines, so reading off
the device and writing the file overlap instead of taking turns."""

from __future__ import annotations

from typing import Any

__all__ = ["Ahead"]

WINDOW = 1 << 28  # bytes of copies in flight ahead of the array being written


class Ahead:
    """Starts ``copy_to_host_async`` on the arrays of the entries after the one being written.

    >>> ahead = Ahead([[], []], [8, 8])
    >>> ahead.reach(0); ahead.started
    2
    """

    def __init__(self, arrays: list[list[Any]], sizes: list[int], window: int = WINDOW) -> None:
        """``arrays[i]``: the jax arrays (a whole array, or its shards) entry ``i`` will read,
        ``sizes[i]`` its bytes; numpy arrays need no copy (an empty list)."""
        self.arrays, self.sizes, self.window = arrays, sizes, window
        self.started = 0  # entries whose copies are started
        self.pending = 0  # bytes of the entries from the current one to self.started

    def reach(self, i: int) -> None:
        """Entry ``i`` is next: its copies, and the next ones' up to the window, are started."""
        if i > 0:
            self.pending -= self.sizes[i - 1]
        while self.started < len(self.sizes) and (self.started <= i or self.pending < self.window):
            for x in self.arrays[self.started]:
                x.copy_to_host_async()
            self.pending += self.sizes[self.started]
            self.started += 1

"""Bytes written to a file from a thread of their own, through a few host buffers reused from
save to save: the caller copies each piece into a free buffer and goes on to the next one while
the thread writes the last.

Why: the host memory a device-to-host transfer has just filled is slow to hand to ``write``
where the kernel is a sandbox's (gVisor, as on the TPU machines measured: 1.2-1.7 s for 1 GB
written straight from ``jax.device_get``'s arrays, 0.5-0.9 s for the same bytes from long-lived
arrays). Copying it into buffers that were written before costs a ``memcpy``, and the buffers'
pages are then ones the kernel already knows (docs/performance.md, "Checkpoints on a TPU v5e").
"""

from __future__ import annotations

import threading
from queue import SimpleQueue
from typing import IO, Any, Protocol

__all__ = ["Staged", "Writes"]

PIECE = 1 << 22  # bytes per buffer, and per write() call
BUFFERS = 8  # buffers in use at once by one writer (32 MB)
_spare: list[Any] = []  # buffers writers gave back, for the next one
_spare_lock = threading.Lock()


class Writes(Protocol):
    """What the writers of arrays need: a file, or a :class:`Staged` in front of one."""

    def write(self, data: Any, /) -> int: ...


class Staged:
    """A file-like ``write`` that copies ``data`` into reused buffers, each written by a thread
    once full, in order.

    Use it as a context manager around the writes; leaving it waits for the thread and raises
    the first error a write met (an error also ends the copying at the next ``write``).

    >>> import io
    >>> f = io.BytesIO()
    >>> with Staged(f) as out:
    ...     _ = out.write(b'abc'); _ = out.write(bytearray(b'def'))
    >>> f.getvalue()
    b'abcdef'
    """

    def __init__(self, f: IO[bytes], piece: int | None = None) -> None:
        self.f, self.piece = f, piece or PIECE
        self.free: SimpleQueue[Any] = SimpleQueue()
        self.full: SimpleQueue[tuple[Any, int] | None] = SimpleQueue()
        self.error: BaseException | None = None
        self.buffer: Any = None  # the buffer being filled, its first `used` bytes
        self.used = 0
        with _spare_lock:
            taken = [_spare.pop() for _ in range(min(BUFFERS, len(_spare)))] if self.piece == PIECE else []
        self.owned = taken + [bytearray(self.piece) for _ in range(BUFFERS - len(taken))]
        for buffer in self.owned:
            self.free.put(buffer)
        self.thread = threading.Thread(target=self._run, name="treekit-write", daemon=True)

    def __enter__(self) -> Staged:
        self.thread.start()
        return self

    def _run(self) -> None:
        while (job := self.full.get()) is not None:
            buffer, n = job
            if self.error is None:
                try:
                    self.f.write(memoryview(buffer)[:n])
                except BaseException as exc:  # (raised in the caller's thread, at its next write or the end)
                    self.error = exc
            self.free.put(buffer)

    def write(self, data: Any) -> int:
        """Copy ``data`` (bytes-like, C-contiguous) into the buffers, each queued for writing once
        full; its length. Raises the first error a write met, and ``TypeError`` for data that is
        not C-contiguous, before any of it is copied (as ``BufferedWriter.write`` refuses it)."""
        view = memoryview(data).cast("B")  # (refuses a strided view: TypeError)
        at = 0
        while at < len(view):
            if self.buffer is None:
                if self.error is not None:
                    raise self.error
                self.buffer, self.used = self.free.get(), 0
            n = min(len(view) - at, self.piece - self.used)
            self.buffer[self.used : self.used + n] = view[at : at + n]
            self.used += n
            at += n
            if self.used == self.piece:
                self._send()
        return len(view)

    def _send(self) -> None:
        self.full.put((self.buffer, self.used))
        self.buffer = None

    def __exit__(self, *exc: object) -> None:
        if self.buffer is not None and exc[0] is None:
            self._send()
        self.full.put(None)
        self.thread.join()
        with _spare_lock:  # (kept for the next writer: their pages are known to the kernel now)
            _spare.extend(self.owned[: max(0, BUFFERS - len(_spare))] if self.piece == PIECE else ())
        if self.error is not None and exc[0] is None:
            raise self.error

"""A progress line on a terminal for long saves and loads: shown once a job has run about a
second, only when standard error is a terminal, and erased when the job ends."""

from __future__ import annotations

import sys
import time
from typing import IO


class Progress:
    """Counts bytes done of ``total``; past ``after`` seconds, redraws ``label: done / total (pct)``.

    >>> import io
    >>> with Progress('save ckpt', 100, stream=io.StringIO()) as bar:
    ...     bar.advance(60)
    >>> bar.done
    60
    """

    def __init__(self, label: str, total: int, *, stream: IO[str] | None = None, after: float = 1.0) -> None:
        self.label, self.total, self.done, self.after = label, total, 0, after
        self.stream = sys.stderr if stream is None else stream
        isatty = getattr(self.stream, "isatty", None)
        self.on = bool(isatty and isatty())  # never into a file, a pipe or a captured stream
        self.start = self.last = time.monotonic()
        self.shown = False

    def __enter__(self) -> Progress:
        return self

    def advance(self, nbytes: int) -> None:
        self.done += nbytes
        if not self.on:
            return
        now = time.monotonic()
        if now - self.start >= self.after and (not self.shown or now - self.last >= 0.1 or self.done >= self.total):
            self.last, self.shown = now, True
            pct = 100 * self.done // self.total if self.total else 100
            self.stream.write(f"\rtreekit {self.label}: {_size(self.done)} / {_size(self.total)} ({pct}%)\x1b[K")
            self.stream.flush()

    def __exit__(self, *exc: object) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000  # type: ignore[assignment]
    return f"{n} B"

"""The progress line of long saves and loads (treekit/checkpoint/_progress.py)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

import treekit
from treekit.checkpoint import _progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_sees_the_line_once_the_job_runs_long_and_it_is_erased_at_the_end() -> None:
    out = Terminal()
    with _progress.Progress("save ckpt", 2_000_000, stream=out, after=0.0) as bar:
        bar.advance(1_000_000)
        bar.advance(1_000_000)
    text = out.getvalue()
    assert "\rtreekit save ckpt: 1.0 MB / 2.0 MB (50%)\x1b[K" in text
    assert "2.0 MB / 2.0 MB (100%)" in text and text.endswith("\r\x1b[K")


def test_nothing_is_written_to_a_file_or_before_the_delay() -> None:
    plain, quick = io.StringIO(), Terminal()
    for stream, after in ((plain, 0.0), (quick, 60.0)):
        with _progress.Progress("load x", 10, stream=stream, after=after) as bar:
            bar.advance(10)
        assert stream.getvalue() == ""


def test_saves_and_loads_report_their_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = Terminal()
    made: list[_progress.Progress] = []
    real = _progress.Progress.__init__

    def init(self: _progress.Progress, label: str, total: int, **kwargs: object) -> None:
        real(self, label, total, stream=out, after=0.0)
        made.append(self)

    monkeypatch.setattr(_progress.Progress, "__init__", init)
    name = tmp_path / "ckpt.safetensors"
    treekit.save(name, {"w": np.zeros(1000, np.float32), "b": np.zeros(10)})
    treekit.load(name)
    want = [("save ckpt.safetensors", 4080, 4080), ("load ckpt.safetensors", 4080, 4080)]
    assert [(p.label, p.total, p.done) for p in made] == want
    assert "treekit load ckpt.safetensors: 4.1 KB / 4.1 KB (100%)" in out.getvalue()

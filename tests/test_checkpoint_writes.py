"""How checkpoints are written: file modes as a plain write gives them, temporary files made
exclusively and never through a link, and what a killed save left removed by the next one."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")

import treekit  # noqa: E402
from treekit.files import _atomic  # noqa: E402


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("name", ["w.safetensors", "w.npz"])
def test_a_new_file_gets_the_umask_s_mode_and_a_replaced_one_keeps_its_own(tmp_path: Path, name: str) -> None:
    old = os.umask(0o027)
    try:
        treekit.save(tmp_path / name, {"w": np.ones(3)})
        assert mode(tmp_path / name) == 0o640
        os.chmod(tmp_path / name, 0o604)
        treekit.save(tmp_path / name, {"w": np.zeros(3)})
        assert mode(tmp_path / name) == 0o604
    finally:
        os.umask(old)
    assert treekit.load(tmp_path / name)["w"].tolist() == [0.0, 0.0, 0.0]


def test_an_exclusive_file_never_writes_through_a_planted_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    planted = tmp_path / ".ckpt.safetensors.0123.tmp"
    planted.symlink_to(victim)
    fd = _atomic.create_exclusive(str(planted), 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(b"new")
    assert victim.read_bytes() == b"keep me"
    assert not planted.is_symlink() and planted.read_bytes() == b"new"


SAVER = """
import sys, numpy as np, treekit
tree = {'w': np.ones(64 << 20, np.uint8)}
while True:
    treekit.save(sys.argv[1], tree)
"""


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_save_removes_what_killed_saves_of_that_path_left_and_nothing_else(tmp_path: Path) -> None:
    target = tmp_path / "ckpt.safetensors"
    left = 0
    for _ in range(3):  # kill a saver mid-write, three times
        proc = subprocess.Popen([sys.executable, "-c", SAVER, str(target)])
        deadline = time.monotonic() + 60
        while not any(n.endswith(".tmp") for n in os.listdir(tmp_path)) and time.monotonic() < deadline:
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        left += sum(n.endswith(".tmp") for n in os.listdir(tmp_path))
    assert left >= 1  # (the kills left temporary files)
    host = _atomic._HOST
    others = [  # another path's, another host's, a running process's (this one's parent)
        f".other.safetensors.{host}-{dead_pid()}-abc.tmp",
        f".ckpt.safetensors.{'0' * 8 if host != '0' * 8 else '1' * 8}-{dead_pid()}-abc.tmp",
        f".ckpt.safetensors.{host}-{os.getppid()}-abc.tmp",
    ]
    for name in others:
        (tmp_path / name).write_bytes(b"")
    treekit.save(target, {"w": np.arange(3)})
    assert sorted(n for n in os.listdir(tmp_path) if n.endswith(".tmp")) == sorted(others)
    assert treekit.load(target)["w"].tolist() == [0, 1, 2]


# -- large files: written from a thread through reused buffers (_staged) -------------------------
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from treekit.checkpoint import _safetensors, _staged  # noqa: E402


@given(st.lists(st.binary(max_size=40), max_size=12), st.integers(1, 16))
def test_staged_writes_reach_the_file_whole_and_in_order(chunks: list[bytes], piece: int) -> None:
    import io

    f = io.BytesIO()
    with _staged.Staged(f, piece=piece) as out:
        for chunk in chunks:
            assert out.write(np.frombuffer(chunk, np.uint8)) == len(chunk)
    assert f.getvalue() == b"".join(chunks)


class FailingFile:
    """A file whose second write raises, as a full disk would."""

    def __init__(self, f: object) -> None:
        self.f, self.writes = f, 0

    def write(self, data: object) -> int:
        self.writes += 1
        if self.writes == 2:
            raise OSError("disk full")
        return self.f.write(data)  # type: ignore[attr-defined,no-any-return]


def test_a_staged_write_error_reaches_the_caller_and_nothing_waits_forever() -> None:
    import io

    failing = FailingFile(io.BytesIO())
    with pytest.raises(OSError, match="disk full"):
        with _staged.Staged(failing, piece=4) as out:  # type: ignore[arg-type]
            for _ in range(100):  # (more pieces than buffers: the writer keeps freeing them)
                out.write(b"abcd")


def test_a_staged_write_refuses_a_strided_array_before_copying_any_of_it() -> None:
    import io

    f = io.BytesIO()
    with _staged.Staged(f, piece=4) as out:
        with pytest.raises(TypeError):
            out.write(np.arange(10, dtype=np.uint8)[::2])
        out.write(b"ok")
    assert f.getvalue() == b"ok"


def large_tree() -> dict[str, object]:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    jnp = pytest.importorskip("jax.numpy")
    return {
        "w": np.arange(24.0, dtype=np.float32).reshape(4, 6).T,  # (not C-contiguous)
        "b": jnp.arange(7, dtype=jnp.float32),
        "h": np.ones(5, ml_dtypes.bfloat16),
        "s": np.float64(2.5),
        "flags": np.array([True, False]),
        "step": 3,
    }


def test_a_file_written_through_the_buffers_is_the_same_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = large_tree()
    treekit.save(tmp_path / "direct.safetensors", tree)
    monkeypatch.setattr(_safetensors, "_STAGED", 0)  # (every file through them, not only large ones)
    monkeypatch.setattr(_staged, "PIECE", 16)  # (pieces smaller than the arrays)
    treekit.save(tmp_path / "staged.safetensors", tree)
    assert (tmp_path / "staged.safetensors").read_bytes() == (tmp_path / "direct.safetensors").read_bytes()


def test_a_staged_save_failing_midway_leaves_the_old_file_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = tmp_path / "ckpt.safetensors"
    treekit.save(name, {"step": 1})
    before = name.read_bytes()

    class Failing(_staged.Staged):
        def __init__(self, f: object) -> None:
            super().__init__(FailingFile(f), piece=16)  # type: ignore[arg-type]

    monkeypatch.setattr(_safetensors, "_STAGED", 0)
    monkeypatch.setattr(_safetensors, "Staged", Failing)
    with pytest.raises(OSError, match="disk full"):
        treekit.save(name, {"w": np.ones(1000), "step": 2})
    assert name.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt.safetensors"]

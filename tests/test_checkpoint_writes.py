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
from treekit.checkpoint import _atomic  # noqa: E402


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

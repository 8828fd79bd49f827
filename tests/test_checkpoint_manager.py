"""treekit.CheckpointManager: retention (newest, every n-th, best by a metric), latest and best,
async saves that snapshot the arrays and surface their errors, steps that appear only whole,
and processes killed with SIGKILL mid-save leaving every listed step restorable."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")

from treekit import CheckpointManager  # noqa: E402


@pytest.mark.parametrize("async_save", [False, True])
def test_keep_the_newest_and_every_nth(tmp_path: Path, async_save: bool) -> None:
    with CheckpointManager(tmp_path, keep=2, keep_every=4, async_save=async_save) as manager:
        for step in range(10):
            assert manager.save(step, {"w": np.full(2, step)})
        manager.wait()
        assert manager.steps() == [0, 4, 8, 9] and manager.latest_step() == 9
        assert manager.restore(8)["w"].tolist() == [8, 8]


def test_keep_the_best_by_a_metric_and_the_newest(tmp_path: Path) -> None:
    losses = [5.0, 1.0, 4.0, 0.5, 3.0, 2.0]
    with CheckpointManager(tmp_path, keep=2, best="loss", mode="min") as manager:
        for step, loss in enumerate(losses):
            manager.save(step, {"w": np.zeros(1)}, metrics={"loss": loss})
        manager.wait()
        assert manager.best_step() == 3
        assert manager.steps() == [1, 3, 4, 5]  # the 2 best (3, 1) and the 2 newest (4, 5)
        assert manager.metadata(3)["metrics"] == {"loss": 0.5}
    maximizing = CheckpointManager(tmp_path, best="loss", mode="max")
    assert maximizing.best_step() == 4


def test_save_every_skips_steps_unless_forced(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, save_every=10, keep=None)
    assert manager.save(10, {"w": np.ones(1)}) and not manager.save(11, {"w": np.ones(1)})
    assert manager.save(11, {"w": np.ones(1)}, force=True)
    manager.close()
    assert manager.steps() == [10, 11]
    with pytest.raises(ValueError, match="step: expected a step not saved yet, got 10"):
        manager.save(10, {"w": np.ones(1)}, force=True)


def test_arrays_changed_right_after_an_async_save_are_saved_as_they_were(tmp_path: Path) -> None:
    jax = pytest.importorskip("jax")
    host = np.arange(4.0)
    device = jax.numpy.arange(4.0)
    key = jax.random.key(3)
    with CheckpointManager(tmp_path) as manager:
        manager.save(1, {"host": host, "device": device, "key": key})
        host[:] = -1  # the caller's arrays are the caller's again
        device.delete()  # (as a donated buffer would be)
        got = manager.restore(1)
    assert got["host"].tolist() == [0.0, 1.0, 2.0, 3.0] and np.asarray(got["device"]).tolist() == [0, 1, 2, 3]
    assert (jax.random.key_data(got["key"]) == jax.random.key_data(jax.random.key(3))).all()


@pytest.mark.parametrize("async_save", [False, True])
def test_every_kind_of_leaf_comes_back_as_it_was_saved(tmp_path: Path, async_save: bool) -> None:
    # (the async snapshot once made numpy scalars 0-d arrays)
    tree = {"s": np.float32(2.5), "i": np.int64(3), "a": np.arange(3.0), "n": 4, "t": "x", "none": None}
    with CheckpointManager(tmp_path, async_save=async_save) as manager:
        manager.save(0, tree)
        got = manager.restore()
    assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, v in tree.items()}
    assert got["s"] == tree["s"] and got["i"] == tree["i"] and got["a"].tolist() == [0.0, 1.0, 2.0]


def test_an_async_error_is_raised_at_the_next_call_and_leaves_no_step(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path)
    manager.save(1, {"w": np.ones(2)})
    assert manager.save(2, {"bad": np.array([object()], dtype=object)})  # returns: the write fails later
    with pytest.raises(TypeError, match=r"tree\['bad'\]: expected a leaf that saves without pickle"):
        manager.wait()
    manager.wait()  # (raised once)
    assert manager.steps() == [1] and os.listdir(tmp_path) == ["step_00000001"]


def test_restore_names_a_missing_step(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path)
    with pytest.raises(FileNotFoundError, match="expected a saved step, found none"):
        manager.restore()
    manager.save(3, {"w": np.ones(1)})
    with pytest.raises(FileNotFoundError, match=r"step: expected one of the saved steps \[3\], got 4"):
        manager.restore(4)


def test_a_manager_deletes_only_what_a_manager_wrote(tmp_path: Path) -> None:
    foreign = tmp_path / "step_00000000"
    foreign.mkdir()
    (foreign / "step.json").write_text('{"step": 0}')
    (tmp_path / "notes.txt").write_text("mine")
    with CheckpointManager(tmp_path, keep=1) as manager:
        for step in (1, 2, 3):
            manager.save(step, {"w": np.ones(1)})
    assert sorted(os.listdir(tmp_path)) == ["notes.txt", "step_00000000", "step_00000003"]


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="keep: expected an int >= 1 or None, got 0"):
        CheckpointManager(tmp_path, keep=0)
    with pytest.raises(ValueError, match="mode: expected 'min' or 'max'"):
        CheckpointManager(tmp_path, mode="lowest")
    with pytest.raises(ValueError, match="step: expected an int >= 0"):
        CheckpointManager(tmp_path).save(-1, {})
    with pytest.raises(TypeError, match="metrics: expected a dict of JSON values"):
        CheckpointManager(tmp_path).save(1, {}, metrics={"loss": np.float32(1)})


SAVER = """
import sys, numpy as np
from treekit import CheckpointManager
manager = CheckpointManager(sys.argv[1], keep=3, async_save=sys.argv[2] == '1')
start = (manager.latest_step() or 0) + 1
for step in range(start, start + 1000):
    manager.save(step, {'w': np.full(1_000_000, step, np.float32), 'step': step})
    print(step, flush=True)
"""


@pytest.mark.parametrize("async_save", ["0", "1"])
def test_a_save_killed_at_random_moments_leaves_every_listed_step_whole(tmp_path: Path, async_save: str) -> None:
    rng = random.Random(0)
    for _ in range(10):  # 20 kills in all, over both modes
        proc = subprocess.Popen([sys.executable, "-c", SAVER, str(tmp_path), async_save], stdout=subprocess.PIPE)
        time.sleep(rng.uniform(0.5, 2.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        manager = CheckpointManager(tmp_path, keep=3)  # opening removes what the killed save left
        assert not [name for name in os.listdir(tmp_path) if name.startswith(".")]
        for step in manager.steps():
            tree = manager.restore(step)
            assert tree["step"] == step and (tree["w"] == step).all()

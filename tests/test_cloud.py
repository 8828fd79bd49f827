"""Data and checkpoints in object stores: save, load, load_leaf, metadata, show, data.parquet and
CheckpointManager through URLs, on fsspec's memory:// and an S3-compatible server the tests start
(tests/object_store.py): round trips, hostile files, a write that fails midway and a saving
process killed mid-step (nothing listed that cannot be restored; no committed step lost)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

import treekit
from treekit.checkpoint import CheckpointManager

fsspec = pytest.importorskip("fsspec")
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(params=["memory", "s3"])
def store(request: pytest.FixtureRequest) -> str:
    """A fresh folder's URL: on fsspec's memory://, or in a new bucket of the tests' S3 server."""
    if request.param == "memory":
        return f"memory://treekit-{uuid.uuid4().hex[:12]}"
    return str(request.getfixturevalue("bucket"))


def _tree(step: int = 0) -> dict:
    return {
        "params": {"w": np.arange(12, dtype=np.float32).reshape(3, 4) + step, "b": np.zeros(4, np.float16)},
        "step": step,
        "name": "run",
        "ids": np.arange(5, dtype=np.int64),
    }


def _same(a: object, b: object) -> None:
    assert treekit.tree_structure(a) == treekit.tree_structure(b)
    for x, y in zip(treekit.tree_leaves(a), treekit.tree_leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
        assert np.asarray(x).dtype == np.asarray(y).dtype


@pytest.mark.parametrize("name", ["ckpt.safetensors", "ckpt.npz"])
def test_save_load_metadata_and_one_leaf_through_a_url(store: str, name: str) -> None:
    url = f"{store}/run/{name}"
    treekit.save(url, _tree(3))
    _same(treekit.load(url), _tree(3))
    _same(treekit.load(url, like=_tree()), _tree(3))
    if name.endswith(".safetensors"):
        assert treekit.metadata(url)["params"]["w"] == treekit.ShapeDtype((3, 4), "float32")
        np.testing.assert_array_equal(treekit.load_leaf(url, "params/w"), _tree(3)["params"]["w"])
    fs, path = fsspec.core.url_to_fs(url)
    assert fs.ls(path.rsplit("/", 1)[0], detail=False) == [path]  # (one object; nothing beside it)


def test_a_big_file_is_read_in_ranges_bit_identically(store: str, monkeypatch) -> None:
    from treekit.files import _remote

    monkeypatch.setattr(_remote, "PIECE", 1 << 16)  # (many ranges in flight)
    tree = {f"layer{i}": np.random.default_rng(i).standard_normal((64, 100)).astype(np.float32) for i in range(8)}
    treekit.save(f"{store}/big.safetensors", tree)
    _same(treekit.load(f"{store}/big.safetensors"), tree)
    np.testing.assert_array_equal(treekit.load_leaf(f"{store}/big.safetensors", "['layer5']"), tree["layer5"])


def test_a_save_that_fails_midway_leaves_the_old_file(store: str) -> None:
    url = f"{store}/ckpt.safetensors"
    treekit.save(url, _tree(1))

    class Broken:
        shape, dtype = (4,), np.dtype(np.float32)

        def __array__(self, *args, **kwargs):
            raise RuntimeError("the device went away")

    with pytest.raises(RuntimeError, match="the device went away"):
        treekit.save(url, {**_tree(2), "z": Broken()})
    _same(treekit.load(url), _tree(1))


def test_hostile_remote_files_are_refused_before_anything_is_allocated(store: str) -> None:
    fs, path = fsspec.core.url_to_fs(store)
    fs.pipe_file(f"{path}/huge.safetensors", (1 << 40).to_bytes(8, "little") + b"{}")
    with pytest.raises(ValueError, match=r"huge.safetensors: header length: expected at most 2 .*, got 1099511627776"):
        treekit.load(f"{store}/huge.safetensors")
    header = b'{"w":{"dtype":"F32","shape":[1000000000],"data_offsets":[0,4000000000]}}'
    fs.pipe_file(f"{path}/liar.safetensors", len(header).to_bytes(8, "little") + header)
    with pytest.raises(ValueError, match=r"liar.safetensors: .*expected"):
        treekit.load(f"{store}/liar.safetensors")
    fs.pipe_file(f"{path}/p.npz", b"\x80\x04K\x01.")
    with pytest.raises(treekit.PickleRefused):
        treekit.load(f"{store}/p.npz")


def test_show_reads_a_remote_header_alone(store: str, capsys) -> None:
    from treekit.cli import main

    treekit.save(f"{store}/ckpt.safetensors", _tree())
    assert main(["show", f"{store}/ckpt.safetensors"]) == 0
    assert "3 arrays" in capsys.readouterr().out
    assert main(["show", f"{store}/missing.safetensors"]) == 1
    assert "missing.safetensors: expected a file, found none" in capsys.readouterr().err


def test_parquet_reads_a_remote_folder_as_a_local_one(store: str, tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from treekit import data

    fs, path = fsspec.core.url_to_fs(store)
    local = tmp_path / "data"
    for year, rows in ((2023, range(0, 30)), (2024, range(30, 50))):
        table = pa.table({"x": list(rows), "v": [[float(r)] * 2 for r in rows]})
        for where in (local / f"year={year}", None):
            if where is not None:
                where.mkdir(parents=True)
                pq.write_table(table, where / "part-0.parquet", row_group_size=7)
            else:
                with fs.open(f"{path}/data/year={year}/part-0.parquet", "wb") as f:
                    pq.write_table(table, f, row_group_size=7)
    (local / "_SUCCESS").write_bytes(b"")
    fs.pipe_file(f"{path}/data/_SUCCESS", b"")
    fs.pipe_file(f"{path}/data/.hidden/x.parquet", b"not parquet")

    def rows(source: data.Source) -> list:
        return [(c["x"].tolist(), c["v"].tolist(), c["year"].tolist()) for c in source]

    assert rows(data.parquet(f"{store}/data", seed=3, readers=4)) == rows(data.parquet(local, seed=3))
    glob = data.parquet(f"{store}/data/year=2024/*.parquet", columns=["x"])
    assert next(iter(glob))["x"].tolist() == list(range(30, 37))
    with pytest.raises(FileNotFoundError, match="expected files, folders or globs that exist"):
        data.parquet(f"{store}/nothing")


def test_write_parquet_commits_a_remote_dataset_and_an_overwrite_never_mixes(store: str) -> None:
    pytest.importorskip("pyarrow")
    from treekit import ShapeDtype, data

    spec = {"x": ShapeDtype(("batch", 2), "float32"), "t": ShapeDtype(("batch", None), "int64")}
    url = f"{store}/ds"
    rows = [{"x": np.full(2, i, np.float32), "t": np.arange(i % 4)} for i in range(30)]
    assert data.write_parquet(url, rows, spec=spec, row_group_size=7) == 30
    chunks = list(data.parquet(url))
    assert [int(v) for c in chunks for v in c["x"][:, 0]] == list(range(30)) and chunks[0]["t"].shape[1] == 3
    with pytest.raises(FileExistsError, match="overwrite=True"):
        data.write_parquet(url, rows, spec=spec)
    data.write_parquet(url, rows[:3], spec=spec, overwrite=True)
    assert [int(v) for c in data.parquet(url) for v in c["x"][:, 0]] == [0, 1, 2]
    fs, path = fsspec.core.url_to_fs(url)
    fs.invalidate_cache()
    assert len([p for p in fs.ls(path, detail=False) if p.endswith(".parquet")]) == 1


def test_the_manager_commits_remote_steps_by_step_json(store: str) -> None:
    url = f"{store}/run"
    with CheckpointManager(url, keep=2, best="loss") as manager:
        for step in range(4):
            manager.save(step, _tree(step), metrics={"loss": 10.0 - step})
        manager.wait()
        assert manager.steps() == [2, 3] and manager.best_step() == 3 and manager.directory == url
        _same(manager.restore(), _tree(3))
        assert manager.metadata(2)["tree"]["params"]["b"] == treekit.ShapeDtype((4,), "float16")
        with pytest.raises(ValueError, match="expected a step not saved yet, got 3"):
            manager.save(3, _tree())
    fs, path = fsspec.core.url_to_fs(url)
    fs.invalidate_cache()
    assert sorted(p.rsplit("/", 2)[-2] for p in fs.find(path)) == ["step_00000002"] * 2 + ["step_00000003"] * 2


def test_a_remote_step_without_step_json_is_no_step_and_is_cleaned_below_the_newest(store: str) -> None:
    url = f"{store}/run"
    fs, path = fsspec.core.url_to_fs(url)
    with CheckpointManager(url, keep=None, async_save=False) as manager:
        manager.save(5, _tree(5))
    fs.pipe_file(f"{path}/step_00000003/tree.safetensors", b"half")  # a save killed before its step.json
    fs.pipe_file(f"{path}/step_00000009/tree.safetensors", b"maybe live")  # perhaps another writer's, now
    manager = CheckpointManager(url, keep=None)
    fs.invalidate_cache()
    assert manager.steps() == [5]
    assert not fs.exists(f"{path}/step_00000003")  # below the newest committed step: dead, removed
    assert fs.exists(f"{path}/step_00000009/tree.safetensors")  # above it: left alone
    manager.save(9, _tree(9))  # a save of that step replaces what was there
    manager.wait()
    _same(manager.restore(9), _tree(9))


def test_a_remote_step_that_fails_midway_is_not_listed(store: str) -> None:
    class Broken:
        shape, dtype = (4,), np.dtype(np.float32)

        def __array__(self, *args, **kwargs):
            raise RuntimeError("the device went away")

    with CheckpointManager(f"{store}/run", keep=3) as manager:
        manager.save(1, _tree(1))
        manager.save(2, {**_tree(2), "z": Broken()})
        with pytest.raises(RuntimeError, match="the device went away"):
            manager.wait()
        assert manager.steps() == [1]
        manager.save(2, _tree(2))
        manager.wait()
        assert manager.steps() == [1, 2]


_KILLED = textwrap.dedent(
    """
    import sys
    import numpy as np
    from treekit.checkpoint import CheckpointManager

    manager = CheckpointManager(sys.argv[1], keep=None, async_save=True)
    for step in range(1000):
        big = np.full((1 << 20,), step, np.float32)  # 4 MB a step
        manager.save(step, {"big": big, "step": step})
        manager.wait()
        print(step, flush=True)
    """
)


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.2])
def test_a_saving_process_killed_on_s3_loses_no_committed_step(bucket: str, delay: float) -> None:
    url = f"{bucket}/run"
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED, url], stdout=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert child.stdout is not None
    committed = [int(child.stdout.readline()) for _ in range(3)]
    time.sleep(delay)
    child.send_signal(signal.SIGKILL)
    child.wait()
    manager = CheckpointManager(url, keep=None)
    steps = manager.steps()
    assert steps[: len(committed)] == committed  # (no committed step lost)
    for step in steps:  # (every step listed restores whole)
        tree = manager.restore(step)
        assert tree["step"] == step and (tree["big"] == step).all() and tree["big"].shape == (1 << 20,)
    manager.save(steps[-1] + 1, {"big": np.zeros(3), "step": -1})
    manager.wait()
    assert manager.steps()[-1] == steps[-1] + 1

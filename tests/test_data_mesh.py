"""treekit.data.to_mesh: batches as jax arrays, made ready ahead in a thread whose errors reach
the caller and which close() stops; a state that counts what the caller got; shardings over 8
CPU devices (in a subprocess: XLA takes the device count when jax is first imported); and two
processes on localhost building global batches from their local rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy")
jax = pytest.importorskip("jax")

from children import EIGHT_CPUS, loopback_port  # noqa: E402

from treekit import data  # noqa: E402

HERE = Path(__file__).resolve().parent
EIGHT = {**os.environ, **EIGHT_CPUS}


def rows(n: int = 40) -> list[dict[str, Any]]:
    return [{"i": np.int64(i), "x": np.full(3, i, np.float32)} for i in range(n)]


def prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "treekit-prefetch"]


@pytest.mark.parametrize("prefetch", [0, 1, 3])
def test_batches_arrive_as_jax_arrays_in_order(prefetch: int) -> None:
    with data.to_mesh(data.batches(data.from_iterable(rows()), 8), prefetch=prefetch) as it:
        got = [b["i"] for b in it]
    assert all(isinstance(b, jax.Array) for b in got)
    assert [int(v) for b in got for v in np.asarray(b)] == list(range(40))
    assert prefetch_threads() == []


@pytest.mark.parametrize("prefetch", [0, 2])
def test_the_state_counts_batches_handed_out_and_resumes_exactly(prefetch: int) -> None:
    whole = [np.asarray(b["i"]).tolist() for b in data.to_mesh(data.batches(data.from_iterable(rows()), 6), prefetch=0)]
    it = data.to_mesh(data.batches(data.from_iterable(rows()), 6), prefetch=prefetch)
    first = [np.asarray(next(it)["i"]).tolist() for _ in range(2)]
    state = json.loads(json.dumps(it.get_state()))
    assert state["batches"] == 2  # not counting what the thread made ready ahead
    it.close()
    again = data.to_mesh(data.batches(data.from_iterable(rows()), 6), prefetch=prefetch)
    again.set_state(state)
    with again:
        assert first + [np.asarray(b["i"]).tolist() for b in again] == whole
    assert prefetch_threads() == []


def test_close_mid_way_leaves_no_thread_and_iterating_goes_on_where_the_caller_was() -> None:
    it = data.to_mesh(data.batches(data.from_iterable(rows()), 4), prefetch=2)
    assert np.asarray(next(it)["i"]).tolist() == [0, 1, 2, 3]
    it.close()
    assert prefetch_threads() == []
    assert np.asarray(next(it)["i"]).tolist() == [4, 5, 6, 7]  # not what the thread had read ahead
    it.close()


def test_an_error_in_the_thread_is_raised_at_the_callers_next() -> None:
    def examples() -> Any:
        yield from rows(8)
        raise RuntimeError("the disk went away")

    it = data.to_mesh(data.batches(data.from_iterable(examples()), 4), prefetch=2)
    with pytest.raises(RuntimeError, match="the disk went away"):
        list(it)
    it.close()
    assert prefetch_threads() == []


@pytest.mark.parametrize("prefetch", [0, 2, 5])
def test_an_error_is_raised_at_the_next_that_would_return_its_batch(prefetch: int) -> None:
    # rows 0-29 good, row 30 raises: batches of 4 before it (0-27) come whole, 28-29 with the error
    def examples() -> Any:
        yield from rows(30)
        raise RuntimeError("the disk went away")

    it = data.to_mesh(data.batches(data.from_iterable(examples()), 4), prefetch=prefetch)
    got = [np.asarray(next(it)["i"]).tolist() for _ in range(7)]
    assert got == [list(range(k, k + 4)) for k in range(0, 28, 4)]
    with pytest.raises(RuntimeError, match="the disk went away"):
        next(it)
    assert it.get_state()["batches"] == 7
    it.close()
    assert prefetch_threads() == []


def test_bad_arguments() -> None:
    with pytest.raises(TypeError, match=r"batches: expected treekit\.data\.batches\(\.\.\.\), got list"):
        data.to_mesh([1])
    with pytest.raises(ValueError, match="prefetch: expected an int >= 0"):
        data.to_mesh(data.batches(data.from_iterable(rows()), 4), prefetch=-1)


EIGHT_DEVICES = """
import numpy as np, jax
from jax.sharding import Mesh, PartitionSpec as P
from treekit import data
assert len(jax.devices()) == 8
mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ('data', 'model'))
examples = [{'i': np.int64(i), 'x': np.full(4, i, np.float32)} for i in range(32)]
with data.to_mesh(data.batches(data.from_iterable(examples), 8), mesh) as it:
    for batch in it:
        assert batch['x'].sharding.spec == P('data'), batch['x'].sharding
        assert {s.data.shape for s in batch['x'].addressable_shards} == {(2, 4)}
        shardings = it._shardings
    assert it._shardings is shardings  # computed once, for the first batch
rules = [('x', P('data', 'model'))]
with data.to_mesh(data.batches(data.from_iterable(examples), 8), mesh, rules=rules) as it:
    batch = next(it)
    assert batch['x'].sharding.spec == P('data', 'model') and batch['i'].sharding.spec == P('data')
    assert {s.data.shape for s in batch['x'].addressable_shards} == {(2, 2)}
print('ok')
"""


def test_batches_split_over_a_mesh_of_eight_devices_by_default_and_by_rules() -> None:
    out = subprocess.run([sys.executable, "-c", EIGHT_DEVICES], env=EIGHT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


def _two_processes(folder: Path, *args: str) -> list[list[str]]:
    """tests/data_processes.py in two processes over ``folder``: each one's output lines."""
    port = loopback_port()
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
    procs = [
        subprocess.Popen([sys.executable, str(HERE / "data_processes.py"), str(k), "2", str(port), str(folder), *args],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for k in range(2)
    ]
    outs = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=240)
            assert proc.returncode == 0 and out.strip().endswith("ok"), err[-3000:]
            outs.append(out.splitlines())
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    return outs


def test_two_processes_build_global_batches_from_their_local_rows(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"index": np.arange(16)}), tmp_path / "a.parquet", row_group_size=8)
    outs = [[line.split()[1:] for line in out if line.startswith("rows")] for out in _two_processes(tmp_path)]
    assert len(outs[0]) == len(outs[1]) == 2  # two global batches of 8 rows: 4 from each process
    mine = [sorted(int(v) for batch in out for v in batch) for out in outs]
    assert sorted(mine[0] + mine[1]) == list(range(16)) and not set(mine[0]) & set(mine[1])


@pytest.mark.parametrize("prefetch", ["2", "0"])
def test_shares_of_unequal_batch_counts_raise_in_every_process_at_the_first_batch_one_lacks(
    tmp_path: Path, prefetch: str
) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    # a row group of 8 rows for one process (2 batches), 16 for the other (4): never a hang
    pq.write_table(pa.table({"index": np.arange(24)}), tmp_path / "a.parquet", row_group_size=16)
    outs = _two_processes(tmp_path, prefetch)
    for out in outs:
        assert sum(line.startswith("rows") for line in out) == 2  # the batches both had
        (error,) = [line for line in out if line.startswith("error")]
        assert "batch 2" in error and "processes [" in error, error


def test_to_mesh_warns_once_naming_the_leaves_jax_narrows_without_x64() -> None:
    import warnings

    from treekit import data

    rows = [{"x": np.int64(i), "f": np.float32(i), "y": {"z": np.float64(i)}} for i in range(12)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with data.to_mesh(data.batches(data.from_iterable(rows), 4), prefetch=0) as it:
            placed = list(it)
    narrowed = [str(w.message) for w in caught if "x64" in str(w.message)]
    if jax.config.jax_enable_x64:
        assert narrowed == [] and placed[0]["x"].dtype == np.int64
        return
    assert len(narrowed) == 1 and len(placed) == 3  # once, at the first batch
    assert "batch['x'] int64 -> int32" in narrowed[0] and "batch['y']['z'] float64 -> float32" in narrowed[0]
    assert "['f']" not in narrowed[0]


def test_two_processes_write_one_dataset_committed_once_and_nothing_when_one_fails(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    outs = _two_processes(tmp_path, "write")
    want = list(range(10)) + list(range(100, 107))
    for out in outs:
        assert "wrote 17" in out and "longest 5" in out, out
        (read,) = [line for line in out if line.startswith("read")]
        assert sorted(int(v) for v in read.split()[1:]) == want
    names = os.listdir(tmp_path / "ds")
    assert "_treekit_dataset.json" in names and any(n.startswith("part-00001-") for n in names)
    outs = _two_processes(tmp_path / "bad", "write-bad")
    for k, out in enumerate(outs):
        (error,) = [line for line in out if line.startswith("error")]
        assert "process 1's source broke" in error, error
        assert k == 1 or "process 1 failed, so nothing was committed" in error, error
    assert not [n for n in os.listdir(tmp_path / "bad" / "ds") if not n.startswith(".")], "nothing committed, no parts"

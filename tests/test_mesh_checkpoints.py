"""Checkpoints on a mesh: sharded jax arrays saved shard by shard (never gathered, the file the
same bytes as the gathered tree's) and loaded onto any mesh, in a subprocess with 8 CPU devices
(XLA takes the device count from ``XLA_FLAGS`` when jax is first imported)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax")
from children import EIGHT_CPUS, loopback_port  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from treekit import load, save  # noqa: E402
from treekit.sharding import ShardingError  # noqa: E402

EIGHT = {**os.environ, **EIGHT_CPUS}

SCRIPT = """
import os, sys, tempfile
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import treekit, treekit.checkpoint._safetensors
from treekit.sharding import ShardingError, shardings

rng = np.random.default_rng(0)
tree = {
    'embed': rng.normal(size=(16, 24)).astype(np.float32),
    'kernel': rng.normal(size=(4, 6, 8)).astype(np.float32),
    'bf16': jnp.asarray(rng.normal(size=(8, 16)), jnp.bfloat16),
    'ids': np.arange(32, dtype=np.int32),
    'scale': np.float32(2.5),
    'step': 7,
}
mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ('data', 'model'))
specs = {'embed': P(None, 'model'), 'kernel': P(None, 'data', 'model'), 'bf16': P(('data', 'model')),
         'ids': P('model'), 'scale': P(), 'step': None}
placed = treekit.sharding.shard(tree, mesh, specs)

written_whole = []  # the names of the arrays written whole (a jax array copied to the host whole)
safetensors_module = treekit.checkpoint._safetensors
write_array = safetensors_module._write_array
safetensors_module._write_array = lambda f, name, *rest: (written_whole.append(name), write_array(f, name, *rest))
d = tempfile.mkdtemp()
a, b = os.path.join(d, 'sharded.safetensors'), os.path.join(d, 'host.safetensors')
treekit.save(a, placed)
treekit.checkpoint._safetensors._write_array = write_array
assert sorted(written_whole) == ['scale', 'step'], written_whole  # (replicated); the rest by shard
treekit.save(b, jax.tree_util.tree_map(np.asarray, placed))
assert open(a, 'rb').read() == open(b, 'rb').read()  # the same file as the gathered tree's

def same(got, want_sharding=None):
    for k, v in tree.items():
        np.testing.assert_array_equal(np.asarray(got[k], np.float64), np.asarray(v, np.float64), err_msg=k)
    return got

# onto another mesh: model=8
mesh8 = Mesh(np.array(jax.devices()), ('model',))
got = same(treekit.load(a, shardings={'embed': NamedSharding(mesh8, P(None, 'model')),
                                      'kernel': NamedSharding(mesh8, P(None, None, 'model')),
                                      'bf16': NamedSharding(mesh8, P('model')),
                                      'ids': NamedSharding(mesh8, P('model')), 'scale': None, 'step': None}))
assert got['kernel'].sharding.spec == P(None, None, 'model') and len(got['kernel'].addressable_shards) == 8
assert got['bf16'].dtype == jnp.bfloat16 and isinstance(got['scale'], np.ndarray) and got['step'] == 7
# onto 2x4 with other specs (a template of ShapeDtypeStructs with shardings)
like = jax.tree_util.tree_map(
    lambda x, s: jax.ShapeDtypeStruct(np.shape(x), jnp.asarray(x).dtype, sharding=NamedSharding(mesh, s)),
    {k: v for k, v in tree.items() if k != 'step'},
    {'embed': P('data', 'model'), 'kernel': P('model'), 'bf16': P(None, 'model'), 'ids': P(), 'scale': P()})
got = same(treekit.load(a, like={**like, 'step': 0}))
assert got['embed'].sharding.spec == P('data', 'model') and got['ids'].sharding.is_fully_replicated
# onto one device, saved again from there, and back onto 8
one = jax.sharding.SingleDeviceSharding(jax.devices()[0])
got = same(treekit.load(a, shardings=one))
c = os.path.join(d, 'one.safetensors')
treekit.save(c, got)
assert open(c, 'rb').read() == open(a, 'rb').read()
got = same(treekit.load(c, shardings=shardings(tree, mesh, specs)))
assert got['kernel'].sharding.spec == P(None, 'data', 'model')
# a spec that does not fit the saved shape: every such array named, nothing placed
try:
    wrong = {'kernel': NamedSharding(mesh, P(None, 'model')), 'ids': NamedSharding(mesh, P('data', 'model'))}
    treekit.load(a, shardings={'embed': None, 'bf16': None, 'scale': None, 'step': None, **wrong})
except ShardingError as err:
    assert len(err.problems) == 2, err.problems
    assert err.problems[0].startswith("file['ids']: expected a spec of at most 1 entry"), err.problems
    assert err.problems[1].startswith("file['kernel']: expected dim 1 (size 6) divisible by 4"), err.problems
else:
    raise AssertionError('no ShardingError')
print('ok')
"""


def test_sharded_checkpoints_round_trip_across_meshes_on_eight_devices() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SCRIPT)], env=EIGHT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


def test_shardings_that_do_not_fit_are_named_before_anything_is_placed(tmp_path: pytest.TempPathFactory) -> None:
    name = os.path.join(str(tmp_path), "ckpt.safetensors")
    save(name, {"w": np.zeros((6, 4), np.float32), "b": np.zeros(4, np.float32)})
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("model",))
    sharding = jax.sharding.NamedSharding(mesh, P(None, None, "model"))
    with pytest.raises(ShardingError, match=r"file\['b'\]: expected a spec of at most 1 entry"):
        load(name, shardings={"w": None, "b": sharding})
    placed = load(name, shardings=jax.sharding.NamedSharding(mesh, P("model")))
    assert placed["w"].sharding.spec == P("model") and placed["b"].shape == (4,)


def test_the_scaling_out_pages_checkpoint_example_runs_on_eight_devices(tmp_path: pytest.TempPathFactory) -> None:
    page = (Path(__file__).resolve().parent.parent / "docs" / "scaling-out.md").read_text(encoding="utf-8")
    section = page[page.index("## Checkpoints on a mesh") :]
    start = section.index("```python\n") + len("```python\n")
    code = section[start : section.index("```\n", start)]
    check = """
assert restored['embed'].sharding.spec == P(None, 'model') and len(restored['embed'].addressable_shards) == 8
assert np.array_equal(np.asarray(one['head']), params['head']) and len(one['head'].sharding.device_set) == 1
assert again['head'].sharding.spec == P('model', None)
print('ok')
"""
    proc = subprocess.run(
        [sys.executable, "-c", code + check], env=EIGHT, capture_output=True, text=True, timeout=300, cwd=str(tmp_path)
    )
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


PROCESS = Path(__file__).resolve().parent / "processes.py"


def _start(count: int, mode: str, folder: str) -> list[subprocess.Popen[str]]:
    port = str(loopback_port())
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
    return [
        subprocess.Popen(
            [sys.executable, str(PROCESS), str(k), str(count), port, mode, folder],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(count)
    ]


def _cluster(count: int, mode: str, folder: str, timeout: float = 240) -> list[str]:
    """Run ``count`` processes of tests/processes.py to the end (each killed if still running
    after ``timeout`` seconds); their outputs."""
    procs = _start(count, mode, folder)
    outs = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=timeout)
            assert proc.returncode == 0 and out.strip().endswith("ok"), err[-3000:]
            outs.append(out)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    return outs


@pytest.mark.parametrize(("savers", "loaders"), [(2, 4), (4, 2)])
def test_processes_save_one_checkpoint_together_and_each_reads_its_own_bytes(
    tmp_path: pytest.TempPathFactory, savers: int, loaders: int
) -> None:
    folder = str(tmp_path)
    _cluster(savers, "save", folder)
    ckpt, host = (os.path.join(folder, n) for n in ("ckpt.safetensors", "host.safetensors"))
    with open(ckpt, "rb") as a, open(host, "rb") as b:
        assert a.read() == b.read()  # the same file one process writes from the whole tree
    assert sorted(os.listdir(folder)) == ["ckpt.safetensors", "host.safetensors"]  # no temporary left
    for out in _cluster(loaders, "load", folder):
        line = next(line for line in out.splitlines() if line.startswith("read "))
        read, total = (int(n) for n in line.split()[1::2])
        # the split arrays: 1/loaders of their bytes each; 'norm' (replicated, 96 bytes): at
        # least once, at most once per local device (jax may copy one slice to several)
        split = total - 24 * 4
        assert split // loaders + 24 * 4 <= read <= split // loaders + (8 // loaders) * 24 * 4, line


def test_processes_save_steps_together_with_the_manager_and_restore_onto_another_mesh(
    tmp_path: pytest.TempPathFactory,
) -> None:
    from treekit import CheckpointManager

    folder = str(tmp_path)
    _cluster(2, "manager", folder)  # (each process checks the shards it restored onto model=8)
    run = os.path.join(folder, "run")
    assert sorted(os.listdir(run)) == ["step_00000001", "step_00000002"]  # keep=2; no temporary left
    with open(os.path.join(run, "step_00000002", "tree.safetensors"), "rb") as a:
        with open(os.path.join(folder, "host.safetensors"), "rb") as b:
            assert a.read() == b.read()  # the file one process writes from the whole tree
    assert CheckpointManager(run).metadata(2)["metrics"] == {"loss": 1.0}


@pytest.mark.parametrize("mode", ["own", "own-async"])
def test_each_process_restores_its_own_values_beside_the_arrays(tmp_path: pytest.TempPathFactory, mode: str) -> None:
    folder = str(tmp_path)
    _cluster(2, mode, folder)  # (each process checks what it restored: tests/processes.py)
    step = os.path.join(folder, "own", "step_00000003")
    assert sorted(os.listdir(step)) == ["process_00001.safetensors", "step.json", "tree.safetensors"]
    whole = load(os.path.join(step, "tree.safetensors"))  # the tree as process 0 held it
    assert whole["data"] == {"position": 21, "name": "process 0", "window": [21, 22]} and whole["step"] == 3
    assert load(os.path.join(step, "process_00001.safetensors"))["['data']['position']"] == 1000 + 7 * 3 * 2


def test_trees_whose_arrays_differ_between_processes_are_refused_before_anything_is_written(
    tmp_path: pytest.TempPathFactory,
) -> None:
    folder = str(tmp_path)
    _cluster(2, "differ", folder)  # (each process checks its ValueError)
    assert os.listdir(folder) == ["run"] and os.listdir(os.path.join(folder, "run")) == []


def test_a_process_that_does_not_come_to_an_async_save_fails_it_in_bounded_time_naming_it(
    tmp_path: pytest.TempPathFactory,
) -> None:
    folder = str(tmp_path)
    _cluster(2, "late", folder)  # (process 0 checks its TimeoutError and that step 1 is not listed)
    assert sorted(os.listdir(os.path.join(folder, "run"))) == ["step_00000000"]  # (no temporary left)


def test_a_process_killed_mid_save_leaves_the_old_checkpoint(tmp_path: pytest.TempPathFactory) -> None:
    folder = str(tmp_path)
    old = {"w": np.arange(6.0)}
    save(os.path.join(folder, "ckpt.safetensors"), old)
    procs = _start(2, "slow", folder)
    try:
        for _ in range(2400):  # until the temporary file is there (process 0 made it), 120 s at most
            if any(n.endswith(".tmp") for n in os.listdir(folder)) or any(p.poll() is not None for p in procs):
                break
            import time

            time.sleep(0.05)
        assert all(p.poll() is None for p in procs), "a process ended before the save began"
        procs[1].kill()
    finally:
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    assert procs[0].returncode != 0  # it could not finish alone
    got = load(os.path.join(folder, "ckpt.safetensors"))
    np.testing.assert_array_equal(got["w"], old["w"])
    assert [n for n in os.listdir(folder) if not n.startswith(".")] == ["ckpt.safetensors"]


LAW = """
import os, tempfile
import jax, jax.numpy as jnp, numpy as np
from hypothesis import given, settings, strategies as st
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import treekit

mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ('data', 'model'))
ENTRIES = [None, 'data', 'model', ('data', 'model'), ('model', 'data')]
folder = tempfile.mkdtemp()


@st.composite
def arrays_and_specs(draw):
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.sampled_from([1, 2, 4, 8, 16])) * draw(st.sampled_from([1, 3])) for _ in range(rank))
    def spec():
        entries, used = [], set()
        for n in shape:
            e = draw(st.sampled_from(ENTRIES))
            axes = () if e is None else (e,) if isinstance(e, str) else e
            size = int(np.prod([dict(data=2, model=4)[a] for a in axes])) if axes else 1
            entries.append(None if used & set(axes) or n % size else e)
            used |= set(axes) if entries[-1] is not None else set()
        return P(*entries)
    dtype = draw(st.sampled_from([np.float32, jnp.bfloat16, np.int8]))
    return shape, dtype, spec(), spec()


@settings(max_examples=30, deadline=None, derandomize=True)
@given(arrays_and_specs())
def law(case):
    shape, dtype, saved_spec, loaded_spec = case
    host = np.arange(np.prod(shape), dtype=np.float32).reshape(shape).astype(dtype)
    placed = jax.device_put(host, NamedSharding(mesh, saved_spec))
    a, b = os.path.join(folder, 'a.safetensors'), os.path.join(folder, 'b.safetensors')
    treekit.save(a, {'x': placed})
    treekit.save(b, {'x': host})
    assert open(a, 'rb').read() == open(b, 'rb').read(), (shape, saved_spec)
    got = treekit.load(a, shardings=NamedSharding(mesh, loaded_spec))['x']
    assert got.sharding.spec == loaded_spec
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(host, np.float32))


law()
print('ok')
"""


def test_any_spec_saves_the_gathered_bytes_and_loads_onto_any_other() -> None:
    pytest.importorskip("hypothesis")
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(LAW)], env=EIGHT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


def test_processes_save_one_checkpoint_together_to_an_object_store(bucket: str) -> None:
    # each process uploads its pieces; process 0 puts the file together, uploads it, removes them
    fsspec = pytest.importorskip("fsspec")
    folder = f"{bucket}/ckpt"
    _cluster(2, "save", folder)
    fs, root = fsspec.core.url_to_fs(folder)
    fs.invalidate_cache()
    assert fs.cat_file(f"{root}/ckpt.safetensors") == fs.cat_file(f"{root}/host.safetensors")
    assert sorted(p.rsplit("/", 1)[-1] for p in fs.find(root)) == ["ckpt.safetensors", "host.safetensors"]
    _cluster(4, "load", folder)  # (each process checks the shards it loaded onto model=8)


def test_processes_save_steps_together_with_the_manager_in_an_object_store(bucket: str) -> None:
    from treekit import CheckpointManager

    fsspec = pytest.importorskip("fsspec")
    folder = f"{bucket}/steps"
    _cluster(2, "manager", folder)  # (each process checks the shards it restored onto model=8)
    fs, root = fsspec.core.url_to_fs(folder)
    fs.invalidate_cache()
    files = sorted(p[len(root) + 1 :] for p in fs.find(f"{root}/run"))
    names = ("process_00001.safetensors", "step.json", "tree.safetensors")  # (process 1's own 'scale')
    assert files == [f"run/step_0000000{k}/{n}" for k in (1, 2) for n in names]
    assert fs.cat_file(f"{root}/run/step_00000002/tree.safetensors") == fs.cat_file(f"{root}/host.safetensors")
    assert CheckpointManager(f"{folder}/run").metadata(2)["metrics"] == {"loss": 1.0}

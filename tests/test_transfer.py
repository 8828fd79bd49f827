"""Many small arrays between host and devices in packs (treekit.sharding.device_get/device_put
and the checkpoints that use them): bit for bit what jax's one-by-one transfers give, for every
dtype, shape and placement; the packs are real (the host arrays of a pack share one buffer);
a manager's snapshot survives the donation of the arrays it was taken from."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from children import EIGHT_CPUS  # noqa: E402

import treekit  # noqa: E402
from treekit.sharding import _transfer, device_get, device_put  # noqa: E402

DTYPES = ["float32", "bfloat16", "float16", "int8", "uint8", "int32", "bool", "float8_e4m3fn", "complex64"]
DTYPES += [d for d in ("int4", "uint4", "int2", "uint2", "float4_e2m1fn") if hasattr(jnp, d)]  # (less than a byte)


def _values(rng: np.random.Generator, dtype: str, shape: tuple[int, ...]) -> Any:
    """Random values of ``dtype``, every bit pattern for the small floats (NaNs included)."""
    np_dtype = jnp.dtype(dtype)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype in ("int4", "uint4", "int2", "uint2"):  # (values in their range)
        info = jnp.iinfo(np_dtype)
        return rng.integers(int(info.min), int(info.max) + 1, shape).astype(np_dtype)
    if dtype == "float4_e2m1fn":
        return rng.choice([0.0, -0.0, 0.5, 1.5, 3.0, -6.0], shape).astype(np_dtype)
    if dtype == "complex64":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np_dtype)
    raw = rng.integers(0, 256, (*shape, np_dtype.itemsize), dtype=np.uint8)
    if jnp.issubdtype(np_dtype, jnp.floating):  # a third NaNs and infinities, with their payloads
        special = rng.random(shape) < 1 / 3
        raw[special, -1] |= 0x7F
        if np_dtype.itemsize > 1:
            raw[special, -2] |= 0xF0
    return raw.view(np_dtype).reshape(shape)


def _bits(x: Any) -> tuple[Any, ...]:
    a = np.asarray(x)
    return (type(a), a.dtype, a.shape, a.tobytes())


def _together(x: Any, y: Any) -> bool:
    """``x`` and ``y`` views into one host buffer (a pack)."""

    def root(a: Any) -> Any:
        while isinstance(a.base, np.ndarray):
            a = a.base
        return a

    return root(x) is root(y)


@pytest.fixture
def small_packs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Packs of at most 3 arrays and a window of 64 bytes, so a few arrays make several packs,
    an overlapping last pack and a window that fills."""
    monkeypatch.setattr(_transfer, "GROUP", 3)
    monkeypatch.setattr(_transfer, "CHUNK_BYTES", 64)
    monkeypatch.setattr(_transfer, "NEW_PER_CALL", 10**6)


kinds = st.lists(
    st.tuples(st.sampled_from(DTYPES), st.sampled_from([(), (0,), (1,), (5,), (2, 3), (3, 0, 2)]), st.integers(0, 9)),
    min_size=1,
    max_size=4,
)


@pytest.mark.usefixtures("small_packs")
@given(kinds, st.integers(0, 2**32 - 1))
def test_a_packed_get_and_put_give_jaxs_arrays_bit_for_bit(spec: list[Any], seed: int) -> None:
    rng = np.random.default_rng(seed)
    host = {f"k{j}": [_values(rng, d, s) for _ in range(n)] for j, (d, s, n) in enumerate(spec)}
    on_device: dict[str, Any] = jax.device_put(host)
    on_device["other"] = [3, "text", None, np.float32(2)]
    got, want = device_get(on_device, pack=True), jax.device_get(on_device)
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for x, y in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        if isinstance(y, np.ndarray):
            assert _bits(x) == _bits(y) and x.flags.writeable == y.flags.writeable
        else:
            assert x == y
    arrays = host
    device = jax.devices()[0]
    mesh = jax.sharding.Mesh(np.array([device]), ("x",))
    for target in (None, device, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())):
        placed, expected = device_put(arrays, target, pack=True), jax.device_put(arrays, target)
        for x, y in zip(jax.tree.leaves(placed), jax.tree.leaves(expected)):
            assert isinstance(x, jax.Array) and _bits(x) == _bits(y)
            assert (x.sharding, x.committed, x.weak_type) == (y.sharding, y.committed, y.weak_type)


def test_the_arrays_of_a_pack_share_one_host_buffer() -> None:
    tree = [jnp.full((3, 5), i, jnp.float32) for i in range(6)]
    packed = device_get(tree, pack=True)
    assert all(_together(packed[0], x) for x in packed[1:])
    assert [float(x[0, 0]) for x in packed] == [float(i) for i in range(6)]
    alone = device_get(tree, pack=False)
    assert not any(_together(alone[0], x) for x in alone[1:])


def test_a_call_compiles_at_most_new_per_call_kinds_and_a_later_call_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_transfer, "NEW_PER_CALL", 2)
    tree = {n: [jnp.ones((11, n), jnp.float32) for _ in range(4 + n)] for n in (101, 102, 103)}

    def packed_kinds() -> set[int]:
        host = device_get(tree, pack=True)
        return {n for n, xs in host.items() if _together(xs[0], xs[1])}

    assert packed_kinds() == {102, 103}  # (the largest kinds first)
    assert packed_kinds() == {101, 102, 103}


def test_too_few_large_deleted_and_key_arrays_move_as_jax_moves_them() -> None:
    few = [jnp.ones(3) for _ in range(_transfer.MIN_KIND - 1)]
    large = [jnp.ones(_transfer.SMALL_BYTES // 4 + 1, jnp.float32) for _ in range(4)]
    keys = [jax.random.key(i) for i in range(5)]
    host = device_get({"few": few, "large": large, "keys": keys}, pack=True)
    assert not any(_together(host["few"][0], x) for x in host["few"][1:])
    assert not _together(host["large"][0], host["large"][1])
    assert all(jax.dtypes.issubdtype(k.dtype, jax.dtypes.prng_key) for k in host["keys"])
    deleted = [jnp.ones(3) + i for i in range(6)]
    deleted[2].delete()
    with pytest.raises(RuntimeError, match="deleted"):  # (as jax raises it; its wording varies by version)
        jax.device_get(deleted)
    with pytest.raises(RuntimeError, match="deleted"):
        device_get(deleted, pack=True)


def test_device_put_takes_a_prefix_tree_of_targets() -> None:
    device = jax.devices()[0]
    tree = {"a": [np.ones(2, np.float32)] * 5, "b": [np.zeros(2, np.int32)] * 5}
    placed = device_put(tree, {"a": device, "b": None}, pack=True)
    assert all(x.committed for x in placed["a"]) and not any(x.committed for x in placed["b"])
    with pytest.raises(treekit.StructureMismatchError, match=r"device"):
        device_put(tree, {"a": device}, pack=True)


def test_arrays_in_another_memory_and_other_targets_move_as_jax_moves_them() -> None:
    device = jax.devices()[0]
    host = [np.full(3, i, np.float32) for i in range(8)]
    try:
        pinned = jax.sharding.NamedSharding(
            jax.sharding.Mesh(np.array([device]), ("x",)), jax.sharding.PartitionSpec(), memory_kind="pinned_host"
        )
        mixed = [jax.device_put(x, pinned if i % 2 else device) for i, x in enumerate(host)]
    except (ValueError, RuntimeError, NotImplementedError):  # (a jax or platform without host memory)
        pytest.skip("no pinned_host memory here")
    got = device_get(mixed, pack=True)
    assert [_bits(x) for x in got] == [_bits(x) for x in jax.device_get(mixed)]
    assert _together(got[0], got[2]) and not _together(got[0], got[1])  # (the device's arrays packed)
    placed, expected = device_put(host, pinned, pack=True), jax.device_put(host, pinned)
    assert [(x.sharding, _bits(x)) for x in placed] == [(y.sharding, _bits(y)) for y in expected]
    space = getattr(getattr(jax, "memory", None), "Space", None)
    if space is not None:  # (a memory space as the target: jax.device_put's own)
        placed, expected = device_put(host, space.Device, pack=True), jax.device_put(host, space.Device)
        assert [(x.sharding, _bits(x)) for x in placed] == [(y.sharding, _bits(y)) for y in expected]


@pytest.fixture
def packs_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checkpoints pack as on an accelerator (by default the CPU moves arrays one by one)."""
    monkeypatch.setattr(_transfer, "PACKED_PLATFORMS", _transfer.PACKED_PLATFORMS | {"cpu"})


@pytest.mark.usefixtures("packs_on_the_cpu")
def test_save_and_load_onto_a_device_in_packs(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    tree = {"layers": [{"w": _values(rng, "float32", (4, 3)), "b": _values(rng, "bfloat16", (3,))} for _ in range(40)]}
    tree["key"] = jax.random.key(3)
    treekit.save(tmp_path / "t.safetensors", jax.device_put(tree))
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("x",))
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    loaded = treekit.load(tmp_path / "t.safetensors", shardings=sharding)
    expected = jax.device_put(tree, sharding)
    for x, y in zip(jax.tree.leaves(loaded), jax.tree.leaves(expected)):
        assert x.sharding == y.sharding and x.dtype == y.dtype
        if not jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            assert _bits(x) == _bits(y)


@pytest.mark.usefixtures("packs_on_the_cpu")
def test_a_managers_snapshot_outlives_the_arrays_it_was_taken_from(tmp_path: Path) -> None:
    tree = {"w": [jnp.full(8, i, jnp.float32) for i in range(30)]}
    with treekit.CheckpointManager(tmp_path) as manager:
        manager.save(1, tree)
        for x in tree["w"]:
            x.delete()  # (as a donating step does, while the save goes on)
        manager.wait()
        restored = manager.restore(1)
    assert [float(x[0]) for x in restored["w"]] == [float(i) for i in range(30)]


PER_DEVICE = """
import jax, jax.numpy as jnp, numpy as np
from treekit.sharding import device_get, device_put
def root(a):
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a
def _together(x, y):
    return root(x) is root(y)
devices = jax.devices()
tree = [jax.device_put(jnp.full(4, i, jnp.int32), devices[i % 8]) for i in range(64)]
mesh = jax.sharding.Mesh(np.array(devices), ('x',))
tree.append(jax.device_put(jnp.arange(16), jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec('x'))))
host = device_get(tree, pack=True)
assert [int(x[0]) for x in host[:64]] == list(range(64)), host
assert _together(host[0], host[8]) and not _together(host[0], host[1])
assert host[64].tolist() == list(range(16))
back = device_put(host[:64], [devices[i % 8] for i in range(64)], pack=True)
assert [x.sharding.device_set == {devices[i % 8]} for i, x in enumerate(back)] == [True] * 64
assert [int(x[0]) for x in back] == list(range(64))
print('ok')
"""


def test_packs_are_made_per_device_and_arrays_over_several_devices_move_whole() -> None:
    env = {**os.environ, **EIGHT_CPUS}
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(PER_DEVICE)], env=env, capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]

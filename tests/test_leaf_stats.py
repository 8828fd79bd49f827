"""treekit.ops.leaf_stats, the statistics behind summary(stats=True), view and
assert_tree_all_finite: laws against numpy in float64, jax arrays reduced on their devices
agreeing with the host pass, subtotals merged as if the entries were one array, programs
compiled once per shape, and the leaves with nothing to read."""

from __future__ import annotations

import contextlib
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any
from unittest import mock

import numpy as np
import pytest
from children import EIGHT_CPUS
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from treekit.ops import Stats, leaf_stats, merge_stats

DTYPES = st.sampled_from([np.float32, np.float64, np.float16, np.int32, np.int8, np.uint8, np.bool_, np.complex64])


@st.composite
def arrays(draw: st.DrawFn) -> np.ndarray:
    dtype = np.dtype(draw(DTYPES))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5))
    if dtype.kind == "f":
        finite = {"min_value": -1e4, "max_value": 1e4} if dtype.itemsize > 2 else {}
        elements = st.floats(width=8 * dtype.itemsize, **finite) | st.sampled_from([np.nan, np.inf, -np.inf])
        return draw(hnp.arrays(dtype, shape, elements=elements))
    if dtype.kind == "c":
        parts = st.floats(-1e3, 1e3, width=32) | st.sampled_from([np.nan, np.inf])
        return draw(hnp.arrays(dtype, shape, elements=st.builds(complex, parts, parts)))
    return draw(hnp.arrays(dtype, shape))


def reference(x: np.ndarray) -> tuple[int, float, float, float, float, int, int]:
    """numpy in float64: a complex entry with a NaN part is NaN, else one with an infinite part is inf."""
    x = x.ravel()
    nan = np.isnan(x)
    nans, infs = int(nan.sum()), int((np.isinf(x) & ~nan).sum())
    finite = (np.abs(x.astype(np.complex128)) if x.dtype.kind == "c" else x)[np.isfinite(x)].astype(np.float64)
    if not finite.size:
        return 0, math.nan, math.nan, math.nan, math.nan, nans, infs
    return finite.size, finite.mean(), finite.std(), finite.min(), finite.max(), nans, infs


def close(stats: Stats | None, expected: tuple[Any, ...], rtol: float) -> None:
    assert stats is not None
    count, mean, std, low, high, nans, infs = expected
    assert (stats.finite, stats.nans, stats.infs) == (count, nans, infs)
    scale = max(abs(low), abs(high), 1.0) if count else 1.0
    for got, want in ((stats.mean, mean), (stats.std, std), (stats.low, low), (stats.high, high)):
        if math.isnan(want):
            assert math.isnan(got)
        else:
            assert abs(got - want) <= rtol * scale, (got, want)


@given(arrays())
def test_host_statistics_are_numpys_over_the_finite_entries(x: np.ndarray) -> None:
    close(leaf_stats([x])[0], reference(x), 1e-9)


@given(st.lists(arrays(), min_size=1, max_size=8), st.integers(1, 16))
def test_leaves_read_in_blocks_keep_their_own_statistics(xs: list[np.ndarray], block: int) -> None:
    # blocks of a few entries through one buffer: each leaf's blocks merged, nothing carried over
    from treekit.ops import _stats

    with mock.patch.object(_stats, "_BLOCK", block):
        got = leaf_stats(xs)
    for stats, x in zip(got, xs):
        close(stats, reference(x), 1e-9)


@contextlib.contextmanager
def on_device() -> Iterator[None]:
    """jax arrays on the CPU reduced by the compiled programs an accelerator's arrays get (on the
    CPU numpy reads them in place, which is faster)."""
    from treekit.ops import _stats

    with mock.patch.object(_stats, "_IN_PLACE", frozenset()):
        yield


@given(arrays())
def test_jax_arrays_reduce_on_their_device_to_the_host_statistics(x: np.ndarray) -> None:
    jax = pytest.importorskip("jax")
    if x.dtype == np.float64 and not jax.config.jax_enable_x64:
        x = x.astype(np.float32)
    with on_device():
        got = leaf_stats([jax.numpy.asarray(x)])[0]
    # float32 arithmetic on the device: to a float32's precision of the largest magnitude
    close(got, reference(x), 1e-5)


@given(st.lists(arrays(), min_size=0, max_size=5))
def test_merged_statistics_are_those_of_the_entries_taken_together(xs: list[np.ndarray]) -> None:
    merged = merge_stats(leaf_stats(xs))
    together = np.concatenate([np.zeros(0), *(as_real(x).ravel() for x in xs)])
    close(merged, reference(together), 1e-9)


def as_real(x: np.ndarray) -> np.ndarray:
    """float64 values with ``reference``'s statistics: complex entries as magnitudes, NaN or inf."""
    if x.dtype.kind != "c":
        return x.astype(np.float64)
    return np.where(np.isnan(x), np.nan, np.where(np.isinf(x), np.inf, np.abs(x.astype(np.complex128))))


@pytest.mark.parametrize(
    "view",
    [lambda a: a.T, lambda a: a[::3, ::2], lambda a: a[:, :0], lambda a: np.broadcast_to(a[:1], (500, 700))],
    ids=["transposed", "strided", "empty", "broadcast"],
)
def test_a_view_with_other_strides_is_read_as_its_copy(view: Any) -> None:
    from treekit.ops import _stats

    rng = np.random.default_rng(0)
    a = rng.normal(5.0, 2.0, (500, 700)).astype(np.float32)
    a[3, 4], a[7, 9] = np.nan, np.inf
    seen = view(a)
    with mock.patch.object(_stats, "_BLOCK", 4096):  # (many blocks: each through nditer's buffer)
        got, want = leaf_stats([seen, np.ascontiguousarray(seen)])
    assert got is not None and want is not None
    assert got[:1] + got[4:] == want[:1] + want[4:]
    assert math.isclose(got.total, want.total, rel_tol=1e-12)
    assert math.isclose(got.m2, want.m2, rel_tol=1e-9) or (math.isnan(got.m2) and math.isnan(want.m2))


@pytest.mark.parametrize("device", [False, True], ids=["host", "device"])
def test_extremes_that_float32_cannot_hold_or_square_keep_their_values(device: bool) -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    wrap = jnp.asarray if device else np.asarray
    with on_device():
        big, ints, bools = leaf_stats(
            [
                wrap(np.array([1e20, -1e20, 3.0], np.float32)),
                wrap(np.array([2**31 - 1, 2**31 - 3], np.int32)),
                wrap(np.array([True, False, True])),
            ]
        )
        (huge,) = leaf_stats([np.array([3e38 + 3e38j], np.complex64)])  # (numpy's: the host)
    assert big is not None and math.isfinite(big.std) and abs(big.std / 8.16496580927726e19 - 1) < 1e-5
    assert ints is not None and (ints.low, ints.high) == (2**31 - 3, 2**31 - 1)  # (float32 would round both)
    assert bools is not None and (bools.finite, bools.low, bools.high, bools.mean) == (3, 0.0, 1.0, 2 / 3)
    assert huge is not None and huge.infs == 0 and abs(huge.high / (3e38 * math.sqrt(2)) - 1) < 1e-6


@on_device()
def test_a_second_call_and_a_tree_of_the_same_shapes_compile_nothing() -> None:
    jax = pytest.importorskip("jax")
    from treekit.ops._stats import _kernel

    jnp = jax.numpy
    params = {"w": jnp.ones((7, 3)), "b": jnp.zeros(3), "layers": [jnp.full((5,), float(i)) for i in range(37)]}
    leaf_stats(jax.tree.leaves(params))
    compiled = _kernel()._cache_size()
    assert compiled > 0
    leaf_stats(jax.tree.leaves(params))
    moments = jax.tree.map(lambda x: x * 2, params)  # another tree, the same shapes
    stats = leaf_stats(jax.tree.leaves(moments))
    assert _kernel()._cache_size() == compiled
    # one program per kind of leaf, whichever tree the leaves come from
    assert [s.mean for s in stats if s is not None][1:-1] == [2.0 * i for i in range(37)]


@on_device()
def test_the_device_kernel_scales_by_a_power_of_two_so_means_of_small_values_are_exact() -> None:
    # scaled by the largest magnitude instead (3.0), [1.0, 3.0] averaged 2.0000000596 in float32
    jnp = pytest.importorskip("jax").numpy
    got = leaf_stats([jnp.array([1.0, 3.0]), jnp.full((5,), 66.0), jnp.array([-0.1, 0.3, 7e-30])])
    assert [s.mean for s in got if s is not None][:2] == [2.0, 66.0]
    assert got[2] is not None and (got[2].low, got[2].high) == (np.float32(-0.1), np.float32(0.3))


@on_device()
def test_leaves_with_nothing_to_read_have_no_statistics() -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    deleted = jnp.ones(3)
    deleted.delete()
    keys = jax.random.split(jax.random.key(0), 2)
    got = leaf_stats([deleted, jax.ShapeDtypeStruct((2,), np.float32), keys, "text", 1.5, np.array(["a"]), jnp.ones(2)])
    assert got[:6] == [None] * 6 and got[6] == Stats(2, 2.0, 0.0, 1.0, 1.0, 0, 0)
    seen = []
    jax.jit(lambda x: seen.append(leaf_stats([x])[0]) or x)(jnp.ones(2))
    assert seen == [None]  # a tracer


def test_assert_tree_all_finite_names_leaves_it_cannot_read() -> None:
    jax = pytest.importorskip("jax")
    import treekit as tk

    tree = {"w": jax.ShapeDtypeStruct((2,), np.float32), "b": jax.numpy.array([1.0, np.nan])}
    with pytest.raises(TypeError, match=r"tree\['w'\]: expected an array of values, got f32\[2\] with no values"):
        tk.assert_tree_all_finite(tree)


SHARDED = """
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from treekit.ops import _stats, leaf_stats
mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ('data', 'model'))
x = np.arange(64 * 8, dtype=np.float32).reshape(64, 8) - 100.0
x[3, 5], x[60, 1] = np.nan, -np.inf
placed = jax.device_put(x, NamedSharding(mesh, P('data', 'model')))
whole, = leaf_stats([x])
assert leaf_stats([placed]) == [whole]  # (on the CPU numpy reads it: gathered)
_stats._IN_PLACE = frozenset()  # as on an accelerator: reduced on the 8 devices
one, = leaf_stats([placed])
assert one[:1] + one[3:] == whole[:1] + whole[3:]
assert abs(one.mean - whole.mean) < 1e-4 and abs(one.std - whole.std) < 1e-3, (one, whole)
print('ok')
"""


def test_a_sharded_array_reduces_across_its_devices() -> None:
    pytest.importorskip("jax")
    env = {**os.environ, **EIGHT_CPUS}
    out = subprocess.run([sys.executable, "-c", SHARDED], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]

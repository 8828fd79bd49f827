"""Value asserts inside jitted functions: treekit.chexify (and chex's), as chex's chexify."""

from __future__ import annotations

import functools
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

import treekit as tk

jax = pytest.importorskip("jax")
jnp = jax.numpy


def _outcome(call: Callable[[], Any]) -> str:
    try:
        call()
    except AssertionError:
        return "failed"
    return "passed"


def _sync(assertion: Callable[..., Any], **kwargs: Any) -> Callable[..., Any]:
    """``assertion(*trees, **kwargs)`` inside a jitted function, chexified to raise at once."""
    return tk.chexify(jax.jit(lambda *trees: (assertion(*trees, **kwargs), trees[0])[1]), async_check=False)


_values = st.lists(st.floats(-4, 4, width=32) | st.sampled_from([np.nan, np.inf, 0.0]), min_size=1, max_size=4)
_noise = st.lists(st.sampled_from([0.0, 2**-20, -(2**-20), 0.05, 0.105, -0.105, 0.5]), min_size=1, max_size=4)


@settings(max_examples=40, deadline=None)
@given(_values, _noise, st.sampled_from([(0.0, 0.0), (1e-6, 0.0), (0.1, 0.0), (0.0, 1e-6)]), st.booleans(),
       st.booleans(), st.booleans())
@example([1.0, -2.0], [0.105], (0.1, 0.0), False, False, False)  # rtol is a fraction of |y|, as chex's
@example([1.0, np.nan], [0.0], (0.0, 0.0), True, False, True)  # NaN equals NaN
def test_under_chexify_the_value_asserts_fail_exactly_where_they_fail_on_the_host(
    values: list[float], noise: list[float], tolerance: tuple[float, float], strict: bool, scalar: bool,
    three: bool,
) -> None:
    x = np.array(values, np.float32)
    y = (x * (1 + np.resize(np.array(noise, np.float32), x.shape))).astype(np.float32)
    if scalar:  # a scalar against an array (of its value, or not)
        x, y = np.full(x.shape, y[0], np.float32), y[0]
    trees = ({"w": x, "n": 1.0}, {"w": x, "n": 1.0}, {"w": y, "n": 1.0})[0 if three else 1 :]
    rtol, atol = tolerance
    for assertion, kwargs in (
        (tk.assert_trees_all_close, {"rtol": rtol, "atol": atol, "strict": strict}),
        (tk.assert_trees_all_equal, {"strict": strict}),
    ):
        host = _outcome(functools.partial(assertion, *trees, **kwargs))
        assert _outcome(functools.partial(_sync(assertion, **kwargs), *trees)) == host, (assertion, trees, kwargs)
    host = _outcome(lambda: tk.assert_tree_all_finite(trees[-1]))
    assert _outcome(lambda: _sync(tk.assert_tree_all_finite)(trees[-1])) == host


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-3, 3), min_size=1, max_size=4), st.lists(st.integers(-3, 3), min_size=1, max_size=4),
       st.sampled_from(["bool", "int8", "int32", "float16", "bfloat16", "float32"]),
       st.sampled_from([(0.0, 0.0), (0.0, 1.0), (0.5, 0.0), (0.0, 0.999)]))
@example([1], [2], "bfloat16", (0.0, 0.999))  # (0.999 is 1.0 in bfloat16: compared in float32, as on the host)
@example([1], [0], "bool", (0.0, 1.0))
def test_under_chexify_other_dtypes_compare_as_on_the_host(
    xs: list[int], ys: list[int], dtype: str, tolerance: tuple[float, float]
) -> None:
    x = jnp.asarray(xs, dtype)
    y = jnp.asarray(np.resize(np.array(ys), len(xs)), dtype)
    rtol, atol = tolerance
    host = _outcome(lambda: tk.assert_trees_all_close({"w": x}, {"w": y}, rtol=rtol, atol=atol))
    chexified = _sync(tk.assert_trees_all_close, rtol=rtol, atol=atol)
    assert _outcome(functools.partial(chexified, {"w": x}, {"w": y})) == host


def test_empty_arrays_keys_and_other_leaves_under_chexify_as_on_the_host() -> None:
    empty = jnp.zeros((0, 3))
    _sync(tk.assert_tree_all_finite)(empty)
    _sync(tk.assert_trees_all_equal)(empty, empty)
    _sync(tk.assert_trees_all_close)({"w": empty}, {"w": empty})
    key, keys = jax.random.key(0), jax.random.split(jax.random.key(0), 3)
    for a, b in ((key, jnp.zeros(())), (key, keys)):  # a key against no key, one key against three
        with pytest.raises(AssertionError):
            tk.assert_trees_all_equal(a, b)
        with pytest.raises(AssertionError):
            _sync(tk.assert_trees_all_equal)(a, b)
    for check in (tk.assert_trees_all_close_ulp, _sync(tk.assert_trees_all_close_ulp)):
        with pytest.raises(TypeError, match="PRNG keys"):
            check({"k": key}, {"k": key})

    class Box:
        def __init__(self, v: Any) -> None:
            self.v = v

    boxed = jax.jit(lambda v: (tk.assert_tree_all_finite({"b": Box(v)}, is_leaf=lambda n: isinstance(n, Box)), v)[1])
    boxed(jnp.ones(2))  # (is_leaf makes the box a leaf: nothing traced is compared)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3, width=16), min_size=1, max_size=3), st.integers(0, 4), st.integers(0, 3),
       st.sampled_from(["float32", "float16", "bfloat16"]), st.booleans())
def test_under_chexify_the_ulp_assert_fails_exactly_where_it_fails_on_the_host(
    values: list[float], steps: int, maxulp: int, dtype: str, down: bool
) -> None:
    x = jnp.asarray(values, dtype)
    y = x
    for _ in range(steps):
        y = jnp.nextafter(y, jnp.asarray(-jnp.inf if down else jnp.inf, dtype))
    tiny = float(jnp.finfo(dtype).tiny)
    assume(not any(0 < abs(float(v)) < tiny for v in [*x.tolist(), *y.tolist()]))  # (a TPU flushes subnormals)
    host = _outcome(lambda: tk.assert_trees_all_close_ulp({"x": x}, {"x": y}, maxulp=maxulp))
    assert _outcome(lambda: _sync(tk.assert_trees_all_close_ulp, maxulp=maxulp)({"x": x}, {"x": y})) == host


def test_a_failed_check_names_the_key_path_the_elements_and_the_caller() -> None:
    def step(params: Any, target: Any) -> Any:
        tk.assert_trees_all_close(params, target, rtol=0.1)  # the caller's line
        return params

    checked = tk.chexify(jax.jit(step), async_check=False)
    params = {"dense": {"w": jnp.ones(4), "b": jnp.zeros(2)}}
    checked(params, {"dense": {"w": jnp.ones(4) * 1.05, "b": jnp.zeros(2)}})
    with pytest.raises(AssertionError) as info:
        checked(params, {"dense": {"w": jnp.array([1.0, 1.0, 3.0, 1.0]), "b": jnp.zeros(2)}})
    message = str(info.value)
    assert "assert_trees_all_close" in message and f"{__file__}:" in message
    assert "b['dense']['w']: expected the values of a['dense']['w'], got 1 of 4 different" in message
    assert "flat index 2: 1.0 in a, 3.0 in b" in message
    with pytest.raises(AssertionError, match=r"b\['dense'\]\['b'\]: expected shape \(2,\), got shape \(3,\)"):
        checked(params, {"dense": {"w": jnp.ones(4), "b": jnp.zeros(3)}})  # (while tracing: known already)


def test_finite_checks_under_vmap_and_grad_and_typed_keys() -> None:
    batched = tk.chexify(jax.jit(jax.vmap(lambda row: (tk.assert_tree_all_finite({"row": row}), row)[1])),
                         async_check=False)
    batched(jnp.ones((3, 2)))
    with pytest.raises(AssertionError, match=r"tree\['row'\]: expected finite values"):
        batched(jnp.ones((3, 2)).at[1, 0].set(jnp.inf))
    grad = tk.chexify(jax.jit(jax.grad(lambda w: (tk.assert_tree_all_finite(w), (w**2).sum())[1])), async_check=False)
    assert grad(jnp.ones(2)).tolist() == [2.0, 2.0]
    with pytest.raises(AssertionError):
        grad(jnp.array([1.0, jnp.nan]))
    same = _sync(tk.assert_trees_all_equal)
    same({"key": jax.random.key(0)}, {"key": jax.random.key(0)})
    with pytest.raises(AssertionError, match=r"b\['key'\]"):
        same({"key": jax.random.key(0)}, {"key": jax.random.key(1)})


def test_async_checks_raise_at_the_next_call_at_wait_checks_and_at_block_until_complete() -> None:
    checked = tk.chexify(jax.jit(lambda x: (tk.assert_tree_all_finite(x), x + 1)[1]))
    bad = jnp.array([jnp.nan])
    checked(bad).block_until_ready()  # returns: the check is read later
    with pytest.raises(AssertionError, match="not finite"):
        checked(jnp.ones(1))  # finds the first call's check done
    checked.wait_checks()  # (the later calls passed)
    checked(bad)
    with pytest.raises(AssertionError, match="not finite"):
        checked.wait_checks()
    checked(bad)
    with pytest.raises(AssertionError, match="not finite"):
        tk.block_until_chexify_assertions_complete()
    tk.block_until_chexify_assertions_complete()  # each failure raises once
    other = tk.chexify(jax.jit(lambda x: (tk.assert_trees_all_equal(x, x + 1), x)[1]))
    checked(bad)
    other(jnp.ones(1))
    with pytest.raises(AssertionError, match="not finite"):  # the calls' order, across functions
        tk.block_until_chexify_assertions_complete()
    with pytest.raises(AssertionError, match="expected the values of a"):
        tk.block_until_chexify_assertions_complete()


def test_a_check_nobody_waited_for_still_raises_at_exit(tmp_path: Any) -> None:
    script = textwrap.dedent(
        """
        import jax, jax.numpy as jnp, treekit as tk
        checked = tk.chexify(jax.jit(lambda x: (tk.assert_tree_all_finite({'x': x}), x)[1]))
        checked(jnp.array([jnp.inf]))
        other = tk.chexify(jax.jit(lambda y: (tk.assert_tree_all_finite({'y': y}), y)[1]))
        other(jnp.array([jnp.nan]))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert "2 chexify checks failed" in done.stderr, done.stderr
    assert "tree['x']: expected finite values" in done.stderr and "tree['y']" in done.stderr, done.stderr


def test_custom_message_may_show_traced_values() -> None:
    def step(x: Any, y: Any) -> Any:
        tk.assert_trees_all_equal(x, y, custom_message="step {}: sum {:.2f}", custom_message_format_vars=(7, x.sum()))
        return x

    checked = tk.chexify(jax.jit(step), async_check=False)
    with pytest.raises(AssertionError, match=r"^step 7: sum 3\.00\n"):
        checked(jnp.ones(3), jnp.zeros(3))
    with pytest.raises(AssertionError, match=r"^step 7: sum <f32\[\] being traced>\n"):  # (found while tracing)
        checked(jnp.ones(3), jnp.zeros(4))


def test_misuse_and_other_checkify_errors() -> None:
    from jax.experimental import checkify

    checked = tk.chexify(jax.jit(lambda x: x), async_check=False)
    with pytest.raises(RuntimeError, match="outermost"):
        jax.jit(checked)(jnp.ones(1))
    with pytest.raises(RuntimeError, match="inside another"):
        tk.chexify(lambda x: checked(x), async_check=False)(jnp.ones(1))
    with pytest.raises(TypeError, match=r"treekit\.chexify"):  # no chexify: said so, no tracer error
        jax.jit(lambda x: tk.assert_trees_all_close(x, x + 1))(jnp.ones(1))
    nans = tk.chexify(jax.jit(lambda x: jnp.log(x)), async_check=False, errors=checkify.nan_checks)
    with pytest.raises(ValueError, match="nan") as info:  # checkify's own checks: jax's error
        nans(jnp.array([-1.0]))
    assert not isinstance(info.value, AssertionError)


def test_under_chex_s_chexify_the_checks_raise_through_chex() -> None:
    chex = pytest.importorskip("chex")
    checked = chex.chexify(jax.jit(lambda x: (tk.assert_trees_all_close({"w": x}, {"w": x + 1}), x)[1]),
                           async_check=False)
    with pytest.raises(AssertionError, match=r"assert_trees_all_close.*b\['w'\]: expected the values of a\['w'\]"):
        checked(jnp.ones(2))

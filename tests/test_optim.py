"""sgd / adam / apply_updates: a numpy reference, equality with optax (eager and under jit), numpy alone."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from param_trees import array_trees

from treekit import StructureMismatchError, tree_leaves, tree_map, tree_structure
from treekit.optim import AdamState, GradientTransformation, SgdState, adam, apply_updates, sgd

OPTIMIZERS = [
    # (name, ours, optax's name and arguments)
    ("sgd", lambda: sgd(0.1), ("sgd", (0.1,))),
    ("sgd momentum", lambda: sgd(0.05, momentum=0.9), ("sgd", (0.05, 0.9))),
    ("adam", lambda: adam(0.01), ("adam", (0.01,))),
    ("adam b1 b2 eps", lambda: adam(0.2, b1=0.5, b2=0.9, eps=1e-3), ("adam", (0.2, 0.5, 0.9, 1e-3))),
]


def run(opt: Any, params: Any, grads: list[Any], apply: Callable[[Any, Any], Any], jit: Callable[[Any], Any]) -> Any:
    state = opt.init(params)
    update = jit(opt.update)
    for g in grads:
        updates, state = update(g, state, params)
        params = apply(params, updates)
    return params, state


def reference_adam(
    params: list[np.ndarray], grads: list[list[np.ndarray]], lr: float, b1: float, b2: float, eps: float
) -> list[np.ndarray]:
    """Adam written out on flat lists of float64 arrays, from the paper."""
    mu = [np.zeros_like(p) for p in params]
    nu = [np.zeros_like(p) for p in params]
    for t, g in enumerate(grads, start=1):
        mu = [b1 * m + (1 - b1) * x for m, x in zip(mu, g)]
        nu = [b2 * v + (1 - b2) * x * x for v, x in zip(nu, g)]
        params = [p - lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps) for p, m, v in zip(params, mu, nu)]
    return params


@settings(max_examples=25)
@given(array_trees(count=4), st.sampled_from([(0.1, 0.9, 0.999, 1e-8), (0.5, 0.5, 0.9, 1e-3)]))
def test_adam_matches_a_numpy_reference(trees: list[Any], hyper: tuple[float, float, float, float]) -> None:
    params, *grads = trees
    got, state = run(adam(*hyper), params, grads, apply_updates, lambda f: f)
    expected = reference_adam(tree_leaves(params), [tree_leaves(g) for g in grads], *hyper)
    for a, b in zip(tree_leaves(got), expected):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    assert int(state.count) == 3 and state.count.dtype == np.int32


@given(array_trees(count=3), st.sampled_from([None, 0.0, 0.9]))
def test_sgd_matches_a_numpy_reference(trees: list[Any], momentum: float | None) -> None:
    params, *grads = trees
    got, state = run(sgd(0.1, momentum), params, grads, apply_updates, lambda f: f)
    trace = [np.zeros_like(p) for p in tree_leaves(params)]
    expected = tree_leaves(params)
    for g in grads:
        trace = [x + (momentum or 0.0) * t for x, t in zip(tree_leaves(g), trace)]
        expected = [p - 0.1 * t for p, t in zip(expected, trace)]
    for a, b in zip(tree_leaves(got), expected):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    assert (state.trace is None) == (momentum is None)


def test_states_are_trees_of_numpy_arrays_without_jax() -> None:
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['jax'] = None\n"
        "import numpy as np\n"
        "from treekit.optim import adam, apply_updates\n"
        "from treekit import tree_leaves\n"
        "p = {'w': np.ones(3, np.float32)}\n"
        "opt = adam(0.1); s = opt.init(p)\n"
        "u, s = opt.update({'w': np.ones(3, np.float32)}, s, p)\n"
        "p = apply_updates(p, u)\n"
        "assert all(type(x).__module__ == 'numpy' for x in tree_leaves(s)), tree_leaves(s)\n"
        "assert p['w'].dtype == np.float32 and np.allclose(p['w'], 0.9)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_shapes_of_the_optimizer_and_its_states() -> None:
    opt = adam(0.1)
    assert isinstance(opt, GradientTransformation) and opt == (opt.init, opt.update)
    state = opt.init({"w": np.zeros(2)})
    assert isinstance(state, AdamState) and tree_structure(state.mu) == tree_structure({"w": 0})
    assert sgd(0.1).init({"w": np.zeros(2)}) == SgdState(None)
    assert tree_leaves(sgd(0.1).init({"w": np.zeros(2)})) == []


def test_apply_updates_keeps_the_param_dtype() -> None:
    params = {"w": np.ones(2, np.float32), "n": np.array([1, 2])}
    out = apply_updates(params, {"w": np.full(2, 0.25), "n": np.array([1.5, 1.5])})
    assert out["w"].dtype == np.float32 and out["n"].dtype == params["n"].dtype
    np.testing.assert_array_equal(out["n"], [2, 3])


MISMATCHES = [
    # (name, optimizer, grads, message)
    (
        "sgd",
        sgd(0.1, momentum=0.9),
        {"w": np.ones(2)},
        "grads: expected dict with keys ['b', 'w'], got keys ['w'] (missing 'b')",
    ),
    ("adam", adam(0.1), {"w": np.ones(2), "b": [np.ones(1)]}, "grads['b']: expected a leaf, got list of length 1"),
]


@pytest.mark.parametrize("case", MISMATCHES, ids=lambda c: c[0])
def test_mismatched_grads_name_the_path(case: tuple[str, Any, Any, str]) -> None:
    _, opt, grads, message = case
    state = opt.init({"w": np.zeros(2), "b": np.zeros(1)})
    with pytest.raises(StructureMismatchError, match=f"^{re.escape(message)}$"):
        opt.update(grads, state)


def test_mismatched_updates_name_the_path() -> None:
    message = "updates['w']: expected a leaf, got tuple of length 1"
    with pytest.raises(StructureMismatchError, match=f"^{re.escape(message)}$"):
        apply_updates({"w": np.zeros(1)}, {"w": (np.zeros(1),)})


# -- against optax ----------------------------------------------------------------------------------
@pytest.mark.parametrize("case", OPTIMIZERS, ids=lambda c: c[0])
@pytest.mark.parametrize("mode", ["eager", "jit", "numpy"])
def test_equal_to_optax(case: tuple[str, Any, Any], mode: str) -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    optax = pytest.importorskip("optax")
    _, ours, (name, args) = case
    rng = np.random.default_rng(0)
    shapes = {"layers": [(3, 4), (4,)], "scale": ()}
    params = tree_map(lambda s: rng.normal(size=s).astype(np.float32), shapes, is_leaf=lambda s: type(s) is tuple)
    grads = [tree_map(lambda p: rng.normal(size=p.shape).astype(np.float32), params) for _ in range(6)]
    jparams, jgrads = tree_map(jnp.asarray, params), [tree_map(jnp.asarray, g) for g in grads]
    jit = jax.jit if mode == "jit" else lambda f: f
    expected, their_state = run(getattr(optax, name)(*args), jparams, jgrads, optax.apply_updates, jit)
    if mode == "numpy":
        got, state = run(ours(), params, grads, apply_updates, lambda f: f)
        assert all(isinstance(x, np.ndarray) and x.dtype == np.float32 for x in tree_leaves(got))
        for a, b in zip(tree_leaves(got), jax.tree.leaves(expected)):
            np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-6)
        return
    got, state = run(ours(), jparams, jgrads, apply_updates, jit)
    assert jax.tree.structure(got) == jax.tree.structure(expected)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(expected)):
        assert isinstance(a, jax.Array) and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)  # the same operations: bit for bit
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(their_state)):
        np.testing.assert_array_equal(a, b)


def test_a_whole_training_step_under_jit_and_grad() -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    optax = pytest.importorskip("optax")
    from treekit.params import init_mlp_params, mse_loss

    params = init_mlp_params([1, 8, 1], jax.random.key(0))
    x = jnp.linspace(-1, 1, 16)[:, None]

    def make_step(opt: Any, apply: Callable[[Any, Any], Any]) -> Any:
        @jax.jit
        def step(params: Any, state: Any) -> Any:
            grads = jax.grad(mse_loss)(params, x, x**2)
            updates, state = opt.update(grads, state, params)
            return apply(params, updates), state

        return step

    ours, theirs = adam(0.01), optax.adam(0.01)
    p1, s1 = params, ours.init(params)
    p2, s2 = params, theirs.init(params)
    step1, step2 = make_step(ours, apply_updates), make_step(theirs, optax.apply_updates)
    for _ in range(3):
        p1, s1 = step1(p1, s1)
        p2, s2 = step2(p2, s2)
    for a, b in zip(jax.tree.leaves(p1), jax.tree.leaves(p2)):
        np.testing.assert_array_equal(a, b)

"""Train the JAX pytree tutorial's MLP on y = x**2 with treekit: init, Adam, apply_updates.

The params are a list of ``{'weights', 'biases'}`` dicts, the optimizer state a NamedTuple of
trees of the same shape; one training step is a gradient, ``opt.update`` and
``apply_updates`` (a ``tree_map``). With jax installed the step runs under ``jax.jit`` and the
gradient comes from ``jax.grad``; without it, everything is numpy and the gradient comes from
:func:`treekit.params.mse_loss_and_grad`, a hand-written backward pass.

    python examples/mlp_regression.py                 # jax when installed, 1000 steps
    python examples/mlp_regression.py --backend numpy --steps 300

``python -m treekit demo`` is the same program with a parameter table and a progress bar.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from treekit import keystr, tree_leaves_with_path
from treekit.params import adam, apply_updates, init_mlp_params, mse_loss, mse_loss_and_grad, tree_cast, tree_size


def make_step(opt: Any, x: np.ndarray, y: np.ndarray, backend: str) -> Any:
    """One training step ``(params, state) -> (params, state, loss)`` for the backend."""
    if backend == "numpy":

        def step(params: Any, state: Any) -> Any:
            loss, grads = mse_loss_and_grad(params, x, y)
            updates, state = opt.update(grads, state, params)
            return apply_updates(params, updates), state, loss

        return step

    import jax

    @jax.jit
    def jax_step(params: Any, state: Any) -> Any:
        loss, grads = jax.value_and_grad(mse_loss)(params, x, y)
        updates, state = opt.update(grads, state, params)
        return apply_updates(params, updates), state, loss

    return jax_step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", choices=["auto", "jax", "numpy"], default="auto")
    args = parser.parse_args()
    backend = args.backend
    if backend == "auto":
        try:
            import jax  # noqa: F401

            backend = "jax"
        except ImportError:
            backend = "numpy"

    rng = np.random.default_rng(args.seed)
    params = tree_cast(init_mlp_params([1, 128, 128, 1], rng), np.float32)
    x = rng.normal(size=(128, 1)).astype(np.float32)
    y = x**2
    print(f"{tree_size(params):,} parameters:", ", ".join(keystr(p) for p, _ in tree_leaves_with_path(params)))

    opt = adam(learning_rate=1e-3)
    state = opt.init(params)
    step = make_step(opt, x, y, backend)
    first = float(mse_loss(params, x, y))
    for k in range(args.steps):
        params, state, loss = step(params, state)
        if k % 100 == 0:
            print(f"step {k:4d}  loss {float(loss):.6f}")
    final = float(mse_loss(params, x, y))
    print(f"{backend}: final loss {final:.6f} < initial loss {first:.6f}" if final < first else "the loss did not fall")
    raise SystemExit(0 if final < first else 1)


if __name__ == "__main__":
    main()

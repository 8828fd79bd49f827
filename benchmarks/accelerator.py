"""treekit on jax's default device (a TPU where there is one): the eager tree functions on device
arrays against jax.tree_util, a jitted Adam step against optax, looking at a 1 GB tree
(``view``, ``summary(stats=True)``, ``assert_tree_all_finite``) against one fused jitted pass,
and where the numpy Adam path's distance from optax comes from.

    python benchmarks/accelerator.py [--gb 1] [--rounds 5] [--json PATH]
    JAX_PLATFORMS=cpu python benchmarks/accelerator.py     # the same on the CPU backend
    python benchmarks/accelerator.py --quick                # a smoke run: small trees, 1 round
    python benchmarks/accelerator.py --rows look --gb 0.5   # some groups of rows (below) alone

Trees look like models: ``model`` is a transformer's params (an embedding, then layers of
q/k/v/o, up/down and two norms, natural key order) on the device, float32, ``--gb`` of it;
``small`` is 1,000 arrays of 256 entries (the eager-functions rows). Times are wall clock, the
fastest of ``--rounds`` rounds, rows interleaved; device work is waited for.

Rows:
- eager: ``leaves``, ``structure``, ``flatten`` + ``unflatten``, ``tree_map(f)`` with ``f`` one
  jax op per leaf, each as a ratio to jax.tree_util on the same tree.
- adam: a jitted step (loss, grad, update) of a 4-layer MLP with ``treekit.optim.adam`` and with
  ``optax.adam``; milliseconds per step and the loss after the timed steps (the same or not).
- look: ``view`` (its HTML) the first call (compiles) and the second, ``summary(stats=True)`` and
  ``assert_tree_all_finite`` (second calls), against the floor: one jitted function making one
  pass over every leaf (sum, sum of squares, min, max, NaN and inf counts: the cheapest way to
  the statistics, without leaving out the non-finite entries), called on the tree (compiled
  beforehand), its results fetched; and ``device_get`` of the whole tree.
- drift: the numpy Adam path (numpy params, the hand-written backward pass) trained 100 steps
  beside optax on the device, the largest parameter difference at the end: fed the same
  gradients (the optimizers alone), then each computing its own gradients at jax's default
  matmul precision and at ``'highest'``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def model_tree(gb: float, width: int = 1024) -> dict[str, Any]:
    """A transformer's params, as host arrays: ~``gb`` GiB of float32."""
    rng = np.random.default_rng(0)

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape, np.float32) / np.sqrt(shape[0])).astype(np.float32)

    layer_bytes = (4 * width * width + 8 * width * width + 4 * width) * 4
    embed = w(8192, width)
    count = max(1, round((gb * 2**30 - embed.nbytes) / layer_bytes))
    layers = [
        {
            "attention": {name: w(width, width) for name in ("query", "key", "value", "out")},
            "mlp": {"up": w(width, 4 * width), "down": w(4 * width, width)},
            "norm1": {"scale": np.ones(width, np.float32), "bias": np.zeros(width, np.float32)},
            "norm2": {"scale": np.ones(width, np.float32), "bias": np.zeros(width, np.float32)},
        }
        for _ in range(count)
    ]
    return {"embed": embed, "layers": layers}


def fastest(fns: dict[str, Callable[[], Any]], rounds: int) -> dict[str, float]:
    """Each function's fastest of ``rounds`` calls, interleaved round by round."""
    best = {name: float("inf") for name in fns}
    for r in range(rounds):
        order = list(fns)[r % len(fns) :] + list(fns)[: r % len(fns)]
        for name in order:
            start = time.perf_counter()
            fns[name]()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def eager_rows(jax: Any, rounds: int, quick: bool) -> dict[str, Any]:
    import treekit as tk

    jnp = jax.numpy
    n = 100 if quick else 1000
    names = ("kernel", "bias", "scale", "embedding")
    tree = {f"block_{i}": {name: jnp.full((256,), i, jnp.float32) for name in names} for i in range(n // len(names))}
    jax.block_until_ready(tree)
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    ours_leaves, ours_treedef = tk.tree_flatten(tree)

    def wait(f: Callable[[], Any]) -> Callable[[], Any]:
        return lambda: jax.block_until_ready(f())

    pairs = {
        "leaves": (lambda: tk.tree_leaves(tree), lambda: jax.tree_util.tree_leaves(tree)),
        "structure": (lambda: tk.tree_structure(tree), lambda: jax.tree_util.tree_structure(tree)),
        "flatten+unflatten": (
            lambda: tk.tree_unflatten(ours_treedef, tk.tree_flatten(tree)[0]),
            lambda: jax.tree_util.tree_unflatten(treedef, jax.tree_util.tree_flatten(tree)[0]),
        ),
        "tree_map(jnp.negative)": (
            wait(lambda: tk.tree_map(jnp.negative, tree)),
            wait(lambda: jax.tree_util.tree_map(jnp.negative, tree)),
        ),
    }
    assert [id(x) for x in ours_leaves] == [id(x) for x in leaves]
    rows = {}
    for name, (ours, theirs) in pairs.items():
        ours(), theirs()  # (compiles the op once)
        best = fastest({"treekit": ours, "jax": theirs}, rounds * 20)
        rows[name] = {"treekit_s": best["treekit"], "jax_s": best["jax"], "ratio": best["treekit"] / best["jax"]}
    return {"leaves": len(leaves), "rows": rows}


def adam_rows(jax: Any, rounds: int, quick: bool) -> dict[str, Any]:
    import optax

    from treekit import optim
    from treekit.params import init_mlp_params, mse_loss

    jnp = jax.numpy
    widths = [64, 128, 128, 64] if quick else [512, 2048, 2048, 512]
    rng = np.random.default_rng(0)
    params = jax.tree.map(jnp.asarray, init_mlp_params(widths, rng))
    params = jax.tree.map(lambda x: x.astype(jnp.float32), params)
    x = jnp.asarray(rng.standard_normal((256, widths[0]), np.float32))
    y = jnp.asarray(rng.standard_normal((256, widths[-1]), np.float32))

    def trainer(opt: Any, apply: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        @jax.jit
        def step(p: Any, s: Any) -> Any:
            loss, g = jax.value_and_grad(mse_loss)(p, x, y)
            u, s = opt.update(g, s, p)
            return apply(p, u), s, loss

        return step

    out = {}
    steps = 5 if quick else 50
    for name, opt, apply in (
        ("treekit", optim.adam(1e-3), optim.apply_updates),
        ("optax", optax.adam(1e-3), optax.apply_updates),
    ):
        step = trainer(opt, apply)
        p, s = params, opt.init(params)
        p, s, loss = step(p, s)  # (compiles)
        jax.block_until_ready(loss)
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            p, s, loss = step(p, s)
            jax.block_until_ready(loss)
            times.append(time.perf_counter() - start)
        out[name] = {"ms_per_step": 1e3 * float(np.median(times)), "loss": float(loss)}
    out["same_loss"] = out["treekit"]["loss"] == out["optax"]["loss"]
    return out


def look_rows(jax: Any, gb: float, rounds: int, width: int = 1024) -> dict[str, Any]:
    import treekit as tk
    from treekit.ops._stats import _kernel

    jnp = jax.numpy
    tree = jax.device_put(model_tree(gb, width))
    jax.block_until_ready(tree)
    leaves = jax.tree.leaves(tree)
    nbytes = sum(x.nbytes for x in leaves)

    @jax.jit
    def fused(xs: list[Any]) -> Any:  # the floor: one program, one pass over every leaf
        def one(x: Any) -> Any:
            nans, infs = jnp.isnan(x).sum().astype(x.dtype), jnp.isinf(x).sum().astype(x.dtype)
            return jnp.stack([x.sum(), (x * x).sum(), x.min(), x.max(), nans, infs])

        return jnp.stack([one(x) for x in xs])

    timings: dict[str, float] = {}
    start = time.perf_counter()
    tk.view(tree)._repr_html_()
    timings["view_first_s"] = time.perf_counter() - start
    jax.device_get(fused(leaves))  # (compiles the floor)
    compiled = _kernel()._cache_size()
    best = fastest(
        {
            "view": lambda: tk.view(tree)._repr_html_(),
            "summary_stats": lambda: tk.summary(tree, stats=True),
            "assert_tree_all_finite": lambda: tk.assert_tree_all_finite(tree),
            "fused_pass": lambda: jax.device_get(fused(leaves)),
        },
        rounds,
    )
    timings.update({f"{name}_s": t for name, t in best.items()})
    recompiled = _kernel()._cache_size() - compiled
    start = time.perf_counter()
    jax.device_get(leaves)
    timings["device_get_s"] = time.perf_counter() - start
    return {
        "leaves": len(leaves),
        "gib": nbytes / 2**30,
        **timings,
        "view_over_fused": timings["view_s"] / timings["fused_pass_s"],
        "programs_compiled_after_the_first_view": recompiled,
    }


def drift_rows(jax: Any, steps: int = 100) -> dict[str, Any]:
    import optax

    from treekit import optim
    from treekit.params import init_mlp_params, mse_loss, mse_loss_and_grad, tree_cast

    jnp = jax.numpy
    rng = np.random.default_rng(0)
    params = tree_cast(init_mlp_params([1, 64, 64, 1], rng), np.float32)
    x = rng.standard_normal((128, 1)).astype(np.float32)
    y = x**2

    def numpy_run() -> tuple[Any, list[Any]]:
        opt, p = optim.adam(1e-2), params
        state, grads = opt.init(p), []
        for _ in range(steps):
            g = mse_loss_and_grad(p, x, y)[1]
            grads.append(g)
            u, state = opt.update(g, state, p)
            p = optim.apply_updates(p, u)
        return p, grads

    def optax_run(grads: list[Any] | None, precision: str) -> Any:
        opt = optax.adam(1e-2)
        p = jax.tree.map(jnp.asarray, params)
        state = opt.init(p)
        grad = jax.jit(jax.grad(mse_loss))
        with jax.default_matmul_precision(precision):
            for k in range(steps):
                g = jax.tree.map(jnp.asarray, grads[k]) if grads is not None else grad(p, x, y)
                u, state = opt.update(g, state, p)
                p = optax.apply_updates(p, u)
        return p

    def distance(a: Any, b: Any) -> float:
        pairs = zip(jax.tree.leaves(a), jax.tree.leaves(b))
        return max(float(np.max(np.abs(np.asarray(u) - np.asarray(v)))) for u, v in pairs)

    ours, grads = numpy_run()
    return {
        "steps": steps,
        "same_gradients": distance(ours, optax_run(grads, "default")),
        "own_gradients_default_precision": distance(ours, optax_run(None, "default")),
        "own_gradients_highest_precision": distance(ours, optax_run(None, "highest")),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="small trees, one round: a smoke run")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--rows", default="eager,adam,look,drift", help="which groups of rows, by name")
    args = parser.parse_args()
    import jax

    gb, rounds = (0.01, 1) if args.quick else (args.gb, args.rounds)
    result: dict[str, Any] = {
        "device": str(jax.devices()[0].device_kind),
        "backend": jax.default_backend(),
        "jax": jax.__version__,
        "date": time.strftime("%Y-%m-%d"),
    }
    for name, run in (
        ("eager", lambda: eager_rows(jax, rounds, args.quick)),
        ("adam", lambda: adam_rows(jax, rounds, args.quick)),
        ("look", lambda: look_rows(jax, gb, rounds, 256 if args.quick else 1024)),
        ("drift", lambda: drift_rows(jax, 10 if args.quick else 100)),
    ):
        if name not in args.rows.split(","):
            continue
        result[name] = run()
        print(name, json.dumps(result[name], indent=1), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()

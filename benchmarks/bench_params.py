"""treekit.params' tree_add and SGD step against jax.tree_util.tree_map by hand and optax, outside jit.

The tree is the params of a 1,000-layer MLP (a list of 1,000 ``{'weights', 'biases'}`` dicts,
2,000 leaves; width 4 so that the arrays are small and the tree walking shows). Each row times
its contenders interleaved round-robin in one process and reports medians and the ratio to the
hand-written ``jax.tree_util.tree_map``, taken from each contender's fastest round: these
machines are shared and noisy, and the fastest round is the one least disturbed.
Every contender's result is checked against the baseline's before timing.

    python benchmarks/bench_params.py               # ~30 s on 2 cores
    python benchmarks/bench_params.py --rounds 5    # a quicker, noisier run

Rows: ``tree_add`` (numpy leaves); an SGD step ``apply_updates(params, sgd.update(grads))``
with numpy leaves (optax turns each leaf into a jax array in ``apply_updates``) and with jax
leaves (every leaf op is an eager jax dispatch, for both).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isdir(os.path.join(_ROOT, "treekit")):  # time this checkout's treekit
    sys.path.insert(0, _ROOT)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

from treekit import params as tp  # noqa: E402

LR = 0.1


def mlp(layers: int, width: int, seed: int, to: Callable[[Any], Any]) -> list[dict[str, Any]]:
    tree = tp.init_mlp_params([width] * (layers + 1), seed)
    return [{k: to(v.astype(np.float32)) for k, v in layer.items()} for layer in tree]


def rows(layers: int) -> list[tuple[str, dict[str, Callable[[], Any]]]]:
    a, b = mlp(layers, 4, 0, np.asarray), mlp(layers, 4, 1, np.asarray)
    ja, jb = mlp(layers, 4, 0, jnp.asarray), mlp(layers, 4, 1, jnp.asarray)
    ours, theirs = tp.sgd(LR), optax.sgd(LR)
    s_ours, s_theirs = ours.init(a), theirs.init(a)

    def treekit_step(p: Any, g: Any) -> Any:
        return tp.apply_updates(p, ours.update(g, s_ours, p)[0])

    def optax_step(p: Any, g: Any) -> Any:
        return optax.apply_updates(p, theirs.update(g, s_theirs, p)[0])

    def by_hand(p: Any, g: Any) -> Any:
        return jax.tree_util.tree_map(lambda x, y: x - LR * y, p, g)

    return [
        (
            "tree_add, numpy leaves",
            {
                "jax.tree_util.tree_map by hand": lambda: jax.tree_util.tree_map(lambda x, y: x + y, a, b),
                "treekit tree_add": lambda: tp.tree_add(a, b),
                "optax.tree_utils.tree_add": lambda: optax.tree_utils.tree_add(a, b),
            },
        ),
        (
            "sgd step, numpy leaves",
            {
                "jax.tree_util.tree_map by hand": lambda: by_hand(a, b),
                "treekit sgd + apply_updates": lambda: treekit_step(a, b),
                "optax sgd + apply_updates": lambda: optax_step(a, b),
            },
        ),
        (
            "sgd step, jax leaves",
            {
                "jax.tree_util.tree_map by hand": lambda: by_hand(ja, jb),
                "treekit sgd + apply_updates": lambda: treekit_step(ja, jb),
                "optax sgd + apply_updates": lambda: optax_step(ja, jb),
            },
        ),
    ]


def check(contenders: dict[str, Callable[[], Any]]) -> None:
    results = {name: jax.tree_util.tree_leaves(run()) for name, run in contenders.items()}
    baseline = next(iter(results.values()))
    for name, leaves in results.items():
        assert len(leaves) == len(baseline), name
        for x, y in zip(leaves, baseline):
            np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6, err_msg=name)


def time_row(contenders: dict[str, Callable[[], Any]], rounds: int) -> dict[str, list[float]]:
    """Seconds per call of each contender, one per round: interleaved, the order rotated each round."""
    names = list(contenders)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            run = contenders[name]
            start = time.perf_counter()
            run()
            samples[name].append(time.perf_counter() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--layers", type=int, default=1000)
    args = parser.parse_args()
    print(f"{args.layers}-layer MLP params ({2 * args.layers} leaves), outside jit, {args.rounds} rounds")
    print("ratio: of the fastest rounds (the least disturbed by other load), to the first contender")
    print(f"{'row':<24} {'contender':<32} {'min ms':>8} {'median':>8} {'ratio':>6}")
    for title, contenders in rows(args.layers):
        check(contenders)
        samples = time_row(contenders, args.rounds)
        base = min(next(iter(samples.values())))
        for name, times in samples.items():
            fastest, median = min(times), statistics.median(times)
            print(f"{title:<24} {name:<32} {fastest * 1e3:8.2f} {median * 1e3:8.2f} {fastest / base:6.2f}")
            title = ""


if __name__ == "__main__":
    main()

"""Cost of the treekit -> JAX bridge, and of `import treekit`.

Times ``jax.tree_util.tree_flatten`` / ``tree_unflatten`` / ``tree_flatten_with_path`` on a list
of 1,000 nodes of a class registered with treekit (so JAX calls treekit's flatten through the
bridge) against the same class registered natively with JAX, interleaved in one process; prints
medians and ratios. Then times ``import treekit`` in fresh interpreters, with and without jax
importable.

    python benchmarks/bench_jax_bridge.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import jax.tree_util as jtu

import treekit as tk


class ViaTreekit:
    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b


class Native:
    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b


tk.register_pytree_with_keys(
    ViaTreekit,
    lambda n: (((tk.GetAttrKey("a"), n.a), (tk.GetAttrKey("b"), n.b)), None),
    lambda _, c: ViaTreekit(*c),
    lambda n: ((n.a, n.b), None),
)
jtu.register_pytree_with_keys(
    Native,
    lambda n: (((jtu.GetAttrKey("a"), n.a), (jtu.GetAttrKey("b"), n.b)), None),
    lambda _, c: Native(*c),
    lambda n: ((n.a, n.b), None),
)


def _median_time(fn: Callable[[], Any], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def bridge(rounds: int) -> None:
    trees = {"treekit-registered": [ViaTreekit(i, float(i)) for i in range(1000)],
             "jax-registered": [Native(i, float(i)) for i in range(1000)]}
    defs = {name: jtu.tree_structure(tree) for name, tree in trees.items()}
    leaves = {name: jtu.tree_leaves(tree) for name, tree in trees.items()}
    ops: dict[str, Callable[[str], Callable[[], Any]]] = {
        "jtu.tree_flatten": lambda name: lambda: jtu.tree_flatten(trees[name]),
        "jtu.tree_unflatten": lambda name: lambda: jtu.tree_unflatten(defs[name], leaves[name]),
        "jtu.tree_flatten_with_path": lambda name: lambda: jtu.tree_flatten_with_path(trees[name]),
    }
    print("1,000 custom nodes (2 leaves each), median of", rounds, "rounds, microseconds")
    print(f"{'op':<28}{'jax-registered':>16}{'treekit-registered':>20}{'ratio':>8}")
    for op, make in ops.items():
        samples: dict[str, list[float]] = {name: [] for name in trees}
        for _ in range(rounds):
            for name in trees:  # interleaved: both see the same machine state
                samples[name].append(_median_time(make(name), 20))
        native = statistics.median(samples["jax-registered"]) * 1e6
        bridged = statistics.median(samples["treekit-registered"]) * 1e6
        print(f"{op:<28}{native:>16.0f}{bridged:>20.0f}{bridged / native:>8.2f}")


def import_time(runs: int) -> None:
    code = "import time; t = time.perf_counter(); import treekit; print(time.perf_counter() - t)"
    block = (
        "import sys\nclass B:\n    def find_spec(self, n, p=None, t=None):\n"
        "        if n.split('.')[0] in ('jax', 'jaxlib'): raise ImportError(n)\n"
        "sys.meta_path.insert(0, B())\n"
    )
    for label, prefix in (("jax installed", ""), ("jax not importable", block)):
        times = [float(subprocess.check_output([sys.executable, "-c", prefix + code])) for _ in range(runs)]
        print(f"import treekit ({label}): median {statistics.median(times) * 1e3:.1f} ms over {runs} runs")
    jax_code = "import time; t = time.perf_counter(); import jax; print(time.perf_counter() - t)"
    times = [float(subprocess.check_output([sys.executable, "-c", jax_code])) for _ in range(3)]
    print(f"for scale, import jax: median {statistics.median(times) * 1e3:.0f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    bridge(args.rounds)
    import_time(7)

"""``python -m treekit demo``: a tour of the core on a small MLP parameter tree."""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Sequence


def _demo(widths: list[int], seed: int) -> int:
    import numpy as np

    from treekit import keystr, tree_flatten, tree_leaves_with_path, tree_map, tree_reduce, tree_unflatten

    rng = np.random.default_rng(seed)
    params = [
        {"weights": rng.normal(size=(n_in, n_out)) * np.sqrt(2 / n_in), "biases": np.ones(n_out)}
        for n_in, n_out in itertools.pairwise(widths)
    ]
    leaves, treedef = tree_flatten(params)
    print(f"MLP {widths}: {treedef.num_leaves} leaves, {treedef.num_nodes} nodes")
    print(f"structure: {treedef}")
    for path, leaf in tree_leaves_with_path(params):
        print(f"  {keystr(path):<18} {leaf.shape!s:<10} {leaf.dtype}")
    count = tree_reduce(lambda total, x: total + x.size, params, 0)
    print(f"parameters: {count}")
    # One SGD step on a made-up gradient: the tree_map update model code writes every step.
    grads = tree_map(np.ones_like, params)
    updated = tree_map(lambda p, g: p - 0.1 * g, params, grads)
    moved = tree_map(lambda a, b: float(np.abs(a - b).max()), params, updated)
    print(f"largest change per leaf after one step: {moved}")
    rebuilt = tree_unflatten(treedef, leaves)
    same = all(a is b for a, b in zip(tree_flatten(rebuilt)[0], leaves))
    print(f"unflatten(flatten(params)) rebuilds the same leaves: {same}")
    return 0 if same else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m treekit``."""
    parser = argparse.ArgumentParser(prog="python -m treekit")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="a tour of treekit on an MLP parameter tree")
    demo.add_argument("--widths", default="1,128,128,1", help="layer widths, comma-separated")
    demo.add_argument("--seed", type=int, default=0)
    show = sub.add_parser("show", help="print the summary of a tree stored in .npz, .npy or .json")
    show.add_argument("file")
    show.add_argument("--allow-pickle", action="store_true", help="also load pickles (this runs code from the file)")
    args = parser.parse_args(argv)
    if args.command == "show":
        from treekit._show import show as show_file

        return show_file(args.file, allow_pickle=args.allow_pickle)
    widths = [int(w) for w in args.widths.split(",")]
    return _demo(widths, args.seed)


if __name__ == "__main__":
    sys.exit(main())

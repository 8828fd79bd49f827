"""Memory per node of a treedef and of flattened outputs, treekit vs jax (and optree, torch); import time.

    python benchmarks/footprint.py [--json PATH] [--import-only]

Memory: each (library, tree, output) is measured in a fresh interpreter that builds the tree,
makes the output once, then makes and keeps ``copies`` more of it; the growth of the
process's resident memory (VmRSS), divided by ``copies`` and by the tree's node count (leaves
included, as jax counts them), is the figure. Resident memory sees everything (Python
objects and C++ nodes alike), which tracemalloc does not (it misses jaxlib's and optree's
C++ allocations); for treekit, tracemalloc's count of the same objects is printed beside it
as a check. Outputs: ``treedef`` (tree_structure), ``leaves`` (tree_leaves: the list only,
leaves are shared with the tree), ``flatten_with_path`` (the (key path, leaf) pairs, key
entries and path tuples included, treedef excluded where the library returns it).

Import time: ``python -X importtime -c "import treekit"`` in fresh interpreters; the
median over runs of treekit's cumulative time (its own modules and the stdlib modules they
import), with bytecode cached as after an install, and compiled from source.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TREES = {"mlp-1000": 600, "transformer-12": 2000, "dict-10000": 60}  # tree -> copies kept
OUTPUTS = ("treedef", "leaves", "flatten_with_path")
LIBS = ("treekit", "jax", "optree", "torch")

CHILD = r"""
import gc, sys, tracemalloc
sys.path[:0] = [{root!r}, {bench!r}]
import compare
lib, tree_name, output, copies, trace = {lib!r}, {tree!r}, {output!r}, {copies}, {trace!r}
tree = {{"mlp-1000": compare.mlp(1000), "transformer-12": compare.transformer(12),
         "dict-10000": compare.wide_dict(10_000)}}[tree_name]()
if lib == "treekit":
    import treekit as m
    structure, leaves, fwp, count = m.tree_structure, m.tree_leaves, m.tree_flatten_with_path, None
elif lib == "jax":
    import jax.tree_util as m
    structure, leaves, fwp = m.tree_structure, m.tree_leaves, m.tree_flatten_with_path
elif lib == "optree":
    import optree as m
    structure, leaves = m.tree_structure, m.tree_leaves
    fwp = lambda t: m.tree_flatten_with_path(t)[:2]
else:
    import torch.utils._pytree as m
    structure, leaves, fwp = m.tree_structure, m.tree_leaves, m.tree_flatten_with_path
make = {{"treedef": structure, "leaves": leaves,
         "flatten_with_path": (lambda t: fwp(t)[0]) if lib != "optree" else fwp}}[output]
import treekit
nodes = treekit.tree_structure(tree).num_nodes

def rss():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS"))

make(tree)
gc.collect()
if trace:  # tracemalloc's own bookkeeping is resident memory too: never both in one run
    tracemalloc.start()
before = tracemalloc.get_traced_memory()[0] if trace else rss()
kept = [make(tree) for _ in range(copies)]
gc.collect()
after = tracemalloc.get_traced_memory()[0] if trace else rss()
print((after - before) / copies / nodes, nodes)
"""


def measure(lib: str, tree: str, output: str, copies: int, trace: bool = False) -> float | None:
    """Bytes per node of ``copies`` outputs kept alive: resident memory, or tracemalloc's count."""
    code = CHILD.format(
        root=ROOT, bench=os.path.join(ROOT, "benchmarks"), lib=lib, tree=tree, output=output, copies=copies, trace=trace
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if proc.returncode != 0:
        return None
    return float(proc.stdout.split()[0])


def import_time(runs: int) -> dict[str, float]:
    """Median milliseconds of ``import treekit`` (treekit's cumulative time), with its bytecode
    cached (as after an install) and with every module compiled from source."""
    out = {}
    with tempfile.TemporaryDirectory() as cache:
        base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        base["PYTHONPATH"] = ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")
        for name, env in (
            ("cached_bytecode_ms", dict(base, PYTHONPYCACHEPREFIX=cache)),
            ("from_source_ms", dict(base, PYTHONDONTWRITEBYTECODE="1")),  # stdlib bytecode as installed
        ):
            times = [_import_us(env) for _ in range(runs + 1)][1:]  # the first run fills the cache
            out[name] = statistics.median(times) / 1000
    return out


def _import_us(env: dict[str, str]) -> int:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import treekit"], capture_output=True, text=True, env=env
    )
    for line in proc.stderr.splitlines():
        found = re.match(r"import time:\s+\d+ \|\s+(\d+) \| treekit$", line)
        if found:
            return int(found[1])
    raise RuntimeError(f"no import time for treekit in: {proc.stderr[-500:]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    parser.add_argument("--runs", type=int, default=15, help="import-time runs (default 15)")
    parser.add_argument("--import-only", action="store_true", help="measure import time only")
    args = parser.parse_args()
    results: dict[str, Any] = {"memory": [], "import": import_time(args.runs)}
    imp = results["import"]
    print(
        f"import treekit (median of {args.runs}): {imp['cached_bytecode_ms']:.1f} ms with cached bytecode, "
        f"{imp['from_source_ms']:.1f} ms compiling from source"
    )
    trees = {} if args.import_only else TREES
    if trees:
        print(
            f"\n{'tree':<15} {'output':<18}"
            + "".join(f"{lib:>9}" for lib in LIBS)
            + "  (bytes per node; treekit traced)"
        )
    for tree, copies in trees.items():
        for output in OUTPUTS:
            row: dict[str, Any] = {"tree": tree, "output": output, "rss_bytes_per_node": {}}
            for lib in LIBS:
                row["rss_bytes_per_node"][lib] = measure(lib, tree, output, copies)
            row["treekit_traced_bytes_per_node"] = measure("treekit", tree, output, copies, trace=True)
            cells = "".join(f"{v:>9.1f}" if v is not None else f"{'-':>9}" for v in row["rss_bytes_per_node"].values())
            print(f"{tree:<15} {output:<18}{cells}  ({row['treekit_traced_bytes_per_node']:.1f})", flush=True)
            results["memory"].append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

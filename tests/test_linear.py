"""Every public walk is linear in the size of the tree, at any depth and width.

Each walking function runs on a 100,000-deep tree and on a 1,000,000-wide list, in a fresh
interpreter (one per shape) under a time limit: a walk quadratic in depth or width would take
hours there (``repr`` of a 30,000-deep treedef took over a minute; ``format_tree`` of a
10,000-deep list made a 100 MB string). No timing is asserted: a function either finishes
within the limit, or the test names it as the one that did not. The calls that make an
object per leaf (key paths, summary rows, error notes) run on a 250,000-wide list, where
quadratic work would still take hours, so that the file runs in seconds, not minutes.
The checks that name failing leaves by key path run on a comb (a 100,000-deep chain with a
leaf at every level), where making every leaf's path would cost the square of the depth.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

DEEP = 100_000
COMB = 100_000  # [x, [x, [x, ...]]]
WIDE = 1_000_000
WIDE_PER_LEAF = 250_000  # for the calls in PER_LEAF

# Each entry: name -> an expression over `tree`, `other` (an equal tree), `td` (its treedef)
# and `leaves`. Run in order; each prints its name when done.
CALLS = {
    "tree_leaves": "tk.tree_leaves(tree)",
    "tree_leaves(is_leaf)": "tk.tree_leaves(tree, is_leaf=lambda x: False)",
    "tree_structure": "tk.tree_structure(tree)",
    "tree_flatten": "tk.tree_flatten(tree)",
    "tree_leaves_with_path": "tk.tree_leaves_with_path(tree)",
    "tree_flatten_with_path": "tk.tree_flatten_with_path(tree)",
    "tree_map": "tk.tree_map(lambda x: x, tree)",
    "tree_map(3 trees)": "tk.tree_map(lambda *x: x[0], tree, other, other)",
    "tree_map_with_path": "tk.tree_map_with_path(lambda p, x: x, tree)",
    "tree_unflatten": "tk.tree_unflatten(td, leaves)",
    "flatten_up_to": "td.flatten_up_to(other)",
    "tree_all": "tk.tree_all(tree)",
    "tree_reduce": "tk.tree_reduce(lambda a, b: a, tree, 0)",
    "all_leaves": "tk.all_leaves(leaves)",
    "tree_broadcast": "tk.tree_broadcast(tree, other)",
    "tree_transpose": "tk.tree_transpose(td, tk.tree_structure((0, 0)), tk.tree_map(lambda x: (x, x), tree))",
    "same_structure": "tk.same_structure(tree, other)",
    "assert_same_structure": "tk.assert_same_structure(tree, other)",
    "mismatch error": "expect_error(lambda: tk.tree_map(lambda a, b: a, changed, tree))",
    "repr(TreeDef)": "repr(td)",
    "TreeDef ==": "td == tk.tree_structure(other)",
    "hash(TreeDef)": "hash(tk.tree_structure(other))",
    "pickle(TreeDef)": "pickle.loads(pickle.dumps(td)) == td",
    "treedef_children": "tk.treedef_children(td)",
    "compose": "td.compose(tk.tree_structure((0, 0)))",
    "format_tree": "tk.format_tree(tree)",
    "summary": "tk.summary(tree)",
    "keystr of leaves' paths": "[tk.keystr(p) for p, _ in tk.tree_leaves_with_path(tree)]",
    "tree_get": "tk.tree_get(tree, last)",
    "tree_set": "tk.tree_set(tree, last, 0)",
    "tree_at(path)": "tk.tree_at(last, tree, 0)",
    "tree_at(where)": "tk.tree_at(lambda t: tk.tree_get(t, last), tree, 0)",
}
PER_LEAF = {
    "tree_leaves_with_path",
    "tree_flatten_with_path",
    "tree_map_with_path",
    "tree_broadcast",
    "tree_transpose",
    "mismatch error",
    "treedef_children",
    "summary",
    "keystr of leaves' paths",
    "tree_at(where)",
}
# Calls run on the comb only, with `tree` and `other` combs of numpy scalars (equal values).
COMB_CALLS = {
    "tree_diff": "tk.tree_diff(tree, other, values=True)",
    "assert_trees_all_equal": "tk.assert_trees_all_equal(tree, other)",
    "assert_trees_all_close": "tk.assert_trees_all_close(tree, other)",
    "check_spec": "tk.check_spec(tree, tk.tree_spec(other))",
    "check_spec ANY": "tk.check_spec(tree, tk.tree_map(lambda _: tk.ANY, other))",
    "assert_tree_all_finite": "tk.assert_tree_all_finite(tree)",
    "assert_tree_no_nones": "tk.assert_tree_no_nones(tree)",
    "assert_shape": "tk.assert_shape(tree, ())",
    "tree_dtype": "tk.tree_dtype(tree)",
}

SCRIPT = textwrap.dedent(
    """
    import collections, pickle, sys
    import treekit as tk

    P = collections.namedtuple("P", "a")

    def expect_error(call):
        try:
            call()
        except ValueError as err:
            return str(err)
        raise AssertionError("no error")

    def build(shape, leaf):
        if shape == "deep":  # lists, dicts, tuples and namedtuples nested in turn
            tree = leaf
            for k in range({deep}):
                tree = [tree] if k % 4 == 0 else {{"a": tree}} if k % 4 == 1 else (tree,) if k % 4 == 2 else P(tree)
            return tree
        return [leaf] * ({wide} if shape == "wide" else {per_leaf})

    shape = sys.argv[1]
    if shape == "comb":
        import numpy as np

        def comb(value):
            tree = []
            for _ in range({comb}):
                tree = [np.float32(value), tree]
            return tree

        tree, other = comb(1), comb(1)
        for name, call in {comb_calls}.items():
            eval(call)
            print(name, flush=True)
        sys.exit()
    tree, other, changed = build(shape, 1), build(shape, 2), build(shape, (3,))
    td = tk.tree_structure(tree)
    leaves = tk.tree_leaves(tree)
    # the key path of the last leaf
    last = tk.tree_flatten_with_path(tree)[0][-1][0] if shape == "deep" else (tk.SequenceKey(len(tree) - 1),)
    for name, call in {calls}.items():
        if shape == "deep" or (shape == "wide-per-leaf") == (name in {per_leaf_names}):
            eval(call)
            print(name, flush=True)
    """
).format(
    deep=DEEP,
    wide=WIDE,
    per_leaf=WIDE_PER_LEAF,
    comb=COMB,
    calls=repr(CALLS),
    comb_calls=repr(COMB_CALLS),
    per_leaf_names=repr(PER_LEAF),
)


SHAPES = ["deep", "wide", "wide-per-leaf", "comb"]


@pytest.fixture(scope="module")
def runs() -> dict[str, list[str]]:
    """The shapes' interpreters, started together (they run in parallel where there are cores)."""
    started = {
        shape: subprocess.Popen(
            [sys.executable, "-c", SCRIPT, shape], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for shape in SHAPES
    }
    out: dict[str, list[str]] = {}
    for shape, process in started.items():
        try:
            stdout, stderr = process.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, _ = process.communicate()
            stderr = "timed out"
        out[shape] = [*stdout.splitlines(), f"(stderr: {stderr[-1000:]})"]
    return out


@pytest.fixture(params=SHAPES[:3])
def finished(request: pytest.FixtureRequest, runs: dict[str, list[str]]) -> tuple[str, list[str]]:
    """The names of the calls that finished within the time limit, for one shape."""
    return request.param, runs[request.param]


@pytest.mark.parametrize("name", list(CALLS))
def test_walks_are_linear(finished: tuple[str, list[str]], name: str) -> None:
    shape, lines = finished
    if shape != "deep" and (shape == "wide-per-leaf") != (name in PER_LEAF):
        pytest.skip(f"{name} runs on the {'wide-per-leaf' if name in PER_LEAF else 'wide'} list")
    assert name in lines, f"{name} did not finish on the {shape} tree: {lines[-1]}"


@pytest.mark.parametrize("name", list(COMB_CALLS))
def test_checks_name_leaves_in_linear_time(runs: dict[str, list[str]], name: str) -> None:
    lines = runs["comb"]
    assert name in lines, f"{name} did not finish on the {COMB:,}-deep comb: {lines[-1]}"

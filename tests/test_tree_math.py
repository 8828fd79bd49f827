"""Tree math: each function against a plain numpy reference, against optax, and under jit/grad."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from param_trees import array_trees

from treekit import StructureMismatchError, tree_leaves, tree_map, tree_structure
from treekit.params import (
    tree_add,
    tree_add_scale,
    tree_axpy,
    tree_bytes,
    tree_cast,
    tree_dtype,
    tree_full_like,
    tree_norm,
    tree_ones_like,
    tree_scale,
    tree_size,
    tree_sub,
    tree_vdot,
    tree_zeros_like,
)


def flat(tree: Any) -> np.ndarray:
    """All entries of all leaves, as one float64 vector: the reference's view of a tree."""
    leaves = tree_leaves(tree)
    return np.concatenate([np.ravel(x) for x in leaves]) if leaves else np.zeros(0)


def assert_leaves(got: Any, like: Any, expected: list[Any]) -> None:
    assert tree_structure(got) == tree_structure(like)
    for a, b in zip(tree_leaves(got), expected):
        np.testing.assert_array_equal(a, b)
        assert np.asarray(a).dtype == np.asarray(b).dtype


@given(array_trees(count=3))
def test_leafwise_arithmetic_matches_numpy(trees: list[Any]) -> None:
    x, y, z = trees
    lx, ly, lz = tree_leaves(x), tree_leaves(y), tree_leaves(z)
    assert_leaves(tree_add(x, y), x, [a + b for a, b in zip(lx, ly)])
    assert_leaves(tree_add(x, y, z), x, [a + b + c for a, b, c in zip(lx, ly, lz)])
    assert_leaves(tree_sub(x, y), x, [a - b for a, b in zip(lx, ly)])
    assert_leaves(tree_scale(2.5, x), x, [2.5 * a for a in lx])
    assert_leaves(tree_add_scale(x, 0.5, y), x, [a + 0.5 * b for a, b in zip(lx, ly)])
    assert_leaves(tree_axpy(0.5, x, y), x, [0.5 * a + b for a, b in zip(lx, ly)])


@given(array_trees(count=2))
def test_reductions_match_numpy(trees: list[Any]) -> None:
    x, y = trees
    vx, vy = flat(x), flat(y)
    np.testing.assert_allclose(tree_vdot(x, y), np.vdot(vx, vy), rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(tree_norm(x), np.linalg.norm(vx), rtol=1e-12)
    np.testing.assert_allclose(tree_norm(x, ord=2, squared=True), np.sum(vx * vx), rtol=1e-12)
    np.testing.assert_allclose(tree_norm(x, ord=1), np.linalg.norm(vx, 1), rtol=1e-12)
    np.testing.assert_allclose(tree_norm(x, ord=math.inf), np.linalg.norm(vx, np.inf), rtol=0)
    np.testing.assert_allclose(tree_norm(x, ord="infinity", squared=True), np.max(np.abs(vx)) ** 2, rtol=0)
    assert tree_size(x) == vx.size
    assert tree_bytes(x) == vx.nbytes


@given(array_trees(), st.sampled_from([None, np.float32, np.int32]))
def test_constructors_match_numpy(trees: list[Any], dtype: Any) -> None:
    (x,) = trees
    lx = tree_leaves(x)
    assert_leaves(tree_zeros_like(x, dtype), x, [np.zeros_like(a, dtype=dtype) for a in lx])
    assert_leaves(tree_ones_like(x, dtype), x, [np.ones_like(a, dtype=dtype) for a in lx])
    assert_leaves(tree_full_like(x, 3, dtype), x, [np.full_like(a, 3, dtype=dtype) for a in lx])
    cast = tree_cast(x, dtype)
    if dtype is None:
        assert cast is x
    else:
        assert_leaves(cast, x, [a.astype(dtype) for a in lx])


CASES = [
    # (name, function, arguments, expected)
    ("complex vdot conjugates the first tree", tree_vdot, ([1j], [1j]), 1 + 0j),
    ("complex norm", tree_norm, ([np.array([3j, 4])],), 5.0),
    ("empty vdot", tree_vdot, ({}, {}), 0),
    ("empty norm", tree_norm, ([],), 0.0),
    ("empty inf norm is -inf as optax", tree_norm, ([], "inf"), -math.inf),
    ("Python numbers count one, as optax (jnp.size)", tree_size, ({"a": 1.0, "b": (2, np.int8(3))},), 3),
    ("number bytes: numpy scalars only", tree_bytes, ([1.0, np.float32(2)],), 4),
    ("None is no leaf", tree_size, ({"a": None},), 0),
    ("a None in tree_x stays None, as optax", tree_add_scale, ({"w": 1.0, "f": None}, 2.0, {"w": 1.0, "f": 3.0}),
     {"w": 3.0, "f": None}),
    ("tree_add_scale of None is None, as optax", tree_add_scale, (None, 1, np.ones(3)), None),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_edge_cases(case: tuple[str, Any, tuple[Any, ...], Any]) -> None:
    _, function, args, expected = case
    got = function(*args)
    assert got == expected
    assert type(got) is not bool


ERRORS = [
    (
        lambda: tree_add({"w": 1, "b": [2]}, {"w": 1, "b": [2, 3]}),
        "tree_y['b']: expected list of length 1, got list of length 2",
    ),
    (lambda: tree_add([1], [1], (1,)), "other_trees[0]: expected list of length 1, got tuple of length 1"),
    (lambda: tree_sub([1], [[1]]), "tree_y[0]: expected a leaf, got list of length 1"),
    (
        lambda: tree_vdot({"a": 1}, {"b": 1}),
        "tree_y: expected dict with keys ['a'], got keys ['b'] (missing 'a'; extra 'b')",
    ),
    (lambda: tree_norm([1.0], ord=3), "ord: expected None, 1, 2, inf, 'inf' or 'infinity', got 3"),
]


@pytest.mark.parametrize(("call", "message"), ERRORS, ids=[m for _, m in ERRORS])
def test_errors(call: Any, message: str) -> None:
    with pytest.raises((StructureMismatchError, ValueError), match=re.escape(message)):
        call()


def test_works_without_jax_on_numpy_arrays() -> None:
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['jax'] = None\n"
        "import numpy as np\n"
        "from treekit.params import tree_add, tree_norm, tree_zeros_like, tree_vdot\n"
        "t = {'w': np.ones((2, 2)), 'b': np.ones(2)}\n"
        "assert float(tree_norm(tree_add(t, t))) == 2 * float(tree_norm(t))\n"
        "assert float(tree_vdot(t, tree_zeros_like(t))) == 0\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- against optax, and under jit / grad -----------------------------------------------------------
def to_jax(tree: Any) -> Any:
    jnp = pytest.importorskip("jax.numpy")
    return tree_map(lambda x: jnp.asarray(x, dtype=jnp.float32), tree)


@settings(max_examples=10)
@given(array_trees(count=2, dtype=np.float32, few_shapes=True))
def test_equal_to_optax(trees: list[Any]) -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    otu = pytest.importorskip("optax.tree_utils")
    x, y = map(to_jax, trees)
    pairs = [
        (tree_add(x, y), otu.tree_add(x, y)),
        (tree_add(x, y, x), otu.tree_add(x, y, x)),
        (tree_sub(x, y), otu.tree_sub(x, y)),
        (tree_scale(0.3, x), otu.tree_scale(0.3, x)),
        (tree_add_scale(x, 0.3, y), otu.tree_add_scale(x, 0.3, y)),
        (tree_axpy(0.3, y, x), otu.tree_add_scale(x, 0.3, y)),
        (tree_zeros_like(x), otu.tree_zeros_like(x)),
        (tree_ones_like(x, jnp.int32), otu.tree_ones_like(x, jnp.int32)),
        (tree_full_like(x, 2.0, jnp.int32), otu.tree_full_like(x, 2.0, jnp.int32)),
        (tree_cast(x, jnp.bfloat16), otu.tree_cast(x, jnp.bfloat16)),
        (tree_norm(x), otu.tree_norm(x)),
        (tree_norm(x, 1), otu.tree_norm(x, 1)),
        (tree_norm(x, "inf", squared=True), otu.tree_norm(x, "inf", squared=True)),
    ]
    for ours, theirs in pairs:
        assert jax.tree.structure(ours) == jax.tree.structure(theirs)
        for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs)):
            assert isinstance(a, jax.Array)
            assert a.dtype == b.dtype
            np.testing.assert_allclose(a.astype(np.float32), b.astype(np.float32), rtol=1e-6)
    np.testing.assert_allclose(tree_vdot(x, y), otu.tree_vdot(x, y), rtol=1e-5, atol=1e-4)
    assert tree_size(x) == otu.tree_size(x)
    mixed = {"x": x, "step": 3, "lr": 0.5, "flag": True}  # Python numbers count 1, as jnp.size
    assert tree_size(mixed) == otu.tree_size(mixed) == tree_size(x) + 3
    for empty in ({}, [], None, ()):  # jax's default float where jax is loaded, as optax
        assert tree_dtype(empty) == otu.tree_dtype(empty)


def test_under_jit_and_grad() -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    otu = pytest.importorskip("optax.tree_utils")
    tree = {"w": jnp.arange(6.0).reshape(2, 3), "b": [jnp.array([1.0, -2.0])]}

    def ours(t: Any) -> Any:
        return tree_norm(tree_add_scale(t, 2.0, tree_ones_like(t)), squared=True) + tree_vdot(t, t)

    def theirs(t: Any) -> Any:
        return otu.tree_norm(otu.tree_add_scale(t, 2.0, otu.tree_ones_like(t)), squared=True) + otu.tree_vdot(t, t)

    assert jax.jit(ours)(tree) == theirs(tree)
    grads = jax.grad(lambda t: tree_norm(t, squared=True))(tree)
    np.testing.assert_array_equal(grads["w"], 2 * tree["w"])
    np.testing.assert_array_equal(jax.grad(lambda t: tree_vdot(t, t))(tree)["b"][0], 2 * tree["b"][0])
    np.testing.assert_array_equal(jax.jit(jax.grad(ours))(tree)["w"], jax.grad(theirs)(tree)["w"])


def test_namespace_follows_the_leaves() -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    from treekit.ops._tree_math import namespace

    assert namespace(np.ones(1), 1.0) is np
    assert namespace(np.ones(1), jnp.ones(1)) is jnp
    seen = []
    jax.jit(lambda x: seen.append(namespace(x)) or x)(jnp.ones(1))
    assert seen == [jnp]

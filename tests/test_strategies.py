"""The array strategies of treekit.testing: arrays_like, same_shapes, jax arrays, NaN/inf, min_leaves.

Properties over many draws; no test pins what hypothesis shrinks to.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treekit import ShapeDtype, check_spec, tree_leaves, tree_map, tree_structure
from treekit.testing import (
    array_strategy,
    array_trees,
    arrays_like,
    param_trees,
    same_structure_trees,
    trees,
)

PARAMS = {"layers": [{"w": np.zeros((3, 4), np.float32), "b": np.zeros(4, np.float32)}], "step": np.zeros((), np.int32)}


@given(arrays_like(PARAMS))
def test_arrays_like_a_tree_keeps_structure_shapes_and_dtypes(tree: Any) -> None:
    assert tree_structure(tree) == tree_structure(PARAMS)
    for x, like in zip(tree_leaves(tree), tree_leaves(PARAMS)):
        assert isinstance(x, np.ndarray) and x.shape == like.shape and x.dtype == like.dtype
        assert np.all(np.isfinite(x)) and np.all(np.abs(x) <= 1000)


BATCH = {"image": ShapeDtype(("*batch", 4, 4), "u8"), "label": ShapeDtype(("*batch",), "i64")}


@given(arrays_like(BATCH))
def test_arrays_like_a_spec_satisfies_it(batch: Any) -> None:
    dims = check_spec(batch, BATCH)
    assert batch["label"].shape == dims["*batch"] and len(dims["*batch"]) <= 2


@given(arrays_like([ShapeDtype(("n", None)), ShapeDtype((..., "n"), "f64"), ShapeDtype(("n",), None)]))
def test_arrays_like_binds_names_and_draws_free_dims(tree: Any) -> None:
    a, b, c = tree
    assert a.shape[0] == b.shape[-1] == c.shape[0]
    assert b.dtype == np.float64 and c.dtype == np.float32  # a spec without a dtype gets float32


def test_arrays_like_names_a_leaf_without_shape() -> None:
    with pytest.raises(
        TypeError, match=re.escape("tree_or_spec['b'][0]: expected a leaf with shape and dtype, got int")
    ):
        arrays_like({"a": np.zeros(2), "b": [3]})


@given(same_structure_trees(3, array_strategy(), same_shapes=True, min_leaves=1))
def test_same_shapes_gives_every_tree_the_first_ones_shapes(trees3: tuple[Any, ...]) -> None:
    first, *others = trees3
    for other in others:
        assert tree_structure(other) == tree_structure(first)
        assert [(x.shape, x.dtype) for x in tree_leaves(other)] == [(x.shape, x.dtype) for x in tree_leaves(first)]
    tree_map(lambda p, g, h: p - 0.1 * g + h, *trees3)  # the common use: no broadcast error


@given(same_structure_trees(2, st.one_of(array_strategy(), st.integers()), same_shapes=True))
def test_same_shapes_draws_other_leaves_from_leaves(pair: tuple[Any, Any]) -> None:
    a, b = pair
    assert tree_structure(a) == tree_structure(b)
    for x, y in zip(tree_leaves(a), tree_leaves(b)):
        if isinstance(x, np.ndarray):  # elsewhere b's leaf is drawn from the leaves strategy
            assert isinstance(y, np.ndarray) and x.shape == y.shape and x.dtype == y.dtype


@settings(max_examples=30)
@given(array_trees(allow_nan=True, allow_infinity=True, dtypes=["float32"], min_leaves=1))
def test_nan_and_infinity_only_when_allowed(tree: Any) -> None:
    for x in tree_leaves(tree):
        finite = x[np.isfinite(x)]
        assert np.all(np.abs(finite) <= 1000)


def test_nan_and_infinity_turn_up_when_allowed() -> None:
    from hypothesis import find

    quick = settings(max_examples=200, database=None)
    find(array_strategy(dtypes=["float64"], allow_nan=True), lambda x: bool(np.isnan(x).any()), settings=quick)
    find(array_strategy(dtypes=["float32"], allow_infinity=True), lambda x: bool(np.isinf(x).any()), settings=quick)


@given(array_trees(), param_trees())
def test_finite_by_default(tree: Any, params: Any) -> None:
    assert all(np.all(np.isfinite(x)) for x in tree_leaves(tree) + tree_leaves(params))


@given(trees(min_leaves=3, max_leaves=6), array_trees(min_leaves=1))
def test_min_leaves(tree: Any, arrays: Any) -> None:
    assert 3 <= len(tree_leaves(tree)) <= 6
    assert len(tree_leaves(arrays)) >= 1


def test_min_leaves_is_checked() -> None:
    with pytest.raises(ValueError, match=re.escape("min_leaves: expected at most max_leaves (2), got 3")):
        trees(min_leaves=3, max_leaves=2)
    with pytest.raises(ValueError, match=re.escape("min_leaves: expected an int >= 0, got -1")):
        trees(min_leaves=-1)


def test_jax_array_leaves() -> None:
    jax = pytest.importorskip("jax")

    @settings(max_examples=10)
    @given(array_trees(jax_arrays=True, min_leaves=1), param_trees([2, 3], jax_arrays=True))
    def check(tree: Any, params: Any) -> None:
        assert all(isinstance(x, jax.Array) for x in tree_leaves(tree) + tree_leaves(params))

    check()


def test_jax_array_leaves_like_a_tree() -> None:
    jax = pytest.importorskip("jax")
    from hypothesis import find

    quick = settings(max_examples=20, database=None, derandomize=True)
    params = {"w": jax.numpy.ones((2, 3)), "b": jax.numpy.ones(3, jax.numpy.bfloat16)}
    grads = find(arrays_like(params, jax_arrays=True), lambda t: True, settings=quick)
    assert all(isinstance(x, jax.Array) for x in tree_leaves(grads))
    assert [(x.shape, x.dtype) for x in tree_leaves(grads)] == [(x.shape, x.dtype) for x in tree_leaves(params)]
    pairs = same_structure_trees(2, array_strategy(jax_arrays=True), same_shapes=True, min_leaves=1)
    pair = find(pairs, lambda t: True, settings=quick)
    assert all(isinstance(x, jax.Array) for x in tree_leaves(pair))

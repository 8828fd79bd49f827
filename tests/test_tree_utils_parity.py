"""Every optax.tree_utils function about trees of arrays, called the same way on treekit.params
and on optax.tree_utils: equal results on jax arrays (eager and under jit), close on numpy."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from param_trees import array_trees

from treekit import params, tree_leaves, tree_map, tree_structure

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
otu = pytest.importorskip("optax.tree_utils")

Args = Callable[[Any, Any], tuple[Any, ...]]

# name -> the arguments, built from two trees x and y of one structure (same call on both sides)
CALLS: dict[str, Args] = {
    "tree_add": lambda x, y: (x, y, x),
    "tree_sub": lambda x, y: (x, y),
    "tree_mul": lambda x, y: (x, y),
    "tree_div": lambda x, y: (x, tree_add_one(y)),
    "tree_scale": lambda x, y: (0.3, x),
    "tree_add_scale": lambda x, y: (x, 0.3, y),
    "tree_where": lambda x, y: (False, x, y),
    "tree_clip": lambda x, y: (x, -1.5, 2.0),
    "tree_conj": lambda x, y: (x,),
    "tree_real": lambda x, y: (x,),
    "tree_zeros_like": lambda x, y: (x,),
    "tree_ones_like": lambda x, y: (x, jnp.int32),
    "tree_full_like": lambda x, y: (x, 2.5, jnp.bfloat16),
    "tree_cast": lambda x, y: (x, jnp.bfloat16),
    "tree_cast_like": lambda x, y: (x, tree_map(lambda a: a.astype(jnp.bfloat16), y)),
    "tree_batch_shape": lambda x, y: (x, (2,)),
    "tree_sum": lambda x, y: (x,),
    "tree_max": lambda x, y: (x,),
    "tree_min": lambda x, y: (x,),
    "tree_size": lambda x, y: (x,),
    "tree_allclose": lambda x, y: (x, y, 1e-3, 1e-3),
    "tree_dtype": lambda x, y: (tree_map(lambda a: a.astype(jnp.bfloat16), x), "promote"),
    "tree_norm": lambda x, y: (x, "inf", True),
    "tree_vdot": lambda x, y: (x, y),
}
CLOSE = {"tree_vdot"}  # optax contracts with tensordot at HIGHEST precision, we with vdot
NOT_UNDER_JIT = {"tree_size", "tree_dtype"}  # they return Python ints / dtypes

# The names of optax 0.2.8's tree_utils and, for those treekit does not have, why.
LEFT_OUT = {
}
OPTAX_0_2_8 = [
    "NamedTupleKey", "tree_add", "tree_add_scale", "tree_allclose", "tree_batch_shape",
    "tree_bias_correction", "tree_cast", "tree_cast_like", "tree_clip", "tree_conj", "tree_div",
    "tree_dtype", "tree_full_like", "tree_get", "tree_get_all_with_path", "tree_map_params",
    "tree_max", "tree_min", "tree_mul", "tree_norm", "tree_ones_like", "tree_random_like",
    "tree_real", "tree_scale", "tree_set", "tree_size", "tree_split_key_like", "tree_sub",
    "tree_sum", "tree_unwrap_random_key_data", "tree_update_infinity_moment", "tree_update_moment",
    "tree_update_moment_per_elem_norm", "tree_vdot", "tree_where", "tree_zeros_like",
]  # fmt: skip
OPTIMIZER_STATE = {  # in treekit.optim, tested in test_optim.py
    "tree_bias_correction", "tree_map_params", "tree_update_infinity_moment", "tree_update_moment",
    "tree_update_moment_per_elem_norm",
}  # fmt: skip
RANDOM = {"tree_random_like", "tree_split_key_like", "tree_unwrap_random_key_data"}  # tested below
NAMED = {"NamedTupleKey", "tree_get", "tree_set", "tree_get_all_with_path"}  # laws against optax in test_at.py
EXTRA = {  # treekit's own keywords, after optax's
    "tree_get": ["sep"], "tree_random_like": ["by_path"], "tree_size": ["arrays_only"],
}


def tree_add_one(tree: Any) -> Any:
    return tree_map(lambda a: abs(a) + 1, tree)


def to_jax(tree: Any) -> Any:
    return tree_map(lambda a: jnp.asarray(a, dtype=jnp.float32), tree)


def assert_same(ours: Any, theirs: Any, exact: bool = True) -> None:
    if isinstance(theirs, np.dtype):  # tree_dtype
        assert ours == theirs
        return
    assert tree_structure(ours) == tree_structure(theirs)
    for a, b in zip(tree_leaves(ours), tree_leaves(theirs)):
        assert jnp.asarray(a).dtype == jnp.asarray(b).dtype
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if exact:
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-4)


def test_every_optax_name_is_here_or_left_out_for_a_reason() -> None:
    optax_module = pytest.importorskip("optax.tree_utils")
    implemented = set(CALLS) | OPTIMIZER_STATE | RANDOM | NAMED
    for name in OPTAX_0_2_8:
        assert (name in implemented) != (name in LEFT_OUT), name
    from treekit import optim

    for name in sorted(implemented):
        ours = getattr(optim if name in OPTIMIZER_STATE else params, name)
        theirs = getattr(optax_module, name, None)
        if theirs is None:  # a newer optax dropped it: nothing to compare
            continue
        if name == "tree_set":  # (tree, *args, sep, **names): optax's (tree, filtering, /, **kwargs) and a key path's
            continue
        mine = [p for p in inspect.signature(ours).parameters if p not in EXTRA.get(name, [])]
        assert mine == list(inspect.signature(theirs).parameters), name


@pytest.mark.parametrize("name", sorted(CALLS))
@settings(max_examples=5)
@given(trees=array_trees(count=2, dtype=np.float32, few_shapes=True))
def test_equal_to_optax_on_jax_arrays_eager_and_under_jit(name: str, trees: list[Any]) -> None:
    x, y = map(to_jax, trees)
    args = CALLS[name](x, y)
    expected = getattr(otu, name)(*args)
    assert_same(getattr(params, name)(*args), expected, exact=name not in CLOSE)
    if name not in NOT_UNDER_JIT:
        jitted = jax.jit(lambda x, y: getattr(params, name)(*CALLS[name](x, y)))(x, y)
        theirs = jax.jit(lambda x, y: getattr(otu, name)(*CALLS[name](x, y)))(x, y)
        assert_same(jitted, theirs, exact=name not in CLOSE)


@pytest.mark.parametrize("name", sorted(set(CALLS) - {"tree_dtype", "tree_cast_like"}))
@settings(max_examples=5)
@given(trees=array_trees(count=2, dtype=np.float32, few_shapes=True))
def test_close_to_optax_on_numpy_arrays(name: str, trees: list[Any]) -> None:
    x, y = trees
    ours = getattr(params, name)(*CALLS[name](x, y))
    theirs = getattr(otu, name)(*CALLS[name](*map(to_jax, trees)))
    assert tree_structure(ours) == tree_structure(theirs)
    for a, b in zip(tree_leaves(ours), tree_leaves(theirs)):
        assert not isinstance(a, jax.Array)
        np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=1e-5, atol=1e-5)


def test_dtype_and_cast_like_on_numpy() -> None:
    tree = {"a": np.zeros(1, np.float16), "b": np.zeros(2, np.float32), "c": np.zeros(1, np.int8)}
    assert params.tree_dtype(tree, "promote") == np.float32
    assert params.tree_dtype(tree, "highest") == np.float32
    assert params.tree_dtype({"a": tree["a"], "b": tree["b"]}, "lowest") == np.float16
    assert params.tree_dtype({}) == np.float32  # jax's default float: jax is loaded here, as for optax
    cast = params.tree_cast_like(tree, {"a": np.zeros(1, np.float64), "b": 1.0, "c": np.zeros(1, np.int32)})
    assert [x.dtype for x in tree_leaves(cast)] == [np.float64, np.float32, np.int32]


DTYPE_ERRORS = [
    (
        {"a": np.zeros(1, np.float16), "b": np.zeros(1, np.float32)},
        None,
        "tree['b']: expected dtype float16 (the dtype of tree['a']), got float32\n"
        "pass mixed_dtype_handler='promote', 'highest' or 'lowest' to allow mixed dtypes",
    ),
    (
        {"a": np.zeros(1, np.int8), "b": np.zeros(1, np.uint8)},
        "highest",
        "tree['b']: expected a dtype ordered by promotion with int8 (the highest so far, at tree['a']), got uint8",
    ),
]


@pytest.mark.parametrize(("tree", "handler", "message"), DTYPE_ERRORS)
def test_tree_dtype_errors_name_the_leaves(tree: Any, handler: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        params.tree_dtype(tree, handler)
    assert str(info.value) == message


def test_tree_dtype_rejects_an_unknown_handler() -> None:
    with pytest.raises(TypeError, match="mixed_dtype_handler: expected None, 'promote', 'highest' or 'lowest'"):
        params.tree_dtype([1.0], "max")


def test_split_key_like_and_unwrap_equal_optax() -> None:
    tree = {"w": jnp.zeros((2, 3)), "b": [jnp.zeros(3), None]}
    for key in (jax.random.PRNGKey(3), jax.random.key(3)):
        ours, theirs = params.tree_split_key_like(key, tree), otu.tree_split_key_like(key, tree)
        assert tree_structure(ours) == tree_structure(theirs)
        unwrapped = params.tree_unwrap_random_key_data(ours)
        assert_same(unwrapped, otu.tree_unwrap_random_key_data(theirs))
        assert all(not jax.dtypes.issubdtype(k.dtype, jax.dtypes.prng_key) for k in tree_leaves(unwrapped))
    with pytest.raises(TypeError, match="rng_key: expected a jax PRNG key, got int"):
        params.tree_split_key_like(0, tree)


def test_random_like_draws_what_optax_s_does() -> None:
    # optax's keys, one per leaf by position; by_path=True gives treekit's (test_params.py)
    key = jax.random.PRNGKey(0)
    tree = {"w": jnp.zeros(3), "b": jnp.zeros((2, 2), jnp.bfloat16), "c": [jnp.zeros(1)]}
    for sampler in (jax.random.normal, jax.random.uniform):
        assert_same(params.tree_random_like(key, tree, sampler), otu.tree_random_like(key, tree, sampler))
    half = jnp.float16
    assert_same(params.tree_random_like(key, tree, dtype=half), otu.tree_random_like(key, tree, dtype=half))


def test_every_optax_tree_short_name_is_in_treekit_tree() -> None:
    optax = pytest.importorskip("optax")
    from treekit import optim, tree

    names = [n for n in dir(optax.tree) if not n.startswith("_")]
    assert names and set(names) <= set(dir(tree))
    for name in names:
        long = f"tree_{name}"
        assert getattr(tree, name) is getattr(params, long, None) or getattr(tree, name) is getattr(optim, long)
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        tree.nothing  # noqa: B018

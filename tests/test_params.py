"""treekit.params: the tutorial MLP, random trees, freezing, stacking and flat dicts."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from param_trees import array_trees, skeletons

import treekit
import treekit as tk
from treekit import StructureMismatchError, keystr, tree_leaves, tree_leaves_with_path, tree_map, tree_structure
from treekit.params import (
    adam,
    apply_updates,
    combine,
    flatten_dict,
    init_mlp_params,
    mlp_forward,
    mse_loss,
    mse_loss_and_grad,
    partition,
    tree_random_like,
    tree_stack,
    tree_unstack,
    unflatten_dict,
)

widths = st.lists(st.integers(1, 5), min_size=2, max_size=4)


# -- the MLP ---------------------------------------------------------------------------------------
@given(widths, st.integers(0, 2**32))
def test_init_mlp_params_follows_the_tutorial(layer_widths: list[int], seed: int) -> None:
    params = init_mlp_params(layer_widths, seed)
    rng = np.random.default_rng(seed)  # the tutorial's recipe, drawn in the same order
    expected = [
        {"weights": rng.normal(size=(n_in, n_out)) * np.sqrt(2 / n_in), "biases": np.ones(n_out)}
        for n_in, n_out in zip(layer_widths[:-1], layer_widths[1:])  # noqa: RUF007 (the tutorial's words)
    ]
    assert tree_structure(params) == tree_structure(expected)
    for a, b in zip(tree_leaves(params), tree_leaves(expected)):
        np.testing.assert_array_equal(a, b)
    again = init_mlp_params(layer_widths, np.random.default_rng(seed))
    assert all((a == b).all() for a, b in zip(tree_leaves(again), tree_leaves(params)))


def test_init_mlp_params_scale_is_he() -> None:
    weights = init_mlp_params([400, 300], 0)[0]["weights"]
    assert abs(weights.std() - np.sqrt(2 / 400)) < 0.01 * np.sqrt(2 / 400) * 5


def test_init_mlp_params_rejects_other_rngs() -> None:
    message = "rng: expected a numpy.random.Generator, an int seed or a jax PRNG key, got float"
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        init_mlp_params([1, 2], 0.5)


def reference_forward(params: list[dict[str, np.ndarray]], x: np.ndarray) -> np.ndarray:
    for k, layer in enumerate(params):
        x = np.dot(x, layer["weights"]) + layer["biases"]
        if k < len(params) - 1:
            x = np.where(x > 0, x, 0.0)
    return x


@given(widths, st.integers(0, 1000), st.integers(1, 6))
def test_forward_and_loss_match_numpy(layer_widths: list[int], seed: int, batch: int) -> None:
    params = init_mlp_params(layer_widths, seed)
    rng = np.random.default_rng(seed + 1)
    x, y = rng.normal(size=(batch, layer_widths[0])), rng.normal(size=(batch, layer_widths[-1]))
    np.testing.assert_allclose(mlp_forward(params, x), reference_forward(params, x), rtol=1e-12)
    np.testing.assert_allclose(mse_loss(params, x, y), np.mean((reference_forward(params, x) - y) ** 2), rtol=1e-12)


@settings(max_examples=3)
@given(widths, st.integers(0, 1000), st.integers(1, 6))
def test_hand_written_backward_pass_equals_jax_grad(layer_widths: list[int], seed: int, batch: int) -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    params = tree_map(lambda a: a.astype(np.float32), init_mlp_params(layer_widths, seed))
    rng = np.random.default_rng(seed + 1)
    x = rng.normal(size=(batch, layer_widths[0])).astype(np.float32)
    y = rng.normal(size=(batch, layer_widths[-1])).astype(np.float32)
    loss, grads = mse_loss_and_grad(params, x, y)
    with jax.default_device(jax.devices("cpu")[0]):  # on numpy's backend: an accelerator's matmul rounds otherwise
        jparams, jx, jy = tree_map(jnp.asarray, (params, x, y))
        jloss, jgrads = jax.jit(jax.value_and_grad(mse_loss))(jparams, jx, jy)
    np.testing.assert_allclose(loss, jloss, rtol=1e-5)
    assert tree_structure(grads) == tree_structure(params)
    for a, b in zip(tree_leaves(grads), jax.tree.leaves(jgrads)):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_mlp_under_jit_with_a_jax_key() -> None:
    jax = pytest.importorskip("jax")
    params = init_mlp_params([1, 16, 1], jax.random.key(0))
    assert all(isinstance(x, jax.Array) for x in tree_leaves(params))
    x = jax.numpy.linspace(-1, 1, 8)[:, None]
    loss, grads = jax.jit(jax.value_and_grad(mse_loss))(params, x, x**2)
    ours_loss, ours_grads = jax.jit(mse_loss_and_grad)(params, x, x**2)
    np.testing.assert_allclose(loss, ours_loss, rtol=1e-6)
    for a, b in zip(tree_leaves(grads), tree_leaves(ours_grads)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


# -- tree_random_like ----------------------------------------------------------------------------
@given(array_trees(), st.integers(0, 2**32), st.sampled_from(["normal", "uniform"]))
def test_random_like_is_stable_by_key_path(trees: list[Any], seed: int, sampler: str) -> None:
    (tree,) = trees
    out = tree_random_like(seed, [tree], sampler)[0]
    assert tree_structure(out) == tree_structure(tree)
    for a, b in zip(tree_leaves(out), tree_leaves(tree)):
        assert a.shape == b.shape and a.dtype == b.dtype
    # Another leaf beside the tree changes no key path inside it, so no value either.
    beside = tree_random_like(seed, [tree, {"extra": np.zeros(3)}], sampler)[0]
    assert all(np.array_equal(a, b) for a, b in zip(tree_leaves(out), tree_leaves(beside)))
    # Different key paths draw differently.
    firsts = [float(x.flat[0]) for x in tree_leaves(out)]
    assert len(set(firsts)) == len(firsts)
    if sampler == "uniform":
        assert all(((x >= 0) & (x < 1)).all() for x in tree_leaves(out))


def test_random_like_adding_a_leaf_keeps_the_others() -> None:
    small = {"w": np.zeros((2, 3)), "b": np.zeros(3)}
    big = {"w": np.zeros((2, 3)), "a": np.zeros(4), "b": np.zeros(3), "z": [np.zeros(1)]}
    a, b = tree_random_like(7, small, by_path=True), tree_random_like(7, big, by_path=True)
    np.testing.assert_array_equal(a["w"], b["w"])
    np.testing.assert_array_equal(a["b"], b["b"])
    assert not np.array_equal(a["w"][0], tree_random_like(8, small, by_path=True)["w"][0])
    by_position = tree_random_like(7, small), tree_random_like(7, big)  # optax's keys: leaf positions
    assert not np.array_equal(by_position[0]["w"], by_position[1]["w"])
    assert not np.array_equal(b["a"][:3], b["b"])  # leaves draw independently
    gen = np.random.default_rng(0)
    first, second = tree_random_like(gen, small), tree_random_like(gen, small)
    assert not np.array_equal(first["w"], second["w"])


def test_random_like_sampler_and_dtype() -> None:
    calls = []

    def sampler(gen: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        calls.append((shape, dtype))
        return np.full(shape, 3, dtype)

    out = tree_random_like(0, {"a": np.zeros((2,), np.float32), "b": 1.0}, sampler, dtype=np.int8)
    assert calls == [((2,), np.int8), ((), np.int8)]
    assert out["a"].dtype == np.int8
    with pytest.raises(ValueError, match=re.escape("sampler: expected 'normal', 'uniform' or a function, got 'gauss'")):
        tree_random_like(0, [1.0], "gauss")


def test_random_like_with_a_jax_key_is_stable_and_jits() -> None:
    jax = pytest.importorskip("jax")
    key = jax.random.key(0)
    small = {"w": jax.numpy.zeros((2, 3))}
    big = {"w": jax.numpy.zeros((2, 3)), "a": jax.numpy.zeros(2, jax.numpy.bfloat16)}
    a = tree_random_like(key, small, by_path=True)
    b = jax.jit(tree_random_like, static_argnames="by_path")(key, big, by_path=True)
    np.testing.assert_array_equal(a["w"], b["w"])
    assert b["a"].dtype == jax.numpy.bfloat16
    c = tree_random_like(jax.random.PRNGKey(0), small, jax.random.uniform)
    assert ((c["w"] >= 0) & (c["w"] < 1)).all()


# -- partition / combine -------------------------------------------------------------------------
@given(array_trees(), st.data())
def test_partition_then_combine_is_identity(trees: list[Any], data: st.DataObject) -> None:
    (tree,) = trees
    mask = tree_map(lambda _: data.draw(st.booleans()), tree)
    selected, rest = partition(tree, mask)
    assert all(a is b for a, b in zip(tree_leaves(combine(selected, rest)), tree_leaves(tree), strict=True))
    assert tree_structure(combine(selected, rest)) == tree_structure(tree)
    picks = tree_leaves(mask)
    assert ids(selected) == [id(x) for x, m in zip(tree_leaves(tree), picks) if m]
    assert ids(rest) == [id(x) for x, m in zip(tree_leaves(tree), picks) if not m]
    by_function = partition(tree, lambda x: float(np.sum(x)) > 0)
    assert ids(by_function[0]) == [id(x) for x in tree_leaves(tree) if float(np.sum(x)) > 0]


def ids(tree: Any) -> list[int]:
    return [id(x) for x in tree_leaves(tree)]


def test_partition_by_prefix_mask_and_by_path() -> None:
    params = init_mlp_params([1, 2, 2, 1], 0)
    trainable, frozen = partition(params, [False, True, False])
    assert ids(trainable) == ids(params[1])
    assert ids(frozen) == ids([params[0], params[2]])
    only_biases = treekit.tree_map_with_path(lambda path, _: keystr(path).endswith("['biases']"), params)
    trainable, frozen = partition(params, only_biases)
    assert [x.ndim for x in tree_leaves(trainable)] == [1, 1, 1]
    assert [x.ndim for x in tree_leaves(frozen)] == [2, 2, 2]
    message = "tree: expected list of length 2, got list of length 3"
    with pytest.raises(StructureMismatchError, match=f"^{re.escape(message)}$"):
        partition(params, [True, False])


def test_frozen_part_gets_zero_gradient() -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    params = init_mlp_params([1, 8, 8, 1], jax.random.key(0))
    x = jnp.linspace(-1, 1, 16)[:, None]
    mask = [False, True, False]  # train the middle layer only

    def loss(p: Any) -> Any:  # the stop_gradient pattern: grad in p flows only into the selected part
        trainable, frozen = partition(p, mask)
        return mse_loss(combine(trainable, jax.lax.stop_gradient(frozen)), x, x**2)

    grads, full = jax.jit(lambda p: (jax.grad(loss)(p), jax.grad(mse_loss)(p, x, x**2)))(params)
    for k, (g, f) in enumerate(zip(grads, full)):
        for name in ("weights", "biases"):
            if mask[k]:
                np.testing.assert_array_equal(g[name], f[name])
                assert jnp.any(g[name] != 0)
            else:
                np.testing.assert_array_equal(g[name], jnp.zeros_like(f[name]))

    # Training the selected part with Adam leaves the rest bit for bit as it was.
    trainable, frozen = partition(params, mask)
    opt = adam(0.01)
    state = opt.init(trainable)

    @jax.jit
    def step(trainable: Any, state: Any) -> Any:
        g = jax.grad(lambda t: mse_loss(combine(t, frozen), x, x**2))(trainable)
        assert tree_structure(g, is_leaf=lambda v: v is None) == tree_structure(trainable, is_leaf=lambda v: v is None)
        updates, state = opt.update(g, state, trainable)
        return apply_updates(trainable, updates), state

    for _ in range(3):
        trainable, state = step(trainable, state)
    trained = combine(trainable, frozen)
    for k in range(3):
        same = all(bool((trained[k][n] == params[k][n]).all()) for n in ("weights", "biases"))
        assert same != mask[k]


# -- stacking ---------------------------------------------------------------------------------------
@given(array_trees(count=3))
def test_stack_matches_numpy_and_unstack_inverts_it(trees: list[Any]) -> None:
    stacked = tree_stack(trees)
    assert tree_structure(stacked) == tree_structure(trees[0])
    for k, leaf in enumerate(tree_leaves(stacked)):
        np.testing.assert_array_equal(leaf, np.stack([tree_leaves(t)[k] for t in trees]))
    back = tree_unstack(stacked)
    assert len(back) == 3
    for a, b in zip(back, trees):
        assert tree_structure(a) == tree_structure(b)
        assert all(np.array_equal(x, y) for x, y in zip(tree_leaves(a), tree_leaves(b)))


def test_stack_a_batch_of_examples() -> None:
    examples = [{"x": [float(i), 0.0], "label": i} for i in range(4)]
    batch = tree_stack(examples)
    assert batch["label"].tolist() == [0, 1, 2, 3] and [v.shape for v in batch["x"]] == [(4,), (4,)]


STACK_ERRORS = [
    (
        lambda: tree_stack([{"a": 1}, {"a": 1}, {"b": 1}]),
        StructureMismatchError,
        "trees[2]: expected dict with keys ['a'], got keys ['b'] (missing 'a'; extra 'b')",
    ),
    (lambda: tree_stack([[1], [[1]]]), StructureMismatchError, "trees[1][0]: expected a leaf, got list of length 1"),
    (lambda: tree_stack([]), ValueError, "trees: expected at least one tree, got an empty sequence"),
    (lambda: tree_stack(()), ValueError, "trees: expected at least one tree, got an empty sequence"),
    # issue 21 item 2: a dict raised KeyError: 0, a generator "not subscriptable", a str stacked its characters
    (lambda: tree_stack({"a": 1}), TypeError, "trees: expected a list or tuple of trees, got dict"),
    (lambda: tree_stack({0: {"a": 1}}), TypeError, "trees: expected a list or tuple of trees, got dict"),
    (lambda: tree_stack(t for t in [{"a": 1}]), TypeError, "trees: expected a list or tuple of trees, got generator"),
    (lambda: tree_stack("ab"), TypeError, "trees: expected a list or tuple of trees, got str"),
    (lambda: tree_stack(np.zeros((2, 3))), TypeError, "trees: expected a list or tuple of trees, got ndarray"),
    (lambda: tree_stack(None), TypeError, "trees: expected a list or tuple of trees, got None"),
    (
        lambda: tree_stack([{"a": [1, 2]}, {"a": [1, 2]}, {"a": (1, 2)}]),
        StructureMismatchError,
        "trees[2]['a']: expected list of length 2, got tuple of length 2",
    ),
    (
        lambda: tree_stack([{"a": 1}, {"a": None}]),
        StructureMismatchError,
        "trees[1]['a']: expected a leaf, got None",
    ),
    (lambda: tree_stack([{"a": 1}, 5]), StructureMismatchError, "trees[1]: expected dict with keys ['a'], got leaf 5"),
    (
        lambda: tree_stack(({"a": np.zeros(2)}, {"a": np.zeros(3)})),
        ValueError,
        "trees[1]['a']: expected a leaf of shape (2,) (as trees[0]['a']), got (3,)",
    ),
    (
        lambda: tree_unstack({"a": np.zeros(2), "b": [np.zeros(3)]}),
        StructureMismatchError,
        "tree['b'][0]: expected an array with leading axis of length 2, got shape (3,)",
    ),
    (
        lambda: tree_unstack({"a": np.zeros(2), "b": 1.0}),
        StructureMismatchError,
        "tree['b']: expected an array with leading axis of length 2, got shape ()",
    ),
    (
        lambda: tree_unstack([1.0]),
        StructureMismatchError,
        "tree[0]: expected an array with a leading axis, got shape ()",
    ),
    (lambda: tree_unstack([None]), ValueError, "tree: expected at least one leaf to unstack, got none"),
    (  # the first leaf has no axis 0: it was "expected ... leading axis of length None"
        lambda: tree_unstack({"a": 1.0, "b": np.zeros(2)}),
        StructureMismatchError,
        "tree['a']: expected an array with a leading axis, got shape ()",
    ),
]


@pytest.mark.parametrize(("call", "error", "message"), STACK_ERRORS, ids=[m for _, _, m in STACK_ERRORS])
def test_stack_errors(call: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        call()


class _Raising:
    """A registered node whose flatten function raises."""


def test_stack_notes_a_raising_flatten_function_with_the_tree_it_is_in(registered: Any) -> None:
    def flatten(node: _Raising) -> Any:
        raise RuntimeError("flatten failed")

    registered(_Raising, lambda cls: treekit.register_pytree_node(cls, flatten, lambda _, c: _Raising()))
    for trees, where in [([{"a": _Raising()}, {"a": 1}], "trees[0]['a']"), ([[1], [_Raising()]], "trees[1][0]")]:
        with pytest.raises(RuntimeError, match=f"^{re.escape('flatten failed')}") as info:
            tree_stack(trees)
        assert info.value.__notes__ == [f"{where}: raised while flattening _Raising"]


def test_stack_jax_arrays_under_jit() -> None:
    jax = pytest.importorskip("jax")
    trees = [{"w": jax.numpy.full((2,), float(i))} for i in range(3)]
    stacked = jax.jit(tree_stack)(trees)
    assert isinstance(stacked["w"], jax.Array) and stacked["w"].shape == (3, 2)
    assert [float(t["w"][0]) for t in jax.jit(tree_unstack)(stacked)] == [0.0, 1.0, 2.0]
    replicated = tree_stack([init_mlp_params([1, 2], jax.random.key(0))] * 2)
    assert jax.vmap(lambda p: mse_loss(p, jax.numpy.ones((1, 1)), 0.0))(replicated).shape == (2,)


# -- flat dicts -------------------------------------------------------------------------------------
nested_dicts = st.recursive(
    st.integers(),
    lambda children: st.dictionaries(st.text("abc_", min_size=1, max_size=3), children, min_size=1, max_size=3),
    max_leaves=8,
).filter(lambda t: type(t) is dict)


@given(nested_dicts)
def test_flat_dicts_round_trip_nested_dicts(tree: dict[str, Any]) -> None:
    for sep in ("/", ".", None):
        flat = flatten_dict(tree, sep=sep)
        assert list(flat.values()) == tree_leaves(tree)
        assert unflatten_dict(flat, sep=sep) == tree


@given(skeletons)
def test_flatten_dict_keys_are_simple_keystrs(skeleton: Any) -> None:
    flat = flatten_dict(skeleton)
    assert list(flat) == [keystr(p, simple=True, separator="/") for p, _ in tree_leaves_with_path(skeleton)]


def test_flat_dict_cases() -> None:
    params = init_mlp_params([1, 2, 1], 0)
    assert list(flatten_dict(params)) == ["0/biases", "0/weights", "1/biases", "1/weights"]
    assert list(flatten_dict(params, sep=None)) == [(0, "biases"), (0, "weights"), (1, "biases"), (1, "weights")]
    assert list(unflatten_dict(flatten_dict(params))) == ["0", "1"]
    rebuilt = treekit.tree_unflatten(tree_structure(params), flatten_dict(params).values())
    assert tree_structure(rebuilt) == tree_structure(params)


FLAT_ERRORS = [
    (
        lambda: flatten_dict({"a/b": 1, "a": {"b": 2}}),
        "tree['a/b']: expected a unique flat key, got 'a/b' twice (sep='/')",
    ),
    (
        lambda: unflatten_dict({"a": 1, "a/b": 2}),
        "flat['a/b']: expected a dict at ('a',), got a leaf (key 'a' clashes with key 'a/b')",
    ),
    (
        lambda: unflatten_dict({"a/b": 1, "a": 2}),
        "flat['a']: expected a leaf, got a dict of other keys under it (key 'a' clashes with key 'a/b')",
    ),
    (
        lambda: unflatten_dict({"x": 0, "a": {}, "a/b": 2}),
        "flat['a/b']: expected a dict at ('a',), got a leaf (key 'a' clashes with key 'a/b')",
    ),
    (
        lambda: unflatten_dict({("a",): {}, ("a", "b"): 2}, sep=None),
        "flat[('a', 'b')]: expected a dict at ('a',), got a leaf (key ('a',) clashes with key ('a', 'b'))",
    ),
    (lambda: unflatten_dict({(): 1}, sep=None), "flat[()]: expected a tuple of one or more keys, got ()"),
]


FLAT_TYPE_ERRORS = [
    (lambda: unflatten_dict({"ab": 1}, sep=None), "flat['ab']: expected a tuple key (sep=None), got str"),
    (lambda: unflatten_dict({1: 1}), "flat[1]: expected a str key (sep='/'), got int"),
    (lambda: unflatten_dict([("a", 1)]), "flat: expected a dict, got list"),  # type: ignore[arg-type]
    (lambda: unflatten_dict({"a": 1}, sep=1), "sep: expected a str or None, got int"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("call", "message"), FLAT_TYPE_ERRORS, ids=[m for _, m in FLAT_TYPE_ERRORS])
def test_unflatten_dict_wrong_kinds(call: Any, message: str) -> None:
    """Issue 13 item 3: a str key with sep=None was split into characters."""
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        call()


def test_unflatten_dict_never_changes_its_input() -> None:
    """Issue 13 item 3: {'a': {}, 'a/b': 2} gave {'a': {'b': 2}} and put 'b' into the caller's {}."""
    empty: dict[str, Any] = {}
    flat = {"a": empty, "a/b": 2}
    with pytest.raises(ValueError, match="key 'a' clashes with key 'a/b'"):
        unflatten_dict(flat)
    assert (flat, empty) == ({"a": {}, "a/b": 2}, {})
    inner = {"w": 1}
    assert unflatten_dict({"a": inner, "b/c": 2}) == {"a": {"w": 1}, "b": {"c": 2}}
    assert inner == {"w": 1}


@pytest.mark.parametrize(("call", "message"), FLAT_ERRORS, ids=[m for _, m in FLAT_ERRORS])
def test_flat_dict_errors(call: Any, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        call()


def test_import_treekit_loads_numpy_only_when_a_helper_needs_it() -> None:
    import subprocess
    import sys

    code = (
        "import sys, treekit\n"
        "assert 'numpy' not in sys.modules and 'jax' not in sys.modules\n"
        "assert treekit.tree_add([1], [2]) == [3] and treekit.tree_get([1], '[0]') == 1\n"
        "assert 'numpy' not in sys.modules\n"
        "assert treekit.combine([None], [1]) == [1]\n"
        "assert 'numpy' in sys.modules and 'jax' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_lazy_reexports_from_treekit() -> None:
    assert treekit.partition is partition and treekit.tree_stack is tree_stack
    assert {"partition", "combine", "tree_random_like"} <= set(dir(treekit))
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        treekit.nothing  # noqa: B018


# -- filters for partition --------------------------------------------------------------------------
FILTERED = [
    # (leaf, is_array, is_inexact_array)
    (np.zeros(2, np.float32), True, True),
    (np.zeros((), np.complex64), True, True),
    (np.float64(1.5), True, True),
    (np.zeros(2, np.int32), True, False),
    (np.zeros(2, np.bool_), True, False),
    (1.5, False, False),
    (3, False, False),
    ("relu", False, False),
    (None, False, False),
]


@pytest.mark.parametrize(("leaf", "array", "inexact"), FILTERED, ids=lambda v: repr(v)[:20])
def test_filters(leaf: Any, array: bool, inexact: bool) -> None:
    assert tk.is_array(leaf) is array
    assert tk.is_inexact_array(leaf) is inexact


def test_filters_on_jax_values_and_under_jit() -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    assert tk.is_inexact_array(jnp.zeros(2, jnp.bfloat16)) and not tk.is_inexact_array(jnp.zeros(2, jnp.int8))
    assert not tk.is_array(jax.ShapeDtypeStruct((2,), jnp.float32))  # no data: not an array
    seen = []
    jax.jit(lambda x: seen.append((tk.is_array(x), tk.is_inexact_array(x))) or x)(jnp.ones(2))
    assert seen == [(True, True)]


def test_partition_with_the_filters_trains_floats_only() -> None:
    params = {"w": np.ones((2, 2)), "step": np.array(3), "act": "relu"}
    trained, rest = tk.partition(params, tk.is_inexact_array)
    assert trained == {"w": params["w"], "step": None, "act": None}
    assert rest["step"] is params["step"] and rest["w"] is None
    assert tk.partition(params, tk.is_array)[1] == {"w": None, "step": None, "act": "relu"}

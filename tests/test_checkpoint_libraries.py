"""save and load with the libraries model code is written in (issue 23): equinox, flax nnx and
linen, haiku, optax, typed PRNG keys and jax's extra dtypes. Each library's round trip runs
where the library is installed (the dev extra has them all)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import treekit

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


def _same_leaves(a: Any, b: Any) -> None:
    left, right = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert len(left) == len(right)
    for x, y in zip(left, right):
        if hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            x, y = jax.random.key_data(x), jax.random.key_data(y)
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_equinox_mlp_loads_into_another_instance(tmp_path: Path) -> None:
    eqx = pytest.importorskip("equinox")
    model = eqx.nn.MLP(2, 3, 8, 2, key=jax.random.key(0))
    name = tmp_path / "mlp.safetensors"
    treekit.save(name, model)
    start = "file: the node holding .layers[0].weight is a equinox.nn._linear.Linear, which only its class can build"
    with pytest.raises(ValueError, match=f"^{re.escape(start)}"):
        treekit.load(name)
    other = eqx.nn.MLP(2, 3, 8, 2, key=jax.random.key(1))
    loaded = treekit.load(name, like=other)
    assert type(loaded) is eqx.nn.MLP
    x = jnp.ones(2)
    np.testing.assert_allclose(np.asarray(loaded(x)), np.asarray(model(x)))
    shapes = eqx.filter_eval_shape(eqx.nn.MLP, 2, 3, 8, 2, key=jax.random.key(2))
    np.testing.assert_allclose(np.asarray(treekit.load(name, like=shapes)(x)), np.asarray(model(x)))
    wrong = eqx.nn.MLP(2, 3, 4, 2, key=jax.random.key(1))
    message = (
        "file.layers[0].weight: expected shape (4, 2), got shape (8, 2)\n"
        "file.layers[0].bias: expected shape (4,), got shape (8,)\n"
        "file.layers[1].weight: expected shape (4, 4), got shape (8, 8)\n"
        "file.layers[1].bias: expected shape (4,), got shape (8,)\n"
        "file.layers[2].weight: expected shape (3, 4), got shape (3, 8)"
    )
    with pytest.raises(treekit.StructureMismatchError, match=f"^{re.escape(message)}$"):  # every difference
        treekit.load(name, like=wrong)


def test_nnx_state_loads_into_another_models_state(tmp_path: Path) -> None:
    nnx = pytest.importorskip("flax.nnx")

    class Model(nnx.Module):  # type: ignore[misc]
        def __init__(self, rngs: Any) -> None:
            self.linear = nnx.Linear(3, 4, rngs=rngs)
            self.norm = nnx.BatchNorm(4, rngs=rngs)
            self.drop = nnx.Dropout(0.5, rngs=rngs)

        def __call__(self, x: Any) -> Any:
            return self.norm(self.linear(x))

    model = Model(nnx.Rngs(0))
    model.eval()
    _, state = nnx.split(model)
    name = tmp_path / "state.safetensors"
    treekit.save(name, state)
    other = Model(nnx.Rngs(1))
    other.eval()
    graphdef, template = nnx.split(other)
    merged = nnx.merge(graphdef, treekit.load(name, like=template))
    x = jnp.ones((2, 3))
    np.testing.assert_allclose(np.asarray(merged(x)), np.asarray(model(x)))
    _same_leaves(nnx.split(merged)[1], state)


def test_linen_params_with_frozendict_and_partitioning(tmp_path: Path) -> None:
    nn = pytest.importorskip("flax.linen")
    from flax.core import freeze

    dense = nn.Dense(4, kernel_init=nn.with_partitioning(nn.initializers.lecun_normal(), (None, "model")))
    params = freeze(dense.init(jax.random.key(0), jnp.ones((1, 3))))
    name = tmp_path / "linen.safetensors"
    treekit.save(name, params)
    template = freeze(dense.init(jax.random.key(1), jnp.ones((1, 3))))
    loaded = treekit.load(name, like=template)
    assert type(loaded) is type(params)
    assert loaded["params"]["kernel"].names == (None, "model")
    _same_leaves(loaded, params)


def test_haiku_names_round_trip_without_a_template(tmp_path: Path) -> None:
    hk = pytest.importorskip("haiku")

    def forward(x: Any) -> Any:
        return hk.nets.MLP([4, 2])(x)

    params = hk.transform(forward).init(jax.random.key(0), jnp.ones((1, 3)))
    assert "mlp/~/linear_0" in params
    name = tmp_path / "haiku.safetensors"
    treekit.save(name, params)
    loaded = treekit.load(name)
    assert list(loaded) == list(params) and list(loaded["mlp/~/linear_0"]) == list(params["mlp/~/linear_0"])
    _same_leaves(loaded, params)


def test_optax_states_round_trip(tmp_path: Path) -> None:
    optax = pytest.importorskip("optax")
    params = {"w": jnp.ones((2, 3)), "b": jnp.zeros(3)}
    schedule = optax.warmup_cosine_decay_schedule(0.0, 1e-3, 10, 100)
    for optimizer in (
        optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(schedule)),
        optax.inject_hyperparams(optax.adam)(learning_rate=1e-3),
        optax.multi_transform({"a": optax.adam(1e-3), "s": optax.sgd(1e-2)}, {"w": "a", "b": "s"}),
    ):
        state = optimizer.init(params)
        _, state = optimizer.update(params, state, params)
        name = tmp_path / "opt.safetensors"
        treekit.save(name, state)
        fresh = optimizer.init(params)
        loaded = treekit.load(name, like=fresh)
        assert jax.tree_util.tree_structure(loaded) == jax.tree_util.tree_structure(state)
        _same_leaves(loaded, state)


def test_typed_prng_keys_come_back_typed(tmp_path: Path) -> None:
    keys = {"fry": jax.random.split(jax.random.key(0), 3), "rbg": jax.random.key(1, impl="rbg")}
    name = tmp_path / "keys.safetensors"
    treekit.save(name, keys)
    for loaded in (treekit.load(name), treekit.load(name, like=keys)):
        for k in keys:
            assert loaded[k].dtype == keys[k].dtype
        _same_leaves(loaded, keys)


def test_jax_extra_dtypes_round_trip(tmp_path: Path) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    tree = {
        name: np.arange(4, dtype=np.float32).astype(getattr(ml_dtypes, name))
        for name in ("bfloat16", "float8_e4m3fn", "float8_e5m2")
    }
    tree["int4"] = np.arange(4).astype(ml_dtypes.int4)  # (no safetensors code: raw bytes, its dtype recorded)
    for suffix in (".safetensors", ".npz"):
        name = tmp_path / f"dtypes{suffix}"
        treekit.save(name, tree)
        loaded = treekit.load(name)
        for key, value in tree.items():
            assert loaded[key].dtype == value.dtype
            np.testing.assert_array_equal(loaded[key].astype(np.float32), value.astype(np.float32))


def test_numpy_savez_bfloat16_comes_back_in_likes_dtype(tmp_path: Path) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    w = np.arange(6, dtype=np.float32).reshape(2, 3).astype(ml_dtypes.bfloat16)
    np.savez(tmp_path / "plain.npz", **{"dense/w": w})
    assert treekit.load(tmp_path / "plain.npz")["dense"]["w"].dtype.kind == "V"  # raw bytes, as numpy reads them
    loaded = treekit.load(tmp_path / "plain.npz", like={"dense": {"w": treekit.ShapeDtype((2, 3), "bfloat16")}})
    assert loaded["dense"]["w"].dtype == w.dtype
    np.testing.assert_array_equal(loaded["dense"]["w"], w)


ORDER = """
import sys
first, second = sys.argv[2].split(",")
__import__(first), __import__(second)
import numpy as np
from flax import nnx
import treekit

class Model(nnx.Module):
    def __init__(self):
        self.w = nnx.Param(np.arange(6.0, dtype=np.float32).reshape(2, 3))
        self.b = nnx.BatchStat(np.zeros(3, np.float32))

state = nnx.state(Model())
treekit.save(sys.argv[1], {"model": state, "step": 3})
try:
    treekit.load(sys.argv[1])
except ValueError as exc:
    print("needs like:", "pass like=" in str(exc))
print(treekit.load(sys.argv[1], like={"model": state, "step": 0})["model"]["w"].value.tolist())
"""


def test_one_tree_makes_one_file_whatever_was_imported_first(tmp_path: Path) -> None:
    pytest.importorskip("flax.nnx")
    import subprocess
    import sys

    outs = []
    for k, order in enumerate(("treekit,flax.nnx", "flax.nnx,treekit")):
        name = tmp_path / f"state{k}.safetensors"
        env = {**os.environ, "JAX_PLATFORMS": "cpu"}
        proc = subprocess.run([sys.executable, "-c", ORDER, str(name), order], capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
        outs.append(proc.stdout)
    assert (tmp_path / "state0.safetensors").read_bytes() == (tmp_path / "state1.safetensors").read_bytes()
    assert outs[0] == outs[1] == "needs like: True\n[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]\n", outs

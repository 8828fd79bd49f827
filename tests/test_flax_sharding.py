"""treekit.sharding and summary on flax trees as flax makes them: the names ``nn.Partitioned``
boxes and nnx Variables carry are each leaf's spec unless a rule says otherwise, and the spec
or sharding takes the box's place (flax's ``nn.get_partition_spec`` / ``nn.get_sharding``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

jax = pytest.importorskip("jax")
nn = pytest.importorskip("flax.linen")
nnx = pytest.importorskip("flax.nnx")
import jax.numpy as jnp  # noqa: E402
from flax.core import meta  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from treekit import summary, tree_leaves  # noqa: E402
from treekit.sharding import ShardingError, check_specs, match_rules, shard, shardings  # noqa: E402
from treekit.sharding._annotations import annotation  # noqa: E402

ONE_DEVICE = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("model",))


class Two(nn.Module):
    """A Dense whose kernel is annotated (None, 'model'), then a plain one."""

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        init = nn.with_partitioning(nn.initializers.lecun_normal(), (None, "model"))
        x = nn.Dense(8, kernel_init=init)(x)
        return nn.Dense(8)(x)


def _linen() -> dict:
    return Two().init(jax.random.PRNGKey(0), jnp.ones((1, 4)))


def _nnx_state() -> nnx.State:
    init = nnx.with_partitioning(nnx.initializers.lecun_normal(), (None, "model"))
    eager = getattr(nnx, "use_eager_sharding", None)  # (newer flax places annotated params at once)
    if eager is None:
        return nnx.state(nnx.Linear(4, 8, kernel_init=init, rngs=nnx.Rngs(0)))
    with eager(False):
        return nnx.state(nnx.Linear(4, 8, kernel_init=init, rngs=nnx.Rngs(0)))


def test_a_partitioned_box_gives_its_names_and_its_place_to_the_spec() -> None:
    specs = match_rules(_linen(), [], default=None)
    assert specs == {
        "params": {"Dense_0": {"kernel": P(None, "model"), "bias": P()}, "Dense_1": {"kernel": P(), "bias": P()}}
    }


def test_a_rule_overrides_the_box_and_no_mix_is_left() -> None:
    specs = match_rules(_linen(), [("Dense_0/kernel", P("model", None))], default=None)
    assert specs["params"]["Dense_0"]["kernel"] == P("model", None)  # the spec itself, not a box around it


def test_unannotated_leaves_still_need_a_rule_or_a_default() -> None:
    with pytest.raises(ShardingError) as caught:
        match_rules(_linen(), [])
    text = str(caught.value)
    assert "['params']['Dense_1']['kernel']" in text and "['params']['Dense_0']['bias']" in text
    assert "['params']['Dense_0']['kernel']" not in text  # its box names its spec


def test_shardings_without_rules_replicate_what_no_box_names_as_flax_does() -> None:
    named = shardings(_linen(), ONE_DEVICE)  # (match_rules itself still asks for a rule or a default)
    assert named["params"]["Dense_0"]["kernel"].spec == P(None, "model")
    assert named["params"]["Dense_0"]["bias"].spec == P() and named["params"]["Dense_1"]["kernel"].spec == P()
    assert jax.tree_util.tree_map(lambda x: x.spec, named) == nn.get_partition_spec(_linen())


def test_nnx_variables_sharding_metadata_is_the_spec() -> None:
    state = _nnx_state()
    specs = match_rules(state, [], default=None)
    assert specs["kernel"] == P(None, "model")
    assert tree_leaves(specs["bias"]) == [P()]  # a Variable without names keeps its place


def test_shardings_and_shard_keep_the_box_around_the_placed_array() -> None:
    params = _linen()
    named = shardings(params, ONE_DEVICE, default=None)
    assert named["params"]["Dense_0"]["kernel"].spec == P(None, "model")
    placed = shard(params, ONE_DEVICE, default=None)
    box = placed["params"]["Dense_0"]["kernel"]
    assert isinstance(box, meta.Partitioned) and box.names == (None, "model")
    assert box.value.sharding.spec == P(None, "model")
    np.testing.assert_array_equal(np.asarray(box.value), np.asarray(params["params"]["Dense_0"]["kernel"].value))


def test_shardings_of_a_boxed_tree_feed_jit() -> None:
    params = _linen()
    out = jax.jit(lambda p: p, out_shardings=shardings(params, ONE_DEVICE, default=None))(params)
    assert out["params"]["Dense_0"]["kernel"].value.sharding.spec == P(None, "model")


def test_a_box_whose_names_do_not_fit_is_named_in_the_check() -> None:
    params = _linen()
    with pytest.raises(ShardingError, match=r"\['params'\]\['Dense_0'\]\['kernel'\]\.value.*divisible by 3"):
        check_specs(params, match_rules(params, [], default=None), {"model": 3})


def test_summary_reads_the_boxes_names_given_a_mesh() -> None:
    table = summary(_linen(), mesh={"model": 4})
    kernel = next(line for line in table.splitlines() if "Dense_0']['kernel']" in line)
    assert "P(None, 'model')" in kernel and kernel.split()[-1] == "32"  # 4 x 8 float32 over 4 devices
    with pytest.raises(TypeError, match="flax's sharding boxes"):
        summary({"w": np.zeros(3)}, mesh={"model": 4})


def test_logically_partitioned_names_are_not_mesh_axes() -> None:
    box = nn.LogicallyPartitioned(jnp.ones((2, 2)), ("embed", "mlp"))
    assert annotation(box) is None
    assert annotation(meta.Partitioned(jnp.ones((2, 2)), ("data", None))) == ("data", None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert match_rules({"w": box}, [], default=None) == {"w": nn.LogicallyPartitioned(P(), ("embed", "mlp"))}


def test_a_rule_may_name_the_box_or_its_leaf() -> None:
    params = _linen()
    for pattern in (r"Dense_0/kernel$", r"Dense_0/kernel/value$", r"\['kernel'\]\.value$"):
        specs = match_rules(params, [(pattern, P("model", None))], default=None)
        assert specs["params"]["Dense_0"]["kernel"] == P("model", None), pattern

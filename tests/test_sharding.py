"""treekit.sharding: rules over key paths, checks that name the path, placement on a device mesh.

The checks and sizes need no devices (a mesh can be ``{'data': 2, 'model': 4}``); placement
runs on a 1-device mesh here and on 8 CPU devices in subprocesses (XLA takes the device count
from ``XLA_FLAGS`` when jax is first imported).
"""

from __future__ import annotations

import itertools
import math
import os
import re
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

jax = pytest.importorskip("jax")
from children import EIGHT_CPUS  # noqa: E402
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from treekit import ShapeDtype, StructureMismatchError, keystr, summary, tree_leaves, tree_leaves_with_path  # noqa: E402
from treekit.sharding import (  # noqa: E402
    ShardingError,
    UnusedRuleWarning,
    check_specs,
    device_bytes,
    match_rules,
    mesh_axes,
    shard,
    shardings,
    spec_str,
)

MESH = {"data": 2, "model": 4}


def mlp(widths: tuple[int, ...] = (8, 16, 16, 4)) -> list[dict[str, ShapeDtype]]:
    return [
        {"weights": ShapeDtype((a, b), "f32"), "biases": ShapeDtype((b,), "f32")} for a, b in itertools.pairwise(widths)
    ]


# -- match_rules --------------------------------------------------------------------------------
NAMES = st.sampled_from(["kernel", "bias", "weights", "biases", "w", "b", "dense", "attn"])
TREES = st.recursive(
    st.just(0),
    lambda kids: st.dictionaries(NAMES, kids, min_size=1, max_size=3) | st.lists(kids, min_size=1, max_size=3),
    max_leaves=12,
)
SPECS = st.sampled_from([P(), P("model"), P(None, "model"), P("data", None), P(("data", "model"))])
PATTERNS = NAMES.map(lambda n: n + "$") | st.sampled_from([r"^0/", r"\[1\]", "nothing"])
RULES = st.lists(st.tuples(PATTERNS, SPECS), max_size=5)


@given(TREES, RULES)
def test_each_leaf_gets_the_first_matching_rule(tree: object, rules: list[tuple[str, object]]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedRuleWarning)
        specs = match_rules(tree, rules, default=P("default"))
    for (path, _), spec in zip(tree_leaves_with_path(tree), tree_leaves(specs)):
        forms = (keystr(path, simple=True, separator="/"), keystr(path))
        first = next((s for pattern, s in rules if any(re.search(pattern, f) for f in forms)), P("default"))
        assert spec == first, (keystr(path), rules)


def test_specs_keep_the_tree_structure_and_both_path_forms_match() -> None:
    params = [{"weights": 0, "biases": 0}, {"weights": 0, "biases": 0}]
    rules = [(r"^1/weights$", P("model", None)), (r"\['biases'\]", None), ("weights", (None, "model"))]
    specs = match_rules(params, rules)
    assert specs == [
        {"weights": P(None, "model"), "biases": P()},
        {"weights": P("model", None), "biases": P()},
    ]


def test_rules_are_a_list_and_a_dict_is_a_tree_of_specs() -> None:
    with pytest.raises(TypeError, match="rules: expected a list of"):
        match_rules({"w": 0}, {"w": P("model")})  # type: ignore[arg-type]
    assert device_bytes({"w": np.zeros(8, np.int8)}, {"w": P("model")}, MESH) == {"w": 2}


def test_unmatched_leaves_are_all_listed_without_a_default() -> None:
    with pytest.raises(ShardingError) as info:
        match_rules({"dense": {"kernel": 0, "bias": 0}, "scale": 0}, [("kernel", P())])
    assert info.value.problems == [
        "tree['dense']['bias']: expected a path some rule matches, got none ('dense/bias')",
        "tree['scale']: expected a path some rule matches, got none ('scale')",
    ]
    assert str(info.value).startswith("2 leaves can't be sharded so:\n  tree['dense']['bias']")


def test_a_rule_that_gives_no_leaf_its_spec_is_warned_about() -> None:
    with pytest.warns(UnusedRuleWarning) as caught:
        match_rules({"kernel": 0}, [("kernel", P()), ("kern", P("model")), ("nothing", P())])
    (warning,) = caught
    assert "rules[1] 'kern' matches 1 leaves, all taken by earlier rules" in str(warning.message)
    assert "rules[2] 'nothing' matches no leaf" in str(warning.message)


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ([("w",)], "rules[0]: expected a (pattern, spec) pair"),
        ([(3, P())], "rules[0]: expected a regular expression (str), got int"),
        ([("w", 3)], "rules[0]: expected a PartitionSpec, None or a tuple of axis names, got int"),
    ],
)
def test_malformed_rules_are_type_errors(rules: list[tuple[object, ...]], message: str) -> None:
    with pytest.raises(TypeError, match=re.escape(message)):
        match_rules({"w": 0}, rules)


# -- check_specs --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            P(None, None, "model"),
            "tree['w']: expected a spec of at most 2 entries for shape (8, 6), got P(None, None, 'model') (3 entries)",
        ),
        (P("modle"), "tree['w']: expected mesh axes among ['data', 'model'], got 'modle' in P('modle')"),
        (P("data", "data"), "tree['w']: expected each mesh axis at most once, got 'data' twice in P('data', 'data')"),
        (
            P(None, "model"),
            "tree['w']: expected dim 1 (size 6) divisible by 4 (mesh axes 'model'=4), got a remainder of 2 "
            "(shape (8, 6), spec P(None, 'model'))",
        ),
        (
            P(("data", "model")),
            "tree['w']: expected dim 0 (size 8) divisible by 8 (mesh axes 'data'=2 x 'model'=4), got"
            " a remainder of 0",
        ),
    ],
)
def test_each_spec_problem_names_the_path(spec: object, message: str) -> None:
    tree = {"w": ShapeDtype((8, 6), "f32")}
    if message.endswith("got a remainder of 0"):  # 8 divides by 8: no problem
        check_specs(tree, {"w": spec}, MESH)
        return
    with pytest.raises(ShardingError) as info:
        check_specs(tree, {"w": spec}, MESH)
    assert info.value.problems == [message]


def test_every_problem_is_reported_at_once_and_a_prefix_spec_tree_works() -> None:
    params = mlp((8, 6, 3))
    with pytest.raises(ShardingError) as info:
        check_specs(params, [{"weights": P(None, "model"), "biases": P("model")}, None], MESH)
    assert [p.split(":")[0] for p in info.value.problems] == ["tree[0]['biases']", "tree[0]['weights']"]
    check_specs(params, [None, None], MESH)  # replicated everywhere


def test_specs_that_do_not_fit_the_tree_name_the_path() -> None:
    message = "tree: expected list of length 2, got list of length 1"
    with pytest.raises(StructureMismatchError, match=re.escape(message)):
        check_specs(mlp((8, 4)), [None, None], MESH)


def test_a_mesh_is_a_jax_mesh_or_a_mapping() -> None:
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("model",))
    assert mesh_axes(mesh) == {"model": 1}
    with pytest.raises(TypeError, match=r"mesh: expected a jax\.sharding\.Mesh or a mapping"):
        mesh_axes(["data"])


# -- device_bytes -------------------------------------------------------------------------------
SHAPES = st.lists(st.sampled_from([1, 2, 4, 8, 16]), min_size=0, max_size=3).map(tuple)


@given(SHAPES, st.data())
def test_device_bytes_split_the_bytes_by_the_devices_along_sharded_dims(
    shape: tuple[int, ...], data: st.DataObject
) -> None:
    entries = [None, "data", "model", ("data", "model")]
    spec = P(*data.draw(st.lists(st.sampled_from(entries), max_size=len(shape))))
    names = [n for e in spec for n in ((e,) if isinstance(e, str) else e or ())]
    if len(set(names)) < len(names):
        return
    leaf = np.zeros(shape, np.float32)
    per_device = device_bytes({"x": leaf}, {"x": spec}, MESH)["x"]
    parts = math.prod(MESH[n] for n in names)
    fits = all(
        dim % math.prod(MESH[n] for n in ((e,) if isinstance(e, str) else e or ())) == 0 for dim, e in zip(shape, spec)
    )
    if fits:
        assert per_device * parts == leaf.nbytes
    else:
        assert per_device * parts >= leaf.nbytes


def test_device_bytes_of_leaves_without_shape_are_zero() -> None:
    assert device_bytes({"name": "relu", "w": np.zeros(4, np.int8)}, None, MESH) == {"name": 0, "w": 4}


def test_spec_str_is_the_same_in_every_jax_version() -> None:
    assert spec_str(P(("data", "model"), None)) == "P(('data', 'model'), None)"


# -- summary's sharding columns -----------------------------------------------------------------
def test_summary_plans_per_device_bytes_from_specs_and_a_mesh() -> None:
    params = {"w": ShapeDtype((1024, 4096), "f32"), "b": ShapeDtype((4096,), "bf16"), "act": "relu"}
    table = summary(params, shardings={"w": P(None, "model"), "b": P("model"), "act": None}, mesh=MESH)
    assert table.splitlines() == [
        "path     shape         dtype          size       bytes  sharding             bytes/device",
        "['act']  -             str               -           -  -                               -",
        "['b']    (4096,)       bfloat16      4,096       8,192  P('model')                  2,048",
        "['w']    (1024, 4096)  float32   4,194,304  16,777,216  P(None, 'model')        4,194,304",
        "total    2 arrays                4,198,400  16,785,408  mesh data=2,model=4     4,196,352"
        "  (16.0 MiB; 4.0 MiB per device)",
        "not counted (not arrays): ['act'] (str)",
    ]


def test_summary_of_unsharded_trees_has_no_sharding_columns() -> None:
    tree = {"a": jax.numpy.ones(3), "b": np.ones(3)}  # one device's sharding, and none
    assert "sharding" not in summary(tree)


@given(SHAPES, st.data())
def test_summary_per_device_bytes_are_device_bytes(shape: tuple[int, ...], data: st.DataObject) -> None:
    entries = data.draw(st.lists(st.sampled_from([None, "data", "model"]), max_size=len(shape), unique=True))
    tree = {"x": np.zeros(shape, np.float32), "y": np.zeros((8, *shape), np.int8)}
    specs = {"x": P(*entries), "y": P("data")}
    rows = [line.split("  ") for line in summary(tree, shardings=specs, mesh=MESH).splitlines()[1:]]
    cells = [int(row[-1].replace(",", "")) for row in rows[:2]] + [int(rows[2][-2].replace(",", ""))]
    want = device_bytes(tree, specs, MESH)
    assert cells == [want["x"], want["y"], want["x"] + want["y"]]


def test_summary_reads_the_shardings_of_placed_arrays_and_shardings_override_them() -> None:
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("data", "model"))
    tree = {"w": np.ones((4, 2), np.float32), "n": np.int32(0)}
    placed = shard(tree, mesh, [("w", P("data", "model"))], default=None)
    assert summary(placed).splitlines()[1:] == [
        "['n']  ()      int32       1      4  P()                             4",
        "['w']  (4, 2)  float32     8     32  P('data', 'model')             32",
        "total  2 arrays            9     36  mesh data=1,model=1            36  (36 B; 36 B per device)",
    ]
    planned = shardings(placed, {"data": 2, "model": 2}, [("w", P("data", "model"))], default=None)
    assert summary(placed, shardings=planned).splitlines()[2:] == [
        "['w']  (4, 2)  float32     8     32  P('data', 'model')              8",
        "total  2 arrays            9     36  mesh data=2,model=2            12  (36 B; 12 B per device)",
    ]


def test_summary_groups_specs_and_sums_per_device_bytes() -> None:
    params = mlp()
    specs = match_rules(params, [("weights", P(None, "model"))], default=None)
    table = summary(params, shardings=specs, mesh=MESH, depth=1)
    assert [line.split("  ")[0] for line in table.splitlines()] == ["path", "[0]", "[1]", "[2]", "total"]
    assert table.splitlines()[1].split()[-2:] == ["mixed", "192"]  # f32: 8 x 16 / 4 of the weights and 16 biases
    assert summary(params, shardings=P(), mesh=MESH, depth=1).splitlines()[1].split()[-2:] == ["P()", "576"]


def test_summary_shardings_follow_is_leaf() -> None:
    tree = {"pair": (np.zeros(8, np.float32), np.zeros(8, np.float32))}
    table = summary(tree, is_leaf=lambda x: isinstance(x, tuple), shardings={"pair": P("model")}, mesh=MESH)
    assert table.splitlines()[1].startswith("['pair']  -")


NO_MESH = "expected a NamedSharding or mesh=, got P('model') without a mesh"
NOT_A_SPEC = "expected a NamedSharding, a PartitionSpec or None, got"


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"shardings": {"w": P("model")}}, TypeError, f"shardings['w']: {NO_MESH}"),
        ({"shardings": {"w": 3}, "mesh": MESH}, TypeError, f"shardings['w']: {NOT_A_SPEC} 3"),
        ({"shardings": {"w": "model"}, "mesh": MESH}, TypeError, f"shardings['w']: {NOT_A_SPEC} 'model'"),
        (
            {"mesh": MESH},
            TypeError,
            "mesh: expected None without shardings= or leaves in flax's sharding boxes (it lays out their "
            "PartitionSpecs), got {'data': 2, 'model': 4}",
        ),
        (
            {"shardings": [P()], "mesh": MESH},
            StructureMismatchError,
            "shardings: expected list of length 1, got dict with keys ['w']",
        ),
    ],
)
def test_summary_sharding_errors(kwargs: dict[str, object], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=re.escape(message)):
        summary({"w": np.zeros(8)}, **kwargs)  # type: ignore[arg-type]


# -- placement ----------------------------------------------------------------------------------
def test_shard_and_shardings_on_one_device() -> None:
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("data", "model"))
    params = {"dense": {"kernel": np.ones((4, 2), np.float32), "bias": np.zeros(2, np.float32)}, "step": np.int32(0)}
    rules = [("kernel", P("data", "model")), ("bias", P("model"))]
    tree = shardings(params, mesh, rules, default=None)
    assert tree["dense"]["kernel"].spec == P("data", "model") and tree["step"].spec == P()
    placed = shard(params, mesh, rules, default=None)
    assert placed["dense"]["kernel"].sharding.spec == P("data", "model")
    np.testing.assert_array_equal(placed["dense"]["kernel"], params["dense"]["kernel"])
    again = shard(params, mesh, tree)  # a tree of NamedSharding works as specs
    assert again["dense"]["bias"].sharding == tree["dense"]["bias"]


def test_none_nodes_stay_none_in_the_shardings_tree() -> None:
    # (a checkpoint's metadata with its non-array leaves made None: restore(rules=...)'s tree)
    tree = {"a": None, "w": ShapeDtype((4, 8), "float32"), "b": [None, ShapeDtype((8,), "float32")]}
    for specs in ([("w", P(None, "model"))], {"a": None, "w": P(None, "model"), "b": P()}):
        got = shardings(tree, MESH, specs, default=P()) if isinstance(specs, list) else shardings(tree, MESH, specs)
        assert got["a"] is None and got["b"][0] is None
        assert got["w"].spec == P(None, "model") and got["b"][1].spec == P()


def test_shardings_plan_on_an_abstract_mesh_and_shard_needs_devices() -> None:
    tree = shardings({"w": ShapeDtype((8, 12), "f32")}, MESH, [("w", P("data", "model"))])
    assert tree["w"].shard_shape((8, 12)) == (4, 3)
    with pytest.raises(TypeError, match=r"mesh: expected a jax\.sharding\.Mesh of devices"):
        shard({"w": np.ones((8, 12))}, MESH, [("w", P("data", "model"))])


def test_shardings_check_before_placing() -> None:
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("data",))
    with pytest.raises(ShardingError, match=re.escape("tree['w']: expected mesh axes among ['data'], got 'model'")):
        shardings({"w": np.ones((4,))}, mesh, [("w", P("model"))])


EIGHT = {**os.environ, **EIGHT_CPUS}


def _run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args] if not code else [sys.executable, "-c", textwrap.dedent(code)],
        env=EIGHT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_sharded_training_on_eight_devices_equals_one_device() -> None:
    proc = _run(
        """
        import jax, numpy as np
        from jax.sharding import Mesh, PartitionSpec as P
        from treekit.cli import _demo_mesh
        from treekit.params import adam, init_mlp_params, tree_cast
        from treekit.sharding import shard

        assert len(jax.devices()) == 8
        rng = np.random.default_rng(1)
        params = tree_cast(init_mlp_params([2, 16, 16, 2], rng), np.float32)
        x = rng.normal(size=(32, 2)).astype(np.float32)
        y = x ** 2
        mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ('data', 'model'))
        placed = shard(params, mesh, _demo_mesh.mlp_rules(3, ('data', 'model')), default=None)
        shapes = {s.data.shape for s in placed[1]['weights'].addressable_shards}
        assert shapes == {(16, 4)}, shapes
        mesh_sizes = {'data': 2, 'model': 4}
        losses, worst, table = _demo_mesh.train(params, adam(1e-2), x, y, 30, mesh_sizes, lambda k, l: None)
        single = _demo_mesh.reference(params, adam(1e-2), x, y, 30)
        np.testing.assert_allclose(losses, single, rtol=1e-4)
        assert worst < 1e-4, worst
        assert losses[-1] < losses[0] / 2
        print('ok')
        """
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok")


def test_the_demo_on_eight_devices() -> None:
    proc = _run("", "-m", "treekit", "demo", "--devices", "8", "--mesh", "data=2,model=4", "--steps", "100")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "sharded over mesh data=2, model=4" in out
    row = r"\['params'\]\[1\]\['weights'\]\s+\(128, 128\)\s+float32\s+16,384\s+65,536\s+P\(None, 'model'\)\s+16,384\n"
    assert re.search(row, out), out
    total = r"total\s+19 arrays\s+50,692\s+202,768\s+mesh data=2,model=4\s+50,704  \(198.0 KiB; 49.5 KiB per device\)"
    assert re.search(total, out), out
    assert "each step vs the same step on one device" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--devices", "4", "--mesh", "data=2,model=4"], "--devices 4 but --mesh has 8 devices"),
        (["--mesh", "data=2,pipeline=2"], "expected axes like data=2,model=4"),
        (["--mesh", "data=2", "--backend", "numpy"], "need the jax backend"),
    ],
)
def test_demo_mesh_usage_errors(args: list[str], message: str) -> None:
    proc = _run("", "-m", "treekit", "demo", "--steps", "2", *args)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_one_empty_spec_for_the_whole_tree_is_a_spec_not_an_empty_rule_list() -> None:
    tree = {"w": ShapeDtype((4, 2), "f32"), "b": ShapeDtype((2,), "f32")}
    check_specs(tree, P(), MESH)  # replicated everywhere: nothing to report
    assert device_bytes(tree, P(), MESH) == {"w": 32, "b": 8}
    with pytest.raises(ShardingError, match="expected a path some rule matches"):
        check_specs(tree, [], MESH)

"""What 0.2 users import and store still works after the move to subpackages (issue 39): every
public name of every public module, pickles of a TreeDef, key paths and specs, and checkpoint
files written by treekit 0.2 (tests/data/treekit-0.2/, made with that release), whose records
name classes by the module paths of the flat layout (``treekit._partial:Partial``)."""

from __future__ import annotations

import importlib
import pickle
import subprocess
import sys
from collections import OrderedDict, defaultdict
from pathlib import Path

import pytest

import treekit

DATA = Path(__file__).parent / "data" / "treekit-0.2"

# Every name the public modules of treekit 0.2 gave (dir(), less modules and the typing names
# and `annotations` they imported for themselves): __all__, and what they imported for their own
# use and users may have taken from them.
PUBLIC = {
    "treekit": """
        ANY DictKey Difference FlattenedIndexKey GetAttrKey KeyEntry KeyPath NON_ARRAY Partial PickleRefused
        PyTree PyTreeDef SequenceKey ShapeDtype SpecMismatchError SpecWildcard StructureAssertionError
        StructureMismatchError TransposeMismatchError TreeCycleError TreeDef TreeDiff UserKey View all_leaves
        assert_rank assert_same_structure assert_shape assert_tree_all_finite assert_tree_no_nones
        assert_tree_shapes assert_trees_all_close assert_trees_all_equal backend check_spec combine
        default_registry flatten_one_level flatten_one_level_with_keys format_tree is_array is_inexact_array
        is_tree_node keystr load load_leaf metadata partition register_dataclass register_pytree_node
        register_pytree_node_class register_pytree_with_keys register_pytree_with_keys_class register_static
        same_structure save static summary tree_add tree_add_scale tree_all tree_allclose tree_at tree_axpy
        tree_batch_shape tree_broadcast tree_bytes tree_cast tree_cast_like tree_clip tree_conj tree_diff
        tree_div tree_dtype tree_flatten tree_flatten_with_path tree_full_like tree_get tree_leaves
        tree_leaves_with_path tree_map tree_map_with_path tree_max tree_min tree_mul tree_norm tree_ones_like
        tree_random_like tree_real tree_reduce tree_reduce_associative tree_scale tree_set tree_size tree_spec
        tree_stack tree_structure tree_sub tree_sum tree_transpose tree_unflatten tree_unstack tree_vdot
        tree_where tree_zeros_like treedef_children treedef_from_jax treedef_is_leaf treedef_is_strict_leaf
        treedef_to_jax treedef_tuple view
    """,
    "treekit.tree": """
        all all_leaves broadcast flatten flatten_with_path leaves leaves_with_path map map_with_path reduce
        reduce_associative static structure transpose unflatten
    """,
    "treekit.optim": """
        EmptyState GradientTransformation MaskedNode MaskedState ScalarOrSchedule ScaleByAdamState
        ScaleByScheduleState TraceState WeightDecaySchedule adam adamw add_decayed_weights apply_updates chain
        clip_by_global_norm describe_leaf dtype_of flatten identity keystr masked namespace safe_increment
        scale scale_by_adam scale_by_learning_rate scale_by_schedule sgd trace tree_bias_correction
        tree_leaves_with_path tree_map_params tree_update_infinity_moment tree_update_moment
        tree_update_moment_per_elem_norm
    """,
    "treekit.params": """
        GradientTransformation Path adam adamw apply_updates chain clip_by_global_norm combine flatten_dict
        init_mlp_params is_array is_inexact_array mlp_forward mse_loss mse_loss_and_grad partition sgd
        tree_add tree_add_scale tree_allclose tree_at tree_axpy tree_batch_shape tree_bias_correction
        tree_bytes tree_cast tree_cast_like tree_clip tree_conj tree_div tree_dtype tree_full_like tree_get
        tree_map_params tree_max tree_min tree_mul tree_norm tree_ones_like tree_random_like tree_real
        tree_scale tree_set tree_size tree_split_key_like tree_stack tree_sub tree_sum tree_unstack
        tree_unwrap_random_key_data tree_update_infinity_moment tree_update_moment
        tree_update_moment_per_elem_norm tree_vdot tree_where tree_zeros_like unflatten_dict
    """,
    "treekit.schedules": """
        Schedule constant_schedule cosine_decay_schedule exponential_decay linear_schedule namespace
        warmup_cosine_decay_schedule
    """,
    "treekit.sharding": """
        KeyPath PyTree Rules ShapeDtype ShardingError UnusedRuleWarning annotation box_level broadcast
        check_specs device_bytes device_nbytes entry_axes flatten keystr match_rules mesh_axes shard shardings
        spec_str
    """,
    "treekit.testing": """
        BUILTIN_NODE_TYPES BrokenLaw LAWS NodeMaker NodeTypeLawError NodeTypeReport Pair array_strategy
        array_trees arrays_like check_node_type key_paths param_trees same_structure_trees trees trees_like
    """,
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_every_public_name_of_0_2_imports_from_the_same_place(module: str) -> None:
    names = PUBLIC[module].split()
    code = f"from {module} import {', '.join(names)}"
    # A fresh process: names given on first use (PEP 562) must come without any other import first.
    subprocess.run([sys.executable, "-c", code], check=True)
    loaded = importlib.import_module(module)
    assert [name for name in names if not hasattr(loaded, name)] == []


def test_the_public_names_are_the_same_objects_everywhere() -> None:
    from treekit import optim, params, schedules, sharding, tree

    assert tree.map is treekit.tree_map and params.adam is optim.adam
    assert schedules.linear_schedule is optim.linear_schedule
    assert sharding.ShapeDtype is treekit.ShapeDtype
    assert treekit.tree_stack is params.tree_stack


def test_pickles_written_by_0_2_load() -> None:
    with open(DATA / "structures.pickle", "rb") as f:
        saved = pickle.load(f)
    tree = {"a": [1, (2.5, None)], "b": OrderedDict(z=1, y=2), "c": defaultdict(list, k=[3])}
    leaves, treedef = treekit.tree_flatten(tree)
    assert saved["treedef"] == treedef and type(saved["treedef"]) is treekit.TreeDef
    assert saved["leaves"] == leaves
    assert saved["paths"] == [path for path, _ in treekit.tree_flatten_with_path(tree)[0]]
    assert saved["spec"]["w"] == treekit.ShapeDtype(("batch", 3), "f32")
    assert saved["spec"]["any"] is treekit.ANY and saved["spec"]["misc"] is treekit.NON_ARRAY


def test_an_old_module_path_is_the_module_now_in_its_subpackage() -> None:
    import treekit._treedef  # the 0.2 path a pickle names

    from treekit.core import _treedef

    assert treekit._treedef is _treedef
    assert _treedef.__spec__ is not None and _treedef.__spec__.name == "treekit.core._treedef"
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("treekit._no_such_module")


@pytest.mark.parametrize("name", ["checkpoint.npz", "checkpoint.safetensors"])
def test_checkpoints_written_by_0_2_load(name: str) -> None:
    np = pytest.importorskip("numpy")
    from treekit import optim

    loaded = treekit.load(DATA / name)
    assert loaded["step"] == 7
    np.testing.assert_array_equal(loaded["params"]["w"], np.arange(3, dtype=np.float32))
    adam_state, empty = loaded["opt_state"]
    assert type(adam_state) is optim.ScaleByAdamState and type(empty) is optim.EmptyState
    assert int(adam_state.count) == 0
    assert type(loaded["f"]) is treekit.Partial and loaded["f"](np.float32(3.0)) == 6.0

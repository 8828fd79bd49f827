"""Fuzz (issue 13): every public function of treekit fed random garbage.

Each class of failure (hostile objects, broken flatten functions, exploding keys, cycles,
deep trees, None and empty containers, well-behaved registered classes, numpy arrays,
garbage arguments) is one hypothesis run in a child process (a crash there fails the
test instead of the run; a call that hangs is stopped by ``faulthandler`` with its stack;
memory is capped at 2 GiB). Every example calls one public function, drawn from
``CALLS``, which must cover every public callable (``test_every_public_function_is_fuzzed``).
A call may return, or raise one of ``ALLOWED`` with a message; the user's own exception
(:class:`garbage.Boom`) passes through. Anything else fails: RecursionError, MemoryError,
SystemError, StopIteration, AttributeError, ... The child also checks, per example, that
the plain and with-path walks agree and that the native core gives what the pure core gives.

``TREEKIT_FUZZ_EXAMPLES`` sets the examples per function and class (CI: 3, so about 330 per
class; deep trees: 1); ``TREEKIT_FUZZ_DEEP`` the depth of deep trees (CI: 2,000).
"""

from __future__ import annotations

import faulthandler
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
import warnings
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("hypothesis")
np = pytest.importorskip("numpy")

from garbage import Boom, Garbage  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import treekit  # noqa: E402
import treekit.core._registry  # noqa: E402
import treekit.optim  # noqa: E402
import treekit.params  # noqa: E402
import treekit.tree  # noqa: E402
from treekit import params as P  # noqa: E402
from treekit.core._build import interpret  # noqa: E402
from treekit.core._core import NATIVE  # noqa: E402
from treekit.core._traverse import pure_flatten  # noqa: E402

tk: Any = treekit
optim: Any = treekit.optim
HERE = Path(__file__).resolve().parent

CLASSES = ("objects", "flatten", "keys", "cycles", "deep", "empty", "registered", "numpy", "arguments")
PER_FUNCTION = int(os.environ.get("TREEKIT_FUZZ_EXAMPLES", "3"))  # per public function and class
DEEP = int(os.environ.get("TREEKIT_FUZZ_DEEP", "2000"))
PER_CALL_S = 60  # a walk that reaches the depth limit (250,000 fresh nodes) takes ~10 s on a loaded machine

# What a call may raise: a wrong input's TypeError/ValueError/KeyError/IndexError (treekit's
# StructureMismatchError and TreeCycleError are ValueErrors), a leaf's own arithmetic error
# (1 / 0 on int leaves: what the leaf operation raises), and the user's own exception.
ALLOWED = (TypeError, ValueError, KeyError, IndexError, ArithmeticError, Boom)


# -- every public callable ---------------------------------------------------------------------
SKIP = {
    # classes that hold data or name a type: built by the functions fuzzed, not tree functions
    **dict.fromkeys(
        [
            "treekit.DictKey", "treekit.FlattenedIndexKey", "treekit.GetAttrKey", "treekit.SequenceKey",
            "treekit.KeyEntry", "treekit.UserKey", "treekit.KeyPath", "treekit.PyTree", "treekit.Difference",
            "treekit.TreeDiff", "treekit.ShapeDtype", "treekit.params.Path", "treekit.optim.ScalarOrSchedule",
            "treekit.params.GradientTransformation", "treekit.optim.EmptyState", "treekit.optim.MaskedNode",
            "treekit.optim.MaskedState", "treekit.optim.ScaleByAdamState", "treekit.optim.ScaleByScheduleState",
            "treekit.optim.TraceState", "treekit.optim.WeightDecaySchedule", "treekit.View",
            "treekit.SpecWildcard", "treekit.ANY", "treekit.NON_ARRAY", "treekit.params.NamedTupleKey",
        ],
        "a data or type-alias class, not a tree function",
    ),
    **dict.fromkeys(
        [
            "treekit.StructureMismatchError", "treekit.TreeCycleError", "treekit.PickleRefused", "treekit.MissingExtra",
            "treekit.SpecMismatchError", "treekit.StructureAssertionError", "treekit.TransposeMismatchError",
            "treekit.StructureKeyError",
        ],
        "an exception class (what the fuzzed functions raise)",
    ),
    "treekit.tree": "a module; its names are fuzzed under treekit.tree.*",
    "treekit.backend": "takes no input",
    "treekit.block_until_chexify_assertions_complete": "takes no input",
    "treekit.chexify": "wraps a function for jax.jit, takes no tree (test_chexify.py tests it)",
    "treekit.static": "a dataclasses.field wrapper; the dataclass registrations it feeds are fuzzed",
}


def public_callables() -> dict[str, Any]:
    """``treekit``, ``treekit.tree``, ``treekit.params``, ``treekit.optim`` public names (each
    object once, under the first name met) and TreeDef's public methods and properties."""
    out: dict[str, Any] = {}
    seen: set[int] = set()
    for module in (treekit, treekit.tree, treekit.params, treekit.optim):
        for name in module.__all__:
            obj = getattr(module, name)
            if id(obj) not in seen:
                seen.add(id(obj))
                out[f"{module.__name__}.{name}"] = obj
    for name, _ in inspect.getmembers(treekit.TreeDef):
        if not name.startswith("_"):
            out[f"treekit.TreeDef.{name}"] = getattr(treekit.TreeDef, name)
    return out


def _opt_step(g: Garbage, opt: Any) -> Any:
    """An optimizer built from garbage, run one step on the tree."""
    state = opt.init(g.tree)
    return opt.update(g.other(), state, g.pick(g.tree, None, g.other()))


def _roundtrip(tree: Any) -> Any:
    leaves, treedef = tk.tree_flatten(tree)
    return tk.tree_unflatten(treedef, leaves)


def _save_load(g: Garbage) -> Any:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / g.pick("tree.npz", "tree.safetensors")
        tk.save(path, g.tree)
        return tk.load(path, like=g.pick(None, g.tree, g.other()), mmap=g.pick(False, True))


def _manager(g: Garbage) -> Any:
    """A garbage tree (and garbage metrics) through a CheckpointManager, async or not, and back."""
    with tempfile.TemporaryDirectory() as tmp:
        with tk.CheckpointManager(tmp, async_save=g.pick(False, True), best=g.pick(None, "loss")) as manager:
            manager.save(g.pick(0, 7), g.tree, metrics=g.pick(None, {"loss": g.scalar()}, {"loss": g.tree}))
            manager.wait()
            return manager.restore(like=g.pick(None, g.tree)), manager.best_step()


def _metadata_and_one_leaf(g: Garbage) -> Any:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tree.safetensors"
        tk.save(path, g.tree)
        paths = [tk.keystr(p) for p, leaf in tk.tree_leaves_with_path(g.tree) if hasattr(leaf, "dtype")]
        return tk.metadata(path), tk.load_leaf(path, g.pick(*paths, "['missing']", 3, None))


def _register(g: Garbage, how: Callable[[type], Any], body: dict[str, Any] | None = None) -> Any:
    """Register a fresh class (or garbage where a class goes) ``how``; flatten an instance."""
    cls: Any = g.pick(type("New", (), dict(body or {})), type("New", (), dict(body or {})), None, "cls", list)
    if isinstance(cls, type) and cls.__name__ == "New":
        g.registered.append(cls)
    how(cls)
    if isinstance(cls, type) and cls.__name__ == "New":
        node = cls.__new__(cls)
        node.__dict__.update(x=g.tree, y=1, children=[g.tree])
        return _roundtrip([node])
    return None


def _treedef(g: Garbage) -> Any:
    treedef = g.treedef()
    if type(treedef) is not treekit.TreeDef:
        treedef = treekit.tree_structure([1, (2, 3)])
    return treedef


def _methods(g: Garbage) -> dict[str, Any]:
    """A class body with tree_flatten / tree_flatten_with_keys / tree_unflatten drawn from garbage."""
    flatten = g.pick(lambda self: ((self.x,), None), lambda self: self.x, g.f())
    keyed = g.pick(lambda self: (((treekit.GetAttrKey("x"), self.x),), None), lambda self: ((self.x,), None), g.f())
    unflatten = g.pick(classmethod(lambda cls, d, c: cls.__new__(cls)), g.f(), None)
    return {"tree_flatten": flatten, "tree_flatten_with_keys": keyed, "tree_unflatten": unflatten}


def _view(g: Any) -> tuple[str, str]:
    made = tk.view(
        g.tree,
        depth=g.pick(None, 0, 1, -1),
        stats=g.pick(False, True),
        max_children=g.pick(100, 1, 0),
        max_rows=g.pick(2000, 1, 0),
        **g.is_leaf_kw(),
    )
    return made._repr_html_(), str(made)


CALLS: dict[str, Callable[[Garbage], Any]] = {
    "treekit.Partial": lambda g: _roundtrip(tk.Partial(g.f(), g.tree, k=g.other())),
    # the class (treekit.TreeDef too); its methods are fuzzed one by one below
    "treekit.PyTreeDef": lambda g: tk.PyTreeDef(g.pick(((None, None, 0, 1, 1),), (), None, [g.tree])).unflatten([1]),
    "treekit.all_leaves": lambda g: tk.all_leaves(g.pick(g.leaves(), g.tree, [g.tree]), **g.is_leaf_kw()),
    "treekit.assert_rank": lambda g: tk.assert_rank(g.tree, g.pick(0, 1, {0, 1, 2}, g.shapes_like(), "x", -1)),
    "treekit.assert_shape": lambda g: tk.assert_shape(g.tree, g.pick((), (2,), (..., {1, 3}), g.shapes_like(), "x")),
    "treekit.assert_tree_all_finite": lambda g: tk.assert_tree_all_finite(g.tree, **g.is_leaf_kw()),
    "treekit.assert_tree_no_nones": lambda g: tk.assert_tree_no_nones(g.tree),
    "treekit.assert_same_structure": lambda g: tk.assert_same_structure(g.tree, g.other(), **g.is_leaf_kw()),
    "treekit.assert_tree_shapes": lambda g: tk.assert_tree_shapes(g.tree, g.shapes_like()),
    "treekit.assert_trees_all_close": lambda g: tk.assert_trees_all_close(
        g.tree, g.other(), rtol=g.pick(1e-6, g.scalar())
    ),
    "treekit.assert_trees_all_equal": lambda g: tk.assert_trees_all_equal(g.tree, g.other(), **g.is_leaf_kw()),
    "treekit.assert_trees_all_close_ulp": lambda g: tk.assert_trees_all_close_ulp(
        g.tree, g.other(), maxulp=g.pick(0, 1, 4)
    ),
    "treekit.assert_tree_is_on_host": lambda g: tk.assert_tree_is_on_host(g.tree, allow_cpu_device=g.pick(True, False)),
    "treekit.assert_tree_is_on_device": lambda g: tk.assert_tree_is_on_device(g.tree, platform=g.pick("cpu", "tpu")),
    "treekit.assert_tree_is_sharded": lambda g: tk.assert_tree_is_sharded(g.tree, devices=[]),
    "treekit.assert_tree_has_only_ndarrays": lambda g: tk.assert_tree_has_only_ndarrays(g.tree),
    "treekit.assert_tree_shape": lambda g: tk.assert_tree_shape(g.tree, g.pick((), (2,), (None, 2), (...,))),
    "treekit.assert_tree_shape_prefix": lambda g: tk.assert_tree_shape_prefix(g.tree, g.pick((), (2,), (1, 2))),
    "treekit.assert_tree_shape_suffix": lambda g: tk.assert_tree_shape_suffix(g.tree, g.pick((), (2,), (1, 2))),
    "treekit.assert_trees_all_equal_dtypes": lambda g: tk.assert_trees_all_equal_dtypes(g.tree, g.other()),
    "treekit.assert_trees_all_equal_shapes": lambda g: tk.assert_trees_all_equal_shapes(g.tree, g.other()),
    "treekit.assert_trees_all_equal_shapes_and_dtypes": lambda g: tk.assert_trees_all_equal_shapes_and_dtypes(
        g.tree, g.other()
    ),
    "treekit.assert_trees_all_equal_sizes": lambda g: tk.assert_trees_all_equal_sizes(g.tree, g.other()),
    "treekit.assert_trees_all_equal_structs": lambda g: tk.assert_trees_all_equal_structs(g.tree, g.other()),
    "treekit.check_spec": lambda g: tk.check_spec(g.tree, g.spec()),
    "treekit.combine": lambda g: tk.combine(g.tree, g.other()),
    "treekit.flatten_one_level": lambda g: tk.flatten_one_level(g.tree),
    "treekit.flatten_one_level_with_keys": lambda g: tk.flatten_one_level_with_keys(g.tree),
    "treekit.format_tree": lambda g: tk.format_tree(
        g.tree, max_items=g.pick(6, 0, -1, 1), max_depth=g.pick(None, 0, 2, -1), **g.is_leaf_kw()
    ),
    "treekit.is_array": lambda g: tk.is_array(g.value()),
    "treekit.is_inexact_array": lambda g: tk.is_inexact_array(g.value()),
    "treekit.is_array_like": lambda g: tk.is_array_like(g.value()),
    "treekit.is_inexact_array_like": lambda g: tk.is_inexact_array_like(g.value()),
    "treekit.is_tree_node": lambda g: tk.is_tree_node(g.pick(type(g.tree), g.tree, g.value())),
    "treekit.keystr": lambda g: tk.keystr(g.keypath(), simple=g.pick(False, True), separator=g.pick("", "/", 0)),
    "treekit.load": _save_load,
    "treekit.CheckpointManager": _manager,
    "treekit.load_leaf": _metadata_and_one_leaf,
    "treekit.metadata": _metadata_and_one_leaf,
    "treekit.save": _save_load,
    "treekit.partition": lambda g: tk.partition(g.tree, g.pick(g.f(), tk.is_array, g.other(), lambda x: True)),
    "treekit.register_dataclass": lambda g: _register(
        g, lambda c: tk.register_dataclass(c, g.pick(["x"], None, "x", [1]), g.pick(["y"], None, [], ["x"]))
    ),
    "treekit.register_pytree_node": lambda g: _register(
        g, lambda c: tk.register_pytree_node(c, g.f(), g.f(), g.pick(None, g.f()))
    ),
    "treekit.register_pytree_node_class": lambda g: _register(g, tk.register_pytree_node_class, _methods(g)),
    "treekit.register_pytree_with_keys": lambda g: _register(
        g, lambda c: tk.register_pytree_with_keys(c, g.f(), g.f(), g.pick(None, g.f()))
    ),
    "treekit.register_pytree_with_keys_class": lambda g: _register(g, tk.register_pytree_with_keys_class, _methods(g)),
    "treekit.register_static": lambda g: _register(g, tk.register_static),
    "treekit.same_structure": lambda g: tk.same_structure(g.tree, g.other(), **g.is_leaf_kw()),
    "treekit.summary": lambda g: tk.summary(
        g.tree, depth=g.pick(None, 0, 1, -1), stats=g.pick(False, True), format=g.pick("text", "markdown", "x")
    ),
    "treekit.view": lambda g: _view(g),
    "treekit.tree_add": lambda g: tk.tree_add(g.tree, g.other()),
    "treekit.tree_add_scale": lambda g: tk.tree_add_scale(g.tree, g.scalar(), g.other()),
    "treekit.tree_all": lambda g: tk.tree_all(g.tree, **g.is_leaf_kw()),
    "treekit.tree_allclose": lambda g: tk.tree_allclose(g.tree, g.other()),
    "treekit.tree_at": lambda g: tk.tree_at(
        g.pick(g.path(), lambda t: t, lambda t: t[0], g.f()), g.tree, g.value()
    ),
    "treekit.tree_axpy": lambda g: tk.tree_axpy(g.scalar(), g.tree, g.other()),
    "treekit.tree_batch_shape": lambda g: tk.tree_batch_shape(g.tree, g.pick((), (2,), None, "x", (-1,))),
    "treekit.tree_broadcast": lambda g: tk.tree_broadcast(g.other(), g.tree, **g.is_leaf_kw()),
    "treekit.tree_bytes": lambda g: tk.tree_bytes(g.tree),
    "treekit.tree_cast": lambda g: tk.tree_cast(g.tree, g.dtype()),
    "treekit.tree_cast_like": lambda g: tk.tree_cast_like(g.tree, g.other()),
    "treekit.tree_clip": lambda g: tk.tree_clip(g.tree, g.scalar(), g.scalar()),
    "treekit.tree_conj": lambda g: tk.tree_conj(g.tree),
    "treekit.tree_diff": lambda g: tk.tree_diff(g.tree, g.other(), values=g.pick(False, True)),
    "treekit.tree_div": lambda g: tk.tree_div(g.tree, g.other()),
    "treekit.tree_dtype": lambda g: tk.tree_dtype(g.tree, g.pick(None, "promote", "highest", "lowest", "x")),
    "treekit.tree_equal": lambda g: tk.tree_equal(g.tree, g.other(), typematch=g.pick(False, True)),
    "treekit.tree_check": lambda g: tk.tree_check(g.pick(g.tree, [g.tree, g.tree], {"a": g.tree, "b": [g.tree]}),
                                                  **g.is_leaf_kw()),
    "treekit.tree_flatten": lambda g: tk.tree_flatten(g.tree, **g.is_leaf_kw()),
    "treekit.tree_flatten_with_path": lambda g: tk.tree_flatten_with_path(
        g.tree, **g.is_leaf_kw(), is_leaf_takes_path=g.pick(False, True)
    ),
    "treekit.tree_full_like": lambda g: tk.tree_full_like(g.tree, g.scalar(), g.dtype()),
    "treekit.tree_get": lambda g: tk.tree_get(g.tree, g.path(), sep=g.sep()),
    "treekit.tree_leaves": lambda g: tk.tree_leaves(g.tree, **g.is_leaf_kw()),
    "treekit.tree_leaves_with_path": lambda g: tk.tree_leaves_with_path(
        g.tree, **g.is_leaf_kw(), is_leaf_takes_path=g.pick(False, True)
    ),
    "treekit.tree_map": lambda g: tk.tree_map(g.f(), g.tree, *g.pick((), (g.other(),)), **g.is_leaf_kw()),
    "treekit.tree_map_with_path": lambda g: tk.tree_map_with_path(
        g.f(), g.tree, *g.pick((), (g.other(),)), **g.is_leaf_kw(), is_leaf_takes_path=g.pick(False, True)
    ),
    "treekit.tree_max": lambda g: tk.tree_max(g.tree),
    "treekit.tree_min": lambda g: tk.tree_min(g.tree),
    "treekit.tree_mul": lambda g: tk.tree_mul(g.tree, g.other()),
    "treekit.tree_norm": lambda g: tk.tree_norm(g.tree, g.pick(None, 1, 2, "inf", "x", 0), squared=g.pick(False, True)),
    "treekit.tree_ones_like": lambda g: tk.tree_ones_like(g.tree, g.dtype()),
    "treekit.tree_random_like": lambda g: tk.tree_random_like(g.rng(), g.tree, g.pick("normal", "uniform", "x", g.f())),
    "treekit.tree_real": lambda g: tk.tree_real(g.tree),
    "treekit.tree_reduce": lambda g: tk.tree_reduce(g.f(), g.tree, *g.pick((), (0,)), **g.is_leaf_kw()),
    "treekit.tree_reduce_associative": lambda g: tk.tree_reduce_associative(
        g.f(), g.tree, **g.pick({}, {"identity": 0}), **g.is_leaf_kw()
    ),
    "treekit.tree_scale": lambda g: tk.tree_scale(g.scalar(), g.tree),
    "treekit.tree_set": lambda g: tk.tree_set(g.tree, g.path(), g.value(), sep=g.sep()),
    "treekit.tree_size": lambda g: tk.tree_size(g.tree),
    "treekit.tree_spec": lambda g: tk.tree_spec(g.tree, **g.is_leaf_kw()),
    "treekit.tree_stack": lambda g: tk.tree_stack(g.pick([g.tree, g.other()], [g.tree], [], g.tree)),
    "treekit.tree_structure": lambda g: tk.tree_structure(g.tree, **g.is_leaf_kw()),
    "treekit.tree_sub": lambda g: tk.tree_sub(g.tree, g.other()),
    "treekit.tree_sum": lambda g: tk.tree_sum(g.tree, g.pick(False, True)),
    "treekit.tree_transpose": lambda g: tk.tree_transpose(g.treedef(), g.pick(None, g.treedef()), g.tree),
    "treekit.tree_unflatten": lambda g: tk.tree_unflatten(g.treedef(), g.leaves()),
    "treekit.tree_unstack": lambda g: tk.tree_unstack(g.tree),
    "treekit.tree_vdot": lambda g: tk.tree_vdot(g.tree, g.other()),
    "treekit.tree_where": lambda g: tk.tree_where(g.pick(True, g.other(), g.tree), g.tree, g.other()),
    "treekit.tree_zeros_like": lambda g: tk.tree_zeros_like(g.tree, g.dtype()),
    "treekit.treedef_children": lambda g: tk.treedef_children(g.treedef()),
    "treekit.treedef_from_jax": lambda g: tk.treedef_from_jax(g.pick(g.treedef(), g.tree)),
    "treekit.treedef_is_leaf": lambda g: tk.treedef_is_leaf(g.treedef()),
    "treekit.treedef_is_strict_leaf": lambda g: tk.treedef_is_strict_leaf(g.treedef()),
    "treekit.treedef_to_jax": lambda g: tk.treedef_to_jax(g.treedef()),
    "treekit.treedef_tuple": lambda g: tk.treedef_tuple(g.pick([g.treedef(), g.treedef()], [], g.treedef(), None)),
    # TreeDef's methods and properties
    "treekit.TreeDef.children": lambda g: _treedef(g).children(),
    "treekit.TreeDef.compose": lambda g: _treedef(g).compose(g.treedef()),
    "treekit.TreeDef.flatten_up_to": lambda g: _treedef(g).flatten_up_to(g.tree),
    "treekit.TreeDef.node_data": lambda g: _treedef(g).node_data(),
    "treekit.TreeDef.num_leaves": lambda g: _treedef(g).num_leaves,
    "treekit.TreeDef.num_nodes": lambda g: _treedef(g).num_nodes,
    "treekit.TreeDef.unflatten": lambda g: _treedef(g).unflatten(g.leaves()),
    "treekit.TreeDef.walk": lambda g: _treedef(g).walk(g.f(), g.pick(None, g.f()), g.leaves()),
    "treekit.TreeDef.from_iterable_tree": lambda g: _treedef(g).from_iterable_tree(g.tree),
    "treekit.TreeDef.from_node_data_and_children": lambda g: treekit.TreeDef.from_node_data_and_children(
        g.pick(treekit.default_registry, g.other()),
        g.pick(_treedef(g).node_data(), g.other()),
        g.pick(_treedef(g).children(), [g.treedef()], g.other()),
    ),
    "treekit.default_registry": lambda g: treekit.default_registry.flatten(g.tree, g.pick(None, g.f())),
    # treekit.params
    "treekit.params.adam": lambda g: _opt_step(g, P.adam(g.scalar())),
    "treekit.params.filter": lambda g: P.filter(g.tree, g.pick(tk.is_array, True), inverse=g.pick(False, True)),
    "treekit.params.adamw": lambda g: _opt_step(
        g, P.adamw(g.scalar(), weight_decay=g.scalar(), mask=g.pick(None, g.other()))
    ),
    "treekit.params.apply_updates": lambda g: P.apply_updates(g.tree, g.other()),
    "treekit.params.tree_get_all_with_path": lambda g: P.tree_get_all_with_path(
        g.tree, g.pick("a", "count", "x", 0), g.pick(None, lambda path, value: bool(value))
    ),
    "treekit.params.chain": lambda g: _opt_step(g, P.chain(*g.pick([], [optim.identity()], [g.value()], [P.sgd(0.1)]))),
    "treekit.params.clip_by_global_norm": lambda g: _opt_step(g, P.clip_by_global_norm(g.scalar())),
    "treekit.params.flatten_dict": lambda g: P.flatten_dict(g.tree, sep=g.sep()),
    "treekit.params.init_mlp_params": lambda g: P.init_mlp_params(
        g.pick([1, 2], [0, 4], [], [2, -1], g.tree, "12"), g.rng()
    ),
    "treekit.params.mlp_forward": lambda g: P.mlp_forward(g.tree, g.pick(np.ones((2, 1)), g.value())),
    "treekit.params.mse_loss": lambda g: P.mse_loss(g.tree, g.pick(np.ones((2, 1)), g.value()), g.value()),
    "treekit.params.mse_loss_and_grad": lambda g: P.mse_loss_and_grad(
        g.tree, g.pick(np.ones((2, 1)), g.value()), g.value()
    ),
    "treekit.params.sgd": lambda g: _opt_step(g, P.sgd(g.scalar(), momentum=g.pick(None, 0.9, g.scalar()))),
    "treekit.params.tree_bias_correction": lambda g: P.tree_bias_correction(g.tree, g.scalar(), g.scalar()),
    "treekit.params.tree_map_params": lambda g: P.tree_map_params(
        g.pick(P.adam(0.1), P.sgd(0.1), g.value()), g.f(), g.pick(P.adam(0.1).init(g.tree), g.tree)
    ),
    "treekit.params.tree_split_key_like": lambda g: P.tree_split_key_like(g.rng(), g.tree),
    "treekit.params.tree_unwrap_random_key_data": lambda g: P.tree_unwrap_random_key_data(g.tree),
    "treekit.params.tree_update_infinity_moment": lambda g: P.tree_update_infinity_moment(
        g.tree, g.other(), g.scalar(), g.scalar()
    ),
    "treekit.params.tree_update_moment": lambda g: P.tree_update_moment(g.tree, g.other(), g.scalar(), g.scalar()),
    "treekit.params.tree_update_moment_per_elem_norm": lambda g: P.tree_update_moment_per_elem_norm(
        g.tree, g.other(), g.scalar(), g.scalar()
    ),
    "treekit.params.unflatten_dict": lambda g: P.unflatten_dict(
        g.pick(P.flatten_dict({"a": g.tree, "b": 1}), {"a": {}, "a/b": 2}, {"a": 1, "a/b": 2}, g.tree), sep=g.sep()
    ),
    # treekit.optim
    "treekit.optim.add_decayed_weights": lambda g: _opt_step(
        g, optim.add_decayed_weights(g.scalar(), g.pick(None, g.other()))
    ),
    "treekit.optim.identity": lambda g: _opt_step(g, optim.identity()),
    "treekit.optim.masked": lambda g: _opt_step(g, optim.masked(g.pick(optim.scale(2.0), g.value()), g.other())),
    "treekit.optim.safe_increment": lambda g: optim.safe_increment(g.value()),
    "treekit.optim.scale": lambda g: _opt_step(g, optim.scale(g.scalar())),
    "treekit.optim.scale_by_adam": lambda g: _opt_step(g, optim.scale_by_adam(g.scalar())),
    "treekit.optim.scale_by_learning_rate": lambda g: _opt_step(g, optim.scale_by_learning_rate(g.scalar())),
    "treekit.optim.scale_by_schedule": lambda g: _opt_step(g, optim.scale_by_schedule(g.f())),
    "treekit.optim.trace": lambda g: _opt_step(g, optim.trace(g.scalar())),
}
NAMES = sorted(CALLS)


def test_every_public_function_is_fuzzed() -> None:
    public = set(public_callables())
    assert sorted(public - set(CALLS) - set(SKIP)) == [], "public callables missing from CALLS (or SKIP)"
    assert sorted((set(CALLS) | set(SKIP)) - public) == [], "CALLS/SKIP names that are not public"
    assert not set(CALLS) & set(SKIP)


# -- judging one outcome -------------------------------------------------------------------------
def _message(exc: BaseException) -> str:
    return str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)


def _judge(name: str, exc: BaseException) -> str:
    """The outcome's tally name; raises AssertionError for an outcome that is not allowed."""
    if isinstance(exc, AssertionError) and name.rsplit(".", 1)[-1].startswith("assert_"):
        return "AssertionError (an assert helper's)"
    if isinstance(exc, Boom):
        return "Boom (user's own)" + (" +note" if getattr(exc, "__notes__", None) else "")
    if isinstance(exc, AttributeError) and exc.name == "conjugate" and getattr(exc, "__notes__", None):
        # numpy's own error: its vdot calls .conjugate() on each item of an object array (the
        # user's leaf); treekit notes the key path. Any other AttributeError is treekit's bug.
        return "AttributeError (numpy's, on an object leaf; +note)"
    if not isinstance(exc, ALLOWED) or isinstance(exc, (RecursionError, StopIteration)):
        raise AssertionError(f"{name} raised {type(exc).__name__}: {exc!r:.300}") from exc
    assert _message(exc).strip(), f"{name} raised {type(exc).__name__} without a message"
    return type(exc).__name__


def _outcome(call: Callable[[], Any]) -> tuple[Any, ...]:
    try:
        return ("ok", call())
    except Exception as exc:
        return ("raised", type(exc), _message(exc))


def _brief(outcome: tuple[Any, ...]) -> str:
    """An outcome in words, without repr-ing user objects (their __repr__ may raise)."""
    return "returned" if outcome[0] == "ok" else f"raised {outcome[1].__name__}: {outcome[2][:200]}"


def _same_nodes(a: Any, b: Any) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x[0] is not y[0] or x[2:] != y[2:]:
            return False
        if x[1] is not y[1]:
            try:
                if not (x[1] == y[1]):
                    return False
            except Exception:  # node data that will not compare: the records' shapes agree
                pass
    return True


def _walks_agree(g: Garbage) -> None:
    """Plain and with-path walks agree; the native core's walk and build are the pure core's."""
    tree = g.tree
    plain = _outcome(lambda: pure_flatten(tree))
    pathed = _outcome(lambda: pure_flatten(tree, None, True))
    # (a misbehaving registration's flatten and flatten_with_keys functions may differ)
    if g.honest:
        assert plain[0] == pathed[0], f"plain walk {_brief(plain)}, with-path walk {_brief(pathed)}"
    if g.honest and plain[0] == "ok":
        assert [id(x) for x in plain[1][0]] == [id(x) for x in pathed[1][0]]
        assert len(pathed[1][2]) == len(pathed[1][0])
        assert _same_nodes(plain[1][1]._nodes, pathed[1][1]._nodes)
    if NATIVE is None:
        return
    for with_path, pure in ((False, plain), (True, pathed)):
        native = _outcome(lambda with_path=with_path: NATIVE.flatten(tree, None, with_path))
        if pure[0] == "raised":
            assert native == pure, f"native {_brief(native)} vs pure {_brief(pure)}"  # the same message
            continue
        assert native[0] == "ok", f"native {_brief(native)}, pure did not raise"
        assert [id(x) for x in native[1][0]] == [id(x) for x in pure[1][0]]
        assert _same_nodes(native[1][1]._nodes, pure[1][1]._nodes)
        assert native[1][2] == pure[1][2]
        nodes, leaves = pure[1][1]._nodes, pure[1][0]
        built = _outcome(lambda nodes=nodes, leaves=leaves: NATIVE.build(nodes, leaves))
        if built[0] == "ok" and built[1] is NATIVE.DEFER:
            continue
        reference = _outcome(lambda nodes=nodes, leaves=leaves: interpret(nodes, leaves))
        assert built[:2] == reference[:2] if built[0] == "raised" else reference[0] == "ok"


# -- the child run: one class, many examples ---------------------------------------------------
TALLY: Counter[str] = Counter()
SURVEY = os.environ.get("TREEKIT_FUZZ_SURVEY") == "1"  # tally failures instead of stopping (bug hunts)


def _where(exc: BaseException) -> str:
    tb = exc.__traceback__
    last = "?"
    while tb is not None:
        if "/treekit/" in tb.tb_frame.f_code.co_filename:
            last = f"{Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}"
        tb = tb.tb_next
    return last


def _call(name: str, g: Garbage) -> None:
    faulthandler.dump_traceback_later(PER_CALL_S, exit=True)
    TALLY[f"called {name}"] += 1
    try:
        CALLS[name](g)
    except Exception as exc:  # not hypothesis's own BaseExceptions
        try:
            outcome = _judge(name, exc)
        except AssertionError:
            if not SURVEY:
                raise
            outcome = f"FAIL {name} {type(exc).__name__} at {_where(exc)}: {str(exc)[:80]!r}"
        TALLY[outcome] += 1
    else:
        TALLY[f"{name}: ok"] += 1
        TALLY["ok"] += 1
    finally:
        faulthandler.cancel_dump_traceback_later()


def run_class(kind: str, per_function: int) -> dict[str, Any]:
    """Run ``per_function`` examples of one class for every public function; the tally."""
    TALLY.clear()

    def fuzz(name: str, data: st.DataObject) -> None:
        g = Garbage(data, kind, DEEP)
        try:
            TALLY["tried"] += 1
            _call(name, g)
            if g.stable:
                faulthandler.dump_traceback_later(PER_CALL_S, exit=True)
                try:
                    _walks_agree(g)
                except AssertionError as exc:
                    if not SURVEY:
                        raise
                    TALLY[f"FAIL walks: {str(exc)[:150]!r}"] += 1
                finally:
                    faulthandler.cancel_dump_traceback_later()
                TALLY["walks compared"] += 1
        finally:
            g.close()

    def one(name: str) -> Callable[[st.DataObject], None]:
        def run(data: st.DataObject) -> None:
            fuzz(name, data)

        run.__name__ = f"fuzz_{kind}_{name.replace('.', '_')}"  # what a failure report names
        return run

    for name in NAMES:
        settings(
            max_examples=per_function,
            derandomize=True,
            database=None,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            print_blob=True,
        )(given(data=st.data())(one(name)))()
    return dict(TALLY)


def _child_main(kind: str, out: str) -> None:
    import resource

    try:  # XLA's CPU client starts a thread per core when first used: before the cap, not under it
        import jax

        jax.devices()
    except ImportError:
        pass
    if os.environ.get("TREEKIT_SANITIZER"):
        # .ci/sanitize: AddressSanitizer has reserved terabytes of address space (and of data
        # segment) already, so RLIMIT_AS cannot be set: cap the data segment's growth instead.
        data = int(re.search(r"^VmData:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)[1]) << 10
        resource.setrlimit(resource.RLIMIT_DATA, (data + (2 << 30), resource.RLIM_INFINITY))
    else:  # 2 GiB over what the process holds now, whatever the core count made that
        size = int(re.search(r"^VmSize:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)[1]) << 10
        resource.setrlimit(resource.RLIMIT_AS, (size + (2 << 30), resource.RLIM_INFINITY))
    warnings.simplefilter("ignore")
    Path(out).write_text(json.dumps(run_class(kind, _examples(kind))))


def _examples(kind: str) -> int:
    return PER_FUNCTION if kind != "deep" else max(1, PER_FUNCTION // 3)


@pytest.mark.parametrize("kind", CLASSES)
def test_garbage_in_gives_a_result_or_an_allowed_error(kind: str, tmp_path: Path) -> None:
    out = tmp_path / "tally.json"
    code = f"import sys; sys.path.insert(0, {str(HERE)!r}); "
    code += f"import test_fuzz; test_fuzz._child_main({kind!r}, {str(out)!r})"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=HERE.parent)
    assert proc.returncode == 0, f"child exited {proc.returncode}\n{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}"
    tally = json.loads(out.read_text())
    print(kind, json.dumps({k: v for k, v in sorted(tally.items()) if ": ok" not in k and "called" not in k}))
    assert tally["tried"] >= len(NAMES) * _examples(kind)


# -- what the fuzz found, pinned ----------------------------------------------------------------
class _Plain:
    pass


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: tk.register_pytree_node("cls", len, len), "nodetype: expected a class, got str"),
        (lambda: tk.register_pytree_node(_Plain, None, len), "flatten_func: expected a function, got NoneType"),
        (lambda: tk.register_pytree_with_keys(_Plain, None, len), "flatten_with_keys: expected a function, got None"),
        (lambda: tk.register_pytree_node_class(_Plain), "cls.tree_flatten: expected a function, got NoneType"),
        (lambda: tk.register_pytree_with_keys_class(None), "cls: expected a class, got NoneType"),
        (lambda: tk.register_static("Tag"), "cls: expected a class, got str"),
        (lambda: tk.register_dataclass(None), "nodetype: expected a class, got NoneType"),
        (lambda: tk.register_dataclass(_Plain, 3, []), "data_fields: expected a sequence of attribute names (str)"),
        (lambda: tk.keystr((tk.DictKey("a"),), separator=0), "keystr: separator: expected str, got int"),
        (lambda: P.flatten_dict({"a": 1}, sep=0), "sep: expected a str or None, got int"),
        (lambda: P.chain(P.sgd(0.1), 3), "transformations[1]: expected a GradientTransformation"),
        (lambda: optim.masked(None, {"w": True}), "inner: expected a GradientTransformation"),
    ],
)
def test_wrong_arguments_raise_type_errors_naming_them(call: Callable[[], Any], message: str) -> None:
    with pytest.raises(TypeError, match=re.escape(message)):
        call()
    assert _Plain not in treekit.core._registry.REGISTERED


def test_optimizers_take_python_number_leaves() -> None:
    clipped, _ = P.clip_by_global_norm(1.0).update({"w": 3.0, "b": 4.0}, optim.EmptyState())
    assert clipped == {"w": pytest.approx(0.6), "b": pytest.approx(0.8)}
    assert P.apply_updates({"w": 1}, {"w": 2}) == {"w": 3}
    opt = optim.scale_by_schedule(lambda count: 0.5)
    assert opt.update({"w": 2.0}, opt.init({"w": 2.0}))[0] == {"w": 1.0}
    assert P.tree_bias_correction({"w": 1.0}, 0.5, 1) == {"w": 2.0}


def test_a_dict_key_whose_hash_raises_after_insertion_is_walked_by_both_cores() -> None:
    armed = [False]

    class Key(str):
        def __hash__(self) -> int:
            if armed[0]:
                raise Boom("hash")
            return str.__hash__(self)

    tree = {Key("a"): 1, Key("b"): 2}
    armed[0] = True
    assert pure_flatten(tree)[0] == [1, 2]
    assert tk.tree_leaves(tree) == [1, 2]

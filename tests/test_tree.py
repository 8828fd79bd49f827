"""The treekit.tree namespace, and jax.tree_util / jax.tree names with the same parameters."""

from __future__ import annotations

import inspect
import types
from typing import Any

import pytest

import treekit
from treekit import tree

# treekit.tree.X -> the treekit function it is.
ALIASES = {
    "all": treekit.tree_all,
    "broadcast": treekit.tree_broadcast,
    "flatten": treekit.tree_flatten,
    "flatten_with_path": treekit.tree_flatten_with_path,
    "leaves": treekit.tree_leaves,
    "leaves_with_path": treekit.tree_leaves_with_path,
    "map": treekit.tree_map,
    "map_with_path": treekit.tree_map_with_path,
    "reduce": treekit.tree_reduce,
    "reduce_associative": treekit.tree_reduce_associative,
    "static": treekit.static,
    "structure": treekit.tree_structure,
    "transpose": treekit.tree_transpose,
    "unflatten": treekit.tree_unflatten,
}


@pytest.mark.parametrize("name", sorted(ALIASES))
def test_tree_names_are_the_treekit_functions(name: str) -> None:
    assert getattr(tree, name) is ALIASES[name]


def test_tree_all_lists_exactly_the_aliases() -> None:
    assert sorted(tree.__all__) == sorted(ALIASES)


def test_treekit_all_is_what_it_exports() -> None:
    assert sorted(treekit.__all__) == sorted(set(treekit.__all__))
    for name in treekit.__all__:
        assert hasattr(treekit, name), name
    public = {
        n for n in vars(treekit) if not n.startswith("_") and not isinstance(getattr(treekit, n), types.ModuleType)
    }
    assert public - set(treekit.__all__) == set()


# Names of jax.tree_util that treekit deliberately does not have, and why.
NOT_IN_TREEKIT: set[str] = set()  # default_registry too is there (issue 12 item 9)
# treekit name for a jax.tree_util name, where they differ.
RENAMED: dict[str, str] = {}
# PyTreeDef methods of jaxlib that TreeDef does not have: protobuf serialization, a
# deliberate difference (docs/migration.md, "No proto serialization").
TREEDEF_NOT_IN_TREEKIT = {
    "deserialize_using_proto",
    "serialize_using_proto",
}


def _public(module: Any) -> list[str]:
    return sorted(
        name
        for name in dir(module)
        if not name.startswith("_") and not isinstance(getattr(module, name), types.ModuleType)
    )


def _parameters(fn: Any) -> list[tuple[str, Any]]:
    """What callers see: names of parameters passed by name, and each parameter's kind."""
    out = []
    for p in inspect.signature(fn).parameters.values():
        name = "*" if p.kind is p.VAR_POSITIONAL else "**" if p.kind is p.VAR_KEYWORD else p.name
        out.append((name, p.kind))
    return out


def _jax_names(module_name: str) -> list[str]:
    module = pytest.importorskip(module_name)
    return _public(module)


def test_every_jax_tree_util_name_has_a_treekit_counterpart() -> None:
    missing = [
        n for n in _jax_names("jax.tree_util") if n not in NOT_IN_TREEKIT and not hasattr(treekit, RENAMED.get(n, n))
    ]
    assert missing == []


def test_every_jax_tree_name_has_a_treekit_tree_counterpart() -> None:
    assert [n for n in _jax_names("jax.tree") if not hasattr(tree, n)] == []


@pytest.mark.parametrize("module_name", ["jax.tree_util", "jax.tree"])
def test_same_parameters_as_jax(module_name: str) -> None:
    module = pytest.importorskip(module_name)
    ours_module = treekit if module_name == "jax.tree_util" else tree
    compared = []
    for name in _public(module):
        theirs = getattr(module, name)
        if name in NOT_IN_TREEKIT or not (inspect.isfunction(theirs) or name == "Partial"):
            continue  # classes are compared by their fields and methods below
        ours = getattr(ours_module, RENAMED.get(name, name))
        assert _parameters(ours) == _parameters(theirs), name
        compared.append(name)
    assert len(compared) >= 14


@pytest.mark.parametrize(
    ("name", "field"),
    [("SequenceKey", "idx"), ("DictKey", "key"), ("GetAttrKey", "name"), ("FlattenedIndexKey", "key")],
)
def test_key_entries_have_jax_fields(name: str, field: str) -> None:
    jtu = pytest.importorskip("jax.tree_util")
    assert getattr(jtu, name).__match_args__ == (field,)
    assert getattr(treekit, name).__match_args__ == (field,)


def test_treedef_has_jax_methods() -> None:
    jtu = pytest.importorskip("jax.tree_util")
    theirs = {n for n in dir(jtu.PyTreeDef) if not n.startswith("_")}
    ours = {n for n in dir(treekit.TreeDef) if not n.startswith("_")}
    assert theirs - ours == TREEDEF_NOT_IN_TREEKIT
    assert TREEDEF_NOT_IN_TREEKIT <= theirs  # the list of differences is not stale


def test_the_deliberate_differences_are_not_stale() -> None:
    names = _jax_names("jax.tree_util")
    assert NOT_IN_TREEKIT <= set(names)
    assert not any(hasattr(treekit, n) for n in NOT_IN_TREEKIT)

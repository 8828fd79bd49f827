"""tree_transpose edge cases (more of _ops is covered by the laws in test_testing.py)."""

from __future__ import annotations

from treekit import tree_structure, tree_transpose


def test_transpose_inner_without_leaves() -> None:
    # jax gives the inner structure back; treekit divided by the inner leaf count (zero).
    outer, inner = tree_structure([0, 0]), tree_structure({"a": [], "b": None})
    assert tree_transpose(outer, inner, [{"a": [], "b": None}, {"a": [], "b": None}]) == {"a": [], "b": None}

"""tree_check: a node held twice or inside itself, as equinox's."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import treekit as tk


@st.composite
def _shared_trees(draw: st.DrawFn) -> Any:
    """Trees of lists, tuples and dicts where some nodes are the same object (and maybe a cycle)."""
    made: list[Any] = []

    def node(depth: int) -> Any:
        if made and draw(st.integers(0, 4)) == 0:
            return draw(st.sampled_from(made))  # a node already placed: shared
        kind = draw(st.sampled_from(["leaf", "none", "list", "tuple", "dict"] if depth < 3 else ["leaf", "none"]))
        if kind == "leaf":
            return draw(st.integers(0, 2))
        if kind == "none":
            return None
        children = [node(depth + 1) for _ in range(draw(st.integers(0, 3)))]
        out: Any = {"abc"[i]: c for i, c in enumerate(children)} if kind == "dict" else children
        out = tuple(out) if kind == "tuple" else out
        made.append(out)
        return out

    root = node(0)
    if isinstance(root, list) and draw(st.booleans()):
        target = draw(st.sampled_from([n for n in made if isinstance(n, list)]))
        target.append(root)  # a cycle (or a list holding the root)
    return root


@given(_shared_trees())
def test_tree_check_fails_exactly_where_equinox_s_does(tree: Any) -> None:
    eqx = pytest.importorskip("equinox")
    outcomes = []
    for check in (tk.tree_check, eqx.tree_check):
        try:
            check(tree)
            outcomes.append("passed")
        except ValueError:
            outcomes.append("failed")
    assert outcomes[0] == outcomes[1]


def test_tree_check_names_both_places_and_lets_leaves_and_empty_nodes_repeat() -> None:
    layer = {"w": 1.0, "b": 0.0}
    tk.tree_check([[], [], None, None, 1, 1, ({"w": 1.0}, {"w": 1.0})])
    with pytest.raises(ValueError, match=r"tree\['encoder'\]: .*the dict at tree\['decoder'\]\[1\] again"):
        tk.tree_check({"encoder": layer, "decoder": [0, layer]})
    tk.tree_check({"encoder": layer, "decoder": [0, layer]}, is_leaf=lambda x: x is layer)
    loop: list[Any] = [1]
    loop.append([loop])
    with pytest.raises(tk.TreeCycleError) as info:
        tk.tree_check({"x": loop})
    assert info.value.path == (tk.DictKey("x"), tk.SequenceKey(1), tk.SequenceKey(0))
    assert info.value.ancestor == (tk.DictKey("x"),)

"""Small hypothesis strategies for random trees of every node type (tests only).

The public strategies live in ``treekit.testing``; these stay local so that the core's laws
and the jax comparison do not depend on that module.
"""

from __future__ import annotations

import collections
import functools
from typing import Any

import pytest

pytest.importorskip("hypothesis")  # this module is collected for doctests too

from cases import NT, ATuple, Layer, Pair, Point, Tag
from hypothesis import strategies as st

LEAVES = st.one_of(
    st.integers(-3, 3),
    st.text("xyz", max_size=2),
    st.floats(-2, 2, allow_nan=False, width=16),
    st.builds(object),
)


def _dicts(children: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[Any, Any]]:
    # Keys of one type per dict: mixed types get treekit's own order (jax raises).
    return st.one_of(
        st.dictionaries(st.text("abc", max_size=2), children, max_size=3),
        st.dictionaries(st.integers(0, 4), children, max_size=3),
    )


@functools.cache
def trees(custom: bool = True, max_leaves: int = 10) -> st.SearchStrategy[Any]:
    """Trees of list, tuple, dict, namedtuple, OrderedDict, defaultdict and None nodes.

    With ``custom``, also the node types of tests/cases.py (registered by ``case_types``):
    ``Pair`` (no keys), ``Point`` (keys, node data), ``Layer`` (dataclass with a static
    field) and ``Tag`` (static).
    """
    base = [LEAVES, st.none()]
    if custom:
        base.append(st.sampled_from(["relu", "tanh"]).map(Tag))

    def extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        nodes = [
            st.lists(children, max_size=3),
            st.lists(children, max_size=3).map(tuple),
            _dicts(children),
            st.builds(NT, children, children),
            st.builds(ATuple, children),
            _dicts(children).map(collections.OrderedDict),
            st.builds(collections.defaultdict, st.sampled_from([list, int]), _dicts(children)),
        ]
        if custom:
            nodes += [
                st.builds(Pair, children, children),
                st.builds(Point, children, children, label=st.sampled_from(["p", "q"])),
                st.builds(Layer, children, children, act=st.sampled_from(["relu", "tanh"])),
            ]
        return st.one_of(nodes)

    return st.recursive(st.one_of(base), extend, max_leaves=max_leaves)

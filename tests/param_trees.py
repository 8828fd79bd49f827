"""Hypothesis strategies for trees of numpy arrays (param-like trees), shared by the params tests."""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays

from treekit import tree_flatten, tree_leaves, tree_unflatten
from treekit.testing import trees

Pair = namedtuple("Pair", "first second")

skeletons = trees(st.just(0), max_leaves=6).filter(tree_leaves)
"""Tree structures from ``treekit.testing.trees`` (every built-in node type, ``None`` and empty
containers included) with at least one leaf; every leaf is ``0``."""


@st.composite
def array_trees(
    draw: st.DrawFn, count: int = 1, dtype: Any = np.float64, min_dims: int = 0, few_shapes: bool = False
) -> list[Any]:
    """``count`` trees of one random structure whose leaves are arrays of matching shapes.

    ``few_shapes`` draws the shapes from three, so that eager jax compiles each op only a few
    times over a whole test (it compiles every op anew for every shape).
    """
    leaves, treedef = tree_flatten(draw(skeletons))
    if few_shapes:
        shape_strategy: Any = st.sampled_from([(), (3,), (2, 3)])
    else:
        shape_strategy = array_shapes(min_dims=min_dims, max_dims=2, min_side=1, max_side=3)
    shapes = [draw(shape_strategy) for _ in leaves]
    elements = st.floats(-10, 10, width=np.dtype(dtype).itemsize * 8)
    return [
        tree_unflatten(treedef, [draw(arrays(dtype, shape, elements=elements)) for shape in shapes])
        for _ in range(count)
    ]

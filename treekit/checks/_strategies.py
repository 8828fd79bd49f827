"""Hypothesis strategies for pytrees: random trees, trees of arrays, arrays shaped like a tree.

Public through :mod:`treekit.testing`. Imports hypothesis; numpy only when an array strategy
is built, jax only for ``jax_arrays=True``.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from hypothesis import assume
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from treekit.core import KeyPath, TreeDef, as_treedef, lookup
from treekit.ops import tree_leaves_with_path

__all__ = ["BUILTIN_NODE_TYPES", "NodeMaker", "Pair", "key_paths", "trees", "trees_like"]


NodeMaker = Callable[[SearchStrategy[Any]], SearchStrategy[Any]]
"""``maker(children) -> strategy of nodes``: how :func:`trees` builds one custom node type."""


class Pair(NamedTuple):
    """The namedtuple class :func:`trees` generates by default."""

    first: Any
    second: Any


Pair.__module__ = "treekit.testing"  # its public home (re-exported there), for repr and pickle


BUILTIN_NODE_TYPES: tuple[Any, ...] = (
    list,
    tuple,
    dict,
    Pair,
    collections.OrderedDict,
    collections.defaultdict,
    None,
)
"""Every built-in node type, as :func:`trees` takes them (``None`` for ``None``; ``Pair`` for
namedtuples). Failing examples shrink towards leaves, then towards the first types listed."""

_WIDTH = 3  # the most children a generated built-in container has
_DICT_KEYS = st.text(alphabet="abc", min_size=1, max_size=2)


def _maker(node_type: Any, index: int) -> NodeMaker:
    """The node maker for one item of ``node_types``."""
    if node_type is None or node_type is type(None):
        return lambda children: st.none()
    if node_type is list:
        return lambda children: st.lists(children, max_size=_WIDTH)
    if node_type is tuple:
        return lambda children: st.lists(children, max_size=_WIDTH).map(tuple)
    if node_type is dict:
        return lambda children: st.dictionaries(_DICT_KEYS, children, max_size=_WIDTH)
    if node_type is collections.OrderedDict:
        return lambda children: st.dictionaries(_DICT_KEYS, children, max_size=_WIDTH).map(collections.OrderedDict)
    if node_type is collections.defaultdict:
        return lambda children: st.dictionaries(_DICT_KEYS, children, max_size=_WIDTH).map(
            lambda d: collections.defaultdict(int, d)
        )
    if isinstance(node_type, type) and issubclass(node_type, tuple) and hasattr(node_type, "_fields"):
        cls: Any = node_type
        return lambda children: st.tuples(*[children] * len(cls._fields)).map(cls._make)
    if isinstance(node_type, type):
        what = "a registered class" if lookup(node_type) is not None else "a class that is not a node"
        raise TypeError(
            f"node_types[{index}]: expected a built-in node type, a namedtuple class or a function "
            f"children -> strategy, got {node_type.__qualname__} ({what}: pass "
            f"lambda children: st.builds({node_type.__qualname__}, ...))"
        )
    if not callable(node_type):
        raise TypeError(
            f"node_types[{index}]: expected a built-in node type, a namedtuple class or a function "
            f"children -> strategy, got {type(node_type).__name__} {node_type!r:.60}"
        )
    return node_type  # type: ignore[no-any-return]


class _LimitReached(BaseException):
    """A tree drew more leaves than ``max_leaves`` (a BaseException: user code cannot catch it)."""


class _Budget(threading.local):
    left = 0


def check_count(name: str, value: object) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"{name}: expected an int >= 0, got {value!r}")
    return value


def trees(
    leaves: SearchStrategy[Any] | None = None,
    node_types: Iterable[Any] | None = None,
    *,
    max_leaves: int = 10,
    max_depth: int = 4,
    min_leaves: int = 0,
) -> SearchStrategy[Any]:
    """A strategy for trees over the given node types, with ``min_leaves`` to ``max_leaves`` leaves.

    >>> from hypothesis import given, settings
    >>> from treekit import tree_flatten, tree_unflatten
    >>> @settings(max_examples=20, database=None, derandomize=True)
    ... @given(trees(node_types=[tuple, dict]))
    ... def test_round_trip(tree):
    ...     leaves, treedef = tree_flatten(tree)
    ...     assert tree_unflatten(treedef, leaves) == tree
    >>> test_round_trip()

    A custom node type is given by a function that takes the strategy for its children and
    returns a strategy for its instances (``st.builds`` is the usual way):

    >>> from hypothesis import find, strategies as st
    >>> class Box:
    ...     def __init__(self, value): self.value = value
    >>> boxes = lambda children: st.builds(Box, children)
    >>> quick = settings(max_examples=100, database=None, derandomize=True)
    >>> box = find(trees(node_types=[list, boxes]), lambda t: isinstance(t, Box), settings=quick)
    >>> isinstance(box, Box)
    True

    Built as ``st.recursive`` builds trees (a ``one_of`` over levels, leaves first; a leaf
    budget, retried when spent), except that a node on level ``d`` takes its children from
    level ``d - 1`` or the leaves, so that ``max_depth`` holds exactly and deep trees turn up
    whatever ``max_leaves`` is (``st.recursive`` ties depth to ``log2(max_leaves)``). Failing
    examples shrink to small trees: towards a single leaf, fewer children, and the node types
    listed first.

    Args:
        leaves: The strategy for leaves; default integers. Its values must be leaves
            (not lists, tuples, dicts or ``None``), or the trees' structures will surprise you.
        node_types: Which nodes to build; default :data:`BUILTIN_NODE_TYPES`. Each item is a
            built-in node type (``list``, ``tuple``, ``dict``, ``OrderedDict``,
            ``defaultdict``, ``None``), a namedtuple class, or a node maker
            ``children -> strategy`` for a registered custom type. Containers get up to 3
            children; dict keys are short strings.
        max_leaves: The most leaves a tree has (draws over it are retried). ``0`` gives
            trees without leaves (``[]``, ``None``, ``{'a': ()}``).
        max_depth: The most nodes on a path from the root to a leaf (``0``: a single leaf).
        min_leaves: The fewest leaves a tree has (draws under it are retried, so keep it well
            below ``max_leaves``: ``min_leaves=1`` for "not empty").

    Raises:
        TypeError: If an item of ``node_types`` is none of the above.
        ValueError: If ``max_leaves``, ``max_depth`` or ``min_leaves`` is not an int >= 0,
            or ``min_leaves > max_leaves``.
    """
    leaves = st.integers() if leaves is None else leaves
    makers = [_maker(t, i) for i, t in enumerate(BUILTIN_NODE_TYPES if node_types is None else node_types)]
    max_leaves = check_count("max_leaves", max_leaves)
    max_depth = check_count("max_depth", max_depth)
    min_leaves = check_count("min_leaves", min_leaves)
    if min_leaves > max_leaves:
        raise ValueError(f"min_leaves: expected at most max_leaves ({max_leaves}), got {min_leaves}")
    if min_leaves > 1 and (not makers or max_depth == 0):
        raise ValueError(f"min_leaves: expected at most 1 for trees without nodes, got {min_leaves}")
    budget = _Budget()

    @st.composite
    def counted(draw: st.DrawFn) -> Any:
        if budget.left <= 0:
            raise _LimitReached
        budget.left -= 1
        return draw(leaves)

    levels: list[SearchStrategy[Any]] = [counted()]
    if makers:
        for _ in range(max_depth):  # a node on level d has children from level d - 1 or leaves
            children = st.one_of(levels[0], levels[-1]) if len(levels) > 1 else levels[0]
            levels.append(st.one_of([maker(children) for maker in makers]))
    tree = st.one_of(levels)

    @st.composite
    def capped(draw: st.DrawFn) -> Any:
        saved = budget.left  # a maker may draw from this same strategy: restore its budget after
        try:
            for _ in range(8 if min_leaves == 0 else 32):
                budget.left = max_leaves
                try:
                    out = draw(tree)
                except _LimitReached:
                    continue
                if max_leaves - budget.left >= min_leaves:  # the leaves drawn: all of them counted
                    return out
            assume(False)
        finally:
            budget.left = saved

    return capped()


def trees_like(treedef: TreeDef, leaves: SearchStrategy[Any] | None = None) -> SearchStrategy[Any]:
    """A strategy for trees with structure ``treedef`` (dicts in its key order).

    >>> from hypothesis import find, settings, strategies as st
    >>> quick = settings(max_examples=100, database=None, derandomize=True)
    >>> from treekit import tree_structure
    >>> treedef = tree_structure({'w': [0, 0], 'b': 0})
    >>> example = find(trees_like(treedef, st.integers(0, 9)), lambda t: t['b'] > 3, settings=quick)
    >>> tree_structure(example) == treedef, list(example)
    (True, ['w', 'b'])

    Args:
        treedef: The structure.
        leaves: The strategy for leaves; default integers.

    Raises:
        TypeError: If ``treedef`` is not a :class:`~treekit.TreeDef` (a JAX ``PyTreeDef`` is
            converted).
    """
    treedef = as_treedef(treedef, "treedef")
    n = treedef.num_leaves
    return st.lists(st.integers() if leaves is None else leaves, min_size=n, max_size=n).map(treedef.unflatten)


def key_paths(tree: Any) -> SearchStrategy[KeyPath]:
    """A strategy for the key paths of ``tree``'s leaves (empty if it has no leaves).

    >>> from hypothesis import find, settings
    >>> quick = settings(max_examples=100, database=None, derandomize=True)
    >>> from treekit import keystr
    >>> keystr(find(key_paths({'a': [1, 2]}), lambda p: p[-1].idx == 1, settings=quick))
    "['a'][1]"
    """
    paths = [path for path, _ in tree_leaves_with_path(tree)]
    return st.sampled_from(paths) if paths else st.nothing()

"""Hypothesis strategies for pytrees, and a checker for node registrations (the ``testing`` extra).

``import treekit`` does not import this module; ``import treekit.testing`` imports hypothesis
(numpy only when an array strategy is built).

>>> from hypothesis import find, settings
>>> quick = settings(max_examples=100, database=None, derandomize=True)
>>> example = find(trees(), lambda t: isinstance(t, list) and len(t) == 2, settings=quick)
>>> type(example), len(example)
(<class 'list'>, 2)
"""

from __future__ import annotations

import collections
import importlib
import importlib.util
import itertools
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from hypothesis import HealthCheck, Phase, assume, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample
from hypothesis.strategies import SearchStrategy

from treekit import _jax
from treekit._keys import KeyPath
from treekit._ops import tree_flatten, tree_leaves_with_path, tree_map, tree_map_with_path, tree_unflatten
from treekit._registry import NodeType, lookup
from treekit._treedef import TreeDef, as_treedef

__all__ = [
    "BUILTIN_NODE_TYPES",
    "LAWS",
    "BrokenLaw",
    "NodeTypeLawError",
    "NodeTypeReport",
    "Pair",
    "array_trees",
    "check_node_type",
    "key_paths",
    "param_trees",
    "same_structure_trees",
    "trees",
    "trees_like",
]

NodeMaker = Callable[[SearchStrategy[Any]], SearchStrategy[Any]]
"""``maker(children) -> strategy of nodes``: how :func:`trees` builds one custom node type."""


class Pair(NamedTuple):
    """The namedtuple class :func:`trees` generates by default."""

    first: Any
    second: Any


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


def _check_count(name: str, value: object) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"{name}: expected an int >= 0, got {value!r}")
    return value


def trees(
    leaves: SearchStrategy[Any] | None = None,
    node_types: Iterable[Any] | None = None,
    *,
    max_leaves: int = 10,
    max_depth: int = 4,
) -> SearchStrategy[Any]:
    """A strategy for trees over the given node types, with at most ``max_leaves`` leaves.

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

    Raises:
        TypeError: If an item of ``node_types`` is none of the above.
        ValueError: If ``max_leaves`` or ``max_depth`` is not an int >= 0.
    """
    leaves = st.integers() if leaves is None else leaves
    makers = [_maker(t, i) for i, t in enumerate(BUILTIN_NODE_TYPES if node_types is None else node_types)]
    max_leaves = _check_count("max_leaves", max_leaves)
    max_depth = _check_count("max_depth", max_depth)
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
            for _ in range(8):
                budget.left = max_leaves
                try:
                    return draw(tree)
                except _LimitReached:
                    continue
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


def same_structure_trees(
    n: int,
    leaves: SearchStrategy[Any] | None = None,
    node_types: Iterable[Any] | None = None,
    *,
    max_leaves: int = 10,
    max_depth: int = 4,
) -> SearchStrategy[tuple[Any, ...]]:
    """A strategy for tuples of ``n`` trees that share one structure (for ``tree_map`` over several).

    >>> from hypothesis import find, settings
    >>> quick = settings(max_examples=100, database=None, derandomize=True)
    >>> from treekit import tree_structure
    >>> a, b = find(same_structure_trees(2), lambda ab: isinstance(ab[0], list) and ab[0] != ab[1],
    ...             settings=quick)
    >>> tree_structure(a) == tree_structure(b), type(b)
    (True, <class 'list'>)

    Args:
        n: How many trees.
        leaves, node_types, max_leaves, max_depth: As in :func:`trees`; the structure is drawn
            first, then each tree's leaves.
    """
    n = _check_count("n", n)
    shapes = trees(st.just(0), node_types, max_leaves=max_leaves, max_depth=max_depth)

    def fill(shape: Any) -> SearchStrategy[tuple[Any, ...]]:
        like = trees_like(tree_flatten(shape)[1], leaves)
        return st.tuples(*[like] * n)

    return shapes.flatmap(fill)


def _arrays(shapes: Any, dtypes: Any) -> SearchStrategy[Any]:
    """Finite numpy arrays: |x| <= 1000 for numbers."""
    import numpy as np
    from hypothesis.extra import numpy as hnp

    if shapes is None:
        shapes = hnp.array_shapes(min_dims=0, max_dims=2, max_side=3)
    elif not isinstance(shapes, SearchStrategy):
        shapes = st.sampled_from([tuple(s) for s in shapes])
    if dtypes is None:
        dtypes = ("float32", "float64", "int32")
    if not isinstance(dtypes, SearchStrategy):
        dtypes = st.sampled_from([np.dtype(d) for d in dtypes])

    def arrays(dtype: Any) -> SearchStrategy[Any]:
        dtype = np.dtype(dtype)
        kwargs: dict[str, Any] = {}
        if dtype.kind in "fc":
            kwargs = {"allow_nan": False, "allow_infinity": False}
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            kwargs = {"min_value": max(info.min, -1000), "max_value": min(info.max, 1000)}
        if dtype.kind == "f":
            kwargs.update(min_value=-1000, max_value=1000)
        return hnp.arrays(dtype, shapes, elements=hnp.from_dtype(dtype, **kwargs))

    return dtypes.flatmap(arrays)  # type: ignore[no-any-return]


def array_trees(
    shapes: SearchStrategy[tuple[int, ...]] | Sequence[tuple[int, ...]] | None = None,
    dtypes: SearchStrategy[Any] | Sequence[Any] | None = None,
    node_types: Iterable[Any] | None = None,
    *,
    max_leaves: int = 10,
    max_depth: int = 4,
) -> SearchStrategy[Any]:
    """A strategy for trees whose leaves are numpy arrays with finite values (|x| <= 1000).

    >>> from hypothesis import find, settings
    >>> quick = settings(max_examples=100, database=None, derandomize=True)
    >>> from treekit import tree_leaves
    >>> example = find(array_trees([(2,)], ['int32']), lambda t: len(tree_leaves(t)) == 2, settings=quick)
    >>> [(leaf.shape, str(leaf.dtype)) for leaf in tree_leaves(example)]
    [((2,), 'int32'), ((2,), 'int32')]

    Args:
        shapes: A strategy for shapes, or a sequence of shapes to choose from; default up to
            2 dimensions of up to 3 each (``()`` included).
        dtypes: A strategy for dtypes, or a sequence of dtypes to choose from; default
            float32, float64 and int32.
        node_types, max_leaves, max_depth: As in :func:`trees`.
    """
    return trees(_arrays(shapes, dtypes), node_types, max_leaves=max_leaves, max_depth=max_depth)


def param_trees(
    layer_widths: Sequence[int] | SearchStrategy[Sequence[int]] | None = None, dtype: Any = "float32"
) -> SearchStrategy[list[dict[str, Any]]]:
    """A strategy for MLP parameter trees: ``[{'weights': (n_in, n_out), 'biases': (n_out,)}, ...]``.

    The JAX pytree tutorial's layout (and ``python -m treekit demo``'s), with finite values
    (|x| <= 1000).

    >>> from hypothesis import Phase, find, settings
    >>> quick = settings(max_examples=100, database=None, derandomize=True)
    >>> params = find(param_trees([3, 4, 2]), lambda p: True,
    ...               settings=settings(quick, phases=[Phase.generate]))
    >>> [(layer['weights'].shape, layer['biases'].shape) for layer in params]
    [((3, 4), (4,)), ((4, 2), (2,))]

    Args:
        layer_widths: The widths, input first (``[1, 128, 128, 1]``), or a strategy for them;
            default 2 to 4 widths of 1 to 4.
        dtype: The arrays' dtype.

    Raises:
        ValueError: If fixed ``layer_widths`` has fewer than 2 widths or a width below 1.
    """
    if layer_widths is None:
        widths: SearchStrategy[Sequence[int]] = st.lists(st.integers(1, 4), min_size=2, max_size=4)
    elif isinstance(layer_widths, SearchStrategy):
        widths = layer_widths
    else:
        fixed = list(layer_widths)
        if len(fixed) < 2 or not all(type(w) is int and w >= 1 for w in fixed):
            raise ValueError(f"layer_widths: expected at least 2 ints >= 1, got {fixed!r}")
        widths = st.just(fixed)

    def layers(ws: Sequence[int]) -> SearchStrategy[list[dict[str, Any]]]:
        return st.tuples(
            *[
                st.fixed_dictionaries(
                    {"weights": _arrays([(n_in, n_out)], [dtype]), "biases": _arrays([(n_out,)], [dtype])}
                )
                for n_in, n_out in itertools.pairwise(ws)
            ]
        ).map(list)

    return widths.flatmap(layers)


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


# -- checking a registration -------------------------------------------------------------------
LAWS = ("round_trip", "keys_count", "keys_agree", "deterministic", "node_data_hashable", "survives_map", "jit")
"""The laws :func:`check_node_type` checks, in its order. For an instance ``x``:

- ``round_trip``: ``tree_unflatten(*reversed(tree_flatten(x)))`` equals ``x`` and has its type.
- ``keys_count``: flattening with keys gives one key entry per child.
- ``keys_agree``: flattening with and without keys gives the same children and node data.
- ``deterministic``: flattening twice gives the same children, node data, keys and treedef.
- ``node_data_hashable``: the node data hashes and equals itself (treedefs hash it).
- ``survives_map``: ``tree_map(lambda v: v, x)`` and ``tree_map_with_path`` equal ``x``.
- ``jit``: ``jax.jit(lambda t: t)`` gives back ``x``'s structure and leaves (leaves replaced
  by numbers first).
"""


@dataclass(frozen=True)
class BrokenLaw:
    """One law a registration breaks, with the (shrunk) instance that shows it."""

    law: str
    example: Any
    message: str

    def __str__(self) -> str:
        return f"{self.law}: {self.message}; x = {_short(self.example)}"


class NodeTypeLawError(AssertionError):
    """A node registration breaks laws: ``broken`` lists each, with its example."""

    def __init__(self, cls: type, broken: Sequence[BrokenLaw]) -> None:
        lines = [f"{cls.__qualname__} breaks {len(broken)} of the pytree node laws:"]
        lines += [f"  {item}" for item in broken]
        super().__init__("\n".join(lines))
        self.cls = cls
        self.broken = tuple(broken)


@dataclass(frozen=True)
class NodeTypeReport:
    """What :func:`check_node_type` checked: the laws that held and the ones it skipped (and why)."""

    cls: type
    held: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _leaf_equal(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if getattr(a, "shape", None) != getattr(b, "shape", None):
        return False
    try:
        result = a == b
        if isinstance(result, bool):
            return result
        every = getattr(result, "all", None)  # numpy and jax arrays
        return bool(every()) if every is not None else bool(result)
    except Exception:
        return False


def _tree_equal(a: Any, b: Any) -> bool:
    """Same type, same treedef, leaves equal (arrays elementwise): :func:`check_node_type`'s default.

    >>> _tree_equal({'a': [1, 2]}, {'a': [1, 2]}), _tree_equal([1], (1,)), _tree_equal([1], [2])
    (True, False, False)
    """
    leaves_a, treedef_a = tree_flatten(a)
    leaves_b, treedef_b = tree_flatten(b)
    return (
        type(a) is type(b)
        and treedef_a == treedef_b
        and len(leaves_a) == len(leaves_b)
        and all(map(_leaf_equal, leaves_a, leaves_b))
    )


Law = Callable[[Any, NodeType, Callable[[Any, Any], bool]], "str | None"]


def _round_trip(x: Any, ntype: NodeType, eq: Callable[[Any, Any], bool]) -> str | None:
    leaves, treedef = tree_flatten(x)
    y = tree_unflatten(treedef, leaves)
    if type(y) is not type(x) or not eq(y, x):
        return f"expected unflatten(flatten(x)) == x, got {_short(y)}"
    return None


def _keys_count(x: Any, ntype: NodeType, eq: Callable[[Any, Any], bool]) -> str | None:
    children, _, keys = ntype.flatten(x, True)
    count = None if keys is None else len(keys)
    if count != len(children):
        return f"expected {len(children)} key entries (one per child), got {count}"
    return None


def _differ(what: str, a: tuple[Any, Any], b: tuple[Any, Any], names: tuple[str, str]) -> str | None:
    (children_a, data_a), (children_b, data_b) = a, b
    children_a, children_b = list(children_a), list(children_b)
    if len(children_a) != len(children_b):
        return f"expected {what}, got {len(children_a)} children {names[0]} and {len(children_b)} {names[1]}"
    for i, (p, q) in enumerate(zip(children_a, children_b)):
        if not _leaf_equal(p, q):
            return f"expected {what}, got child {i} = {_short(p)} {names[0]} and {_short(q)} {names[1]}"
    if not data_a == data_b:
        return f"expected {what}, got node data {_short(data_a)} {names[0]} and {_short(data_b)} {names[1]}"
    return None


def _keys_agree(x: Any, ntype: NodeType, eq: Callable[[Any, Any], bool]) -> str | None:
    plain, keyed = ntype.flatten(x, False), ntype.flatten(x, True)
    names = ("without keys", "with keys")
    return _differ("the same children and node data with and without keys", plain[:2], keyed[:2], names)


def _deterministic(x: Any, ntype: NodeType, eq: Callable[[Any, Any], bool]) -> str | None:
    names = ("the first time", "the second")
    for with_path in (False, True):
        first, second = ntype.flatten(x, with_path), ntype.flatten(x, with_path)
        message = _differ("flatten(x) to give the same children and node data", first[:2], second[:2], names)
        if message:
            return message
        if with_path and list(first[2] or ()) != list(second[2] or ()):
            return f"expected the same key entries, got {first[2]!r:.60} then {second[2]!r:.60}"
    if tree_flatten(x)[1] != tree_flatten(x)[1]:
        return "expected tree_structure(x) == tree_structure(x), got two unequal treedefs"
    return None


def _node_data_hashable(x: Any, ntype: NodeType, eq: Callable[[Any, Any], bool]) -> str | None:
    data = ntype.flatten(x, False)[1]
    try:
        hash(data)
    except TypeError as exc:
        return f"expected hashable node data, got {type(data).__name__} {_short(data)} ({exc})"
    if not data == data:
        return f"expected node data equal to itself, got {_short(data)}"
    return None


def _survives_map(x: Any, ntype: NodeType, eq: Callable[[Any, Any], bool]) -> str | None:
    y = tree_map(lambda v: v, x)
    if type(y) is not type(x) or not eq(y, x):
        return f"expected tree_map(lambda v: v, x) == x, got {_short(y)}"
    y = tree_map_with_path(lambda p, v: v, x)
    if type(y) is not type(x) or not eq(y, x):
        return f"expected tree_map_with_path(lambda p, v: v, x) == x, got {_short(y)}"
    return None


def _jit(x: Any, ntype: NodeType, eq: Callable[[Any, Any], bool]) -> str | None:
    import numpy as np

    jax: Any = _jax.load()
    if jax.tree_util.all_leaves([x]):
        return f"expected jax to see {type(x).__qualname__} as a node, got a leaf (it is not registered with jax)"
    leaves, treedef = tree_flatten(x)
    numbered = treedef.unflatten([np.float32(i) for i in range(len(leaves))])
    out = jax.jit(lambda t: t)(numbered)
    got_leaves, got_treedef = tree_flatten(out)
    if got_treedef != treedef:
        return f"expected jax.jit(lambda t: t) to keep the structure {treedef}, got {got_treedef}"
    got = [float(v) for v in got_leaves]
    if got != list(range(len(leaves))):
        return f"expected jax.jit(lambda t: t) to keep the leaves in order, got leaves numbered {got}"
    return None


_LAW_FUNCTIONS: dict[str, Law] = {
    "round_trip": _round_trip,
    "keys_count": _keys_count,
    "keys_agree": _keys_agree,
    "deterministic": _deterministic,
    "node_data_hashable": _node_data_hashable,
    "survives_map": _survives_map,
    "jit": _jit,
}


def check_node_type(
    cls: type,
    instances: SearchStrategy[Any] | Iterable[Any],
    *,
    eq: Callable[[Any, Any], bool] | None = None,
    jit: bool | None = None,
    max_examples: int = 100,
) -> NodeTypeReport:
    """Check that the registration of ``cls`` obeys the node laws (:data:`LAWS`) on ``instances``.

    >>> from hypothesis import strategies as st
    >>> from treekit import register_pytree_node
    >>> class Point:
    ...     def __init__(self, x, y): self.x, self.y = x, y
    ...     def __repr__(self): return f'Point({self.x!r}, {self.y!r})'
    >>> register_pytree_node(Point, lambda p: ((p.y, p.x), None), lambda _, c: Point(*c))  # swaps x and y
    >>> check_node_type(Point, st.builds(Point, st.integers(), st.integers()), jit=False)
    Traceback (most recent call last):
    ...
    treekit.testing.NodeTypeLawError: Point breaks 2 of the pytree node laws:
      round_trip: expected unflatten(flatten(x)) == x, got Point(1, 0); x = Point(0, 1)
      survives_map: expected tree_map(lambda v: v, x) == x, got Point(1, 0); x = Point(0, 1)

    Args:
        cls: A registered node type (built-ins and namedtuple classes too).
        instances: A strategy for instances of ``cls`` (then each broken law is shown on a
            shrunk example), or an iterable of instances (each law is tried on each, in order).
            Their children may be any trees.
        eq: Equality for ``round_trip`` and ``survives_map``; default ``_tree_equal`` (same
            type, treedef and leaves), which works for classes without ``__eq__``; pass
            ``operator.eq`` to use the class's own ``==`` (it also sees attributes the
            registration leaves out).
        jit: Check the ``jit`` law: ``True`` always, ``False`` never; ``None`` (default) when
            jax can be imported and knows ``cls`` (else it is skipped, and the report says why).
        max_examples: Instances tried per law (the ``jit`` law tries at most 10: each compiles).

    Returns:
        A :class:`NodeTypeReport` of the laws that held and the ones skipped.

    Raises:
        NodeTypeLawError: If any law is broken (an ``AssertionError``); it lists every broken
            law with an example, and carries them as ``.broken``.
        TypeError: If ``cls`` is not registered, or an instance is not a ``cls``.
    """
    ntype = lookup(cls)
    if ntype is None:
        raise TypeError(f"cls: expected a registered node type, got {cls.__qualname__} (a leaf type)")
    equal = _tree_equal if eq is None else eq
    strategy = instances if isinstance(instances, SearchStrategy) else None
    examples = [] if strategy is not None else list(instances)  # type: ignore[arg-type]

    def run(law: Law, x: Any) -> str | None:
        if type(x) is not cls:
            raise TypeError(f"instances: expected instances of {cls.__qualname__}, got {type(x).__name__} {_short(x)}")
        try:
            return law(x, ntype, equal)
        except Exception as exc:
            return f"raised {type(exc).__name__}: {exc}"

    held: list[str] = []
    skipped: list[tuple[str, str]] = []
    broken: list[BrokenLaw] = []
    for name, law in _LAW_FUNCTIONS.items():
        if name == "jit":
            why = _skip_jit(jit, strategy, examples)
            if why:
                skipped.append((name, why))
                continue
        found = _first_broken(law, run, strategy, examples, min(max_examples, 10) if name == "jit" else max_examples)
        if found is None:
            held.append(name)
        else:
            broken.append(BrokenLaw(name, found[0], found[1]))
    if broken:
        raise NodeTypeLawError(cls, broken)
    return NodeTypeReport(cls, tuple(held), tuple(skipped))


def _skip_jit(jit: bool | None, strategy: SearchStrategy[Any] | None, examples: list[Any]) -> str | None:
    """Why the ``jit`` law is skipped, or ``None`` to check it."""
    if jit is not None:
        return None if jit else "jit=False"
    if importlib.util.find_spec("jax") is None:
        return "jax is not installed"
    if strategy is not None:
        examples = [find(strategy, lambda _: True, settings=settings(database=None, derandomize=True))]
    jax: Any = _jax.load()
    if examples and jax.tree_util.all_leaves(examples[:1]):
        return f"jax does not know {type(examples[0]).__qualname__} (register it with jax too)"
    return None


def _first_broken(
    law: Law,
    run: Callable[[Law, Any], str | None],
    strategy: SearchStrategy[Any] | None,
    examples: list[Any],
    max_examples: int,
) -> tuple[Any, str] | None:
    """The first instance (shrunk, for a strategy) that breaks ``law``, and the message."""
    if strategy is None:
        for x in examples:
            message = run(law, x)
            if message is not None:
                return x, message
        return None
    config = settings(
        max_examples=max_examples,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        phases=(Phase.generate, Phase.shrink),
    )
    try:
        x = find(strategy, lambda x: run(law, x) is not None, settings=config)
    except NoSuchExample:
        return None
    message = run(law, x)
    assert message is not None
    return x, message

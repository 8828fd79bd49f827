"""Hypothesis strategies for pytrees: random trees, trees of arrays, arrays shaped like a tree.

Public through :mod:`treekit.testing`. Imports hypothesis; numpy only when an array strategy
is built, jax only for ``jax_arrays=True``.
"""

from __future__ import annotations

import collections
import itertools
import math
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

from hypothesis import assume
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from treekit._describe import dtype_name, is_array
from treekit._keys import KeyPath, keystr
from treekit._ops import tree_flatten, tree_leaves_with_path, tree_map
from treekit._registry import lookup
from treekit._traverse import flatten
from treekit._treedef import TreeDef, as_treedef

__all__ = [
    "BUILTIN_NODE_TYPES",
    "NodeMaker",
    "Pair",
    "array_strategy",
    "array_trees",
    "arrays_like",
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
    max_leaves = _check_count("max_leaves", max_leaves)
    max_depth = _check_count("max_depth", max_depth)
    min_leaves = _check_count("min_leaves", min_leaves)
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


def same_structure_trees(
    n: int,
    leaves: SearchStrategy[Any] | None = None,
    node_types: Iterable[Any] | None = None,
    *,
    max_leaves: int = 10,
    max_depth: int = 4,
    min_leaves: int = 0,
    same_shapes: bool = False,
    allow_nan: bool = False,
    allow_infinity: bool = False,
) -> SearchStrategy[tuple[Any, ...]]:
    """A strategy for tuples of ``n`` trees that share one structure (for ``tree_map`` over several).

    >>> from hypothesis import find, settings
    >>> quick = settings(max_examples=100, database=None, derandomize=True)
    >>> a, b = find(same_structure_trees(2), lambda ab: isinstance(ab[0], list) and ab[0] != ab[1],
    ...             settings=quick)
    >>> type(a), len(a) == len(b)
    (<class 'list'>, True)

    With array leaves, ``same_shapes=True`` gives every tree the first tree's shapes and
    dtypes (params and their gradients):

    >>> from treekit import tree_leaves
    >>> params, grads = find(same_structure_trees(2, array_strategy(), same_shapes=True,
    ...                                           min_leaves=1), lambda t: True, settings=quick)
    >>> [x.shape for x in tree_leaves(params)] == [g.shape for g in tree_leaves(grads)]
    True

    Args:
        n: How many trees.
        leaves, node_types, max_leaves, max_depth, min_leaves: As in :func:`trees`; the
            structure is drawn first, then each tree's leaves.
        same_shapes: Draw the first tree's leaves from ``leaves``, and the other trees' array
            leaves with the matching leaf's shape, dtype and kind (numpy or jax) by
            :func:`arrays_like`; their other leaves come from ``leaves``.
        allow_nan, allow_infinity: For the arrays drawn by ``same_shapes``, as in
            :func:`arrays_like`.

    Raises:
        ValueError: If ``n`` is not an int >= 0, or as in :func:`trees`.
    """
    n = _check_count("n", n)
    shapes = trees(st.just(0), node_types, max_leaves=max_leaves, max_depth=max_depth, min_leaves=min_leaves)

    def fill(shape: Any) -> SearchStrategy[tuple[Any, ...]]:
        like = trees_like(tree_flatten(shape)[1], leaves)
        if not same_shapes or n == 0:
            return st.tuples(*[like] * n)
        return like.flatmap(
            lambda first: st.tuples(
                st.just(first),
                *[_shaped_like(first, leaves, allow_nan=allow_nan, allow_infinity=allow_infinity)] * (n - 1),
            )
        )

    return shapes.flatmap(fill)


def _elements(dtype: Any, allow_nan: bool, allow_infinity: bool) -> SearchStrategy[Any]:
    """Values of ``dtype``: ``|x| <= 1000`` for numbers, plus NaN / infinities when allowed."""
    import numpy as np
    from hypothesis.extra import numpy as hnp

    kwargs: dict[str, Any] = {}
    if dtype.kind in "fc":
        kwargs = {"allow_nan": False, "allow_infinity": False}
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        kwargs = {"min_value": max(info.min, -1000), "max_value": min(info.max, 1000)}
    if dtype.kind == "f":
        kwargs.update(min_value=-1000, max_value=1000)
    finite = hnp.from_dtype(dtype, **kwargs)
    special = [math.nan] * allow_nan + [math.inf, -math.inf] * allow_infinity
    if dtype.kind not in "fc" or not special:
        return finite
    return st.one_of(finite, st.sampled_from(special).map(dtype.type))


def _array(shape: Any, dtype: Any, allow_nan: bool, allow_infinity: bool) -> SearchStrategy[Any]:
    """numpy arrays of ``shape`` and ``dtype`` (``bfloat16`` drawn as float32, then cast)."""
    import numpy as np
    from hypothesis.extra import numpy as hnp

    try:
        dtype = np.dtype(dtype)
    except TypeError:
        if dtype_name(dtype) != "bfloat16":
            raise
        import ml_dtypes

        drawn = _array(shape, "float32", allow_nan, allow_infinity)
        return drawn.map(lambda x: x.astype(ml_dtypes.bfloat16))
    if dtype.kind == "V" and dtype.name == "bfloat16":
        return _array(shape, "float32", allow_nan, allow_infinity).map(lambda x: x.astype(dtype))
    return hnp.arrays(dtype, shape, elements=_elements(dtype, allow_nan, allow_infinity))


def _arrays(shapes: Any, dtypes: Any, allow_nan: bool = False, allow_infinity: bool = False) -> SearchStrategy[Any]:
    """numpy arrays of the given shapes and dtypes (see :func:`array_trees`)."""
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
    return dtypes.flatmap(  # type: ignore[no-any-return]
        lambda dtype: shapes.flatmap(lambda shape: _array(shape, dtype, allow_nan, allow_infinity))
    )


def _to_jax(strategy: SearchStrategy[Any], jax_arrays: bool) -> SearchStrategy[Any]:
    """``strategy``'s trees with every numpy array leaf made a jax array (if ``jax_arrays``)."""
    if not jax_arrays:
        return strategy
    try:
        import jax.numpy as jnp
    except ImportError as error:
        raise ImportError("jax_arrays=True needs jax, which is not installed") from error
    return strategy.map(lambda tree: tree_map(lambda x: jnp.asarray(x) if is_array(x) else x, tree))


def array_strategy(
    shapes: SearchStrategy[tuple[int, ...]] | Sequence[tuple[int, ...]] | None = None,
    dtypes: SearchStrategy[Any] | Sequence[Any] | None = None,
    *,
    jax_arrays: bool = False,
    allow_nan: bool = False,
    allow_infinity: bool = False,
) -> SearchStrategy[Any]:
    """A strategy for single arrays: the leaves :func:`array_trees` draws.

    >>> from hypothesis import find, settings
    >>> quick = settings(max_examples=100, database=None, derandomize=True)
    >>> x = find(array_strategy([(2,)], ['int8']), lambda x: True, settings=quick)
    >>> x.shape, x.dtype
    ((2,), dtype('int8'))

    Args:
        shapes: A strategy for shapes, or a sequence of shapes to choose from; default up to
            2 dimensions of up to 3 each (``()`` included).
        dtypes: A strategy for dtypes, or a sequence of dtypes to choose from; default
            float32, float64 and int32 (``bfloat16`` works too).
        jax_arrays: Give jax arrays instead of numpy arrays (needs jax).
        allow_nan: Let float and complex arrays hold NaN.
        allow_infinity: Let float and complex arrays hold ``inf`` and ``-inf``. Finite
            values are always within ``[-1000, 1000]``.

    Raises:
        ImportError: If ``jax_arrays`` is true and jax is not installed.
    """
    return _to_jax(_arrays(shapes, dtypes, allow_nan, allow_infinity), jax_arrays)


_DIM = st.integers(1, 3)  # a drawn size: a name, None, or a variadic dim of a spec
_BATCH = st.lists(_DIM, max_size=2).map(tuple)  # a drawn variadic dim


@st.composite
def _shapes_for(draw: st.DrawFn, specs: Sequence[Any]) -> list[tuple[int, ...]]:
    """Concrete shapes for ``specs``' shapes: a name's size (or a ``'*name'``'s dims) drawn
    once for all leaves, ``None`` and ``...`` drawn per leaf."""
    named: dict[Any, Any] = {}
    shapes = []
    for spec in specs:
        dims: list[int] = []
        for dim in tuple(spec.shape):
            if isinstance(dim, int):
                dims.append(dim)
            elif dim is None:
                dims.append(draw(_DIM))
            elif dim is Ellipsis:
                dims.extend(draw(_BATCH))
            elif isinstance(dim, str) and dim.startswith("*"):
                if dim not in named:
                    named[dim] = draw(_BATCH)
                dims.extend(named[dim])
            else:
                if dim not in named:
                    named[dim] = draw(_DIM)
                dims.append(named[dim])
        shapes.append(tuple(dims))
    return shapes


def arrays_like(
    tree_or_spec: Any,
    *,
    jax_arrays: bool = False,
    allow_nan: bool = False,
    allow_infinity: bool = False,
) -> SearchStrategy[Any]:
    """A strategy for trees of ``tree_or_spec``'s structure holding new arrays of its leaves'
    shapes and dtypes (gradients for params, batches for a spec).

    The leaves may be arrays (numpy, jax, ``jax.ShapeDtypeStruct``) or
    :class:`~treekit.ShapeDtype` specs: a named dim gets one drawn size (1 to 3) shared by every
    leaf, ``None`` one per leaf, a variadic ``'*name'`` one drawn run of 0 to 2 dims shared by
    every leaf, ``...`` one per leaf; a spec without a dtype gets float32.

    >>> import numpy as np
    >>> from hypothesis import find, settings
    >>> from treekit import ShapeDtype
    >>> quick = settings(max_examples=100, database=None, derandomize=True)
    >>> grads = find(arrays_like({'w': np.ones((2, 3), np.float32)}), lambda t: True, settings=quick)
    >>> grads['w'].shape, grads['w'].dtype
    ((2, 3), dtype('float32'))
    >>> spec = {'image': ShapeDtype(('*batch', 2, 2), 'u8'), 'label': ShapeDtype(('*batch',), 'i32')}
    >>> batch = find(arrays_like(spec), lambda b: b['label'].ndim == 1, settings=quick)
    >>> batch['image'].shape[:1] == batch['label'].shape, batch['image'].dtype
    (True, dtype('uint8'))

    Args:
        tree_or_spec: A tree whose leaves have ``shape`` and ``dtype``.
        jax_arrays: Give jax arrays instead of numpy arrays (needs jax).
        allow_nan, allow_infinity: As in :func:`array_strategy`.

    Raises:
        TypeError: If a leaf has no ``shape`` and ``dtype``; the message names its key path.
        ImportError: If ``jax_arrays`` is true and jax is not installed.
    """
    leaves, treedef, paths = flatten(tree_or_spec, with_path=True)
    assert paths is not None
    for path, leaf in zip(paths, leaves):
        if not is_array(leaf):
            raise TypeError(
                f"tree_or_spec{keystr(path)}: expected a leaf with shape and dtype, got {type(leaf).__name__}"
            )
    dtypes = ["float32" if leaf.dtype is None else leaf.dtype for leaf in leaves]

    def draw_arrays(shapes: list[tuple[int, ...]]) -> SearchStrategy[Any]:
        arrays = [_array(shape, dtype, allow_nan, allow_infinity) for shape, dtype in zip(shapes, dtypes)]
        return st.tuples(*arrays).map(lambda xs: treedef.unflatten(list(xs)))

    return _to_jax(_shapes_for(leaves).flatmap(draw_arrays), jax_arrays)


@st.composite
def _shaped_like(
    draw: st.DrawFn, first: Any, leaves: SearchStrategy[Any] | None, allow_nan: bool, allow_infinity: bool
) -> Any:
    """A tree of ``first``'s structure: arrays like its array leaves, ``leaves`` elsewhere."""
    out = []
    xs, treedef, _ = flatten(first)
    for x in xs:
        if is_array(x):
            new = draw(_array(tuple(x.shape), x.dtype, allow_nan, allow_infinity))
            out.append(_like_kind(new, x))
        else:
            out.append(draw(st.integers() if leaves is None else leaves))
    return treedef.unflatten(out)


def _like_kind(new: Any, old: Any) -> Any:
    """``new`` (a numpy array) as a jax array if ``old`` is one."""
    if type(old).__module__.startswith(("jax", "jaxlib")):
        import jax.numpy as jnp

        return jnp.asarray(new)
    return new


def array_trees(
    shapes: SearchStrategy[tuple[int, ...]] | Sequence[tuple[int, ...]] | None = None,
    dtypes: SearchStrategy[Any] | Sequence[Any] | None = None,
    node_types: Iterable[Any] | None = None,
    *,
    max_leaves: int = 10,
    max_depth: int = 4,
    min_leaves: int = 0,
    jax_arrays: bool = False,
    allow_nan: bool = False,
    allow_infinity: bool = False,
) -> SearchStrategy[Any]:
    """A strategy for trees whose leaves are arrays (numpy, or jax with ``jax_arrays=True``),
    with finite values (``|x| <= 1000``) unless NaN or infinities are allowed.

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
        node_types, max_leaves, max_depth, min_leaves: As in :func:`trees`.
        jax_arrays, allow_nan, allow_infinity: As in :func:`array_strategy`.

    Raises:
        ImportError: If ``jax_arrays`` is true and jax is not installed.
    """
    arrays = _arrays(shapes, dtypes, allow_nan, allow_infinity)
    tree = trees(arrays, node_types, max_leaves=max_leaves, max_depth=max_depth, min_leaves=min_leaves)
    return _to_jax(tree, jax_arrays)


def param_trees(
    layer_widths: Sequence[int] | SearchStrategy[Sequence[int]] | None = None,
    dtype: Any = "float32",
    *,
    jax_arrays: bool = False,
    allow_nan: bool = False,
    allow_infinity: bool = False,
) -> SearchStrategy[list[dict[str, Any]]]:
    """A strategy for MLP parameter trees: ``[{'weights': (n_in, n_out), 'biases': (n_out,)}, ...]``.

    The JAX pytree tutorial's layout (and ``python -m treekit demo``'s), with finite values
    (``|x| <= 1000``).

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
        jax_arrays, allow_nan, allow_infinity: As in :func:`array_strategy`.

    Raises:
        ValueError: If fixed ``layer_widths`` has fewer than 2 widths or a width below 1.
        ImportError: If ``jax_arrays`` is true and jax is not installed.
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
                    {
                        "weights": _arrays([(n_in, n_out)], [dtype], allow_nan, allow_infinity),
                        "biases": _arrays([(n_out,)], [dtype], allow_nan, allow_infinity),
                    }
                )
                for n_in, n_out in itertools.pairwise(ws)
            ]
        ).map(list)

    return _to_jax(widths.flatmap(layers), jax_arrays)


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

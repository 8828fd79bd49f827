"""Hypothesis strategies for trees of arrays: single arrays, arrays shaped like a tree, trees of
arrays and of model parameters, and trees of one structure."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from typing import Any

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from treekit.checks._strategies import check_count, trees, trees_like
from treekit.core import dtype_name, flatten, is_array, keystr
from treekit.ops import tree_flatten, tree_map

_DIM = st.integers(1, 3)  # a drawn size: a name, None, or a variadic dim of a spec
_BATCH = st.lists(_DIM, max_size=2).map(tuple)  # a drawn variadic dim

__all__ = ["array_strategy", "array_trees", "arrays_like", "param_trees", "same_structure_trees"]


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
    n = check_count("n", n)
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

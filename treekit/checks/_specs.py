"""Shape and dtype specs for trees: ShapeDtype, tree_spec, check_spec, assert_tree_shapes."""

from __future__ import annotations

from typing import Any

from treekit.checks._checks import Difference, align
from treekit.core import (
    Dim,
    IsLeaf,
    KeyPath,
    LeafPaths,
    ShapeDtype,
    StructureMismatchError,
    describe_leaf,
    dim_text,
    dtype_name,
    flatten,
    format_message,
    is_array,
    is_variadic,
    keystr,
)
from treekit.ops import tree_map

__all__ = [
    "ANY",
    "NON_ARRAY",
    "Dim",
    "ShapeDtype",
    "SpecMismatchError",
    "SpecWildcard",
    "assert_tree_shapes",
    "check_spec",
    "tree_spec",
]

class SpecWildcard:
    """A spec leaf that stands for what a tree holds there without a shape: :data:`ANY` or
    :data:`NON_ARRAY`. Only those two exist; they pickle as themselves.

    >>> import numpy as np
    >>> batch = {'image': ShapeDtype(('*batch', 4)), 'text': NON_ARRAY, 'meta': ANY}
    >>> check_spec({'image': np.zeros((2, 4)), 'text': ['a cat', 'a dog'], 'meta': np.ones(1)}, batch)
    {'*batch': (2,)}
    >>> check_spec({'image': np.zeros((2, 4)), 'text': np.zeros(2), 'meta': None}, batch)
    Traceback (most recent call last):
    ...
    treekit.SpecMismatchError: tree does not match the spec: 1 problem
    tree['text']: expected NON_ARRAY (anything but an array), got f64[2]
    """

    __slots__ = ("_arrays", "_name")

    def __init__(self, name: str, arrays: bool) -> None:
        self._name, self._arrays = name, arrays

    def __repr__(self) -> str:
        return self._name

    def __reduce__(self) -> str:
        return self._name

    def problem(self, x: Any) -> str | None:
        """What is wrong with leaf ``x`` in this wildcard's place (the ``got`` text), or ``None``."""
        return describe_leaf(x) if not self._arrays and is_array(x) else None


def _spread_wildcards(wants: list[Any], spec_def: Any, tree: Any, is_leaf: IsLeaf | None) -> Any:
    """The spec of leaves ``wants`` with each wildcard spread over the subtree ``tree`` has in
    its place (a wildcard per leaf, so a subtree matches it), where ``tree`` has one there;
    one guided walk."""
    errors: list[tuple[int, int, StructureMismatchError]] = []
    try:
        subtrees = spec_def._guide(tree, "tree", False, is_leaf, None, errors)
    except Exception:  # a flatten function raised: the structural check reports it
        return spec_def._build(wants)
    placed = [True] * len(wants)
    for start, stop, _ in errors:  # under a mismatched node: nothing to spread over
        placed[start:stop] = [False] * (stop - start)
    out = [
        tree_map(lambda _, want=want: want, sub, is_leaf=is_leaf) if type(want) is SpecWildcard and ok else want
        for want, sub, ok in zip(wants, subtrees, placed)
    ]
    return spec_def._build(out)


ANY = SpecWildcard("ANY", True)
"""A spec leaf matching whatever the tree holds there: any leaf, or a whole subtree (as an
HF batch's list of strings)."""

NON_ARRAY = SpecWildcard("NON_ARRAY", False)
"""A spec leaf matching any leaf or subtree that holds no array (a string column, an equinox
Module's activation function); what :func:`tree_spec` gives for leaves without shape and dtype."""


def _not_array(label: str, path: KeyPath, x: Any) -> str:
    return format_message(
        label, path, "a leaf with shape and dtype", f"{type(x).__name__} {describe_leaf(x, 40)}", None, None
    )


def tree_spec(tree: Any, *, is_leaf: IsLeaf | None = None) -> Any:
    """The tree of :class:`ShapeDtype` of ``tree``'s array leaves (what ``check_spec`` takes),
    with :data:`NON_ARRAY` for its other leaves, so ``check_spec(tree, tree_spec(tree))`` holds.

    >>> import numpy as np
    >>> tree_spec({'w': np.zeros((3, 4), np.float32), 'b': [np.zeros(4, np.int8)], 'act': 'relu'})
    {'w': ShapeDtype(shape=(3, 4), dtype='float32'), 'b': [ShapeDtype(shape=(4,), dtype='int8')], 'act': NON_ARRAY}

    Args:
        tree: A tree whose leaves have ``shape`` and ``dtype`` (numpy or jax arrays,
            ``jax.ShapeDtypeStruct``, ...).
        is_leaf: As in :func:`treekit.tree_flatten`.

    Returns:
        ``tree`` with each array leaf replaced by its :class:`ShapeDtype` and each other leaf
        (a string, a function, a Python number) by :data:`NON_ARRAY`.
    """
    return tree_map(lambda x: ShapeDtype(tuple(x.shape), x.dtype) if is_array(x) else NON_ARRAY, tree, is_leaf=is_leaf)


def _is_spec_leaf(x: Any) -> bool:
    return is_array(x) or type(x) is SpecWildcard


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _shape_text(shape: tuple[Any, ...]) -> str:
    dims = [dim_text(d) for d in shape]
    return f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(dims)})"


def _spec_problems(tree: Any, spec: Any, is_leaf: IsLeaf | None, spec_label: str) -> tuple[list[str], dict[str, Any]]:
    """Every way ``tree`` fails ``spec``, one line each in leaf order; and the named dims bound."""
    wants, spec_def, _ = flatten(spec)
    spec_paths = LeafPaths(spec, spec_def)
    bad = [_not_array(spec_label, spec_paths[i], w) for i, w in enumerate(wants) if not _is_spec_leaf(w)]
    if bad:
        raise TypeError(
            f"{spec_label}: expected ShapeDtype leaves (or leaves with shape and dtype, ANY or NON_ARRAY), got "
            f"{_count(len(bad), 'other leaf', 'other leaves')}\n" + "\n".join(bad)
        )
    if any(type(w) is SpecWildcard for w in wants):
        spec = _spread_wildcards(wants, spec_def, tree, is_leaf)
    lines: list[str] = []
    bound: dict[str, tuple[Any, int]] = {}  # a named dim's size and the leaf that bound it
    items, paths = align(spec, tree, "tree", None, is_leaf)
    for item in items:
        if type(item) is Difference:
            lines.append(item.line("tree"))
            continue
        i, want, x = item
        if type(want) is SpecWildcard:
            got_text = want.problem(x)
            if got_text is not None:
                expected = f"{want!r} (anything but an array)"
                lines.append(format_message("tree", paths[i], expected, got_text, None, None))
            continue
        if type(want) is not ShapeDtype:
            want = ShapeDtype(tuple(want.shape), want.dtype)
        expected = str(want) if want.dtype is not None else f"shape {_shape_text(want.shape)}"
        if not is_array(x):
            got_text = f"{type(x).__name__} {describe_leaf(x, 40)}"
            lines.append(format_message("tree", paths[i], expected, got_text, "no shape or dtype", None))
            continue
        got = tuple(x.shape)
        words = []
        if want.dtype is not None and dtype_name(x.dtype) != dtype_name(want.dtype):
            words.append(f"dtype {dtype_name(x.dtype)}, not {dtype_name(want.dtype)}")
        words += _dim_problems(got, want.shape, i, paths, bound)
        if words:
            got_text = describe_leaf(x) if want.dtype is not None else f"shape {_shape_text(got)}"
            lines.append(format_message("tree", paths[i], expected, got_text, "; ".join(words), None))
    return lines, {name: size for name, (size, _) in bound.items()}


def _dim_problems(
    got: tuple[int, ...], shape: tuple[Any, ...], i: int, paths: LeafPaths, bound: dict[str, tuple[Any, int]]
) -> list[str]:
    """How leaf ``i``'s shape ``got`` fails ``shape`` (binding named dims in ``bound``), in words."""
    variadic = next((axis for axis, dim in enumerate(shape) if is_variadic(dim)), None)
    if variadic is None:
        if len(got) != len(shape):
            return [f"rank {len(got)}, not {len(shape)}"]
        pairs = list(enumerate(zip(got, shape)))
    else:
        fixed = len(shape) - 1
        if len(got) < fixed:
            return [f"rank {len(got)}, not at least {fixed}"]
        after = len(got) - (fixed - variadic)  # the first axis after the variadic dims
        pairs = [(axis, (got[axis], shape[axis])) for axis in range(variadic)]
        pairs += [(after + k, (got[after + k], dim)) for k, dim in enumerate(shape[variadic + 1 :])]
    words = []
    if variadic is not None and shape[variadic] is not Ellipsis:
        name, dims = shape[variadic], got[variadic:after]
        first = bound.setdefault(name, (dims, i))
        if first[0] != dims:
            where = f"dim {variadic}" if len(dims) == 1 else f"dims {variadic}-{after - 1}"
            where = f"no dims at {variadic}" if not dims else f"{where} {'is' if len(dims) == 1 else 'are'} {dims}"
            words.append(f"{where}, but {name} is {first[0]} at tree{keystr(paths[first[1]])}")
    for axis, (size, dim) in pairs:
        if dim is None:
            continue
        if isinstance(dim, str):
            first = bound.setdefault(dim, (size, i))
            if first[0] != size:
                words.append(f"dim {axis} is {size}, but {dim} is {first[0]} at tree{keystr(paths[first[1]])}")
        elif size != dim:
            words.append(f"dim {axis} is {size}, not {dim}")
    return words


class SpecMismatchError(AssertionError, ValueError):
    """What :func:`check_spec` raises: an ``AssertionError``, as every assertion helper's error
    is, and a ``ValueError``, as it was before (``except ValueError`` still catches it).

    >>> import numpy as np
    >>> try:
    ...     check_spec({'x': np.zeros(2)}, {'x': ShapeDtype((3,), 'f64')})
    ... except AssertionError as err:
    ...     print(type(err).__name__, isinstance(err, ValueError))
    SpecMismatchError True
    """

    __module__ = "treekit"


def check_spec(tree: Any, spec: Any, *, is_leaf: IsLeaf | None = None) -> dict[str, Any]:
    """Check ``tree`` against ``spec`` (structure, dtypes, shapes); return the named dims' sizes.

    ``spec`` is a tree of :class:`ShapeDtype` (or of anything with ``shape`` and ``dtype``, such
    as ``jax.ShapeDtypeStruct``); a named dim takes its size from the first leaf (in leaf order)
    that has it, and every other leaf must agree. jax is never imported.

    >>> import numpy as np
    >>> spec = {'x': ShapeDtype(('batch', 3), 'f32'), 'y': ShapeDtype(('batch',), 'i32')}
    >>> check_spec({'x': np.zeros((8, 3), np.float32), 'y': np.zeros(8, np.int32)}, spec)
    {'batch': 8}
    >>> check_spec({'x': np.zeros((8, 4), np.float32), 'y': np.zeros(5, np.int64)}, spec)
    Traceback (most recent call last):
    ...
    treekit.SpecMismatchError: tree does not match the spec: 2 problems
    tree['x']: expected f32[batch,3], got f32[8,4] (dim 1 is 4, not 3)
    tree['y']: expected i32[batch], got i64[5] (dtype int64, not int32; dim 0 is 5, but batch is 8 at tree['x'])

    Args:
        tree: The tree to check.
        spec: The tree of specs; its structure is the reference.
        is_leaf: Applies to ``tree``, as in :func:`treekit.tree_flatten`.

    A variadic ``'*name'`` dim matches the same run of dims in every leaf (its value is a
    tuple, under the key ``'*name'``), ``...`` any dims:

    >>> batch = {'image': ShapeDtype(('*batch', 28, 28), 'u8'), 'label': ShapeDtype(('*batch',), 'i64')}
    >>> check_spec({'image': np.zeros((32, 28, 28), np.uint8), 'label': np.zeros(32, np.int64)}, batch)
    {'*batch': (32,)}
    >>> check_spec({'image': np.zeros((28, 28), np.uint8), 'label': np.zeros((), np.int64)}, batch)
    {'*batch': ()}

    A spec leaf :data:`ANY` matches whatever ``tree`` holds there (a leaf or a subtree),
    :data:`NON_ARRAY` whatever holds no array (a string column, a Module's activation).

    Returns:
        A dict from each named dim of ``spec`` to the size it has in ``tree`` (a tuple of sizes
        for a ``'*name'`` dim).

    Raises:
        SpecMismatchError: An ``AssertionError`` and a ``ValueError``, listing every problem,
            one line per key path: structural differences,
            leaves without shape or dtype, wrong dtypes, ranks and dims.
        TypeError: If a leaf of ``spec`` is neither a spec (shape and dtype) nor ``ANY`` or
            ``NON_ARRAY``.
    """
    __tracebackhide__ = True
    lines, dims = _spec_problems(tree, spec, is_leaf, "spec")
    if lines:
        count = _count(len(lines), "problem", "problems")
        raise SpecMismatchError(f"tree does not match the spec: {count}\n" + "\n".join(lines))
    return dims


def _is_shape(x: Any) -> bool:
    return type(x) is tuple and all(
        d is None or d is Ellipsis or (isinstance(d, (int, str)) and not isinstance(d, bool)) for d in x
    )


def assert_tree_shapes(tree: Any, shapes_tree: Any, *, is_leaf: IsLeaf | None = None) -> None:
    """Assert each leaf of ``tree`` has the shape at the same key path of ``shapes_tree``.

    ``shapes_tree`` has ``tree``'s structure with a shape tuple at each leaf; its dims may be
    ``None`` or names, as in :class:`ShapeDtype` (tuples of ints, strings and ``None`` are
    shapes, not nodes, there).

    >>> import numpy as np
    >>> params = [{'w': np.zeros((2, 3)), 'b': np.zeros(3)}, {'w': np.zeros((3, 1)), 'b': np.zeros(2)}]
    >>> assert_tree_shapes(params, [{'w': (2, 'h'), 'b': ('h',)}, {'w': ('h', 1), 'b': (1,)}])
    Traceback (most recent call last):
    ...
    AssertionError: tree does not have the shapes of shapes_tree: 1 problem
    tree[1]['b']: expected shape (1,), got shape (2,) (dim 0 is 2, not 1)

    Args:
        tree: The tree to check.
        shapes_tree: ``tree``'s structure with a shape tuple (or an array, whose shape is used)
            at each leaf.
        is_leaf: Applies to ``tree``, as in :func:`treekit.tree_flatten`.

    Raises:
        AssertionError: Listing every leaf whose shape differs, and structural differences.
        TypeError: If a leaf of ``shapes_tree`` is neither a shape tuple nor an array.
    """
    __tracebackhide__ = True
    spec = tree_map(
        lambda s: ShapeDtype(s) if _is_shape(s) else ShapeDtype(tuple(s.shape)) if is_array(s) else s,
        shapes_tree,
        is_leaf=_is_shape,
    )
    lines, _ = _spec_problems(tree, spec, is_leaf, "shapes_tree")
    if lines:
        raise AssertionError(
            f"tree does not have the shapes of shapes_tree: {_count(len(lines), 'problem', 'problems')}\n"
            + "\n".join(lines)
        )

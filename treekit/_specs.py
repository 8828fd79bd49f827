"""Shape and dtype specs for trees: ShapeDtype, tree_spec, check_spec, assert_tree_shapes."""

from __future__ import annotations

import dataclasses
import numbers
import re
from collections.abc import Iterable, Mapping, Set
from types import EllipsisType
from typing import Any, Union

from treekit._checks import Difference, align
from treekit._describe import SHORT_DTYPES, describe_leaf, dim_text, dtype_name, is_array, is_key_dtype
from treekit._errors import StructureMismatchError, format_message, safe_repr
from treekit._keys import KeyPath, keystr
from treekit._ops import tree_map
from treekit._traverse import IsLeaf, LeafPaths, flatten

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

Dim = Union[int, str, None, EllipsisType]
"""One dimension of a spec: a size, a name that must agree across leaves, ``None`` (any size),
or a variadic dim standing for any number of dims: ``'*name'`` (the same dims in every leaf
that has it) or ``...`` (any dims, leaf by leaf). A shape has at most one variadic dim."""

_LONG = {short: long for long, short in SHORT_DTYPES.items()}


# Names numpy does not know without ml_dtypes registered (jax's extra dtypes) or at all
# (torch's): kept as given. ``_KEPT_NAMES`` are name forms kept as given too: numpy's names of
# sized flexible dtypes (``str96``), jax's PRNG key dtypes (``key<fry>``), ``torch.int8``.
_EXTRA_NAMES = frozenset(
    ["bfloat16", "bcomplex32", "complex32", "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn"]
    + [f"float8_{kind}" for kind in ("e3m4", "e4m3", "e4m3b11fnuz", "e4m3fn", "e4m3fnuz", "e5m2")]
    + [f"float8_{kind}" for kind in ("e5m2fnuz", "e5m3fnu", "e8m0fnu")]
    + [f"{sign}int{n}" for sign in ("", "u") for n in range(1, 8)]
    + ["qint8", "quint8", "qint32", "quint4x2", "quint2x4", "bits1x8", "bits2x4", "bits4x2", "bits8", "bits16"]
)
_KEPT_NAMES = re.compile(r"(?:bytes|str|void)\d+|key<[^<>]+>|torch\.\w+")
_DTYPE_EXPECTED = "a dtype or a dtype name ('float32', 'f32', 'bfloat16', numpy.float32, ...)"


def _canonical_dtype(dtype: Any) -> Any:
    """``dtype``'s name, as numpy spells it where numpy knows it (a typed PRNG key's dtype
    object is kept); raises TypeError for what is no dtype (``'f33'``, ``3.5``)."""
    if dtype is None:
        return None
    if isinstance(dtype, str) and dtype in _LONG:
        return _LONG[dtype]
    import numpy as np

    try:
        return str(np.dtype(dtype).name)
    except Exception:  # TypeError mostly; numpy raises others on some malformed strings
        pass
    if isinstance(dtype, str):
        if dtype in _EXTRA_NAMES or _KEPT_NAMES.fullmatch(dtype):
            return dtype
        raise TypeError(f"dtype: expected {_DTYPE_EXPECTED}, got {safe_repr(dtype, 60)}")
    if is_key_dtype(dtype):
        return dtype  # kept: numpy cannot read its name back, and flax's reprs read its itemsize
    if isinstance(getattr(dtype, "name", None), str) or isinstance(dtype, type) or type(dtype).__module__ == "torch":
        return dtype_name(dtype)  # a dtype object of another library (torch's)
    raise TypeError(f"dtype: expected {_DTYPE_EXPECTED}, got {type(dtype).__name__} {safe_repr(dtype, 60)}")


def _shape_tuple(shape: Any) -> tuple[Any, ...]:
    """``shape`` as a tuple, or a TypeError for a value that is no sequence of dims."""
    if isinstance(shape, (str, bytes, Mapping, Set)) or not isinstance(shape, Iterable):
        got = "None" if shape is None else f"{type(shape).__name__} {safe_repr(shape, 60)}"
        message = f"shape: expected a tuple of dims (ints >= 0, names, None or ...), got {got}"
        size: Any = shape  # (not narrowed by the isinstance above)
        if _is_size(size):
            message += f"\nwrite ({int(size)},) for a shape of one dim"
        elif isinstance(shape, str):
            message += f"\nwrite ({shape!r},) for a shape of one named dim"
        raise TypeError(message)
    return tuple(shape)


@dataclasses.dataclass(frozen=True, eq=False)
class ShapeDtype:
    """What an array leaf must look like: a shape whose dims may be names or ``None``, a dtype.

    A leaf of a tree (not a node). ``shape`` is a tuple (or list, or other sequence) of dims;
    a bare int is refused, as ``jax.ShapeDtypeStruct`` refuses it (write ``(5,)``), and so
    is a string (it would be read as one dim per character). ``dtype`` is kept as its name
    (``'float32'``; ``'f32'``, ``numpy.float32`` and ``jnp.float32`` are accepted, and the
    names of jax's extra dtypes, ``'bfloat16'``, ``'float8_e4m3fn'``, ``'int4'``, whether or
    not ml_dtypes is imported); ``None`` allows any dtype. The one dtype kept as given is a
    typed PRNG key's (``jax.random.key(0).dtype``, shown ``key<fry>``): numpy cannot read its
    name back, and libraries that size a spec leaf (flax's reprs of nnx ``State``) need its
    ``itemsize``. Specs compare by dtype name, so ``ShapeDtype((), 'key<fry>')`` equals the
    spec of a key.

    >>> spec = ShapeDtype(('batch', None, 3), 'f32')
    >>> spec, str(spec)
    (ShapeDtype(shape=('batch', None, 3), dtype='float32'), 'f32[batch,?,3]')

    Variadic dims stand for any number of dims: ``'*batch'`` for the same leading dims in
    every leaf (an HF dataset's batch, ``{'image': (B, 28, 28), 'label': (B,)}``, or one with
    no batch dim at all), ``...`` for any dims, leaf by leaf:

    >>> str(ShapeDtype(('*batch', 28, 28), 'u8')), str(ShapeDtype((..., 3)))
    ('u8[*batch,28,28]', '?[...,3]')

    A shape is a sequence even for one dim, as in ``jax.ShapeDtypeStruct``:

    >>> ShapeDtype(5, 'f32')
    Traceback (most recent call last):
    ...
    TypeError: shape: expected a tuple of dims (ints >= 0, names, None or ...), got int 5
    write (5,) for a shape of one dim

    Raises:
        TypeError: If ``shape`` is not a sequence of dims (``ShapeDtype(5, 'f32')``:
            ``shape: expected a tuple of dims (ints >= 0, names, None or ...), got int 5``), or
            ``dtype`` is neither a dtype nor a dtype name (``'f33'``; the message names it).
        ValueError: If a dim is none of an int >= 0, a str, ``None`` or ``...``, or a shape
            has more than one variadic dim.
    """

    shape: tuple[Dim, ...]
    dtype: Any = None
    """The dtype's name (``'float32'``), ``None`` (any dtype), or a typed PRNG key's dtype."""

    def __post_init__(self) -> None:
        shape = _shape_tuple(self.shape)
        for axis, dim in enumerate(shape):
            if not (dim is None or dim is Ellipsis or isinstance(dim, str) or _is_size(dim)):
                raise ValueError(f"shape[{axis}]: expected an int >= 0, a name, None or ..., got {dim!r}")
        if sum(map(_is_variadic, shape)) > 1:
            raise ValueError(f"shape: expected at most one variadic dim ('*name' or ...), got {shape!r}")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", _canonical_dtype(self.dtype))

    def __str__(self) -> str:
        return describe_leaf(self)

    def __eq__(self, other: object) -> bool:
        if type(other) is not ShapeDtype:
            return NotImplemented
        return self.shape == other.shape and _name(self.dtype) == _name(other.dtype)

    def __hash__(self) -> int:
        return hash((self.shape, _name(self.dtype)))


def _name(dtype: Any) -> str | None:
    return None if dtype is None else dtype_name(dtype)


def _is_size(dim: Any) -> bool:
    return isinstance(dim, numbers.Integral) and not isinstance(dim, bool) and int(dim) >= 0


def _is_variadic(dim: Any) -> bool:
    return dim is Ellipsis or (isinstance(dim, str) and dim.startswith("*"))


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
    variadic = next((axis for axis, dim in enumerate(shape) if _is_variadic(dim)), None)
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

"""What an array leaf must look like: ShapeDtype (a shape whose dims may be names, a dtype), the
leaf of specs, shardings' examples and checkpoint headers; checks/ checks trees against them."""

from __future__ import annotations

import dataclasses
import numbers
import re
from collections.abc import Iterable, Mapping, Set
from types import EllipsisType
from typing import Any, Union

from treekit.core._describe import SHORT_DTYPES, describe_leaf, dtype_name, is_key_dtype
from treekit.core._errors import safe_repr

__all__ = ["Dim", "ShapeDtype", "is_variadic"]

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
        if sum(map(is_variadic, shape)) > 1:
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


def is_variadic(dim: Any) -> bool:
    return dim is Ellipsis or (isinstance(dim, str) and dim.startswith("*"))

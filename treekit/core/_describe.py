"""How a leaf is shown in messages and tables: arrays as ``f32[4,4]``, never their contents;
and text that came from a file, escaped (:func:`printable`).

Duck-typed on ``shape`` and ``dtype``, so numpy, jax and torch arrays and ShapeDtypeStructs
work without importing their libraries.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "describe_leaf",
    "dtype_name",
    "is_array",
    "is_key_dtype",
    "itemsize",
    "leaf_size",
    "printable",
    "shape_text",
    "short_dtype",
]

SHORT_DTYPES = {
    "bool": "bool",
    "bfloat16": "bf16",
    "float16": "f16",
    "float32": "f32",
    "float64": "f64",
    "complex64": "c64",
    "complex128": "c128",
    **{f"int{n}": f"i{n}" for n in (8, 16, 32, 64)},
    **{f"uint{n}": f"u{n}" for n in (8, 16, 32, 64)},
}


def is_array(x: Any) -> bool:
    """Whether ``x`` has a ``shape`` (a tuple) and a ``dtype`` (numpy, jax, torch arrays,
    ShapeDtypeStructs); anything else is described as a plain leaf.

    >>> import numpy as np
    >>> is_array(np.zeros(3)), is_array(np.float32(1)), is_array(1.0), is_array('abc')
    (True, True, False, False)
    """
    return isinstance(getattr(x, "shape", None), tuple) and hasattr(x, "dtype")


def leaf_size(x: Any) -> tuple[int | None, int | None]:
    """``(entries, bytes)`` that leaf ``x`` adds to a tree's sizes (:func:`treekit.tree_size`,
    ``tree_bytes``, ``summary``, ``view``): an array's (:func:`is_array`) size and ``nbytes``
    (from its shape and dtype where it has no ``nbytes``); ``(0, 0)`` for any other leaf (a
    Python number, a function, a string), as flax and equinox count parameters; ``None``
    where a dim or the dtype's size is unknown (an abstract array).

    >>> import numpy as np
    >>> leaf_size(np.zeros((3, 4), np.float32)), leaf_size(np.float64(2)), leaf_size(2.0), leaf_size(print)
    ((12, 48), (1, 8), (0, 0), (0, 0))
    """
    if not is_array(x):
        return 0, 0
    size = 1
    for dim in x.shape:
        if not isinstance(dim, int):
            return None, None
        size *= dim
    nbytes = getattr(x, "nbytes", None)
    if not isinstance(nbytes, int):
        size_of_one = itemsize(x.dtype)
        nbytes = None if size_of_one is None else size * size_of_one
    return size, nbytes


def shape_text(x: Any) -> str:
    """``x``'s shape as a tuple's text, or its type and ``(no shape)``.

    >>> import numpy as np
    >>> shape_text(np.zeros((2, 3))), shape_text(1.5)
    ('(2, 3)', 'float (no shape)')
    """
    shape = getattr(x, "shape", None)
    return str(tuple(shape)) if isinstance(shape, tuple) else f"{type(x).__name__} (no shape)"


def dtype_name(dtype: Any) -> str:
    """The name of a dtype, without importing its library: ``float32``, ``bfloat16``, ``int8``.

    Works on numpy dtypes (which jax uses), scalar types and torch dtypes.

    >>> import numpy as np
    >>> dtype_name(np.dtype('float32')), dtype_name(np.int8), dtype_name('bool')
    ('float32', 'int8', 'bool')
    """
    if isinstance(dtype, str):
        return dtype
    try:
        return _NAMES[dtype]  # (numpy computes a dtype's name in Python: 3 us; this, 50 ns)
    except (KeyError, TypeError):
        pass
    name = getattr(dtype, "name", None)
    if not isinstance(name, str):
        text = dtype.__name__ if isinstance(dtype, type) else str(dtype)
        name = text[6:] if text.startswith("torch.") else text
    if len(_NAMES) < _NAMES_LIMIT:
        try:
            _NAMES[dtype] = name
        except TypeError:  # unhashable
            pass
    return name


_NAMES: dict[Any, str] = {}  # dtype -> its name; dtypes are few (at most _NAMES_LIMIT kept)
_NAMES_LIMIT = 512


def is_key_dtype(dtype: Any) -> bool:
    """Whether ``dtype`` is a typed PRNG key's (``jax.random.key(0).dtype``, named
    ``key<fry>``): an array of them holds keys, not numbers (no values to read or sum).

    >>> import numpy as np
    >>> is_key_dtype(np.dtype('uint32')), is_key_dtype('key<fry>')
    (False, True)
    """
    name = dtype_name(dtype)
    return name.startswith("key<") and name.endswith(">")


def is_inexact_dtype(dtype: Any) -> bool:
    """Whether ``dtype`` holds floating-point or complex numbers (``bfloat16`` and the
    ``float8_*`` types of ml_dtypes too, which numpy files under kind ``'V'``).

    >>> import numpy as np
    >>> is_inexact_dtype(np.float16), is_inexact_dtype(np.complex64), is_inexact_dtype(np.int8)
    (True, True, False)
    """
    return dtype_name(dtype).startswith(("float", "bfloat", "complex"))


def itemsize(dtype: Any) -> int | None:
    """Bytes per entry of ``dtype`` (numpy's, jax's, torch's or a name); ``None`` if unknown.

    >>> import numpy as np
    >>> itemsize(np.dtype('float32')), itemsize('bfloat16'), itemsize('no such dtype')
    (4, 2, None)
    """
    size = getattr(dtype, "itemsize", None)
    if isinstance(size, int):
        return size
    import numpy as np

    name = dtype_name(dtype)
    try:
        return int(np.dtype(name).itemsize)
    except TypeError:
        pass
    try:  # jax's extra dtypes (bfloat16, float8_*, int4) come from ml_dtypes
        import ml_dtypes
    except ImportError:
        return None
    try:
        return int(np.dtype(getattr(ml_dtypes, name, name)).itemsize)
    except TypeError:
        return None


def short_dtype(dtype: Any) -> str:
    """``f32`` for float32, ``bf16`` for bfloat16, ``i8`` for int8; other names unchanged.

    >>> short_dtype('float32'), short_dtype('uint8'), short_dtype('float8_e4m3fn')
    ('f32', 'u8', 'float8_e4m3fn')
    """
    name = dtype_name(dtype)
    return SHORT_DTYPES.get(name, name)


def dim_text(dim: Any) -> str:
    return "?" if dim is None else "..." if dim is Ellipsis else str(dim)


def describe_leaf(x: Any, width: int = 60) -> str:
    """A leaf in a few characters: arrays as ``f32[4,4]`` (never their contents), others by ``repr``.

    A ``None`` dtype or dim (in a spec) shows as ``?``, an ``...`` dim as ``...``.

    >>> import numpy as np
    >>> describe_leaf(np.zeros((4, 4), np.float32)), describe_leaf(np.int64(3)), describe_leaf('relu')
    ('f32[4,4]', 'i64[]', "'relu'")
    >>> describe_leaf('x' * 100, width=12)
    "'xxxxxxxx..."
    """
    if is_array(x):
        dtype = "?" if x.dtype is None else short_dtype(x.dtype)
        return f"{dtype}[{','.join(dim_text(d) for d in x.shape)}]"
    text = repr(x)
    return text if len(text) <= width else text[: width - 3] + "..."


def printable(text: object, limit: int = 200) -> str:
    r"""``text`` (a name, key or message that came from a file) as it may be shown in a message or
    on a terminal: every character that is not printable escaped as Python escapes it (an escape
    sequence cannot retitle a terminal or fake a line), cut to ``limit`` characters.

    >>> print(printable('nomod:x\x1b]0;PWNED\x07\r'))
    nomod:x\x1b]0;PWNED\x07\r
    >>> printable('ok: Linear'), len(printable('x' * 500))
    ('ok: Linear', 201)
    """
    text = str(text)
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text if len(text) <= limit else text[:limit] + "\N{HORIZONTAL ELLIPSIS}"

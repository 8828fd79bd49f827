"""The dtype codes of the safetensors layout: each code's numpy dtype, and each dtype's code."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from treekit.core import dtype_name

if TYPE_CHECKING:
    import numpy as np

__all__ = ["CODES", "SIZES", "code_of", "dtype_of"]

# code: (numpy dtype name, item size); the names are those safetensors' Python binding maps.
CODES = {
    "F64": ("float64", 8), "F32": ("float32", 4), "F16": ("float16", 2), "BF16": ("bfloat16", 2),
    "I64": ("int64", 8), "I32": ("int32", 4), "I16": ("int16", 2), "I8": ("int8", 1),
    "U64": ("uint64", 8), "U32": ("uint32", 4), "U16": ("uint16", 2), "U8": ("uint8", 1),
    "BOOL": ("bool", 1), "C64": ("complex64", 8),
    "F8_E4M3": ("float8_e4m3fn", 1), "F8_E5M2": ("float8_e5m2", 1), "F8_E8M0": ("float8_e8m0fnu", 1),
    "F8_E4M3FNUZ": ("float8_e4m3fnuz", 1), "F8_E5M2FNUZ": ("float8_e5m2fnuz", 1),
}  # fmt: skip
_BY_NAME = {name: code for code, (name, _) in CODES.items()}
SIZES = {code: size for code, (_, size) in CODES.items()}
_SEEN: dict[Any, str | None] = {}  # code_of's answers, by numpy dtype
_LAST: tuple[Any, str | None] = (object(), None)  # code_of's last dtype object, and its answer
_ML_DTYPES = frozenset(name for name, _ in CODES.values() if name.startswith(("bfloat", "float8")))


def dtype_of(code: str) -> np.dtype[Any]:
    """The numpy dtype of a safetensors dtype code.

    >>> dtype_of('F32'), dtype_of('BOOL')
    (dtype('float32'), dtype('bool'))

    Raises:
        ValueError: If ``code`` is not one of the codes above.
        ModuleNotFoundError: If ``code`` is ``BF16`` or ``F8_*`` and ``ml_dtypes`` is missing.
    """
    import numpy as np

    if code not in CODES:
        raise ValueError(f"dtype code: expected one of {', '.join(CODES)}, got {repr(code)[:40]}")
    name = CODES[code][0]
    if name not in _ML_DTYPES:
        native = np.dtype(name)
        return native if sys.byteorder == "little" else native.newbyteorder("<")  # the file's byte order
    try:
        import ml_dtypes
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(f"dtype {code} needs the ml_dtypes package (it comes with jax)") from exc
    dtype: np.dtype[Any] = np.dtype(getattr(ml_dtypes, name))
    return dtype


def code_of(dtype: Any) -> str | None:
    """The safetensors code of a dtype, or ``None`` if the file layout has none for it.

    ``None`` for big-endian dtypes too (files are little-endian): the caller converts, or stores
    the raw bytes as ``U8`` and records the dtype itself.

    >>> code_of('float32'), code_of(bool), code_of('complex128'), code_of('>i4')
    ('F32', 'BOOL', None, None)
    """
    global _LAST
    last = _LAST
    if dtype is last[0]:  # (a checkpoint asks once per array, and its arrays share a dtype object or a few)
        return last[1]
    import numpy as np

    if isinstance(dtype, np.dtype):
        if dtype in _SEEN:  # (the few dtypes remembered)
            _LAST = (dtype, _SEEN[dtype])
            return _LAST[1]
    else:
        dtype = np.dtype(dtype)
    big = dtype.byteorder == ">" or (dtype.byteorder == "=" and sys.byteorder == "big")
    code = None if big else _BY_NAME.get(dtype_name(dtype))
    if len(_SEEN) < 256:
        _SEEN[dtype] = code
    _LAST = (dtype, code)
    return code

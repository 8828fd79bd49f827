"""Which core walks trees: the C extension ``treekit.core._native`` or the pure-Python reference.

The native core is used where it was built (installing treekit compiles it where a C
compiler and the Python headers are found) unless ``TREEKIT_PURE=1`` is in the environment
when treekit is imported. The pure-Python core (:mod:`treekit.core._traverse`,
:mod:`treekit.core._treedef`) is the reference: C walks, Python speaks. The native functions
read the same registry, make the same node records, and hand every call they do not
finish (a mismatch, a suspected cycle, an exception from user code) to the Python function
they mirror, which raises the one message.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

__all__ = ["NATIVE", "backend"]


def _load() -> Any:
    if os.environ.get("TREEKIT_PURE", "") not in ("", "0"):
        return None
    try:
        return importlib.import_module("treekit.core._native")
    except ImportError:  # not built here: the pure-Python core
        return None


NATIVE: Any = _load()  # the treekit.core._native module, when it is the core in use


def backend() -> str:
    """The core in use: ``'native'`` (the C extension) or ``'pure'`` (pure Python).

    Both give the same results and raise the same errors; ``TREEKIT_PURE=1`` in the
    environment at import selects the pure-Python core.

    >>> backend() in ('native', 'pure')
    True

    Returns:
        ``'native'`` or ``'pure'``.
    """
    return "pure" if NATIVE is None else "native"

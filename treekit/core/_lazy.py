"""Names a package gives on first use (PEP 562): those of modules ``import treekit`` must not
load, because they import numpy or hypothesis or are seldom needed."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    package: str, modules: Mapping[str, Iterable[str]], prefix: str = ""
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` for names its modules give on first use.

    ``modules`` maps a module of ``package`` (its name relative to the package, ``'.ops'`` for
    a sibling of a module) to the names taken from it; the value of ``name`` is the module's
    ``prefix + name``. The first lookup of a name imports its module and sets the name on the
    package, so later lookups never come back here.

    >>> getattr_, dir_ = lazy_names('json', {'decoder': ['JSONDecodeError']})
    >>> getattr_('JSONDecodeError').__name__, 'JSONDecodeError' in dir_()
    ('JSONDecodeError', True)
    >>> getattr_('nothing')
    Traceback (most recent call last):
    ...
    AttributeError: module 'json' has no attribute 'nothing'

    Args:
        package: The package's ``__name__``.
        modules: ``{module: names}``.
        prefix: What the modules' names start with that the package's do not.

    Returns:
        ``(__getattr__, __dir__)``, to assign at the package's top level.
    """
    where = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", package), prefix + name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *where})

    return __getattr__, __dir__

"""Where treekit 0.2's modules went: each is now in a subpackage (docs/architecture.md).

Pickles (a TreeDef, a key entry, a spec) and checkpoint records name classes by module path,
``treekit._treedef.TreeDef`` or ``treekit._partial:Partial``; written by 0.2, they name the old
paths. :func:`install_moved_modules` makes ``import treekit._treedef`` give the module now at
``treekit.core._treedef`` (the same module object, not a copy), and :func:`current_module` maps
a recorded name to today's. Nothing else imports the old paths.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from importlib.abc import Loader as _Loader
else:  # importlib.abc is not loaded at run time: its module would cost `import treekit` 9 ms
    _Loader = object

__all__ = ["MOVED", "current_module", "install_moved_modules"]

MOVED = {
    "treekit._annotations": "treekit.sharding._annotations",
    "treekit._array_strategies": "treekit.checks._array_strategies",
    "treekit._asserts": "treekit.checks._asserts",
    "treekit._at": "treekit.ops._at",
    "treekit._atomic": "treekit.files._atomic",
    "treekit._build": "treekit.core._build",
    "treekit._checks": "treekit.checks._checks",
    "treekit._core": "treekit.core._core",
    "treekit._default_registry": "treekit.ops._default_registry",
    "treekit._demo_mesh": "treekit.cli._demo_mesh",
    "treekit._describe": "treekit.core._describe",
    "treekit._diff_view": "treekit.look._diff_view",
    "treekit._errors": "treekit.core._errors",
    "treekit._flat_dicts": "treekit.ops._flat_dicts",
    "treekit._fold": "treekit.ops._fold",
    "treekit._format": "treekit.look._format",
    "treekit._guide": "treekit.core._guide",
    "treekit._html": "treekit.core._html",
    "treekit._io": "treekit.checkpoint._io",
    "treekit._jax": "treekit.core._jax",
    "treekit._jax_treedefs": "treekit.core._jax_treedefs",
    "treekit._keys": "treekit.core._keys",
    "treekit._laws": "treekit.checks._laws",
    "treekit._layout": "treekit.sharding._layout",
    "treekit._mismatch": "treekit.core._mismatch",
    "treekit._mlp": "treekit.optim._mlp",
    "treekit._moments": "treekit.optim._moments",
    "treekit._native": "treekit.core._native",
    "treekit._one_level": "treekit.core._one_level",
    "treekit._ops": "treekit.ops._ops",
    "treekit._partial": "treekit.ops._partial",
    "treekit._partition": "treekit.ops._partition",
    "treekit._progress": "treekit.checkpoint._progress",
    "treekit._rearrange": "treekit.ops._rearrange",
    "treekit._records": "treekit.core._records",
    "treekit._register": "treekit.core._register",
    "treekit._registry": "treekit.core._registry",
    "treekit._restore": "treekit.checkpoint._restore",
    "treekit._safetensors": "treekit.checkpoint._safetensors",
    "treekit._saved": "treekit.checkpoint._saved",
    "treekit._shards": "treekit.checkpoint._shards",
    "treekit._show": "treekit.cli._show",
    "treekit._specs": "treekit.checks._specs",
    "treekit._stack": "treekit.ops._stack",
    "treekit._strategies": "treekit.checks._strategies",
    "treekit._summary": "treekit.look._summary",
    "treekit._transforms": "treekit.optim._transforms",
    "treekit._traverse": "treekit.core._traverse",
    "treekit._tree_math": "treekit.ops._tree_math",
    "treekit._tree_random": "treekit.ops._tree_random",
    "treekit._tree_reduce": "treekit.ops._tree_reduce",
    "treekit._treedef": "treekit.core._treedef",
    "treekit._view": "treekit.look._view",
    "treekit._where": "treekit.ops._where",
}
"""``{0.2 module: module now}``."""


def current_module(name: str) -> str:
    """The module that ``name`` (a module path a pickle or checkpoint recorded) is now.

    >>> current_module('treekit._treedef'), current_module('collections')
    ('treekit.core._treedef', 'collections')
    """
    return MOVED.get(name, name)


class _MovedFinder:
    """A finder on ``sys.meta_path`` for the 0.2 names of moved modules (and nothing else)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, _MovedLoader(MOVED[fullname]))


class _MovedLoader(_Loader):
    """Gives the module at its new path; the import system files it under the old name too."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.target)
        self.spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self.spec  # the import system set the old name's spec on it: its own back


def install_moved_modules() -> None:
    """Let ``import treekit.<0.2 module>`` find the module where it now lives (once per process).

    >>> install_moved_modules()
    >>> import treekit._keys
    >>> treekit._keys is sys.modules['treekit.core._keys'], treekit._keys.__spec__.name
    (True, 'treekit.core._keys')
    """
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(_MovedFinder())

"""Sphinx configuration: MyST pages, the API reference from docstrings, the furo theme.

Build (warnings are errors, as in CI):

    python -m sphinx -W --keep-going -b html docs docs/_build/html

Intersphinx links to Python, NumPy and JAX need their ``objects.inv`` inventories. The build
never fetches them on its own, so it passes offline with ``-W``: by default it reads the copies
in ``docs/_inventories/<name>.inv`` that exist and skips the others (references to a skipped
project render as plain code, which Sphinx does not warn about). Set
``TREEKIT_DOCS_INTERSPHINX=online`` to fetch all three from the web instead (e.g. for a
release build), or ``=off`` to skip them all.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent))  # document this checkout's treekit, not an installed one

import treekit  # noqa: E402

project = "treekit"
author = "treekit developers"
copyright = "treekit developers"
release = version = treekit.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.intersphinx",
]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_inventories", "Thumbs.db", ".DS_Store"]

# -- MyST ---------------------------------------------------------------------------------
myst_heading_anchors = 3  # [text](page.md#a-heading) links
myst_enable_extensions = ["colon_fence"]

# -- API reference ------------------------------------------------------------------------
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
# Show the documented aliases in signatures instead of what they expand to.
autodoc_type_aliases = {"PyTree": "treekit.PyTree", "KeyPath": "treekit.KeyPath", "KeyEntry": "treekit.KeyEntry"}
python_use_unqualified_type_names = True
autosummary_generate = False  # api.md lists entries itself; nothing is written into docs/
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

# -- intersphinx (see the module docstring) -----------------------------------------------
_INVENTORIES = {
    "python": "https://docs.python.org/3",
    "numpy": "https://numpy.org/doc/stable",
    "jax": "https://docs.jax.dev/en/latest",
}
_mode = os.environ.get("TREEKIT_DOCS_INTERSPHINX", "local")
if _mode not in ("local", "online", "off"):
    raise ValueError(f"TREEKIT_DOCS_INTERSPHINX: expected 'local', 'online' or 'off', got {_mode!r}")
intersphinx_mapping: dict[str, tuple[str, str | None]] = {}
for _name, _url in _INVENTORIES.items():
    _local = DOCS / "_inventories" / f"{_name}.inv"
    if _mode == "online":
        intersphinx_mapping[_name] = (_url, None)
    elif _mode == "local" and _local.is_file():
        intersphinx_mapping[_name] = (_url, str(_local))
intersphinx_timeout = 10

# -- HTML ---------------------------------------------------------------------------------
html_theme = "furo"
html_title = f"treekit {release}"

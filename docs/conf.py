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

import importlib
import inspect
import os
import pkgutil
import sys
import tokenize
from pathlib import Path

from docutils import nodes
from docutils.nodes import Node
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

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
add_function_parentheses = False  # {py:func}`~treekit.tree_map` reads as the page wrote it
# Every reference to a Python object must resolve (with -W, an unresolved one fails the build).
# Exempt: other projects' names (they link only with their inventories, see below), the type
# variables in signatures, and what Sphinx makes of the autodoc_type_aliases.
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(?!treekit\.)[A-Za-z_]\w*\..+"),  # a dotted name outside treekit: os.PathLike, np.ndarray
    (r"py:class", r"treekit\.(?:\w+\.)?_\w+\.[A-Z]"),  # a type variable: treekit.ops._fold.T
    (r"py:class", r"TypeAliasForwardRef"),
    (r"py:class", r"treekit\.files\._where\.Where"),  # a path or URL resolved (internal: docs/architecture.md)
]


def _public_modules() -> list[str]:
    """treekit's public submodules: those not named ``_*`` that declare ``__all__`` (the folders
    of capabilities, ``treekit.core`` and the others, declare none: they are its layout)."""
    names = [f"treekit.{m.name}" for m in pkgutil.iter_modules(treekit.__path__) if not m.name.startswith("_")]
    return sorted(name for name in names if hasattr(importlib.import_module(name), "__all__"))


def _home(name: str, obj: object) -> str:
    """Where the reference documents ``obj`` (exported as ``name``): ``treekit`` if it is in
    ``treekit.__all__``; else the public module that defines it; else the first public module,
    alphabetically, whose ``__all__`` has it."""
    if any(getattr(treekit, n) is obj for n in treekit.__all__):
        return "treekit"
    defined = getattr(obj, "__module__", None) if inspect.isroutine(obj) or inspect.isclass(obj) else None
    exporters = [
        m for m in _public_modules() if name in getattr(importlib.import_module(m), "__all__", ())
        and getattr(importlib.import_module(m), name) is obj
    ]
    if defined in exporters:
        return str(defined)
    return exporters[0] if exporters else ""


def _own_names(module_name: str) -> list[str]:
    """The names of ``module.__all__`` documented in that module's section (see ``_home``)."""
    module = importlib.import_module(module_name)
    own = [name for name in module.__all__ if _home(name, getattr(module, name)) == module_name]

    def line(name: str) -> float:  # source order (as autodoc_member_order), data last
        obj = getattr(module, name)
        try:
            return float(inspect.getsourcelines(obj)[1]) if getattr(obj, "__module__", None) == module_name else 1e9
        except (TypeError, OSError, SyntaxError, tokenize.TokenError):
            # a class whose __module__ names the public module it is defined under (ShardingError
            # is treekit.sharding's, written in treekit/sharding/_rules.py): Python 3.13's inspect
            # reads the public module's file at the class's line number
            return 1e9

    return sorted(own, key=line)


class ModuleMembers(SphinxDirective):
    """``.. module-members:: treekit.params``: a public module's section of the API reference.

    The module's docstring, a summary table and the entries of its own names (see
    ``_own_names``), from its ``__all__``: a name added there appears without editing api.md.
    """

    required_arguments = 1

    def run(self) -> list[Node]:
        name = self.arguments[0]
        own = _own_names(name)
        module = importlib.import_module(name)
        lines = [f".. automodule:: {name}", ""]
        if own:
            lines += [".. autosummary::", ""] + [f"   {n}" for n in own] + [""]
        for member in own:
            obj = getattr(module, member)
            if inspect.isclass(obj):
                kind = "exception" if issubclass(obj, BaseException) else "class"
            else:
                kind = "function" if inspect.isroutine(obj) else "data"
            lines += [f".. auto{kind}:: {member}"] + (["   :annotation:"] if kind == "data" else []) + [""]
        node = nodes.container()
        self.state.nested_parse(StringList(lines, source="<module-members>"), self.content_offset, node)
        return node.children


class TreekitView(SphinxDirective):
    """``{treekit-view}``: Python code whose last statement is an expression, shown, then run at
    build time and followed by the HTML its value shows in a notebook (``_repr_html_``): a live
    rendering of a view or a diff in the page."""

    has_content = True

    def run(self) -> list[Node]:
        import ast

        code = "\n".join(self.content)
        module = ast.parse(code)
        last = module.body.pop()
        if not isinstance(last, ast.Expr):
            raise self.error("treekit-view: the last statement must be an expression")
        namespace: dict[str, object] = {}
        exec(compile(module, "<treekit-view>", "exec"), namespace)
        value = eval(compile(ast.Expression(last.value), "<treekit-view>", "eval"), namespace)
        shown = nodes.literal_block(code, code, language="python")
        return [shown, nodes.raw("", value._repr_html_(), format="html")]


def _strip_trailing_blank_lines(app: Sphinx, doctree: nodes.document) -> None:
    """Drop the blank line that ends each ``>>>`` block: the doctests need it before the closing
    fence (or the fence would be expected output), readers see it as empty space."""
    for block in doctree.findall(nodes.literal_block):
        text = block.astext()
        if text != text.rstrip() and len(block.children) == 1 and isinstance(block[0], nodes.Text):
            block[0] = nodes.Text(text.rstrip())
            block.rawsource = text.rstrip()


def setup(app: Sphinx) -> None:
    app.add_directive("module-members", ModuleMembers)
    app.add_directive("treekit-view", TreekitView)
    app.connect("doctree-read", _strip_trailing_blank_lines)
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
html_static_path = ["_static"]
html_css_files = ["treekit.css"]

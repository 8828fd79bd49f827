"""The docs: the Sphinx site builds with warnings as errors and documents every public name;
every public callable has a runnable example and its Args/Returns sections.

The pages' own examples run as doctests (pytest collects docs/*.md), not here.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

import treekit
from treekit import tree

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _public_callables() -> list[tuple[str, Any]]:
    out = []
    for name in treekit.__all__:
        obj = getattr(treekit, name)
        if (inspect.isfunction(obj) or inspect.isclass(obj)) and obj.__module__.startswith("treekit"):
            out.append((name, obj))
    return out


PUBLIC = _public_callables()
FUNCTIONS = [(name, obj) for name, obj in PUBLIC if inspect.isfunction(obj)]


def _args_section(doc: str) -> list[str]:
    """The parameter names an ``Args:`` section documents, ``*rest`` and ``**kwargs`` included."""
    lines = doc.splitlines()
    start = next((k for k, line in enumerate(lines) if line.strip() == "Args:"), None)
    if start is None:
        return []
    indent = len(lines[start]) - len(lines[start].lstrip())
    names = []
    for line in lines[start + 1 :]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        match = re.match(rf"^ {{{indent + 4}}}(\*{{0,2}}\w+)( \(.*\))?:", line)
        if match:
            names.append(match.group(1))
    return names


def _signature_names(fn: Any) -> list[str]:
    stars = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}
    return [stars.get(p.kind, "") + p.name for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize(("name", "obj"), PUBLIC, ids=[name for name, _ in PUBLIC])
def test_public_callable_has_an_example(name: str, obj: Any) -> None:
    doc = inspect.getdoc(obj) or ""
    assert doc.strip(), f"{name} has no docstring"
    assert ">>>" in doc, f"{name}'s docstring has no >>> example"


@pytest.mark.parametrize(("name", "fn"), FUNCTIONS, ids=[name for name, _ in FUNCTIONS])
def test_public_function_documents_args_and_returns(name: str, fn: Any) -> None:
    doc = inspect.getdoc(fn) or ""
    assert _args_section(doc) == _signature_names(fn), f"{name}: Args section does not list its parameters"
    if inspect.signature(fn).return_annotation not in ("None", None):
        assert re.search(r"^Returns:$", doc, re.M), f"{name}: no Returns section"


def test_args_section_parser() -> None:
    doc = (
        "Summary.\n\nArgs:\n    f: A function.\n    *rest: Trees; see\n        f: not a parameter.\n"
        "    x (int): Typed.\n\nReturns:\n    y\n"
    )
    assert _args_section(doc) == ["f", "*rest", "x"]


def test_api_page_maps_each_short_name_to_its_long_name() -> None:
    text = (DOCS / "api.md").read_text()
    pairs = re.findall(r"^\.\. py:function:: (\w+)\n\n   Same object as :func:`treekit\.(\w+)`\.$", text, re.M)
    assert sorted(short for short, _ in pairs) == sorted(tree.__all__)
    for short, long in pairs:
        assert getattr(tree, short) is getattr(treekit, long), (short, long)


def _inventory_names(path: Path) -> set[str]:
    """Object names in a Sphinx ``objects.inv`` (version 2: four header lines, then zlib)."""
    data = path.read_bytes()
    header_end = 0
    for _ in range(4):
        header_end = data.index(b"\n", header_end) + 1
    assert data.startswith(b"# Sphinx inventory version 2")
    body = zlib.decompress(data[header_end:]).decode()
    return {line.split(" ", 1)[0] for line in body.splitlines() if line}


@pytest.fixture(scope="module")
def html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for module in ("sphinx", "myst_parser", "furo"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("html")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "TREEKIT_DOCS_INTERSPHINX": "local",  # never the network
    }
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(DOCS), str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, f"sphinx-build -W failed:\n{result.stdout}\n{result.stderr}"
    return out


def test_sphinx_build_passes_with_warnings_as_errors(html: Path) -> None:
    assert (html / "index.html").is_file()
    assert (html / "api.html").is_file()


def test_api_reference_documents_every_public_name(html: Path) -> None:
    names = _inventory_names(html / "objects.inv")
    expected = {f"treekit.{name}" for name in treekit.__all__ if name != "tree"}
    expected |= {"treekit.tree"} | {f"treekit.tree.{name}" for name in tree.__all__}
    assert sorted(expected - names) == []

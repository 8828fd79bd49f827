"""The docs: the Sphinx site builds with warnings as errors and documents every public name;
every public callable has a runnable example and its Args/Returns sections.

The pages' own examples run as doctests (pytest collects docs/*.md), not here.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import pkgutil
import re
import subprocess
import sys
import warnings
import zlib
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, NamedTuple

import pytest

import treekit
from treekit import tree

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _public_callables() -> list[tuple[str, Any]]:
    from treekit import data

    out = []
    for module, prefix in ((treekit, ""), (data, "data.")):
        for name in module.__all__:
            obj = getattr(module, name)
            # (a routine: the native core makes keystr a built-in function)
            if (inspect.isroutine(obj) or inspect.isclass(obj)) and obj.__module__.startswith("treekit"):
                out.append((prefix + name, obj))
    return out


PUBLIC = _public_callables()
FUNCTIONS = [(name, obj) for name, obj in PUBLIC if inspect.isroutine(obj)]


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
        [sys.executable, "-m", "sphinx", "-W", "-n", "--keep-going", "-q", "-b", "html", str(DOCS), str(out)],
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


def public_modules() -> list[str]:
    """``treekit``'s public submodules: every module file or package not named ``_*`` that
    declares ``__all__`` (the folders of capabilities, ``treekit.core`` and the others, declare
    none: they are the layout, not the API)."""
    names = [f"treekit.{info.name}" for info in pkgutil.iter_modules(treekit.__path__) if not info.name.startswith("_")]
    return sorted(name for name in names if hasattr(importlib.import_module(name), "__all__"))


def test_public_modules_are_found() -> None:
    assert public_modules() == [
        "treekit.data", "treekit.optim", "treekit.params", "treekit.schedules", "treekit.sharding", "treekit.testing",
        "treekit.tree",
    ]


def _undocumented(names: set[str]) -> list[str]:
    """Public names (``treekit.__all__``, and each public module and its ``__all__``) that the
    API reference (the ``objects.inv`` names ``names``) does not document. A name a module
    re-exports counts as documented where its object is: ``treekit.X`` or its defining module."""
    missing = [f"treekit.{n}" for n in treekit.__all__ if n != "tree" and f"treekit.{n}" not in names]
    modules = {name: importlib.import_module(name) for name in ["treekit", *public_modules()]}
    for module_name, module in modules.items():
        if module_name not in names and module_name != "treekit":
            missing.append(module_name)
        for n in getattr(module, "__all__", [n for n in vars(module) if not n.startswith("_")]):
            obj = getattr(module, n)
            if not inspect.ismodule(obj) and not any(
                getattr(other, n, None) is obj and f"{other_name}.{n}" in names for other_name, other in modules.items()
            ):
                missing.append(f"{module_name}.{n}")
    return missing


def test_undocumented_finds_a_missing_name() -> None:
    names = {f"treekit.{n}" for n in treekit.__all__} | {"treekit.tree"}
    names |= {f"treekit.tree.{n}" for n in tree.__all__}
    assert "treekit.tree" not in _undocumented(names)
    assert "treekit.testing" in _undocumented(names)
    assert "treekit.tree_map" in _undocumented(names - {"treekit.tree_map"})


def test_api_reference_documents_every_public_name(html: Path) -> None:
    missing = _undocumented(_inventory_names(html / "objects.inv"))
    assert missing == [], (
        "not in the API reference (a new public module needs a section with "
        "`.. module-members:: treekit.<module>` in docs/api.md): " + ", ".join(missing)
    )


class _Anchors(HTMLParser):
    """The ``id``s and the ``href``s of one HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if key in ("id", "name") and value:
                self.ids.add(value)
            elif key == "href" and value and tag == "a":
                self.hrefs.append(value)


def broken_links(site: Path) -> list[str]:
    """Links between the pages of a built site whose page or ``#anchor`` does not exist."""
    pages = {}
    for path in site.rglob("*.html"):
        parser = _Anchors()
        parser.feed(path.read_text(encoding="utf-8"))
        pages[path.resolve()] = parser
    broken = []
    for path, parser in sorted(pages.items()):
        for href in parser.hrefs:
            if re.match(r"^[a-z][a-z0-9+.-]*:", href):  # https:, mailto:, ...
                continue
            target, _, anchor = href.partition("#")
            target_path = (path.parent / target).resolve() if target else path
            if target_path.is_dir():
                target_path = target_path / "index.html"
            if target_path.suffix != ".html":
                if not target_path.exists():
                    broken.append(f"{path.relative_to(site.resolve())}: {href}")
                continue
            page = pages.get(target_path)
            if page is None or (anchor and anchor not in page.ids):
                broken.append(f"{path.relative_to(site.resolve())}: {href}")
    return broken


def test_broken_links_finds_a_missing_page_and_anchor(tmp_path: Path) -> None:
    (tmp_path / "a.html").write_text('<a href="b.html#there">x</a><a href="#top">x</a><a href="https://x.org/">x</a>')
    (tmp_path / "b.html").write_text('<p id="there"></p><a href="a.html#gone">x</a><a href="c.html">x</a>')
    assert broken_links(tmp_path) == ["a.html: #top", "b.html: a.html#gone", "b.html: c.html"]


def test_site_has_no_broken_internal_links(html: Path) -> None:
    # Sphinx -W -n catches unresolved references; this catches links to anchors that the
    # generated pages lack (the module index once pointed to a treekit.params anchor that was not there).
    assert broken_links(html) == []


def doctest_prompts_outside_fences(text: str) -> list[int]:
    """Line numbers of ``>>>`` lines outside code fences (``` ~~~ :::) and HTML comments: MyST
    renders them as prose, run together."""
    bad = []
    fence = ""
    comment = False
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if comment:
            comment = "-->" not in stripped
            continue
        if fence:
            if stripped.startswith(fence) and not stripped.strip(fence[0]):
                fence = ""
            continue
        opening = re.match(r"(`{3,}|~{3,}|:{3,})", stripped)
        if opening:
            fence = opening.group(1)
        elif stripped.startswith("<!--"):
            comment = "-->" not in stripped
        elif stripped.startswith(">>>"):
            bad.append(number)
    return bad


def test_doctest_prompts_outside_fences_are_found() -> None:
    text = "a\n>>> 1\n```python\n>>> 2\n```\n<!--\n>>> 3\n-->\n:::{note}\n>>> 4\n:::\n  >>> 5\n"
    assert doctest_prompts_outside_fences(text) == [2, 12]


@pytest.mark.parametrize("page", sorted(DOCS.glob("*.md")), ids=lambda p: p.name)
def test_doctest_prompts_are_inside_code_fences(page: Path) -> None:
    assert doctest_prompts_outside_fences(page.read_text()) == []


# -- docs/migration.md: its tables cover the other libraries, and its claims about them hold --
CHECKED = "jax 0.10.2, optree 0.20.0, dm-tree 0.1.10 on Python 3.11; jax 0.12.0.1 on 3.13"  # as the page says


def _migration_tables() -> dict[str, dict[str, str]]:
    """``{section heading: {name in the first column: second column}}`` of docs/migration.md."""
    tables: dict[str, dict[str, str]] = {}
    section = ""
    for line in (DOCS / "migration.md").read_text().splitlines():
        if line.startswith("## "):
            section = line[3:]
        elif line.startswith("| `"):
            first, second = (cell.strip() for cell in line.strip("|").split(" | ", 1))
            for name in re.findall(r"`(\w+)[`(]", first):
                tables.setdefault(section, {})[name] = second
    return tables


def _public(module: Any) -> list[str]:
    names = getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]
    return [n for n in names if not inspect.ismodule(getattr(module, n, None))]


@pytest.mark.parametrize(
    ("section", "module", "ours"),
    [
        ("From `jax.tree_util` and `jax.tree`", "jax.tree_util", treekit),
        ("From `jax.tree_util` and `jax.tree`", "jax.tree", tree),
        ("From optree", "optree", None),
        ("From dm-tree", "tree", None),
        ("From optax", "optax.tree_utils", "treekit.params"),
    ],
    ids=["jax.tree_util", "jax.tree", "optree", "dm-tree", "optax.tree_utils"],
)
def test_migration_page_maps_every_public_name(section: str, module: str, ours: Any) -> None:
    lib = pytest.importorskip(module)
    if isinstance(ours, str):
        ours = importlib.import_module(ours)
    table = _migration_tables()[section]
    if module == "tree":
        public = list(lib.__all__)
    else:
        public = _public(lib)
    assert sorted(set(public) - set(table)) == []
    for name in public:
        if table[name] == "same names" or table[name].startswith("same names;"):
            assert ours is None or hasattr(ours, name), f"{name} is not in {ours.__name__}"
        if ours is not None and not hasattr(ours, name):
            assert table[name].startswith("none"), f"treekit has no {name}, the page says {table[name]!r}"


def _deep(depth: int) -> Any:
    out: Any = 0
    for _ in range(depth):
        out = [out]
    return out


def _at_default_limit(f: Callable[[], Any]) -> Any:
    """``f()`` under Python's default recursion limit (1,000): some platforms raise it (a TPU
    machine's is 3,000), and the claims about how deep the others go are about the default."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        return f()
    finally:
        sys.setrecursionlimit(limit)


def _message(fn: Any) -> str:
    try:
        fn()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return "no error"


class Claim(NamedTuple):
    """A claim of docs/migration.md: ``check(importlib.import_module(module)) == expected``."""

    name: str
    module: str
    check: Callable[[Any], Any]
    expected: Any


def _claims() -> list[Claim]:
    """What docs/migration.md says of the other libraries."""
    mismatch = ({"layers": [1, 2]}, {"layers": [1, 2, 3]})
    inner_bad = [{"a": 1, "b": 2}, {"a": 3, "c": 4}]
    mixed = [{"a": "str", 1: "int"}, {"a": "str", 0: "int", 1.5: "float", None: "None", (0,): "tuple"}]
    return [
        Claim(
            "jax rebuilds dicts sorted",
            "jax.tree_util",
            lambda m: (
                list(m.tree_map(lambda x: x * 10, {"b": 1, "a": 2}).items()),
                list(m.tree_unflatten(m.tree_structure({"b": 0, "a": 0}), [1, 2]).items()),
            ),
            ([("a", 20), ("b", 10)], [("a", 1), ("b", 2)]),
        ),
        Claim(
            "optree keeps insertion order",
            "optree",
            lambda m: list(m.tree_unflatten(m.tree_structure({"b": 0, "a": 0}), [1, 2]).items()),
            [("b", 2), ("a", 1)],
        ),
        Claim(
            "jax transpose compares leaf counts only",
            "jax.tree_util",
            lambda m: m.tree_transpose(m.tree_structure([0, 0]), m.tree_structure({"a": 0, "b": 0}), inner_bad),
            {"a": [1, 3], "b": [2, 4]},
        ),
        Claim(
            "optree transpose compares leaf counts only",
            "optree",
            lambda m: m.tree_transpose(m.tree_structure([0, 0]), m.tree_structure({"a": 0, "b": 0}), inner_bad),
            {"a": [1, 3], "b": [2, 4]},
        ),
        Claim(
            "jax map error",
            "jax.tree_util",
            lambda m: _message(lambda: m.tree_map(lambda a, b: a, *mismatch)),
            "ValueError: pytree structure error: different lengths of list at key path\n    tree_map tree['layers']\n"
            "At that key path, the prefix pytree tree_map tree has a subtree of type list of length 2, but the full "
            "pytree has a subtree of the same type but of length 3.",
        ),
        Claim(
            "optree map error",
            "optree",
            lambda m: _message(lambda: m.tree_map(lambda a, b: a, *mismatch)),
            "ValueError: list arity mismatch; expected: 2, got: 3; list: [1, 2, 3].",
        ),
        Claim(
            "dm-tree map error",
            "tree",
            lambda m: _message(lambda: m.map_structure(lambda a, b: a, *mismatch)).split("\n")[0],
            "ValueError: The two structures don't have the same nested structure.",
        ),
        Claim(
            "jax too few leaves",
            "jax.tree_util",
            lambda m: _message(lambda: m.tree_unflatten(m.tree_structure([0, 0]), [1])),
            "ValueError: Too few leaves for PyTreeDef; expected 2, got 1",
        ),
        Claim(  # the depth is Python's: its recursion limit for C code grew in 3.12 and 3.13
            "jax fails 1,000 deep on Python 3.11, 10,000 deep on 3.13",
            "jax.tree_util",
            lambda m: _at_default_limit(
                lambda: _message(lambda: m.tree_leaves(_deep(1000 if sys.version_info < (3, 12) else 10_000)))[:12]
            ),
            "SystemError:",
        ),
        Claim(  # as jax's: on 3.13 (dm-tree 0.1.10) 3,000 deep works
            "dm-tree fails 1,000 deep on Python 3.11, 10,000 deep on 3.13",
            "tree",
            lambda m: _at_default_limit(
                lambda: _message(lambda: m.flatten(_deep(1000 if sys.version_info < (3, 12) else 10_000)))[:15]
            ),
            "RecursionError:",
        ),
        Claim(
            "optree: 1,000 deep works, 2,000 fails",
            "optree",
            lambda m: _at_default_limit(
                lambda: (len(m.tree_leaves(_deep(1000))), _message(lambda: m.tree_leaves(_deep(2000)))[:15])
            ),
            (1, "RecursionError:"),
        ),
        Claim(
            "jax mixed keys",
            "jax.tree_util",
            lambda m: _message(lambda: m.tree_leaves(mixed[0])),
            "ValueError: Comparator raised exception while sorting pytree dictionary keys.",
        ),
        Claim("dm-tree mixed keys", "tree", lambda m: _message(lambda: m.flatten(mixed[0]))[:10], "TypeError:"),
        Claim(
            "optree mixed keys in treekit's order",
            "optree",
            lambda m: [m.tree_leaves(d) for d in mixed],
            [treekit.tree_leaves(d) for d in mixed],
        ),
        Claim(
            "jax: deque, dict subclass and struct_time are leaves",
            "jax.tree_util",
            lambda m: [len(m.tree_leaves(x)) for x in _containers()],
            [1, 1, 1],
        ),
        Claim(
            "optree: deque and struct_time are nodes, dict subclass a leaf",
            "optree",
            lambda m: [len(m.tree_leaves(x)) for x in _containers()],
            [2, 1, 9],
        ),
        Claim(
            "dm-tree: all three are nodes; None is a leaf",
            "tree",
            lambda m: ([len(m.flatten(x)) for x in _containers()], m.flatten([None, 1])),
            ([2, 2, 9], [None, 1]),
        ),
    ]


def _containers() -> list[Any]:
    import collections
    import time

    class Sub(dict):  # type: ignore[type-arg]
        pass

    return [collections.deque([1, 2]), Sub(a=1, b=2), time.gmtime(0)]


CLAIMS = _claims()


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.name)
def test_migration_page_claim(claim: Claim) -> None:
    lib = pytest.importorskip(claim.module)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        observed = claim.check(lib)
    assert observed == claim.expected, f"docs/migration.md was checked against {CHECKED}; update it"


def test_treekit_side_of_the_claims() -> None:
    assert [len(treekit.tree_leaves(x)) for x in _containers()] == [1, 1, 1]
    assert treekit.tree_leaves(_deep(100_000)) == [0]


def test_looking_at_trees_embeds_a_live_diff_and_its_screenshots(html: Path) -> None:
    page = (html / "looking-at-trees.html").read_text(encoding="utf-8")
    assert 'class="tk-view"' in page and "expected shape (8, 16), got shape (8, 32)" in page
    for name in ("flax-nnx", "equinox", "sharded", "diff"):
        assert (html / "_images" / f"{name}.png").is_file()

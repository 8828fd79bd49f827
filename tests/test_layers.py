"""treekit's layout, read from its sources: a folder per capability, in layers (LAYERS, bottom
first) that import only downwards; inside the package, imports between modules have no cycle
(imports inside functions counted); no module reaches into another subpackage's underscore
modules but through that subpackage's ``__init__``, nor takes another module's underscore
names; each module stays under 500 lines; each subpackage's ``__init__`` opens with comments
saying what lives there, what it may import and where to start reading; docs/architecture.md
lists the layers and places every module."""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

import pytest

import treekit

PACKAGE = Path(treekit.__file__).parent
ARCHITECTURE = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"
MAX_LINES = 500

# The layers, bottom first: a module imports only from its own layer and those before it.
# "namespaces" are the public modules at the top of the package (treekit, treekit.tree,
# treekit.params, treekit.testing, treekit.schedules); the command line sits on them.
LAYERS = ["core", "ops", "sharding", "look", "checks", "optim", "files", "checkpoint", "data", "namespaces", "cli"]
SUBPACKAGES = [name for name in LAYERS if (PACKAGE / name / "__init__.py").is_file()]


def _name(path: Path) -> str:
    """``treekit.core._keys`` for treekit/core/_keys.py, ``treekit.core`` for its __init__.py."""
    parts = ["treekit", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
STEMS = {name.rpartition(".")[2] for name in MODULES if name.rpartition(".")[2].startswith("_")}


def _layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in SUBPACKAGES:
        return parts[1]
    return "cli" if module == "treekit.__main__" else "namespaces"


def _package(module: str) -> str:
    """The package whose ``__init__`` a module belongs with (itself, for a package)."""
    return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]


def _imports(module: str) -> list[tuple[str, list[str], int]]:
    """(treekit module imported, names taken from it, line) for each treekit import in the
    module, anywhere in it; ``from treekit.ops import _stack`` imports treekit.ops._stack."""
    found = []
    for node in ast.walk(ast.parse(MODULES[module].read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "treekit":
            assert node.module is not None
            names = [alias.name for alias in node.names]
            submodules = [name for name in names if f"{node.module}.{name}" in MODULES]
            found += [(f"{node.module}.{name}", [], node.lineno) for name in submodules]
            if len(submodules) < len(names):
                found.append((node.module, [name for name in names if name not in submodules], node.lineno))
        elif isinstance(node, ast.Import):
            found += [(a.name, [], node.lineno) for a in node.names if a.name.split(".")[0] == "treekit"]
    return found


def _graph() -> dict[str, set[str]]:
    return {name: {m for m, _, _ in _imports(name) if m != name and m in MODULES} for name in MODULES}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph``, or None (depth-first search, iterative)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in graph:
        if root in state:
            continue
        path, stack = [root], [iter(sorted(graph[root]))]
        state[root] = 1
        while stack:
            step = next(stack[-1], None)
            if step is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(step) == 1:
                return [*path[path.index(step) :], step]
            elif step not in state:
                state[step] = 1
                path.append(step)
                stack.append(iter(sorted(graph[step])))
    return None


def test_the_cycle_finder_finds_one() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_every_module_is_in_a_layer_and_every_folder_is_a_layer() -> None:
    folders = sorted(path.name for path in PACKAGE.iterdir() if (path / "__init__.py").is_file())
    assert [name for name in folders if name not in LAYERS] == []
    assert {_layer(name) for name in MODULES} <= set(LAYERS)


def test_imports_between_modules_point_one_way() -> None:
    cycle = _cycle(_graph())
    assert cycle is None, f"an import cycle: {' -> '.join(cycle or [])}"


def test_layers_import_only_downwards() -> None:
    upwards = [
        f"{name} ({_layer(name)}):{line} imports {target} ({_layer(target)})"
        for name in MODULES
        for target, _, line in _imports(name)
        if target in MODULES and LAYERS.index(_layer(target)) > LAYERS.index(_layer(name))
    ]
    assert upwards == []


def test_another_subpackages_modules_only_through_its_init() -> None:
    reached = [
        f"{name}:{line} imports {target}"
        for name in MODULES
        for target, _, line in _imports(name)
        if target in MODULES and target.rpartition(".")[2] in STEMS and _package(target) != _package(name)
    ]
    assert reached == []


def test_no_module_takes_another_modules_underscore_names() -> None:
    taken = []
    for name in MODULES:
        for module, names, line in _imports(name):
            taken += [f"{name}:{line}: {module}.{n}" for n in names if n.startswith("_") and not n.startswith("__")]
        for node in ast.walk(ast.parse(MODULES[name].read_text(encoding="utf-8"))):  # _module._name
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in STEMS:
                own = node.value.id == name.rpartition(".")[2]
                if not own and node.attr.startswith("_") and not node.attr.startswith("__"):
                    taken.append(f"{name}:{node.lineno}: {node.value.id}.{node.attr}")
    assert taken == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_module_stays_short(name: str) -> None:
    lines = len(MODULES[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{MODULES[name].relative_to(PACKAGE.parent)} has {lines} lines: split it by idea"


@pytest.mark.parametrize("package", SUBPACKAGES)
def test_a_subpackage_init_says_what_lives_there_and_what_it_may_import(package: str) -> None:
    # Comments, for whoever changes the folder; the docstring is the module's for its users.
    text = (PACKAGE / package / "__init__.py").read_text(encoding="utf-8")
    opening = list(itertools.takewhile(lambda line: line.startswith("#"), text.splitlines()))
    assert 3 <= len(opening) <= 6, f"treekit/{package}/__init__.py opens with {len(opening)} comment lines, not 3 to 6"
    words = " ".join(line.lstrip("# ") for line in opening)
    assert "Lives here:" in words and "May import:" in words and "Start at" in words


def _pictured(text: str) -> set[str]:
    """The modules the page's picture of the layers places: ``core/_keys.py`` for ``_keys.py`` on
    the row of ``core/`` (or a line after it, before the next folder's row)."""
    picture = text.split("```text\n", 1)[1].split("```", 1)[0]
    placed, folder = set(), ""
    for line in picture.splitlines():
        words = line.split()
        heads = [word for word in words[:2] if word.endswith("/") and word[:-1].isidentifier()]
        if heads:
            folder = heads[0]
        placed |= {folder + word for word in words if word.endswith(".py")}
    return placed


def test_the_architecture_page_lists_the_layers_and_places_every_module() -> None:
    if not ARCHITECTURE.exists():
        pytest.skip("docs/ is not here (an installed treekit)")
    text = ARCHITECTURE.read_text(encoding="utf-8")
    listed = re.findall(r"^\d+\. \*\*`?([a-z]+)/?`?\*\*", text, re.M)
    assert listed == LAYERS, "docs/architecture.md's numbered list of layers differs from LAYERS"
    places = [path.relative_to(PACKAGE).as_posix() for path in MODULES.values() if path.name != "__init__.py"]
    pictured = _pictured(text)
    missing = [place for place in places if place not in pictured and f"`{place}`" not in text]
    assert missing == [], f"docs/architecture.md does not place {missing}"

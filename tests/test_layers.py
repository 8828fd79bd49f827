"""treekit's layout, read from its sources: imports between its modules point one way (no
cycle, imports inside functions counted), no module reaches into another module's
underscore names, each module stays under ~500 lines, and docs/architecture.md places every
module (docs/architecture.md draws the layers)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import treekit

PACKAGE = Path(treekit.__file__).parent
MODULES = {path.stem: path for path in sorted(PACKAGE.glob("*.py"))}
ARCHITECTURE = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"
MAX_LINES = 560  # "under ~500": the few just over it hold one idea that splitting would cut in two


def _imports(path: Path) -> list[tuple[str, list[str], int]]:
    """(module imported, names taken from it, line) for each treekit import in the file, anywhere in it."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [alias.name for alias in node.names]
            if node.module == "treekit":  # from treekit import _saved, params
                found += [(name, [], node.lineno) for name in names if name in MODULES]
            elif node.module.startswith("treekit."):
                found.append((node.module.split(".")[1], names, node.lineno))
        elif isinstance(node, ast.Import):
            found += [(a.name.split(".")[1], [], node.lineno) for a in node.names if a.name.startswith("treekit.")]
    return found


def _graph() -> dict[str, set[str]]:
    return {name: {m for m, _, _ in _imports(path) if m != name and m in MODULES} for name, path in MODULES.items()}


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


def test_imports_between_modules_point_one_way() -> None:
    cycle = _cycle(_graph())
    assert cycle is None, f"an import cycle: {' -> '.join(cycle or [])}"


def test_no_module_takes_another_modules_underscore_names() -> None:
    taken = []
    for name, path in MODULES.items():
        for module, names, line in _imports(path):
            taken += [f"{name}.py:{line}: {module}.{n}" for n in names if n.startswith("_") and n not in MODULES]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):  # module._name, for a module imported whole
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in MODULES:
                if node.value.id != name and node.attr.startswith("_") and not node.attr.startswith("__"):
                    taken.append(f"{name}.py:{node.lineno}: {node.value.id}.{node.attr}")
    assert taken == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_module_stays_short(name: str) -> None:
    lines = len(MODULES[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"treekit/{name}.py has {lines} lines: split it by idea"


def test_the_architecture_page_places_every_module() -> None:
    if not ARCHITECTURE.exists():
        pytest.skip("docs/ is not here (an installed treekit)")
    text = ARCHITECTURE.read_text(encoding="utf-8")
    missing = [name for name in MODULES if f"{name}.py" not in text]
    assert missing == [], f"docs/architecture.md does not place {missing}"

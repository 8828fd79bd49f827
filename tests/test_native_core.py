"""The native core's shape (src/native): its fast paths are live, the Python names it reads
exist, and its C files are layered (no include cycle, none too long, public API only).

The source checks skip where the sources are not here (the suite run from an unpacked sdist,
without src/); the others run where the native core is in use.
"""

from __future__ import annotations

import collections
import dataclasses
import importlib
import importlib.util
import inspect
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import treekit
from treekit import _ops, _traverse, _treedef

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "src" / "native"
native_only = pytest.mark.skipif(treekit.backend() != "native", reason="the native core is not in use")
sources_only = pytest.mark.skipif(not SOURCES.is_dir(), reason="src/native is not here (the suite runs from an sdist)")

Point = collections.namedtuple("Point", "x y")


def _plain_key(entry: Any) -> Any:
    for field in ("idx", "key", "name"):
        if hasattr(entry, field):
            return getattr(entry, field)
    raise AssertionError(entry)


def _pure_keystr(path: Any) -> str:
    """keystr as the pure core writes it, without calling the entries' ``__str__``."""
    texts = {treekit.SequenceKey: "[{}]", treekit.DictKey: "[{!r}]", treekit.GetAttrKey: ".{}"}
    return "".join(texts[type(entry)].format(_plain_key(entry)) for entry in path)


def _plain_trees() -> list[Any]:
    return [
        [1, 2.0, "a"],
        (1, (2, 3)),
        {"b": 1, "a": [2, 3]},
        {"w": 1.0, "b": 2.0},  # inserted unsorted: a shared key order
        {f"k{i:03}": float(i) for i in range(20, 0, -1)},  # a big dict, unsorted
        Point(1, [2, None]),
        [{"w": 1, "b": 2}, {"w": 3, "b": 4}, None],
        None,
    ]


# -- the fast paths are live ----------------------------------------------------------------------
# The Python functions the native core hands a call over to (or that run where it is not used):
# a call the C core finishes calls none of them.
FALLBACKS = [
    (_traverse, "pure_flatten"),
    (_traverse, "pure_flatten_pairs"),
    (_treedef, "interpret"),
    (_treedef, "compiled"),
    (_ops, "leafwise"),
]


@pytest.fixture
def fallback_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[collections.Counter[str]]:
    """Counts the calls of each pure fallback (and of the built-in entries' ``__str__``, which
    keystr's pure path calls and its C path does not)."""
    calls: collections.Counter[str] = collections.Counter()

    def counted(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return fn(*args, **kwargs)

        return wrapper

    for module, name in FALLBACKS:
        if hasattr(module, name):
            monkeypatch.setattr(module, name, counted(f"{module.__name__}.{name}", getattr(module, name)))
    for cls in (treekit.SequenceKey, treekit.DictKey, treekit.GetAttrKey):
        monkeypatch.setattr(cls, "__str__", counted(f"{cls.__name__}.__str__", cls.__str__))
    yield calls


@native_only
@pytest.mark.parametrize("tree", _plain_trees(), ids=lambda t: type(t).__name__)
def test_plain_trees_never_reach_the_pure_core(tree: Any, fallback_calls: collections.Counter[str]) -> None:
    for _ in range(2):  # the first call fills the caches, the second reads them
        leaves, treedef = treekit.tree_flatten(tree)
        assert treekit.tree_leaves(tree) == leaves
        assert treekit.tree_structure(tree) == treedef
        assert treekit.tree_unflatten(treedef, leaves) == tree
        assert treekit.tree_map(lambda x: x, tree) == tree
        assert treekit.tree_map(lambda x, y: x, tree, tree) == tree
        pairs, treedef_with_path = treekit.tree_flatten_with_path(tree)
        assert treedef_with_path == treedef and [leaf for _, leaf in pairs] == leaves
        assert treekit.tree_leaves_with_path(tree) == pairs
        assert treekit.tree_map_with_path(lambda path, x: x, tree) == tree
        assert [treekit.keystr(path) for path, _ in pairs] == [_pure_keystr(path) for path, _ in pairs]
        simple = [treekit.keystr(path, simple=True, separator="/") for path, _ in pairs]
        assert simple == ["/".join(str(_plain_key(entry)) for entry in path) for path, _ in pairs]
    assert dict(fallback_calls) == {}


@native_only
def test_the_fallback_counter_counts(fallback_calls: collections.Counter[str]) -> None:
    """The check above can fail: a tree the C core hands over (a cycle) is counted, and so is
    an entry's ``__str__``."""
    cyclic: list[Any] = [1]
    cyclic.append(cyclic)
    with pytest.raises(ValueError):
        treekit.tree_leaves(cyclic)
    assert fallback_calls["treekit.core._traverse.pure_flatten"] == 1
    assert str(treekit.DictKey("a")) == "['a']" and fallback_calls["DictKey.__str__"] == 1


# -- the Python names the C core reads -------------------------------------------------------------
# Every name, as src/native/state.h lists them: (where it is read, the name).
MODULES = [
    "treekit.core._registry",
    "treekit.core._treedef",
    "treekit.core._build",
    "treekit.core._guide",
    "treekit.core._traverse",
    "treekit.core._errors",
    "treekit.core._keys",
]
IMPORTS = [
    ("treekit.core._registry", "LIST"),
    ("treekit.core._registry", "TUPLE"),
    ("treekit.core._registry", "DICT"),
    ("treekit.core._registry", "NONE"),
    ("treekit.core._registry", "NAMEDTUPLE"),
    ("treekit.core._registry", "resolve"),
    ("treekit.core._treedef", "TreeDef"),
    ("treekit.core._treedef", "LEAF"),
    ("treekit.core._build", "unflatten_node"),
    ("treekit.core._keys", "SequenceKey"),
    ("treekit.core._keys", "DictKey"),
    ("treekit.core._keys", "GetAttrKey"),
    ("treekit.core._keys", "FlattenedIndexKey"),
]
NAMES = [
    ("treekit.core._registry", "TYPES"),
    ("treekit.core._registry", "ORDERS"),
    ("treekit.core._registry", "_FIELD_KEYS"),
    ("treekit.core._registry", "_SEQ_KEYS"),
    ("treekit.core._traverse", "MAX_DEPTH"),
    ("treekit.core._traverse", "pure_flatten"),
    ("treekit.core._traverse", "pure_flatten_pairs"),
    ("treekit.core._traverse", "changed_error"),
    ("treekit.core._traverse", "_frame_keys"),
    ("treekit.core._errors", "flatten_noted"),
    ("treekit.core._errors", "not_a_bool"),
    ("treekit.core._errors", "unflatten_noted"),
    ("treekit.core._build", "leaves_changed"),
    ("treekit.core._registry.NodeType", "flatten"),
    ("treekit.core._registry.NodeType", "unflatten"),
    ("treekit.core._registry.NodeType", "type"),
    ("flatten function", "plain"),
    ("flatten function", "keyed"),
    ("flatten function", "finish"),
    ("flatten function", "convert_key"),
    ("flatten function", "key_kinds"),
    ("unflatten function", "func"),
    ("dataclass flatten function", "dataclass_fields"),
    ("JAX-only flatten and unflatten functions", "known"),
    ("an nnx State", "_mapping"),
    ("an nnx Variable", "_new"),
    ("an nnx Variable", "_trace_state"),
    ("an nnx Variable", "_var_metadata"),
    ("an nnx Variable", "_raw_value"),
    ("flax.nnx.variablelib", "tracers"),
    ("flax.nnx.tracers", "TraceState"),
    ("dataclass unflatten function", "dataclass_init"),
    ("treekit.core._registry.SortedKeys", "original"),
    ("treekit.core._registry.SortedKeys", "positions"),
    ("treekit.core._treedef.TreeDef", "__slots__"),
    ("treekit.core._treedef.TreeDef", "_nodes"),
    ("treekit.core._treedef.TreeDef", "_hash"),
    ("treekit.core._treedef.TreeDef", "_builder"),
    ("treekit.core._guide", "guide"),
    ("treekit.core._guide.guide", "again"),
    ("treekit.core._guide.guide", "raised"),
    ("treekit.core._treedef.TreeDef", "_build"),
    ("treekit.core._keys.SequenceKey", "idx"),
    ("treekit.core._keys.DictKey", "key"),
    ("treekit.core._keys.GetAttrKey", "name"),
    ("treekit.core._keys.FlattenedIndexKey", "key"),
    ("treekit.core._keys.DictKey", "__init__"),
    ("treekit.core._keys.keystr", "__doc__"),
    ("treekit.core._keys.keystr", "keys"),
    ("treekit.core._keys.keystr", "simple"),
    ("treekit.core._keys.keystr", "separator"),
    ("treekit.core._traverse.pure_flatten", "tree"),
    ("treekit.core._traverse.pure_flatten", "is_leaf"),
    ("treekit.core._traverse.pure_flatten", "with_path"),
    ("treekit.core._traverse.pure_flatten", "leaf_takes_path"),
    ("treekit.core._traverse.pure_flatten", "label"),
    ("types.MemberDescriptorType", "__objclass__"),
    ("dict", "__sizeof__"),
]


def _listed(macro: str) -> list[list[str]]:
    """The rows X(...) of the X-macro list `macro` in state.h: their arguments, unquoted."""
    text = (SOURCES / "state.h").read_text()
    body = re.search(rf"#define {macro}\(X\)(.*?)\n\n", text, re.S)
    assert body is not None, f"state.h has no {macro}(X) list"
    return [[arg.strip().strip('"') for arg in row.split(",")] for row in re.findall(r"X\(([^)]*)\)", body.group(1))]


@sources_only
def test_state_h_lists_the_names_this_test_checks() -> None:
    modules = {field: module for field, module in _listed("TK_MODULES")}
    assert list(modules.values()) == MODULES
    assert [(modules[module], name) for _, module, name in _listed("TK_IMPORTS")] == IMPORTS
    assert [(where, name) for _, where, name in _listed("TK_NAMES")] == NAMES


@sources_only
def test_no_c_file_reads_a_python_name_outside_state_h_lists() -> None:
    """A literal name passed to a function that reads or calls by name: none but the empty
    string state.c interns (the lists above are the whole inventory)."""
    literal = re.compile(
        r"\b(PyObject_(?:Get|Set|Has|Del)AttrString|PyDict_(?:Get|Set|Del)ItemString\w*|PyMapping_\w*String|"
        r"PyObject_CallMethod\w*|PyImport_\w*Module\w*|PyUnicode_InternFromString|PyUnicode_FromString)\s*\(([^;]*)",
    )
    found = []
    for path in sorted(SOURCES.glob("*.c")):
        for call, args in literal.findall(path.read_text()):
            for name in re.findall(r'"((?:[^"\\]|\\.)*)"', args):
                found.append((path.name, call, name))
    assert found == [("state.c", "PyUnicode_InternFromString", "")]


def _example(where: str) -> Any:
    """An object `where` names, to look its name up on."""
    if where == "treekit.core._registry.SortedKeys":
        return treekit.tree_structure({"b": 1, "a": 2})._nodes[-1][1]  # an unsorted dict's node data
    if where == "types.MemberDescriptorType":
        return inspect.getattr_static(treekit.DictKey, "key")
    if where == "dict":
        return dict
    parts = where.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        for part in parts[k:]:
            obj = getattr(obj, part)
        return obj
    raise AssertionError(f"nothing is {where}")


@native_only
def test_the_names_read_exist(registered: Any) -> None:
    for module in MODULES:
        importlib.import_module(module)
    for module, name in IMPORTS:
        assert hasattr(importlib.import_module(module), name), f"{module}.{name}"

    class Node:
        def __init__(self, x: Any) -> None:
            self.x = x

    @dataclasses.dataclass
    class Layer:
        w: Any

    registered(Node, lambda cls: treekit.register_pytree_node(cls, lambda n: ((n.x,), None), lambda d, c: cls(*c)))
    registered(Layer, treekit.register_dataclass)
    entry = importlib.import_module("treekit.core._registry").TYPES[Node]
    layer = importlib.import_module("treekit.core._registry").TYPES[Layer]
    for where, name in NAMES:
        if where == "flatten function":
            obj: Any = entry.flatten
        elif where == "unflatten function":
            obj = entry.unflatten
        elif where == "dataclass flatten function":
            obj = layer.flatten
        elif where == "dataclass unflatten function":
            obj = layer.unflatten
        elif where == "JAX-only flatten and unflatten functions":
            if importlib.util.find_spec("jax") is None:
                continue
            jtu = importlib.import_module("jax.tree_util")

            class JaxOnly:
                pass

            jtu.register_pytree_node(JaxOnly, lambda n: ((), None), lambda d, c: JaxOnly())
            only = importlib.import_module("treekit.core._registry").lookup(JaxOnly)
            assert hasattr(only.flatten, name) and hasattr(only.unflatten, name)
            continue
        elif where.startswith(("an nnx", "flax.")):
            if importlib.util.find_spec("flax") is None:
                continue
            nnx = importlib.import_module("flax.nnx")
            if where == "an nnx State":
                obj = nnx.State({})
            elif where == "an nnx Variable":
                obj = nnx.Param(0)
            else:
                obj = _example(where)
        else:
            obj = _example(where)
        if callable(obj) and not isinstance(obj, type) and name not in ("__doc__", "__sizeof__", "__init__"):
            params = inspect.signature(obj).parameters
            if name in params:
                continue
        if where == "treekit.core._treedef.TreeDef" and name in getattr(obj, "__slots__", ()):
            continue
        assert hasattr(obj, name), f"{where} has no {name}"
    assert _treedef.TreeDef.__slots__ == ("_builder", "_hash", "_nodes")  # TreeDef made without __init__ (records.c)


# -- the C files' shape ----------------------------------------------------------------------------
def _includes() -> dict[str, list[str]]:
    return {
        path.name: re.findall(r'^#include "([^"]+)"', path.read_text(), re.M)
        for path in sorted(SOURCES.iterdir())
        if path.suffix in (".c", ".h")
    }


@sources_only
def test_includes_point_down_only() -> None:
    graph = _includes()
    for name, targets in graph.items():
        assert all(t.endswith(".h") and t in graph for t in targets), f"{name} includes {targets}"
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, f"an include cycle: {' -> '.join((*path, name))}"
        if name in done:
            return
        for target in graph[name]:
            visit(target, (*path, name))
        done.add(name)

    for name in graph:
        visit(name, ())
    assert graph["state.h"] == []  # the bottom layer


def _functions(text: str) -> Iterator[tuple[str, int]]:
    """(name, lines) of each function defined at file level."""
    lines = text.split("\n")
    depth, start, name, head = 0, -1, "", 0
    for i, line in enumerate(lines):
        if depth == 0 and line and not line[0].isspace():
            head = i
        if depth == 0 and line.rstrip().endswith("{"):
            signature = " ".join(lines[head : i + 1])
            before = signature.split("(")[0]
            if "(" in signature and not re.search(r"\b(struct|typedef|enum)\b|=|^#", before):
                start, name = head, re.findall(r"(\w+)\s*\(", signature)[0]
        depth += line.count("{") - line.count("}")
        if depth == 0 and start >= 0 and "}" in line:
            yield name, i - start + 1
            start = -1


@sources_only
@pytest.mark.parametrize("path", sorted(SOURCES.glob("*.c")) if SOURCES.is_dir() else [], ids=lambda p: p.name)
def test_each_c_file_is_short_says_what_it_mirrors_and_uses_public_api_only(path: Path) -> None:
    text = path.read_text()
    assert text.count("\n") <= 500, f"{path.name}: {text.count(chr(10))} lines"
    long = [(name, n) for name, n in _functions(text) if n > 120]
    assert long == [], f"{path.name}: functions over 120 lines: {long}"
    first = re.match(r"/\*(.*?)\*/", text, re.S)
    assert first is not None and re.search(r"\btreekit\.\w+", first.group(1)), (
        f"{path.name}: no first comment naming a Python function"
    )
    private = re.findall(
        r"\b(_Py\w+|tp_vectorcall|tp_dict|PyMemberDescrObject|PyMethodDescrObject|PyDescrObject|d_member)\b", text
    )
    if path.name == "entries.c" and "issue 60 decided it" in first.group(1):  # (the one field written, and why)
        private = [name for name in private if name != "tp_vectorcall"]
    assert private == [], f"{path.name} reads {sorted(set(private))}"

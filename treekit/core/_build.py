"""Unflatten's builders: a tree from a TreeDef's records and its leaves, by a loop over the
records (``interpret``, which ``build.c`` mirrors) or, for a structure built again and again,
by Python code of its own (``compiled``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from treekit.core._errors import unflatten_noted
from treekit.core._records import Node
from treekit.core._registry import DICT, LIST, NAMEDTUPLE, NONE, TUPLE, NodeType

__all__ = ["Builder", "compiled", "interpret", "leaves_changed", "unflatten_node"]

# -- building: interpreted, and compiled for structures built again and again -----------------
# A builder takes (nodes, leaves) and returns the tree. Every structure is built by
# `interpret` (a loop over the records) until it has been built _COMPILE_AT times; then it
# gets Python code of its own (see `_compile`) that builds the whole tree without a loop or
# a call per built-in node. The code depends only on each record's node type and arity;
# node data is read from the records at each call, so one builder serves every equal
# TreeDef (dict insertion order included).
#
# What is remembered is bounded and keeps little alive: builds are counted by the
# structure's hash alone (ints: no node data is kept for a structure built a few times);
# only compiled structures are kept, with their node data, at most _BUILDERS_NODES records
# in all (the oldest go first); a structure too big to compile is never remembered.
Builder = Callable[[tuple[Node, ...], list[Any]], Any]
_COMPILE_AT = 8
_MAX_COMPILED_NODES = 20_000  # bigger trees: compiling costs more than it saves
_SLICE_FROM = 6  # a node with more leaf children than this takes them as one slice
# hash of a structure (node data included) -> builds so far, or -1 for one the compiler refused
_COUNTS: dict[int, int] = {}
_COUNTS_LIMIT = 4096
# compiled structures (a TreeDef's nodes: hashed at C speed), oldest first -> their builder
_BUILDERS: dict[tuple[Node, ...], Builder] = {}
_BUILDERS_NODES = 100_000
_builders_held = [0]  # records in _BUILDERS' keys
_BUILD_LOCK = threading.Lock()  # for the writes to _COUNTS and _BUILDERS (reads take none)


def leaves_changed(count: int, now: int) -> ValueError:
    """The error for a leaves list that user code changed while a tree was built from it (the
    native builder raises it too)."""
    return ValueError(
        f"leaves: expected the list to keep its {count} leaves while the tree is built, got {now} "
        "(an unflatten function changed it)"
    )


def interpret(nodes: tuple[Node, ...], leaves: list[Any]) -> Any:
    stack: list[Any] = []
    push = stack.append
    it = iter(leaves)
    for ntype, data, arity, _, _ in nodes:
        if ntype is None:
            push(next(it))
        elif arity:
            children = stack[-arity:]
            del stack[-arity:]
            push(unflatten_node(ntype, data, children))
        else:
            push(unflatten_node(ntype, data, []))
    return stack[0]


def compiled(nodes: tuple[Node, ...]) -> Builder | None:
    """The builder of the structure ``nodes`` (a TreeDef's records), counting this build: None
    until it has been built ``_COMPILE_AT`` times, then its compiled code, or ``interpret`` for
    good."""
    if len(nodes) > _MAX_COMPILED_NODES:
        return interpret
    try:
        build = _BUILDERS.get(nodes)
        if build is not None:
            return build
        key = hash(nodes)
    except Exception:  # node data that does not hash or compare: never compiled
        return interpret
    count = _COUNTS.get(key, 0)
    if count < 0:
        return interpret
    if count + 1 < _COMPILE_AT:
        with _BUILD_LOCK:
            if key not in _COUNTS:
                while len(_COUNTS) >= _COUNTS_LIMIT:  # the oldest counts go first
                    del _COUNTS[next(iter(_COUNTS))]
            _COUNTS[key] = count + 1
        return None
    build = _compile(nodes)
    with _BUILD_LOCK:
        if build is None:  # the compiler's limits: interpreted for good
            _COUNTS[key] = -1
            return interpret
        _COUNTS.pop(key, None)
        if nodes not in _BUILDERS:
            _BUILDERS[nodes] = build
            _builders_held[0] += len(nodes)
            while _builders_held[0] > _BUILDERS_NODES and len(_BUILDERS) > 1:  # the oldest go first
                oldest = next(iter(_BUILDERS))
                del _BUILDERS[oldest]
                _builders_held[0] -= len(oldest)
    return build


def _compile(nodes: tuple[Node, ...]) -> Builder | None:
    """Python code that builds a tree of this structure (None for a very big one).

    One statement per node with children, in post-order: ``v7 = [L[0], v3, L[4]]``. Children
    that are consecutive leaves, if there are many, come as one slice of the leaves.
    """
    if len(nodes) > _MAX_COMPILED_NODES:
        return None
    lines = ["def build(N, L):"]
    parts: list[str] = []  # the expression of each finished subtree not yet used by a parent
    leaf = 0
    for j, (ntype, _, arity, num_leaves, num_nodes) in enumerate(nodes):
        if ntype is None:
            parts.append(f"L[{leaf}]")
            leaf += 1
            continue
        kids = parts[len(parts) - arity :]
        del parts[len(parts) - arity :]
        if arity > _SLICE_FROM and num_leaves == arity and num_nodes == arity + 1:  # all children are leaves
            many = f"L[{leaf - arity}:{leaf}]"
        else:
            many = f"[{', '.join(kids)}]"
        if ntype is LIST:
            src = many
        elif ntype is TUPLE:
            src = f"tuple({many})" if arity > _SLICE_FROM else f"({kids[0]},)" if arity == 1 else f"({', '.join(kids)})"
        elif ntype is NONE:
            src = "None"
        elif ntype is DICT and arity:
            # keys kept in another order than the sorted one (a `SortedKeys`) are put back in it
            lines.append(f"    d = N[{j}][1]")
            lines.append("    if type(d) is tuple:")
            if arity > _SLICE_FROM:
                lines.append(f"        v{j} = dict(zip(d, {many}))")
                lines.append(f"    else: v{j} = dict(zip(d.original, d.put({many})))")
            else:  # dict displays; a `SortedKeys` puts the children in insertion order first
                lines.append(f"        v{j} = {{{', '.join(f'd[{i}]: {kid}' for i, kid in enumerate(kids))}}}")
                lines.append(f"    else:\n        o = d.original; t = d.put(({', '.join(kids)},))")
                lines.append(f"        v{j} = {{{', '.join(f'o[{i}]: t[{i}]' for i in range(arity))}}}")
            parts.append(f"v{j}")
            continue
        elif ntype is NAMEDTUPLE:
            src = f"N[{j}][1](*{many})" if arity > _SLICE_FROM else f"N[{j}][1]({', '.join(kids)})"
        else:
            src = f"U(N[{j}][0], N[{j}][1], {many})"
        lines.append(f"    v{j} = {src}")
        parts.append(f"v{j}")
    lines.append(f"    return {parts[0]}")
    namespace: dict[str, Any] = {"U": unflatten_node, "dict": dict, "tuple": tuple, "type": type, "zip": zip}
    try:
        exec(compile("\n".join(lines), "<treekit builder>", "exec"), namespace)
    except Exception:  # the compiler's limits (RecursionError, MemoryError, ...): stay interpreted
        return None
    return namespace["build"]  # type: ignore[no-any-return]


def unflatten_node(ntype: NodeType, data: Any, children: list[Any]) -> Any:
    try:
        return ntype.unflatten(data, children)
    except Exception as exc:  # the user's exception goes on, noted with the node it was building
        if ntype.kind != "custom" and ntype.kind != "dataclass":
            raise
        unflatten_noted(ntype.type, data, len(children), exc)  # (the native builder's note too)
        raise

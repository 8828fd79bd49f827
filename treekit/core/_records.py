"""TreeDef records: what one is, and checking records that did not come out of treekit's walkers."""

from __future__ import annotations

from itertools import compress, repeat
from operator import is_not, lt
from typing import Any

from treekit.core._errors import count_children, safe_repr
from treekit.core._registry import NAMEDTUPLE, TYPES, NodeType, SortedKeys, lookup, sort_keys

__all__ = ["LEAF", "Node", "checked_records", "render_records"]

# One node of a TreeDef, in post-order: (ntype, node data, arity, num_leaves, num_nodes).
# A leaf is (None, None, 0, 1, 1).
Node = tuple[Any, Any, int, int, int]
LEAF: Node = (None, None, 0, 1, 1)


def checked_records(records: tuple[Node, ...] | list[Node]) -> tuple[Node, ...]:
    """``records`` as a TreeDef's records, checked in one pass: what ``TreeDef(records)`` and
    unpickling keep (a list is copied into a tuple, so that the C core only reads a tuple
    checked here).

    Records that did not come out of treekit's walkers are input, as a file is: a record
    with a wrong count would make ``repr``, every message naming the treedef, ``unflatten``
    and the walks loop, read the wrong records or ask for huge lists. Each record must be
    ``(ntype, node data, arity, num_leaves, num_nodes)`` with exact ``int`` counts: a leaf
    exactly ``LEAF``; a node a registered entry whose ``arity`` children are the subtrees
    just before it, its counts their sums (``num_nodes`` plus itself), its node data of its
    built-in kind's shape (dict keys distinct and in leaf order, a namedtuple class with
    ``arity`` fields, ``None`` for lists, tuples and ``None``); the last record the root of
    them all.

    >>> checked_records([(None, None, 0, 1, 1)])
    ((None, None, 0, 1, 1),)
    >>> from treekit import tree_structure
    >>> leaf, root = tree_structure([0])._nodes
    >>> checked_records((leaf, root[:4] + (-1,)))
    Traceback (most recent call last):
    ValueError: treedef record 1: expected num_nodes 2 (1 + its 1 child's), got -1

    Raises:
        TypeError: If ``records`` is not a tuple or list.
        ValueError: At the first wrong record, naming its index, what was expected and what
            it holds.
    """
    if not isinstance(records, (tuple, list)):
        raise TypeError(f"treedef records: expected a tuple of node records, got {type(records).__name__}")
    records = records if type(records) is tuple else tuple(records)  # (a tuple subclass is copied too)
    if not records:
        raise ValueError("treedef records: expected at least 1 record, got none")
    # num_leaves and num_nodes of each subtree seen and not yet under a node, left to right
    leaves_in: list[int] = []
    nodes_in: list[int] = []
    seen = 0  # the records before this one are on those lists
    leaf: Any = LEAF  # the last leaf record checked (a pickle's leaves share one): passed at once
    # the records that are not LEAF itself, one by one (the LEAFs between them go on at once)
    for i in compress(range(len(records)), map(is_not, records, repeat(LEAF))):
        if i > seen:
            leaves_in += repeat(1, i - seen)
            nodes_in += repeat(1, i - seen)
        seen = i + 1
        record = records[i]
        if record is leaf:
            leaves_in.append(1)
            nodes_in.append(1)
            continue
        if type(record) is not tuple or len(record) != 5:
            raise _bad_record(i, "a tuple (ntype, node data, arity, num_leaves, num_nodes)", _kind_of(record))
        ntype, data, arity, num_leaves, num_nodes = record
        for name, count in (("arity", arity), ("num_leaves", num_leaves), ("num_nodes", num_nodes)):
            if type(count) is not int:
                raise _bad_record(i, f"an int as {name}", _kind_of(count))
        if ntype is None:
            if data is not None or arity != 0 or num_leaves != 1 or num_nodes != 1:
                raise _bad_record(i, "a leaf record (None, None, 0, 1, 1)", safe_repr(record, 80))
            leaf = record
            leaves_in.append(1)
            nodes_in.append(1)
            continue
        unregistered = _unregistered(ntype)
        if unregistered is not None:
            raise _bad_record(i, "None (a leaf) or a registered NodeType", unregistered)
        if not 0 <= arity <= len(nodes_in):
            raise _bad_record(
                i, f"an arity from 0 to {len(nodes_in)} (the subtrees before it not yet under a node)", str(arity)
            )
        wrong = _data_problem(ntype, data, arity)
        if wrong is not None:
            raise _bad_record(i, *wrong)
        start = len(nodes_in) - arity
        want_leaves, want_nodes = sum(leaves_in[start:]), 1 + sum(nodes_in[start:])
        whose = f"its {count_children(arity)}'s" if arity else "a node with no children"
        if num_leaves != want_leaves:
            raise _bad_record(i, f"num_leaves {want_leaves} ({whose})", str(num_leaves))
        if num_nodes != want_nodes:
            raise _bad_record(i, f"num_nodes {want_nodes} ({'1 + ' if arity else ''}{whose})", str(num_nodes))
        del leaves_in[start:], nodes_in[start:]
        leaves_in.append(num_leaves)
        nodes_in.append(num_nodes)
    nodes_in += repeat(1, len(records) - seen)
    if len(nodes_in) != 1:
        raise ValueError(
            f"treedef records: expected 1 tree, got {len(nodes_in)} "
            f"(the last record is the root of {nodes_in[-1]} of the {len(records)} records)"
        )
    return records


def _bad_record(index: int, expected: str, got: str) -> ValueError:
    return ValueError(f"treedef record {index}: expected {expected}, got {got}")


def _kind_of(value: Any) -> str:
    """``tuple of length 4``, ``list [...]``, ``float 2.0``: a wrong value in a message."""
    if type(value) is tuple:
        return f"tuple of length {len(value)}"
    return f"{type(value).__name__} {safe_repr(value, 60)}"


def _unregistered(ntype: Any) -> str | None:
    """``None`` if ``ntype`` is the entry registered for its type (or the namedtuple entry),
    else what it is, for the message."""
    if type(ntype) is not NodeType:
        return _kind_of(ntype)
    if ntype is NAMEDTUPLE:
        return None
    try:
        if TYPES.get(ntype.type) is ntype or lookup(ntype.type) is ntype:
            return None
    except Exception:  # a type that does not hash, or not a class
        pass
    return f"{safe_repr(ntype, 60)}, not the entry registered for its type"


def _data_problem(ntype: NodeType, data: Any, arity: int) -> tuple[str, str] | None:
    """What a record of a built-in kind should hold instead (its node data, or its arity), and
    what it holds; ``None`` if it is right. Registered classes' node data are theirs (any value)."""
    kind = ntype.kind
    name = "None" if kind == "none" else kind
    if kind in ("list", "tuple", "none") and data is not None:
        return f"node data None for a {name} node", safe_repr(data, 80)
    if kind in ("none", "static") and arity:
        return f"arity 0 for a {name} node", str(arity)
    wanted: str | None = None
    if kind in ("dict", "ordereddict"):
        wanted = _keys_problem(data, arity, kind == "dict")
    elif kind == "defaultdict":
        if type(data) is not tuple or len(data) != 2 or not (data[0] is None or callable(data[0])):
            wanted = f"node data (default_factory, {_keys(arity)}) for a defaultdict node"
        else:
            wanted = _keys_problem(data[1], arity, True)
    elif kind == "namedtuple":
        fields = getattr(data, "_fields", None) if isinstance(data, type) and issubclass(data, tuple) else None
        if type(fields) is not tuple or len(fields) != arity:
            wanted = f"node data: a namedtuple class with {arity} fields"
    return None if wanted is None else (wanted, safe_repr(data, 80))


def _keys(n: int) -> str:
    return "1 dict key" if n == 1 else f"{n} dict keys"


def _keys_problem(keys: Any, arity: int, in_leaf_order: bool) -> str | None:
    """What dict node data should be instead, or ``None``: ``arity`` distinct keys, as a tuple,
    in leaf order (sorted) for dicts and defaultdicts, where a ``SortedKeys`` also keeps the
    insertion order (the same keys)."""
    order = " in sorted order" if in_leaf_order and arity > 1 else ""
    distinct = f"{arity} distinct dict keys" if arity > 1 else _keys(arity)
    wanted = f"node data: a tuple of {distinct}{order}"
    if type(keys) is not tuple and not (in_leaf_order and type(keys) is SortedKeys):
        return wanted
    try:
        if len(keys) != arity or len(set(keys)) != arity:
            return wanted
        if in_leaf_order and arity > 1:
            try:  # no key less than the one before it: what `sorted` leaves as it is
                in_order = not any(map(lt, keys[1:], keys))
            except TypeError:  # keys of types that do not compare: treekit's order of them
                in_order = sort_keys(keys) == list(keys)
            if not in_order:
                return wanted
        if type(keys) is SortedKeys:
            original = getattr(keys, "original", None)
            if type(original) is not tuple or len(original) != arity or set(original) != set(keys):
                return wanted
    except Exception:  # keys that do not hash or compare: not a dict's
        return wanted
    return None


def render_records(nodes: tuple[Node, ...]) -> str:
    """jax's treedef string, made in one pass: linear in the number of nodes at any depth.

    The records are read root first (a node's children lie just before it, the last child
    nearest), each node's pieces (opening, separators, its children, closing) going on a
    stack of work: a string is output, an int is a node to open.
    """
    out: list[str] = []
    todo: list[Any] = [len(nodes) - 1]
    while todo:
        item = todo.pop()
        if type(item) is str:
            out.append(item)
            continue
        ntype, data, arity = nodes[item][0], nodes[item][1], nodes[item][2]
        if ntype is None:
            out.append("*")
            continue
        kind = ntype.kind
        if kind == "none":
            out.append("None")
            continue
        if kind == "list":
            opening, closing = "[", "]"
        elif kind == "tuple":
            opening, closing = "(", ",)" if arity == 1 else ")"
        elif kind == "dict":
            opening, closing = "{", "}"
        elif kind == "namedtuple":
            opening, closing = f"CustomNode(namedtuple[{data.__name__}], [", "])"
        else:
            shown = data.node_data()[1] if kind == "jax" else data  # JAX-only: JAX's node data
            opening, closing = f"CustomNode({ntype.type.__name__}[{shown}], [", "])"
        out.append(opening)
        if nodes[item][3] == arity == nodes[item][4] - 1:  # all children are leaves: at once
            out.append(", ".join([f"{key!r}: *" for key in data] if kind == "dict" else ["*"] * arity))
            out.append(closing)
            continue
        todo.append(closing)
        kid = item - 1
        for index in range(arity - 1, -1, -1):  # pushed last child first: popped left to right
            todo.append(kid)
            kid -= nodes[kid][4]
            if kind == "dict":
                todo.append(f"{data[index]!r}: ")
            if index:
                todo.append(", ")
    return "".join(out)

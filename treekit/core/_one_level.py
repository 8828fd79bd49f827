"""One node at a time: whether a type is a node, one level of a tree flattened, and node data as jax shows it."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from treekit.core._keys import KeyEntry
from treekit.core._registry import NodeType, dict_order, lookup

__all__ = ["flatten_one_level", "flatten_one_level_with_keys", "is_tree_node", "node_record_data", "plain_data"]


def is_tree_node(typ: object) -> bool:
    """Whether instances of ``typ`` are nodes (built-in, namedtuple or registered), not leaves.

    >>> is_tree_node(dict), is_tree_node(type(None)), is_tree_node(int), is_tree_node([1])
    (True, True, False, False)

    Args:
        typ: A class. Anything else (an instance such as ``[1]``) gives ``False``, as in jax.

    Returns:
        ``True`` for built-in containers, ``NoneType``, namedtuple classes and registered
        classes; ``False`` for everything else, subclasses of registered classes included.
    """
    return isinstance(typ, type) and lookup(typ) is not None


def _one_level(tree: Any, with_path: bool) -> tuple[NodeType, Any, Any, Any]:
    ntype = lookup(type(tree))
    if ntype is None:
        raise ValueError(f"can't tree-flatten type: {type(tree)}")
    children, data, keys = ntype.flatten(tree, with_path)
    return ntype, children, plain_data(ntype, data), keys


def plain_data(ntype: NodeType, node_data: Any) -> Any:
    """Node data as jax shows it: dict keys as a plain tuple (not the private ``SortedKeys``)."""
    if ntype.kind == "dict":
        return tuple(node_data)
    if ntype.kind == "defaultdict":
        return node_data[0], tuple(node_data[1])
    return node_data


def flatten_one_level(tree: Any) -> tuple[Iterable[Any], Hashable]:
    """Children and node data of one node, as jax's ``flatten_one_level`` gives them.

    >>> flatten_one_level({'b': [1, 2], 'a': 3})
    ((3, [1, 2]), ('a', 'b'))

    Args:
        tree: A node (not a leaf).

    Returns:
        ``(children, node_data)``: the root's children in leaf order, and its node data
        (sorted keys for a dict, the class for a namedtuple, ``None`` for lists and tuples).
        The children come as jax gives them: a list or tuple node itself, a tuple for a
        dict, a list for other built-in nodes and dataclasses, and for a registered class
        what its flatten function returned (a list if that was neither list nor tuple).

    Raises:
        ValueError: If ``tree`` is a leaf.
    """
    ntype, children, data, _ = _one_level(tree, False)
    kind = ntype.kind
    if kind == "dict":
        return tuple(children), data
    if kind == "namedtuple":
        return list(children), data
    return children, data


def flatten_one_level_with_keys(tree: Any) -> tuple[Iterable[tuple[KeyEntry, Any]], Hashable]:
    """``(key entry, child)`` pairs and node data of one node, as jax's function of that name.

    >>> flatten_one_level_with_keys([1, 2])
    (((SequenceKey(idx=0), 1), (SequenceKey(idx=1), 2)), None)

    Args:
        tree: A node (not a leaf).

    Returns:
        ``(pairs, node_data)``: a tuple of ``(key entry, child)`` pairs and the node data,
        as :func:`flatten_one_level`.

    Raises:
        ValueError: If ``tree`` is a leaf.
    """
    _, children, data, keys = _one_level(tree, True)
    return tuple(zip(keys, children)), data


def node_record_data(ntype: NodeType, cls: type, data: Any, arity: int) -> tuple[Any, list[int]]:
    """A TreeDef record's node data for ``(cls, data)`` as ``node_data()`` shows it over
    ``arity`` children, and the order the children go in (dict keys go in leaf order)."""
    kind = ntype.kind
    order = list(range(arity))
    if kind in ("dict", "defaultdict", "ordereddict"):
        keys = list(data[1] if kind == "defaultdict" else data)
        if len(keys) != arity or len(set(keys)) != arity:
            raise ValueError(f"node_data: expected {arity} distinct keys, one per child, got {keys!r:.80}")
        if kind == "ordereddict":
            return tuple(keys), order
        position = dict(zip(keys, order))
        ordered = dict_order(position)
        order = [position[key] for key in ordered]
        return ((data[0], ordered) if kind == "defaultdict" else ordered), order
    if kind == "namedtuple":
        if len(cls._fields) != arity:  # type: ignore[attr-defined]
            raise ValueError(f"children: expected {len(cls._fields)} for {cls.__qualname__}, got {arity}")  # type: ignore[attr-defined]
        return cls, order
    if kind in ("list", "tuple", "none"):
        if kind == "none" and arity:
            raise ValueError(f"children: expected none for None, got {arity}")
        return None, order
    return data, order

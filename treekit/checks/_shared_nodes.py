"""Nodes held twice: ``tree_check`` (equinox's), which finds a node that appears at two key
paths, or inside itself, before flatten/unflatten (``jax.jit``) turns it into copies."""

from __future__ import annotations

from typing import Any

from treekit.core import IsLeaf, KeyPath, TreeCycleError, flatten_one_level_with_keys, format_message, keystr, lookup

__all__ = ["tree_check"]


def tree_check(tree: Any, is_leaf: IsLeaf | None = None) -> None:
    """Raise if a node of ``tree`` appears twice (the same object at two key paths) or inside
    itself (equinox's ``tree_check``).

    jax does not forbid a shared node, but flatten/unflatten (crossing ``jax.jit``, a
    checkpoint) turns it into two copies that no longer change together: almost always a bug,
    such as one layer object placed twice in a model. Leaves may repeat, and so may nodes
    without children (``None``, ``[]``, a Module without fields), as in equinox's.

    >>> shared = {'w': 1.0}
    >>> tree_check([{'w': 1.0}, {'w': 1.0}, 0, 0])
    >>> tree_check({'encoder': shared, 'decoder': [shared]})
    Traceback (most recent call last):
    ...
    ValueError: tree['encoder']: expected a node found nowhere else, got the dict at tree['decoder'][0] again
    (flatten/unflatten would make them two copies)

    Args:
        tree: Any pytree.
        is_leaf: As in :func:`treekit.tree_flatten`: what it marks is a leaf, and may repeat.

    Raises:
        ValueError: At the second key path (in leaf order) of a node held twice, naming the first.
        TreeCycleError: If a node holds itself (a ``ValueError`` too, as equinox's error).
    """
    seen: dict[int, tuple[Any, KeyPath]] = {}  # (keeps each node alive, so no id is reused)
    open_nodes: set[int] = set()  # the nodes on the path being walked
    stack: list[tuple[Any, KeyPath, bool]] = [(tree, (), False)]
    while stack:
        node, path, leaving = stack.pop()
        if leaving:
            open_nodes.discard(id(node))
            continue
        if (is_leaf is not None and is_leaf(node)) or lookup(type(node)) is None:
            continue
        pairs = list(flatten_one_level_with_keys(node)[0])
        if not pairs:
            continue
        if id(node) in seen:
            first = seen[id(node)][1]
            if id(node) in open_nodes:
                raise TreeCycleError("tree", path, first, type(node).__name__)
            raise ValueError(format_message(
                "tree", path, "a node found nowhere else", f"the {type(node).__name__} at tree{keystr(first)} again",
                "flatten/unflatten would make them two copies", None,
            ))
        seen[id(node)] = (node, path)
        open_nodes.add(id(node))
        stack.append((node, path, True))
        stack.extend((child, (*path, key), False) for key, child in reversed(pairs))

"""Printing trees for people: an indented view, leaves as ``f32[4,4]`` (the summary table is
in ``treekit._summary``)."""

from __future__ import annotations

from typing import Any

from treekit._describe import describe_leaf
from treekit._keys import KeyPath
from treekit._traverse import IsLeaf, flatten
from treekit._treedef import Node, TreeDef

__all__ = ["format_tree"]

def _preorder(treedef: TreeDef) -> list[int]:
    """Indices of ``treedef``'s post-order records, in pre-order (root first, left to right)."""
    nodes = treedef._nodes
    order: list[int] = []
    stack = [len(nodes) - 1]
    while stack:
        j = stack.pop()
        order.append(j)
        k = j - 1
        for _ in range(nodes[j][2]):  # children, right to left: the leftmost ends on top
            stack.append(k)
            k -= nodes[k][4]
    return order


def _node_text(node: Node) -> str:
    ntype, data, arity = node[0], node[1], node[2]
    kind = ntype.kind
    if kind == "none":
        return "None"
    name = ntype.node_class(data).__name__
    if kind == "static":
        return f"{name} {data!r:.60}"
    return name if arity else f"{name} (empty)"


def format_tree(
    tree: Any, *, is_leaf: IsLeaf | None = None, max_items: int = 6, max_depth: int | None = None
) -> str:
    """An indented view of ``tree``: one line per node and leaf, each with its key entry.

    Arrays show as ``dtype[shape]``, other leaves by ``repr`` (cut at 60 characters); a list
    or tuple with more than ``max_items`` children shows its first and last ``max_items // 2``.
    Joining the key entries down a branch gives the leaf's key path (see :func:`keystr`).
    Below ``max_depth`` key entries, a node shows as one line with its leaf count.

    >>> import numpy as np
    >>> params = {'layers': [{'w': np.zeros((2, 2), np.float32), 'b': np.zeros(2, np.float32)}],
    ...           'act': 'relu', 'mask': None, 'steps': list(range(10))}
    >>> print(format_tree(params, max_items=4))
    dict
      ['act']: 'relu'
      ['layers']: list
        [0]: dict
          ['b']: f32[2]
          ['w']: f32[2,2]
      ['mask']: None
      ['steps']: list
        [0]: 0
        [1]: 1
        ... 6 more
        [8]: 8
        [9]: 9
    >>> print(format_tree(params, max_depth=1))
    dict
      ['act']: 'relu'
      ['layers']: list ... (2 leaves)
      ['mask']: None
      ['steps']: list ... (10 leaves)

    Args:
        tree: Any pytree.
        is_leaf: As in :func:`treekit.tree_flatten`.
        max_items: Fold lists and tuples longer than this (``... 997 more``).
        max_depth: Show nodes down to this many key entries from the root, and each node
            there as one line; ``None`` (default) shows every level.

    Returns:
        The view as one string, lines joined by newlines (no trailing newline).

    Raises:
        ValueError: If ``max_depth`` is not ``None`` or an int >= 0.
    """
    if max_depth is not None and (type(max_depth) is not int or max_depth < 0):
        raise ValueError(f"max_depth: expected None or an int >= 0, got {max_depth!r}")
    visits: list[KeyPath] = []

    def visit(path: KeyPath, x: Any) -> bool:
        visits.append(path)
        return is_leaf is not None and bool(is_leaf(x))

    leaves, treedef, _ = flatten(tree, visit, with_path=True, leaf_takes_path=True)
    nodes = treedef._nodes
    half = max(max_items // 2, 1)
    lines: list[str] = []
    # One frame per open node: [arity, children seen, hidden, folds].
    frames: list[list[Any]] = []
    leaf_iter = iter(leaves)
    for path, j in zip(visits, _preorder(treedef)):
        node = nodes[j]
        depth = len(path)
        del frames[depth:]
        hidden = False
        if depth:
            parent = frames[-1]
            index = parent[1]
            parent[1] += 1
            hidden = parent[2]
            if not hidden and parent[3] and half <= index < parent[0] - half:
                hidden = True
                if index == half:
                    lines.append(f"{'  ' * depth}... {parent[0] - 2 * half} more")
        if node[0] is None:
            text = describe_leaf(next(leaf_iter))
        else:
            text = _node_text(node)
            folds = node[0].kind in ("list", "tuple") and node[2] > max_items
            cut = max_depth is not None and depth >= max_depth and node[2] > 0
            if cut:
                text += f" ... ({node[3]} lea{'f' if node[3] == 1 else 'ves'})"
            frames.append([node[2], 0, hidden or cut, folds])
        if not hidden:
            lines.append(f"{'  ' * depth}{path[-1]}: {text}" if depth else text)
    return "\n".join(lines)

"""Printing trees for people: an indented view, leaves as ``f32[4,4]`` (the summary table is
in ``treekit.look._summary``)."""

from __future__ import annotations

from typing import Any

from treekit.core import LIST, TUPLE, HtmlText, IsLeaf, Node, describe_leaf, flatten

__all__ = ["format_tree", "node_text"]

_INDENT_LEVELS = 32  # deeper lines are indented this much, then say their depth: "(40) "


def _indent(depth: int) -> str:
    return "  " * depth if depth <= _INDENT_LEVELS else f"{'  ' * _INDENT_LEVELS}({depth}) "


def node_text(node: Node) -> str:
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
    Indentation stops growing 32 levels down: deeper lines start with their depth in
    parentheses (``(40) [0]: list``), so that the text grows linearly with the tree.

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
        The view as one string, lines joined by newlines (no trailing newline): a ``str``
        whose ``_repr_html_`` shows it as preformatted text, so a notebook shows it without
        ``print`` (:func:`treekit.view` folds).

    Raises:
        TypeError: If ``max_items`` is not an int, or ``max_depth`` neither ``None`` nor an int.
        ValueError: If ``max_depth`` is a negative int.
    """
    if type(max_items) is not int:
        raise TypeError(f"max_items: expected an int, got {type(max_items).__name__} {max_items!r:.40}")
    if max_depth is not None and type(max_depth) is not int:
        raise TypeError(f"max_depth: expected None or an int >= 0, got {type(max_depth).__name__} {max_depth!r:.40}")
    if max_depth is not None and max_depth < 0:
        raise ValueError(f"max_depth: expected None or an int >= 0, got {max_depth!r}")
    treedef = flatten(tree, is_leaf)[1]
    nodes = treedef._nodes
    half = max(max_items // 2, 1)
    lines: list[str] = []
    # Pre-order over the records, with each node's subtree and the key entry leading to it,
    # taken again from its flatten function (the treedef says where the walk stops); a str
    # is a finished line. Lines are made once each: linear in the size of the tree at any depth.
    todo: list[Any] = [(len(nodes) - 1, tree, "", 0)]
    while todo:
        item = todo.pop()
        if type(item) is str:
            lines.append(item)
            continue
        j, sub, key, depth = item
        ntype, arity = nodes[j][0], nodes[j][2]
        text = describe_leaf(sub) if ntype is None else node_text(nodes[j])
        cut = arity > 0 and max_depth is not None and depth >= max_depth
        if cut:
            text += f" ... ({nodes[j][3]} lea{'f' if nodes[j][3] == 1 else 'ves'})"
        lines.append(f"{_indent(depth)}{key}: {text}" if depth else text)
        if not arity or cut:
            continue
        if ntype is LIST or ntype is TUPLE:
            children, keys = sub, [f"[{i}]" for i in range(arity)]
        else:
            children, _, entries = ntype.flatten(sub, True)
            keys = [str(entry) for entry in entries]
        if len(children) != arity:  # a flatten function that answers differently each time
            raise ValueError(
                f"tree: the flatten function of {node_text(nodes[j])} gave {arity} children, "
                f"then {len(children)}"
            )
        folds = ntype.kind in ("list", "tuple") and arity > max_items
        k = j - 1
        for index in range(arity - 1, -1, -1):  # pushed right to left: popped left to right
            if not folds or index < half or index >= arity - half:
                todo.append((k, children[index], keys[index], depth + 1))
            elif index == half:
                todo.append(f"{_indent(depth + 1)}... {arity - 2 * half} more")
            k -= nodes[k][4]
    return HtmlText("\n".join(lines))

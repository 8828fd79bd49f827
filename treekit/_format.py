"""Printing trees for people: leaves as ``f32[4,4]``, an indented view and a summary table."""

from __future__ import annotations

from typing import Any

from treekit._describe import describe_leaf, dtype_name, is_array
from treekit._keys import KeyPath, keystr
from treekit._traverse import IsLeaf, flatten
from treekit._treedef import Node, TreeDef

__all__ = ["format_tree", "summary"]

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


def format_tree(tree: Any, *, is_leaf: IsLeaf | None = None, max_items: int = 6) -> str:
    """An indented view of ``tree``: one line per node and leaf, each with its key entry.

    Arrays show as ``dtype[shape]``, other leaves by ``repr`` (cut at 60 characters); a list
    or tuple with more than ``max_items`` children shows its first and last ``max_items // 2``.
    Joining the key entries down a branch gives the leaf's key path (see :func:`keystr`).

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

    Args:
        tree: Any pytree.
        is_leaf: As in :func:`treekit.tree_flatten`.
        max_items: Fold lists and tuples longer than this.

    Returns:
        The view as one string, lines joined by newlines (no trailing newline).
    """
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
            frames.append([node[2], 0, hidden, folds])
        if not hidden:
            lines.append(f"{'  ' * depth}{path[-1]}: {text}" if depth else text)
    return "\n".join(lines)


def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def _itemsize(dtype: Any) -> int | None:
    itemsize = getattr(dtype, "itemsize", None)
    if isinstance(itemsize, int):
        return itemsize
    import numpy as np

    try:
        return int(np.dtype(dtype_name(dtype)).itemsize)
    except TypeError:
        return None


def _sizes(x: Any) -> tuple[int | None, int | None]:
    size = 1
    for dim in x.shape:
        if not isinstance(dim, int):
            return None, None
        size *= dim
    nbytes = getattr(x, "nbytes", None)
    if not isinstance(nbytes, int):
        itemsize = _itemsize(x.dtype)
        nbytes = None if itemsize is None else size * itemsize
    return size, nbytes


def summary(tree: Any, *, is_leaf: IsLeaf | None = None) -> str:
    """A table of ``tree``'s leaves: key path, shape, dtype, size and bytes, with totals.

    Leaves without a shape and dtype are listed with their type and left out of the totals.

    >>> import numpy as np
    >>> params = {'w': np.zeros((3, 4), np.float32), 'b': np.zeros(4, np.float32), 'step': 7}
    >>> print(summary(params))
    path      shape   dtype    size  bytes
    ['b']     (4,)    float32     4     16
    ['step']  -       int         -      -
    ['w']     (3, 4)  float32    12     48
    total     2 arrays           16     64

    Args:
        tree: Any pytree.
        is_leaf: As in :func:`treekit.tree_flatten`.

    Returns:
        The table as one string, lines joined by newlines (no trailing newline).
    """
    leaves, _, paths = flatten(tree, is_leaf, with_path=True)
    assert paths is not None
    rows = [["path", "shape", "dtype", "size", "bytes"]]
    arrays = total_size = total_bytes = 0
    for path, x in zip(paths, leaves):
        name = keystr(path) or "(root)"
        if not is_array(x):
            rows.append([name, "-", type(x).__name__, "-", "-"])
            continue
        size, nbytes = _sizes(x)
        arrays += 1
        total_size += size or 0
        total_bytes += nbytes or 0
        rows.append(
            [
                name,
                str(tuple(x.shape)),
                dtype_name(x.dtype),
                "-" if size is None else f"{size:,}",
                "-" if nbytes is None else f"{nbytes:,}",
            ]
        )
    rows.append(["total", f"{arrays} array" + ("" if arrays == 1 else "s"), "", f"{total_size:,}", f"{total_bytes:,}"])
    # The total row's second cell spans the shape and dtype columns.
    widths = [max(len(row[k]) for row in (rows if k in (0, 3, 4) else rows[:-1])) for k in range(5)]
    widths[2] = max(widths[2], len(rows[-1][1]) - 2 - widths[1])
    span = widths[1] + 2 + widths[2]
    lines = []
    for row in rows[:-1]:
        cells = [row[k].ljust(widths[k]) for k in range(3)] + [row[k].rjust(widths[k]) for k in (3, 4)]
        lines.append("  ".join(cells))
    last = rows[-1]
    lines.append(
        "  ".join([last[0].ljust(widths[0]), last[1].ljust(span), last[3].rjust(widths[3]), last[4].rjust(widths[4])])
    )
    if total_bytes >= 1024:
        lines[-1] += f"  ({_human_bytes(total_bytes)})"
    return "\n".join(line.rstrip() for line in lines)

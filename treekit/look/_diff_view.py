"""A :class:`~treekit.TreeDiff` drawn as HTML: the two trees side by side (``a`` on the left,
``b`` on the right), opened along the key paths that differ and nowhere else. Each difference
is one highlighted row holding both sides (a leaf's dtype, shape, statistics and small values;
a node's kind and subtotals; ``no such key``), with the difference's own words under it; the
siblings that do not differ show as one dim row each, subtotals on both sides.
"""

from __future__ import annotations

import html
from typing import Any

from treekit.core import IsLeaf, KeyPath, flatten, fragment, keystr, lookup, pair
from treekit.look._format import node_text
from treekit.look._view import Sums, leaf_lines

__all__ = ["render_diff"]

_ABSENT = object()  # the side of a dict key that only the other tree has
_SAME = 5  # siblings that do not differ drawn per node, before one "... N more" row
_CSS = {"missing": ("tk-gone", "tk-gone"), "extra": ("tk-new", "tk-new")}
_CHANGED = ("tk-changed", "tk-changed")

# One difference, as _checks gives it: (key path, kind, expected text, got text, detail).
Record = tuple[KeyPath, str, str, str, "str | None"]


def render_diff(
    trees: tuple[Any, Any] | None, records: list[Record], *, is_leaf: IsLeaf | None, max_rows: int = 2000
) -> str:
    """The HTML fragment of a diff of ``trees`` ``(a, b)`` with these ``records`` (in leaf
    order, as :func:`treekit.tree_diff` finds them): pre-order along the differing key paths,
    with an explicit stack (any depth). At most ``max_rows`` rows are drawn. Without
    ``trees``, each record is one row by its key path."""
    if not records:
        return fragment('<div class="tk-total">no differences</div>')
    at: dict[KeyPath, list[Record]] = {}
    below: dict[KeyPath, dict[Any, None]] = {}  # each prefix of a record's path: its next entries
    for record in records:
        path = record[0]
        at.setdefault(path, []).append(record)
        for k in range(len(path)):
            below.setdefault(path[:k], {})[path[k]] = None
    count = len(at)
    head = f"{len(records):,} difference{'' if len(records) == 1 else 's'} (a: left, b: right)"
    out = [f'<div class="tk-total">{head}</div><div class="tk-pairs">']
    out.append(pair(0, "a", "b", ("tk-heads", "tk-heads")))
    drawn = rows = 0
    # (key path, key text, a's side, b's side, depth) to draw, or a str to emit as it is
    todo: list[Any] = [((), "tree", *trees, 0)] if trees is not None else []
    if trees is None:
        todo.extend((path, keystr(path), _ABSENT, _ABSENT, 0) for path in reversed(at))
    while todo:
        item = todo.pop()
        if type(item) is str:
            out.append(item)
            continue
        if rows >= max_rows:
            continue
        path, key, x, y, level = item
        rows += 1
        key_html = f'<span class="tk-key">{html.escape(key)}</span>: '
        if path in at:  # a difference: not looked into
            drawn += 1
            found = at[path]
            kind, expected, got = found[0][1:4]
            if kind == "node" or x is y is _ABSENT:  # (no trees: the records' words)
                left, right = html.escape(expected), html.escape(got)
            else:
                left, right = _side(x, is_leaf), _side(y, is_leaf)
            out.append(pair(level, key_html + left, key_html + right, _CSS.get(kind, _CHANGED)))
            where = f'<code class="tk-path">{html.escape(keystr(path))}</code>'
            for _, _, expected, got, detail in found:
                words = f"expected {expected}, got {got}" + (f" ({detail})" if detail else "")
                out.append(pair(level, where, f'<span class="tk-why">{html.escape(words)}</span>'))
            continue
        summary = pair(level, key_html + _side(x, is_leaf), key_html + _side(y, is_leaf), tag="summary")
        out.append(f"<details open>{summary}")
        todo.append("</details>")
        a_children, b_children = _children(x), _children(y)
        entries = list(a_children) + [entry for entry in b_children if entry not in a_children]
        same = [entry for entry in entries if (*path, entry) not in at and (*path, entry) not in below]
        if len(same) > _SAME:
            todo.append(pair(level + 1, f'<span class="tk-dim">... {len(same) - _SAME:,} more the same</span>', ""))
        shown = set(same[:_SAME])
        for entry in reversed(entries):  # pushed right to left: drawn left to right
            child_path = (*path, entry)
            x_child, y_child = a_children.get(entry, _ABSENT), b_children.get(entry, _ABSENT)
            if entry in shown:
                text = f'<span class="tk-key">{html.escape(str(entry))}</span>: '
                sides = text + _side(x_child, is_leaf), text + _side(y_child, is_leaf)
                todo.append(pair(level + 1, *sides, ("tk-dim", "tk-dim")))
            elif child_path in at or child_path in below:
                todo.append((child_path, str(entry), x_child, y_child, level + 1))
    if drawn < count:
        out.append(f'<div class="tk-dim">... {count - drawn:,} more differing paths not drawn: print the diff</div>')
    out.append("</div>")
    return fragment("".join(out))


def _children(tree: Any) -> dict[Any, Any]:
    """A node's children by key entry (``{}`` for the absent side)."""
    if tree is _ABSENT:
        return {}
    ntype = lookup(type(tree))
    assert ntype is not None  # (a node on a differing path is a node on both sides)
    children, _, entries = ntype.flatten(tree, True)
    assert entries is not None
    return dict(zip(entries, children))


def _side(tree: Any, is_leaf: IsLeaf | None) -> str:
    """One side of a row: a leaf as the view draws it, a node's kind and subtotals."""
    if tree is _ABSENT:
        return '<span class="tk-dim">no such key</span>'
    leaves, treedef, _ = flatten(tree, is_leaf)
    record = treedef._nodes[-1]
    if record[0] is None:
        return leaf_lines([tree], [None])[0]
    subtotal = Sums(leaves, []).text(0, len(leaves))
    kind = html.escape(node_text(record))
    return f'<span class="tk-kind">{kind}</span> <span class="tk-dim">{html.escape(subtotal)}</span>'

"""A tree to look at in a notebook or a browser: :func:`view` gives foldable HTML (``<details>``,
so it works with scripts disabled), one self-contained fragment with inline CSS and light and
dark themes, every node with its subtotals and every leaf with its shape, dtype, sharding and
statistics; ``str()`` of it is the :func:`treekit.summary` table.

Big trees stay small: a node shows its first ``max_children`` children and then one
"... N more" row with their subtotals, and at most ``max_rows`` rows are drawn in all (later
nodes show their subtotals, folded, without their children). Leaf statistics are computed
only for the leaves drawn.
"""

from __future__ import annotations

import html
import itertools
import os
from typing import Any

from treekit.core import LIST, TUPLE, IsLeaf, describe_leaf, flatten, fragment, is_array, keystr, leaf_size
from treekit.look._format import node_text
from treekit.look._summary import human_bytes, leaf_layouts, not_counted, summary
from treekit.ops import Stats, leaf_stats
from treekit.sharding import device_nbytes, spec_str

__all__ = ["Sums", "View", "leaf_html", "leaf_lines", "view"]

_VALUES = 8  # arrays of at most this many entries show them (flattened)


class Sums:
    """Prefix sums over the leaves, so that any run of leaves has its subtotals at once."""

    def __init__(self, leaves: list[Any], layouts: list[Any]) -> None:
        arrays, sizes, nbytes, device = [], [], [], []
        for k, x in enumerate(leaves):
            size, count = leaf_size(x)
            arrays.append(1 if is_array(x) else 0)
            sizes.append(size or 0)
            nbytes.append(count or 0)
            layout = layouts[k] if layouts else None
            on_device = device_nbytes(x, *layout) if layout is not None else None
            device.append(count or 0 if on_device is None else on_device)
        self.arrays, self.sizes, self.nbytes, self.device = (
            [0, *itertools.accumulate(column)] for column in (arrays, sizes, nbytes, device)
        )
        self.sharded = bool(layouts) and any(layout is not None for layout in layouts)

    def text(self, start: int, stop: int) -> str:
        arrays = self.arrays[stop] - self.arrays[start]
        if not arrays:
            return f"{stop - start:,} lea{'f' if stop - start == 1 else 'ves'}"
        parts = [
            f"{arrays:,} arra{'y' if arrays == 1 else 'ys'}",
            f"{self.sizes[stop] - self.sizes[start]:,} params",
            human_bytes(self.nbytes[stop] - self.nbytes[start]),
        ]
        if self.sharded:
            parts.append(f"{human_bytes(self.device[stop] - self.device[start])} per device")
        return " · ".join(parts)


def leaf_html(x: Any, layout: Any, stats: Stats | None, values: Any = None) -> str:
    """One leaf's line: its shape and dtype (or type and repr), its spec where it is sharded,
    ``stats`` where given, and ``values`` (its entries, read already) where given."""
    if not is_array(x):
        name = getattr(x, "__qualname__", None) if callable(x) and not isinstance(x, type) else None
        text = f"{getattr(x, '__module__', None) or '?'}.{name}" if type(name) is str else repr(x)
        text = text if len(text) <= 80 else text[:79] + "…"
        return f'<span class="tk-dim">{html.escape(type(x).__name__)}</span> {html.escape(text)}'
    out = [html.escape(describe_leaf(x))]
    if layout is not None:
        out.append(f'<span class="tk-spec">{html.escape(spec_str(layout[0]))}</span>')
    if stats is not None:
        if stats.finite:
            numbers = f"mean {stats.mean:.4g} std {stats.std:.4g} min {stats.low:.4g} max {stats.high:.4g}"
            out.append(f'<span class="tk-dim">{numbers}</span>')
        for n, what in ((stats.nans, "NaN"), (stats.infs, "inf")):
            if n:
                out.append(f'<span class="tk-bad">{n:,} {what}</span>')
    if values is not None:
        items = values.ravel().tolist()
        texts = (format(v, ".4g") if type(v) in (float, complex) else str(v) for v in items)
        shown = html.escape("[" + ", ".join(texts) + "]")
        out.append(f'<span class="tk-values">{shown}</span>')
    return " ".join(out)


def leaf_lines(leaves: list[Any], layouts: list[Any]) -> list[str]:
    """:func:`leaf_html` of each leaf with its statistics, and the entries of arrays of at most
    8: all read together, where the arrays live (one transfer from a device)."""
    parts = leaf_stats(leaves)
    small = [k for k, x in enumerate(leaves) if parts[k] is not None and 0 < (leaf_size(x)[0] or 0) <= _VALUES]
    values = dict(zip(small, _small_values([leaves[k] for k in small])))
    return [leaf_html(x, layout, parts[k], values.get(k)) for k, (x, layout) in enumerate(zip(leaves, layouts))]


def _small_values(leaves: list[Any]) -> list[Any]:
    """The entries of each leaf as a numpy array (leaves with values to read: their statistics
    were read), the jax arrays' fetched in one transfer."""
    import numpy as np

    from treekit.ops import loaded_jax

    jax = loaded_jax()
    placed = [k for k, x in enumerate(leaves) if jax is not None and isinstance(x, jax.Array)]
    out = [None if jax is not None and isinstance(x, jax.Array) else np.asarray(x) for x in leaves]
    if placed:
        assert jax is not None
        for k, value in zip(placed, jax.device_get([leaves[k] for k in placed])):
            out[k] = np.asarray(value)
    return out


class View:
    """A tree drawn as foldable HTML (``_repr_html_`` for notebooks, :meth:`View.save_html` for a
    file); ``str()`` is its :func:`treekit.summary` table. Made by :func:`view`.

    >>> import html
    >>> page = html.unescape(view({'w': [1.0, 2.0]}, stats=False)._repr_html_())
    >>> '<details open>' in page and "['w'][1]" in page
    True
    """

    def __init__(self, tree: Any, options: dict[str, Any]) -> None:
        self._tree, self._options = tree, options  # (view's keyword arguments, checked)

    def __str__(self) -> str:
        keep = ("depth", "stats", "shardings", "mesh", "is_leaf")
        return summary(self._tree, **{name: self._options[name] for name in keep})

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        return render(self._tree, **self._options)

    def save_html(self, path: str | os.PathLike[str]) -> None:
        """Write the view as a whole HTML page (UTF-8) to ``path``.

        >>> import os, tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     view({'w': 1.0}).save_html(os.path.join(d, 'tree.html'))
        """
        page = (
            '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>treekit view</title></head>'
            f"<body>{self._repr_html_()}</body></html>\n"
        )
        with open(path, "w", encoding="utf-8") as f:
            f.write(page)


def view(
    tree: Any,
    *,
    depth: int | None = None,
    stats: bool = True,
    shardings: Any = None,
    mesh: Any = None,
    is_leaf: IsLeaf | None = None,
    max_children: int = 100,
    max_rows: int = 2000,
) -> View:
    """A view of ``tree`` to look at: a notebook shows it as foldable HTML, ``str()`` gives the
    :func:`treekit.summary` table, :meth:`View.save_html` writes a page.

    Each node folds and shows its key, its kind (``dict``, ``list``, a Module's class, ...) and
    its subtotals (arrays, parameters, bytes, and bytes per device when sharded); each leaf its
    shape and dtype, its ``PartitionSpec`` when sharded, and with ``stats`` its mean, std, min
    and max, NaN and infinity counts highlighted, and the values of arrays of at most 8
    entries (flattened). Each row ends with its key path in the form :func:`treekit.tree_get`,
    :func:`treekit.tree_at` and :func:`treekit.sharding.match_rules` take (select it with one
    click).

    >>> import numpy as np
    >>> v = view({'dense': {'kernel': np.ones((2, 3), np.float32), 'bias': np.zeros(3, np.float32)}})
    >>> print(v)
    path                  shape   dtype    size  bytes  mean  std  min  max  nan  inf
    ['dense']['bias']     (3,)    float32     3     12     0    0    0    0    0    0
    ['dense']['kernel']   (2, 3)  float32     6     24     1    0    1    1    0    0
    total                 2 arrays            9     36  0.6667  0.4714    0    1    0    0

    Args:
        tree: Any pytree.
        depth: Open the nodes down to this many key entries (the rest start folded); ``None``
            (default): open all that are drawn. ``str()`` collapses rows as ``summary`` does.
        stats: Show each drawn leaf's statistics (they read its values, where it lives: see
            :doc:`accelerators`).
        shardings: As :func:`treekit.summary` takes.
        mesh: As :func:`treekit.summary` takes.
        is_leaf: As in :func:`treekit.tree_flatten`.
        max_children: Children a node shows before one "... N more" row with their subtotals.
        max_rows: Rows drawn in all; later nodes show their subtotals, folded, without children.

    Returns:
        A :class:`View`.

    Raises:
        ValueError: If ``depth`` is not ``None`` or an int >= 0, or ``max_children`` or
            ``max_rows`` is not an int >= 1.
    """
    if depth is not None and (type(depth) is not int or depth < 0):
        raise ValueError(f"depth: expected None or an int >= 0, got {depth!r}")
    for name, value in (("max_children", max_children), ("max_rows", max_rows)):
        if type(value) is not int or value < 1:
            raise ValueError(f"{name}: expected an int >= 1, got {value!r}")
    options = {"depth": depth, "stats": stats, "shardings": shardings, "mesh": mesh, "is_leaf": is_leaf}
    return View(tree, {**options, "max_children": max_children, "max_rows": max_rows})


def render(
    tree: Any,
    *,
    depth: int | None,
    stats: bool,
    shardings: Any,
    mesh: Any,
    is_leaf: IsLeaf | None,
    max_children: int,
    max_rows: int,
) -> str:
    """The HTML fragment of :func:`view`: pre-order over the tree's records (as
    ``format_tree``), each node's children taken again from its flatten function, with an
    explicit stack (any depth)."""
    leaves, treedef, paths = flatten(tree, is_leaf, with_path=True)
    assert paths is not None
    layouts = leaf_layouts(tree, leaves, is_leaf, shardings, mesh)
    sums = Sums(leaves, layouts)
    nodes = treedef._nodes
    out = [f'<div class="tk-total">total: {html.escape(sums.text(0, len(leaves)))}</div>']
    note = not_counted(leaves, paths)
    if note:
        out.append(f'<div class="tk-dim">{html.escape(note)}</div>')
    rows = 0
    drawn: list[tuple[int, int, str, bool]] = []  # (place in out, leaf index, key, with stats)
    # (record index, subtree, key text, depth, first leaf) to draw, or a str to emit as it is
    todo: list[Any] = [(len(nodes) - 1, tree, "tree", 0, 0)]
    while todo:
        item = todo.pop()
        if type(item) is str:
            out.append(item)
            continue
        j, sub, key, level, start = item
        ntype, arity, count = nodes[j][0], nodes[j][2], nodes[j][3]
        rows += 1
        key_html = f'<span class="tk-key">{html.escape(key)}</span>'
        if ntype is None:  # its line is written once the drawn leaves' statistics are in
            drawn.append((len(out), start, key_html, stats and rows <= max_rows))
            out.append("")
            continue
        path = html.escape(keystr(paths[start][:level])) if count else ""
        opened = (depth is None or level < depth) and rows < max_rows
        head = (
            f"<details{' open' if opened else ''}><summary>{key_html}: "
            f'<span class="tk-kind">{html.escape(node_text(nodes[j]))}</span> '
            f'<span class="tk-dim">{html.escape(sums.text(start, start + count))}</span>'
            f'<code class="tk-path">{path}</code></summary>'
        )
        if not arity:
            out.append(head.replace("<details open>", "<details>") + "</details>")
            continue
        if rows >= max_rows:
            out.append(head + '<div class="tk-leaf tk-dim">(not drawn: view() this subtree)</div></details>')
            continue
        out.append(head)
        todo.append("</details>")
        if ntype is LIST or ntype is TUPLE:
            children, keys = sub, [f"[{i}]" for i in range(arity)]
        else:
            children, _, entries = ntype.flatten(sub, True)
            keys = [str(entry) for entry in entries]
        if len(children) != arity:
            got = f"gave {arity} children, then {len(children)}"
            raise ValueError(f"tree: the flatten function of {node_text(nodes[j])} {got}")
        spans = []  # (record index, first leaf) of each child, left to right
        k, first = j - 1, start + count
        for _ in range(arity):
            first -= nodes[k][3]
            spans.append((k, first))
            k -= nodes[k][4]
        spans.reverse()
        shown = min(arity, max_children)
        if arity > shown:
            rest = spans[shown][1]
            more = html.escape(f"... {arity - shown:,} more: {sums.text(rest, start + count)}")
            todo.append(f'<div class="tk-leaf tk-dim">{more}</div>')
        for index in range(shown - 1, -1, -1):  # pushed right to left: drawn left to right
            todo.append((spans[index][0], children[index], keys[index], level + 1, spans[index][1]))
    read = [start for _, start, _, with_stats in drawn if with_stats]
    lines = dict(zip(read, leaf_lines([leaves[k] for k in read], [layouts[k] if layouts else None for k in read])))
    for at, start, key_html, _ in drawn:
        body = lines.get(start) or leaf_html(leaves[start], layouts[start] if layouts else None, None)
        path = html.escape(keystr(paths[start]))
        out[at] = f'<div class="tk-leaf">{key_html}: {body}<code class="tk-path">{path}</code></div>'
    return fragment("".join(out))

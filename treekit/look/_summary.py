"""The summary table of a tree's leaves: one row per leaf or per key-path prefix, with totals.

The table is built from columns (:data:`COLUMNS`, :data:`SHARDING_COLUMNS` for sharded
trees, and :data:`STAT_COLUMNS` with ``stats=True``): each column is a header, an alignment
and a function from a row (the leaves under one key path, or all of them for the total row) to
a cell, so a new column is one entry.
"""

from __future__ import annotations

import dataclasses
import functools
import html
import math
from collections.abc import Callable, Sequence
from typing import Any

from treekit.core import HtmlText, IsLeaf, KeyPath, dtype_name, flatten, is_array, keystr, leaf_size
from treekit.ops import Stats, broadcast, leaf_stats, merge_stats
from treekit.sharding import Layout, annotation, box_level, device_nbytes, layout_of, mesh_str, named_layout, spec_str

__all__ = [
    "COLUMNS",
    "SHARDING_COLUMNS",
    "STAT_COLUMNS",
    "Column",
    "Row",
    "human_bytes",
    "leaf_layouts",
    "not_counted",
    "summary",
]


@dataclasses.dataclass
class Row:
    """One row of the table: a key path (or prefix) and the leaves under it.

    ``grouped`` is true for a prefix row (``depth=``) and the ``total`` row, whose cells are
    subtotals; ``leaves`` holds every leaf under it, arrays or not, and ``layouts`` each one's
    ``(spec, mesh axes)`` where it is sharded (``None`` where not; empty for an unsharded tree),
    and ``parts`` each one's :class:`~treekit.ops.Stats` (empty without ``stats=True``).
    """

    name: str
    leaves: list[Any]
    grouped: bool = False
    total: bool = False
    layouts: list[Layout | None] = dataclasses.field(default_factory=list)
    parts: list[Stats | None] = dataclasses.field(default_factory=list)

    @property
    def arrays(self) -> list[Any]:
        """The leaves that count in sizes: the arrays (see :func:`~treekit.core._describe.leaf_size`)."""
        return [x for x in self.leaves if is_array(x)]

    def placed(self) -> list[tuple[Any, Layout | None]]:
        """``(array, layout)`` for each array of the row."""
        return [(x, layout) for x, layout in zip(self.leaves, self.layouts) if is_array(x)]

    @functools.cached_property
    def stats(self) -> Stats:
        """The statistics of the finite entries of the row's arrays, and their NaN and inf counts."""
        return merge_stats(self.parts)


@dataclasses.dataclass(frozen=True)
class Column:
    """A column: its header, whether it is right-aligned (numbers), and its cell function."""

    header: str
    right: bool
    cell: Callable[[Row], str]


def _shape(row: Row) -> str:
    if not row.grouped:
        x = row.leaves[0]
        return str(tuple(x.shape)) if is_array(x) else "-"
    n = len(row.arrays)
    return f"{n} array" + ("" if n == 1 else "s")


def _dtype(row: Row) -> str:
    if row.total:  # its shape cell ("3 arrays") spans the dtype column
        return ""
    if not row.grouped:
        x = row.leaves[0]
        return dtype_name(x.dtype) if is_array(x) else type(x).__name__
    names = {dtype_name(x.dtype) for x in row.arrays}
    return names.pop() if len(names) == 1 else "mixed" if names else ""


def _total(index: int) -> Callable[[Row], str]:
    def cell(row: Row) -> str:
        arrays = row.arrays
        if not arrays:
            return "-" if not row.grouped or row.leaves else "0"
        values = [leaf_size(x)[index] for x in arrays]
        if not row.grouped and values[0] is None:
            return "-"
        return f"{sum(v or 0 for v in values):,}"

    return cell


COLUMNS: list[Column] = [
    Column("path", False, lambda row: row.name),
    Column("shape", False, _shape),
    Column("dtype", False, _dtype),
    Column("size", True, _total(0)),
    Column("bytes", True, _total(1)),
]
"""The columns of :func:`summary`, in order."""


def _spec(row: Row) -> str:
    if row.total:  # the mesh, if one holds every sharded leaf
        meshes = {mesh_str(layout[1]) for layout in row.layouts if layout is not None}
        return f"mesh {meshes.pop()}" if len(meshes) == 1 else "mixed meshes" if meshes else ""
    texts = {"-" if layout is None else spec_str(layout[0]) for _, layout in row.placed()}
    return texts.pop() if len(texts) == 1 else "mixed" if texts else "-"


def _device_bytes(row: Row) -> str:
    placed = row.placed()
    if not placed:
        return "-" if not row.grouped or row.leaves else "0"
    values = [leaf_size(x)[1] if layout is None else device_nbytes(x, *layout) for x, layout in placed]
    if not row.grouped and values[0] is None:
        return "-"
    return f"{sum(v or 0 for v in values):,}"


SHARDING_COLUMNS: list[Column] = [
    Column("sharding", False, _spec),
    Column("bytes/device", True, _device_bytes),
]
"""The columns of a sharded tree (its arrays carry a ``NamedSharding``, or ``shardings=`` is
given): each leaf's ``PartitionSpec`` and the bytes of it that the device holding the most
keeps; the total row names the mesh and sums the bytes per device. Leaves without a spec
(numpy arrays, arrays on one device) show ``-`` and count whole."""


def _stat(name: str) -> Callable[[Row], str]:
    def cell(row: Row) -> str:
        if not row.arrays:
            return "-"
        value = getattr(row.stats, name)
        if name in ("nans", "infs"):
            return f"{value:,}"
        return "-" if math.isnan(value) else f"{value:.4g}"

    return cell


STAT_COLUMNS: list[Column] = [
    Column("mean", True, _stat("mean")),
    Column("std", True, _stat("std")),
    Column("min", True, _stat("low")),
    Column("max", True, _stat("high")),
    Column("nan", True, _stat("nans")),
    Column("inf", True, _stat("infs")),
]
"""The columns ``stats=True`` adds: over the finite entries of the row's arrays (magnitudes for
complex), and the counts of NaN and infinite entries."""


def human_bytes(n: int) -> str:
    """``812 B``, ``1.5 KiB``, ``48.8 MiB``: a byte count for people (binary units)."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def table_rows(
    leaves: list[Any],
    paths: list[KeyPath],
    depth: int | None,
    layouts: Sequence[Layout | None] = (),
    parts: Sequence[Stats | None] = (),
) -> list[Row]:
    """The rows of the table but the total; ``layouts``: each leaf's, or empty (not sharded);
    ``parts``: each leaf's statistics, or empty (not asked for)."""
    if depth is None:
        return [
            Row(keystr(path) or "(root)", [x], layouts=list(layouts[k : k + 1]), parts=list(parts[k : k + 1]))
            for k, (path, x) in enumerate(zip(paths, leaves))
        ]
    groups: dict[str, Row] = {}
    for k, (path, x) in enumerate(zip(paths, leaves)):
        prefix = path[:depth]
        name = keystr(prefix) or "(root)"
        row = groups.get(name)
        if row is None:
            groups[name] = row = Row(name, [], grouped=len(path) > depth)
        elif not row.grouped:  # a leaf at this path and, before it, nothing else: never both
            row.grouped = True
        row.leaves.append(x)
        row.layouts.extend(layouts[k : k + 1])
        row.parts.extend(parts[k : k + 1])
    return list(groups.values())


def leaf_layouts(
    tree: Any, leaves: list[Any], is_leaf: IsLeaf | None, shardings: Any, mesh: Any
) -> list[Layout | None]:
    """Each leaf's layout: from ``shardings`` (a prefix of ``tree``) when given, else from the
    leaf's own ``.sharding``; ``[]`` when no leaf has one (the table then has no sharding columns)."""
    if shardings is None and mesh is not None:  # the specs flax's boxes give their leaves
        names = [annotation(box) for box in flatten(tree, box_level(is_leaf))[0]]
        if all(n is None for n in names):
            raise TypeError(
                "mesh: expected None without shardings= or leaves in flax's sharding boxes "
                f"(it lays out their PartitionSpecs), got {mesh!r:.60}"
            )
        return [None if n is None else layout_of(n, mesh) for n in names]
    if shardings is None:
        found = [named_layout(getattr(x, "sharding", None)) if is_array(x) else None for x in leaves]
        return found if any(layout is not None for layout in found) else []
    full = broadcast(shardings, tree, lambda x: x is None, "shardings", full_is_leaf=is_leaf)
    given, _, paths = flatten(full, lambda x: x is None, with_path=True)
    assert paths is not None
    out = []
    for path, sharding in zip(paths, given):
        try:
            out.append(layout_of(sharding, mesh))
        except TypeError as err:
            raise TypeError(f"shardings{keystr(path)}: {err}") from None
    return out


def summary(
    tree: Any,
    *,
    is_leaf: IsLeaf | None = None,
    depth: int | None = None,
    stats: bool = False,
    shardings: Any = None,
    mesh: Any = None,
    format: str = "text",
) -> str:
    """A table of ``tree``'s leaves: key path, shape, dtype, size and bytes, with totals.

    Leaves without a shape and dtype (a Python number, an equinox Module's activation
    function, a string) are listed with their type, left out of the totals (as
    :func:`treekit.tree_size` leaves them out), and named under the table:

    >>> import numpy as np
    >>> params = {'w': np.zeros((3, 4), np.float32), 'b': np.zeros(4, np.float32), 'step': 7}
    >>> print(summary(params))
    path      shape   dtype    size  bytes
    ['b']     (4,)    float32     4     16
    ['step']  -       int         -      -
    ['w']     (3, 4)  float32    12     48
    total     2 arrays           16     64
    not counted (not arrays): ['step'] (int)

    ``depth=N`` gives one row per key path ``N`` entries long, with the subtotals of the
    leaves under it (as flax's ``nnx.tabulate`` and haiku's ``tabulate`` show one row per
    module); ``stats=True`` adds each row's mean, std, min and max (over its finite entries)
    and its NaN and infinity counts; ``format='markdown'`` gives a Markdown table:

    >>> model = [{'w': np.ones((2, 2)), 'b': np.array([0.0, np.nan])}, {'w': np.full((2, 1), -2.0)}]
    >>> print(summary(model, depth=1, stats=True))
    path   shape     dtype    size  bytes  mean    std  min  max  nan  inf
    [0]    2 arrays  float64     6     48   0.8    0.4    0    1    1    0
    [1]    1 array   float64     2     16    -2      0   -2   -2    0    0
    total  3 arrays              8     64     0  1.309   -2    1    1    0
    >>> print(summary({'w': np.zeros(3, np.float32)}, format='markdown'))
    | path | shape | dtype | size | bytes |
    |:---|:---|:---|---:|---:|
    | ['w'] | (3,) | float32 | 3 | 12 |
    | total | 1 array |  | 3 | 12 |

    A sharded tree (jax arrays placed with a ``NamedSharding``, or any tree with
    ``shardings=``) gets two more columns: each leaf's ``PartitionSpec`` and its bytes on the
    device that holds the most of it, summed at the bottom, which answers "does it fit on one
    device?" (see :doc:`scaling-out` for examples; they need jax).

    Args:
        tree: Any pytree.
        is_leaf: As in :func:`treekit.tree_flatten`.
        depth: Collapse each subtree below this many key entries into one row of subtotals;
            ``None`` (default) lists every leaf.
        stats: Add the value statistics columns (they read every array's values: numpy
            arrays on the host, jax arrays on an accelerator in a compiled reduction there,
            seven numbers a leaf brought back (see :doc:`accelerators`); abstract ones show ``-``).
        shardings: A tree of ``NamedSharding``, ``PartitionSpec`` and ``None`` (replicated),
            with ``tree``'s structure or a prefix of it (as :func:`treekit.sharding.shardings`
            or :func:`treekit.sharding.match_rules` give); overrides the arrays' own shardings.
        mesh: The mesh of the ``PartitionSpec`` in ``shardings``: a ``jax.sharding.Mesh``
            or ``{axis name: size}``. Without ``shardings``, the specs are the names flax's
            boxes give their leaves (``nn.Partitioned``, nnx ``Variable`` metadata), as
            :func:`treekit.sharding.match_rules` reads them.
        format: ``'text'`` (aligned columns) or ``'markdown'``.

    Returns:
        The table as one string, lines joined by newlines (no trailing newline): a ``str``
        whose ``_repr_html_`` is the table as HTML, so a notebook shows it without ``print``.

    Raises:
        ValueError: If ``depth`` is not an int >= 0 or ``format`` is unknown.
        TypeError: If ``shardings`` holds a spec and ``mesh`` is missing, or ``mesh`` comes
            without ``shardings`` in a tree with no flax box's names.
        StructureMismatchError: If ``shardings`` is not a prefix of ``tree``; labelled
            ``shardings``.
    """
    if depth is not None and (type(depth) is not int or depth < 0):
        raise ValueError(f"depth: expected None or an int >= 0, got {depth!r}")
    if format not in ("text", "markdown"):
        raise ValueError(f"format: expected 'text' or 'markdown', got {format!r}")
    leaves, _, paths = flatten(tree, is_leaf, with_path=True)
    assert paths is not None
    layouts = leaf_layouts(tree, leaves, is_leaf, shardings, mesh)
    columns = COLUMNS + (SHARDING_COLUMNS if layouts else []) + (STAT_COLUMNS if stats else [])
    parts = leaf_stats(leaves) if stats else []  # (computed together: see treekit.ops.leaf_stats)
    last = Row("total", leaves, grouped=True, total=True, layouts=layouts, parts=parts)
    rows = [*table_rows(leaves, paths, depth, layouts, parts), last]
    table = [[column.cell(row) for column in columns] for row in rows]
    total_bytes = sum(leaf_size(x)[1] or 0 for x in leaves)
    note = not_counted(leaves, paths)
    shown = _html_table(columns, table) + (f'<p class="tk-dim">{html.escape(note)}</p>' if note else "")
    if format == "markdown":
        lines = ["| " + " | ".join(column.header for column in columns) + " |"]
        lines.append("|" + "|".join("---:" if column.right else ":---" for column in columns) + "|")
        lines += ["| " + " | ".join(cells) + " |" for cells in table]
        return HtmlText("\n".join(lines + (["", note] if note else [])), shown)
    header, body, total = [column.header for column in columns], table[:-1], table[-1]
    # The total row's shape cell ("3 arrays") spans the shape and dtype columns.
    widths = [max(len(cells[k]) for cells in [header, *body]) for k in range(len(columns))]
    widths = [w if k in (1, 2) else max(w, len(total[k])) for k, w in enumerate(widths)]
    widths[2] = max(widths[2], len(total[1]) - 2 - widths[1])
    lines = []
    for cells in [header, *body]:
        texts = [cell.rjust(w) if column.right else cell.ljust(w) for cell, w, column in zip(cells, widths, columns)]
        lines.append("  ".join(texts).rstrip())
    texts = [total[0].ljust(widths[0]), total[1].ljust(widths[1] + 2 + widths[2])]
    for cell, w, column in list(zip(total, widths, columns))[3:]:
        texts.append(cell.rjust(w) if column.right else cell.ljust(w))
    lines.append("  ".join(texts).rstrip())
    if layouts:
        per_device = int(_device_bytes(rows[-1]).replace(",", "").replace("-", "0"))
        lines[-1] += f"  ({human_bytes(total_bytes)}; {human_bytes(per_device)} per device)"
    elif total_bytes >= 1024:
        lines[-1] += f"  ({human_bytes(total_bytes)})"
    return HtmlText("\n".join(lines + ([note] if note else [])), shown)


_NAMED = 3  # the leaves left out of the totals named under the table; the rest are counted


def not_counted(leaves: list[Any], paths: list[KeyPath]) -> str:
    """The line naming the leaves left out of the totals, or ``''``."""
    left = [f"{keystr(path) or '(root)'} ({type(x).__name__})" for path, x in zip(paths, leaves) if not is_array(x)]
    if not left:
        return ""
    more = f", and {len(left) - _NAMED:,} more" if len(left) > _NAMED else ""
    return f"not counted (not arrays): {', '.join(left[:_NAMED])}{more}"


def _html_table(columns: list[Column], table: list[list[str]]) -> str:
    """The table as HTML (the last row, the total, set apart); every cell escaped."""

    def row(cells: list[str], tag: str) -> str:
        opens = [f'<{tag} class="tk-num">' if column.right else f"<{tag}>" for column in columns]
        return "".join(f"{start}{html.escape(cell)}</{tag}>" for start, cell in zip(opens, cells))

    body = "".join(f"<tr>{row(cells, 'td')}</tr>" for cells in table[:-1])
    head = row([column.header for column in columns], "th")
    total = f'<tr class="tk-sum">{row(table[-1], "td")}</tr>'
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}{total}</tbody></table>"

"""Comparing two trees: same_structure and its assertion, tree_diff, and value assertions."""

from __future__ import annotations

from typing import Any, NamedTuple

from treekit.checks._leaf_values import element_errors, is_number, leaf_differences
from treekit.checks._traced import Checks
from treekit.core import (
    DictKey,
    IsLeaf,
    KeyPath,
    LeafPaths,
    Node,
    StructureAssertionError,
    StructureMismatchError,
    TreeDef,
    describe,
    describe_leaf,
    flatten,
    format_message,
    is_array,
    keystr,
    lookup,
    sort_keys,
)
from treekit.look import render_diff

__all__ = [
    "Difference",
    "align",
    "TreeDiff",
    "assert_same_structure",
    "diff_trees",
    "report",
    "same_structure",
    "tree_diff",
]

_DICTS = ("dict", "ordereddict", "defaultdict")


def same_structure(a: Any, b: Any, *, is_leaf: IsLeaf | None = None) -> bool:
    """Whether ``a`` and ``b`` have the same structure: ``tree_structure(a) == tree_structure(b)``.

    >>> same_structure({'w': [1, 2]}, {'w': [3, 4]}), same_structure([1, 2], (1, 2))
    (True, False)

    Args:
        a: Any pytree.
        b: Any pytree.
        is_leaf: Applies to both trees, as in :func:`treekit.tree_flatten`.

    Returns:
        ``True`` if the structures are equal, else ``False``.
    """
    try:
        flatten(a, is_leaf)[1]._guide(b, "b", strict=True, is_leaf=is_leaf)
    except StructureMismatchError:
        return False
    return True


def assert_same_structure(a: Any, b: Any, *, is_leaf: IsLeaf | None = None) -> None:
    """Raise if ``b``'s structure differs from ``a``'s, naming the first differing key path.

    >>> assert_same_structure({'w': [1, 2], 'b': 0}, {'w': [1, 2, 3], 'b': 0})
    Traceback (most recent call last):
    ...
    treekit.StructureAssertionError: b['w']: expected list of length 2, got list of length 3

    Args:
        a: The reference tree.
        b: The tree checked against it; the error's label.
        is_leaf: Applies to both trees, as in :func:`treekit.tree_flatten`.

    Raises:
        StructureAssertionError: At the first difference in leaf order: node type, dict keys
            (missing and extra), sequence length, namedtuple or dataclass type, node data, or
            a leaf against a node. It is both an ``AssertionError`` and a
            :class:`StructureMismatchError` (a ``ValueError``).
    """
    __tracebackhide__ = True  # pytest shows the caller's line and the message, not this frame
    try:
        flatten(a, is_leaf)[1]._guide(b, "b", strict=True, is_leaf=is_leaf)
    except StructureMismatchError as error:
        raise StructureAssertionError.of(error) from None


class Difference(NamedTuple):
    """One difference found by :func:`tree_diff`; ``str`` gives it as one line.

    ``kind`` and what ``left`` (from ``a``) and ``right`` (from ``b``) hold:

    - ``'node'``: the structure differs here; both are descriptions (``'list of length 2'``).
    - ``'missing'`` / ``'extra'``: a dict key only ``a`` / only ``b`` has; the subtree, and ``None``.
    - ``'type'``: an array against a non-array, or leaves of different types; the leaves.
    - ``'shape'`` / ``'dtype'``: the shapes (tuples) / the dtype names.
    - ``'value'``: the leaves, whose values differ.

    >>> print(Difference((DictKey('w'),), 'shape', (3,), (4,)))
    b['w']: expected shape (3,), got shape (4,)
    """

    path: KeyPath
    kind: str
    left: Any
    right: Any

    def __str__(self) -> str:
        return self.line("b")

    def line(self, label: str) -> str:
        """This difference as one line of an error about the argument ``label``.

        >>> Difference((DictKey('w'),), 'missing', 1, None).line('tree')
        "tree['w']: expected 1, got no such key"
        """
        return format_message(label, self.path, *_texts(self))


class TreeDiff(list[Difference]):
    """The list of :class:`Difference` records that :func:`tree_diff` returns.

    ``str`` lists them one per line, the first :attr:`~treekit.TreeDiff.limit`, then ``... and N more``.

    >>> diff = tree_diff({'w': 1}, {'w': 2.0})
    >>> type(diff).__name__, len(diff)
    ('TreeDiff', 1)
    >>> print(diff)
    b['w']: expected int 1, got float 2.0

    A notebook shows it as HTML (``_repr_html_``): the two trees side by side, opened along the
    key paths that differ, each difference highlighted with both sides. A diff made by
    :func:`tree_diff` holds the two trees for that (a list of records made by hand draws its
    records alone).

    >>> '<details open>' in diff._repr_html_()
    True
    """

    #: How many records ``str`` lists (``0``: all).
    limit = 20
    _trees: tuple[Any, Any, IsLeaf | None] | None = None  # (a, b, is_leaf), set by tree_diff

    def __reduce__(self) -> tuple[Any, ...]:  # the records, not the trees (which may not pickle)
        return (TreeDiff, (list(self),))

    def _repr_html_(self) -> str:
        records = [(d.path, d.kind, *_texts(d)[:3]) for d in self]
        if self._trees is None:
            return render_diff(None, records, is_leaf=None)
        a, b, is_leaf = self._trees
        return render_diff((a, b), records, is_leaf=is_leaf)

    def __str__(self) -> str:
        return self.format()

    def format(self, limit: int | None = None) -> str:
        """The records one per line; at most ``limit`` (default :attr:`~treekit.TreeDiff.limit`, ``0``: all).

        >>> print(tree_diff([1, 2, 3], [1.0, 2.0, 3.0]).format(limit=2))
        b[0]: expected int 1, got float 1.0
        b[1]: expected int 2, got float 2.0
        ... and 1 more
        """
        if not self:
            return "no differences"
        limit = self.limit if limit is None else limit
        shown = self if not limit else self[:limit]
        lines = [str(d) for d in shown]
        if len(self) > len(shown):
            lines.append(f"... and {len(self) - len(shown)} more")
        return "\n".join(lines)


def tree_diff(
    a: Any,
    b: Any,
    *,
    shapes: bool = True,
    dtypes: bool = True,
    values: bool = False,
    rtol: float = 1e-6,
    atol: float = 0.0,
    is_leaf: IsLeaf | None = None,
) -> TreeDiff:
    """Every difference between ``a`` and ``b``, in leaf order, as :class:`Difference` records.

    Structure first: a node that differs is one record and is not looked into, except a dict
    whose keys differ, which gives a ``'missing'`` or ``'extra'`` record per key and is compared
    key by key under the keys both have. Then, leaf by leaf: shapes, dtypes (for non-arrays:
    types) and, with ``values``, values. Lines read like errors, ``b`` being checked against ``a``.

    >>> import numpy as np
    >>> a = {'dense': {'w': np.zeros((3, 4)), 'b': np.zeros(4)}, 'out': [np.zeros(2)]}
    >>> b = {'dense': {'w': np.zeros((4, 4)), 'bias': np.zeros(4)}, 'out': (np.zeros(2),)}
    >>> print(tree_diff(a, b))
    b['dense']['b']: expected f64[4], got no such key
    b['dense']['bias']: expected no such key, got f64[4]
    b['dense']['w']: expected shape (3, 4), got shape (4, 4)
    b['out']: expected list of length 1, got tuple of length 1
    >>> tree_diff(a, a)
    []

    Args:
        a: The reference tree.
        b: The tree compared with it.
        shapes: Compare the shapes of array leaves.
        dtypes: Compare dtypes of array leaves, and types of other leaves (``1`` vs ``1.0``).
        values: Compare values: numbers and arrays within ``rtol``/``atol`` (as
            ``numpy.isclose(b, a)``, NaN equal to NaN), other leaves with ``==``.
        rtol: Relative tolerance, a fraction of ``|a|``.
        atol: Absolute tolerance.
        is_leaf: Applies to both trees, as in :func:`treekit.tree_flatten`.

    Returns:
        A :class:`TreeDiff` (a list of :class:`Difference`), empty if nothing differs.
    """
    return diff_trees(a, b, shapes, dtypes, values, rtol, atol, is_leaf)


def diff_trees(
    a: Any, b: Any, shapes: bool, dtypes: bool, values: bool, rtol: float, atol: float, is_leaf: IsLeaf | None,
    scalars: bool = False, of_y: bool = False, checks: Checks | None = None,
) -> TreeDiff:
    """:func:`tree_diff`, and chex's leaf rules (see :func:`leaf_differences`) for the asserts;
    ``checks``: a value assert's checks of traced leaves (see :func:`traced_checks`)."""
    out = TreeDiff()
    out._trees = (a, b, is_leaf)
    items, paths = align(a, b, "b", is_leaf, is_leaf)
    for item in items:
        if type(item) is Difference:
            out.append(item)
        else:
            i, x, y = item
            if checks is not None and values and checks.traced(x, y):
                found = checks.leaf_differences(paths[i], x, y, shapes, dtypes, rtol, atol, scalars)
            else:
                found = leaf_differences(x, y, shapes, dtypes, values, rtol, atol, scalars, of_y)
            if found:
                path = paths[i]
                out.extend(Difference(path, *d) for d in found)
    return out


def align(
    a: Any, b: Any, label: str, a_is_leaf: IsLeaf | None, b_is_leaf: IsLeaf | None
) -> tuple[list[Any], LeafPaths]:
    """Match ``b`` against ``a``'s structure: ``(i, a's leaf i, b's leaf)`` triples where they
    agree and ``'node'``/``'missing'``/``'extra'`` :class:`Difference` records where they do not,
    all in ``a``'s leaf order; and the key paths of ``a``'s leaves, made when asked for. The
    structural half of :func:`tree_diff` and ``check_spec``.
    """
    leaves, treedef, _ = flatten(a, a_is_leaf)
    paths = LeafPaths(a, treedef)  # made for the leaves asked about: all of them cost depth squared
    nodes = treedef._nodes
    root: list[Any] = []
    # A job matches b's subtree y with a's subtree x, whose node record is nodes[end] and whose
    # leaves start at leaves[lo]; its items go to `out`. A dict whose keys differ adds a job
    # per shared key, its items going to a list nested where the dict's record would be.
    jobs: list[_Job] = [((), len(nodes) - 1, 0, a, b, root)]
    while jobs:
        prefix, end, lo, x, y, out = jobs.pop()
        size = nodes[end][4]
        sub = treedef if size == len(nodes) else TreeDef._trusted(nodes[end - size + 1 : end + 1])
        errors: list[tuple[int, int, StructureMismatchError]] = []
        others = sub._guide(y, label, True, b_is_leaf, None, errors)
        e = skip = 0
        for i in range(len(others) + 1):
            while e < len(errors) and errors[e][0] == i:
                start, skip, error = errors[e]
                e += 1
                out.append(_node_difference(prefix, nodes, end, lo + start, x, y, error, jobs, b_is_leaf))
            if i < len(others) and i >= skip:
                out.append((lo + i, leaves[lo + i], others[i]))
    result: list[Any] = []
    stack = [iter(root)]
    while stack:
        for item in stack[-1]:
            if type(item) is list:
                stack.append(iter(item))
                break
            result.append(item)
        else:
            stack.pop()
    return result, paths


_Job = tuple[KeyPath, int, int, Any, Any, list[Any]]


def _child_ends(nodes: tuple[Node, ...], end: int) -> list[int]:
    """Indices of the records of the children of the node record ``nodes[end]``, left to right."""
    ends = []
    k = end - 1
    for _ in range(nodes[end][2]):
        ends.append(k)
        k -= nodes[k][4]
    ends.reverse()
    return ends


def _step(tree: Any, entry: Any) -> tuple[int, Any]:
    """(index, child) of the child of ``tree`` at key entry ``entry``."""
    ntype = lookup(type(tree))
    assert ntype is not None
    children, _, keys = ntype.flatten(tree, True)
    assert keys is not None
    index = list(keys).index(entry)
    return index, children[index]


def _node_difference(
    prefix: KeyPath,
    nodes: tuple[Node, ...],
    end: int,
    lo: int,
    a: Any,
    b: Any,
    error: StructureMismatchError,
    jobs: list[_Job],
    is_leaf: IsLeaf | None,
) -> Any:
    """The record for a node of ``b`` that differs from ``a``'s; or, for a dict whose keys differ,
    a list of records for its keys and of lists that jobs pushed here fill."""
    path = prefix + error.path
    x, y = a, b
    for entry in error.path:
        index, x = _step(x, entry)
        end = _child_ends(nodes, end)[index]
        y = _step(y, entry)[1]
    ntype = lookup(type(x))
    if not (
        ntype is not None
        and ntype.kind in _DICTS
        and lookup(type(y)) is ntype
        and not (is_leaf is not None and is_leaf(y))
        and x.keys() != y.keys()
        and getattr(x, "default_factory", None) == getattr(y, "default_factory", None)
    ):
        got = error.got if error.detail is None else f"{error.got} ({error.detail})"
        return Difference(path, "node", error.expected, got)
    shared = {}
    children, _, keys = ntype.flatten(x, True)
    assert keys is not None
    for child, entry, child_end in zip(children, keys, _child_ends(nodes, end)):
        shared[entry.key] = (child, child_end, lo)
        lo += nodes[child_end][3]
    out: list[Any] = []
    for key in sort_keys(x.keys() | y.keys()):
        key_path = (*path, DictKey(key))
        if key not in y:
            out.append(Difference(key_path, "missing", x[key], None))
        elif key not in x:
            out.append(Difference(key_path, "extra", None, y[key]))
        else:
            child, child_end, child_lo = shared[key]
            below: list[Any] = []
            out.append(below)
            jobs.append((key_path, child_end, child_lo, child, y[key], below))
    return out


def _describe_node(x: Any) -> str:
    ntype = lookup(type(x))
    if ntype is None:
        return describe_leaf(x)
    children, data, _ = ntype.flatten(x, False)
    return describe(ntype, data, len(children))


def _typed(x: Any) -> str:
    return describe_leaf(x) if is_array(x) else f"{type(x).__name__} {describe_leaf(x, 40)}"


def _texts(d: Difference) -> tuple[str, str, str | None, None]:
    """(expected, got, detail, hint) for :func:`treekit.core._errors.format_message`."""
    kind, left, right = d.kind, d.left, d.right
    if kind == "node":
        return left, right, None, None
    if kind == "missing":
        return _describe_node(left), "no such key", None, None
    if kind == "extra":
        return "no such key", _describe_node(right), None, None
    if kind == "type":
        return _typed(left), _typed(right), None, None
    if kind == "shape":
        return f"shape {left}", f"shape {right}", None, None
    if kind == "dtype":
        return f"dtype {left}", f"dtype {right}", None, None
    if is_array(left) or is_array(right):
        count, total, detail = element_errors(left, right)
        return f"the values of a{keystr(d.path)}", f"{count} of {total} different", detail, None
    got = describe_leaf(right, 40)
    if is_number(left) and is_number(right):
        return describe_leaf(left, 40), got, element_errors(left, right, scalar=True)[2], None
    return describe_leaf(left, 40), got, None, None


def report(header: str, diff: TreeDiff) -> str:
    return f"{header}: {len(diff)} difference{'' if len(diff) == 1 else 's'}\n{diff.format(limit=0)}"

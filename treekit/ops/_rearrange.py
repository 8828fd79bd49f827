"""Trees rearranged and treedefs taken apart: tree_transpose, tree_broadcast and the
treedef_* functions (jax's names)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from treekit.core import IsLeaf, StructureMismatchError, TransposeMismatchError, TreeDef, as_treedef, flatten, tuple_of
from treekit.ops._ops import PyTree

__all__ = [
    "tree_broadcast",
    "tree_transpose",
    "treedef_children",
    "treedef_is_leaf",
    "treedef_is_strict_leaf",
    "treedef_tuple",
]


def tree_transpose(outer_treedef: TreeDef, inner_treedef: TreeDef | None, pytree_to_transpose: PyTree) -> PyTree:
    """Turn a tree of structure ``outer(inner)`` into one of structure ``inner(outer)``.

    >>> from treekit import tree_structure
    >>> outer, inner = tree_structure([0, 0]), tree_structure({'a': 0, 'b': 0})
    >>> tree_transpose(outer, inner, [{'a': 1, 'b': 2}, {'a': 3, 'b': 4}])
    {'a': [1, 3], 'b': [2, 4]}

    Args:
        outer_treedef: The structure of the outer levels of ``pytree_to_transpose``.
        inner_treedef: The structure under each outer leaf; ``None`` takes it from the
            first outer leaf's subtree.
        pytree_to_transpose: The tree.

    Returns:
        A tree of structure ``inner_treedef`` whose leaves are trees of structure
        ``outer_treedef``.

    A registered class whose flatten function re-flattens its contents (JAX's ``FlatCache``
    test class: one child per leaf, the structure in its node data) transposes as in JAX: such
    a node is matched by its leaf count.

    Raises:
        TransposeMismatchError: If the tree is not ``outer`` composed with ``inner``; the
            message names the key path (jax only compares leaf counts). It is both a
            :class:`StructureMismatchError` and a ``TypeError`` (JAX's class).
        TypeError: If a treedef argument is not a treedef (a JAX ``PyTreeDef`` is converted).
    """
    outer_treedef = as_treedef(outer_treedef, "outer_treedef")
    if inner_treedef is not None:
        inner_treedef = as_treedef(inner_treedef, "inner_treedef")
    try:
        if inner_treedef is None:
            first = outer_treedef._guide(pytree_to_transpose, "pytree_to_transpose")
            inner_treedef = flatten(first[0] if first else None)[1]
        composed = outer_treedef.compose(inner_treedef)
        flat = composed._guide(pytree_to_transpose, "pytree_to_transpose", strict=True)
    except StructureMismatchError as err:
        leaves, treedef, _ = flatten(pytree_to_transpose)
        if inner_treedef is None or not _same_but_registered(composed._nodes, treedef._nodes):
            raise TransposeMismatchError(err.label, err.path, err.expected, err.got, err.detail, err.hint) from None
        flat = leaves
    # flat holds one row of `width` inner leaves per outer leaf; column k is every width-th.
    width = inner_treedef.num_leaves
    return inner_treedef._build([outer_treedef._build(flat[k::width]) for k in range(width)])


def _same_but_registered(want: tuple[Any, ...], have: tuple[Any, ...]) -> bool:
    """Whether two post-order node lists agree, registered classes' nodes compared by type and
    leaf count only (their children and node data are theirs to choose)."""
    i, j = len(want), len(have)
    while i and j:
        i, j = i - 1, j - 1
        w, h = want[i], have[j]
        if w[0] is not h[0]:
            return False
        if w[0] is not None and w[0].kind in ("custom", "jax"):
            if w[3] != h[3]:
                return False
            i, j = i - w[4] + 1, j - h[4] + 1
        elif w[2] != h[2] or w[1] != h[1]:
            return False
    return i == j == 0


def tree_broadcast(prefix_tree: PyTree, full_tree: PyTree, is_leaf: IsLeaf | None = None) -> PyTree:
    """Repeat each leaf of ``prefix_tree`` over the matching subtree of ``full_tree``.

    >>> tree_broadcast([1, 2], [(0, 0), {'a': 0}])
    [(1, 1), {'a': 2}]

    Args:
        prefix_tree: A tree whose structure is a prefix of ``full_tree``'s.
        full_tree: The tree whose structure the result has.
        is_leaf: Applies to ``prefix_tree``.

    Returns:
        A tree of ``full_tree``'s structure whose leaves are the matching leaves of
        ``prefix_tree``.

    Raises:
        StructureMismatchError: If ``full_tree`` does not extend ``prefix_tree``; labelled
            ``full_tree``.
    """
    return broadcast(prefix_tree, full_tree, is_leaf, "full_tree")


def broadcast(
    prefix_tree: PyTree, full_tree: PyTree, is_leaf: IsLeaf | None, label: str, *, full_is_leaf: IsLeaf | None = None
) -> PyTree:
    """:func:`tree_broadcast`, with mismatches named after ``label`` (the caller's argument),
    and ``full_tree``'s leaves chosen by ``full_is_leaf``."""
    values, prefix = flatten(prefix_tree, is_leaf)[:2]
    full = flatten(full_tree, full_is_leaf)[1]
    subtrees = prefix._guide(full_tree, label)
    out: list[Any] = []
    for value, subtree in zip(values, subtrees):
        out.extend([value] * flatten(subtree, full_is_leaf)[1].num_leaves)
    return full._build(out)


def treedef_children(treedef: TreeDef) -> list[TreeDef]:
    """The treedefs of the root's children.

    >>> from treekit import tree_structure
    >>> treedef_children(tree_structure([(1, 2), 3]))
    [PyTreeDef((*, *)), PyTreeDef(*)]

    Args:
        treedef: Any treedef.

    Returns:
        A list of treedefs, ``[]`` for a leaf or a node without children.

    Raises:
        TypeError: If ``treedef`` is not a treedef (a JAX ``PyTreeDef`` is converted).
    """
    return as_treedef(treedef, "treedef").children()


def treedef_is_leaf(treedef: TreeDef) -> bool:
    """Whether ``treedef`` has a single node (a leaf, or a node with no children like ``None``).

    >>> from treekit import tree_structure
    >>> treedef_is_leaf(tree_structure(1)), treedef_is_leaf(tree_structure(None))
    (True, True)

    Args:
        treedef: Any treedef.

    Returns:
        Whether ``treedef.num_nodes == 1`` (jax's definition).

    Raises:
        TypeError: If ``treedef`` is not a treedef (a JAX ``PyTreeDef`` is converted).
    """
    return as_treedef(treedef, "treedef").num_nodes == 1


def treedef_is_strict_leaf(treedef: TreeDef) -> bool:
    """Whether ``treedef`` is a single leaf (``None`` and ``()`` are not).

    >>> from treekit import tree_structure
    >>> treedef_is_strict_leaf(tree_structure(1)), treedef_is_strict_leaf(tree_structure(None))
    (True, False)

    Args:
        treedef: Any treedef.

    Returns:
        Whether ``treedef`` is the structure of a single leaf.

    Raises:
        TypeError: If ``treedef`` is not a treedef (a JAX ``PyTreeDef`` is converted).
    """
    treedef = as_treedef(treedef, "treedef")
    return treedef.num_nodes == 1 and treedef.num_leaves == 1


def treedef_tuple(treedefs: Iterable[TreeDef]) -> TreeDef:
    """A tuple node whose children have the given structures.

    >>> from treekit import tree_structure
    >>> treedef_tuple([tree_structure([1, 2]), tree_structure({'a': 3})])
    PyTreeDef(([*, *], {'a': *}))

    Args:
        treedefs: The children's structures, in order.

    Returns:
        The :class:`TreeDef` of a tuple of trees of those structures.

    Raises:
        TypeError: If an item is not a treedef (a JAX ``PyTreeDef`` is converted); the
            message names it (``treedefs[1]``).
    """
    return tuple_of(treedefs)

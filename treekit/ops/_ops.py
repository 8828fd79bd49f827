"""The public functions over trees that flatten, unflatten and map them (jax's names); the
other whole-tree functions are in ``_fold`` (reduce) and ``_rearrange`` (transpose, broadcast)."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn, TypeVar

from treekit.core import NATIVE, Caller, IsLeaf, KeyPath, TreeDef, as_treedef, flatten, flatten_pairs, noted
from treekit.core import leaves as _leaves
from treekit.core import structure as _structure

__all__ = [
    "PyTree",
    "tree_flatten",
    "tree_flatten_with_path",
    "tree_leaves",
    "tree_leaves_with_path",
    "tree_map",
    "tree_map_with_path",
    "tree_structure",
    "tree_unflatten",
]

PyTree = Any
"""Any Python object seen as a tree: nodes are registered containers, everything else a leaf."""

T = TypeVar("T")
_DEFER: Any = NATIVE.DEFER if NATIVE is not None else object()  # what a native function returns to hand a call back


def tree_flatten(tree: PyTree, is_leaf: IsLeaf | None = None) -> tuple[list[Any], TreeDef]:
    """Return the leaves of ``tree`` (left to right) and its structure.

    >>> leaves, treedef = tree_flatten({'b': [1, 2], 'a': None, 'c': 3})
    >>> leaves, treedef
    ([1, 2, 3], PyTreeDef({'a': None, 'b': [*, *], 'c': *}))

    Args:
        tree: Any pytree. Dict leaves come in sorted-key order (keys that do not compare are
            grouped by type, see :func:`treekit.tree_leaves`); ``None`` is a node with no
            children, so it has no leaves.
        is_leaf: Called on every subtree before it is looked up; ``True`` makes it a leaf
            (see :ref:`is-leaf`). Every function taking ``is_leaf`` uses it this way.

    Returns:
        ``(leaves, treedef)``: the leaves as a list, and the structure as a :class:`TreeDef`.

    Raises:
        TreeCycleError: If ``tree`` holds a cycle (a ``ValueError``); the message names its key path.
        TypeError: If a registered flatten function fails; the message names the key path.
    """
    leaves, treedef, _ = flatten(tree, is_leaf)
    return leaves, treedef


def tree_unflatten(treedef: TreeDef, leaves: Iterable[Any]) -> PyTree:
    """Build a tree of structure ``treedef`` from ``leaves`` (the inverse of :func:`tree_flatten`).

    Dicts come back in the key order of the tree ``treedef`` was made from.

    >>> leaves, treedef = tree_flatten({'b': 1, 'a': 2})
    >>> tree_unflatten(treedef, [10, 20])
    {'b': 20, 'a': 10}

    Args:
        treedef: The structure, from :func:`tree_flatten` or :func:`tree_structure`.
        leaves: The leaves, in the order :func:`tree_flatten` gives them.

    Returns:
        The tree.

    Raises:
        ValueError: If the number of leaves is not ``treedef.num_leaves``.
        TypeError: If ``treedef`` is not a treedef (a JAX ``PyTreeDef`` is converted).
    """
    if type(treedef) is not TreeDef:
        treedef = as_treedef(treedef, "treedef")
    if NATIVE is not None and type(leaves) is list:  # checks the number of leaves before building
        tree = NATIVE.build(treedef._nodes, leaves)
        if tree is not _DEFER:
            return tree
    return treedef.unflatten(leaves)


def tree_leaves(tree: PyTree, is_leaf: IsLeaf | None = None) -> list[Any]:
    """Return the leaves of ``tree``, left to right (dict leaves in sorted-key order).

    >>> tree_leaves({'b': [1, 2], 'a': None, 'c': 3})
    [1, 2, 3]

    Mixed key types that do not compare are grouped by type name (``int`` before ``str``):

    >>> tree_leaves({'a': 'x', 1: 'y'})
    ['y', 'x']

    Args:
        tree: Any pytree.
        is_leaf: Called on every subtree; ``True`` stops descent there.

    Returns:
        The leaves, as a list.

    Raises:
        TreeCycleError: If ``tree`` holds a cycle (a ``ValueError``); the message names its key path.
        TypeError: If a registered flatten function fails; the message names the key path.
    """
    return _leaves(tree, is_leaf)


def tree_structure(tree: PyTree, is_leaf: IsLeaf | None = None) -> TreeDef:
    """Return the structure of ``tree``.

    >>> tree_structure((1, [2, None]))
    PyTreeDef((*, [*, None]))

    Args:
        tree: Any pytree.
        is_leaf: As in :func:`tree_flatten`.

    Returns:
        The :class:`TreeDef` of ``tree``.

    Raises:
        TreeCycleError: If ``tree`` holds a cycle; also ``TypeError`` as :func:`tree_flatten`.
    """
    return _structure(tree, is_leaf)


def tree_flatten_with_path(
    tree: PyTree, is_leaf: IsLeaf | None = None, is_leaf_takes_path: bool = False
) -> tuple[list[tuple[KeyPath, Any]], TreeDef]:
    """Like :func:`tree_flatten`, pairing each leaf with its key path.

    >>> pairs, _ = tree_flatten_with_path({'w': [1, 2]})
    >>> pairs
    [((DictKey(key='w'), SequenceKey(idx=0)), 1), ((DictKey(key='w'), SequenceKey(idx=1)), 2)]

    Args:
        tree: Any pytree.
        is_leaf: As in :func:`tree_flatten`, or ``is_leaf(path, x)`` with ``is_leaf_takes_path``.
        is_leaf_takes_path: Call ``is_leaf`` with the subtree's key path first.

    Returns:
        ``(pairs, treedef)``: a list of ``(key path, leaf)`` pairs, and the structure.

    Raises:
        TreeCycleError: If ``tree`` holds a cycle; also ``TypeError`` as :func:`tree_flatten`.
    """
    return flatten_pairs(tree, is_leaf, is_leaf_takes_path)


def tree_leaves_with_path(
    tree: PyTree, is_leaf: IsLeaf | None = None, is_leaf_takes_path: bool = False
) -> list[tuple[KeyPath, Any]]:
    """``(key path, leaf)`` pairs of ``tree``, left to right.

    >>> from treekit import keystr
    >>> [(keystr(p), x) for p, x in tree_leaves_with_path([1, {'k': (2,)}])]
    [('[0]', 1), ("[1]['k'][0]", 2)]

    Args:
        tree: Any pytree.
        is_leaf: As in :func:`tree_flatten_with_path`.
        is_leaf_takes_path: As in :func:`tree_flatten_with_path`.

    Returns:
        A list of ``(key path, leaf)`` pairs; a key path is a tuple of key entries.

    Raises:
        TreeCycleError: If ``tree`` holds a cycle; also ``TypeError`` as :func:`tree_flatten`.
    """
    return tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


def _rest_leaves(treedef: TreeDef, rest: tuple[Any, ...]) -> list[list[Any]]:
    return [treedef._guide(r, f"rest[{k}]") for k, r in enumerate(rest)]


def _trees(n_rest: int, first: str = "tree", rest: str = "rest") -> str:
    return ", ".join([first, *(f"{rest}[{k}]" for k in range(n_rest))])


def leafwise(
    f: Callable[..., Any],
    columns: Sequence[Sequence[Any]],
    path_of: Callable[[int], KeyPath],
    caller: Caller,
) -> list[Any]:
    """``[f(*row) for row in zip(*columns)]``; if ``f`` raises, the error gets a note naming the leaf.

    On a failure at row ``i`` the note is ``caller.note(path_of(i))``, e.g.
    ``tree_map: f raised at ['layers'][1]['w'] (arguments from tree, rest[0])``; see
    :func:`treekit.core._errors.noted`. The key path is found only after a failure: the rows are
    run by one ``map`` inside one ``try``, and the failing row is the one the first
    column's iterator gave last.

    >>> leafwise(lambda x: 10 // x, [[1, 2]], lambda i: (), Caller('tree_map: f', 'arguments from tree'))
    [10, 5]
    """
    first = iter(columns[0])
    try:
        if len(columns) == 1:
            return [f(x) for x in first]
        return list(map(f, first, *columns[1:]))
    except Exception as exc:
        row = len(columns[0]) - operator.length_hint(first) - 1
        noted(exc, caller.note(path_of(row)))
        raise


def _map_caller(with_path: bool, n_rest: int) -> Caller:
    if with_path:
        return Caller("tree_map_with_path: f", f"arguments: the key path, leaves from {_trees(n_rest)}")
    return Caller("tree_map: f", f"arguments from {_trees(n_rest)}")


def _map_failed(
    exc: Exception, row: int, paths: list[KeyPath] | None, tree: PyTree, is_leaf: IsLeaf | None, rest: tuple[Any, ...]
) -> NoReturn:
    """What the native tree_map calls when ``f`` raises at leaf ``row``: raise as the pure core does."""
    path = leaf_path(tree, is_leaf, row) if paths is None else paths[row]
    raise noted(exc, _map_caller(paths is not None, len(rest)).note(path))


def tree_map(f: Callable[..., Any], tree: PyTree, *rest: PyTree, is_leaf: IsLeaf | None = None) -> PyTree:
    """Apply ``f`` to the leaves of ``tree`` (and the matching subtrees of ``rest``).

    >>> tree_map(lambda x: x * 10, {'b': [1, 2], 'a': 3})
    {'b': [10, 20], 'a': 30}
    >>> tree_map(lambda x, y: x + y, [1, (2, 3)], [10, (20, 30)])
    [11, (22, 33)]

    Args:
        f: Called as ``f(leaf, *matching)``, one argument per tree.
        tree: The tree whose structure the result has.
        *rest: Trees with ``tree``'s structure or one extending it: where ``tree`` has a
            leaf, a ``rest`` tree may hold a whole subtree, passed to ``f`` as it is.
        is_leaf: Applies to ``tree`` only, as in jax.

    Returns:
        A tree of ``tree``'s structure holding ``f``'s results (dicts in ``tree``'s key
        insertion order).

    Raises:
        StructureMismatchError: If a ``rest`` tree differs from ``tree``; the message names
            the argument (``rest[0]``) and the key path, e.g.
            ``rest[0]['layers'][1]: expected list of length 2, got list of length 3``.
        TreeCycleError: If ``tree`` holds a cycle.
    """
    if NATIVE is not None:  # the same walks, fused in C; anything unusual comes back here
        out = NATIVE.map(f, tree, rest, is_leaf, _map_failed)
        if out is not _DEFER:
            return out
    leaves, treedef, _ = flatten(tree, is_leaf)
    columns = [leaves, *_rest_leaves(treedef, rest)] if rest else [leaves]
    return treedef._build(leafwise(f, columns, lambda i: leaf_path(tree, is_leaf, i), _map_caller(False, len(rest))))


def leaf_path(tree: PyTree, is_leaf: IsLeaf | None, index: int) -> KeyPath:
    """The key path of leaf ``index`` of ``tree`` (flattens again: for error messages only)."""
    paths = flatten(tree, is_leaf, True)[2]
    assert paths is not None
    return paths[index]


def tree_map_with_path(
    f: Callable[..., Any],
    tree: PyTree,
    *rest: PyTree,
    is_leaf: IsLeaf | None = None,
    is_leaf_takes_path: bool = False,
) -> PyTree:
    """Like :func:`tree_map`, calling ``f(key_path, leaf, *matching)``.

    >>> from treekit import keystr
    >>> tree_map_with_path(lambda p, x: f'{keystr(p)}={x}', {'a': [1, 2]})
    {'a': ["['a'][0]=1", "['a'][1]=2"]}

    Args:
        f: Called as ``f(key_path, leaf, *matching)``.
        tree: As in :func:`tree_map`.
        *rest: As in :func:`tree_map`.
        is_leaf: As in :func:`tree_flatten_with_path`.
        is_leaf_takes_path: As in :func:`tree_flatten_with_path`.

    Returns:
        A tree of ``tree``'s structure holding ``f``'s results.

    Raises:
        StructureMismatchError: As :func:`tree_map`.
        TreeCycleError: If ``tree`` holds a cycle.
    """
    if NATIVE is not None:  # the same walks, fused in C; anything unusual comes back here
        out = NATIVE.map(f, tree, rest, is_leaf, _map_failed, with_path=True, leaf_takes_path=is_leaf_takes_path)
        if out is not _DEFER:
            return out
    leaves, treedef, paths = flatten(tree, is_leaf, True, is_leaf_takes_path)
    assert paths is not None
    columns = [paths, leaves, *_rest_leaves(treedef, rest)]
    return treedef._build(leafwise(f, columns, paths.__getitem__, _map_caller(True, len(rest))))

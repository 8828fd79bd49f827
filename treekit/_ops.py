"""The public functions over trees: flatten, map, reduce, transpose, broadcast (jax's names)."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn, TypeVar, overload

from treekit._core import NATIVE
from treekit._errors import StructureMismatchError, TransposeMismatchError, noted, where_text
from treekit._keys import KeyPath
from treekit._registry import lookup
from treekit._traverse import IsLeaf, flatten, flatten_pairs
from treekit._traverse import leaves as _leaves
from treekit._treedef import TreeDef, as_treedef, tuple_of

__all__ = [
    "PyTree",
    "all_leaves",
    "tree_all",
    "tree_broadcast",
    "tree_flatten",
    "tree_flatten_with_path",
    "tree_leaves",
    "tree_leaves_with_path",
    "tree_map",
    "tree_map_with_path",
    "tree_reduce",
    "tree_reduce_associative",
    "tree_structure",
    "tree_transpose",
    "tree_unflatten",
    "treedef_children",
    "treedef_is_leaf",
    "treedef_is_strict_leaf",
    "treedef_tuple",
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
    return flatten(tree, is_leaf)[1]


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
    return [treedef._walk(r, f"rest[{k}]") for k, r in enumerate(rest)]


def _trees(n_rest: int, first: str = "tree", rest: str = "rest") -> str:
    return ", ".join([first, *(f"{rest}[{k}]" for k in range(n_rest))])


def leafwise(
    f: Callable[..., Any],
    columns: Sequence[Sequence[Any]],
    path_of: Callable[[int], KeyPath],
    where: str,
) -> list[Any]:
    """``[f(*row) for row in zip(*columns)]``; if ``f`` raises, the error gets a note naming the leaf.

    ``where`` reads ``"<function>: <what>|<arguments>"``: on a failure at row ``i`` the note is
    ``<function>: <what> raised at <keystr(path_of(i))> (<arguments>)``, e.g.
    ``tree_map: f raised at ['layers'][1]['w'] (arguments from tree, rest[0])``; see
    :func:`treekit._errors.noted`. The key path is found only after a failure: the rows are
    run by one ``map`` inside one ``try``, and the failing row is the one the first
    column's iterator gave last.

    >>> leafwise(lambda x: 10 // x, [[1, 2]], lambda i: (), 'tree_map: f|arguments from tree')
    [10, 5]
    """
    first = iter(columns[0])
    try:
        if len(columns) == 1:
            return [f(x) for x in first]
        return list(map(f, first, *columns[1:]))
    except Exception as exc:
        row = len(columns[0]) - operator.length_hint(first) - 1
        _raise_noted(exc, where, path_of(row))


def _raise_noted(exc: Exception, where: str, path: KeyPath) -> NoReturn:
    """Raise ``exc`` (raised by the user's function at the leaf ``path``) with its note (see :func:`leafwise`)."""
    label, _, arguments = where.partition("|")
    raise noted(exc, f"{label} raised at {where_text(path)} ({arguments})")


def _map_where(with_path: bool, n_rest: int) -> str:
    if with_path:
        return f"tree_map_with_path: f|arguments: the key path, leaves from {_trees(n_rest)}"
    return f"tree_map: f|arguments from {_trees(n_rest)}"


def _map_failed(
    exc: Exception, row: int, paths: list[KeyPath] | None, tree: PyTree, is_leaf: IsLeaf | None, rest: tuple[Any, ...]
) -> NoReturn:
    """What the native tree_map calls when ``f`` raises at leaf ``row``: raise as the pure core does."""
    path = _path(tree, is_leaf, row) if paths is None else paths[row]
    _raise_noted(exc, _map_where(paths is not None, len(rest)), path)


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
        out = NATIVE.map(f, tree, rest, is_leaf, False, False, _map_failed)
        if out is not _DEFER:
            return out
    leaves, treedef, _ = flatten(tree, is_leaf)
    columns = [leaves, *_rest_leaves(treedef, rest)] if rest else [leaves]
    return treedef._build(leafwise(f, columns, lambda i: _path(tree, is_leaf, i), _map_where(False, len(rest))))


def _path(tree: PyTree, is_leaf: IsLeaf | None, index: int) -> KeyPath:
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
        out = NATIVE.map(f, tree, rest, is_leaf, True, is_leaf_takes_path, _map_failed)
        if out is not _DEFER:
            return out
    leaves, treedef, paths = flatten(tree, is_leaf, True, is_leaf_takes_path)
    assert paths is not None
    columns = [paths, leaves, *_rest_leaves(treedef, rest)]
    return treedef._build(leafwise(f, columns, paths.__getitem__, _map_where(True, len(rest))))


class _Unspecified:
    def __repr__(self) -> str:
        return "<unspecified>"


_UNSPECIFIED: Any = _Unspecified()


@overload
def tree_reduce(function: Callable[[T, Any], T], tree: PyTree, *, is_leaf: IsLeaf | None = None) -> T: ...
@overload
def tree_reduce(
    function: Callable[[T, Any], T], tree: PyTree, initializer: T, is_leaf: IsLeaf | None = None
) -> T: ...
def tree_reduce(
    function: Callable[[T, Any], T], tree: PyTree, initializer: Any = _UNSPECIFIED, is_leaf: IsLeaf | None = None
) -> T:
    """``functools.reduce`` over the leaves of ``tree``.

    >>> import operator
    >>> tree_reduce(operator.add, {'a': 1, 'b': (2, 3)})
    6
    >>> tree_reduce(operator.add, [], 0)
    0

    Args:
        function: Called as ``function(accumulated, leaf)``, left to right.
        tree: Any pytree.
        initializer: The starting value; without it, the first leaf.
        is_leaf: As in :func:`tree_flatten`.

    Returns:
        The last value ``function`` returned (or ``initializer`` / the single leaf).

    Raises:
        TypeError: If ``tree`` has no leaves and no ``initializer`` is given.
        TreeCycleError: If ``tree`` holds a cycle.
    """
    leaves = flatten(tree, is_leaf)[0]
    it = iter(leaves)
    try:
        if initializer is _UNSPECIFIED:
            return functools.reduce(function, it)  # type: ignore[no-any-return]
        return functools.reduce(function, it, initializer)  # type: ignore[no-any-return]
    except Exception as exc:
        if not leaves:  # functools.reduce's own TypeError: nothing to reduce
            raise
        where = where_text(_path(tree, is_leaf, len(leaves) - operator.length_hint(it) - 1))
        noted(exc, f"tree_reduce: function raised at {where} (arguments: the value so far, that leaf of tree)")
        raise


def tree_reduce_associative(
    operation: Callable[[T, T], T], tree: PyTree, *, identity: Any = _UNSPECIFIED, is_leaf: IsLeaf | None = None
) -> T:
    """Reduce the leaves pairwise as a balanced tree (fewer sequential steps than reduce).

    >>> import operator
    >>> tree_reduce_associative(operator.add, [1, 2, 3, 4, 5])
    15

    Args:
        operation: An associative ``(a, b) -> c``; leaves are paired as jax pairs them
            (split at ``len // 2``), so a non-associative one gives jax's result.
        tree: Any pytree.
        identity: Returned for a tree without leaves.
        is_leaf: As in :func:`tree_flatten`.

    Returns:
        The combined value.

    Raises:
        TypeError: If ``tree`` has no leaves and no ``identity`` is given.
        TreeCycleError: If ``tree`` holds a cycle.
    """
    level = flatten(tree, is_leaf)[0]
    if not level:
        if identity is _UNSPECIFIED:
            raise TypeError("tree_reduce_associative: the tree has no leaves; pass identity=")
        return identity  # type: ignore[no-any-return]
    # Bottom-up pairing, iterative: the same grouping as jax's halving recursion.
    return _halve(level, operation)  # type: ignore[no-any-return]


def _halve(seq: list[Any], op: Callable[[Any, Any], Any]) -> Any:
    # jax splits at len // 2 recursively; mirror that exactly with an explicit stack.
    stack: list[tuple[int, int, bool]] = [(0, len(seq), False)]
    results: list[Any] = []
    while stack:
        lo, hi, combine = stack.pop()
        if combine:
            b = results.pop()
            a = results.pop()
            results.append(op(a, b))
        elif hi - lo == 1:
            results.append(seq[lo])
        else:
            mid = lo + (hi - lo) // 2
            stack += [(lo, hi, True), (mid, hi, False), (lo, mid, False)]
    return results[0]


def tree_all(tree: PyTree, *, is_leaf: IsLeaf | None = None) -> bool:
    """Whether every leaf is truthy (``True`` for a tree without leaves).

    >>> tree_all([True, {'a': 1}]), tree_all([True, 0]), tree_all([])
    (True, False, True)

    Args:
        tree: Any pytree.
        is_leaf: As in :func:`tree_flatten`.

    Returns:
        ``all(tree_leaves(tree))``.

    Raises:
        TreeCycleError: If ``tree`` holds a cycle.
    """
    return all(flatten(tree, is_leaf)[0])


def all_leaves(iterable: Iterable[Any], is_leaf: IsLeaf | None = None) -> bool:
    """Whether every item of ``iterable`` is a leaf (``None`` is not: it is a node).

    >>> all_leaves([1, 'a', 2.0]), all_leaves([1, [2]]), all_leaves([None])
    (True, False, False)

    Args:
        iterable: The items to test (not a tree: its own type does not matter).
        is_leaf: As in :func:`tree_flatten`; an item it accepts is a leaf.

    Returns:
        Whether flattening each item would give that item back as a single leaf.
    """
    if is_leaf is None:
        return all(lookup(type(x)) is None for x in iterable)
    items = list(iterable)
    leaves = flatten(items, is_leaf)[0]
    return len(leaves) == len(items) and all(a is b for a, b in zip(items, leaves))


def tree_transpose(outer_treedef: TreeDef, inner_treedef: TreeDef | None, pytree_to_transpose: PyTree) -> PyTree:
    """Turn a tree of structure ``outer(inner)`` into one of structure ``inner(outer)``.

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
            first = outer_treedef._walk(pytree_to_transpose, "pytree_to_transpose")
            inner_treedef = flatten(first[0] if first else None)[1]
        composed = outer_treedef.compose(inner_treedef)
        flat = composed._walk(pytree_to_transpose, "pytree_to_transpose", strict=True)
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
    subtrees = prefix._walk(full_tree, label)
    out: list[Any] = []
    for value, subtree in zip(values, subtrees):
        out.extend([value] * flatten(subtree, full_is_leaf)[1].num_leaves)
    return full._build(out)


def treedef_children(treedef: TreeDef) -> list[TreeDef]:
    """The treedefs of the root's children.

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

"""Freezing: filters that pick leaves, and partition/combine, which split a tree in two and join it again."""

from __future__ import annotations

import operator
from typing import Any, NamedTuple

from treekit.core import (
    Caller,
    Incomparable,
    IsLeaf,
    Node,
    NodeType,
    StructureMismatchError,
    dict_keys,
    flatten,
    is_inexact_dtype,
    lookup,
    same_node_data,
    unflatten_node,
)
from treekit.ops._ops import leafwise, tree_map


def is_array(x: Any) -> bool:
    """Whether ``x`` is an array that holds data: a numpy array or scalar, a jax array (or a
    tracer under ``jit``), a torch tensor; not a Python number or a ``ShapeDtypeStruct`` (as
    equinox's ``is_array``). A filter for :func:`partition`.

    >>> import numpy as np
    >>> is_array(np.zeros(3)), is_array(np.float32(1)), is_array(1.0), is_array('relu')
    (True, True, False, False)
    >>> partition({'w': np.ones(2), 'act': 'relu'}, is_array)
    ({'w': array([1., 1.]), 'act': None}, {'w': None, 'act': 'relu'})

    Args:
        x: Any object.

    Returns:
        ``True`` if ``x`` has a ``shape``, a ``dtype`` and ``__array__``.
    """
    return hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "__array__")


def is_inexact_array(x: Any) -> bool:
    """Whether ``x`` is an array (:func:`is_array`) of floating-point or complex numbers: the
    leaves a gradient is taken for (as equinox's ``is_inexact_array``). A filter for
    :func:`partition`, to train the float params and keep int counters and masks out.

    >>> import numpy as np
    >>> is_inexact_array(np.zeros(2, np.float32)), is_inexact_array(np.zeros(2, np.int32)), is_inexact_array(0.5)
    (True, False, False)
    >>> params = {'w': np.ones(2), 'step': np.array(3)}
    >>> trainable, static = partition(params, is_inexact_array)
    >>> trainable, static
    ({'w': array([1., 1.]), 'step': None}, {'w': None, 'step': array(3)})

    Args:
        x: Any object.

    Returns:
        ``True`` for arrays of ``float*``, ``bfloat16`` and ``complex*`` dtypes.
    """
    return is_array(x) and is_inexact_dtype(x.dtype)


def is_array_like(x: Any) -> bool:
    """Whether ``x`` is an array (:func:`is_array`) or a Python ``bool``, ``int``, ``float`` or
    ``complex`` (equinox's ``is_array_like``): what jax can make an array of.

    >>> import numpy as np
    >>> is_array_like(np.zeros(2)), is_array_like(2.0), is_array_like(True), is_array_like('relu')
    (True, True, True, False)

    Args:
        x: Any object.

    Returns:
        ``True`` for arrays, numbers and objects with ``__jax_array__``.
    """
    return is_array(x) or isinstance(x, (bool, int, float, complex)) or hasattr(x, "__jax_array__")


def is_inexact_array_like(x: Any) -> bool:
    """Whether ``x`` is an inexact array (:func:`is_inexact_array`) or a Python ``float`` or
    ``complex`` (equinox's ``is_inexact_array_like``).

    >>> import numpy as np
    >>> is_inexact_array_like(np.zeros(2, np.float32)), is_inexact_array_like(0.5), is_inexact_array_like(1)
    (True, True, False)

    Args:
        x: Any object.

    Returns:
        ``True`` for float and complex arrays and numbers.
    """
    if hasattr(x, "__jax_array__"):
        x = x.__jax_array__()
    return is_inexact_array(x) or isinstance(x, (float, complex))


def filter(
    pytree: Any, filter_spec: Any, inverse: bool = False, replace: Any = None, is_leaf: IsLeaf | None = None
) -> Any:
    """The leaves ``filter_spec`` selects, ``replace`` at the others (equinox's ``filter``):
    :func:`treekit.partition`'s first part, or its second with ``inverse=True``.

    >>> import numpy as np
    >>> filter({'w': np.ones(2), 'act': 'relu'}, is_array)
    {'w': array([1., 1.]), 'act': None}
    >>> filter({'w': np.ones(2), 'act': 'relu'}, is_array, inverse=True)
    {'w': None, 'act': 'relu'}

    Args:
        pytree: Any pytree.
        filter_spec: As in :func:`treekit.partition`.
        inverse: Keep the leaves ``filter_spec`` does not select.
        replace: What the leaves not kept become.
        is_leaf: As in :func:`treekit.partition`.

    Returns:
        A tree of ``pytree``'s structure.
    """
    selected, rest = partition(pytree, filter_spec, replace, is_leaf)
    return rest if inverse else selected


# -- freezing ------------------------------------------------------------------------------------
# The nodes partition(drop=True) leaves entries out of, and combine fills keys in. Not OrderedDict,
# whose key order is part of its structure (a part could not say where its keys go back).
_DICT_KINDS = frozenset({"dict", "defaultdict"})


def _is_none(x: Any) -> bool:
    return x is None


def partition(
    tree: Any, filter_spec: Any, replace: Any = None, is_leaf: IsLeaf | None = None, *, drop: bool = False
) -> tuple[Any, Any]:
    """Split ``tree`` into the selected leaves and the rest, ``None`` in place of the others
    (equinox's ``partition``, its arguments and results).

    Train only the selected part: differentiate with respect to ``selected`` through
    ``combine(selected, rest)``; ``rest`` gets no gradient (``None`` is a node without
    leaves, so ``jax.grad`` and the optimizers skip it), as equinox's ``partition``.

    >>> params = [{'w': 1.0, 'b': 0.0}, {'w': 2.0, 'b': 0.0}]
    >>> trained, frozen = partition(params, [False, True])
    >>> trained
    [{'w': None, 'b': None}, {'w': 2.0, 'b': 0.0}]
    >>> frozen
    [{'w': 1.0, 'b': 0.0}, {'w': None, 'b': None}]
    >>> combine(trained, frozen) == params
    True
    >>> partition({'w': 3.0, 'b': -1.0}, lambda x: x > 0)
    ({'w': 3.0, 'b': None}, {'w': None, 'b': -1.0})

    With ``drop=True`` a dict leaves out the entries whose leaves all went to the other part,
    and a dict left without entries goes too, as haiku's ``hk.data_structures.partition``
    does (``hk.data_structures.merge`` and :func:`combine` join such parts):

    >>> params = {'linear_0': {'w': 1.0, 'b': 0.0}, 'linear_1': {'w': 2.0, 'b': 0.0}}
    >>> weights, rest = partition(params, {'linear_0': {'w': True, 'b': False}, 'linear_1': True}, drop=True)
    >>> weights
    {'linear_0': {'w': 1.0}, 'linear_1': {'w': 2.0, 'b': 0.0}}
    >>> rest
    {'linear_0': {'b': 0.0}}
    >>> combine(weights, rest) == params
    True

    Only dicts (``dict`` and ``defaultdict``) lose entries. A list, tuple or other node keeps
    its length, with ``None`` at the leaves it lost (removing an item would move the later
    ones to other indices), and a dict under one is left empty rather than removed:
    ``partition([{'w': 1}, {'b': 2}], lambda x: x < 2, drop=True)`` is
    ``([{'w': 1}, {}], [{}, {'b': 2}])``. An ``OrderedDict`` keeps its keys too (their order
    is part of its structure), and so do other mappings: pass flax's ``FrozenDict`` through
    ``flax.core.unfreeze`` first. A subtree without leaves (``{}``, ``[]``, ``None``) stays in
    both parts (where the dict holding it does), so ``combine(*partition(tree, p, drop=True))
    == tree``.

    Args:
        tree: Any pytree.
        filter_spec: A function ``leaf -> bool`` (:func:`is_array` and
            :func:`is_inexact_array` are two), a bool, or a tree whose structure is a prefix
            of ``tree``'s holding such functions and bools: a bool selects the whole subtree
            under it, a function each leaf of that subtree. Masks by key path come from
            ``tree_map_with_path(lambda path, _: ..., tree)``.
        replace: What each part holds in place of the other part's leaves (equinox's).
        is_leaf: What counts as a leaf of ``tree`` for the functions (as in
            :func:`treekit.tree_flatten`).
        drop: Leave out of each part's dicts the entries the other part holds (haiku's
            form), rather than keep them with ``replace`` (equinox's). Keyword only.

    Returns:
        ``(selected, rest)``: two trees of ``tree``'s structure, with ``None`` at the leaves
        the other one holds; with ``drop=True``, without the dict entries the other one holds.

    Raises:
        StructureMismatchError: If ``tree`` does not extend the mask's structure; labelled
            ``tree``.
    """
    leaves, treedef, _ = flatten(tree, is_leaf)
    if callable(filter_spec) or isinstance(filter_spec, bool):
        specs = [filter_spec] * len(leaves)
    else:  # each spec leaf over the leaves of the subtree under it
        spec_leaves, spec_def, _ = flatten(filter_spec)
        subtrees = spec_def._guide(tree, "tree")
        specs = [spec for spec, sub in zip(spec_leaves, subtrees) for _ in range(len(flatten(sub, is_leaf)[0]))]
    picks = leafwise(
        lambda spec, x: bool(spec(x) if callable(spec) else spec),
        [specs, leaves],
        lambda i: _paths(tree, is_leaf)[i],
        Caller("partition: filter_spec", "the leaf of tree"),
    )
    if drop:
        return _part(treedef._nodes, leaves, picks, True, replace), _part(treedef._nodes, leaves, picks, False, replace)
    selected = [x if pick else replace for pick, x in zip(picks, leaves)]
    rest = [replace if pick else x for pick, x in zip(picks, leaves)]
    return treedef._build(selected), treedef._build(rest)


def _none(_: Any) -> None:
    return None


def _paths(tree: Any, is_leaf: IsLeaf | None) -> list[Any]:
    paths = flatten(tree, is_leaf, True)[2]
    assert paths is not None
    return paths


def _part(nodes: tuple[Node, ...], leaves: list[Any], picks: list[bool], keep: bool, replace: Any) -> Any:
    """The part of ``partition(..., drop=True)`` holding the leaves whose pick is ``keep``.

    ``treekit.core._build.interpret`` over ``tree``'s records, with a state for each built
    subtree: 1 if it holds leaves of this part, -1 if it held leaves of ``tree`` and holds
    none now (a dict leaves such an entry out), 0 if it never held any (kept).
    """
    values: list[Any] = []
    states: list[int] = []
    leaf = 0
    for ntype, data, arity, _, _ in nodes:
        if ntype is None:
            took = picks[leaf] == keep
            values.append(leaves[leaf] if took else replace)
            states.append(1 if took else -1)
            leaf += 1
            continue
        start = len(values) - arity
        children, held = values[start:], states[start:]
        del values[start:], states[start:]
        node = unflatten_node(ntype, data, children)
        if -1 in held and ntype.kind in _DICT_KINDS:
            for key, state in zip(dict_keys(ntype, data), held):
                if state == -1:
                    del node[key]
        values.append(node)
        states.append(1 if 1 in held else -1 if -1 in held else 0)
    return values[0]


def combine(*trees: Any) -> Any:
    """Merge trees that hold ``None`` in place of leaves, or lack dict keys: each leaf from the
    first tree that has one there (the inverse of :func:`partition`, as equinox's ``combine``,
    and of haiku's ``hk.data_structures.partition``).

    >>> combine({'w': None, 'b': 0.5}, {'w': 2.0, 'b': None})
    {'w': 2.0, 'b': 0.5}
    >>> combine({'linear': {'w': 2.0}}, {'linear': {'b': 0.5}, 'head': {'w': 1.0}})
    {'linear': {'w': 2.0, 'b': 0.5}, 'head': {'w': 1.0}}

    Where the trees hold dicts (``dict``, ``defaultdict``), a key some of them lack is filled
    in from those that have it (merged key by key if several do), so the parts of haiku's
    ``hk.data_structures.partition`` and of ``partition(..., drop=True)`` join again. The
    result's dict has the first tree's keys, in its order, then the keys only later trees
    have, in the order they first appear. Two trees holding a leaf at one key path is not an
    error: the first one's is taken (``combine(a, b)`` is ``a`` with its gaps filled from
    ``b``), where haiku's ``merge`` takes the last one's. Otherwise the trees must have one
    structure (lists of one length, the same node types, an ``OrderedDict``'s keys in one
    order), with :func:`tree_map`'s key-path errors. Where the first tree holding something
    at a key path holds a leaf, that leaf is taken; where it holds ``None``, the first later
    value there that is not ``None``, whole; where it holds a node, a later tree may not hold
    ``None`` there.

    Args:
        *trees: Trees of one structure, except for ``None`` in place of leaves (or of whole
            subtrees) and for dict keys some of them lack.

    Returns:
        A tree of the first tree's structure (with the dict keys only later trees have), its
        ``None`` filled in from the later trees.

    Raises:
        StructureMismatchError: If the trees differ other than by ``None`` at leaves and by
            dict keys; labelled ``rest[k]`` for the ``k + 1``-th tree.
    """
    try:
        return tree_map(_first_not_none, *trees, is_leaf=_is_none)
    except StructureMismatchError:
        filled = _filled(trees)
        if filled is None:  # no tree lacks a key another has: the mismatch stands
            raise
    return tree_map(_first_not_none, *filled, is_leaf=_is_none)


def _first_not_none(*xs: Any) -> Any:
    return next((x for x in xs if x is not None), None)


_MISSING: Any = object()  # this tree lacks the dict key: filled in
_APART: Any = object()  # this tree's node above does not match the others': left as it is


def _filled(trees: tuple[Any, ...]) -> list[Any] | None:
    """The trees with the dict keys some lack filled in, so that ``tree_map`` can join them.

    At each place, the first tree holding something there leads. Where it holds a dict,
    every tree holding a dict of its type gets the keys of all of them, in first-seen order,
    and so does every tree lacking the place (``_MISSING``): a dict of the leader's type.
    Below another node, every tree holding a node of its type and node data gets its
    children filled, and a tree lacking the place a node like the leader's. Where the leader
    holds ``None`` or a leaf (or a node already being filled: a cycle), or is a later tree and
    the only one holding something there, a tree lacking the place gets ``None``; where the
    leader is the first tree and the only one, the leader's structure with ``None`` leaves.
    Trees holding something else are left as they are, for ``tree_map`` to report. ``None``
    if no tree lacks a key another has.
    """
    lacked = False
    done: list[list[Any]] = []  # for each place filled, each tree's filled value there
    todo: list[Any] = [list(trees)]  # a list of values to fill, or the _Join of its children
    above: dict[int, int] = {}  # the ids of the nodes being filled (and how many trees hold each)
    while todo:
        item = todo.pop()
        if type(item) is _Join:
            done.append(_join(item, done, above))
            continue
        values: list[Any] = item
        held = [i for i, v in enumerate(values) if v is not _MISSING and v is not _APART]
        lead = values[held[0]]
        if len(held) == 1:  # nothing to merge: a later tree's value is taken whole, the first's is matched
            hole = tree_map(_none, lead) if held[0] == 0 and len(held) < len(values) else None
            done.append([hole if v is _MISSING else v for v in values])
            continue
        ntype = None if lead is None else lookup(type(lead))
        join = None if ntype is None else _split(values, lead, ntype)
        if join is None or any(id(values[i]) in above for i in join.parts):  # a leaf, None, or a cycle
            done.append([None if v is _MISSING else v for v in values])
            continue
        if join.keys is not None:
            lacked = lacked or any(len(values[i]) != len(join.keys) for i in join.parts)
        for i in join.parts:
            above[id(values[i])] = above.get(id(values[i]), 0) + 1
        todo.append(join)
        todo.extend(reversed(join.rows))
    return done[0] if lacked else None


class _Join(NamedTuple):
    """A node to fill: the trees' ``values`` there, the ``lead`` value and its ``ntype``; the
    trees holding a node that matches it (``parts``); the values of each child to fill
    (``rows``: one per dict key of ``keys``, or per child of another node, whose node data
    and children ``datas`` holds for each part, and the leader's under ``-1``)."""

    values: list[Any]
    lead: Any
    ntype: NodeType
    keys: list[Any] | None
    datas: dict[int, tuple[Any, Any]] | None
    parts: list[int]
    rows: list[list[Any]]


def _split(values: list[Any], lead: Any, ntype: NodeType) -> _Join | None:
    """How to fill the node ``lead`` leads; ``None`` if a registered flatten function raises
    (left for ``tree_map`` to report)."""
    parts = [i for i, v in enumerate(values) if v is not _MISSING and v is not _APART and lookup(type(v)) is ntype]
    if ntype.kind in _DICT_KINDS:
        seen: dict[Any, None] = {}
        for i in parts:
            seen.update(dict.fromkeys(values[i]))
        keys = list(seen)
        rows = [[_MISSING if v is _MISSING else _APART for v in values] for _ in keys]
        for i in parts:
            node = values[i]
            for row, key in zip(rows, keys):
                row[i] = node[key] if key in node else _MISSING
        return _Join(values, lead, ntype, keys, None, parts, rows)
    try:
        datas = {i: ntype.flatten(values[i], False)[:2] for i in parts}
        datas[-1] = children, data = ntype.flatten(lead, False)[:2]
        parts = [i for i in parts if len(datas[i][0]) == len(children) and _same(datas[i][1], data)]
    except Exception:
        return None
    rows = [[_MISSING if v is _MISSING else _APART for v in values] for _ in children]
    for i in parts:
        for row, child in zip(rows, datas[i][0]):
            row[i] = child
    return _Join(values, lead, ntype, None, datas, parts, rows)


def _same(a: Any, b: Any) -> bool:
    try:
        return same_node_data(a, b)
    except Incomparable:
        return False


def _join(join: _Join, done: list[list[Any]], above: dict[int, int]) -> list[Any]:
    """Each tree's filled node from its filled children (the last ones in ``done``)."""
    values, lead, ntype, keys, datas, parts, rows = join
    kids = done[len(done) - len(rows) :]
    del done[len(done) - len(rows) :]
    out: list[Any] = []
    for i, value in enumerate(values):
        if value is _APART or (value is not _MISSING and i not in parts):
            out.append(value)  # left as it is
            continue
        column = [kid[i] for kid in kids]
        if keys is not None:  # a dict
            if value is _MISSING or len(value) != len(keys):  # all the keys, in first-seen order
                node = (lead if value is _MISSING else value).copy()
                node.clear()
                node.update(zip(keys, column))
            elif any(new is not value[key] for new, key in zip(column, keys)):
                node = value.copy()
                node.update(zip(keys, column))
            else:
                node = value
        else:
            assert datas is not None
            children, data = datas[-1 if value is _MISSING else i]
            same = value is not _MISSING and all(map(operator.is_, column, children))
            node = value if same else unflatten_node(ntype, data, column)
        out.append(node)
    for i in parts:
        count = above[id(values[i])] - 1
        if count:
            above[id(values[i])] = count
        else:
            del above[id(values[i])]
    return out

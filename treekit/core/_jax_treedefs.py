"""Treedefs between treekit and JAX: a JAX ``PyTreeDef`` passed where treekit takes a treedef
is converted once, at the entry point (``treedef_from_jax``, through ``TreeDef``'s
``CONVERTERS``); ``treedef_to_jax`` goes the other way."""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

from treekit.core import _treedef
from treekit.core._jax import connect, load_jax
from treekit.core._traverse import flatten
from treekit.core._treedef import TreeDef, as_treedef

__all__ = ["treedef_from_jax", "treedef_to_jax"]


# Both conversions rebuild a tree of placeholder leaves with one library and flatten it with the
# other, so each node is read by the library's own rules (None, dict order, namedtuples, nodes
# registered with either library) and nothing is translated by hand. Unflatten functions get
# placeholder children, as JAX's own code gives them (`treedef.unflatten([object()] * n)`).
_HOLE = object()


def _is_jax_treedef(value: Any) -> bool:
    cls = type(value)
    return cls.__name__ == "PyTreeDef" and cls.__module__.startswith(("jaxlib.", "jax."))


def _convert(value: Any, label: str) -> TreeDef | None:
    return _from_jax_treedef(value, label) if _is_jax_treedef(value) else None


def _from_jax_treedef(theirs: Any, label: str) -> TreeDef:
    connect()  # a JAX treedef exists, so jax is imported: make sure JAX's nodes are known
    n = theirs.num_leaves
    try:
        leaves, ours, _ = flatten(theirs.unflatten([_HOLE] * n))
    except Exception as exc:
        raise _unrebuilt(label, "treekit", theirs, repr(exc)) from exc
    if len(leaves) != n or any(leaf is not _HOLE for leaf in leaves) or ours.num_nodes != theirs.num_nodes:
        raise _unrebuilt(label, "treekit", theirs, f"treekit reads {ours!r:.80}")
    return ours


def _unrebuilt(label: str, reader: str, treedef: Any, detail: str) -> ValueError:
    return ValueError(f"{label}: expected a treedef {reader} can rebuild, got {treedef!r:.80} ({detail})")


def treedef_from_jax(treedef: Any) -> TreeDef:
    """treekit's :class:`~treekit.TreeDef` for the structure of a JAX ``PyTreeDef``.

    Every treekit function that takes a treedef also takes a JAX ``PyTreeDef`` and converts
    it the same way, on each call; convert once with this function to compare, pickle or
    reuse the result. The two treedefs describe the same trees: same leaves, same nodes
    (``None`` included), same node data.

    >>> import jax.tree_util as jtu
    >>> import treekit as tk
    >>> tree = {'b': [1, None], 'a': (2,)}
    >>> tk.treedef_from_jax(jtu.tree_structure(tree)) == tk.tree_structure(tree)
    True

    Args:
        treedef: A JAX ``PyTreeDef`` (``jax.tree_util.tree_structure(tree)``); a treekit
            ``TreeDef`` is returned as it is.

    Returns:
        The equal treekit :class:`~treekit.TreeDef` (dicts in sorted key order, as JAX keeps them).

    Raises:
        TypeError: If ``treedef`` is neither.
        ValueError: If the structure cannot be rebuilt with placeholder leaves (a node's
            unflatten function raised, or the rebuilt node flattens differently).
    """
    return as_treedef(treedef, "treedef")


def _depth(nodes: tuple[Any, ...]) -> int:
    """How many levels deep the post-order node records go (a leaf alone: 1), in one pass."""
    depths: list[int] = []
    for record in nodes:
        arity = record[2]
        if arity:
            below = max(depths[-arity:])
            del depths[-arity:]
            depths.append(below + 1)
        else:
            depths.append(1)
    return depths[-1] if depths else 0


def _frames() -> int:
    """How many Python frames are on the stack now."""
    count = 0
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        count, frame = count + 1, frame.f_back
    return count


def treedef_to_jax(treedef: Any) -> Any:
    """JAX's ``PyTreeDef`` for the structure of a treekit :class:`~treekit.TreeDef`; imports jax.

    Pass the result to JAX's functions (``jax.tree_util.tree_unflatten``,
    ``jax.tree.transpose``, ...), which only take their own treedefs. Nodes registered with
    treekit are registered with JAX too, so every treekit structure has a JAX one.

    >>> import treekit as tk
    >>> theirs = tk.treedef_to_jax(tk.tree_structure({'w': [1, 2], 'b': None}))
    >>> theirs
    PyTreeDef({'b': None, 'w': [*, *]})
    >>> theirs.unflatten([1, 2])
    {'b': None, 'w': [1, 2]}

    Args:
        treedef: A treekit ``TreeDef`` (a JAX ``PyTreeDef`` is returned as it is).

    Returns:
        The equal ``jax.tree_util.PyTreeDef`` (dicts in sorted key order, as JAX rebuilds them).

    Raises:
        ImportError: If jax is not installed.
        TypeError: If ``treedef`` is not a treedef.
        ValueError: If the structure cannot be rebuilt with placeholder leaves, or is deeper
            than JAX's recursive flattener can go (about ``sys.getrecursionlimit()`` levels).
    """
    if _is_jax_treedef(treedef):
        return treedef
    ours = as_treedef(treedef, "treedef")
    load_jax()
    connect()
    import jax.tree_util as jtu

    depth, room = _depth(ours._nodes), sys.getrecursionlimit() - _frames() - 50
    if depth > room:  # JAX's flattener recurses a C++ level per tree level: past the limit it fails
        raise _unrebuilt("treedef", "JAX", ours, f"{depth} levels deep; JAX's flattener recurses, {room} fit now")
    n = ours.num_leaves
    try:
        theirs: Any = jtu.tree_structure(ours.unflatten([_HOLE] * n))
    except Exception as exc:
        raise _unrebuilt("treedef", "JAX", ours, repr(exc)) from exc
    if theirs.num_leaves != n or theirs.num_nodes != ours.num_nodes:
        raise _unrebuilt("treedef", "JAX", ours, f"JAX reads {theirs!r:.80}")
    return theirs


_treedef.CONVERTERS.append(_convert)

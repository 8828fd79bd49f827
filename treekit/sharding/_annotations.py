"""The sharding annotations model libraries put on their leaves, read without importing them.

flax linen's ``nn.Partitioned`` box (``nn.with_partitioning``) holds a value and the mesh axis
of each of its dims (``names``); an nnx ``Variable`` (``nnx.with_partitioning``,
``nnx.Param(..., out_sharding=...)``) keeps them in its metadata (``out_sharding``; older
flax: ``sharding_names``, ``sharding``). :mod:`treekit.sharding` and :func:`treekit.summary`
take them as the spec of the box's leaf where no rule says otherwise. linen's
``LogicallyPartitioned`` names logical axes, which flax's own rules map to mesh axes; treekit
leaves it unannotated.
"""

from __future__ import annotations

from typing import Any

from treekit.core import flatten

__all__ = ["annotation", "box_level"]

_NNX_KEYS = ("out_sharding", "sharding_names", "sharding")


def _is(cls: type, module: str, name: str) -> bool:
    return any(c.__module__ == module and c.__name__ == name for c in cls.__mro__)


def annotation(x: Any) -> tuple[Any, ...] | None:
    """The mesh axes a box gives its value (one entry per dim), or ``None`` for anything else.

    >>> annotation({'w': 1}) is None
    True

    Returns:
        The box's names (``None``, an axis name or a tuple of names per dim), or ``None``.
    """
    cls = type(x)
    if not cls.__module__.startswith("flax."):
        return None
    names: Any = None
    if _is(cls, "flax.core.meta", "Partitioned"):
        if not _is(cls, "flax.linen.spmd", "LogicallyPartitioned"):
            names = getattr(x, "names", None)
    elif _is(cls, "flax.nnx.variablelib", "Variable") or _is(cls, "flax.nnx.variablelib", "VariableState"):
        get = getattr(x, "get_metadata", None)
        meta = get() if callable(get) else {}
        names = next((meta[k] for k in _NNX_KEYS if isinstance(meta, dict) and meta.get(k) is not None), None)
    return tuple(names) if isinstance(names, (tuple, list)) else None


def box_level(is_leaf: Any = None) -> Any:
    """An ``is_leaf`` that also stops at each annotated box holding exactly one leaf, so that the
    flattened tree has a leaf (the box, or the leaf itself) for each leaf of the full tree, in
    order: where a spec or a sharding takes the box's place.

    >>> box_level()({'w': 1})
    False
    """

    def stop(x: Any) -> bool:
        if is_leaf is not None and is_leaf(x):
            return True
        return annotation(x) is not None and len(flatten(x, is_leaf)[0]) == 1

    return stop

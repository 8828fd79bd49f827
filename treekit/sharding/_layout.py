"""How a PartitionSpec lays a leaf out over a mesh's axes, without importing jax.

Shared by :mod:`treekit.sharding` (checks, :func:`~treekit.sharding.device_bytes`) and
:func:`treekit.summary` (its sharding columns), so that the two always agree. Duck-typed: a
spec is any iterable of entries (``None``, an axis name, or a tuple of names), as
``jax.sharding.PartitionSpec`` is; a mesh is anything with a ``shape`` mapping of axis names
to sizes (``jax.sharding.Mesh``, ``AbstractMesh``) or such a mapping itself.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from treekit.core import itemsize

__all__ = [
    "Layout",
    "device_nbytes",
    "device_shape",
    "entry_axes",
    "layout_of",
    "mesh_axes",
    "mesh_str",
    "named_layout",
    "spec_str",
]

Layout = tuple[Any, dict[str, int]]
"""A leaf's ``(spec, {mesh axis name: size})``."""


def mesh_axes(mesh: Any) -> dict[str, int]:
    """The mesh's axis names and sizes, in order.

    >>> mesh_axes({'data': 2, 'model': 4})
    {'data': 2, 'model': 4}

    Args:
        mesh: A :class:`jax.sharding.Mesh` (or ``AbstractMesh``), or a mapping of axis names
            to sizes.

    Returns:
        ``{axis name: size}``.

    Raises:
        TypeError: If ``mesh`` is neither.
    """
    shape = mesh if isinstance(mesh, Mapping) else getattr(mesh, "shape", None)
    if not isinstance(shape, Mapping) or not all(isinstance(n, int) and n > 0 for n in shape.values()):
        raise TypeError(f"mesh: expected a jax.sharding.Mesh or a mapping of axis names to sizes, got {mesh!r:.80}")
    return dict(shape)


def mesh_str(axes: Mapping[str, int]) -> str:
    """``data=2,model=4``: mesh axes as the demo's ``--mesh`` takes them.

    >>> mesh_str({'data': 2, 'model': 4})
    'data=2,model=4'
    """
    return ",".join(f"{name}={size}" for name, size in axes.items())


def spec_str(spec: Any) -> str:
    """``P('data', None)``: a spec as treekit's messages and tables print it (the same in every
    jax version).

    >>> spec_str((('data', 'model'), None)), spec_str(())
    ("P(('data', 'model'), None)", 'P()')

    Args:
        spec: A ``PartitionSpec`` (or a tuple of its entries).

    Returns:
        The text.
    """
    return "P(" + ", ".join(repr(tuple(e) if isinstance(e, list) else e) for e in spec) + ")"


def entry_axes(entry: Any) -> tuple[Any, ...]:
    """The mesh axis names of one spec entry: ``None`` -> ``()``, ``'x'`` -> ``('x',)``."""
    if entry is None:
        return ()
    return tuple(entry) if isinstance(entry, (tuple, list)) else (entry,)


def device_shape(shape: tuple[int, ...], spec: Any, axes: Mapping[str, int]) -> tuple[int, ...]:
    """The largest block of ``shape`` one device holds: a dim split ``n`` ways keeps
    ``ceil(size / n)`` entries (axes the mesh lacks count 1; :func:`~treekit.sharding.check_specs`
    reports them).

    >>> device_shape((8, 6), ('model', None), {'data': 2, 'model': 4})
    (2, 6)
    """
    out = list(shape)
    for dim, entry in enumerate(spec):
        if dim < len(out):
            out[dim] = -(-out[dim] // math.prod(axes.get(name, 1) for name in entry_axes(entry)))
    return tuple(out)


def device_nbytes(x: Any, spec: Any, axes: Mapping[str, int]) -> int | None:
    """Bytes of ``x`` on the device that holds the most of it; ``None`` without a known size
    (no ``shape`` and ``dtype``, or a dim that is not an int).

    >>> import numpy as np
    >>> device_nbytes(np.zeros((8, 6), np.float32), ('model', None), {'model': 4})
    48
    """
    shape, dtype = getattr(x, "shape", None), getattr(x, "dtype", None)
    if shape is None or dtype is None or not all(isinstance(n, int) for n in shape):
        return None
    size = itemsize(dtype)
    return None if size is None else math.prod(device_shape(tuple(shape), spec, axes)) * size


def named_layout(sharding: Any) -> Layout | None:
    """``(spec, axes)`` of a ``NamedSharding`` (anything with ``spec`` and ``mesh``), else ``None``."""
    spec, mesh = getattr(sharding, "spec", None), getattr(sharding, "mesh", None)
    return None if spec is None or mesh is None else (spec, mesh_axes(mesh))


def layout_of(sharding: Any, mesh: Any = None) -> Layout | None:
    """``(spec, axes)`` of a ``NamedSharding`` (anything with ``spec`` and ``mesh``), or of a
    ``PartitionSpec`` (or ``None``: replicated) on ``mesh``; ``None`` for other shardings (one
    device's, or a kind without a spec).

    >>> layout_of(('data', None), {'data': 2}), layout_of(None, {'data': 2})
    ((('data', None), {'data': 2}), ((), {'data': 2}))

    Raises:
        TypeError: If ``sharding`` is a spec and ``mesh`` is ``None``, or ``sharding`` is
            neither a sharding nor a spec; the message reads ``expected ..., got ...``.
    """
    named = named_layout(sharding)
    if named is not None:
        return named
    if sharding is not None and hasattr(sharding, "shard_shape"):  # another kind of jax sharding
        return None
    if isinstance(sharding, str) or (sharding is not None and not hasattr(sharding, "__iter__")):
        raise TypeError(f"expected a NamedSharding, a PartitionSpec or None, got {sharding!r:.60}")
    spec = () if sharding is None else sharding
    if mesh is None:
        raise TypeError(f"expected a NamedSharding or mesh=, got {spec_str(spec)} without a mesh")
    return spec, mesh_axes(mesh)

"""Casting a chunk's leaves to a spec's dtypes: ``'safe'`` casts where every value fits (row by
row: a row whose value does not fit is a bad row, raised or dropped), ``'unsafe'`` always,
``'none'`` never; leaves the spec does not fit are left for the spec check to name."""

from __future__ import annotations

from typing import Any

from treekit.core import keystr
from treekit.data._chunks import Chunk, origin_text

__all__ = ["CASTS", "cast_leaves"]

CASTS = ("safe", "unsafe", "none")


def _target(want: Any) -> Any:
    """The numpy dtype a spec leaf asks for, or ``None`` (any dtype, or none numpy knows)."""
    import numpy as np

    dtype = getattr(want, "dtype", None)
    if dtype is None or not hasattr(want, "shape"):
        return None
    try:
        return np.dtype(dtype)
    except TypeError:  # a key dtype, or an ml_dtypes name not registered
        return None


def fits(leaf: Any, target: Any) -> Any:
    """For each row of ``leaf``, whether its values are ``target``'s values too; ``None`` where the
    kinds do not convert by value (strings, complex to real).

    >>> import numpy as np
    >>> fits(np.array([1, 300, -1]), np.dtype('uint8')).tolist()
    [True, False, False]
    >>> fits(np.array([[0.5, 2.0], [1.0, 3.0]]), np.dtype('int32')).tolist()
    [False, True]
    """
    import numpy as np

    kind, to = leaf.dtype.kind, target.kind
    if kind not in "biuf" or to not in "biuf":
        return None
    values = leaf.reshape(leaf.shape[0], -1)
    if to == "b":
        ok = (values == 0) | (values == 1)
    elif to in "iu":
        info = np.iinfo(target)
        ok = np.isfinite(values) & (values == np.round(values)) if kind == "f" else np.ones(values.shape, bool)
        with np.errstate(invalid="ignore"):
            ok &= (values >= info.min) & (values <= info.max)
    elif kind == "f":  # a float to a narrower float: finite values in its range (NaN and inf stay)
        ok = ~np.isfinite(values) | (np.abs(values) <= np.finfo(target).max)
    else:  # an int to a float: exactly, below 2 ** (mantissa bits + 1), compared as ints
        limit = 2 ** (np.finfo(target).nmant + 1)  # (2**53 + 1 as a float64 is 2**53: not compared so)
        ok = (values <= limit) & (values >= -limit) if limit < 2**63 else np.ones(values.shape, bool)
    return np.asarray(ok).all(axis=1)


def cast_leaves(chunk: Chunk, spec: Any, cast: str, on_bad_row: str) -> tuple[Chunk, int, ValueError | None]:
    """``chunk`` with its leaves cast to ``spec``'s dtypes, the count of bad rows dropped, and the
    error of a bad row with ``on_bad_row='raise'``: then the chunk holds the rows before the
    first bad one (they are batched; the error is raised where the bad row's batch is made). The
    error names the key path, the rows (``chunk.where``) and the values."""
    import numpy as np

    if spec is None or cast == "none":
        return chunk, 0, None
    try:
        wants = chunk.treedef.flatten_up_to(spec)
    except (ValueError, TypeError):  # another structure: the spec check names the difference
        return chunk, 0, None
    leaves = list(chunk.leaves)
    bad = None
    error: ValueError | None = None
    first_bad = chunk.rows
    for i, want in enumerate(wants):
        target, leaf = _target(want), leaves[i]
        if target is None or leaf.dtype == target:
            continue
        if cast == "safe" and not np.can_cast(leaf.dtype, target, "safe"):
            ok = fits(leaf, target)
            if ok is None:
                continue
            if not ok.all():
                rows = np.flatnonzero(~ok)
                if on_bad_row == "raise":
                    if rows[0] < first_bad:  # (the first bad row of all the leaves is raised)
                        shown = ", ".join(f"{int(r)} ({leaf[r].tolist()!r:.40})" for r in rows[:3])
                        error, first_bad = ValueError(
                            f"chunk{keystr(chunk.paths[i])} ({origin_text(chunk.where, 0, chunk.rows)}): expected "
                            f"values that fit {target.name}, got rows {shown}{' ...' if len(rows) > 3 else ''} that "
                            "do not\npass cast='unsafe' to cast them anyway, or on_bad_row='skip' to drop such rows"
                        ), int(rows[0])
                else:
                    bad = ~ok if bad is None else bad | ~ok
        with np.errstate(invalid="ignore", over="ignore"):
            leaves[i] = leaf.astype(target)
    if error is not None:  # the rows before the first bad one
        head = [leaf[:first_bad] for leaf in leaves]
        return Chunk(head, chunk.treedef, chunk.paths, first_bad, chunk.where, chunk.state), 0, error
    if bad is None:
        return Chunk(leaves, chunk.treedef, chunk.paths, chunk.rows, chunk.where, chunk.state), 0, None
    keep = ~bad
    kept = [leaf[keep] for leaf in leaves]
    return Chunk(kept, chunk.treedef, chunk.paths, int(keep.sum()), chunk.where, chunk.state), int(bad.sum()), None

"""Value statistics of many leaves at once, computed where the arrays live.

:func:`leaf_stats` gives each leaf's :class:`Stats`: the count, mean, spread, min and max of its
finite entries (magnitudes for complex) and its NaN and infinity counts, or ``None`` where there
are no numbers to read (not an array, a dtype that holds no numbers, a tracer, a deleted array,
an array that other processes hold part of). :func:`merge_stats` adds them up for subtotals.

jax arrays on an accelerator are reduced on their devices: one compiled program for each kind
of leaf (a shape, dtype and sharding), called on up to 64 leaves and 256 MiB at a time (a
sharded array reduces on each of its devices and XLA combines the parts), and every result
comes back in one transfer, seven numbers a leaf. jax keeps the programs by those shapes, so a second call on the
same tree, or on another tree of the same shapes (an optimizer's moments beside the params),
compiles nothing. Other arrays (numpy's, and jax's on the CPU, which numpy reads in place) are
read on the host in blocks through one float64 buffer, so memory stays bounded (2 MiB): on a CPU
that takes 1.1-1.2x XLA's own fused pass, or less (docs/performance.md).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from treekit.core import is_array, is_inexact_dtype
from treekit.ops._tree_math import loaded_jax

__all__ = ["Stats", "leaf_stats", "merge_stats"]

_BLOCK = 1 << 18  # entries a host pass reads at a time (2 MiB of float64: in cache, 2x faster than 8)
_RUN = 64  # leaves one compiled program reduces at most
_CALLS = 16  # calls a kind of leaf (a shape, dtype and sharding) is read in, where _RUN allows
_CALL_BYTES = 1 << 28  # bytes of leaves a call reduces at most (XLA may take scratch memory for each)
_IN_PLACE = frozenset({"cpu"})  # jax platforms whose arrays numpy reads in place: read on the host


class Stats(NamedTuple):
    """What :func:`leaf_stats` reads off one leaf (or :func:`merge_stats` off several)."""

    finite: int  # entries that are finite
    total: float  # their sum
    m2: float  # their sum of squared deviations from their mean
    low: float
    high: float
    nans: int
    infs: int

    @property
    def mean(self) -> float:
        """The mean of the finite entries; nan when there are none."""
        return self.total / self.finite if self.finite else math.nan

    @property
    def std(self) -> float:
        """The (population) standard deviation of the finite entries; nan when there are none."""
        return math.sqrt(self.m2 / self.finite) if self.finite else math.nan


_NONE_FINITE = Stats(0, 0.0, math.nan, math.nan, math.nan, 0, 0)


def merge_stats(parts: Iterable[Stats | None]) -> Stats:
    """The statistics of all the entries behind ``parts`` together (``None`` parts add nothing),
    by Chan, Golub and LeVeque's pairwise update, in float64.

    >>> a, b = Stats(2, 2.0, 2.0, 0.0, 2.0, 0, 0), Stats(1, 4.0, 0.0, 4.0, 4.0, 1, 0)
    >>> merge_stats([a, None, b])
    Stats(finite=3, total=6.0, m2=8.0, low=0.0, high=4.0, nans=1, infs=0)
    """
    count, total, m2, low, high, nans, infs = 0, 0.0, 0.0, math.inf, -math.inf, 0, 0
    for s in parts:
        if s is None:
            continue
        nans, infs = nans + s.nans, infs + s.infs
        if not s.finite:
            continue
        if count:
            delta = s.total / s.finite - total / count
            m2 += delta * delta * count * s.finite / (count + s.finite)
        count, total, m2 = count + s.finite, total + s.total, m2 + s.m2
        low, high = min(low, s.low), max(high, s.high)
    if not count:
        return _NONE_FINITE._replace(nans=nans, infs=infs)
    return Stats(count, total, m2, low, high, nans, infs)


def leaf_stats(leaves: Sequence[Any]) -> list[Stats | None]:
    """Each leaf's :class:`Stats`, or ``None`` where it holds no numbers to read.

    >>> import numpy as np
    >>> [s and (s.finite, s.mean, s.nans) for s in leaf_stats([np.array([1.0, 3.0, np.nan]), 'x'])]
    [(2, 2.0, 1), None]
    """
    out: list[Stats | None] = [None] * len(leaves)
    runs: dict[Any, list[int]] = {}  # (shape, dtype, sharding): the jax leaves of that kind
    host: list[int] = []  # the leaves read on the host
    jax = loaded_jax()
    for k, x in enumerate(leaves):
        if not is_array(x) or not _numeric(x.dtype):
            continue
        if jax is not None and isinstance(x, jax.Array):
            if isinstance(x, jax.core.Tracer) or x.is_deleted() or not x.is_fully_addressable:
                continue  # (no values here to read)
            if x.size and any(device.platform not in _IN_PLACE for device in x.sharding.device_set):
                runs.setdefault((x.shape, x.dtype, x.sharding), []).append(k)
                continue
        host.append(k)  # (a jax array on the CPU: read in place, no copy)
    _host_stats(leaves, host, out)
    if runs:
        _device_stats(leaves, list(runs.values()), out)
    return out


def _numeric(dtype: Any) -> bool:
    """Whether ``dtype`` holds numbers: bool, ints, floats (bfloat16, float8...), complex."""
    if is_inexact_dtype(dtype):
        return True
    kind = getattr(dtype, "kind", None)
    return kind in ("b", "i", "u") if kind is not None else str(dtype).startswith(("int", "uint", "bool"))


def _host_stats(leaves: Sequence[Any], host: list[int], out: list[Stats | None]) -> None:
    """The leaves at ``host`` read on the host, written into ``out``, one block of at most
    ``_BLOCK`` entries at a time through one float64 buffer (a view with other strides through
    nditer's buffer: never copied whole). One thread: on the TPU machine's 13 cores, reading
    blocks on 2-13 threads took 1.2-1.9x as long as on one (docs/performance.md)."""
    import numpy as np

    buffer = np.empty(_BLOCK, np.float64)
    for k in host:
        try:
            values = np.asarray(leaves[k])
        except Exception:  # an abstract value: no numbers to read
            continue
        if not _numeric(values.dtype):  # (numpy wraps what it cannot read, a ShapeDtypeStruct, as an object)
            continue
        if values.flags.c_contiguous:
            flat = values.reshape(-1)
            blocks: Iterable[Any] = [flat[start : start + _BLOCK] for start in range(0, flat.size, _BLOCK)] or [flat]
        else:  # (nditer's block is its buffer: used up before the next)
            flags: Any = ["external_loop", "buffered", "zerosize_ok", "refs_ok"]
            blocks = np.nditer(values, flags=flags, buffersize=_BLOCK, order="K")
        out[k] = merge_stats(_block_stats(block, buffer) for block in blocks)


def _block_stats(block: Any, buffer: Any) -> Stats:
    """One block of at most ``_BLOCK`` entries, copied into ``buffer`` as float64 (magnitudes for
    complex) and summed, then its deviations from the mean squared in place: two passes, so that
    the spread of entries far from zero is exact. A finite sum means that every entry is finite
    (a NaN or an infinity makes the sum one); only otherwise are they counted and left out."""
    import numpy as np

    nans = infs = 0
    total = math.nan if block.dtype.kind == "c" else _copied_sum(block, buffer)
    if not math.isfinite(total):
        nan, inf = np.isnan(block), np.isinf(block)  # (a complex entry with a NaN part is NaN)
        nans, infs = int(np.count_nonzero(nan)), int(np.count_nonzero(inf & ~nan))
        if nans or infs:
            block = block[~(nan | inf)]
        if block.dtype.kind == "c":
            block = np.abs(block.astype(np.complex128))
        total = _copied_sum(block, buffer)
    if not block.size:
        return _NONE_FINITE._replace(nans=nans, infs=infs)
    values = buffer[: block.size]
    values -= total / block.size
    m2 = float(np.dot(values, values))
    return Stats(block.size, total, m2, float(block.min()), float(block.max()), nans, infs)


def _copied_sum(block: Any, buffer: Any) -> float:
    """The sum of ``block``, copied into ``buffer`` as float64 on the way."""
    import numpy as np

    values = buffer[: block.size]
    np.copyto(values, block, casting="unsafe")
    with np.errstate(invalid="ignore", over="ignore"):  # (inf - inf, or finite entries past float64)
        return float(values.sum())


def _device_stats(leaves: Sequence[Any], runs: list[list[int]], out: list[Stats | None]) -> None:
    """The jax leaves of ``runs`` (index lists, each of one shape, dtype and sharding) reduced on
    their devices, the results fetched together, written into ``out``."""
    jax = loaded_jax()
    assert jax is not None
    kernel = _kernel()
    pending = []  # (leaf indexes, the program's outputs, still on the device)
    for run in runs:
        # One program per kind of leaf: it reduces `size` leaves at a time, size a power of two
        # (so that runs of similar lengths share it) for about _CALLS calls; the last call's
        # missing leaves are the first one again, their results dropped. (A program's compile
        # time grows with its leaves, 0.1-0.6 s a leaf on a TPU, a call costs ~0.2 ms there.)
        size = min(_RUN, 1 << max(0, math.ceil(len(run) / _CALLS) - 1).bit_length())
        while size > 1 and size * leaves[run[0]].nbytes > _CALL_BYTES:
            size //= 2
        for start in range(0, len(run), size):
            chunk = run[start : start + size]
            arrays = [leaves[k] for k in chunk] + [leaves[run[0]]] * (size - len(chunk))
            try:
                pending.append((chunk, kernel(arrays)))
            except Exception:  # (a placement XLA cannot compile for): read those on the host
                _host_stats(leaves, chunk, out)
    fetched = jax.device_get([outputs for _, outputs in pending])
    for (chunk, _), (floats, counts, extremes) in zip(pending, fetched):
        rows = zip(chunk, floats.tolist(), counts.tolist(), extremes.tolist())
        for k, (total, m2, scale), (nans, infs), (low, high) in rows:
            nans, infs = int(nans), int(infs)
            count = leaves[k].size - nans - infs
            if not count:
                out[k] = _NONE_FINITE._replace(nans=nans, infs=infs)
                continue
            out[k] = Stats(count, total * scale, m2 * scale * scale, float(low), float(high), nans, infs)


@functools.cache
def _kernel() -> Any:
    """The compiled reduction: a list of arrays of one shape and dtype to ``(floats, counts,
    extremes)``, a row per array. Over the finite entries (magnitudes for complex), divided by
    ``scale`` (a power of two near their largest magnitude, so that no sum of squares overflows
    float32):
    ``floats`` is ``[sum, sum((x - mean)**2), scale]``; ``counts`` ``[NaN count, inf count]``
    (int32, or float32 for leaves of 2**31 entries or more); ``extremes`` ``[min, max]`` in the
    entries' own dtype (ints and bfloat16 exactly). Two passes over each array, the second from
    the mean, so that the spread of entries far from zero is exact where the one-pass
    E[x^2] - E[x]^2 would cancel."""
    import jax
    import jax.numpy as jnp

    def reduce(xs: list[Any]) -> tuple[Any, Any, Any]:
        floats, counts, extremes = [], [], []
        for x in xs:
            nan = jnp.isnan(x)  # (a complex entry with a NaN part is NaN)
            inf = jnp.isinf(x) & ~nan
            finite = ~(nan | inf)
            v = jnp.abs(x) if jnp.iscomplexobj(x) else x
            if jnp.issubdtype(v.dtype, jnp.floating):
                low, high = jnp.where(finite, v, jnp.inf).min(), jnp.where(finite, v, -jnp.inf).max()
            else:  # (bool and ints: every entry finite)
                low, high = v.min(), v.max()
            # float64 where jax has it (x64 on) and the entries are 64-bit, else float32
            wide = jax.dtypes.canonicalize_dtype(jnp.float64) if v.dtype.itemsize == 8 else jnp.float32
            f = v.astype(wide)
            largest = jnp.maximum(jnp.abs(low.astype(wide)), jnp.abs(high.astype(wide)))
            # a power of two near it, multiplied by, never divided by: exact on any chip (a TPU's
            # float32 division is not), its inverse a normal number
            _, exponent = jnp.frexp(jnp.where(jnp.isfinite(largest) & (largest > 0), largest, 1))
            exponent = jnp.clip(exponent, -100, 100)
            one = jnp.ones((), wide)
            scale = jnp.ldexp(one, exponent)
            y = jnp.where(finite, f * jnp.ldexp(one, -exponent), 0)
            total = y.sum()
            mean = total / jnp.maximum(finite.sum(dtype=wide), 1)
            d = jnp.where(finite, y - mean, 0)
            floats.append(jnp.stack([total, (d * d).sum(), scale]))
            tally = jnp.int32 if x.size < 2**31 else jnp.float32
            counts.append(jnp.stack([nan.sum(dtype=tally), inf.sum(dtype=tally)]))
            extremes.append(jnp.stack([low, high]))
        return jnp.stack(floats), jnp.stack(counts), jnp.stack(extremes)

    return jax.jit(reduce)

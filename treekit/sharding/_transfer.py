"""Trees of many small arrays between the host and a device as a few large transfers.

Each transfer between the host and an accelerator costs about 0.1 ms whatever its size (a TPU
v5e: 20,000 arrays of 16 floats take 2.1 s to fetch one by one, and their 1.3 MB one large
array takes 6 ms), so the small arrays of one device, dtype and shape are moved together: on
the device one compiled function concatenates them along their first axis (jax keeps it for
that signature: later calls do not compile), the buffer crosses at once, and on the host each
array is a view into it (no copy). The reverse puts one host buffer on the device and splits
it there. Arrays pack by kind (device, dtype, shape) in groups of at most ``GROUP``
arrays and ``CHUNK_BYTES`` bytes, not the whole tree at once: XLA's compile time grows
faster than the number of operands (a concatenate of 256 small arrays compiles in 0.2 s on a
TPU v5e, of 1,024 in 1.3 s, of 4,096 in 12 s), and one signature per kind, however many
arrays it has, is compiled once (the last group of a kind overlaps the one before it rather
than being a new, smaller signature). Floats cross as their bits (unsigned integers), which
XLA copies exactly where it may quiet a NaN it copies as a float; off the CPU no compiled op
is exact for floats narrower than 32 bits, so those move one by one there.
"""

from __future__ import annotations

import functools
import math
import sys
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from treekit.core import flatten, is_key_dtype

__all__ = ["device_get", "device_put", "fetch_small", "put_small"]

SMALL_BYTES = 1 << 20  # arrays of at most this many bytes are packed; larger ones move alone
GROUP = 256  # arrays per packed buffer, at most (a concatenate of 256 compiles in ~0.2 s)
CHUNK_BYTES = 256 << 20  # bytes of packed buffers on a device at once, at most
MIN_KIND = 4  # a kind with fewer arrays moves one by one (a compile is worth ~1,000 transfers)
NEW_PER_CALL = 4  # new signatures one call may compile; other kinds move one by one until a later call
PACKED_PLATFORMS = frozenset({"tpu", "gpu", "cuda", "rocm"})  # (on the CPU a transfer is a copy in memory)

_compiled: set[Any] = set()  # the signatures packed before (jax holds their compiled functions)


def _packs(kinds: dict[Any, list[int]], direction: str) -> list[tuple[Any, list[int]]]:
    """The groups to pack, ``(kind, indices)``: each kind (``(place, dtype, shape, ...)``) of at
    least ``MIN_KIND`` arrays cut into groups of one size (the last overlapping the one
    before), the largest kinds first, at most ``NEW_PER_CALL`` of them with a signature not
    packed before."""
    out: list[tuple[Any, list[int]]] = []
    new = 0
    for kind, members in sorted(kinds.items(), key=lambda item: -len(item[1])):
        n = len(members)
        size = min(n, GROUP, CHUNK_BYTES // (math.prod(kind[2]) * kind[1].itemsize))
        if n < MIN_KIND or size < 2:
            continue
        signature = (direction, kind, size)
        if signature not in _compiled:
            if new == NEW_PER_CALL:
                continue
            new += 1
            _compiled.add(signature)
        starts = list(range(0, n - size + 1, size))
        if starts[-1] != n - size:
            starts.append(n - size)
        out += [(kind, members[s : s + size]) for s in starts]
    return out


def _packed_device(sharding: Any, dtype: Any, shape: tuple[int, ...], pack: bool | None) -> Any:
    """The device of the jax arrays of ``sharding``, ``dtype`` and ``shape`` if they may be
    packed: small, not empty, in the default memory of one device (of a platform
    ``PACKED_PLATFORMS`` names unless ``pack``), of a dtype packs move exactly there, not
    typed keys; else ``None``."""
    devices = sharding.device_set
    if len(devices) != 1 or is_key_dtype(dtype) or not 0 < math.prod(shape) * dtype.itemsize <= SMALL_BYTES:
        return None
    (device,) = devices
    if (pack is None and device.platform not in PACKED_PLATFORMS) or not _exact(dtype, device.platform):
        return None
    return device if _default_memory(sharding, device) else None


def _default_memory(sharding: Any, device: Any) -> bool:
    """``sharding`` places arrays in ``device``'s default memory (not ``pinned_host``: jax
    concatenates no arrays of two memories, and host memory needs no pack)."""
    kind = getattr(sharding, "memory_kind", None)
    if kind is None:
        return True
    try:
        return bool(kind == device.default_memory().kind)
    except Exception:  # (a platform that names no default memory: leave its arrays to jax)
        return False


def _exact(dtype: Any, platform: str) -> bool:
    """Whether a pack moves arrays of ``dtype`` bit for bit on ``platform``: not complex, whole
    bytes an element (int2 makes XLA's CPU compiler abort the process, and a bitcast of float4
    to bytes changes its shape), and no float narrower than 32 bits off the CPU (a TPU v5e
    quiets the NaNs and flushes the subnormals of bfloat16, float16 and float8 in any compiled
    op, a bitcast included)."""
    import jax.numpy as jnp

    if dtype.kind == "c":
        return False
    floating = jnp.issubdtype(dtype, jnp.floating)
    if dtype.type.__module__.startswith("ml_dtypes"):  # (bfloat16, float8, int4, ...: their width in bits)
        import ml_dtypes

        try:
            bits = (ml_dtypes.finfo if floating else ml_dtypes.iinfo)(dtype).bits
        except (TypeError, ValueError):
            return False
        if bits != 8 * dtype.itemsize:
            return False
    return platform == "cpu" or dtype.itemsize >= 4 or not floating


def _bits_of(dtype: Any) -> Any:
    """The unsigned integer dtype a float ``dtype`` packs as (its bits: XLA may quiet a NaN or
    flush a subnormal that it concatenates as a float; it copies integers as they are), else
    ``None`` (integers and bools pack as themselves)."""
    import jax.numpy as jnp
    import numpy as np

    if not jnp.issubdtype(dtype, jnp.floating):
        return None
    return np.dtype(f"uint{8 * np.dtype(dtype).itemsize}")


@functools.cache
def _array_type() -> Any:
    """The class of jax's concrete arrays (not tracers)."""
    import jax.numpy as jnp

    return type(jnp.zeros(()))


@functools.cache
def _packer() -> Callable[..., Any]:
    import jax
    import jax.numpy as jnp

    def pack(*xs: Any) -> Any:
        bits = _bits_of(xs[0].dtype)
        parts = [x.reshape(1) if x.ndim == 0 else x for x in xs]
        if bits is not None:
            parts = [jax.lax.bitcast_convert_type(x, bits) for x in parts]
        return jnp.concatenate(parts)

    return jax.jit(pack)


def fetch_small(arrays: Sequence[Any], pack: bool | None = None) -> list[Any]:
    """``arrays`` with each small jax array on one device as a numpy array, moved in packs
    (see :func:`device_get`); every other value as given.

    >>> fetch_small([1, 'a'])
    [1, 'a']
    """
    if pack is False or "jax" not in sys.modules:  # (no jax array without jax)
        return list(arrays)
    import numpy as np

    array_type = _array_type()
    found: dict[Any, list[int]] = {}  # (one pass over the leaves, cheap; each kind judged once)
    for i, x in enumerate(arrays):
        if type(x) is array_type and not x.is_deleted():  # (weak types and commitment: jit compiles for each)
            found.setdefault((x.sharding, x.dtype, x.shape, x.weak_type, x.committed), []).append(i)
    kinds: dict[Any, list[int]] = {}
    for (sharding, dtype, shape, weak, committed), members in found.items():
        device = _packed_device(sharding, dtype, shape, pack)
        if device is not None:
            kinds.setdefault((device, dtype, shape, weak, committed), []).extend(members)
    out = list(arrays)
    flight: deque[tuple[Any, list[int], Any]] = deque()  # packed buffers on their way to the host
    held = 0

    def land() -> int:
        (_, dtype, shape, _, _), members, buffer = flight.popleft()
        host = np.asarray(buffer).view(dtype)
        rows = shape[0] if shape else 1
        for k, i in enumerate(members):
            view = host[k * rows : (k + 1) * rows]
            out[i] = view if shape else view.reshape(())
        return int(buffer.nbytes)

    for kind, members in _packs(kinds, "get"):
        buffer = _packer()(*(arrays[i] for i in members))
        buffer.copy_to_host_async()
        flight.append((kind, members, buffer))
        held += int(buffer.nbytes)
        while held > CHUNK_BYTES:
            held -= land()
    while flight:
        land()
    return out


def _bound(target: Any) -> Any:
    """The one device ``target`` (``None``: jax's default device, a device, a sharding) puts
    an array on, or ``None`` for a sharding over several devices."""
    import jax

    if target is None:
        return jax.devices()[0]
    if isinstance(target, jax.Device):
        return target
    devices = target.device_set
    return next(iter(devices)) if len(devices) == 1 else None


def _held(dtype: Any) -> bool:
    """Arrays of ``dtype`` are held by jax as they are (numbers, bools, ml_dtypes'; not one x64
    being off would convert)."""
    import jax

    if not (dtype.kind in "biufc" or dtype.type.__module__.startswith("ml_dtypes")):
        return False
    return bool(jax.dtypes.canonicalize_dtype(dtype) == dtype)


@functools.cache
def _splitter(size: int, scalar: bool, dtype: Any, sharding: Any) -> Callable[..., Any]:
    """A compiled split of a buffer into ``size`` equal parts along its first axis (0-d parts
    if ``scalar``) of ``dtype`` (the buffer holds their bits, :func:`_bits_of`), each placed by
    ``sharding`` (``None``: where the buffer is)."""
    import jax
    import jax.numpy as jnp

    def split(buffer: Any) -> tuple[Any, ...]:
        parts = jnp.split(buffer, size)
        if buffer.dtype != dtype:
            parts = [jax.lax.bitcast_convert_type(p, dtype) for p in parts]
        return tuple(p.reshape(()) for p in parts) if scalar else tuple(parts)

    return jax.jit(split) if sharding is None else jax.jit(split, out_shardings=sharding)


def put_small(arrays: Sequence[Any], targets: Sequence[Any], pack: bool | None = None) -> dict[int, Any]:
    """The small numpy arrays of ``arrays`` bound for one device each (``targets[i]``:
    ``None`` for jax's default device, a device, or a sharding), placed there in packs (see
    :func:`device_put`): ``{index: jax.Array}``. The others are left to the caller.

    >>> put_small([], [])
    {}
    """
    import jax
    import numpy as np

    found: dict[Any, list[int]] = {}  # (one pass over the leaves, cheap; each kind judged once)
    places: dict[int, Any] = {}
    if pack is not False:
        for i, (x, target) in enumerate(zip(arrays, targets)):
            if type(x) is np.ndarray:
                found.setdefault((id(target), x.dtype, x.shape), []).append(i)
                places[id(target)] = target
    kinds: dict[Any, list[int]] = {}
    for (place, dtype, shape), members in found.items():
        target, size = places[place], math.prod(shape) * dtype.itemsize
        if not (target is None or isinstance(target, (jax.Device, jax.sharding.Sharding))):
            continue  # (a memory space, a layout: jax.device_put's own)
        device = _bound(target)
        if device is None or (pack is None and device.platform not in PACKED_PLATFORMS):
            continue
        if target is not None and not _default_memory(target, device):
            continue
        if not (0 < size <= SMALL_BYTES and _held(dtype) and _exact(dtype, device.platform)):
            continue
        kinds.setdefault((target, dtype, shape), []).extend(members)
    out: dict[int, Any] = {}
    held = 0
    for (target, dtype, shape), members in _packs(kinds, "put"):
        parts = [arrays[i] for i in members]
        host = np.concatenate(parts) if shape else np.stack(parts)
        bits = _bits_of(dtype)
        host = host if bits is None else host.view(bits)
        if target is None:  # (uncommitted, as jax.device_put(x) leaves it)
            buffer, sharding = jax.device_put(host), None
        elif isinstance(target, jax.Device):
            buffer, sharding = jax.device_put(host, target), None
        else:
            buffer, sharding = jax.device_put(host, _bound(target)), target
        placed = _splitter(len(members), not shape, dtype, sharding)(buffer)
        out.update(zip(members, placed))
        held += host.nbytes
        if held > CHUNK_BYTES:  # (the buffers before are split and freed before more are put)
            placed[-1].block_until_ready()
            held = 0
    return out


def device_get(tree: Any, *, pack: bool | None = None) -> Any:
    """``tree`` with its jax arrays as numpy arrays, as ``jax.device_get`` gives them, with the
    small arrays moved in packs: the fast form for trees of many leaves on an accelerator.

    >>> import jax.numpy as jnp
    >>> host = device_get({'w': jnp.ones((2, 3)), 'b': jnp.zeros(3), 'step': 7})
    >>> type(host['w']).__name__, host['w'].shape, host['b'].tolist(), host['step']
    ('ndarray', (2, 3), [0.0, 0.0, 0.0], 7)

    Arrays of at most 1 MiB on one device pack with the others of their device, dtype and
    shape, at least 4 of them: on the device one compiled function concatenates up to 256 of
    them into a buffer, which crosses to the host in one transfer, where each array is a view
    into it (bit for bit what ``jax.device_get`` gives, read-only as its arrays are; an array
    kept alone keeps its buffer, at most 256 MiB, alive). Packed buffers take at most 256 MiB
    of device memory at once, freed as they land. Compiling is once per signature (about 0.2 s
    each on a TPU v5e); one call compiles at most 4, the largest kinds first, and moves the
    others one by one until a later call. Floats cross as their bits. Larger arrays, arrays
    over several devices or in another memory than the device's own (``pinned_host``), typed
    PRNG keys, complex arrays, dtypes of less than a byte an element (int4, int2, float4),
    deleted arrays, other leaves and, off the CPU, floats narrower than 32 bits (bfloat16,
    float16, float8: a TPU's compiled ops quiet their NaNs and flush their subnormals, a
    bitcast too, so no pack of them is bit-exact) go to ``jax.device_get`` as they are (a
    deleted array raises its error there; a numpy scalar becomes a 0-d array).

    Args:
        tree: Any pytree.
        pack: ``None`` packs on accelerators (TPUs, GPUs), where a transfer costs about 0.1 ms
            (20,000 small arrays: 0.19 s instead of 1.9 s on a TPU v5e); not on the CPU, where
            a transfer is a copy in memory and the compiling a pack needs first outweighs what
            a one-off call gains. ``True`` packs on any platform (on the CPU, 20,000 small
            arrays once compiled: 0.05 s instead of 0.22 s); ``False`` never
            (``jax.device_get`` exactly).
    """
    import jax

    leaves, treedef, _ = flatten(tree)
    out = fetch_small(leaves, pack)
    rest = [i for i, (x, y) in enumerate(zip(out, leaves)) if x is y]
    for i, host in zip(rest, jax.device_get([out[i] for i in rest])):
        out[i] = host
    return treedef.unflatten(out)


def device_put(tree: Any, device: Any = None, *, pack: bool | None = None) -> Any:
    """``tree``'s arrays on devices, as ``jax.device_put`` places them, with the small numpy
    arrays moved in packs: the fast form for trees of many leaves on an accelerator.

    >>> import numpy as np
    >>> placed = device_put({'w': np.ones((2, 3), np.float32), 'b': np.zeros(3, np.float32)})
    >>> type(placed['w']).__name__, placed['w'].shape, placed['b'].dtype
    ('ArrayImpl', (2, 3), dtype('float32'))

    Numpy arrays of at most 1 MiB bound for one device pack with the others of their target,
    dtype and shape (as :func:`device_get` packs): one host buffer of up to 256 arrays crosses
    in one transfer and one compiled function splits it on the device, each array placed as
    ``jax.device_put`` places it (uncommitted for ``device=None``, committed to a device or a
    sharding otherwise); bit for bit its arrays. What :func:`device_get` does not pack, and
    arrays x64 being off would convert (float64, int64), go to ``jax.device_put`` as they are.

    Args:
        tree: A pytree of arrays (numpy arrays, scalars, jax arrays).
        device: ``None`` (jax's default device), a device, a sharding, or a tree of them (``None``
            leaves for the default device) whose structure is a prefix of ``tree``'s.
        pack: As :func:`device_get` takes it.

    Raises:
        treekit.StructureMismatchError: If ``device`` is a tree that is not a prefix of ``tree``.
    """
    import jax

    from treekit.ops import broadcast

    def is_target(x: Any) -> bool:
        return x is None or isinstance(x, (jax.Device, jax.sharding.Sharding))

    leaves, treedef, _ = flatten(tree)
    one = is_target(device)
    targets = [device] * len(leaves) if one else flatten(broadcast(device, tree, is_target, "device"), is_target)[0]
    out = list(leaves)
    done = put_small(leaves, targets, pack)
    for i, x in done.items():
        out[i] = x
    rest = [i for i in range(len(leaves)) if i not in done]
    if one:  # (one target for all: jax.device_put's fastest form)
        moved = jax.device_put([leaves[i] for i in rest], device)
    else:  # (None leaves: the default device, uncommitted; jax takes no None among its targets)
        anywhere = [i for i in rest if targets[i] is None]
        placed = [i for i in rest if targets[i] is not None]
        rest = anywhere + placed
        moved = jax.device_put([leaves[i] for i in anywhere]) + jax.device_put(
            [leaves[i] for i in placed], [targets[i] for i in placed]
        )
    for i, x in zip(rest, moved):
        out[i] = x
    return treedef.unflatten(out)

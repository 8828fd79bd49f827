"""Where a tree's arrays live (chex's asserts): all on the host, all on one kind of device, or
each sharded across given devices; every leaf that is elsewhere named by key path."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from treekit.checks._asserts import assert_tree_has_only_ndarrays
from treekit.core import LeafPaths, flatten, format_message

__all__ = ["assert_tree_is_on_device", "assert_tree_is_on_host", "assert_tree_is_sharded"]


def _sharded(x: Any) -> bool:
    """Whether the jax array ``x`` is split or spread over more than one device (chex's rule)."""
    return not x.sharding.is_fully_replicated or len(x.sharding.device_set) > 1


def _check(tree: Any, what: str, problem: Callable[[Any, Any], str | None]) -> None:
    """Raise, naming every array of ``tree`` for which ``problem(x, jax)`` says what is wrong."""
    __tracebackhide__ = True
    assert_tree_has_only_ndarrays(tree)
    jax = sys.modules.get("jax")
    leaves, treedef, _ = flatten(tree)
    paths = LeafPaths(tree, treedef)
    lines = []
    for i, x in enumerate(leaves):
        got = problem(x, jax if jax is not None and isinstance(x, jax.Array) else None)
        if got is not None:
            lines.append(format_message("tree", paths[i], what, got, None, None))
    if lines:
        n = len(lines)
        raise AssertionError(f"tree is not {what}: {n} {'leaf' if n == 1 else 'leaves'}\n" + "\n".join(lines))


def assert_tree_is_on_host(tree: Any, *, allow_cpu_device: bool = True, allow_sharded_arrays: bool = False) -> None:
    """Assert every leaf is a numpy array, or a jax array on the CPU (chex's ``assert_tree_is_on_host``).

    >>> import numpy as np
    >>> assert_tree_is_on_host({'w': np.ones(2)})

    Args:
        tree: A tree of arrays.
        allow_cpu_device: Let jax arrays on CPU devices pass.
        allow_sharded_arrays: Let jax arrays spread over several (CPU) devices pass.

    Raises:
        AssertionError: Naming every leaf that is not an array, or lives elsewhere.
    """
    __tracebackhide__ = True

    def problem(x: Any, jax: Any) -> str | None:
        if jax is None:
            return None
        where = f"on {sorted(map(str, x.sharding.device_set))}"
        if _sharded(x) and not allow_sharded_arrays:
            return f"sharded {where}"
        if not allow_cpu_device:
            return f"a jax array {where}"
        return None if all(d.platform == "cpu" for d in x.sharding.device_set) else f"a jax array {where}"

    _check(tree, "on the host", problem)


def assert_tree_is_on_device(tree: Any, *, platform: Sequence[str] | str = ("gpu", "tpu"), device: Any = None) -> None:
    """Assert every leaf is a jax array on one device of ``platform`` (or on ``device``), not
    sharded (chex's ``assert_tree_is_on_device``).

    >>> import jax
    >>> assert_tree_is_on_device({'w': jax.numpy.ones(2)}, platform=jax.default_backend())

    Args:
        tree: A tree of arrays.
        platform: The allowed platforms (``'cpu'``, ``'gpu'``, ``'tpu'``).
        device: The one device every leaf must be on (its platform then is the one allowed).

    Raises:
        AssertionError: Naming every leaf that is no jax array, is sharded or lives elsewhere.
    """
    __tracebackhide__ = True
    platforms = (platform,) if isinstance(platform, str) else tuple(platform)
    if device is not None:
        platforms = (device.platform,)

    def problem(x: Any, jax: Any) -> str | None:
        if jax is None:
            return f"a {type(x).__name__}, not a jax array"
        devices = x.sharding.device_set
        if _sharded(x):
            return f"sharded on {sorted(map(str, devices))}"
        (on,) = devices
        if on.platform not in platforms or (device is not None and on != device):
            return f"on {on}"
        return None

    _check(tree, f"on {device if device is not None else ' or '.join(platforms)}", problem)


def assert_tree_is_sharded(tree: Any, *, devices: Sequence[Any]) -> None:
    """Assert every leaf is a jax array whose shards are on ``devices``, in that order (chex's
    ``assert_tree_is_sharded``).

    >>> import jax
    >>> x = jax.device_put(jax.numpy.ones(2))
    >>> try:
    ...     assert_tree_is_sharded({'w': x}, devices=jax.devices()[:1])
    ... except AssertionError as error:
    ...     print(str(error).splitlines()[1].split(', got ')[1].startswith('not sharded'))
    True

    Args:
        tree: A tree of arrays.
        devices: The devices of the shards, in the order of the arrays' addressable shards.

    Raises:
        AssertionError: Naming every leaf that is no jax array, is not sharded, or sharded
            across other devices.
    """
    __tracebackhide__ = True
    want = tuple(devices)

    def problem(x: Any, jax: Any) -> str | None:
        if jax is None:
            return f"a {type(x).__name__}, not a jax array"
        if not _sharded(x):
            return f"not sharded (on {next(iter(x.sharding.device_set))})"
        shards = tuple(shard.device for shard in x.addressable_shards)
        return None if shards == want else f"sharded across {[str(d) for d in shards]}"

    _check(tree, "sharded across the devices", problem)

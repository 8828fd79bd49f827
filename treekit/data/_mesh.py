"""Batches onto devices: each batch's leaves become jax arrays placed by sharding rules
(the leading axis split over a mesh axis by default), made ready ahead in one background
thread; with several processes, each gives its local rows of one global batch."""

from __future__ import annotations

import queue
import threading
from typing import Any

from treekit.core import flatten, keystr

__all__ = ["OnMesh", "to_mesh"]

_END: Any = object()


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class OnMesh:
    """Batches as jax arrays on a mesh: see :func:`treekit.data.to_mesh`. An iterator with a
    state; a context manager that stops its thread.

    >>> import numpy as np
    >>> from treekit.data import batches, from_iterable, to_mesh
    >>> with to_mesh(batches(from_iterable([{'x': np.int64(i)} for i in range(5)]), 2)) as it:
    ...     first = next(it)
    >>> first['x'].shape, it.get_state()['batches']
    ((2,), 1)
    """

    def __init__(self, batches: Any, mesh: Any, *, rules: Any, axis: str, prefetch: int) -> None:
        if not callable(getattr(batches, "get_state", None)):
            raise TypeError(f"batches: expected treekit.data.batches(...), got {type(batches).__name__}")
        if type(prefetch) is not int or prefetch < 0:
            raise ValueError(f"prefetch: expected an int >= 0 (batches made ready ahead), got {prefetch!r}")
        self.batches, self.mesh, self.rules, self.axis, self.prefetch = batches, mesh, rules, axis, prefetch
        self.state = batches.get_state()
        self._shardings: Any = None
        self._thread: threading.Thread | None = None
        self._queue: queue.Queue[Any] = queue.Queue(max(prefetch, 1))
        self._stop = threading.Event()
        self._group: Any = None  # (a mesh across processes: how they agree, batch by batch; False: none)
        self._turn = 0  # batches agreed on

    # -- placing one batch ----------------------------------------------------------------
    def _shardings_of(self, leaves: list[Any], batch: Any) -> list[Any]:
        """One sharding per leaf, computed for the first batch and kept."""
        import jax
        from jax.sharding import NamedSharding, SingleDeviceSharding

        PartitionSpec: Any = jax.sharding.PartitionSpec

        if self.mesh is None:
            return [SingleDeviceSharding(jax.devices()[0])] * len(leaves)
        if self.rules is None:
            return [NamedSharding(self.mesh, PartitionSpec(self.axis)) for _ in leaves]
        from treekit.sharding import match_rules

        specs = flatten(match_rules(batch, self.rules, default=PartitionSpec(self.axis)))[0]
        return [NamedSharding(self.mesh, spec) for spec in specs]

    def place(self, batch: Any) -> Any:
        """``batch`` as jax arrays on the mesh (the global batch when there are processes)."""
        import jax

        leaves, treedef, _ = flatten(batch)
        if self._shardings is None:
            self._shardings = self._shardings_of(leaves, batch)
            _warn_narrowed(batch)
        if jax.process_count() > 1:
            make: Any = jax.make_array_from_process_local_data
            placed = [make(s, x) for s, x in zip(self._shardings, leaves)]
        else:
            placed = jax.device_put(leaves, self._shardings)
        return treedef.unflatten(placed)

    # -- the thread that makes batches ready ahead ------------------------------------------
    def _next(self) -> Any:
        """The next batch of ``batches``, once every process has its own (several processes);
        ``StopIteration`` once none has.

        Raises:
            ValueError: In every process, where some processes have a batch and others not
                (a hang in the step's collectives otherwise).
        """
        try:
            batch = next(self.batches)
        except StopIteration:
            self._agree(False)
            raise
        self._agree(True)
        return batch

    def _agree(self, has: bool) -> None:
        """With several processes: a barrier per batch through ``jax.distributed``'s key-value
        store, a process out of batches saying so before it comes."""
        import jax

        if self._group is None:
            me = jax.process_index()
            if self.mesh is None or all(d.process_index == me for d in self.mesh.devices.flat):
                self._group = False  # (no global arrays: nothing to agree on)
            else:
                from treekit.checkpoint import Group

                self._group = Group("treekit.data.to_mesh", kind="to_mesh")
        if self._group is False:
            return
        group, turn = self._group, self._turn
        self._turn += 1
        if not has:
            group.client.key_value_set(f"{group.prefix}/ended/{turn}/{group.me}", "1")
        group.barrier(f"batch {turn}", noted=False)
        listed = group.client.key_value_dir_get(f"{group.prefix}/ended/{turn}/")
        ended = sorted(int(key.rsplit("/", 1)[-1]) for key, _ in listed)
        if ended and len(ended) < group.count:
            others = [p for p in range(group.count) if p not in ended]
            number = self.batches.get_state().get("batches", turn + 1) - has  # (counted from 0)
            raise ValueError(
                f"to_mesh: batch {number}: expected every process to have one, got "
                f"none in processes {ended} and one in processes {others} (their shares give different numbers "
                "of batches: give every process as many rows, or end each epoch at the same batch in all)"
            )

    def _work(self) -> None:
        try:
            while True:
                try:
                    batch = self._next()
                except StopIteration:
                    break
                item = (self.place(batch), self.batches.get_state())
                while not self._stop.is_set():
                    try:
                        self._queue.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if self._stop.is_set():
                    return
            self._queue.put(_END)
        except BaseException as error:  # re-raised at the caller's next()
            self._queue.put(_Failed(error))

    def __iter__(self) -> OnMesh:
        return self

    def __next__(self) -> Any:
        if self.prefetch == 0:
            batch = self._next()
            placed = self.place(batch)
            self.state = self.batches.get_state()
            return placed
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._work, name="treekit-prefetch", daemon=True)
            self._thread.start()
        item = self._queue.get()
        if item is _END:
            self._queue.put(_END)  # (every later next() ends too)
            raise StopIteration
        if isinstance(item, _Failed):
            self._queue.put(item)
            raise item.error
        placed, self.state = item
        return placed

    def get_state(self) -> dict[str, Any]:
        """The state of the batches handed out (not of those made ready ahead): JSON-able."""
        return dict(self.state)

    def set_state(self, state: dict[str, Any]) -> None:
        """Go on from ``state``: the thread stops, and the next batch is the one after it."""
        self.close()
        self.batches.set_state(state)
        self.state = self.batches.get_state()

    def close(self) -> None:
        """Stop the thread that makes batches ready (the batches after it are read again)."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            while thread.is_alive():
                try:
                    self._queue.get(timeout=0.1)
                except queue.Empty:
                    pass
            thread.join()
            self._queue = queue.Queue(max(self.prefetch, 1))
            self.batches.set_state(self.state)  # what the thread read ahead is read again

    def __enter__(self) -> OnMesh:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _warn_narrowed(batch: Any) -> None:
    """Warn, naming them, where jax (its x64 off) makes leaves of 64-bit dtypes 32-bit."""
    import warnings

    import jax

    leaves, _, paths = flatten(batch, with_path=True)
    assert paths is not None
    narrowed = []
    for path, x in zip(paths, leaves):
        dtype = getattr(x, "dtype", None)
        if dtype is not None and jax.dtypes.canonicalize_dtype(dtype) != dtype:
            narrowed.append(f"batch{keystr(path)} {dtype} -> {jax.dtypes.canonicalize_dtype(dtype)}")
    if narrowed:
        shown = ", ".join(narrowed[:5]) + (f" and {len(narrowed) - 5} more" if len(narrowed) > 5 else "")
        warnings.warn(
            f"to_mesh: jax's x64 is off, so on the devices {shown} (jax.config.update('jax_enable_x64', True) "
            "keeps 64 bits; a spec or a cast of the source's column makes the narrowing yours)",
            stacklevel=4,
        )


def to_mesh(batches: Any, mesh: Any = None, *, rules: Any = None, axis: str = "data", prefetch: int = 2) -> OnMesh:
    """Each batch as jax arrays placed on ``mesh``, made ready ``prefetch`` batches ahead.

    >>> import jax
    >>> import numpy as np
    >>> from treekit.data import batches, from_iterable
    >>> rows = [{'x': np.float32(i)} for i in range(8)]
    >>> with to_mesh(batches(from_iterable(rows), 4)) as it:
    ...     [isinstance(b['x'], jax.Array) for b in it], it.get_state()['batches']
    ([True, True], 2)

    Args:
        batches: ``treekit.data.batches(...)``.
        mesh: A ``jax.sharding.Mesh``; ``None`` puts every batch on the first device.
        rules: ``(pattern, spec)`` rules by key path, as :func:`treekit.sharding.match_rules`
            takes them; leaves no rule matches get ``PartitionSpec(axis)``. By default every
            leaf is split along its leading (batch) axis over ``axis`` and replicated over the
            mesh's other axes. The shardings are computed once, for the first batch.
        axis: The mesh axis the batch dim is split over.
        prefetch: Batches made ready ahead in one background thread (0: none, in the caller's
            thread). An error there is raised at the caller's next ``next()``.

    Returns:
        An iterator of batches of jax arrays, with ``get_state()``, ``set_state()`` and
        ``close()``; a context manager.

    With several processes (``jax.distributed``), each process's batches are its local rows and
    every leaf becomes one global array (``jax.make_array_from_process_local_data``). Before a
    batch is handed on, the processes meet at a barrier through ``jax.distributed``'s key-value
    store (in the prefetching thread, ahead of the step): where some have a batch and others
    none (their shares give different numbers of batches), every process raises a
    ``ValueError`` at that batch, naming the processes, instead of the step's collectives
    hanging. A process that stops reading makes the others' ``next()`` raise a
    ``TimeoutError`` after ``TREEKIT_BARRIER_TIMEOUT_S`` seconds (600).

    jax keeps 32-bit arrays unless its x64 is on: a batch leaf of a 64-bit dtype (int64, a
    ``ClassLabel``'s; float64) becomes int32 or float32 on the devices, and ``to_mesh`` warns
    once, at the first batch, naming those leaves.

    The state (:meth:`OnMesh.get_state`) counts the batches handed to the caller, not those made
    ready ahead: ``set_state`` on a fresh pipeline goes on with exactly the next batch.
    ``close()``, or leaving a ``with`` block, stops the thread.
    """
    return OnMesh(batches, mesh, rules=rules, axis=axis, prefetch=prefetch)

"""The processes of one ``jax.distributed`` job agreeing on a checkpoint: barriers and exchanges
through the distributed runtime's key-value store, each with a timeout that names the processes
that did not come. Never device collectives, so a background thread may run them beside the
training step (an async save), and a process that died is named, not waited for.

Every process makes the same together-saves in the same order (each call of ``save`` on a tree
with arrays across processes, in every process), so a count of them names each one alike in
every process with nothing exchanged. Counts are kept by kind: a manager's saves (written in
its thread, one at a time) count under its own, so a ``treekit.save`` made meanwhile in another
thread cannot take their numbers in another order in another process.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

from treekit.core import flatten, keystr

__all__ = ["Group", "across", "counted_as", "timeout_s"]

_made: dict[str, int] = {}  # groups this process has made, by kind
_lock = threading.Lock()
_counting = threading.local()  # .kind: the kind this thread's groups count under, where not "save"


@contextlib.contextmanager
def counted_as(kind: str) -> Iterator[None]:
    """The groups this thread makes in the block (its saves' too) count under ``kind``."""
    before = getattr(_counting, "kind", None)
    _counting.kind = kind
    try:
        yield
    finally:
        _counting.kind = before


def timeout_s() -> float:
    """How long a process waits for the others at a barrier: ``TREEKIT_BARRIER_TIMEOUT_S``
    seconds, 600 by default (a save waits for the slowest process's step too).

    >>> timeout_s() > 0
    True
    """
    raw = os.environ.get("TREEKIT_BARRIER_TIMEOUT_S", "600")
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(f"TREEKIT_BARRIER_TIMEOUT_S: expected a number of seconds > 0, got {raw!r:.40}")
    return value


class Group:
    """The processes of this job, for one together-save of ``what`` (named in messages), or
    another ``kind`` of work they do together (``to_mesh``'s pipelines count apart, so that a
    pipeline one process makes alone does not shift the saves' names).

    Its keys live under ``treekit/<kind>/<n>/`` (``n``: the count of groups of that kind this
    process has made); :meth:`close`, after the last barrier, deletes them (process 0)."""

    def __init__(self, what: str, kind: str | None = None) -> None:
        import jax
        from jax._src import distributed

        self.what = what
        self.me, self.count = jax.process_index(), jax.process_count()
        self.client: Any = distributed.global_state.client
        if self.client is None:  # (several processes, but not through jax.distributed.initialize)
            raise RuntimeError(f"{what}: expected jax.distributed.initialize() before saving arrays across processes")
        kind = kind or getattr(_counting, "kind", None) or "save"
        with _lock:
            _made[kind] = _made.get(kind, 0) + 1
            self.prefix = f"treekit/{kind}/{_made[kind]}"
        self.tag = hashlib.sha256(f"{what} {self.prefix}".encode()).hexdigest()[:16]  # (temporary files' names)

    def exchange(self, name: str, value: bytes) -> list[bytes]:
        """Every process's ``value`` for ``name``, in process order."""
        self.client.key_value_set_bytes(f"{self.prefix}/{name}/{self.me}", value)
        got = []
        for p in range(self.count):
            try:
                got.append(self.client.blocking_key_value_get_bytes(f"{self.prefix}/{name}/{p}", self._ms()))
            except Exception as exc:
                raise self._late(name, [p], exc) from None
        return got

    def agree(self, name: str, value: bytes) -> list[bytes] | None:
        """``None`` where every process holds the same ``value``; else every process's (the
        digests are exchanged first, so the values travel only when they differ)."""
        digests = self.exchange(f"{name}.digest", hashlib.sha256(value).digest())
        if len(set(digests)) == 1:
            return None
        return self.exchange(name, value)

    def barrier(self, name: str, noted: bool = True) -> None:
        """Wait until every process has come here; ``noted``: each process leaves a key saying it
        came, so that a timeout names the processes that did not (``False`` for a barrier made
        again and again, whose keys would pile up: a timeout then names none)."""
        if noted:
            self.client.key_value_set(f"{self.prefix}/{name}.came/{self.me}", "1")
        try:
            self.client.wait_at_barrier(f"{self.prefix}/{name}", self._ms())
        except Exception as exc:
            if not noted:
                raise self._late(name, [], exc) from None
            try:
                listed = self.client.key_value_dir_get(f"{self.prefix}/{name}.came/")
                came = {int(key.rsplit("/", 1)[-1]) for key, _ in listed}
            except Exception:  # (the store itself is gone: the job is ending)
                came = {self.me}
            raise self._late(name, [p for p in range(self.count) if p not in came], exc) from None

    def close(self) -> None:
        """Delete this save's keys (process 0, after the last barrier: every process is past
        them). A save that failed leaves them (a few bytes, gone with the job): a process may
        still be reading them."""
        if self.me == 0:
            try:
                self.client.key_value_delete(f"{self.prefix}/")
            except Exception:  # (left in the store: a few bytes, gone with the job)
                pass

    def _ms(self) -> int:
        return max(1, int(timeout_s() * 1000))

    def _late(self, name: str, missing: list[int], exc: BaseException) -> TimeoutError:
        who = f"process {missing[0]}" if len(missing) == 1 else f"processes {missing}" if missing else "some process"
        return TimeoutError(
            f"{self.what}: expected every process at {name!r} within {timeout_s():g} s, but {who} did not come "
            f"(ended, or not doing the same work; TREEKIT_BARRIER_TIMEOUT_S sets the wait): "
            f"{type(exc).__name__}: {str(exc)[:200]}"
        )


def across(tree: Any, what: str) -> Group | None:
    """The :class:`Group` of a together-save of ``tree`` (one holding arrays across processes),
    once every process has said its tree has the same key paths and the same such arrays
    (dtypes, shapes; its other leaves are its own); ``None`` for a tree that holds none (or a
    job of one process).

    Raises:
        ValueError: In every process, before anything is written, if their trees differ so:
            naming the first key path where they do, and what each process holds there.
    """
    jax = sys.modules.get("jax")
    if jax is None or jax.process_count() == 1:
        return None
    leaves, _, paths = flatten(tree, with_path=True)
    assert paths is not None
    if not any(map(_spans, leaves)):
        return None
    told_as = [f"{keystr(p)}\t{f'{x.dtype}{list(x.shape)}' if _spans(x) else 'own'}" for p, x in zip(paths, leaves)]
    group = Group(what)
    told = group.agree("tree", "\n".join(told_as).encode("utf-8"))
    if told is not None:  # (its keys are left: another process may still be reading them)
        raise ValueError(_first_difference(what, [t.decode("utf-8").split("\n") for t in told]))
    return group


def _spans(x: Any) -> bool:
    return getattr(x, "is_fully_addressable", True) is False


def _first_difference(what: str, lists: list[list[str]]) -> str:
    """Where the processes' lists of leaves (``"<keystr>\t<dtype>[shape]"`` for an array across
    processes, ``"<keystr>\town"`` for another leaf) first differ, each process's entry there."""
    at = 0
    while all(at < len(entries) for entries in lists) and len({entries[at] for entries in lists}) == 1:
        at += 1
    seen = [entries[at] if at < len(entries) else None for entries in lists]
    first = next(entry for entry in seen if entry is not None)
    path = first.split("\t")[0]
    held = ", ".join(
        f"process {p}: {'nothing more' if e is None else 'tree' + e.replace(chr(9), ' ')}" for p, e in enumerate(seen)
    )
    return (
        f"{what}: tree{path}: expected the same key paths in every process, and the same dtypes and shapes of "
        f"the arrays across processes ('own': a value of the process's own), got {held}"
    )

"""A checkpoint manager for a training loop: steps saved in folders of their own, each visible
only once complete, kept by rules (the newest, every n-th, the best by a metric), found again
(latest, best), written in a background thread after a snapshot off the devices; on a local disk
(a step committed by a rename) or in an object store (committed by its ``step.json``, written last)."""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import sys
import threading
import time
import weakref
from collections.abc import Mapping
from typing import Any

from treekit.checkpoint._io import load, save
from treekit.checkpoint._lookup import metadata
from treekit.checkpoint._processes import Group, counted_as
from treekit.checkpoint._shards import OnHost
from treekit.core import flatten, is_key_dtype, keystr
from treekit.files import (
    Where,
    fsync_folder,
    glob,
    listdir,
    locate,
    makedirs,
    read_bytes,
    remove,
    remove_tree,
    write_bytes,
)
from treekit.sharding import fetch_small

__all__ = ["CheckpointManager"]

_STEP = re.compile(r"step_(\d{8,})")
_TEMP = re.compile(r"\.treekit-step_(\d{8,})\.(tmp|old)")  # a step being written, or deleted
_TREE, _INFO = "tree.safetensors", "step.json"
_OWN = "process_{:05d}.safetensors"  # a process's own values (not process 0's) of a step saved together
_WRITER = "treekit.CheckpointManager"
_NO_DEFAULT: Any = object()  # (restore's default: none given)
_MAX_INFO = 1 << 24  # bytes: a step.json larger than this is no manager's


def _snapshot(leaves: list[Any]) -> list[Any]:
    """``leaves`` with every array copied to the host: the caller may then change or donate its
    arrays. Small device arrays cross in packs (their host arrays are new buffers of their
    own); all the other device-to-host copies are started before the first is awaited."""
    import numpy as np

    packed = fetch_small(leaves)
    for x in packed:
        if getattr(x, "is_fully_addressable", True) is False:
            for shard in x.addressable_shards:
                shard.data.copy_to_host_async()
        elif hasattr(x, "copy_to_host_async"):
            x.copy_to_host_async()

    def copy(x: Any) -> Any:
        if isinstance(x, np.generic):  # (immutable: a numpy scalar stays one)
            return x
        if isinstance(x, np.ndarray):
            return np.array(x, copy=True)
        if getattr(x, "is_fully_addressable", True) is False:  # (across processes: this process's shards)
            return OnHost(x)
        if hasattr(x, "copy_to_host_async"):  # a jax.Array
            if is_key_dtype(x.dtype):  # a typed PRNG key: a copy of its data, made a key again
                import jax

                wrap: Any = jax.random.wrap_key_data
                return wrap(np.asarray(jax.random.key_data(x)), impl=jax.random.key_impl(x))
            return np.asarray(x)
        return x

    return [copy(x) if x is y else x for x, y in zip(packed, leaves)]


class CheckpointManager:
    """Steps of a training run saved under ``directory``, kept by rules, restored by number.

    >>> import numpy as np, tempfile
    >>> with CheckpointManager(tempfile.mkdtemp(), keep=2) as manager:
    ...     for step in range(4):
    ...         _ = manager.save(step, {'w': np.full(3, step, np.float32), 'step': step})
    ...     manager.wait()
    ...     manager.steps(), manager.latest_step(), manager.restore()['w'].tolist()
    ([2, 3], 3, [3.0, 3.0, 3.0])

    Each step is a folder ``step_00000012`` holding ``tree.safetensors`` (:func:`treekit.save`'s
    file) and ``step.json`` (the step, its metrics, when it was saved). On a local disk it is
    written under a temporary name, its files and the folder fsynced, then renamed: :meth:`steps`
    never lists a partial step, and a save killed half-way leaves the steps before it as they
    were; opening a manager removes what killed saves left. Old steps are deleted only after the
    new one is complete, and only steps this manager's kind wrote (with its ``step.json``).

    In an object store (``directory`` a URL: ``gs://bucket/run``, ``s3://bucket/run``), which
    has no rename, a step is written straight into its folder and committed by its
    ``step.json``, uploaded last: only steps with one are listed. Deleting a step removes its
    ``step.json`` first. A folder without one is a save that did not finish, or one still being
    written: opening a manager (and each commit) removes those below the newest committed step,
    which no live writer can be writing (a manager commits its steps in order, one at a time);
    one above it is left until a save of that step replaces it (docs/cloud.md).

    Args:
        directory: The folder of the steps (made if missing), or its URL.
        keep: How many of the newest steps to keep (``None``: all).
        keep_every: Also keep every step that is a multiple of this.
        best: A metric's name: also keep the ``keep`` best steps by ``metrics[best]``.
        mode: ``'min'`` or ``'max'``: which values of ``best`` are better.
        save_every: :meth:`save` saves only steps that are multiples of this (unless forced).
        async_save: Write in a background thread: :meth:`save` returns once the tree's arrays
            are copied to the host.
        filesystem: The pyarrow or fsspec filesystem ``directory`` is on (:func:`treekit.save`'s).
        storage_options: Options for the filesystem a URL names (:func:`treekit.save`'s).

    Raises:
        ValueError: For a bad argument.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        keep: int | None = 3,
        keep_every: int | None = None,
        best: str | None = None,
        mode: str = "min",
        save_every: int | None = None,
        async_save: bool = True,
        filesystem: Any = None,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        for name, value in (("keep", keep), ("keep_every", keep_every), ("save_every", save_every)):
            if value is not None and (type(value) is not int or value < 1):
                raise ValueError(f"{name}: expected an int >= 1 or None, got {value!r}")
        if mode not in ("min", "max"):
            raise ValueError(f"mode: expected 'min' or 'max', got {mode!r}")
        where = locate(directory, filesystem, storage_options, "directory")
        self._where = Where(os.path.abspath(where.path), None, os.path.abspath(where.path)) if where.local else where
        self.directory = str(self._where)
        self.keep, self.keep_every, self.best, self.mode = keep, keep_every, best, mode
        self.save_every, self.async_save = save_every, async_save
        self._listed: list[int] | None = None  # the steps the last listing found (its commits since)
        makedirs(self._where)
        jax = sys.modules.get("jax")  # (with several processes, process 0 alone cleans and deletes)
        if jax is None or jax.process_index() == 0:
            self._clean()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._lock = threading.Lock()
        atexit.register(_wait_at_exit, weakref.ref(self))

    def _clean(self) -> None:
        """Remove what saves that were killed left: locally their temporary folders; in an
        object store the uncommitted step folders below the newest committed step."""
        if self._where.local:
            for name in listdir(self._where):
                if _TEMP.fullmatch(name):
                    shutil.rmtree(os.path.join(self.directory, name), ignore_errors=True)
            return
        steps = self.steps()
        for name in listdir(self._where) if steps else ():
            match = _STEP.fullmatch(name)
            if match and int(match.group(1)) < steps[-1] and int(match.group(1)) not in steps:
                remove_tree(self._where.join(name))

    # -- finding steps ------------------------------------------------------------------------
    def _folder(self, step: int) -> Where:
        return self._where.join(f"step_{step:08d}")

    def _info(self, step: int) -> dict[str, Any]:
        info: dict[str, Any] = json.loads(read_bytes(self._folder(step).join(_INFO), _MAX_INFO))
        return info

    def steps(self) -> list[int]:
        """The complete steps, oldest first (asked of the store anew each time)."""
        found = []
        for name in glob(self._where, f"step_*/{_INFO}"):
            match = _STEP.fullmatch(name.split("/")[0])
            if match:
                found.append(int(match.group(1)))
        self._listed = sorted(found)
        return list(self._listed)

    def latest_step(self) -> int | None:
        """The newest complete step, or ``None``."""
        steps = self.steps()
        return steps[-1] if steps else None

    def best_step(self) -> int | None:
        """The complete step with the best ``metrics[best]``, or ``None`` (no ``best``, no step)."""
        ranked = self._ranked(self.steps())
        return ranked[0] if ranked else None

    def _ranked(self, steps: list[int]) -> list[int]:
        """``steps`` that have the ``best`` metric, best first (ties: the newer first)."""
        if self.best is None:
            return []
        scored = []
        for step in steps:
            value = self._info(step).get("metrics", {}).get(self.best)
            if isinstance(value, (int, float)):
                scored.append((value if self.mode == "min" else -value, -step))
        return [-step for _, step in sorted(scored)]

    def metadata(self, step: int) -> dict[str, Any]:
        """Step ``step``'s record: ``{'step', 'metrics', 'saved_at', 'tree'}``, ``tree`` with
        :class:`treekit.ShapeDtype` leaves for its arrays (from the file's header alone)."""
        self.wait()
        info = self._info(step)
        return {**info, "tree": metadata(self._folder(step).join(_TREE))}

    # -- saving and restoring --------------------------------------------------------------
    def save(self, step: int, tree: Any, *, metrics: Mapping[str, Any] | None = None, force: bool = False) -> bool:
        """Save ``tree`` as step ``step``; ``False`` where ``save_every`` skips it.

        With ``async_save``, returns once ``tree``'s arrays are copied to the host (the caller
        may change or donate them then) and writes in a background thread; the next
        ``save``, ``wait``, ``restore`` or ``close`` waits for it and raises its error.

        A tree holding arrays sharded across processes (``jax.distributed``) is saved by every
        process at once, each writing its own shards and its own values of the other leaves
        (:meth:`restore` gives each process its own), and committed by process 0; async too
        (the barriers go through the distributed runtime's key-value store, each with a
        timeout: ``TREEKIT_BARRIER_TIMEOUT_S``, 600 s). Every process must call ``save`` with
        the same steps, in the same order, with trees of the same key paths. In an object
        store, process 0 puts the step's file together from the pieces every process uploads
        (docs/cloud.md, "Many processes").

        Raises:
            ValueError: For a step that is saved already, or not an int >= 0.
            TypeError: For metrics that JSON cannot hold (a numpy scalar: pass ``float(loss)``).
        """
        if type(step) is not int or step < 0:
            raise ValueError(f"step: expected an int >= 0, got {step!r}")
        if not force and self.save_every is not None and step % self.save_every:
            return False
        self.wait()
        # (in an object store, a listing is a round trip: the loop waits for none; the last one,
        # made after the last commit in the background, stands for the steps this run has)
        listed = self._listed if not self._where.local and self._listed is not None else self.steps()
        if step in listed:
            raise ValueError(f"step: expected a step not saved yet, got {step} ({self._folder(step)} exists)")
        info = {"step": step, "metrics": dict(metrics or {}), "saved_at": time.time(), "written_by": _WRITER}
        try:
            json.dumps(info)  # (in the caller's thread, before anything is written)
        except (TypeError, ValueError) as exc:
            expected = "a dict of JSON values (numbers, strings, lists)"
            raise TypeError(f"metrics: expected {expected}, got {metrics!r:.80}") from exc
        leaves, treedef, _ = flatten(tree)
        write = self._write if all(getattr(x, "is_fully_addressable", True) for x in leaves) else self._write_together
        if self.async_save:
            host = treedef.unflatten(_snapshot(leaves))
            args = (write, step, host, info)
            self._thread = threading.Thread(target=self._write_noted, args=args, name="treekit-save")
            self._thread.start()
        else:
            write(step, tree, info)
        return True

    def _write_noted(self, write: Any, step: int, tree: Any, info: dict[str, Any]) -> None:
        try:
            write(step, tree, info)
        except BaseException as error:  # raised at the caller's next save, wait, restore or close
            self._error = error

    def _temp(self, step: int, fresh: bool) -> str:  # (a local folder's)
        """The temporary folder step ``step`` is written in; ``fresh``: made anew, empty, now."""
        temp = os.path.join(self.directory, f".treekit-step_{step:08d}.tmp")
        if fresh:
            shutil.rmtree(temp, ignore_errors=True)
            os.makedirs(temp)
        return temp

    def _write(self, step: int, tree: Any, info: dict[str, Any]) -> None:
        if not self._where.local:  # into its folder, committed by its step.json written last
            remove_tree(self._folder(step))  # (what a save of this step that did not finish left)
            save(self._folder(step).join(_TREE), tree)
            self._commit_remote(step, info)
            return
        temp = self._temp(step, fresh=True)
        try:
            save(os.path.join(temp, _TREE), tree)
            self._commit(step, temp, info)
        except BaseException:
            shutil.rmtree(temp, ignore_errors=True)
            raise

    def _commit(self, step: int, temp: str, info: dict[str, Any]) -> None:
        """The folder ``temp``, holding the tree's file, made step ``step``: its record written,
        everything synced, renamed; then the rules applied."""
        with open(os.path.join(temp, _INFO), "w", encoding="utf-8") as f:
            json.dump(info, f)
            f.flush()
            os.fsync(f.fileno())
        fsync_folder(temp)
        os.rename(temp, self._folder(step).path)
        fsync_folder(self.directory)
        self._retain()

    def _commit_remote(self, step: int, info: dict[str, Any]) -> None:
        """Step ``step``, its tree uploaded, committed by its ``step.json``; then the rules applied."""
        write_bytes(self._folder(step).join(_INFO), json.dumps(info).encode("utf-8"))
        self._retain()

    def _write_together(self, step: int, tree: Any, info: dict[str, Any]) -> None:
        """Every process writes its shards of step ``step`` into one temporary folder (the same
        name in all), and each but process 0 its own values of the other leaves into a file of
        its own there; then process 0 commits it (renames, applies the rules). Barriers between,
        through the distributed runtime's key-value store (so this runs in a background thread
        too). In an object store: into the step's folder (process 0 puts the file together from
        the pieces the others upload), committed by process 0's ``step.json``."""
        with counted_as(f"CheckpointManager {self.directory}"):  # (its saves, one at a time, apart from others)
            self._write_counted(step, tree, info)

    def _write_counted(self, step: int, tree: Any, info: dict[str, Any]) -> None:
        group = Group(f"treekit.CheckpointManager {self.directory} step {step}")
        first = group.me == 0
        if not self._where.local:
            if first:
                remove_tree(self._folder(step))  # (what a save of this step that did not finish left)
            group.barrier("made")
            self._write_shares(self._folder(step), tree, group.me)
            group.barrier("written")
            if first:
                self._commit_remote(step, info)
        else:
            temp = self._temp(step, fresh=first)
            try:
                group.barrier("made")
                self._write_shares(locate(temp), tree, group.me)
                group.barrier("written")
                if first:
                    self._commit(step, temp, info)
            except BaseException:
                if first:
                    shutil.rmtree(temp, ignore_errors=True)
                raise
        group.barrier("committed")
        group.close()

    @staticmethod
    def _write_shares(folder: Where, tree: Any, me: int) -> None:
        """This process's part of a step saved together: its shards of the tree's file (the
        tree as process 0 holds it: :func:`treekit.save`'s barriers), and for every process
        but 0 its own values of the leaves that are not arrays across processes, by key path."""
        save(folder.join(_TREE), tree)
        if me:
            leaves, _, paths = flatten(tree, with_path=True)
            assert paths is not None
            own = {keystr(p): x for p, x in zip(paths, leaves) if getattr(x, "is_fully_addressable", True)}
            save(folder.join(_OWN.format(me)), own, names="keystr")

    def _retain(self) -> None:
        """Delete the steps the rules do not keep (only complete steps a manager wrote); in an
        object store, then what saves that did not finish left below the newest step."""
        steps = self.steps()
        kept = set(steps if self.keep is None else steps[-self.keep :])
        if self.keep_every is not None:
            kept |= {s for s in steps if s % self.keep_every == 0}
        kept |= set(self._ranked(steps)[: self.keep])
        for step in steps:
            if step not in kept and self._info(step).get("written_by") == _WRITER:
                folder = self._folder(step)
                if not self._where.local:  # its step.json first: never listed half-deleted
                    remove(folder.join(_INFO))
                    remove_tree(folder)
                    continue
                # renamed first: a step is never listed half-deleted (a kill leaves the .old folder)
                old = os.path.join(self.directory, f".treekit-step_{step:08d}.old")
                os.rename(folder.path, old)
                shutil.rmtree(old, ignore_errors=True)
        if not self._where.local:
            self._clean()  # (its listing is the one save's check reads next)

    def wait(self) -> None:
        """Wait for the write in the background, if any; raise its error."""
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is not None:
                thread.join()
            error, self._error = self._error, None
        if error is not None:
            raise error

    def restore(
        self,
        step: int | None = None,
        *,
        like: Any = None,
        shardings: Any = None,
        rules: Any = None,
        mesh: Any = None,
        default: Any = _NO_DEFAULT,
    ) -> Any:
        """Step ``step``'s tree (the latest by default), as :func:`treekit.load` reads it.

        A step saved by several processes together (arrays across processes) holds the tree as
        process 0 had it and, for each other process, its own values of the leaves that are
        not arrays across processes (a loader's state, a step count, host arrays): process
        ``i`` gets its own values back beside the arrays. A process that saved no values of
        its own (a restore with more processes than the save had, or in one process) gets
        process 0's; files of processes beyond this job's are not read.

        Args:
            step: The step; ``None`` for the latest.
            like: A template to restore into (:func:`treekit.load`'s ``like``).
            shardings: Shardings to place the arrays with (:func:`treekit.load`'s).
            rules: With ``mesh``: sharding rules by key path (:func:`treekit.sharding.shardings`)
                for the saved tree's arrays; its other leaves stay as they are.
            mesh: The mesh ``rules`` place onto.
            default: With ``rules``: the spec of arrays no rule matches
                (:func:`treekit.sharding.shardings`'); without it, such an array is an error.

        Returns:
            The tree.

        Raises:
            FileNotFoundError: If there is no such step (or no step at all).
            treekit.sharding.ShardingError: For an array no rule matches (without ``default``)
                or whose spec does not fit it, every one named by key path.
        """
        self.wait()
        if step is None:
            step = self.latest_step()
            if step is None:
                raise FileNotFoundError(f"{self.directory}: expected a saved step, found none")
        elif step not in self.steps():
            raise FileNotFoundError(f"step: expected one of the saved steps {self.steps()}, got {step}")
        path = self._folder(step).join(_TREE)
        if rules is not None:
            if mesh is None:
                raise ValueError("rules: expected a mesh too (mesh=...)")
            shardings = _by_rules(metadata(path), mesh, rules, default)
        tree = load(path, like, shardings=shardings)
        jax = sys.modules.get("jax")
        me = jax.process_index() if jax is not None else 0
        if not me:
            return tree
        try:
            own = load(self._folder(step).join(_OWN.format(me)))
        except FileNotFoundError:  # (a step of one process, or of fewer processes than this job)
            return tree
        return _with_own(tree, own, me)

    def close(self) -> None:
        """Wait for the write in the background (and raise its error)."""
        self.wait()

    def __enter__(self) -> CheckpointManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _by_rules(saved: Any, mesh: Any, rules: Any, default: Any) -> Any:
    """The shardings ``rules`` give the arrays of ``saved`` (a file's metadata: ShapeDtype
    leaves for its arrays), ``None`` for its other leaves (they stay as they are)."""
    from treekit.core import ShapeDtype
    from treekit.sharding import shardings

    leaves, treedef, _ = flatten(saved)
    arrays = treedef.unflatten([x if isinstance(x, ShapeDtype) else None for x in leaves])
    if default is _NO_DEFAULT:
        return shardings(arrays, mesh, rules)
    return shardings(arrays, mesh, rules, default=default)


def _with_own(tree: Any, own: dict[str, Any], me: int) -> Any:
    """``tree`` (as process 0 saved it) with process ``me``'s own values of the leaves that are
    not arrays across processes (``own``, by key path) in their places."""
    leaves, treedef, paths = flatten(tree, with_path=True)
    assert paths is not None
    out, used = [], 0
    for path, leaf in zip(paths, leaves):
        key = keystr(path)
        if key in own:
            out.append(own[key])
            used += 1
        else:
            out.append(leaf)
    if used != len(own):  # (the processes agreed on their trees' key paths when they saved)
        extra = sorted(set(own) - {keystr(p) for p in paths})
        raise ValueError(f"process {me}'s own values: expected the key paths of the saved tree, got {extra[:3]}")
    return treedef.unflatten(out)


def _wait_at_exit(ref: weakref.ReferenceType[CheckpointManager]) -> None:
    """At exit, finish a write in the background: nothing saved is lost."""
    manager = ref()
    if manager is not None and manager._thread is not None:
        manager._thread.join()

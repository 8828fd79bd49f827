"""Functional reads and updates by key path: tree_get, tree_set, tree_at.

A key path is a tuple of key entries (as ``tree_flatten_with_path`` gives them) or its
``keystr`` string (``"[0]['weights']"``). Each step asks the node's registry entry for its
children and their key entries, so every registered type works, including ones whose
children only have a :class:`~treekit.FlattenedIndexKey` (written ``[<flat index 1>]`` or
``[1]``). Public through :mod:`treekit.params`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Union

from treekit._errors import StructureMismatchError
from treekit._keys import FlattenedIndexKey, KeyPath, SequenceKey
from treekit._registry import lookup
from treekit._treedef import _describe_value, _unflatten, describe

__all__ = ["Path", "tree_at", "tree_get", "tree_set"]

Path = Union[KeyPath, str]
"""A key path: a tuple of key entries, or the ``keystr`` of one (``"[0]['weights']"``)."""

_TOKEN = re.compile(r"\[[^\]]*\]|\.[^.\[]*")
_HINT = 'write key paths as keystr gives them, e.g. "[0][\'weights\']" or ".layers[1]"'
_Frame = tuple[Any, list[Any], Any, int]  # (ntype, children, node data, index of the child taken)


def _matches(entry: Any, key: Any) -> bool:
    if entry == key or str(entry) == str(key):
        return True
    return type(key) is FlattenedIndexKey and type(entry) is SequenceKey and entry.idx == key.key


def _string_match(rest: str, keys: Sequence[Any]) -> tuple[int, int]:
    """The child whose key's string starts ``rest`` (longest wins); ``(index, length)`` or ``(-1, 0)``."""
    best, best_len = -1, 0
    for i, key in enumerate(keys):
        texts = [str(key)]
        if type(key) is FlattenedIndexKey:
            texts.append(f"[{key.key}]")
        for text in texts:
            n = len(text)
            if n > best_len and rest.startswith(text) and (n == len(rest) or rest[n] in "[."):
                best, best_len = i, n
    return best, best_len


def _descend(tree: Any, path: Path, label: str) -> tuple[list[_Frame], Any]:
    """The nodes from the root to ``path`` (one frame per step) and the subtree there."""
    if type(path) is not str and not isinstance(path, tuple):
        raise TypeError(
            f"{label}: expected a key path (a tuple of key entries or a keystr string), got {type(path).__name__}"
        )
    frames: list[_Frame] = []
    done: list[Any] = []
    node = tree
    rest: Any = path
    while rest:
        if type(rest) is str:
            token_match = _TOKEN.match(rest)
            token = token_match.group(0) if token_match else rest
        else:
            token = str(rest[0])
        ntype = lookup(type(node))
        if ntype is None:
            raise StructureMismatchError(label, tuple(done), f"a node with a child {token}", _describe_value(node))
        children, data, keys = ntype.flatten(node, True)
        assert keys is not None
        if type(rest) is str:
            index, length = _string_match(rest, keys)
            next_rest: Any = rest[length:]
        else:
            index = next((i for i, key in enumerate(keys) if _matches(rest[0], key)), -1)
            next_rest = rest[1:]
        if index < 0:
            hint = _HINT if type(rest) is str and not token_match else None
            raise StructureMismatchError(
                label, tuple(done), f"a child {token}", describe(ntype, data, len(children)), None, hint
            )
        frames.append((ntype, list(children), data, index))
        done.append(keys[index])
        node = children[index]
        rest = next_rest
    return frames, node


def tree_get(tree: Any, path: Path) -> Any:
    """The subtree of ``tree`` at ``path``.

    >>> params = [{'weights': [[1.0]], 'biases': [0.5]}]
    >>> tree_get(params, "[0]['biases']")
    [0.5]
    >>> from treekit import DictKey, SequenceKey
    >>> tree_get(params, (SequenceKey(0), DictKey('weights'), SequenceKey(0)))
    [1.0]

    Departs from optax's ``tree_get(tree, key)``, which looks a leaf up by its name
    anywhere in the tree; here ``path`` is the whole key path from the root.

    Args:
        tree: Any pytree.
        path: A tuple of key entries (those of :func:`treekit.tree_flatten_with_path`, or
            any entries with the same ``str``), or their :func:`treekit.keystr`. ``()`` and
            ``''`` are the root.

    Returns:
        The subtree (or leaf) at ``path``, the very object in ``tree``.

    Raises:
        StructureMismatchError: If ``tree`` has nothing at ``path``; the message names the
            deepest key path that exists, e.g. ``tree[0]: expected a child ['w'], got dict
            with keys ['biases', 'weights']``.
        TypeError: If ``path`` is neither a tuple nor a string.
    """
    return _descend(tree, path, "tree")[1]


def _rebuild(frames: list[_Frame], value: Any) -> Any:
    for ntype, children, data, index in reversed(frames):
        children[index] = value
        value = _unflatten(ntype, data, children)
    return value


def tree_set(tree: Any, path: Path, value: Any) -> Any:
    """A copy of ``tree`` with the subtree at ``path`` replaced by ``value``.

    Only the nodes on the way to ``path`` are rebuilt; every other subtree is shared with
    ``tree``, which is left as it was.

    >>> params = [{'weights': [[1.0]], 'biases': [0.5]}]
    >>> tree_set(params, "[0]['biases']", [0.0])
    [{'weights': [[1.0]], 'biases': [0.0]}]
    >>> params
    [{'weights': [[1.0]], 'biases': [0.5]}]

    Departs from optax's ``tree_set(tree, filtering, **kwargs)``, which sets leaves by name.

    Args:
        tree: Any pytree.
        path: As in :func:`tree_get`.
        value: The new subtree (any value).

    Returns:
        The new tree.

    Raises:
        StructureMismatchError: If ``tree`` has nothing at ``path`` (as in :func:`tree_get`).
    """
    frames, _ = _descend(tree, path, "tree")
    return _rebuild(frames, value)


_MISSING: Any = object()


def tree_at(
    tree: Any,
    where: Path | list[Path],
    replace: Any = _MISSING,
    *,
    replace_fn: Callable[[Any], Any] | None = None,
) -> Any:
    """A copy of ``tree`` with the subtrees at one or more key paths replaced.

    >>> params = [{'w': 1.0, 'b': 0.0}, {'w': 2.0, 'b': 0.0}]
    >>> tree_at(params, "[1]['w']", 5.0)
    [{'w': 1.0, 'b': 0.0}, {'w': 5.0, 'b': 0.0}]
    >>> tree_at(params, ["[0]['b']", "[1]['b']"], replace_fn=lambda b: b + 1)
    [{'w': 1.0, 'b': 1.0}, {'w': 2.0, 'b': 1.0}]

    Like equinox's ``tree_at(where, pytree, replace, replace_fn)`` with two departures: the
    tree comes first, and ``where`` is a key path (or a list of them), not a function.

    Args:
        tree: Any pytree.
        where: One key path (a tuple of key entries or a keystr string, as in
            :func:`tree_get`) or a list of them; they are replaced in list order, so a later
            path may reach into a subtree an earlier one put in.
        replace: The new subtree; with a list ``where``, a sequence of new subtrees, one per
            path.
        replace_fn: Instead of ``replace``: called on each old subtree, returns the new one.

    Returns:
        The new tree; ``tree`` is left as it was.

    Raises:
        TypeError: If both or neither of ``replace`` and ``replace_fn`` are given, or a list
            ``where`` gets a ``replace`` of another length.
        StructureMismatchError: If a path leads nowhere (as in :func:`tree_get`).
    """
    if (replace is _MISSING) == (replace_fn is None):
        raise TypeError("tree_at: pass exactly one of replace and replace_fn")
    paths = where if isinstance(where, list) else [where]
    if replace_fn is None:
        values = list(replace) if isinstance(where, list) else [replace]
        if len(values) != len(paths):
            raise TypeError(f"replace: expected {len(paths)} values (one per path in where), got {len(values)}")
    for k, path in enumerate(paths):
        frames, old = _descend(tree, path, "tree")
        tree = _rebuild(frames, replace_fn(old) if replace_fn is not None else values[k])
    return tree

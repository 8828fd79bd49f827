"""Functional reads and updates by key path: tree_get, tree_set, and equinox's tree_at.

A key path is accepted in every form treekit prints or makes:

- a tuple of key entries, as ``tree_flatten_with_path`` gives them (jax's entries too);
- their ``keystr`` (``"[0]['weights']"``, ``".layers[1]"``);
- a key of :func:`treekit.params.flatten_dict` (``'0/weights'``, split on its ``sep``);
- a tuple or list of plain keys (``('linear', 'b')``, ``['layers', 0, 'w']``, ``-1`` for a
  sequence's last item), entries and plain keys mixed as you like.

Each step asks the node's registry entry for its children and their key entries, so every
registered type works, including ones whose children only have a
:class:`~treekit.FlattenedIndexKey` (written ``[<flat index 1>]`` or ``[1]``). A walk is
linear in the path's length: a string is read from a moving position, never re-sliced.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Union

from treekit.core import (
    LIST,
    TUPLE,
    FlattenedIndexKey,
    IsLeaf,
    KeyPath,
    SequenceKey,
    StructureKeyError,
    StructureMismatchError,
    describe,
    describe_value,
    flatten_noted,
    keystr,
    lookup,
    plain_key,
    simple_text,
    unflatten_node,
)
from treekit.ops._named import Filtering, find_named
from treekit.ops._where import where_paths

__all__ = ["Path", "tree_at", "tree_get", "tree_set"]

_MISSING: Any = object()

Path = Union[KeyPath, str, Sequence[Any]]
"""A key path: a tuple of key entries, its ``keystr``, a ``flatten_dict`` key, or a tuple or
list of plain keys (see :func:`tree_get`)."""

_TOKEN = re.compile(r"\[[^\]]*\]|\.[^.\[]*")
_HINT = (
    "write key paths as keystr gives them (\"[0]['weights']\", \".layers[1]\"), as flatten_dict's keys "
    "('0/weights'), or as a tuple of keys ((0, 'weights'))"
)
_Frame = tuple[Any, list[Any], Any, int]  # (ntype, children, node data, index of the child taken)


def _key_index(key: Any, keys: Sequence[Any]) -> int:
    """The child whose key entry is ``key``, or whose plain key is ``key`` (same type first)."""
    loose = -1
    for i, entry in enumerate(keys):
        if entry == key:
            return i
        value = plain_key(entry)
        if value is not entry and value == key and type(key) is not bool:
            if type(value) is type(key):
                return i
            if loose < 0:
                loose = i
    if loose >= 0:
        return loose
    if type(key) is int and key < 0 and keys and all(type(e) in (SequenceKey, FlattenedIndexKey) for e in keys):
        return key + len(keys) if key + len(keys) >= 0 else -1  # from the end, as Python indexes
    text = str(key)
    for i, entry in enumerate(keys):  # another library's entries (jax's): the same keystr
        if str(entry) == text:
            return i
        if type(key) is SequenceKey and type(entry) is FlattenedIndexKey and key.idx == entry.key:
            return i
    return -1


def _keystr_index(text: str, pos: int, keys: Sequence[Any]) -> tuple[int, int]:
    """The child whose keystr starts ``text`` at ``pos`` (longest wins): ``(index, end)`` or ``(-1, pos)``."""
    best, best_end = -1, pos
    for i, key in enumerate(keys):
        spellings = [str(key)]
        if type(key) is FlattenedIndexKey:
            spellings.append(f"[{key.key}]")
        for spelling in spellings:
            end = pos + len(spelling)
            if end > best_end and text.startswith(spelling, pos) and (end == len(text) or text[end] in "[."):
                best, best_end = i, end
    return best, best_end


def _simple_index(text: str, pos: int, keys: Sequence[Any], sep: str) -> tuple[int, int]:
    """The child whose plain key, as ``flatten_dict`` writes it, starts ``text`` at ``pos`` and
    ends at ``sep`` or the end (longest wins): ``(index, where the next key starts)``."""
    best, best_end = -1, pos - 1
    for i, key in enumerate(keys):
        spelling = simple_text(key)
        end = pos + len(spelling)
        if end > best_end and text.startswith(spelling, pos) and (end == len(text) or text.startswith(sep, end)):
            best, best_end = i, end
    if best < 0:
        return -1, pos
    return best, best_end + len(sep) if best_end < len(text) else best_end


def _token(path: Any, pos: int, keystr_form: bool, sep: str) -> tuple[str, str | None]:
    """The step of ``path`` at ``pos`` as an error message shows it, and a hint for strings."""
    if keystr_form:
        token_match = _TOKEN.match(path, pos)
        return (token_match.group(0), None) if token_match else (path[pos:], _HINT)
    if isinstance(path, str):
        stop = path.find(sep, pos)
        return repr(path[pos : stop if stop >= 0 else len(path)]), _HINT
    key = path[pos]
    return (f"[{key!r}]" if type(key) in (str, int) else str(key)), None


def _descend(tree: Any, path: Any, label: str, sep: str) -> tuple[list[_Frame], Any]:
    """The nodes from the root to ``path`` (one frame per step) and the subtree there."""
    is_str = isinstance(path, str)
    if not is_str and not isinstance(path, (tuple, list)):
        raise TypeError(
            f"path: expected a key path (a tuple of key entries or keys, a keystr string or a "
            f"flatten_dict key), got {type(path).__name__}"
        )
    keystr_form = is_str and (not path or path[0] in "[.")
    frames: list[_Frame] = []
    done: list[Any] = []
    node = tree
    pos, end = 0, len(path)
    while pos < end:
        ntype = lookup(type(node))
        if ntype is None:
            token = _token(path, pos, keystr_form, sep)[0]
            raise StructureMismatchError(label, tuple(done), f"a node with a child {token}", describe_value(node))
        step: Any = None if is_str else path[pos]
        if (ntype is LIST or ntype is TUPLE) and type(step) in (int, SequenceKey):
            # A list or tuple taken by index: at once, not by a search of its key entries.
            index = step if type(step) is int else step.idx
            index += len(node) if type(step) is int and index < 0 else 0
            if 0 <= index < len(node):
                frames.append((ntype, list(node), None, index))
                done.append(SequenceKey(index))
                node = node[index]
                pos += 1
                continue
        try:
            children, data, keys = ntype.flatten(node, True)
        except Exception as exc:  # the user's exception goes on, noted with the key path (as flatten does)
            flatten_noted(label, tuple(done), type(node), exc)
            raise
        assert keys is not None
        if keystr_form:
            index, next_pos = _keystr_index(path, pos, keys)
        elif is_str:
            index, next_pos = _simple_index(path, pos, keys, sep)
        else:
            index, next_pos = _key_index(step, keys), pos + 1
        if index < 0:
            token, hint = _token(path, pos, keystr_form, sep)
            raise StructureMismatchError(
                label, tuple(done), f"a child {token}", describe(ntype, data, len(children)), None, hint
            )
        frames.append((ntype, list(children), data, index))
        done.append(keys[index])
        node = children[index]
        pos = next_pos
    return frames, node


def _is_name(key: Any, sep: str) -> bool:
    """Whether ``key`` is a bare name (optax's form): a string, no ``keystr``, without ``sep``."""
    return isinstance(key, str) and bool(key) and key[0] not in "[." and sep not in key


def _named_path(tree: Any, name: str, filtering: Filtering | None, sep: str) -> KeyPath | str | None:
    """The key path of the one place named ``name`` (``None``: none); several are an error."""
    found = find_named(tree, name, filtering)
    if len(found) > 1:
        raise StructureKeyError(
            "tree", (), f"one place named {name!r}", f"{len(found)} places", None,
            "pass the whole key path of one of them: " + ", ".join(keystr(p) for p, _, _ in found[:5]),
        )
    if found:
        return found[0][0]
    if filtering is None:  # none named so: a flatten_dict key of the root (a list's '0') may be
        try:
            _descend(tree, name, "tree", sep)
            return name
        except StructureMismatchError:
            pass
    return None


def tree_get(
    tree: Any, key: Path, default: Any = _MISSING, filtering: Filtering | None = None, *, sep: str = "/"
) -> Any:
    """The subtree of ``tree`` at the key path ``key``, or the one place named ``key`` (optax's).

    >>> params = {'layers': [{'w': [[1.0]], 'b': [0.5]}]}
    >>> tree_get(params, "['layers'][0]['b']")
    [0.5]
    >>> tree_get(params, 'layers/0/b'), tree_get(params, ('layers', 0, 'b')), tree_get(params, ['layers', -1, 'b'])
    ([0.5], [0.5], [0.5])
    >>> from treekit import DictKey, SequenceKey
    >>> tree_get(params, (DictKey('layers'), SequenceKey(0), DictKey('w'), SequenceKey(0)))
    [1.0]

    A bare name (a string without ``sep`` that is no ``keystr``) is optax's form: the one place
    anywhere whose key (a dict key, an attribute or field) or namedtuple class is that name;
    ``default`` where there is none, an error where there are several, and ``filtering(key
    path, value)`` keeps the places it is true of (see :func:`treekit.params.tree_get_all_with_path`):

    >>> state = {'adam': {'count': 3, 'mu': 0.5}, 'sgd': {'count': 1}}
    >>> tree_get(state, 'mu'), tree_get(state, 'ema'), tree_get(state, 'ema', 0.9)
    (0.5, None, 0.9)
    >>> tree_get(state, 'count', filtering=lambda path, value: value > 1)
    3

    Args:
        tree: Any pytree.
        key: A key path: a tuple of key entries (those of :func:`treekit.tree_flatten_with_path`,
            or any entries with the same ``str``, as jax's); their :func:`treekit.keystr` (a
            string starting with ``[`` or ``.``); a key of :func:`treekit.params.flatten_dict`
            (plain keys joined by ``sep``); or a tuple or list of plain keys (dict keys,
            sequence indices, negative ones too, attribute names), which may mix in key
            entries. ``()``, ``[]`` and ``''`` are the root. Or a bare name, as above.
        default: What a name found nowhere gives (``None`` by default, as optax); for a key
            path, what a path the tree lacks gives instead of the error.
        filtering: With a name: ``filtering(key path, value) -> bool`` (optax's).
        sep: What a ``flatten_dict`` key joins its keys with (its ``sep``).

    Returns:
        The subtree (or leaf) found, the very object in ``tree``.

    Raises:
        StructureMismatchError: If ``tree`` has nothing at a key path (and no ``default``); the
            message names the deepest key path that exists, e.g. ``tree['layers'][0]: expected a
            child ['c'], got dict with keys ['b', 'w']``.
        StructureKeyError: If a name is found at several places (a ``KeyError``, as optax's;
            the message lists them).
        TypeError: If ``key`` is not a tuple, list or string, or ``filtering`` comes with a path.
        Exception: Whatever a registered flatten function raises on the way, as itself (its
            class kept, as :func:`treekit.tree_flatten` does), with a note naming the node type
            and the key path of the node it was flattening
            (``tree['layers'][0]: raised while flattening Linear``).
    """
    if _is_name(key, sep):
        assert isinstance(key, str)
        path = _named_path(tree, key, filtering, sep)
        return (None if default is _MISSING else default) if path is None else _descend(tree, path, "tree", sep)[1]
    if filtering is not None:
        raise TypeError(f"filtering: expected None with a key path (it filters the places a name finds), got {key!r}")
    try:
        return _descend(tree, key, "tree", sep)[1]
    except StructureMismatchError:
        if default is _MISSING:
            raise
        return default


def _rebuild(frames: list[_Frame], value: Any) -> Any:
    for ntype, children, data, index in reversed(frames):
        children[index] = value
        value = unflatten_node(ntype, data, children)
    return value


def tree_set(tree: Any, *args: Any, sep: str = "/", **names: Any) -> Any:
    """A copy of ``tree`` with the subtree at a key path replaced: ``tree_set(tree, key, value)``;
    or every place named ``name`` replaced: ``tree_set(tree, [filtering,] name=value, ...)`` (optax's).

    Only the nodes on the way are rebuilt; every other subtree is shared with ``tree``, which
    is left as it was.

    >>> params = [{'weights': [[1.0]], 'biases': [0.5]}]
    >>> tree_set(params, "[0]['biases']", [0.0])
    [{'weights': [[1.0]], 'biases': [0.0]}]
    >>> tree_set(params, '0/biases', None)
    [{'weights': [[1.0]], 'biases': None}]
    >>> params
    [{'weights': [[1.0]], 'biases': [0.5]}]

    optax's form replaces every place each name finds (as :func:`tree_get` finds them;
    ``filtering(key path, value)`` keeps those it is true of), and a name found nowhere is a
    ``KeyError``:

    >>> state = {'adam': {'count': 3, 'mu': 0.5}, 'sgd': {'count': 1}}
    >>> tree_set(state, count=0, mu=1.0)
    {'adam': {'count': 0, 'mu': 1.0}, 'sgd': {'count': 0}}
    >>> tree_set(state, lambda path, value: value > 1, count=0)
    {'adam': {'count': 0, 'mu': 0.5}, 'sgd': {'count': 1}}

    Args:
        tree: Any pytree.
        *args: ``key, value``: a key path or a name, as :func:`tree_get` takes it (a name
            must find one place), and the new subtree. Or, with ``names``, optax's optional
            ``filtering``.
        sep: As in :func:`tree_get`.
        **names: ``name=value``: every place named ``name`` becomes ``value`` (a place inside
            another one replaced is not looked at again).

    Returns:
        The new tree.

    Raises:
        StructureMismatchError: If ``tree`` has nothing at a key path (as in :func:`tree_get`).
        StructureKeyError: A name found nowhere, or a ``key`` name found at several places (a
            ``KeyError``, as optax's).
        TypeError: For other arguments than these two forms.
        Exception: Whatever a registered flatten function raises, noted with the node type
            and key path (as in :func:`tree_get`).
    """
    if names:
        if len(args) > 1 or (args and args[0] is not None and not callable(args[0])):
            raise TypeError(
                f"tree_set: expected (tree, key, value) or (tree, [filtering,] name=value, ...), got {len(args)} "
                f"positional arguments beside the tree and names {sorted(names)}"
            )
        return _set_named(tree, args[0] if args else None, names, sep)
    if len(args) != 2:
        raise TypeError(f"tree_set: expected (tree, key, value) or (tree, [filtering,] name=value, ...), "
                        f"got {len(args)} positional arguments beside the tree")
    key, value = args
    if _is_name(key, sep):
        path = _named_path(tree, key, None, sep)
        if path is None:
            raise StructureKeyError("tree", (), f"a key named {key!r}", "none", None, _HINT)
        key = path
    frames, _ = _descend(tree, key, "tree", sep)
    return _rebuild(frames, value)


def _set_named(tree: Any, filtering: Filtering | None, names: dict[str, Any], sep: str) -> Any:
    """optax's ``tree_set(tree, filtering, **names)``: outer places first, inner ones left."""
    places: list[tuple[KeyPath, Any]] = []
    for name, value in names.items():
        found = find_named(tree, name, filtering)
        if not found:
            kept_none = filtering is not None and find_named(tree, name)
            hint = "the filtering function kept none of them" if kept_none else None
            raise StructureKeyError("tree", (), f"a key named {name!r}", "none", None, hint)
        places += [(path, value) for path, _, _ in found]
    done: list[KeyPath] = []
    for path, value in sorted(places, key=lambda place: len(place[0])):
        if any(path[: len(outer)] == outer for outer in done):
            continue
        tree = _rebuild(_descend(tree, path, "tree", sep)[0], value)
        done.append(path)
    return tree


def tree_at(
    where: Callable[[Any], Any] | Path,
    pytree: Any,
    replace: Any = _MISSING,
    replace_fn: Callable[[Any], Any] = _MISSING,
    is_leaf: IsLeaf | None = None,
    *,
    sep: str = "/",
) -> Any:
    """A copy of ``pytree`` with the subtrees ``where`` selects replaced (equinox's ``tree_at``).

    ``where`` is a function that takes the tree and returns the node to replace, or a tuple
    or list of nodes, found in ``pytree`` by identity (equinox's semantics); or a key path in
    any form :func:`tree_get` takes.

    >>> params = [{'w': 1.0, 'b': 0.0}, {'w': 2.0, 'b': 0.0}]
    >>> tree_at(lambda p: p[1]['w'], params, 5.0)
    [{'w': 1.0, 'b': 0.0}, {'w': 5.0, 'b': 0.0}]
    >>> tree_at(lambda p: (p[0]['b'], p[1]['b']), params, replace_fn=lambda b: b + 1)
    [{'w': 1.0, 'b': 1.0}, {'w': 2.0, 'b': 1.0}]
    >>> tree_at("[1]['w']", params, 5.0) == tree_at('1/w', params, 5.0) == tree_at((1, 'w'), params, 5.0)
    True

    Args:
        where: A function ``pytree -> node`` or ``pytree -> tuple/list of nodes``, which
            must use only the structure of ``pytree``, not its leaves' values; or one key
            path (as in :func:`tree_get`; a list is a path of keys, not a list of paths).
        pytree: Any pytree; left as it was.
        replace: The new subtree; when ``where`` returns a tuple or list, a sequence of new
            subtrees, one per node.
        replace_fn: Instead of ``replace``: called on each old subtree, returns the new one.
        is_leaf: As in :func:`treekit.tree_flatten`, for a function ``where``: pass
            ``is_leaf=lambda x: x is None`` to select a ``None``.
        sep: As in :func:`tree_get`, for a ``flatten_dict`` key.

    Returns:
        The new tree; only the nodes on the way to the replaced ones are rebuilt.

    Raises:
        ValueError: If both or neither of ``replace`` and ``replace_fn`` are given, or
            ``replace`` has another length than the nodes ``where`` returns (as equinox); if a
            function ``where`` depends on the leaves or computes with them (it
            runs on a copy of ``pytree`` whose leaves are stand-ins; what it raised there is
            chained); or returns something that is not a node or leaf of ``pytree``: the
            message says what it is instead (node data such as a static field, naming its
            key path and node type; a part of ``pytree`` itself that ``where`` refers to by
            name; or a value ``where`` made); or a node found at more than one place.
        StructureMismatchError: If a path leads nowhere (as in :func:`tree_get`), labelled
            ``pytree``.
        Exception: Whatever a registered flatten function raises, noted with the node type
            and key path (as in :func:`tree_get`), labelled ``pytree``.
    """
    if (replace is _MISSING) == (replace_fn is _MISSING):
        raise ValueError("tree_at: pass exactly one of replace and replace_fn")
    paths: list[Any] = [where]
    single = True
    if callable(where):
        found, single = where_paths(where, pytree, is_leaf)
        paths = list(found)
    if replace_fn is _MISSING:
        values = [replace] if single else list(replace)
        if len(values) != len(paths):
            raise ValueError(f"replace: expected {len(paths)} values (one per node where returns), got {len(values)}")
    for k, path in enumerate(paths):
        frames, old = _descend(pytree, path, "pytree", sep)
        pytree = _rebuild(frames, replace_fn(old) if replace_fn is not _MISSING else values[k])
    return pytree

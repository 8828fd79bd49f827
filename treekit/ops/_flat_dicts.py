"""Flat dicts for checkpoint files: a tree as one dict keyed by joined key paths, and back."""

from __future__ import annotations

from typing import Any

from treekit.core import flatten, keystr, plain_key, safe_keystr


def _plain(entry: Any) -> Any:
    value = plain_key(entry)
    return str(entry) if value is entry else value


def _check_sep(sep: Any) -> None:
    if sep is not None and not isinstance(sep, str):
        raise TypeError(f"sep: expected a str or None, got {type(sep).__name__}")
    if sep == "":
        raise ValueError("sep: expected a non-empty str or None, got ''\npass sep=None for tuple keys")


def flatten_dict(tree: Any, sep: str | None = "/") -> dict[Any, Any]:
    """A flat dict from each leaf's key path, joined by ``sep``, to the leaf.

    The keys are ``keystr(path, simple=True, separator=sep)`` (``'0/weights'``); with
    ``sep=None`` they are tuples of the raw keys (``(0, 'weights')``), as flax's
    ``flatten_dict`` gives. Any pytree works, not only nested dicts.

    >>> flatten_dict([{'weights': 1, 'biases': 2}])
    {'0/biases': 2, '0/weights': 1}
    >>> flatten_dict({'a': {'b': 1}}, sep=None)
    {('a', 'b'): 1}

    The keys come in leaf order (each dict's keys sorted), not in insertion order as from
    flax's ``flatten_dict``: the keys and values are flax's, listed as
    :func:`~treekit.tree_leaves` lists the leaves, so
    ``list(flatten_dict(t).values()) == tree_leaves(t)``. That is the order
    of every other listing of a tree in treekit (``summary``, saved files,
    ``tree_leaves_with_path``) and of jax, so the n-th flat key names the n-th leaf everywhere.
    Where flax's order matters (a file read by position, a printout to match), call
    ``flax.traverse_util.flatten_dict(t, sep='/')``, or reorder by any key list in that order
    (``{k: flat[k] for k in keys}``); :func:`unflatten_dict` takes either order:

    >>> from treekit import tree_leaves
    >>> params = {'dense': {'kernel': 1.0, 'bias': 0.0}}
    >>> flat = flatten_dict(params)
    >>> flat
    {'dense/bias': 0.0, 'dense/kernel': 1.0}
    >>> list(flat.values()) == tree_leaves(params)
    True
    >>> unflatten_dict({'dense/kernel': 1.0, 'dense/bias': 0.0}) == unflatten_dict(flat) == params
    True

    A flat key must split back on ``sep`` into its path's keys, so that :func:`unflatten_dict`
    rebuilds what was flattened. A key holding ``sep`` (haiku's module names, ``'mlp/~/linear_0'``)
    is refused rather than escaped: an escaped key would be a name no other tool reads (``np.load``,
    flax, orbax), and no longer a path ``tree_get(tree, key, sep=sep)`` takes. Pass ``sep=None``
    or a separator none of the keys hold:

    >>> params = {'mlp/~/linear_0': {'w': 1}}
    >>> flatten_dict(params)
    Traceback (most recent call last):
    ...
    ValueError: tree['mlp/~/linear_0']: expected a key without the separator '/', got 'mlp/~/linear_0'
    (unflatten_dict would split 'mlp/~/linear_0/w' into 'mlp', '~', 'linear_0', 'w')
    pass sep=None for tuple keys, or a separator none of the keys hold, e.g. sep='.'
    >>> flatten_dict(params, sep='.')
    {'mlp/~/linear_0.w': 1}

    For the same reason, two keys of one node with the same text (``0`` and ``'0'``) are refused:
    :func:`unflatten_dict` would merge them. So ``unflatten_dict(flatten_dict(t, sep), sep) == t``
    for every tree ``t`` of nested dicts with ``str`` keys that ``flatten_dict`` accepts (equal
    dicts, the rebuilt ones with their keys in leaf order); only subtrees without leaves
    (``{}``, ``[]``, ``None``), which have no flat key, do not come back. Other nodes come back
    as dicts and other keys as their text (a list's ``0`` as ``'0'``); with ``sep=None`` the
    keys stay as they are.

    Args:
        tree: Any pytree.
        sep: Joins the keys of a path, a non-empty string; ``None`` for tuple keys.

    Returns:
        A dict from flat key to leaf, in leaf order (flax's: insertion order).

    Raises:
        ValueError: If a key holds ``sep`` (or, for a separator of 2 or more characters, its
            flat key does not split back into the path's keys), two leaves get the same flat
            key, or two keys of one node the same text; the message names the key path. Also
            if ``sep`` is ``''``.
        TypeError: If ``sep`` is neither a string nor ``None``.
    """
    _check_sep(sep)
    leaves, _, paths = flatten(tree, with_path=True)
    assert paths is not None
    out: dict[Any, Any] = {}
    texts: _TextTrie = {}  # the keys' texts so far, as unflatten_dict will nest them
    for path, leaf in zip(paths, leaves):
        key: Any = tuple(_plain(e) for e in path) if sep is None else keystr(path, simple=True, separator=sep)
        if key in out:
            raise ValueError(f"tree{keystr(path)}: expected a unique flat key, got {key!r} twice (sep={sep!r})")
        if sep is not None and path:
            _check_flat_key(paths, path, key, sep, texts)
        out[key] = leaf
    return out


_TextTrie = dict[str, tuple[Any, "_TextTrie"]]  # text -> (the first key entry with that text, its trie)
_SEP_HINT = "pass sep=None for tuple keys, or a separator none of the keys hold"


def _check_flat_key(paths: list[Any], path: Any, key: str, sep: str, texts: _TextTrie) -> None:
    """Raise unless ``key`` splits on ``sep`` into the texts of ``path``'s entries, and no entry's
    text is that of another entry of the same node (``texts`` holds the paths so far)."""
    parts = key.split(sep)
    if len(parts) != len(path) or (len(sep) > 1 and parts != [keystr((e,), simple=True) for e in path]):
        raise _held_sep(paths, path, sep)
    node = texts
    for depth, (part, entry) in enumerate(zip(parts, path)):
        seen = node.get(part)
        if seen is None:
            seen = node[part] = (entry, {})
        elif seen[0] is not entry and seen[0] != entry:
            raise ValueError(
                f"tree{safe_keystr(path[: depth + 1])}: expected a key whose text no other key of its node has, "
                f"got {part!r}, the text of tree{safe_keystr((*path[:depth], seen[0]))} too "
                "(unflatten_dict would merge the two)\npass sep=None for tuple keys, which keep each key as it is"
            )
        node = seen[1]


def _held_sep(paths: list[Any], path: Any, sep: str) -> ValueError:
    """The error for a leaf at ``path`` whose flat key does not split back on ``sep``."""
    parts = [keystr((e,), simple=True) for e in path]
    flat = sep.join(parts)
    i = next((i for i, part in enumerate(parts) if sep in part), None)
    if i is None:  # a separator of 2 or more characters, straddling two keys
        head = f"tree{safe_keystr(path)}: expected keys that {sep!r} joins and splits back, got {_reprs(parts)}"
    else:
        head = f"tree{safe_keystr(path[: i + 1])}: expected a key without the separator {sep!r}, got {parts[i]!r}"
    free = next((c for c in "/.:|" if not any(c in keystr((e,), simple=True) for p in paths for e in p)), None)
    hint = _SEP_HINT if free is None else f"{_SEP_HINT}, e.g. sep={free!r}"
    return ValueError(f"{head} (unflatten_dict would split {flat!r} into {_reprs(flat.split(sep))})\n{hint}")


def _reprs(texts: list[str]) -> str:
    return ", ".join(map(repr, texts))


def unflatten_dict(flat: dict[Any, Any], sep: str | None = "/") -> dict[Any, Any]:
    """Nested dicts from a flat dict of :func:`flatten_dict` (flax's ``unflatten_dict``).

    Every key is split on ``sep``: a key cannot say that a part was meant whole. That is why
    :func:`flatten_dict` refuses keys holding ``sep``, so that
    ``unflatten_dict(flatten_dict(t, sep), sep) == t`` for every tree of nested dicts with
    ``str`` keys it accepts (sub-dicts without leaves aside). Only dicts come back: a list's
    items come back under their indices as keys (``'0'``, or ``0`` with ``sep=None``). To
    restore another structure exactly, use ``tree_unflatten(tree_structure(like), flat.values())``.
    Values are never looked into or changed: a dict value is a leaf here, and a key under it
    clashes with it.

    >>> unflatten_dict({'a/b': 1, 'a/c': 2, 'd': 3})
    {'a': {'b': 1, 'c': 2}, 'd': 3}
    >>> unflatten_dict({'mlp/~/linear_0.w': 1}, sep='.')
    {'mlp/~/linear_0': {'w': 1}}

    Args:
        flat: A dict from flat keys (strings joined by ``sep``, or tuples) to leaves.
        sep: What :func:`flatten_dict` joined the keys with; ``None`` for tuple keys.

    Returns:
        Nested dicts, in the order the keys first appear.

    Raises:
        TypeError: If ``flat`` is not a dict, ``sep`` not a string or ``None``, or a key not a
            string (a tuple with ``sep=None``).
        ValueError: If a key is both a leaf and a prefix of another key (the message names both),
            a tuple key is empty, or ``sep`` is ``''``.
    """
    if not isinstance(flat, dict):
        raise TypeError(f"flat: expected a dict, got {type(flat).__name__}")
    _check_sep(sep)
    out: dict[Any, Any] = {}
    made = {id(out)}  # the dicts made here: the only ones a key may go into
    for key, value in flat.items():
        parts = _flat_key_parts(key, sep)
        node = out
        for depth, part in enumerate(parts[:-1]):
            if part not in node:
                node[part] = {}
                made.add(id(node[part]))
            elif id(node[part]) not in made:
                other = _flat_key_at(flat, parts[: depth + 1], sep)
                raise ValueError(
                    f"flat[{key!r}]: expected a dict at {parts[: depth + 1]!r}, got a leaf "
                    f"(key {other!r} clashes with key {key!r})"
                )
            node = node[part]
        if parts[-1] in node:
            other = _flat_key_under(flat, parts, sep)
            raise ValueError(
                f"flat[{key!r}]: expected a leaf, got a dict of other keys under it "
                f"(key {key!r} clashes with key {other!r})"
            )
        node[parts[-1]] = value
    return out


def _flat_key_parts(key: Any, sep: str | None) -> tuple[Any, ...]:
    if sep is None:
        if not isinstance(key, tuple):
            raise TypeError(f"flat[{key!r}]: expected a tuple key (sep=None), got {type(key).__name__}")
        if not key:
            raise ValueError("flat[()]: expected a tuple of one or more keys, got ()")
        return key
    if not isinstance(key, str):
        raise TypeError(f"flat[{key!r}]: expected a str key (sep={sep!r}), got {type(key).__name__}")
    return tuple(key.split(sep))


def _flat_key_at(flat: dict[Any, Any], parts: tuple[Any, ...], sep: str | None) -> Any:
    """The key of ``flat`` whose parts are ``parts`` (for a clash message; run only on failure)."""
    return next(k for k in flat if _flat_key_parts(k, sep) == parts)


def _flat_key_under(flat: dict[Any, Any], parts: tuple[Any, ...], sep: str | None) -> Any:
    """The first key of ``flat`` that goes under ``parts`` (for a clash message; run only on failure)."""
    n = len(parts)
    return next(k for k in flat if len(_flat_key_parts(k, sep)) > n and _flat_key_parts(k, sep)[:n] == parts)

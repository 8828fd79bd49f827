"""optax's search of a tree by key name: every place whose own key (a dict key, an attribute or
a namedtuple field) is the name, and every namedtuple whose class has that name; the key paths
a filter is given as optax gives them (a namedtuple's field as a :class:`NamedTupleKey`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from treekit.core import GetAttrKey, KeyPath, flatten, plain_key, simple_text

__all__ = ["NamedTupleKey", "find_named", "tree_get_all_with_path"]

Filtering = Callable[[KeyPath, Any], bool]


@dataclass(frozen=True)
class NamedTupleKey:
    """Field ``name`` of a namedtuple of class ``tuple_name``: the key entry optax's name search
    gives a filter (and :func:`tree_get_all_with_path` returns) for a namedtuple's field, so a
    filter can tell two states' ``count`` apart (optax's ``NamedTupleKey``).

    >>> key = NamedTupleKey('ScaleByAdamState', 'count')
    >>> str(key), key.name
    ('ScaleByAdamState.count', 'count')
    """

    tuple_name: str
    name: str

    def __str__(self) -> str:
        return f"{self.tuple_name}.{self.name}"

    def get(self, parent: Any) -> Any:
        """Return ``getattr(parent, name)``."""
        return getattr(parent, self.name)


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def find_named(
    tree: Any, name: Any, filtering: Filtering | None = None, label: str = "tree"
) -> list[tuple[KeyPath, KeyPath, Any]]:
    """``(key path, optax's key path, value)`` of every place in ``tree`` named ``name`` that
    ``filtering(optax's key path, value)`` keeps, in optax's order (the outermost first).

    A place is named ``name`` if its own key is (a dict key, an attribute, a namedtuple field;
    not a sequence index), or if it is a namedtuple of a class called ``name``. Places inside
    one found are searched too, as optax does.
    """
    nodes: dict[KeyPath, Any] = {}
    found: list[tuple[KeyPath, Any, bool]] = []  # (path, value, whether found by its class name)

    def visit(path: KeyPath, node: Any) -> bool:
        nodes[path] = node
        if _is_namedtuple(node) and type(node).__name__ == name:
            found.append((path, node, True))
        elif path and type(plain_key(path[-1])) is str and simple_text(path[-1]) == name:
            found.append((path, node, False))
        return False

    flatten(tree, visit, with_path=True, leaf_takes_path=True, label=label)  # the one walk: cycles, depth
    out = []
    for path, value in _optax_order(found, list(nodes)):
        theirs = tuple(
            NamedTupleKey(type(parent).__name__, entry.name)
            if type(entry) is GetAttrKey and _is_namedtuple(parent := nodes[path[:i]])
            else entry
            for i, entry in enumerate(path)
        )
        if filtering is None or filtering(theirs, value):
            out.append((path, theirs, value))
    return out


def _optax_order(found: list[tuple[KeyPath, Any, bool]], preorder: list[KeyPath]) -> list[tuple[KeyPath, Any]]:
    """``found`` in optax's order: the places held by the outermost nodes holding the name,
    then, child by child of each such node, the same inside it."""
    rank = {path: i for i, path in enumerate(preorder)}
    held: dict[KeyPath, list[tuple[KeyPath, Any]]] = {}  # node holding the name -> its places
    for path, value, itself in found:  # (a namedtuple found by its class name holds itself)
        held.setdefault(path if itself else path[:-1], []).append((path, value))

    def arrange(holders: list[KeyPath]) -> list[tuple[KeyPath, Any]]:
        outer = [h for h in holders if not any(h != g and h[: len(g)] == g for g in holders)]
        out = [place for h in outer for place in held[h]]
        for h in outer:
            by_child: dict[KeyPath, list[KeyPath]] = {}
            for g in holders:
                if g != h and g[: len(h)] == h:
                    by_child.setdefault(g[: len(h) + 1], []).append(g)
            for child in sorted(by_child, key=rank.__getitem__):
                out += arrange(by_child[child])
        return out

    return arrange(sorted(held, key=rank.__getitem__))


def tree_get_all_with_path(tree: Any, key: Any, filtering: Filtering | None = None) -> list[tuple[KeyPath, Any]]:
    """Every ``(key path, value)`` in ``tree`` named ``key`` (optax's ``tree_get_all_with_path``).

    ``key`` is a dict key, an attribute or namedtuple field name, or a namedtuple's class name,
    found anywhere in the tree (inside other matches too), in optax's order. A namedtuple's field is a
    :class:`NamedTupleKey` in the paths, as optax gives them.

    >>> from typing import NamedTuple
    >>> class State(NamedTuple):
    ...     count: int
    ...     hyperparams: dict
    >>> state = State(count=3, hyperparams={'learning_rate': 0.1, 'count': 0})
    >>> [(str(path[-1]), value) for path, value in tree_get_all_with_path(state, 'count')]
    [('State.count', 3), ("['count']", 0)]
    >>> tree_get_all_with_path(state, 'count', lambda path, value: value > 0)[0][1]
    3

    Args:
        tree: Any pytree.
        key: The name searched for.
        filtering: ``filtering(key path, value) -> bool``: keeps the matches it is true of.

    Returns:
        The matches, in optax's order: those held by the outermost nodes that hold the name
        (in flatten order), then those inside each such node, child by child.
    """
    return [(theirs, value) for _, theirs, value in find_named(tree, key, filtering)]

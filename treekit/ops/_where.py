"""What a ``where`` function of :func:`treekit.tree_at` selects: the key paths of its results,
found by identity in a copy of the tree whose leaves are stand-ins (equinox's rule), and, when
a result is no node or leaf of the tree, what it is instead (node data such as a static field,
a part of the tree read by name, a value ``where`` made), for the error."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from treekit.core import (
    DictKey,
    GetAttrKey,
    IsLeaf,
    KeyPath,
    LeafPaths,
    SequenceKey,
    describe_leaf,
    flatten,
    is_array,
    keystr,
    lookup,
    safe_repr,
)

__all__ = ["where_paths"]

_MISSING: Any = object()


class _StandIn:
    """A leaf made a unique object, so that ``where`` can name it by identity (equinox's
    ``_LeafWrapper``): where runs on a copy of the tree whose leaves are these stand-ins."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"<stand-in for the leaf {_shown(self.value)}>"


class _DistinctTuple(tuple):  # type: ignore[type-arg]
    """An empty tuple made a unique object (CPython has one ``()``, which a tree may hold at
    several places), as equinox's: where's copy holds these in place of ``()``."""

    __slots__ = ()


def _empty_tuple(x: Any) -> bool:
    return type(x) is tuple and not x


def _unwrap(x: Any) -> Any:
    return x.value if type(x) is _StandIn else () if type(x) is _DistinctTuple else x


_SELECT = "lambda m: m.layers[-1].weight"  # the example of a where that selects


def where_paths(where: Callable[[Any], Any], pytree: Any, is_leaf: IsLeaf | None) -> tuple[list[KeyPath], bool]:
    """The key paths of the nodes ``where(pytree)`` returns, and whether it returned one node."""
    plain = where(pytree)
    user_leaf = is_leaf
    stops: IsLeaf = _empty_tuple if user_leaf is None else lambda x: _empty_tuple(x) or user_leaf(x)
    leaves, treedef, _ = flatten(pytree, stops, label="pytree")
    # fresh nodes, unique leaves, each () a distinct one
    wrapped = treedef._build([_DistinctTuple() if _empty_tuple(x) else _StandIn(x) for x in leaves])
    try:
        picked = where(wrapped)
    except Exception as exc:  # it ran on pytree: what failed is a computation on the stand-ins
        raise ValueError(
            f"where: expected a function that selects parts of pytree, got one that raised "
            f"{type(exc).__name__} on stand-ins of pytree's leaves ({_first_line(exc)})\n"
            f"where runs on a copy of pytree whose leaves are stand-ins, to find what it selects by identity: "
            f"it must select parts ({_SELECT}), not compute with their values (compute new values in replace_fn)"
        ) from exc
    single = not isinstance(picked, (tuple, list)) or _path_in(wrapped, picked) is not None
    targets = [picked] if single else list(picked)
    wanted: dict[int, list[int]] = {}
    for k, target in enumerate(targets):
        wanted.setdefault(id(target), []).append(k)
    found: list[list[KeyPath]] = [[] for _ in targets]
    found_leaves, _, paths = flatten(wrapped, lambda x: id(x) in wanted, with_path=True, label="pytree")
    assert paths is not None
    for leaf, path in zip(found_leaves, paths, strict=True):
        for k in wanted.get(id(leaf), ()):
            found[k].append(path)
    for k, where_found in enumerate(found):  # first what each result is, then how where got it
        if not where_found:
            if not single and _path_in(pytree, picked) is not None:  # a list or tuple of pytree itself
                raise ValueError(_not_found("where(pytree)", picked, wrapped, pytree))
            which = "where(pytree)" if single else f"where(pytree)[{k}]"
            raise ValueError(_not_found(which, targets[k], wrapped, pytree))
    leaves_plain, structure_plain, _ = flatten(plain, stops, label="where(pytree)")
    leaves_picked, structure_picked, _ = flatten(picked, label="where(pytree)")
    if structure_plain != structure_picked or any(
        a is not _unwrap(b) for a, b in zip(leaves_plain, leaves_picked, strict=False)
    ):
        raise ValueError(
            "where: expected a function of the structure of pytree, got one whose result depends on "
            f"its leaves (equinox's rule: select by position, e.g. {_SELECT})"
        )
    out = []
    for k, where_found in enumerate(found):
        if len(where_found) > 1:
            which = "where(pytree)" if single else f"where(pytree)[{k}]"
            raise ValueError(
                f"{which}: expected one node of pytree, got one found at {len(where_found)} places\n"
                "a None is a node with no children and is shared: to select a None pass is_leaf=lambda x: x is None"
            )
        out.append(where_found[0])
    return out, single


# -- why a result of where is no node of pytree (only when raising) --------------------------------
_BUILT_IN_KINDS = frozenset({"list", "tuple", "dict", "namedtuple", "ordereddict", "defaultdict", "none"})
_SCALARS = (int, float, complex, bool, str, bytes, type(None))  # cached or interned: identity says little
_SHOWN_PLACES = 3


def _shown(value: Any) -> str:
    """A value in a message: an array as ``f32[3]``, else its ``repr`` if short, else its type."""
    if is_array(value):
        return describe_leaf(value)
    text = safe_repr(value)
    return text if len(text) <= 40 else f"a {type(value).__name__}"


def _not_found(which: str, target: Any, wrapped: Any, pytree: Any) -> str:
    """The message for ``target``, a result of ``where(wrapped)`` that is no node or leaf of
    ``wrapped``: node data, a part of ``pytree`` itself (where refers to it by name), or a
    value where made."""
    head = f"{which}: expected a node or leaf of pytree, got {_shown(target)}"
    holders = _holders(wrapped, target)
    if holders:
        places = ", ".join(place for place, _, _ in holders[:_SHOWN_PLACES])
        more = f" and {len(holders) - _SHOWN_PLACES} more" if len(holders) > _SHOWN_PLACES else ""
        types = " or ".join(dict.fromkeys(name for _, name, _ in holders[:_SHOWN_PLACES]))
        how = "as node data, not as a child" if all(in_data for *_, in_data in holders) else "but not as a child"
        return (
            f"{head}, which pytree holds {how}: {places}{more}\n"
            f"tree_at can only replace children (nodes and leaves): to change it, build a new {types}"
        )
    path = None if isinstance(target, _SCALARS) else _path_in(pytree, target)
    if path is not None:
        place = f"pytree{keystr(path)}, taken from pytree itself, not from" if path else "pytree itself, not"
        simple = all(type(entry) in (SequenceKey, DictKey, GetAttrKey) for entry in path)
        return (
            f"{head}, which is {place} where's argument\n"
            f"where runs on a copy of pytree: select from its argument "
            f"({'lambda m: m' + keystr(path) if simple else _SELECT}), not from a tree it refers to by name"
        )
    return (
        f"{head}, a value that is not part of pytree (made or computed by where)\n"
        f"where must return parts of the tree it is given (or a tuple or list of them), e.g. {_SELECT}"
    )


def _first_line(exc: Exception) -> str:
    try:
        text = str(exc).partition("\n")[0]
    except Exception:  # its __str__ raised
        return type(exc).__name__
    return text if len(text) <= 100 else text[:97] + "..."


def _path_in(tree: Any, target: Any) -> KeyPath | None:
    """The key path of ``target`` (by identity) among ``tree``'s nodes and leaves, or ``None``
    (one walk without key paths; the path made only for ``target``)."""
    found, treedef, _ = flatten(tree, lambda x: x is target, label="pytree")
    k = next((k for k, x in enumerate(found) if x is target), None)
    return None if k is None else LeafPaths(tree, treedef)[k]


def _holders(tree: Any, target: Any) -> list[tuple[str, str, bool]]:
    """Each place where a registered node of ``tree`` holds ``target`` (by identity) as node
    data or as an attribute that is no child, in pre-order: ``(the place and what holds it,
    the node's type name, whether in its node data)`` for a message."""
    found: list[tuple[str, str, bool]] = []

    def visit(path: KeyPath, node: Any) -> bool:
        ntype = lookup(type(node))
        if ntype is None or ntype.kind in _BUILT_IN_KINDS:
            return False
        try:
            _, data, keys = ntype.flatten(node, True)
            in_data = _holds(data, target)
            fields = _fields_holding(node, target, keys or ())
        except Exception:  # a message about the user's objects must not fail on them
            return False
        name, place = type(node).__name__, "pytree" + keystr(path)
        if fields:
            what = (
                f"an attribute of {name}, not a child"
                if not in_data
                else f"a static field of {name}"
                if dataclasses.is_dataclass(node)
                else f"an attribute of {name} in its node data"
            )
            found.extend((f"{place}.{field} ({what})", name, in_data) for field in fields)
        elif in_data:
            found.append((f"{place} (in the node data of {name})", name, True))
        return False

    flatten(tree, visit, with_path=True, leaf_takes_path=True, label="pytree")
    return found


def _holds(data: Any, target: Any, budget: int = 10_000) -> bool:
    """Whether ``data`` is ``target`` or holds it in its containers, a jax treedef's node data too."""
    stack, seen = [data], set()
    while stack and budget > 0:
        budget -= 1
        x = stack.pop()
        if x is target:
            return True
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, (tuple, list, set, frozenset)):
            stack.extend(x)
        elif isinstance(x, dict):
            stack.extend(x.values())
        elif type(x).__module__.startswith("jax") and callable(getattr(x, "node_data", None)):
            stack.append(x.node_data())  # a one-level jax treedef: (type, node data)
    return False


def _fields_holding(node: Any, target: Any, keys: Sequence[Any]) -> list[str]:
    """The names of ``node``'s fields (a dataclass's) or attributes that are ``target`` and no child."""
    if dataclasses.is_dataclass(node):
        names = [field.name for field in dataclasses.fields(node)]
    else:
        names = list(getattr(node, "__dict__", ()))
    children = {getattr(key, "name", None) for key in keys}
    return [name for name in names if name not in children and getattr(node, name, _MISSING) is target]

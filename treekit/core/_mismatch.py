"""How a structural mismatch is told: a node described in words, the one mismatch error, and
node data compared without letting a user's ``__eq__`` decide silently."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from treekit.core._describe import describe_leaf, is_array
from treekit.core._errors import StructureMismatchError, count_children, safe_repr, type_names
from treekit.core._keys import KeyPath
from treekit.core._records import Node
from treekit.core._registry import NONE, NodeType, dict_keys

__all__ = ["Incomparable", "describe", "describe_value", "incomparable", "mismatch", "same_node_data"]

_DICTS = ("dict", "ordereddict", "defaultdict")


def describe(ntype: NodeType | None, node_data: Any, arity: int, name: str | None = None) -> str:
    """Say what a node is in a message: ``list of length 2``, ``dict with keys ['a']``."""
    if ntype is None:
        return "a leaf"
    name = name or getattr(ntype.node_class(node_data), "__name__", "?")
    kind = ntype.kind
    if kind == "none":
        return "None"
    if kind in _DICTS:
        return f"{name} with keys {_keys_text(dict_keys(ntype, node_data))}"
    if kind in ("list", "tuple"):
        return f"{name} of length {arity}"
    if kind == "namedtuple":
        return f"namedtuple {name}"
    if kind == "static":
        return f"{name} {safe_repr(node_data, 80)}"
    if kind == "dataclass" and not node_data:
        return str(name)
    return f"{name} with {count_children(arity)} and node data {safe_repr(node_data, 80)}"


def _keys_text(keys: Iterable[Any]) -> str:
    """``['a', 'b']``: dict keys in a message (see ``safe_repr``)."""
    return f"[{', '.join(safe_repr(key) for key in keys)}]"


def describe_value(value: Any) -> str:
    if is_array(value):
        return f"leaf {describe_leaf(value)}"
    text = safe_repr(value)
    if len(text) > 40:
        return f"leaf of type {type(value).__name__}"
    return f"leaf {text}"


def mismatch(label: str, path: KeyPath, expected: Node, got: Any, got_node: Node | None) -> StructureMismatchError:
    """The error for a tree whose node at ``path`` is ``got`` where ``expected`` was wanted.

    ``got_node`` is ``got``'s own record (``None`` when ``got`` is a leaf). The one place
    that words structural mismatches; every entry point's errors come from here.
    """
    ntype, data, arity = expected[0], expected[1], expected[2]
    hint = None
    if got_node is None:
        got_text = describe_value(got)
        if ntype is NONE:
            hint = "None is a node with no children, not a leaf: to treat it as a leaf pass is_leaf=lambda x: x is None"
        return StructureMismatchError(label, path, describe(ntype, data, arity), got_text, None, hint)
    gtype, gdata, garity = got_node[0], got_node[1], got_node[2]
    expected_name = got_name = detail = None
    if ntype is not None:
        expected_name, got_name, detail = type_names(ntype.node_class(data), gtype.node_class(gdata))
    if ntype is not None and ntype.kind in _DICTS and gtype is ntype:
        want, have = list(dict_keys(ntype, data)), list(dict_keys(gtype, gdata))
        try:  # by == (as the walk compared them), in sets: linear in the number of keys
            want_set, have_set = set(want), set(have)
            missing = [k for k in want if k not in have_set]
            extra = [k for k in have if k not in want_set]
        except Exception:  # keys whose == raises: compared by identity
            want_ids, have_ids = set(map(id, want)), set(map(id, have))
            missing = [k for k in want if id(k) not in have_ids]
            extra = [k for k in have if id(k) not in want_ids]
        parts = [f"missing {', '.join(map(safe_repr, missing))}"] if missing else []
        parts += [f"extra {', '.join(map(safe_repr, extra))}"] if extra else []
        if not parts and ntype.kind == "ordereddict":
            parts = ["same keys in another order"]
        if ntype.kind == "defaultdict" and data[0] is not gdata[0]:
            parts.append(f"default_factory {safe_repr(data[0])} vs {safe_repr(gdata[0])}")
        detail = "; ".join(parts) or None
        return StructureMismatchError(
            label, path, describe(ntype, data, arity, expected_name), f"keys {_keys_text(have)}", detail
        )
    if ntype is None:
        hint = None
    elif ntype is NONE:
        hint = "None is a node with no children, not a leaf: to treat it as a leaf pass is_leaf=lambda x: x is None"
    return StructureMismatchError(
        label,
        path,
        describe(ntype, data, arity, expected_name),
        describe(gtype, gdata, garity, got_name),
        detail,
        hint,
    )


# -- comparing node data ----------------------------------------------------------------------
class Incomparable(Exception):
    """What :func:`same_node_data` raises: ``==`` raised ``error``, or gave a ``result_type``
    other than bool. Never leaves this module: each caller words it with its place."""

    def __init__(self, result_type: type | None, error: Exception | None) -> None:
        super().__init__(result_type, error)
        self.result_type = result_type
        self.error = error

    def detail(self) -> str:
        if self.error is not None:
            text = _safe_str(self.error).partition("\n")[0].strip()
            text = text if len(text) <= 80 else text[:77] + "..."
            how = f"raised {_type_name(type(self.error))}" + (f": {text}" if text else "")
        else:
            how = f"gave {_type_name(self.result_type)}, not True or False"
        return f"the node data could not be compared: == {how}"


DATA_HINT = (
    "node data are compared with ==, which must give True or False: keep arrays out of node data "
    "(make them children), or give the node data an __eq__ that returns a bool"
)


def _safe_str(value: Any) -> str:
    """``str(value)``, or ``''`` if that raises."""
    try:
        return str(value)
    except Exception:
        return ""


def _type_name(cls: Any) -> str:
    module = getattr(cls, "__module__", None)
    name = getattr(cls, "__qualname__", None) or safe_repr(cls, 40)
    return name if module in ("builtins", None) else f"{module}.{name}"


def same_node_data(a: Any, b: Any) -> bool:
    """Whether node data ``a`` and ``b`` are equal: ``a is b``, else ``a == b``, which must give
    ``True`` or ``False`` (numpy's ``bool_`` counts as its value). The one comparison of node
    data: the guided walk's, and ``TreeDef.__eq__``'s wherever comparing the records as
    tuples raises (node data that give a bool compare the same either way).

    An array's ``==`` gives an array, and jax's C++ ``==`` asks for its truth (which numpy
    refuses for more than one element, and gives for one). Here any result but a bool is
    refused, whatever its size, so that whether two trees match never depends on how many
    elements their node data hold.

    >>> same_node_data(('a', 'b'), ('a', 'b')), same_node_data(None, 1)
    (True, False)

    Raises:
        Incomparable: If ``a == b`` raises, or gives anything but a bool.
    """
    if a is b:
        return True
    try:
        same = a == b
    except Exception as exc:
        raise Incomparable(None, exc) from exc
    if same is True or same is False:
        return same
    kind = type(same)
    if kind.__module__ == "numpy" and kind.__name__ in ("bool_", "bool"):  # its names in numpy 1 and 2
        return bool(same)
    raise Incomparable(kind, None)


def incomparable(
    label: str, path: KeyPath, expected: Node, got_data: Any, problem: Incomparable
) -> StructureMismatchError:
    """The error for node data at ``path`` that could not be compared with ``expected``'s."""
    return StructureMismatchError(
        label,
        path,
        describe(expected[0], expected[1], expected[2]),
        f"node data {safe_repr(got_data, 80)}",
        problem.detail(),
        DATA_HINT,
    )

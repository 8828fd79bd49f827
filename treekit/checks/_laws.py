"""A checker for node registrations: :func:`check_node_type` and the laws it checks.

Public through :mod:`treekit.testing`. Imports hypothesis; jax only for the ``jit`` law.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis.errors import NoSuchExample
from hypothesis.strategies import SearchStrategy

from treekit.core import NodeType, load_jax, lookup
from treekit.ops import tree_flatten, tree_map, tree_map_with_path, tree_unflatten

__all__ = ["LAWS", "BrokenLaw", "NodeTypeLawError", "NodeTypeReport", "check_node_type"]


LAWS = ("round_trip", "keys_count", "keys_agree", "deterministic", "node_data_hashable", "survives_map", "jit")
"""The laws :func:`check_node_type` checks, in its order. For an instance ``x``:

- ``round_trip``: ``tree_unflatten(*reversed(tree_flatten(x)))`` equals ``x`` and has its type.
- ``keys_count``: flattening with keys gives one key entry per child.
- ``keys_agree``: flattening with and without keys gives the same children and node data.
- ``deterministic``: flattening twice gives the same children, node data, keys and treedef.
- ``node_data_hashable``: the node data hashes and equals itself (treedefs hash it).
- ``survives_map``: ``tree_map(lambda v: v, x)`` and ``tree_map_with_path`` equal ``x``.
- ``jit``: ``jax.jit(lambda t: t)`` gives back ``x``'s structure and leaves (leaves replaced
  by numbers first).
"""


@dataclass(frozen=True)
class BrokenLaw:
    """One law a registration breaks, with the (shrunk) instance that shows it."""

    law: str
    example: Any
    message: str

    def __str__(self) -> str:
        return f"{self.law}: {self.message}; x = {_short(self.example)}"


class NodeTypeLawError(AssertionError):
    """A node registration breaks laws: ``broken`` lists each, with its example."""

    def __init__(self, cls: type, broken: Sequence[BrokenLaw]) -> None:
        lines = [f"{cls.__qualname__} breaks {len(broken)} of the pytree node laws:"]
        lines += [f"  {item}" for item in broken]
        super().__init__("\n".join(lines))
        self.cls = cls
        self.broken = tuple(broken)


@dataclass(frozen=True)
class NodeTypeReport:
    """What :func:`check_node_type` checked: the laws that held and the ones it skipped (and why)."""

    cls: type
    held: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _leaf_equal(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if getattr(a, "shape", None) != getattr(b, "shape", None):
        return False
    try:
        result = a == b
        if isinstance(result, bool):
            return result
        every = getattr(result, "all", None)  # numpy and jax arrays
        return bool(every()) if every is not None else bool(result)
    except Exception:
        return False


def _tree_equal(a: Any, b: Any) -> bool:
    """Same type, same treedef, leaves equal (arrays elementwise): :func:`check_node_type`'s default.

    >>> _tree_equal({'a': [1, 2]}, {'a': [1, 2]}), _tree_equal([1], (1,)), _tree_equal([1], [2])
    (True, False, False)
    """
    leaves_a, treedef_a = tree_flatten(a)
    leaves_b, treedef_b = tree_flatten(b)
    return (
        type(a) is type(b)
        and treedef_a == treedef_b
        and len(leaves_a) == len(leaves_b)
        and all(map(_leaf_equal, leaves_a, leaves_b))
    )


Law = Callable[[Any, NodeType, Callable[[Any, Any], bool]], "str | None"]


def _round_trip(x: Any, ntype: NodeType, eq: Callable[[Any, Any], bool]) -> str | None:
    leaves, treedef = tree_flatten(x)
    y = tree_unflatten(treedef, leaves)
    if type(y) is not type(x) or not eq(y, x):
        return f"expected unflatten(flatten(x)) == x, got {_short(y)}"
    return None


def _keys_count(x: Any, ntype: NodeType, eq: Callable[[Any, Any], bool]) -> str | None:
    children, _, keys = ntype.flatten(x, True)
    count = None if keys is None else len(keys)
    if count != len(children):
        return f"expected {len(children)} key entries (one per child), got {count}"
    return None


def _differ(what: str, a: tuple[Any, Any], b: tuple[Any, Any], names: tuple[str, str]) -> str | None:
    (children_a, data_a), (children_b, data_b) = a, b
    children_a, children_b = list(children_a), list(children_b)
    if len(children_a) != len(children_b):
        return f"expected {what}, got {len(children_a)} children {names[0]} and {len(children_b)} {names[1]}"
    for i, (p, q) in enumerate(zip(children_a, children_b)):
        if not _leaf_equal(p, q):
            return f"expected {what}, got child {i} = {_short(p)} {names[0]} and {_short(q)} {names[1]}"
    if not data_a == data_b:
        return f"expected {what}, got node data {_short(data_a)} {names[0]} and {_short(data_b)} {names[1]}"
    return None


def _keys_agree(x: Any, ntype: NodeType, eq: Callable[[Any, Any], bool]) -> str | None:
    plain, keyed = ntype.flatten(x, False), ntype.flatten(x, True)
    names = ("without keys", "with keys")
    return _differ("the same children and node data with and without keys", plain[:2], keyed[:2], names)


def _deterministic(x: Any, ntype: NodeType, eq: Callable[[Any, Any], bool]) -> str | None:
    names = ("the first time", "the second")
    for with_path in (False, True):
        first, second = ntype.flatten(x, with_path), ntype.flatten(x, with_path)
        message = _differ("flatten(x) to give the same children and node data", first[:2], second[:2], names)
        if message:
            return message
        if with_path and list(first[2] or ()) != list(second[2] or ()):
            return f"expected the same key entries, got {first[2]!r:.60} then {second[2]!r:.60}"
    if tree_flatten(x)[1] != tree_flatten(x)[1]:
        return "expected tree_structure(x) == tree_structure(x), got two unequal treedefs"
    return None


def _node_data_hashable(x: Any, ntype: NodeType, eq: Callable[[Any, Any], bool]) -> str | None:
    data = ntype.flatten(x, False)[1]
    try:
        hash(data)
    except TypeError as exc:
        return f"expected hashable node data, got {type(data).__name__} {_short(data)} ({exc})"
    if not data == data:
        return f"expected node data equal to itself, got {_short(data)}"
    return None


def _survives_map(x: Any, ntype: NodeType, eq: Callable[[Any, Any], bool]) -> str | None:
    y = tree_map(lambda v: v, x)
    if type(y) is not type(x) or not eq(y, x):
        return f"expected tree_map(lambda v: v, x) == x, got {_short(y)}"
    y = tree_map_with_path(lambda p, v: v, x)
    if type(y) is not type(x) or not eq(y, x):
        return f"expected tree_map_with_path(lambda p, v: v, x) == x, got {_short(y)}"
    return None


def _jit(x: Any, ntype: NodeType, eq: Callable[[Any, Any], bool]) -> str | None:
    import numpy as np

    jax: Any = load_jax()
    if jax.tree_util.all_leaves([x]):
        return f"expected jax to see {type(x).__qualname__} as a node, got a leaf (it is not registered with jax)"
    leaves, treedef = tree_flatten(x)
    numbered = treedef.unflatten([np.float32(i) for i in range(len(leaves))])
    out = jax.jit(lambda t: t)(numbered)
    got_leaves, got_treedef = tree_flatten(out)
    if got_treedef != treedef:
        return f"expected jax.jit(lambda t: t) to keep the structure {treedef}, got {got_treedef}"
    got = [float(v) for v in got_leaves]
    if got != list(range(len(leaves))):
        return f"expected jax.jit(lambda t: t) to keep the leaves in order, got leaves numbered {got}"
    return None


_LAW_FUNCTIONS: dict[str, Law] = {
    "round_trip": _round_trip,
    "keys_count": _keys_count,
    "keys_agree": _keys_agree,
    "deterministic": _deterministic,
    "node_data_hashable": _node_data_hashable,
    "survives_map": _survives_map,
    "jit": _jit,
}


def check_node_type(
    cls: type,
    instances: SearchStrategy[Any] | Iterable[Any],
    *,
    eq: Callable[[Any, Any], bool] | None = None,
    jit: bool | None = None,
    max_examples: int = 100,
) -> NodeTypeReport:
    """Check that the registration of ``cls`` obeys the node laws (:data:`LAWS`) on ``instances``.

    >>> from hypothesis import strategies as st
    >>> from treekit import register_pytree_node
    >>> class Point:
    ...     def __init__(self, x, y): self.x, self.y = x, y
    ...     def __repr__(self): return f'Point({self.x!r}, {self.y!r})'
    >>> register_pytree_node(Point, lambda p: ((p.y, p.x), None), lambda _, c: Point(*c))  # swaps x and y
    >>> check_node_type(Point, st.builds(Point, st.integers(), st.integers()), jit=False)
    Traceback (most recent call last):
    ...
    treekit.testing.NodeTypeLawError: Point breaks 2 of the pytree node laws:
      round_trip: expected unflatten(flatten(x)) == x, got Point(1, 0); x = Point(0, 1)
      survives_map: expected tree_map(lambda v: v, x) == x, got Point(1, 0); x = Point(0, 1)

    Args:
        cls: A registered node type (built-ins and namedtuple classes too).
        instances: A strategy for instances of ``cls`` (then each broken law is shown on a
            shrunk example), or an iterable of instances (each law is tried on each, in order).
            Their children may be any trees.
        eq: Equality for ``round_trip`` and ``survives_map``; default ``_tree_equal`` (same
            type, treedef and leaves), which works for classes without ``__eq__``; pass
            ``operator.eq`` to use the class's own ``==`` (it also sees attributes the
            registration leaves out).
        jit: Check the ``jit`` law: ``True`` always, ``False`` never; ``None`` (default) when
            jax can be imported and knows ``cls`` (else it is skipped, and the report says why).
        max_examples: Instances tried per law (the ``jit`` law tries at most 10: each compiles).

    Returns:
        A :class:`NodeTypeReport` of the laws that held and the ones skipped.

    Raises:
        NodeTypeLawError: If any law is broken (an ``AssertionError``); it lists every broken
            law with an example, and carries them as ``.broken``.
        TypeError: If ``cls`` is not registered, or an instance is not a ``cls``.
    """
    __tracebackhide__ = True  # a broken law shows the caller's line and the message, not this frame
    ntype = lookup(cls)
    if ntype is None:
        raise TypeError(f"cls: expected a registered node type, got {cls.__qualname__} (a leaf type)")
    equal = _tree_equal if eq is None else eq
    strategy = instances if isinstance(instances, SearchStrategy) else None
    examples = [] if strategy is not None else list(instances)  # type: ignore[arg-type]

    def run(law: Law, x: Any) -> str | None:
        if type(x) is not cls:
            raise TypeError(f"instances: expected instances of {cls.__qualname__}, got {type(x).__name__} {_short(x)}")
        try:
            return law(x, ntype, equal)
        except Exception as exc:
            return f"raised {type(exc).__name__}: {exc}"

    held: list[str] = []
    skipped: list[tuple[str, str]] = []
    broken: list[BrokenLaw] = []
    for name, law in _LAW_FUNCTIONS.items():
        if name == "jit":
            why = _skip_jit(jit, strategy, examples)
            if why:
                skipped.append((name, why))
                continue
        found = _first_broken(law, run, strategy, examples, min(max_examples, 10) if name == "jit" else max_examples)
        if found is None:
            held.append(name)
        else:
            broken.append(BrokenLaw(name, found[0], found[1]))
    if broken:
        raise NodeTypeLawError(cls, broken)
    return NodeTypeReport(cls, tuple(held), tuple(skipped))


def _skip_jit(jit: bool | None, strategy: SearchStrategy[Any] | None, examples: list[Any]) -> str | None:
    """Why the ``jit`` law is skipped, or ``None`` to check it."""
    if jit is not None:
        return None if jit else "jit=False"
    if importlib.util.find_spec("jax") is None:
        return "jax is not installed"
    if strategy is not None:
        examples = [find(strategy, lambda _: True, settings=settings(database=None, derandomize=True))]
    jax: Any = load_jax()
    if examples and jax.tree_util.all_leaves(examples[:1]):
        return f"jax does not know {type(examples[0]).__qualname__} (register it with jax too)"
    return None


def _first_broken(
    law: Law,
    run: Callable[[Law, Any], str | None],
    strategy: SearchStrategy[Any] | None,
    examples: list[Any],
    max_examples: int,
) -> tuple[Any, str] | None:
    """The first instance (shrunk, for a strategy) that breaks ``law``, and the message."""
    if strategy is None:
        for x in examples:
            message = run(law, x)
            if message is not None:
                return x, message
        return None
    config = settings(
        max_examples=max_examples,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        phases=(Phase.generate, Phase.shrink),
    )
    try:
        x = find(strategy, lambda x: run(law, x) is not None, settings=config)
    except NoSuchExample:
        return None
    message = run(law, x)
    assert message is not None
    return x, message


# Their public home (treekit.testing re-exports them), for repr, tracebacks and pickle.
for _cls in (BrokenLaw, NodeTypeLawError, NodeTypeReport):
    _cls.__module__ = "treekit.testing"
del _cls

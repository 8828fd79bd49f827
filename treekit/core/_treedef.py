"""TreeDef: a tree's structure as flat post-order node records, compared, hashed, pickled and
shown; unflatten's builders are ``_build``'s, the guided walk ``_guide``'s."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from operator import itemgetter
from typing import Any

from treekit.core._build import Builder, compiled, interpret, leaves_changed
from treekit.core._core import NATIVE
from treekit.core._errors import (
    StructureMismatchError,
    count_children,
    safe_repr,
)
from treekit.core._guide import guide
from treekit.core._keys import KeyPath
from treekit.core._mismatch import DATA_HINT, Incomparable, describe, same_node_data
from treekit.core._one_level import node_record_data, plain_data
from treekit.core._records import LEAF, Node, checked_records, render_records
from treekit.core._registry import TUPLE, sequence_keys

__all__ = [
    "CONVERTERS",
    "LEAF",
    "Node",
    "TreeDef",
    "as_treedef",
]

_NONE_LEFT: Any = object()
_SHAPE = itemgetter(0, 2)  # what a TreeDef's hash reads of each node: its type and arity


class TreeDef:
    """The structure of a tree: its nodes, without its leaves. Also exported as ``PyTreeDef``.

    Immutable, hashable and picklable; equal when the trees have the same node types, node
    data (dict keys, namedtuple classes, registered node data) and shapes. The hash leaves
    node data out (as jax's does), so node data need only compare, not hash.

    >>> from treekit import tree_structure
    >>> treedef = tree_structure([1, {'a': 2, 'b': (3, 4)}])
    >>> treedef
    PyTreeDef([*, {'a': *, 'b': (*, *)}])
    >>> treedef.num_leaves, treedef.num_nodes
    (4, 7)
    >>> treedef.unflatten('wxyz')
    ['w', {'a': 'x', 'b': ('y', 'z')}]

    ``TreeDef(records)`` (and unpickling, which calls it) checks the records in one pass (see
    ``treekit.core._records.checked_records``): records that did not come out of treekit's walkers are input,
    as a file is. The walkers' own TreeDefs are made without the check (``_trusted``).

    >>> TreeDef(treedef._nodes) == treedef
    True
    >>> TreeDef([(None, None, 0, 1, 1), (None, None, 0, 1, 1)])
    Traceback (most recent call last):
    ValueError: treedef records: expected 1 tree, got 2 (the last record is the root of 1 of the 2 records)
    """

    __slots__ = ("_builder", "_hash", "_nodes")

    def __init__(self, nodes: tuple[Node, ...] | list[Node]) -> None:
        self._nodes = checked_records(nodes)
        self._hash: int | None = None
        self._builder: Builder | None = None  # this structure's compiled builder, once there is one

    @classmethod
    def _trusted(cls, nodes: tuple[Node, ...]) -> TreeDef:
        """``TreeDef(nodes)`` without the check, for records treekit made: the building walker's,
        and a TreeDef's own records (slices, compositions). ``nodes`` must be a tuple of
        records that ``checked_records`` passes. The C core makes its TreeDefs the same way
        (``tk_treedef``: the three slots set, no ``__init__``)."""
        treedef = object.__new__(cls)
        treedef._nodes = nodes
        treedef._hash = None
        treedef._builder = None
        return treedef

    @property
    def num_leaves(self) -> int:
        """The number of leaves."""
        return self._nodes[-1][3]

    @property
    def num_nodes(self) -> int:
        """The number of nodes, leaves included."""
        return len(self._nodes)

    def __eq__(self, other: object) -> bool:
        """Equal node types, shapes and node data, record by record.

        The records are compared as tuples compare, at C speed: node data by identity, then
        ``==`` and its truth (as jax's C++ ``==`` takes it). Where that raises (an array's
        ``==``), they are compared again one by one with :func:`same_node_data`, and the
        ``ValueError`` names the record whose node data could not be compared.
        """
        if type(other) is not TreeDef:
            return False
        a, b = self._nodes, other._nodes
        try:
            return a is b or a == b
        except Exception:
            pass
        if len(a) != len(b):
            return False
        for i, (x, y) in enumerate(zip(a, b)):
            if x is y:
                continue
            if x[0] is not y[0] or x[2] != y[2] or x[3] != y[3] or x[4] != y[4]:
                return False
            try:
                if not same_node_data(x[1], y[1]):
                    return False
            except Incomparable as problem:
                name = getattr(x[0].node_class(x[1]), "__name__", "?")
                raise ValueError(
                    f"treedef record {i}: expected {name} node data that compare, "
                    f"got {safe_repr(x[1], 60)} and {safe_repr(y[1], 60)} ({problem.detail()})\n{DATA_HINT}"
                ) from problem.error
        return True

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        # Node data stays out, as in jax: a registered node's data need not be hashable.
        if self._hash is None:
            self._hash = hash(tuple(map(_SHAPE, self._nodes)))
        return self._hash

    def __reduce__(self) -> tuple[Any, ...]:
        return (TreeDef, (self._nodes,))  # unpickled by TreeDef(records), which checks them

    def __setstate__(self, state: Any) -> None:
        """Unpickling by ``BUILD`` (a pickle made by hand or by ``copyreg``'s default, not by
        ``__reduce__``): its ``_nodes`` checked as ``TreeDef(records)`` checks them."""
        slots = state[1] if type(state) is tuple and len(state) == 2 else state
        records = slots.get("_nodes") if type(slots) is dict else None
        if records is None:
            raise ValueError(f"treedef state: expected a dict with '_nodes', got {safe_repr(state, 60)}")
        self._nodes = checked_records(records)
        self._hash = None
        self._builder = None

    def __repr__(self) -> str:
        return f"PyTreeDef({render_records(self._nodes)})"

    # -- building trees -----------------------------------------------------------------------
    def unflatten(self, leaves: Iterable[Any]) -> Any:
        """Build a tree of this structure from ``leaves`` (dicts in their original key order).

        >>> from treekit import tree_structure
        >>> tree_structure({'b': 0, 'a': 0}).unflatten([1, 2])
        {'b': 2, 'a': 1}

        Args:
            leaves: An iterable of exactly ``num_leaves`` items, in leaf order.

        Returns:
            The tree.

        Raises:
            ValueError: If ``leaves`` does not hold exactly ``num_leaves`` items.
        """
        leaves = leaves if type(leaves) is list else list(leaves)
        if len(leaves) != self._nodes[-1][3]:
            raise ValueError(
                f"leaves: expected {self._nodes[-1][3]} leaves, got {len(leaves)} (for {_short(self)})"
            )
        return self._build(leaves)

    def _build(self, leaves: list[Any]) -> Any:
        """Unflatten without checking the number of leaves."""
        if NATIVE is not None:
            tree = NATIVE.build(self._nodes, leaves)
            if tree is not NATIVE.DEFER:
                return tree
        count = len(leaves)  # (before compiled: its look-up compares node data, which may run code)
        build = self._builder
        if build is None:
            build = compiled(self._nodes)
            if build is None:
                build = interpret
            else:
                self._builder = build
        try:
            tree = build(self._nodes, leaves)
        except (StopIteration, IndexError):  # the leaves ran out: an unflatten function changed the list?
            if len(leaves) == count:
                raise
            raise leaves_changed(count, len(leaves)) from None
        if len(leaves) != count:
            raise leaves_changed(count, len(leaves))
        return tree

    # -- the guided walk ------------------------------------------------------------------------
    def flatten_up_to(self, tree: Any) -> list[Any]:
        """The subtrees of ``tree`` at this treedef's leaves; ``tree`` must extend this structure.

        >>> from treekit import tree_structure
        >>> tree_structure([0, {'a': 0}]).flatten_up_to([(1, 2), {'a': [3]}])
        [(1, 2), [3]]

        Args:
            tree: A tree with this structure, or one whose structure extends it (whole
                subtrees where this treedef has leaves).

        Returns:
            A list of ``num_leaves`` subtrees of ``tree``, in leaf order.

        Raises:
            StructureMismatchError: If ``tree`` differs from this structure above its leaves;
                the message names the first differing key path.
        """
        return self._guide(tree, "tree")

    def _guide(
        self,
        tree: Any,
        label: str,
        strict: bool = False,
        is_leaf: Callable[[Any], bool] | None = None,
        paths: list[KeyPath] | None = None,
        errors: list[tuple[int, int, StructureMismatchError]] | None = None,
    ) -> list[Any]:
        """The guided walk of ``tree`` over this structure: :func:`treekit.core._guide.guide`."""
        return guide(self._nodes, tree, label, strict, is_leaf, paths, errors)

    # -- structure queries ----------------------------------------------------------------------
    def children(self) -> list[TreeDef]:
        """The treedefs of the root's children (``[]`` for a leaf).

        >>> from treekit import tree_structure
        >>> tree_structure([(1, 2), 3]).children()
        [PyTreeDef((*, *)), PyTreeDef(*)]

        Returns:
            A list of treedefs, one per child of the root.
        """
        nodes = self._nodes
        out: list[TreeDef] = []
        end = len(nodes) - 1
        for _ in range(nodes[-1][2]):
            start = end - nodes[end - 1][4]
            out.append(TreeDef._trusted(nodes[start:end]))
            end = start
        out.reverse()
        return out

    def node_data(self) -> tuple[type, Any] | None:
        """``(type, node data)`` of the root, as jax gives it; ``None`` for a leaf.

        >>> from treekit import tree_structure
        >>> tree_structure({'b': 1, 'a': 2}).node_data()
        (<class 'dict'>, ['a', 'b'])

        Returns:
            ``(type, node_data)``: for a dict, its sorted keys as a list; for a namedtuple
            ``(the class, None)``; for a registered class, the node data its flatten
            function gave. ``None`` for a leaf.
        """
        ntype, data = self._nodes[-1][0], self._nodes[-1][1]
        if ntype is None:
            return None
        if ntype.kind == "dict":
            return dict, list(data)
        if ntype.kind == "namedtuple":
            return data, None
        return ntype.type, plain_data(ntype, data)

    # -- jax's PyTreeDef extras ------------------------------------------------------------------
    def walk(
        self,
        f_node: Callable[[tuple[Any, ...], Any], Any],
        f_leaf: Callable[[Any], Any] | None,
        leaves: Iterable[Any],
    ) -> Any:
        """Fold ``leaves`` up this structure: ``f_leaf(leaf)`` at each leaf, then
        ``f_node(children's results as a tuple, node data)`` at each node, bottom-up (jax's).

        >>> from treekit import tree_structure
        >>> tree_structure({'b': [0, 0], 'a': 0}).walk(lambda kids, data: (kids, data), str, [1, 2, 3])
        (('1', (('2', '3'), None)), ['a', 'b'])

        Args:
            f_node: Called as ``f_node(results, node_data)``; ``node_data`` is that of
                :meth:`node_data` without the type (a namedtuple's is its class).
            f_leaf: Called on each leaf; ``None`` keeps the leaf.
            leaves: Exactly ``num_leaves`` values, in leaf order.

        Returns:
            What ``f_node`` returned at the root (``f_leaf``'s result for a leaf treedef).

        Raises:
            ValueError: If ``leaves`` holds too few or too many values.
        """
        it = iter(leaves)
        stack: list[Any] = []
        for ntype, data, arity, _, _ in self._nodes:
            if ntype is None:
                leaf = next(it, _NONE_LEFT)
                if leaf is _NONE_LEFT:
                    raise ValueError(f"leaves: expected {self.num_leaves} leaves, got fewer (for {_short(self)})")
                stack.append(leaf if f_leaf is None else f_leaf(leaf))
                continue
            kids = tuple(stack[len(stack) - arity :])
            del stack[len(stack) - arity :]
            shown = list(data) if ntype.kind == "dict" else plain_data(ntype, data)
            stack.append(f_node(kids, shown))
        if next(it, _NONE_LEFT) is not _NONE_LEFT:
            raise ValueError(f"leaves: expected {self.num_leaves} leaves, got more (for {_short(self)})")
        return stack[0]

    def from_iterable_tree(self, iterable_tree: Any) -> Any:
        """Build a tree of this structure from nested iterables of children (jax's).

        Each node of ``iterable_tree`` is any iterable of that node's children in leaf order
        (``[]`` for ``None``); at this structure's leaves, whatever is there is taken as is.

        >>> from treekit import tree_structure
        >>> tree_structure({'a': (0, 0), 'b': None}).from_iterable_tree([[1, 2], []])
        {'a': (1, 2), 'b': None}

        Args:
            iterable_tree: Nested iterables shaped as this structure.

        Returns:
            The tree, each node rebuilt by its type from its children.

        Raises:
            TypeError: If a node's place holds something that is not iterable.
            ValueError: If a node's iterable holds the wrong number of children; the message
                names its key path (positions in ``iterable_tree``).
        """
        nodes = self._nodes
        out: list[Any] = []
        stack: list[tuple[Any, KeyPath]] = [(iterable_tree, ())]
        j = len(nodes)
        while j:
            j -= 1
            ntype, data, arity = nodes[j][:3]
            sub, path = stack.pop()
            if ntype is None:
                out.append(sub)
                continue
            kids = list(sub)
            if len(kids) != arity:
                raise StructureMismatchError(
                    "iterable_tree", path, f"{count_children(arity)} for {describe(ntype, data, arity)}", str(len(kids))
                )
            stack += [(kid, (*path, key)) for key, kid in zip(sequence_keys(arity), kids)]
        out.reverse()
        return self._build(out)

    @staticmethod
    def from_node_data_and_children(
        registry: Any, node_data: tuple[type, Any] | None, children: Iterable[Any]
    ) -> TreeDef:
        """The treedef whose root is ``node_data`` over ``children`` (jax's), the inverse of
        :meth:`node_data` and :meth:`children`.

        >>> from treekit import default_registry, tree_structure
        >>> treedef = tree_structure({'b': [0, 0], 'a': 0})
        >>> TreeDef.from_node_data_and_children(default_registry, treedef.node_data(), treedef.children())
        PyTreeDef({'a': *, 'b': [*, *]})

        Args:
            registry: ``treekit.default_registry``.
            node_data: ``(type, node data)`` as :meth:`node_data` gives it; ``None`` for a leaf.
                Dict keys may come in any order: each key keeps its child.
            children: The children's treedefs (a JAX ``PyTreeDef`` is converted).

        Returns:
            The :class:`TreeDef`.

        Raises:
            TypeError: If ``registry`` is not treekit's, or a child is not a treedef.
            ValueError: If the type is not registered, or the number of children does not fit
                it (dict keys, namedtuple fields, ``None``).
        """
        node_type = getattr(registry, "_node_type", None)
        if node_type is None:
            raise TypeError(f"registry: expected treekit.default_registry, got {type(registry).__name__}")
        kids = [as_treedef(kid, f"children[{i}]") for i, kid in enumerate(children)]
        if node_data is None:
            if kids:
                raise ValueError(f"children: expected none for a leaf, got {len(kids)}")
            return TreeDef._trusted((LEAF,))
        cls, data = node_data
        ntype = node_type(cls)
        if ntype is None:
            raise ValueError(f"node_data: expected a registered node type, got {getattr(cls, '__qualname__', cls)!r}")
        data, order = node_record_data(ntype, cls, data, len(kids))
        nodes: list[Node] = []
        for k in order:
            nodes += kids[k]._nodes
        leaves = sum(kid.num_leaves for kid in kids)
        nodes.append((ntype, data, len(kids), leaves, len(nodes) + 1))
        return TreeDef(tuple(nodes))  # checked: the root's node data is the caller's

    def compose(self, inner: TreeDef) -> TreeDef:
        """The structure of this tree with a copy of ``inner`` at each leaf.

        >>> from treekit import tree_structure
        >>> tree_structure([0, 0]).compose(tree_structure((0, 0)))
        PyTreeDef([(*, *), (*, *)])

        Args:
            inner: The structure to put at each leaf.

        Returns:
            The composed :class:`TreeDef`; its ``num_leaves`` is the product of the two.

        Raises:
            TypeError: If ``inner`` is not a treedef (a JAX ``PyTreeDef`` is converted).
        """
        inner = as_treedef(inner, "inner")
        inner_nodes = inner._nodes
        inner_leaves, extra = inner.num_leaves, inner.num_nodes - 1
        out: list[Node] = []
        for ntype, data, arity, num_leaves, num_nodes in self._nodes:
            if ntype is None:
                out.extend(inner_nodes)
            else:
                out.append((ntype, data, arity, num_leaves * inner_leaves, num_nodes + num_leaves * extra))
        return TreeDef._trusted(tuple(out))


# Turn another library's treedef into a TreeDef, or answer None (the JAX bridge adds one for
# JAX's PyTreeDef): `converter(value, label)`, where label names the argument in errors.
CONVERTERS: list[Callable[[Any, str], TreeDef | None]] = []


def as_treedef(value: Any, label: str) -> TreeDef:
    """``value`` if it is a TreeDef, else converted from another library's (JAX's ``PyTreeDef``).

    Every argument that takes a treedef goes through here once, at the entry point.

    Raises:
        TypeError: If ``value`` is neither; the message names the argument ``label``.
    """
    if type(value) is TreeDef:
        return value
    for convert in CONVERTERS:
        treedef = convert(value, label)
        if treedef is not None:
            return treedef
    raise TypeError(f"{label}: expected a TreeDef, got {type(value).__name__} {safe_repr(value, 60)}")


def tuple_of(treedefs: Iterable[TreeDef]) -> TreeDef:
    """A tuple node over ``treedefs`` (``treedef_tuple``)."""
    nodes: list[Node] = []
    arity = leaves = 0
    for i, treedef in enumerate(treedefs):
        treedef = as_treedef(treedef, f"treedefs[{i}]")
        nodes.extend(treedef._nodes)
        arity += 1
        leaves += treedef.num_leaves
    nodes.append((TUPLE, None, arity, leaves, len(nodes) + 1))
    return TreeDef._trusted(tuple(nodes))


def _short(treedef: TreeDef) -> str:
    text = repr(treedef)
    return text if len(text) <= 120 else text[:117] + "..."

"""The one building walker: a tree to (leaves, TreeDef, key paths), iteratively."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from itertools import repeat
from typing import Any

from treekit.core._core import NATIVE
from treekit.core._errors import TreeCycleError, flatten_noted, not_a_bool
from treekit.core._keys import FlattenedIndexKey, KeyPath, SequenceKey, keystr
from treekit.core._registry import LIST, MISSING, TUPLE, TYPES, resolve, sequence_keys
from treekit.core._treedef import LEAF, Node, TreeDef

__all__ = ["IsLeaf", "LeafPaths", "flatten", "leaves", "structure"]

_LEAF_RUNS = [(LEAF,) * k for k in range(16)]  # the records of k leaves (extending by a tuple is cheap)

IsLeaf = Callable[..., bool]
"""``is_leaf(x) -> bool`` (or ``is_leaf(path, x)`` with ``is_leaf_takes_path=True``)."""


def flatten(
    tree: Any,
    is_leaf: IsLeaf | None = None,
    with_path: bool = False,
    leaf_takes_path: bool = False,
    label: str = "tree",
) -> tuple[list[Any], TreeDef, list[KeyPath] | None]:
    """Walk ``tree`` depth-first, left to right, with an explicit stack.

    Returns the leaves, the TreeDef (post-order node records) and, with ``with_path``, each
    leaf's key path. Trees up to ``MAX_DEPTH`` levels deep work (deeper ones raise
    ValueError); a container that is its own descendant raises :class:`TreeCycleError`
    naming where the cycle closes. The plain
    variants are this walk with ``with_path=False``: keys are neither made nor kept.
    """
    get = TYPES.get
    seq, tup = LIST, TUPLE
    leaves: list[Any] = []
    nodes: list[Node] = []
    paths: list[KeyPath] | None = [] if with_path else None
    add_leaf, add_node = leaves.append, nodes.append
    keypath: list[Any] = []  # key entries from the root to the current node (with_path only)
    # The current node's state lives in locals; `stack` holds its ancestors' saved states.
    # The root is the one child of a virtual node, so it goes through the same code as any child.
    stack: list[tuple[Any, ...]] = []
    # A container that is its own descendant makes the walk go ever deeper, so cycles are
    # looked for only when the work done (children taken from stacked nodes, plus nodes
    # done) has doubled since the last look. A look scans the path once, and the path is
    # shorter than the work, so all looks together cost at most about two walks' worth; and
    # a cycle is caught before the walk has done twice the work of the tree up to it (a wide
    # container holding itself as its first child is caught a few levels down). The same
    # rare check (`_look`) stops a tree deeper than MAX_DEPTH.
    work = 0
    scan_at = 1000
    look_at = min(scan_at, MAX_DEPTH)
    kids: Any
    kid_data: Any
    kid_keys: Any
    node: Any = None
    ntype: Any = None
    data: Any = None
    children: Any = (tree,)
    n = 1
    i = 0
    keys: Any = None
    prefix: Any = None  # tuple(keypath), made when this node's first path is needed
    leaf_start = node_start = 0
    while True:
        if i < n:
            try:
                child = children[i]
            except IndexError:  # user code (a flatten function, is_leaf) shortened this node
                raise changed_error(label, stack[1:], node if stack else children, n, len(children)) from None
            i += 1
            if is_leaf is None:
                child_type = get(type(child), MISSING)
            else:
                if leaf_takes_path:
                    if prefix is None:
                        prefix = tuple(keypath)
                    stop = is_leaf((*prefix, keys[i - 1]) if stack else (), child)
                else:
                    stop = is_leaf(child)
                if stop is True:
                    child_type = None
                elif stop is False or stop is None:
                    child_type = get(type(child), MISSING)
                else:  # jax's rule: a bool (or None), not numpy's bool_ or 0/1
                    frames = [*stack[1:], (node, ntype, data, children, n, i)] if stack else []
                    raise not_a_bool(label, tuple(_frame_keys(frames)), stop)
            if child_type is MISSING:
                child_type = resolve(type(child))
            if child_type is None:  # a leaf, or what is_leaf takes for one
                add_leaf(child)
                add_node(LEAF)
                if paths is not None:
                    if prefix is None:
                        prefix = tuple(keypath)
                    paths.append((*prefix, keys[i - 1]) if stack else ())
                continue
            if child_type is seq or child_type is tup:  # their flatten, without the call
                kids, kid_data, kid_keys = child, None, sequence_keys(len(child)) if with_path else None
            else:
                try:
                    kids, kid_data, kid_keys = child_type.flatten(child, with_path)
                except Exception as exc:  # the user's exception goes on, noted with the key path
                    frames = [*stack[1:], (node, ntype, data, children, n, i)] if stack else []
                    flatten_noted(label, tuple(_frame_keys(frames)), type(child), exc)
                    raise
            if not kids:
                add_node((child_type, kid_data, 0, 0, 1))
                continue
            if is_leaf is None and get(type(kids[-1]), MISSING) is None:
                # A node whose children are all leaves (most nodes of a parameter tree) is
                # done here, without being stacked: its leaves are copied in one go.
                for kid in kids:
                    if get(type(kid), MISSING) is not None:
                        break
                else:
                    count = len(kids)
                    if kid_keys is not None and len(kid_keys) != count:  # code run since its keys were made changed it
                        count = min(count, len(kid_keys))
                        kids, kid_keys = kids[:count], kid_keys[:count]
                    leaves += kids
                    nodes += _LEAF_RUNS[count] if count < 16 else repeat(LEAF, count)
                    add_node((child_type, kid_data, count, count, count + 1))
                    if paths is not None:
                        if prefix is None:
                            prefix = tuple(keypath)
                        child_path = (*prefix, keys[i - 1]) if stack else ()
                        paths += [(*child_path, key) for key in kid_keys]
                    continue
            work += len(kids)
            if work + len(nodes) >= look_at:  # rarely: see _look
                frame = (node, ntype, data, children, n, i)
                look_at, scan_at = _look(label, stack, frame, child, work + len(nodes), scan_at)
            stack.append((node, ntype, data, children, n, i, keys, prefix, leaf_start, node_start))
            if with_path and len(stack) > 1:
                keypath.append(keys[i - 1])
            # one assignment each: a 6-name tuple assignment builds and unpacks a tuple
            node = child
            ntype = child_type
            data = kid_data
            children = kids
            n = len(kids) if kid_keys is None else min(len(kids), len(kid_keys))  # (as in the leaves' case)
            i = 0
            keys = kid_keys
            prefix = None
            leaf_start = len(leaves)
            node_start = len(nodes)
        else:
            if not stack:
                break
            add_node((ntype, data, n, len(leaves) - leaf_start, len(nodes) - node_start + 1))
            node, ntype, data, children, n, i, keys, prefix, leaf_start, node_start = stack.pop()
            if with_path and stack:
                keypath.pop()
    return leaves, TreeDef._trusted(tuple(nodes)), paths  # (its own records: not checked again)


def changed_error(label: str, ancestors: list[tuple[Any, ...]], node: Any, n: int, now: int) -> ValueError:
    """The error for a node that user code shortened while the walk was inside it; its key
    path from the ``ancestors``' frames (the native walker raises it too)."""
    return ValueError(
        f"{label}{keystr(tuple(_frame_keys(ancestors)))}: expected the {type(node).__name__} to keep its "
        f"{n} children while the tree is walked, got {now} (a flatten function or is_leaf changed it)"
    )


def _frame_keys(frames: list[tuple[Any, ...]]) -> list[Any]:
    """The key entry leading out of each frame (re-flattening with keys: errors only). A node
    that user code has shortened meanwhile (the error may be about that) gives its child's
    index as a key: ``SequenceKey`` for a list or tuple, else ``FlattenedIndexKey``."""
    out = []
    for node, ntype, _, _, _, i in (frame[:6] for frame in frames):
        keys = ntype.flatten(node, True)[2]
        if i - 1 < len(keys):
            out.append(keys[i - 1])
        else:
            out.append(SequenceKey(i - 1) if ntype is LIST or ntype is TUPLE else FlattenedIndexKey(i - 1))
    return out


MAX_DEPTH = 250_000
"""How deep a tree may be: key paths this long always work, two longer always raise ValueError.

Real trees are far shallower; a deeper one is taken for an endless one (a flatten function
that makes a new child each time), and stopped before it fills memory. (jax stops far sooner:
its walker recurses, and Python's recursion limit stops it about 1,000 levels down.)
"""


def _look(
    label: str, stack: list[tuple[Any, ...]], frame: tuple[Any, ...], child: Any, done: int, scan_at: int
) -> tuple[int, int]:
    """Look for a cycle if the work ``done`` has doubled since the last scan, and for too
    deep a tree; return when to look next (``look_at``, ``scan_at``)."""
    if len(stack) >= MAX_DEPTH:
        raise _too_deep(label, [*stack[1:], frame])
    if done >= scan_at:
        scan_at = 2 * done + 1000
        _look_for_cycle(label, [*stack[1:], frame], child)
    # The depth grows by at most one per unit of work: look again before it can pass MAX_DEPTH.
    return min(scan_at, done + MAX_DEPTH - len(stack)), scan_at


def _too_deep(label: str, frames: list[tuple[Any, ...]]) -> ValueError:
    if len(frames) <= 8:
        where = keystr(tuple(_frame_keys(frames)))
    else:  # the first and last few keys of a path too long to print
        where = f"{keystr(tuple(_frame_keys(frames[:4])))}...{keystr(tuple(_frame_keys(frames[-4:])))}"
    return ValueError(
        f"{label}{where}: expected a tree at most {MAX_DEPTH:,} levels deep, got a deeper one "
        "(a flatten function that makes a new child each time makes an endless tree)"
    )


def _look_for_cycle(label: str, frames: list[tuple[Any, ...]], child: Any) -> None:
    """Raise TreeCycleError if a node on the path (the frames' nodes, then ``child``) is its
    own ancestor, naming where the cycle first closes, as a check at every node would."""
    seen: dict[int, int] = {}
    for k, node in enumerate([*(frame[0] for frame in frames), child]):
        depth = seen.setdefault(id(node), k)
        if depth != k:
            keys = _frame_keys(frames[:k])
            raise TreeCycleError(label, tuple(keys), tuple(keys[:depth]), type(node).__name__)


def leaves(tree: Any, is_leaf: IsLeaf | None = None) -> list[Any]:
    """The leaves of ``tree``: ``flatten(tree, is_leaf)[0]`` (the native core makes no records)."""
    return flatten(tree, is_leaf)[0]


def structure(tree: Any, is_leaf: IsLeaf | None = None) -> TreeDef:
    """The structure of ``tree``: ``flatten(tree, is_leaf)[1]`` (the native core keeps no leaves)."""
    return flatten(tree, is_leaf)[1]


class LeafPaths:
    """The key paths of a tree's leaves, each made when asked for: ``paths[i]`` is leaf ``i``'s.

    ``flatten(tree, with_path=True)`` makes every leaf's path, which costs the square of the
    depth on a deep tree with leaves all the way down (a 30,000-deep one: 450 million key
    entries). Code that names only the leaves that fail a check asks here instead: a path
    costs its length, and each node met on the way is flattened once.
    ``treedef`` is ``tree``'s structure under the ``is_leaf`` it was flattened with.
    """

    def __init__(self, tree: Any, treedef: TreeDef) -> None:
        self._tree = tree
        self._nodes = treedef._nodes
        # record index -> (children, keys, their record indices, their first leaves)
        self._met: dict[int, tuple[Any, Any, list[int], list[int]]] = {}

    def __getitem__(self, i: int) -> KeyPath:
        nodes = self._nodes
        if not 0 <= i < nodes[-1][3]:
            raise IndexError(f"leaf {i} of {nodes[-1][3]}")
        end, lo, x = len(nodes) - 1, 0, self._tree
        path = []
        while nodes[end][0] is not None:
            met = self._met.get(end)
            if met is None:
                children, _, keys = nodes[end][0].flatten(x, True)
                ends, firsts = [], []
                k, first = end - 1, lo
                for _ in range(nodes[end][2]):  # the children's records, right to left
                    ends.append(k)
                    k -= nodes[k][4]
                ends.reverse()
                for k in ends:
                    firsts.append(first)
                    first += nodes[k][3]
                met = self._met[end] = (children, keys, ends, firsts)
            children, keys, ends, firsts = met
            c = bisect_right(firsts, i) - 1  # the last child starting at or before leaf i (not empty)
            path.append(keys[c])
            end, lo, x = ends[c], firsts[c], children[c]
        return tuple(path)


def flatten_pairs(
    tree: Any, is_leaf: IsLeaf | None = None, leaf_takes_path: bool = False
) -> tuple[list[tuple[KeyPath, Any]], TreeDef]:
    """``flatten`` with paths, its leaves paired with their key paths: ``(pairs, treedef)``."""
    leaves, treedef, paths = pure_flatten(tree, is_leaf, True, leaf_takes_path)  # (the native one is below)
    assert paths is not None
    return list(zip(paths, leaves)), treedef


pure_flatten = flatten  # the reference, and where the native walker hands over what it does not finish
pure_flatten_pairs = flatten_pairs
if NATIVE is not None:
    flatten = NATIVE.flatten
    leaves = NATIVE.leaves
    structure = NATIVE.structure
    flatten_pairs = NATIVE.flatten_pairs  # its lists and tuples kept from the garbage collector where they can be

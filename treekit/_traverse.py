"""The one building walker: a tree to (leaves, TreeDef, key paths), iteratively."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from treekit._errors import TreeCycleError, flatten_failed
from treekit._keys import KeyPath
from treekit._registry import MISSING, TYPES, NodeType, resolve
from treekit._treedef import LEAF, Node, TreeDef

__all__ = ["IsLeaf", "flatten"]

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
    leaf's key path. Any depth that fits in memory works; a container that is its own
    descendant raises :class:`TreeCycleError` naming where the cycle closes. The plain
    variants are this walk with ``with_path=False``: keys are neither made nor kept.
    """
    get = TYPES.get
    leaves: list[Any] = []
    nodes: list[Node] = []
    paths: list[KeyPath] | None = [] if with_path else None
    keypath: list[Any] = []  # key entries from the root to the current frame (with_path only)

    # The current frame lives in locals; `stack` holds the saved frames above it. The root
    # is the one child of a virtual frame, so it goes through the same code as any child.
    stack: list[tuple[Any, ...]] = []
    active: set[int] = set()  # ids of the nodes on the stack, for cycles
    node: Any = None
    ntype: Any = None
    data: Any = None
    children: Any = (tree,)
    n = 1
    i = 0
    keys: Any = None
    prefix: Any = None  # tuple(keypath), made when this frame's first path is needed
    leaf_start = node_start = 0
    while True:
        if i < n:
            child = children[i]
            i += 1
            if is_leaf is not None:
                if leaf_takes_path:
                    if prefix is None:
                        prefix = tuple(keypath)
                    stop = is_leaf((*prefix, keys[i - 1]) if stack else (), child)
                else:
                    stop = is_leaf(child)
                if stop:
                    leaves.append(child)
                    nodes.append(LEAF)
                    if paths is not None:
                        if prefix is None:
                            prefix = tuple(keypath)
                        paths.append((*prefix, keys[i - 1]) if stack else ())
                    continue
            child_type = get(type(child), MISSING)
            if child_type is MISSING:
                child_type = resolve(type(child))
            if child_type is None:
                leaves.append(child)
                nodes.append(LEAF)
                if paths is not None:
                    if prefix is None:
                        prefix = tuple(keypath)
                    paths.append((*prefix, keys[i - 1]) if stack else ())
                continue
            try:
                kids, kid_data, kid_keys = child_type.flatten(child, with_path)
            except Exception as exc:
                frames = [*stack[1:], (node, ntype, data, children, n, i)] if stack else []
                raise _flatten_failed(label, frames, child_type, exc) from exc
            if not kids:
                nodes.append((child_type, kid_data, 0, 0, 1))
                continue
            ident = id(child)
            if ident in active:
                frames = [*stack[1:], (node, ntype, data, children, n, i)]
                raise _cycle(label, frames, ident, child_type)
            active.add(ident)
            stack.append((node, ntype, data, children, n, i, keys, prefix, leaf_start, node_start))
            if with_path and len(stack) > 1:
                keypath.append(keys[i - 1])
            node, ntype, data, children, n, i = child, child_type, kid_data, kids, len(kids), 0
            keys, prefix, leaf_start, node_start = kid_keys, None, len(leaves), len(nodes)
        else:
            if not stack:
                break
            nodes.append((ntype, data, n, len(leaves) - leaf_start, len(nodes) - node_start + 1))
            active.discard(id(node))
            node, ntype, data, children, n, i, keys, prefix, leaf_start, node_start = stack.pop()
            if with_path and stack:
                keypath.pop()
    return leaves, TreeDef(tuple(nodes)), paths


def _frame_keys(frames: list[tuple[Any, ...]]) -> list[Any]:
    """The key entry leading out of each frame (re-flattening with keys: errors only)."""
    out = []
    for node, ntype, _, _, _, i in (frame[:6] for frame in frames):
        out.append(ntype.flatten(node, True)[2][i - 1])
    return out


def _flatten_failed(label: str, frames: list[tuple[Any, ...]], ntype: NodeType, exc: Exception) -> TypeError:
    return flatten_failed(label, tuple(_frame_keys(frames)), ntype.type, exc)


def _cycle(label: str, frames: list[tuple[Any, ...]], ident: int, ntype: NodeType) -> TreeCycleError:
    keys = _frame_keys(frames)
    depth = next(k for k, frame in enumerate(frames) if id(frame[0]) == ident)
    what = type(frames[depth][0]).__name__
    return TreeCycleError(label, tuple(keys), tuple(keys[:depth]), what)

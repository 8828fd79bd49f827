"""The guided walk: a tree matched against a treedef's node records, node by node, for
``flatten_up_to``, ``tree_map``'s other trees, broadcast, transpose and the structure checks;
its errors name the leftmost mismatch (the C core's ``up_to`` walks the same records)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from treekit.core._core import NATIVE
from treekit.core._errors import StructureMismatchError, flatten_noted, not_a_bool
from treekit.core._keys import KeyPath
from treekit.core._mismatch import Incomparable, incomparable, mismatch, same_node_data
from treekit.core._records import Node
from treekit.core._registry import LIST, MISSING, TUPLE, TYPES, resolve, sequence_keys

__all__ = ["guide"]


def guide(
    nodes: tuple[Node, ...],
    tree: Any,
    label: str,
    strict: bool = False,
    is_leaf: Callable[[Any], bool] | None = None,
    paths: list[KeyPath] | None = None,
    errors: list[tuple[int, int, StructureMismatchError]] | None = None,
    *,
    again: bool = False,
    raised: tuple[int, Exception] | None = None,
) -> list[Any]:
    """The one guided walker: match ``tree`` against ``nodes`` (a treedef's); errors name the leftmost mismatch.

    ``strict`` also requires a leaf wherever this treedef has one (``is_leaf`` decides what
    counts as a leaf there). The walk takes the records in reverse order (root first,
    last child first), so that a node's children go on the stack in one ``extend``, and
    reverses its results at the end. Keys are tracked only with ``paths`` or ``errors``:
    the happy path makes no key entries, and a mismatch found without them is found
    again with them (``again``). With keys, each mismatch and each failing flatten
    function is noted (its key path kept as a link, its error made only if it is raised)
    and the walk goes on past its node; the one raised is the last noted, the leftmost:
    the one a left-to-right walk would meet first. Key paths are made only for ``paths``
    and for the errors made, so that finding a mismatch costs one walk more, at any depth.

    With ``errors`` (a list), mismatches are collected instead of raised: each appends
    ``(start, stop, error)``, left to right, where this treedef's leaves ``start:stop`` lie
    under the mismatched node; those result slots hold ``None`` (and, in ``paths``, the
    node's key path). A failing flatten function still raises (the leftmost one).

    ``raised`` is ``(record index, exception)``: the flatten function of the subtree at
    that record was called (by the walk without keys, or the C core's: ``NATIVE.guide`` and
    ``NATIVE.map`` hand such calls over) and raised that exception; the walk with keys
    takes it as that call's result instead of calling the function again. The walk raises
    it, or a mismatch to its left.
    """
    if NATIVE is not None and paths is None and errors is None and not again:  # without keys, in C
        found_native = NATIVE.guide(nodes, tree, strict, is_leaf)
        if type(found_native) is list:
            return found_native
        if found_native is not NATIVE.DEFER:  # (record index, exception): a flatten function raised
            return guide(nodes, tree, label, strict, is_leaf, again=True, raised=found_native)
    raised_at, raised_exc = (-1, None) if raised is None else raised
    with_path = paths is not None or errors is not None or again
    want_paths = paths is not None
    out: list[Any] = []
    add = out.append
    stack = [tree]
    pop = stack.pop
    # With keys: each subtree's key path as a linked list (parent link, key entry), so
    # that deep trees cost no copying (_unlink makes the tuple), and the paths found,
    # right to left; each problem as (start, stop, link, record, subtree, its record or
    # None, the exception its flatten function raised or None), right to left.
    links: list[Any] = [None]
    found: list[KeyPath] = []
    problems: list[tuple[Any, ...]] = []
    get = TYPES.get
    seq, tup = LIST, TUPLE
    keys: Any
    got: Any
    got_node: Node | None
    cause: Exception | None
    j = len(nodes)
    while j:
        j -= 1
        record = nodes[j]
        sub = pop()
        if with_path:
            link = links.pop()
        ntype = record[0]
        if ntype is None and not strict and is_leaf is None:  # any subtree goes at a leaf
            add(sub)
            if want_paths:
                found.append(_unlink(link))
            continue
        if is_leaf is not None and (leafy := is_leaf(sub)) is not False and leafy is not None:
            if leafy is not True:
                if not with_path:  # found again with the key path
                    return guide(nodes, tree, label, strict, is_leaf, [])
                raise not_a_bool(label, _unlink(link), leafy)
            got = None
        else:
            got = get(type(sub), MISSING)
            if got is MISSING:
                got = resolve(type(sub))
        got_node = cause = None
        if ntype is None:
            if not strict or got is None:
                add(sub)
                if want_paths:
                    found.append(_unlink(link))
                continue
        elif j == raised_at and got is ntype:  # the C core's call of its flatten function raised
            cause = raised_exc
        elif got is ntype:
            try:
                if ntype is seq or ntype is tup:  # their flatten, without the call
                    children, data, keys = sub, None, sequence_keys(len(sub)) if with_path else None
                else:
                    children, data, keys = ntype.flatten(sub, with_path)
            except Exception as exc:
                cause = exc
            else:
                arity = record[2]
                want = record[1]
                try:
                    same = len(children) == arity and (data is want or same_node_data(data, want))
                    same = same and len(children) == arity  # (again: an __eq__ may change a list of children)
                except Incomparable as refused:
                    same, cause = False, refused
                if same:
                    if not strict and record[3] == arity == record[4] - 1:
                        # Every child is a leaf (wide lists, dicts of arrays): take them as they are.
                        out += children[::-1]
                        j -= arity
                        if want_paths:
                            prefix = _unlink(link)
                            found += [(*prefix, key) for key in reversed(keys)]
                        continue
                    stack += children
                    if with_path:
                        links += [(link, key) for key in keys]
                    continue
                got_node = (ntype, data, len(children), 0, 0)
        if not with_path:  # found again with keys (a flatten function's exception passed on, not called again)
            failed = None if cause is None or type(cause) is Incomparable else (j, cause)
            return guide(nodes, tree, label, strict, is_leaf, again=True, raised=failed)
        # A mismatch, or a failing flatten function, at `sub`: noted, and its subtree skipped.
        if got is not None and got_node is None and cause is None:
            try:
                children, data, _ = got.flatten(sub, False)
                got_node = (got, data, len(children), 0, 0)
            except Exception as exc:
                cause = exc
        stop = nodes[-1][3] - len(out)
        problems.append((stop - record[3], stop, link, record, sub, got_node, cause))
        out += [None] * record[3]
        if want_paths:
            found += [_unlink(link)] * record[3]
        j -= record[4] - 1
    out.reverse()
    if not with_path:
        return out
    if raised_exc is not None and not any(problem[6] is raised_exc for problem in problems):
        raise raised_exc  # (the tree changed since the C core walked it: its exception as it is)
    if problems:
        failures = [problem for problem in problems if problem[6] is not None]
        if errors is None or failures:
            _, _, link, record, sub, got_node, cause = (problems if errors is None else failures)[-1]
            path = _unlink(link)
            if cause is None:
                raise mismatch(label, path, record, sub, got_node) from None
            if type(cause) is Incomparable:
                got_data = None if got_node is None else got_node[1]
                raise incomparable(label, path, record, got_data, cause) from cause.error
            raise flatten_noted(label, path, type(sub), cause)  # the user's own exception, noted with its key path
        errors += [
            (start, stop, mismatch(label, _unlink(link), record, sub, got_node))
            for start, stop, link, record, sub, got_node, _ in reversed(problems)
        ]
    if paths is not None:
        found.reverse()
        paths += found
    return out


def _unlink(link: Any) -> KeyPath:
    keys = []
    while link is not None:
        link, key = link
        keys.append(key)
    keys.reverse()
    return tuple(keys)

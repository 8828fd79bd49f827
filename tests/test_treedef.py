"""TreeDef's guided walker: collecting mismatches instead of raising (``errors=``)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from treekit import StructureMismatchError, keystr, tree_structure


def _collect(reference: Any, tree: Any, strict: bool = True) -> tuple[list[Any], list[str], list[tuple[int, int, str]]]:
    errors: list[tuple[int, int, StructureMismatchError]] = []
    paths: list[Any] = []
    out = tree_structure(reference)._walk(tree, "b", strict, None, paths, errors)
    return out, [keystr(p) for p in paths], [(start, stop, str(e).split("\n")[0]) for start, stop, e in errors]


def test_collect_mode_reports_every_mismatch_left_to_right_and_keeps_leaf_slots() -> None:
    reference = {"a": [1, 2], "b": None, "c": {"x": 1, "y": (1, 2)}, "d": 5}
    tree = {"a": [1, 2, 3], "b": 1, "c": {"x": [1], "y": (7, 8)}, "d": 6}
    out, paths, errors = _collect(reference, tree)
    assert out == [None, None, None, 7, 8, 6]
    assert paths == ["['a']", "['a']", "['c']['x']", "['c']['y'][0]", "['c']['y'][1]", "['d']"]
    assert errors == [
        (0, 2, "b['a']: expected list of length 2, got list of length 3"),
        (2, 2, "b['b']: expected None, got leaf 1"),
        (2, 3, "b['c']['x']: expected a leaf, got list of length 1"),
    ]


def test_collect_mode_skips_the_mismatched_subtree_whole() -> None:
    # The root differs: nothing below it is visited or reported.
    out, paths, errors = _collect([[1, 2], {"k": 3}], ([1], 2))
    assert out == [None, None, None]
    assert paths == ["", "", ""]
    assert errors == [(0, 3, "b: expected list of length 2, got tuple of length 2")]


def test_collect_mode_without_mismatch_equals_the_plain_walk() -> None:
    reference = [1, {"a": (2, 3)}]
    tree = [[9], {"a": (8, 7)}]
    out, paths, errors = _collect(reference, tree, strict=False)
    assert out == tree_structure(reference)._walk(tree, "b") == [[9], 8, 7]
    assert paths == ["[0]", "[1]['a'][0]", "[1]['a'][1]"]
    assert errors == []


def test_without_errors_a_mismatch_raises() -> None:
    with pytest.raises(StructureMismatchError, match=r"^b\['a'\]: expected list of length 2, got list of length 3$"):
        tree_structure({"a": [1, 2], "b": None})._walk({"a": [1, 2, 3], "b": None}, "b", True)


def test_the_raised_mismatch_is_the_leftmost_one() -> None:
    # The walk goes right to left; the error must still name the first difference in leaf order.
    from treekit import tree_map

    message = "rest[0]['a']: expected list of length 2, got list of length 3"
    with pytest.raises(StructureMismatchError, match=re.escape(message)):
        tree_map(lambda x, y: x, {"a": [1, 2], "z": (1,)}, {"a": [1, 2, 3], "z": [1]})
    with pytest.raises(StructureMismatchError, match=r"^b\[0\]: expected a leaf, got None$"):
        tree_structure([1, [2], 3])._walk([None, 7, None], "b", True)

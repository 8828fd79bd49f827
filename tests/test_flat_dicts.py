"""params.flatten_dict / unflatten_dict: a key holding the separator is never re-nested silently
(issue 23 item 6: haiku's ``'mlp/~/linear_0'`` came back as ``{'mlp': {'~': {'linear_0': ...}}}``)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from treekit import tree_leaves_with_path
from treekit.params import flatten_dict, unflatten_dict

HAIKU = {"mlp/~/linear_0": {"b": 0, "w": 1}, "mlp/~/linear_1": {"b": 2, "w": 3}}


def _ordered(tree: Any) -> Any:
    """``tree``'s dicts as lists of items, so that ``==`` compares key order too."""
    return [(k, _ordered(v)) for k, v in tree.items()] if isinstance(tree, dict) else tree


def _sorted_with_leaves(tree: Any) -> Any:
    """What the round trip gives back: keys in sorted (leaf) order, sub-dicts without leaves gone."""
    if not isinstance(tree, dict):
        return tree
    out = {k: _sorted_with_leaves(v) for k, v in _with_leaves(tree).items()}
    return {k: out[k] for k in sorted(out)}


def _with_leaves(tree: Any) -> Any:
    """``tree`` without its sub-dicts that hold no leaves (they have no flat key)."""
    if not isinstance(tree, dict):
        return tree
    out = {k: _with_leaves(v) for k, v in tree.items()}
    return {k: v for k, v in out.items() if not (isinstance(v, dict) and not v)}


# -- the errors ------------------------------------------------------------------------------------
HAIKU_MESSAGE = (
    "tree['mlp/~/linear_0']: expected a key without the separator '/', got 'mlp/~/linear_0' "
    "(unflatten_dict would split 'mlp/~/linear_0/b' into 'mlp', '~', 'linear_0', 'b')\n"
    "pass sep=None for tuple keys, or a separator none of the keys hold, e.g. sep='.'"
)

EMPTY_SEP = "sep: expected a non-empty str or None, got ''\npass sep=None for tuple keys"

FLAT_DICT_ERRORS = [
    (lambda: flatten_dict(HAIKU), HAIKU_MESSAGE),
    (
        lambda: flatten_dict({"w": 0, "layer.1": {"w": 1}}, sep="."),
        "tree['layer.1']: expected a key without the separator '.', got 'layer.1' "
        "(unflatten_dict would split 'layer.1.w' into 'layer', '1', 'w')\n"
        "pass sep=None for tuple keys, or a separator none of the keys hold, e.g. sep='/'",
    ),
    (
        lambda: flatten_dict({1.5: 0}, sep="."),
        "tree[1.5]: expected a key without the separator '.', got '1.5' (unflatten_dict would split '1.5' into "
        "'1', '5')\npass sep=None for tuple keys, or a separator none of the keys hold, e.g. sep='/'",
    ),
    (
        lambda: flatten_dict({"a/b": 0, "a.b": {"c/": 1}, "a:b": 2, "a|b": 3}),
        "tree['a.b']['c/']: expected a key without the separator '/', got 'c/' "
        "(unflatten_dict would split 'a.b/c/' into 'a.b', 'c', '')\n"
        "pass sep=None for tuple keys, or a separator none of the keys hold",
    ),
    (  # a separator of 2 characters that two keys together make
        lambda: flatten_dict({"a": {"x": 1}}, sep="aa"),
        "tree['a']['x']: expected keys that 'aa' joins and splits back, got 'a', 'x' "
        "(unflatten_dict would split 'aaax' into '', 'ax')\n"
        "pass sep=None for tuple keys, or a separator none of the keys hold, e.g. sep='/'",
    ),
    (  # 0 and '0' in one dict, under other keys: unflatten_dict would merge them
        lambda: flatten_dict({0: {"a": 1}, "0": {"b": 2}}),
        "tree['0']: expected a key whose text no other key of its node has, got '0', the text of tree[0] too "
        "(unflatten_dict would merge the two)\npass sep=None for tuple keys, which keep each key as it is",
    ),
    (lambda: flatten_dict({0: 1, "0": 2}), "tree['0']: expected a unique flat key, got '0' twice (sep='/')"),
    (lambda: flatten_dict({"a": 1}, sep=""), EMPTY_SEP),
    (lambda: unflatten_dict({}, sep=""), EMPTY_SEP),
]


@pytest.mark.parametrize(("call", "message"), FLAT_DICT_ERRORS, ids=[m.split(":")[0] for _, m in FLAT_DICT_ERRORS])
def test_ambiguous_flat_keys_raise_naming_the_key(call: Any, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        call()


def test_haiku_names_raise_before_any_file_is_written() -> None:
    """The message a user of ``np.savez(**flatten_dict(params))`` with haiku params sees."""
    with pytest.raises(ValueError, match=re.escape(HAIKU_MESSAGE)):
        flatten_dict(HAIKU)


# -- what round-trips ------------------------------------------------------------------------------
@pytest.mark.parametrize("sep", [None, ".", "::"])
def test_haiku_names_round_trip_with_another_sep(sep: str | None) -> None:
    flat = flatten_dict(HAIKU, sep=sep)
    if sep is None:
        assert list(flat) == [(f"mlp/~/linear_{i}", k) for i in (0, 1) for k in "bw"]
    else:
        assert list(flat) == [f"mlp/~/linear_{i}{sep}{k}" for i in (0, 1) for k in "bw"]
    assert _ordered(unflatten_dict(flat, sep=sep)) == _ordered(HAIKU)


@pytest.mark.parametrize(
    "tree",
    [{"": 1}, {"a": {"": 1}}, {"": {"": 1}}, {"a": {"": 1, "b": 2}}, {"": {"a": 1}, "a": {"": 2}}],
    ids=repr,
)
def test_empty_string_keys_round_trip(tree: dict[str, Any]) -> None:
    for sep in ("/", ".", "::", None):
        assert _ordered(unflatten_dict(flatten_dict(tree, sep=sep), sep=sep)) == _ordered(tree)


def test_list_indices_and_str_digits_in_different_places_work_as_before() -> None:
    tree = {"a": [10, 11], "b": {"0": 12}, "c": [{"0": 13}]}
    flat = flatten_dict(tree)
    assert flat == {"a/0": 10, "a/1": 11, "b/0": 12, "c/0/0": 13}
    assert unflatten_dict(flat) == {"a": {"0": 10, "1": 11}, "b": {"0": 12}, "c": {"0": {"0": 13}}}
    assert flatten_dict(tree, sep=None) == {("a", 0): 10, ("a", 1): 11, ("b", "0"): 12, ("c", 0, "0"): 13}
    assert flatten_dict({0: 1, 1: {"0": 2}}) == {"0": 1, "1/0": 2}


def test_sep_none_keeps_every_key_as_it_is() -> None:
    tree = {0: {"a": 1}, "0": {"a/b": 2}, "": {"": 3}, 1.5: 4}
    flat = flatten_dict(tree, sep=None)
    assert flat == {(0, "a"): 1, ("0", "a/b"): 2, ("", ""): 3, (1.5,): 4}
    assert unflatten_dict(flat, sep=None) == tree


# -- laws ------------------------------------------------------------------------------------------
texts = st.text("a/.:", max_size=3) | st.text(max_size=4)  # any text, often holding a separator
nested_dicts = st.recursive(st.integers(), lambda children: st.dictionaries(texts, children, max_size=3), max_leaves=10)
str_dicts = st.dictionaries(texts, nested_dicts, max_size=3)


def _splits_back(tree: dict[str, Any], sep: str) -> bool:
    keys = [[entry.key for entry in path] for path, _ in tree_leaves_with_path(tree)]
    return all(sep.join(parts).split(sep) == parts for parts in keys)


@given(str_dicts, st.sampled_from(["/", ".", "::", "a:"]))
def test_flatten_dict_raises_or_unflatten_dict_gives_the_tree_back(tree: dict[str, Any], sep: str) -> None:
    """Either ValueError, exactly when a key holds ``sep`` (for 1-character separators), or the
    same tree: dict equality and key order (sorted; sub-dicts without leaves do not come back)."""
    if not _splits_back(tree, sep):
        with pytest.raises(ValueError, match=r"expected (a key without the separator|keys that|a unique flat key)"):
            flatten_dict(tree, sep=sep)
        return
    if len(sep) == 1:
        assert not any(sep in k.key for path, _ in tree_leaves_with_path(tree) for k in path)
    back = unflatten_dict(flatten_dict(tree, sep=sep), sep=sep)
    assert back == _sorted_with_leaves(tree)
    assert _ordered(back) == _ordered(_sorted_with_leaves(tree))


@given(str_dicts)
def test_sep_none_always_round_trips(tree: dict[str, Any]) -> None:
    back = unflatten_dict(flatten_dict(tree, sep=None), sep=None)
    assert _ordered(back) == _ordered(_sorted_with_leaves(tree))


mixed_keys = st.integers(0, 2) | st.text("01/", max_size=2)
mixed_trees = st.recursive(st.integers(), lambda c: st.dictionaries(mixed_keys, c, max_size=3), max_leaves=8)
mixed_dicts = st.dictionaries(mixed_keys, mixed_trees, max_size=3)


def _as_text(tree: Any) -> Any:
    return {str(k): _as_text(v) for k, v in tree.items()} if isinstance(tree, dict) else tree


@given(mixed_dicts)
def test_int_and_str_keys_are_never_merged(tree: dict[Any, Any]) -> None:
    """With ``0`` and ``'0'`` keys: either ValueError, or the tree with each key as its text."""
    try:
        flat = flatten_dict(tree)
    except ValueError:
        return
    assert unflatten_dict(flat) == _sorted_with_leaves(_as_text(_with_leaves(tree)))


# -- real haiku params -----------------------------------------------------------------------------
def test_real_haiku_params() -> None:
    hk = pytest.importorskip("haiku")
    jax = pytest.importorskip("jax")

    def forward(x: Any) -> Any:
        return hk.nets.MLP([4, 2])(x)

    params = hk.transform(forward).init(jax.random.key(0), jax.numpy.ones((1, 3)))
    assert "mlp/~/linear_0" in params
    with pytest.raises(ValueError, match=re.escape("tree['mlp/~/linear_0']: expected a key without the separator '/'")):
        flatten_dict(params)
    for sep in (".", None):
        back = unflatten_dict(flatten_dict(params, sep=sep), sep=sep)
        assert _ordered(jax.tree_util.tree_map(lambda x: x.shape, back)) == _ordered(
            jax.tree_util.tree_map(lambda x: x.shape, _sorted_with_leaves(dict(params)))
        )

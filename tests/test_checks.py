"""same_structure, assert_same_structure, tree_diff and the value assertions."""

from __future__ import annotations

import collections
import dataclasses
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import treekit as tk
from treekit import DictKey, Difference, SequenceKey, StructureMismatchError

P = collections.namedtuple("P", "x y")
Q = collections.namedtuple("Q", "x y")


@dataclasses.dataclass
class Layer:
    w: Any
    act: str = tk.static(default="relu")


class Pair:
    """A custom node without keys (children get FlattenedIndexKey) and with node data."""

    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b


@pytest.fixture(autouse=True, scope="module")
def nodes() -> Iterator[None]:
    # Module-scoped (hypothesis refuses function-scoped fixtures), so not conftest's `registered`.
    from treekit.core._registry import remove_type

    tk.register_dataclass(Layer)
    tk.register_pytree_node(Pair, lambda p: ((p.a, p.b), "pair"), lambda _, c: Pair(*c))
    yield
    remove_type(Layer)
    remove_type(Pair)


# -- same_structure / assert_same_structure -------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Mismatch:
    name: str
    a: Any
    b: Any
    message: str


NONE_HINT = "\nNone is a node with no children, not a leaf: to treat it as a leaf pass is_leaf=lambda x: x is None"
MISMATCHES = [
    Mismatch(
        "sequence length", {"w": [1, 2]}, {"w": [1, 2, 3]}, "b['w']: expected list of length 2, got list of length 3"
    ),
    Mismatch("node type", [1, 2], (1, 2), "b: expected list of length 2, got tuple of length 2"),
    Mismatch(
        "dict keys",
        {"w": 1, "b": 2},
        {"w": 1, "x": 2},
        "b: expected dict with keys ['b', 'w'], got keys ['w', 'x'] (missing 'b'; extra 'x')",
    ),
    Mismatch("namedtuple type", P(1, 2), Q(1, 2), "b: expected namedtuple P, got namedtuple Q"),
    Mismatch("leaf against node", [1], [[1]], "b[0]: expected a leaf, got list of length 1"),
    Mismatch("node against leaf", [[1]], [1], "b[0]: expected list of length 1, got leaf 1"),
    Mismatch("None against leaf", [None], [1], "b[0]: expected None, got leaf 1" + NONE_HINT),
    Mismatch("leaf against None", [1], [None], "b[0]: expected a leaf, got None"),
    Mismatch("empty containers", [], {}, "b: expected list of length 0, got dict with keys []"),
    Mismatch(
        "dataclass node data",
        Layer(1),
        Layer(1, "gelu"),
        "b: expected Layer with 1 child and node data ('relu',), got Layer with 1 child and node data ('gelu',)",
    ),
    Mismatch(
        "inside a custom node",
        Pair(1, [2]),
        Pair(1, [2, 3]),
        "b[<flat index 1>]: expected list of length 1, got list of length 2",
    ),
    Mismatch(
        "custom node against tuple",
        [Pair(1, 2)],
        [(1, 2)],
        "b[0]: expected Pair with 2 children and node data 'pair', got tuple of length 2",
    ),
    Mismatch("string leaf against list", ["ab"], [["a", "b"]], "b[0]: expected a leaf, got list of length 2"),
    Mismatch(
        "the first of two differences",
        {"a": [1, 2], "z": (1,)},
        {"a": [1, 2, 3], "z": [1]},
        "b['a']: expected list of length 2, got list of length 3",
    ),
]


@pytest.mark.parametrize("case", MISMATCHES, ids=lambda c: c.name)
def test_assert_same_structure_names_the_first_difference(case: Mismatch) -> None:
    assert not tk.same_structure(case.a, case.b)
    with pytest.raises(StructureMismatchError, match="^" + re.escape(case.message) + "$") as info:
        tk.assert_same_structure(case.a, case.b)
    assert info.value.label == "b"


SAME = [
    ("leaves of other types", {"w": [1, 2.0], "s": "ab"}, {"w": ["x", np.zeros(2)], "s": 3}),
    ("None", [None, {"a": None}], [None, {"a": None}]),
    ("empty containers", [[], (), {}], [[], (), {}]),
    ("scalar roots", 1, "abc"),
    ("custom nodes", [Pair(1, Layer(2))], [Pair("a", Layer("z"))]),
    ("dict insertion order", {"a": 1, "b": 2}, {"b": 2, "a": 1}),
]


@pytest.mark.parametrize(("name", "a", "b"), SAME, ids=[c[0] for c in SAME])
def test_same_structure_ignores_leaf_values(name: str, a: Any, b: Any) -> None:
    assert tk.same_structure(a, b)
    tk.assert_same_structure(a, b)


def test_is_leaf_applies_to_both_trees() -> None:
    assert not tk.same_structure([None], [1])
    assert tk.same_structure([None], [1], is_leaf=lambda x: x is None)
    assert tk.same_structure([[1, 2]], [3], is_leaf=lambda x: type(x) is list and len(x) == 2)
    pairs_are_leaves = lambda x: type(x) is tuple and len(x) == 2  # noqa: E731
    assert not tk.same_structure([(1, 2)], [(3, 4, 5)], is_leaf=pairs_are_leaves)
    with pytest.raises(StructureMismatchError, match=re.escape("b[0]: expected a leaf, got tuple of length 3")):
        tk.assert_same_structure([(1, 2)], [(3, 4, 5)], is_leaf=pairs_are_leaves)
    assert tk.same_structure([(1, 2)], [(3, 4, 5)], is_leaf=lambda x: type(x) is tuple)


# -- tree_diff ----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class DiffCase:
    name: str
    a: Any
    b: Any
    lines: list[str]
    options: dict[str, Any] = dataclasses.field(default_factory=dict)


f32, f64 = np.float32, np.float64
DIFFS = [
    DiffCase("identical", {"w": np.ones((2, 2))}, {"w": np.ones((2, 2))}, []),
    DiffCase(
        "every structural difference, not just the first",
        {"a": [1, 2], "b": None, "c": (1,), "d": P(1, 2)},
        {"a": [1, 2, 3], "b": 1, "c": [1], "d": Q(1, 2)},
        [
            "b['a']: expected list of length 2, got list of length 3",
            "b['b']: expected None, got leaf 1",
            "b['c']: expected tuple of length 1, got list of length 1",
            "b['d']: expected namedtuple P, got namedtuple Q",
        ],
    ),
    DiffCase(
        "dict keys are compared key by key",
        {"dense": {"w": np.zeros((3, 4), f32), "b": np.zeros(4, f32)}},
        {"dense": {"w": np.zeros((4, 4), f32), "bias": np.zeros(4, f32)}},
        [
            "b['dense']['b']: expected f32[4], got no such key",
            "b['dense']['bias']: expected no such key, got f32[4]",
            "b['dense']['w']: expected shape (3, 4), got shape (4, 4)",
        ],
    ),
    DiffCase(
        "missing subtrees are described",
        {"a": {"x": [1, 2]}, "k": 0},
        {"k": 0, "z": None},
        ["b['a']: expected dict with keys ['x'], got no such key", "b['z']: expected no such key, got None"],
    ),
    DiffCase(
        "OrderedDict key order is structure",
        collections.OrderedDict(a=1, b=2),
        collections.OrderedDict(b=1, a=2),
        ["b: expected OrderedDict with keys ['a', 'b'], got keys ['b', 'a'] (same keys in another order)"],
    ),
    DiffCase(
        "shapes and dtypes, each on its own line",
        [np.zeros(3, f32), np.zeros((2, 2), f32)],
        [np.zeros(4, f32), np.zeros((2, 2), f64)],
        ["b[0]: expected shape (3,), got shape (4,)", "b[1]: expected dtype float32, got dtype float64"],
    ),
    DiffCase(
        "flags turn checks off",
        [np.zeros(3, f32), np.zeros(2, f32), 1],
        [np.zeros(4, f32), np.zeros(2, f64), 1.0],
        [],
        {"shapes": False, "dtypes": False},
    ),
    DiffCase(
        "leaf types",
        [np.zeros(2, f32), 1, "a"],
        ["ab", 1.0, "a"],
        ["b[0]: expected f32[2], got str 'ab'", "b[1]: expected int 1, got float 1.0"],
    ),
    DiffCase(
        "values within tolerance",
        {"w": np.array([1.0, 2.0, 0.0, np.nan]), "lr": 0.1, "act": "relu"},
        {"w": np.array([1.0, 2.5, 1e-3, np.nan]), "lr": 0.1 + 1e-12, "act": "gelu"},
        [
            "b['act']: expected 'relu', got 'gelu'",
            "b['w']: expected the values of a['w'], got 2 of 4 different (max abs error 0.5, max rel error inf; "
            "the farthest apart at [1]: 2.0 in a, 2.5 in b; float64)",
        ],
        {"values": True, "rtol": 1e-6},
    ),
    DiffCase(
        "scalar values",
        {"lr": 0.1, "n": 3},
        {"lr": 0.2, "n": 3},
        ["b['lr']: expected 0.1, got 0.2 (abs error 0.1, rel error 1)"],
        {"values": True},
    ),
    DiffCase(
        "values are not compared across shapes",
        [np.zeros(2)],
        [np.ones(3)],
        ["b[0]: expected shape (2,), got shape (3,)"],
        {"values": True, "shapes": False},
    ),
    DiffCase(
        "custom nodes and dataclasses",
        [Pair(np.zeros(2), 1), Layer(np.zeros(2))],
        [Pair(np.zeros(3), 1), Layer(np.zeros(2), "gelu")],
        [
            "b[0][<flat index 0>]: expected shape (2,), got shape (3,)",
            "b[1]: expected Layer with 1 child and node data ('relu',), got Layer with 1 child "
            "and node data ('gelu',)",
        ],
    ),
]


@pytest.mark.parametrize("case", DIFFS, ids=lambda c: c.name)
def test_tree_diff_lists_every_difference_one_per_line(case: DiffCase) -> None:
    diff = tk.tree_diff(case.a, case.b, **case.options)
    assert [str(d) for d in diff] == case.lines
    assert str(diff) == ("\n".join(case.lines) if case.lines else "no differences")


def test_tree_diff_records_hold_paths_kinds_and_both_sides() -> None:
    a = {"w": np.zeros(3, f32), "k": {"x": 1}}
    b = {"w": np.zeros(3, f64), "k": {"y": 1}}
    assert [(p, kind, left, right) for p, kind, left, right in tk.tree_diff(a, b)] == [
        ((DictKey("k"), DictKey("x")), "missing", 1, None),
        ((DictKey("k"), DictKey("y")), "extra", None, 1),
        ((DictKey("w"),), "dtype", "float32", "float64"),
    ]
    [node] = tk.tree_diff([1, 2], [1, [2]])
    assert node == Difference((SequenceKey(1),), "node", "a leaf", "list of length 1")


def test_tree_diff_str_is_capped() -> None:
    diff = tk.tree_diff(list(range(30)), [float(i) for i in range(30)])
    lines = str(diff).splitlines()
    assert len(diff) == 30
    assert len(lines) == 21
    assert lines[0] == "b[0]: expected int 0, got float 0.0"
    assert lines[-1] == "... and 10 more"
    assert len(diff.format(limit=0).splitlines()) == 30


def test_tree_diff_goes_into_nested_key_differences_iteratively() -> None:
    # Keys differ at every level of a chain deeper than the recursion limit; each level is
    # compared under its shared key, in sorted key order ('k' < 'x' < 'y').
    depth = 2000
    a: Any = 1
    b: Any = 2
    for _ in range(depth):
        a, b = {"k": a, "x": 0}, {"k": b, "y": 0}
    diff = tk.tree_diff(a, b, values=True)
    assert len(diff) == 2 * depth + 1
    assert str(diff[0]) == "b" + "['k']" * depth + ": expected 1, got 2 (abs error 1, rel error 1)"
    assert [str(d) for d in diff[-2:]] == ["b['x']: expected 0, got no such key", "b['y']: expected no such key, got 0"]


# -- assertions ---------------------------------------------------------------------------------
def test_assert_trees_all_close_lists_failing_paths_with_errors() -> None:
    a = {"w": np.array([1.0, 2.0, 3.0]), "b": np.zeros(2), "n": [1, 2]}
    b = {"w": np.array([1.0, 2.0001, 3.3]), "b": np.zeros(3), "n": [1, 2]}
    message = (
        "b is not close to a (rtol=0.001, atol=0.0): 2 differences\n"
        "b['b']: expected shape (2,), got shape (3,)\n"
        "b['w']: expected the values of a['w'], got 2 of 3 different (max abs error 0.3, max rel error 0.1; "
        "the farthest apart at [2]: 3.0 in a, 3.3 in b; float64)"
    )
    with pytest.raises(AssertionError, match="^" + re.escape(message) + "$"):
        tk.assert_trees_all_close(a, b, rtol=1e-3)
    tk.assert_trees_all_close(a, {**b, "w": a["w"] + 1e-4, "b": np.zeros(2)}, rtol=0, atol=1e-3)
    tk.assert_trees_all_close([np.float32(1.0), 2], [1.0, np.int64(2)])  # dtypes are not compared


def test_assert_trees_all_close_reports_structure_first() -> None:
    message = "b is not close to a (rtol=1e-06, atol=0.0): 1 difference\nb['x']: expected no such key, got 1"
    with pytest.raises(AssertionError, match="^" + re.escape(message) + "$"):
        tk.assert_trees_all_close({}, {"x": 1})


def test_assert_trees_all_equal_is_exact_and_dtype_strict_with_strict() -> None:
    tk.assert_trees_all_equal([np.array([np.nan, 1.0]), "s", None], [np.array([np.nan, 1.0]), "s", None], strict=True)
    message = (
        "b is not equal to a: 3 differences\n"
        "b[0]: expected the values of a[0], got 1 of 2 different (max abs error 1e-12, max rel error 1e-12; "
        "the farthest apart at [1]: 1.0 in a, 1.000000000001 in b; float64)\n"
        "b[1]: expected dtype int32, got dtype int64\n"
        "b[2]: expected int 1, got float 1.0"
    )
    with pytest.raises(AssertionError, match="^" + re.escape(message) + "$"):
        tk.assert_trees_all_equal(
            [np.array([1.0, 1.0]), np.zeros(2, np.int32), 1],
            [np.array([1.0, 1.0 + 1e-12]), np.zeros(2, np.int64), 1.0],
            strict=True,
        )


def test_the_asserts_take_chex_s_call_forms_and_give_chex_s_results() -> None:
    a, b = {"w": np.ones(3)}, {"w": np.ones(3)}
    c = {"w": np.array([1.0, 2.0, 1.0])}
    with pytest.raises(AssertionError, match=r"^tree 2 \(b\) is not close to tree 0 \(a\)"):
        tk.assert_trees_all_close(a, b, c)  # the third tree is a tree (it was once rtol)
    with pytest.raises(AssertionError, match=r"^tree 3 \(b\) is not equal to tree 0"):
        tk.assert_trees_all_equal(a, b, a, c, a)
    with pytest.raises(AssertionError, match="takes rtol and atol as keywords"):
        tk.assert_trees_all_close(a, {"w": np.ones(3) + 1e-3}, 1e-2)
    with pytest.raises(ValueError, match="expected at least 2 trees, got 1"):
        tk.assert_trees_all_equal(a)
    # rtol is a fraction of the later tree's values, as numpy.testing.assert_allclose(x, y)
    tk.assert_trees_all_close([1.0], [1.1], rtol=0.1 / 1.1 + 1e-12)
    with pytest.raises(AssertionError):
        tk.assert_trees_all_close([1.1], [1.0], rtol=0.1 / 1.1 + 1e-12)
    np.testing.assert_allclose(1.0, 1.1, rtol=0.1 / 1.1 + 1e-12)  # (what chex calls)
    # a scalar against an array of equal values, and 3 against 3.0: equal unless strict
    tk.assert_trees_all_equal({"a": np.array([1.0])}, {"a": np.array(1.0)})
    tk.assert_trees_all_close({"a": np.float32(2.0)}, {"a": np.full((2, 2), 2.0)})
    tk.assert_trees_all_equal([3], [3.0])
    for strict_only in ([{"a": np.array([1.0])}, {"a": np.array(1.0)}], [[np.zeros(2, np.float32)], [np.zeros(2)]]):
        tk.assert_trees_all_close(*strict_only)
        with pytest.raises(AssertionError):
            tk.assert_trees_all_close(*strict_only, strict=True)
    with pytest.raises(AssertionError, match="expected shape \\(2,\\), got shape \\(3,\\)"):
        tk.assert_trees_all_equal([np.zeros(2)], [np.zeros(3)])  # only a scalar broadcasts


_close_pairs = st.tuples(
    st.lists(st.floats(-4, 4, width=32), min_size=1, max_size=4),
    # errors relative to x: 0.105 is within rtol=0.1 of |y| = 1.105 |x|, not of |x|
    st.lists(st.floats(-2**-17, 2**-17) | st.sampled_from([0.0, 0.05, 0.105, -0.105, 0.5]), min_size=1, max_size=4),
    st.sampled_from([(), (1,), "same"]),
    st.sampled_from(["float32", "float64"]),
)


@given(_close_pairs, st.sampled_from([1e-6, 1e-4, 0.1, 0.0]), st.sampled_from([0.0, 1e-6]), st.booleans())
@example(([1.0, -2.0], [0.105], "same", "float64"), 0.1, 0.0, False)  # rtol is a fraction of |y|
def test_the_asserts_agree_with_chex(pair: Any, rtol: float, atol: float, strict: bool) -> None:
    chex = pytest.importorskip("chex")
    values, noise, shape, dtype = pair
    x = np.array(values, np.float64)
    y = (x * (1 + np.resize(np.array(noise), x.shape))).astype(dtype)
    x = x.astype(np.float32)
    if shape != "same":  # a scalar against an array of its value, as tests write them
        x, y = np.full(shape or (), values[0], np.float32), np.array(values[0], dtype)
    for ours, theirs, kwargs in (
        (tk.assert_trees_all_close, chex.assert_trees_all_close, {"rtol": rtol, "atol": atol, "strict": strict}),
        (tk.assert_trees_all_equal, chex.assert_trees_all_equal, {"strict": strict}),
    ):
        for trees in (({"w": x}, {"w": y}), ({"w": x}, {"w": x}, {"w": y})):
            outcomes = []
            for check in (ours, theirs):
                try:
                    check(*trees, **kwargs)
                    outcomes.append("passed")
                except AssertionError:
                    outcomes.append("failed")
            assert outcomes[0] == outcomes[1], (ours.__name__, trees, kwargs)


def test_value_comparison_of_jax_arrays_without_conversions() -> None:
    jnp = pytest.importorskip("jax.numpy")
    a = {"w": jnp.ones((2, 2)), "b": np.zeros(2, np.float32)}
    tk.assert_trees_all_close(a, {"w": np.ones((2, 2), np.float32), "b": jnp.zeros(2)})
    assert [str(d) for d in tk.tree_diff(a, {"w": jnp.ones((2, 3)), "b": jnp.zeros(2, jnp.int32)})] == [
        "b['b']: expected dtype float32, got dtype int32",
        "b['w']: expected shape (2, 2), got shape (2, 3)",
    ]


# -- laws ---------------------------------------------------------------------------------------
_leaves = st.one_of(
    st.none(),
    st.integers(-2, 2),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=2),
    st.builds(np.zeros, st.tuples(st.integers(0, 2)), st.sampled_from([np.float32, np.int8])),
)


def _children(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(st.sampled_from("abc"), children, max_size=3),
        st.tuples(children, children).map(lambda t: P(*t)),
        st.tuples(children, children).map(lambda t: Pair(*t)),
        children.map(Layer),
    )


trees = st.recursive(_leaves, _children, max_leaves=8)


def _same_shape(tree: Any) -> st.SearchStrategy[Any]:
    return st.just(tk.tree_map(lambda _: 0, tree))


pairs = trees.flatmap(lambda a: st.tuples(st.just(a), st.one_of(trees, _same_shape(a))))


@given(pairs)
def test_same_structure_agrees_with_treedef_equality(pair: tuple[Any, Any]) -> None:
    a, b = pair
    assert tk.same_structure(a, b) == (tk.tree_structure(a) == tk.tree_structure(b))


@given(trees)
def test_a_tree_has_no_differences_with_itself(tree: Any) -> None:
    assert tk.tree_diff(tree, tree, values=True) == []
    tk.assert_trees_all_equal(tree, tree)


@given(pairs)
def test_structural_diff_is_empty_exactly_for_the_same_structure_and_starts_at_the_error(pair: tuple[Any, Any]) -> None:
    a, b = pair
    diff = tk.tree_diff(a, b, shapes=False, dtypes=False)
    assert (not diff) == tk.same_structure(a, b)
    if diff:
        with pytest.raises(StructureMismatchError) as info:
            tk.assert_same_structure(a, b)
        error_path = info.value.path
        assert diff[0].path[: len(error_path)] == error_path


def test_value_asserts_under_jit_say_so_and_raise_no_tracer_error() -> None:
    jax = pytest.importorskip("jax")

    def step(w: Any) -> Any:
        tk.assert_trees_all_close({"w": w}, {"w": w + 1})
        return w

    for transform in (jax.jit, jax.grad):
        with pytest.raises(TypeError, match=r"tree 0\['w'\] is f32\[\] being traced .*\n.*chexify"):
            transform(lambda w: step(w).sum())(np.float32(1.0))
    tk.assert_trees_all_equal(jax.jit(lambda w: w * 1)(np.ones(2)), np.ones(2))  # on the outputs: fine


_shaped = st.builds(
    lambda shape, dtype: np.zeros(shape, dtype),
    st.sampled_from([(), (2,), (3,), (2, 3), (6,), (3, 2)]),
    st.sampled_from([np.float32, np.float64, np.int32]),
)
_shaped_trees = st.recursive(
    _shaped, lambda c: st.lists(c, max_size=2) | st.dictionaries(st.sampled_from("ab"), c), max_leaves=4
)


@given(_shaped_trees, _shaped_trees, st.booleans())
def test_the_structure_shape_dtype_and_size_asserts_agree_with_chex(a: Any, b: Any, same_structure: bool) -> None:
    chex = pytest.importorskip("chex")
    others = tk.tree_leaves(b)
    if same_structure and others:  # b's leaves in a's structure (most pairs differ in structure alone)
        count = len(tk.tree_leaves(a))
        b = tk.tree_unflatten(tk.tree_structure(a), (others * count)[:count])
    for name in ("structs", "shapes", "dtypes", "shapes_and_dtypes", "sizes"):
        outcomes = []
        for check in (getattr(tk, f"assert_trees_all_equal_{name}"), getattr(chex, f"assert_trees_all_equal_{name}")):
            try:
                check(a, b)
                outcomes.append("passed")
            except AssertionError:
                outcomes.append("failed")
        assert outcomes[0] == outcomes[1], name


@given(_shaped_trees, st.sampled_from([(), (2,), (3,), (2, 3), (3, 2), (6,)]), st.booleans())
def test_shape_prefix_suffix_and_only_arrays_agree_with_chex(tree: Any, dims: Any, add_number: bool) -> None:
    chex = pytest.importorskip("chex")
    if add_number:
        tree = {"tree": tree, "lr": 0.5}
    for name, args in (
        ("assert_tree_shape_prefix", (tree, dims)),
        ("assert_tree_shape_suffix", (tree, dims)),
        ("assert_tree_has_only_ndarrays", (tree,)),
        ("assert_tree_shape", (tree, dims)),
    ):
        if add_number and name != "assert_tree_has_only_ndarrays":
            continue  # (chex reads a Python number's shape and fails on it: no comparison to make)
        outcomes = []
        for check in (getattr(tk, name), getattr(chex, name)):
            try:
                check(*args)
                outcomes.append("passed")
            except AssertionError:
                outcomes.append("failed")
        assert outcomes[0] == outcomes[1], name


@given(st.lists(st.floats(-1e3, 1e3, width=32), min_size=1, max_size=4), st.integers(0, 40), st.integers(0, 4),
       st.sampled_from(["float32", "float16", "bfloat16"]))
def test_the_ulp_assert_agrees_with_chex(values: list[float], steps: int, maxulp: int, dtype: str) -> None:
    chex = pytest.importorskip("chex")
    jnp = pytest.importorskip("jax.numpy")
    x = jnp.asarray(values, dtype)
    y = x
    for _ in range(steps % 5):  # a few representable steps up
        y = jnp.nextafter(y, jnp.asarray(jnp.inf, dtype))
    outcomes = []
    for check in (tk.assert_trees_all_close_ulp, chex.assert_trees_all_close_ulp):
        try:
            check({"x": x}, {"x": y}, maxulp=maxulp)
            outcomes.append("passed")
        except AssertionError:
            outcomes.append("failed")
    assert outcomes[0] == outcomes[1]


def test_where_the_arrays_live_agrees_with_chex() -> None:
    chex = pytest.importorskip("chex")
    jax = pytest.importorskip("jax")
    devices = jax.devices()
    one = jax.device_put(np.ones(4), devices[0])
    trees: list[Any] = [{"w": np.ones(2)}, {"w": one}, {"w": np.ones(2), "v": one}, {"lr": 0.5}]
    if len(devices) > 1:
        mesh = jax.sharding.Mesh(np.array(devices[:2]), ("d",))
        spread = jax.device_put(np.ones(4), jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("d")))
        trees += [{"w": spread}, {"w": spread, "v": one}]
    calls = [
        ("assert_tree_is_on_host", {}),
        ("assert_tree_is_on_host", {"allow_cpu_device": False}),
        ("assert_tree_is_on_host", {"allow_sharded_arrays": True}),
        ("assert_tree_is_on_device", {"platform": "cpu"}),
        ("assert_tree_is_on_device", {}),
        ("assert_tree_is_on_device", {"device": devices[0]}),
        ("assert_tree_is_sharded", {"devices": devices[:2]}),
        ("assert_tree_is_sharded", {"devices": devices[:1]}),
    ]
    for tree in trees:
        for name, kwargs in calls:
            outcomes = []
            for check in (getattr(tk, name), getattr(chex, name)):
                try:
                    check(tree, **kwargs)
                    outcomes.append("passed")
                except AssertionError:
                    outcomes.append("failed")
            assert outcomes[0] == outcomes[1], (name, kwargs, tree)


def test_custom_message_is_the_error_s_first_line_as_chex_s() -> None:
    with pytest.raises(AssertionError, match=r"^after step 3\nb is not close to a"):
        tk.assert_trees_all_close([1.0], [2.0], custom_message="after step {}", custom_message_format_vars=(3,))
    with pytest.raises(AssertionError, match=r"^params differ\nb is not equal to a"):
        tk.assert_trees_all_equal([1], [2], custom_message="params differ")

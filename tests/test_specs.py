"""ShapeDtype, tree_spec, check_spec and assert_tree_shapes."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import treekit as tk
from treekit import ShapeDtype

f32, i32, i64, u8 = np.float32, np.int32, np.int64, np.uint8


def test_shape_dtype_keeps_dtype_names() -> None:
    for dtype in ("float32", "f32", np.float32, np.dtype("float32")):
        assert ShapeDtype((2,), dtype) == ShapeDtype([2], "float32")
    assert ShapeDtype((), "bf16").dtype == "bfloat16"
    assert ShapeDtype((1,)).dtype is None
    assert ShapeDtype((), "torch.int8").dtype == "torch.int8"  # not numpy's: kept as given
    assert str(ShapeDtype(("batch", None, 3), "int8")) == "i8[batch,?,3]"
    assert str(ShapeDtype((), None)) == "?[]"
    assert hash(ShapeDtype((2,), "f32")) == hash(ShapeDtype((2,), np.float32))
    assert tk.tree_leaves([ShapeDtype((2,))]) == [ShapeDtype((2,))]  # a leaf, not a node


SHAPE_EXPECTED = "shape: expected a tuple of dims (ints >= 0, names, None or ...), got "
DTYPE_EXPECTED = "dtype: expected a dtype or a dtype name ('float32', 'f32', 'bfloat16', numpy.float32, ...), got "
BAD_SHAPE_DTYPES = [
    # issue 21 item 3: ShapeDtype(5, 'f32') raised "'int' object is not iterable", ShapeDtype('ab') took
    # two dims 'a' and 'b', and an unknown dtype name ('f33') was kept as if it were one
    (lambda: ShapeDtype(5, "f32"), SHAPE_EXPECTED + "int 5\nwrite (5,) for a shape of one dim"),
    (lambda: ShapeDtype(np.int64(3)), SHAPE_EXPECTED + f"int64 {np.int64(3)!r}\nwrite (3,) for a shape of one dim"),
    (lambda: ShapeDtype("batch"), SHAPE_EXPECTED + "str 'batch'\nwrite ('batch',) for a shape of one named dim"),
    (lambda: ShapeDtype(None), SHAPE_EXPECTED + "None"),
    (lambda: ShapeDtype(2.5), SHAPE_EXPECTED + "float 2.5"),
    (lambda: ShapeDtype({2, 3}), SHAPE_EXPECTED + "set {2, 3}"),
    (lambda: ShapeDtype((5,), "f33"), DTYPE_EXPECTED + "'f33'"),
    (lambda: ShapeDtype((5,), "flaot32"), DTYPE_EXPECTED + "'flaot32'"),
    (lambda: ShapeDtype((5,), ""), DTYPE_EXPECTED + "''"),
    (lambda: ShapeDtype((5,), 3.5), DTYPE_EXPECTED + "float 3.5"),
    (lambda: ShapeDtype((5,), [1]), DTYPE_EXPECTED + "list [1]"),
]


@pytest.mark.parametrize(("call", "message"), BAD_SHAPE_DTYPES, ids=[m.split("got ")[-1] for _, m in BAD_SHAPE_DTYPES])
def test_a_bad_shape_or_dtype_is_a_type_error_naming_it(call: Any, message: str) -> None:
    with pytest.raises(TypeError, match="^" + re.escape(message) + "$"):
        call()


def test_dtype_names_numpy_does_not_know_are_kept_when_they_are_dtypes() -> None:
    """jax's extra dtypes (ml_dtypes), jax's key dtypes, torch's: names numpy cannot read alone."""
    for name in ("bfloat16", "float8_e4m3fn", "int4", "uint2", "key<fry>", "torch.int8", "quint8"):
        assert ShapeDtype((2,), name).dtype == name
    for dtype in ("S5", "U3", [("a", "f4")], "datetime64[ns]"):  # numpy's names round-trip
        spec = ShapeDtype((2,), dtype)
        assert dataclasses.replace(spec, shape=(3,)).dtype == spec.dtype
    assert ShapeDtype((2, 3)).shape == ShapeDtype([2, 3]).shape == ShapeDtype(range(2, 4)).shape == (2, 3)


def test_tree_spec_describes_every_array_leaf() -> None:
    tree = {"w": np.zeros((3, 4), f32), "b": [np.zeros(4, np.int8)], "none": None}
    spec = tk.tree_spec(tree)
    assert spec == {"w": ShapeDtype((3, 4), "float32"), "b": [ShapeDtype((4,), "int8")], "none": None}
    assert tk.check_spec(tree, spec) == {}


def test_tree_spec_gives_non_array_for_leaves_without_shape_and_dtype() -> None:
    assert tk.tree_spec({"x": np.zeros(2), "n": 3, "s": "a"}) == {
        "x": ShapeDtype((2,), "float64"),
        "n": tk.NON_ARRAY,
        "s": tk.NON_ARRAY,
    }


MIXED_LEAVES = st.one_of(
    st.integers(-3, 3), st.text("xy", max_size=2), st.none(), st.sampled_from([np.zeros(2, u8), np.ones((1, 3))])
)


@given(
    st.recursive(
        MIXED_LEAVES,
        lambda kids: st.one_of(st.lists(kids, max_size=3), st.dictionaries(st.text("ab", max_size=2), kids)),
        max_leaves=12,
    )
)
def test_every_tree_fits_its_own_spec(tree: Any) -> None:
    """The law: check_spec(t, tree_spec(t)) holds; a spec's leaves are ShapeDtype for arrays, NON_ARRAY else."""
    spec = tk.tree_spec(tree)
    assert tk.check_spec(tree, spec) == {}
    assert tk.tree_structure(spec) == tk.tree_structure(tree)
    for x, want in zip(tk.tree_leaves(tree), tk.tree_leaves(spec), strict=True):
        assert want == (ShapeDtype(x.shape, x.dtype) if isinstance(x, np.ndarray) else tk.NON_ARRAY)
    assert tk.check_spec(tree, tk.tree_map(lambda _: tk.ANY, tree)) == {}


@dataclasses.dataclass(frozen=True)
class SpecCase:
    name: str
    tree: Any
    spec: Any
    problems: list[str]
    dims: dict[str, Any] = dataclasses.field(default_factory=dict)


SPEC = {"x": ShapeDtype(("batch", 3), "f32"), "y": ShapeDtype(("batch",), "i32")}
BATCH = {"image": ShapeDtype(("*batch", 28, 28), "u8"), "label": ShapeDtype(("*batch",), "i64")}  # a batch spec
SPEC_CASES = [
    SpecCase("matches", {"x": np.zeros((8, 3), f32), "y": np.zeros(8, i32)}, SPEC, [], {"batch": 8}),
    SpecCase(
        "fixed dim, named dim and dtype",
        {"x": np.zeros((8, 4), f32), "y": np.zeros(5, i64)},
        SPEC,
        [
            "tree['x']: expected f32[batch,3], got f32[8,4] (dim 1 is 4, not 3)",
            "tree['y']: expected i32[batch], got i64[5] (dtype int64, not int32; dim 0 is 5, but batch is 8 at "
            "tree['x'])",
        ],
    ),
    SpecCase(
        "rank",
        {"x": np.zeros(8, f32), "y": np.zeros(8, i32)},
        SPEC,
        ["tree['x']: expected f32[batch,3], got f32[8] (rank 1, not 2)"],
    ),
    SpecCase(
        "None dims and dtype take anything",
        [np.zeros((2, 7), i64), np.zeros((), np.bool_)],
        [ShapeDtype((None, 7)), ShapeDtype((), None)],
        [],
    ),
    SpecCase(
        "leaves without shape or dtype are reported by path",
        {"x": "abc", "y": 0.5},
        SPEC,
        [
            "tree['x']: expected f32[batch,3], got str 'abc' (no shape or dtype)",
            "tree['y']: expected i32[batch], got float 0.5 (no shape or dtype)",
        ],
    ),
    SpecCase(
        "every structural difference; dicts compared key by key",
        {"k": {"a": np.zeros(1, f32)}, "l": (np.zeros(1, f32),), "n": None},
        {"k": {"a": ShapeDtype((2,), "f32"), "b": ShapeDtype(())}, "l": [ShapeDtype((1,))], "n": ShapeDtype(())},
        [
            "tree['k']['a']: expected f32[2], got f32[1] (dim 0 is 1, not 2)",
            "tree['k']['b']: expected ?[], got no such key",
            "tree['l']: expected list of length 1, got tuple of length 1",
            "tree['n']: expected a leaf, got None",
        ],
    ),
    SpecCase(
        "names bind across the tree, in leaf order",
        [np.zeros((2, 3)), np.zeros((3, 2)), np.zeros((2, 2))],
        [ShapeDtype(("n", "m")), ShapeDtype(("m", "n")), ShapeDtype(("m", "m"))],
        ["tree[2]: expected shape (m, m), got shape (2, 2) (dim 0 is 2, but m is 3 at tree[0]; dim 1 is 2, but m is 3 "
         "at tree[0])"],
    ),
    SpecCase(
        "a *batch dim: an HF dataset batch",
        {"image": np.zeros((32, 28, 28), u8), "label": np.zeros(32, i64)},
        BATCH,
        [],
        {"*batch": (32,)},
    ),
    SpecCase(
        "a *batch dim may be empty or several dims",
        [
            {"image": np.zeros((28, 28), u8), "label": np.zeros((), i64)},
            {"image": np.zeros((4, 8, 28, 28), u8), "label": np.zeros((4, 8), i64)},
        ],
        [BATCH, {"image": ShapeDtype(("*b", 28, 28), "u8"), "label": ShapeDtype(("*b",), "i64")}],
        [],
        {"*batch": (), "*b": (4, 8)},
    ),
    SpecCase(
        "a *batch dim binds across leaves",
        {"image": np.zeros((32, 28, 28), u8), "label": np.zeros((4, 8), i64)},
        BATCH,
        [
            "tree['label']: expected i64[*batch], got i64[4,8] (dims 0-1 are (4, 8), but *batch is (32,) at "
            "tree['image'])"
        ],
    ),
    SpecCase(
        "a *batch dim reports a missing run and the fixed dims after it",
        {"image": np.zeros((32, 28, 27), u8), "label": np.zeros((), i64)},
        BATCH,
        [
            "tree['image']: expected u8[*batch,28,28], got u8[32,28,27] (dim 2 is 27, not 28)",
            "tree['label']: expected i64[*batch], got i64[] (no dims at 0, but *batch is (32,) at tree['image'])",
        ],
    ),
    SpecCase(
        "... takes any dims, leaf by leaf",
        [np.zeros((2, 3), f32), np.zeros((5, 1, 3), f32), np.zeros(3, f32), np.zeros((), f32)],
        [ShapeDtype((..., 3))] * 3 + [ShapeDtype(("batch", ...))],
        ["tree[3]: expected shape (batch, ...), got shape () (rank 0, not at least 1)"],
    ),
]


@pytest.mark.parametrize("case", SPEC_CASES, ids=lambda c: c.name)
def test_check_spec(case: SpecCase) -> None:
    if not case.problems:
        assert tk.check_spec(case.tree, case.spec) == case.dims
        return
    count = f"{len(case.problems)} problem{'s' if len(case.problems) > 1 else ''}"
    message = f"tree does not match the spec: {count}\n" + "\n".join(case.problems)
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        tk.check_spec(case.tree, case.spec)


def test_variadic_dims_show_and_are_checked() -> None:
    assert str(ShapeDtype(("*batch", 28, 28), "u8")) == "u8[*batch,28,28]"
    assert str(ShapeDtype(("batch", ...), None)) == "?[batch,...]"
    assert ShapeDtype(("batch", ...)).shape == ("batch", ...)
    with pytest.raises(ValueError, match=re.escape("shape: expected at most one variadic dim ('*name' or ...), got")):
        ShapeDtype(("*a", ...))
    with pytest.raises(ValueError, match=re.escape("shape[1]: expected an int >= 0, a name, None or ..., got 2.5")):
        ShapeDtype((1, 2.5))
    assert ShapeDtype((np.int64(3),)).shape == (3,)
    tk.assert_tree_shapes({"x": np.zeros((5, 2, 3))}, {"x": (..., 3)})


@given(st.lists(st.integers(1, 4), max_size=3).map(tuple), st.integers(1, 3))
def test_a_batch_of_any_rank_matches_star_batch(batch: tuple[int, ...], width: int) -> None:
    tree = {"image": np.zeros((*batch, 28, 28), u8), "label": np.zeros(batch, i64)}
    assert tk.check_spec(tree, BATCH) == {"*batch": batch}
    wrong = {"image": tree["image"], "label": np.zeros((*batch, width), i64)}
    with pytest.raises(ValueError, match=re.escape(f"but *batch is {batch} at tree['image']")):
        tk.check_spec(wrong, BATCH)


def test_check_spec_refuses_spec_leaves_without_shape_and_dtype() -> None:
    message = (
        "spec: expected ShapeDtype leaves (or leaves with shape and dtype, ANY or NON_ARRAY), got 1 other leaf\n"
        "spec['x']: expected a leaf with shape and dtype, got int 3"
    )
    with pytest.raises(TypeError, match="^" + re.escape(message) + "$"):
        tk.check_spec({"x": np.zeros(3)}, {"x": 3})


def test_check_spec_with_is_leaf() -> None:
    tree = {"x": np.zeros(2, f32), "meta": None}
    spec = {"x": ShapeDtype((2,), "f32"), "meta": ShapeDtype(())}
    message = "tree['meta']: expected shape (), got NoneType None (no shape or dtype)"
    with pytest.raises(ValueError, match=re.escape(message)):
        tk.check_spec(tree, spec, is_leaf=lambda x: x is None)


def test_jax_arrays_and_shape_dtype_structs() -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    params = {"w": jnp.zeros((3, 4)), "b": jnp.zeros(4, jnp.bfloat16)}
    spec = jax.eval_shape(lambda: params)
    assert tk.check_spec(params, spec) == {}
    assert tk.tree_spec(params) == {"w": ShapeDtype((3, 4), "f32"), "b": ShapeDtype((4,), "bf16")}
    assert ShapeDtype((), jnp.float32).dtype == "float32"
    message = "tree['w']: expected f32[3,4], got f32[3,5] (dim 1 is 5, not 4)"
    with pytest.raises(ValueError, match=re.escape(message)):
        tk.check_spec({"w": np.zeros((3, 5), f32), "b": np.zeros(4, jnp.bfloat16)}, spec)


def test_specs_do_not_import_jax() -> None:
    code = (
        "import sys, numpy as np, treekit as tk\n"
        "spec = tk.tree_spec({'x': np.zeros((2, 3), np.float32)})\n"
        "print(tk.check_spec({'x': np.ones((2, 3), np.float32)}, spec), 'jax' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "{} False"


def test_specs_print_in_format_tree_and_summary() -> None:
    jax = pytest.importorskip("jax")
    tree = {"x": jax.ShapeDtypeStruct((8, 3), np.float32), "s": ShapeDtype(("batch", 3), "bf16")}
    assert tk.summary(tree).splitlines() == [
        "path   shape         dtype     size  bytes",
        "['s']  ('batch', 3)  bfloat16     -      -",
        "['x']  (8, 3)        float32     24     96",
        "total  2 arrays                  24     96",
    ]
    assert tk.format_tree(tree) == "dict\n  ['s']: bf16[batch,3]\n  ['x']: f32[8,3]"


# -- assert_tree_shapes -------------------------------------------------------------------------
def test_assert_tree_shapes_passes_and_binds_names() -> None:
    params = [{"w": np.zeros((2, 3)), "b": np.zeros(3)}, {"w": np.zeros((3, 1)), "b": np.zeros(1)}]
    tk.assert_tree_shapes(params, [{"w": (2, "h"), "b": ("h",)}, {"w": ("h", 1), "b": (None,)}])
    tk.assert_tree_shapes(params, tk.tree_spec(params))
    tk.assert_tree_shapes(np.float32(1), ())


def test_assert_tree_shapes_lists_every_problem() -> None:
    params = {"w": np.zeros((2, 3)), "b": np.zeros(4), "c": [np.zeros(1)], "d": np.zeros((1, 1))}
    message = (
        "tree does not have the shapes of shapes_tree: 3 problems\n"
        "tree['c']: expected list of length 2, got list of length 1\n"
        "tree['d']: expected shape (1,), got shape (1, 1) (rank 2, not 1)\n"
        "tree['w']: expected shape (2, h), got shape (2, 3) (dim 1 is 3, but h is 4 at tree['b'])"
    )
    with pytest.raises(AssertionError, match="^" + re.escape(message) + "$"):
        tk.assert_tree_shapes(params, {"w": (2, "h"), "b": ("h",), "c": [(1,), (1,)], "d": (1,)})


# -- laws ---------------------------------------------------------------------------------------
_arrays = st.builds(
    np.zeros, st.lists(st.integers(0, 3), max_size=3).map(tuple), st.sampled_from([np.float32, np.int8, np.bool_])
)
_array_trees = st.recursive(
    _arrays,
    lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.sampled_from("ab"), c, max_size=2)),
    max_leaves=6,
)


@given(_array_trees)
def test_a_tree_matches_its_own_spec(tree: Any) -> None:
    assert tk.check_spec(tree, tk.tree_spec(tree)) == {}
    tk.assert_tree_shapes(tree, tk.tree_map(lambda x: x.shape, tree))

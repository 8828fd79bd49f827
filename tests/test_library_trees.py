"""Trees as flax, equinox and HF datasets users hold them: typed PRNG keys, sizes, specs with any-leaf fields."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import treekit as tk  # noqa: E402
from treekit import ShapeDtype  # noqa: E402


def key_data(tree: Any) -> list[np.ndarray]:
    return [np.asarray(jax.random.key_data(x)) for x in tk.tree_leaves(tree)]


# -- typed PRNG keys -----------------------------------------------------------------------------
@pytest.mark.parametrize("impl", ["threefry2x32", "rbg"])
def test_typed_keys_stack_and_unstack(impl: str) -> None:
    keys = jax.random.split(jax.random.key(0, impl=impl), 3)
    trees = [{"key": keys[i], "x": jnp.full(2, float(i))} for i in range(3)]
    stacked = tk.tree_stack(trees)
    assert stacked["key"].shape == (3,) and stacked["key"].dtype == keys.dtype
    back = tk.tree_unstack(stacked)
    assert len(back) == 3
    for got, want in zip(back, trees):
        assert np.array_equal(jax.random.key_data(got["key"]), jax.random.key_data(want["key"]))
        assert np.array_equal(got["x"], want["x"])


def test_nnx_rngs_states_stack_and_print_their_specs() -> None:
    nnx = pytest.importorskip("flax.nnx")
    states = [nnx.state(nnx.Rngs(i)) for i in range(4)]
    stacked = tk.tree_stack(states)
    count, key = tk.tree_leaves(stacked)
    assert count.shape == key.shape == (4,) and str(key.dtype) == "key<fry>"
    for got, want in zip(tk.tree_unstack(stacked), states):
        assert tk.tree_structure(got) == tk.tree_structure(want)
        got_keys, want_keys = key_data(got["default"]["key"]), key_data(want["default"]["key"])
        assert all(np.array_equal(a, b) for a, b in zip(got_keys, want_keys, strict=True))
    spec = tk.tree_spec(states[0])
    text = str(spec)  # flax's repr sizes each spec leaf from its dtype's itemsize
    assert "key<fry>" in text and "8 B" in text
    assert tk.tree_leaves(spec) == [ShapeDtype((), "uint32"), ShapeDtype((), "key<fry>")]
    assert tk.check_spec(states[1], spec) == {}
    with pytest.raises(tk.SpecMismatchError, match=r"dtype uint32, not key<fry>"):
        tk.check_spec(tk.tree_map(lambda x: jnp.zeros((), jnp.uint32), states[1]), spec)


def test_typed_keys_show_as_key_impl_and_shape_everywhere() -> None:
    tree = {"rng": jax.random.split(jax.random.key(0, impl="rbg"), 3), "w": jnp.ones(2)}
    assert "['rng']: key<rbg>[3]" in tk.format_tree(tree)
    row = next(line for line in tk.summary(tree, stats=True).splitlines() if line.startswith("['rng']"))
    assert row.split()[1:4] == ["(3,)", "key<rbg>", "3"]
    assert "key&lt;rbg&gt;" in tk.view(tree)._repr_html_() and "key<rbg>" in str(tk.view(tree))
    assert str(tk.tree_spec(tree)["rng"]) == "key<rbg>[3]"
    assert tk.tree_spec(tree)["rng"] == ShapeDtype((3,), "key<rbg>")
    assert hash(tk.tree_spec(tree)["rng"]) == hash(ShapeDtype((3,), "key<rbg>"))


def test_typed_keys_compare_by_their_key_data() -> None:
    nnx = pytest.importorskip("flax.nnx")
    a, b = nnx.state(nnx.Rngs(0)), nnx.state(nnx.Rngs(1))
    tk.assert_trees_all_equal(a, nnx.state(nnx.Rngs(0)))
    tk.assert_trees_all_close(a, a)
    with pytest.raises(AssertionError, match=r"b\['default'\]\['key'\]\.value: .* 1 of 1 different"):
        tk.assert_trees_all_equal(a, b)
    keys = jax.random.split(jax.random.key(0), 3)
    other = jnp.stack([keys[0], jax.random.key(7), keys[2]])
    with pytest.raises(AssertionError, match=r"b\['k'\]: .* 1 of 3 different"):
        tk.assert_trees_all_close({"k": keys}, {"k": other})
    assert [d.path for d in tk.tree_diff({"k": keys}, {"k": other}, values=True)] == [(tk.DictKey("k"),)]


# -- sizes: one rule (arrays count; other leaves are named, not counted) --------------------------
def test_equinox_mlp_sizes_agree_and_summary_names_the_activations() -> None:
    eqx = pytest.importorskip("equinox")
    model = eqx.nn.MLP(8, 4, 16, 2, key=jax.random.key(1))
    arrays = [x for x in jax.tree_util.tree_leaves(model) if eqx.is_array(x)]
    assert tk.tree_size(model, arrays_only=True) == sum(x.size for x in arrays) == 484
    assert tk.tree_size(model) == 486  # optax's count: the two activation functions count 1 each
    assert tk.tree_bytes(model) == sum(x.nbytes for x in arrays)
    lines = tk.summary(model).splitlines()
    assert lines[-2].split()[3:5] == ["484", f"{tk.tree_bytes(model):,}"]
    assert lines[-1].startswith("not counted (not arrays): .activation (")
    assert ".final_activation (function)" in lines[-1]
    view = str(tk.view(model)), tk.view(model)._repr_html_()
    assert "484 params" in view[1] and ".final_activation (function)" in view[1]


def test_only_arrays_count_as_flax_counts_them() -> None:
    nnx = pytest.importorskip("flax.nnx")
    from flax.typing import SizeBytes

    tree = {"lr": 0.1, "step": 3, "flag": True, "name": "adam", "w": jnp.ones(3), "n": np.int32(2)}
    assert tk.tree_size(tree, arrays_only=True) == SizeBytes.from_any(tree).size == 4
    assert tk.tree_bytes(tree) == SizeBytes.from_any(tree).bytes == 16
    assert tk.summary(tree).splitlines()[-2].split()[-2:] == ["4", "16"]
    assert tk.summary(tree).splitlines()[-1] == (
        "not counted (not arrays): ['flag'] (bool), ['lr'] (float), ['name'] (str), and 1 more"
    )
    state = nnx.state(nnx.Linear(3, 2, rngs=nnx.Rngs(0)))
    assert tk.tree_size(state, arrays_only=True) == SizeBytes.from_any(state).size == 8


def test_a_shape_with_unknown_dims_is_an_error_naming_its_path() -> None:
    export = pytest.importorskip("jax.export")
    (b,) = export.symbolic_shape("b")
    with pytest.raises(ValueError, match=r"tree\['x'\]: expected a leaf whose size is known"):
        tk.tree_size({"x": jax.ShapeDtypeStruct((b, 2), jnp.float32)})


# -- specs: ANY and NON_ARRAY --------------------------------------------------------------------
def test_tree_spec_of_an_equinox_module_checks_without_filtering() -> None:
    eqx = pytest.importorskip("equinox")
    model = eqx.nn.MLP(8, 4, 16, 2, key=jax.random.key(1))
    spec = tk.tree_spec(model)
    assert spec.activation is tk.NON_ARRAY and spec.final_activation is tk.NON_ARRAY
    assert tk.check_spec(model, spec) == {}
    swapped = eqx.tree_at(lambda m: m.activation, model, jnp.zeros(3))
    with pytest.raises(tk.SpecMismatchError, match=r"tree\.activation: expected NON_ARRAY .*, got f32\[3\]"):
        tk.check_spec(swapped, spec)


def hf_dataset(datasets: Any, n: int) -> Any:
    features = datasets.Features(
        {
            "image": datasets.Array2D((28, 28), "uint8"),
            "label": datasets.ClassLabel(num_classes=10),
            "text": datasets.Value("string"),
        }
    )
    rows = {"image": [np.full((28, 28), i, np.uint8) for i in range(n)], "label": list(range(n)), "text": ["a cat"] * n}
    return datasets.Dataset.from_dict(rows, features=features)


def docs_hf_spec() -> Any:
    """The ``hf_batch`` spec of docs/checks.md, as the page writes it."""
    text = (Path(__file__).parent.parent / "docs" / "checks.md").read_text()
    lines = text.splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith(">>> hf_batch = "))
    end = next(k for k in range(start + 1, len(lines)) if not lines[k].startswith("... "))
    source = [line[4:] for line in lines[start:end]]
    scope: dict[str, Any] = {"tk": tk, "np": np}
    exec("\n".join(source), scope)
    return scope["hf_batch"]


def test_the_docs_hf_batch_spec_fits_a_real_datasets_batch(hf_datasets: Any) -> None:
    spec = docs_hf_spec()
    ds = hf_dataset(hf_datasets, 8)
    assert tk.check_spec(ds.with_format("jax")[:4], spec) == {"*batch": (4,)}
    assert tk.check_spec(ds.with_format("jax")[0], spec) == {"*batch": ()}
    # what the page says of dtypes: int32 under jax (x64 off), int64 under numpy, uint8 features or not
    jax_batch = ds.with_format("jax")[:4]
    assert {str(x.dtype) for x in (jax_batch["image"], jax_batch["label"])} == {"int32"}
    numpy_batch = ds.with_format("numpy")[:4]
    assert {str(x.dtype) for x in (numpy_batch["image"], numpy_batch["label"])} == {"int64"}
    with pytest.raises(tk.SpecMismatchError, match=r"tree\['label'\]: expected i32\[\*batch\], got i64\[4\]"):
        tk.check_spec(numpy_batch, spec)
    with pytest.raises(tk.SpecMismatchError, match=r"tree\['text'\]: expected NON_ARRAY .*, got str\d+\[4\]"):
        tk.check_spec(numpy_batch, spec)  # numpy gives the strings as an array too
    numpy_spec = {**spec, "label": ShapeDtype(("*batch",), "i64"), "text": ShapeDtype(("*batch",))}
    assert tk.check_spec(numpy_batch, numpy_spec) == {"*batch": (4,)}



def test_a_spec_with_non_array_leaves_is_a_load_template(tmp_path: Path) -> None:
    eqx = pytest.importorskip("equinox")
    model = eqx.nn.MLP(2, 2, 4, 1, key=jax.random.key(0))
    tk.save(tmp_path / "mlp.safetensors", model)
    # final_activation is a lambda the file cannot hold: like must hold it, and a spec leaf does not
    message = r"file\.final_activation: expected a value from like \(the file holds none here\), got NON_ARRAY"
    with pytest.raises(tk.StructureMismatchError, match=message):
        tk.load(tmp_path / "mlp.safetensors", like=tk.tree_spec(model))
    spec = eqx.tree_at(lambda m: m.final_activation, tk.tree_spec(model), model.final_activation)
    tk.assert_trees_all_equal(tk.load(tmp_path / "mlp.safetensors", like=spec), model)
    tree = {"w": np.ones(2, np.float32), "name": "x", "n": 3}
    tk.save(tmp_path / "tree.safetensors", tree)
    tk.assert_trees_all_equal(tk.load(tmp_path / "tree.safetensors", like=tk.tree_spec(tree)), tree)

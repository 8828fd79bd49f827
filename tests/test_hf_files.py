"""Files Hugging Face reads: a PyTorch state dict that treekit saved loads with transformers'
``from_pretrained`` (where torch and transformers are installed), and the names and metadata
it needs hold without them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy")

import treekit  # noqa: E402
from treekit.checkpoint import _safetensors  # noqa: E402


def test_a_state_dict_keeps_its_names_and_says_its_format(tmp_path: Path) -> None:
    state = {"transformer.wte.weight": np.ones((4, 2), np.float32), "transformer.h.0.ln_1.bias": np.zeros(2)}
    treekit.save(tmp_path / "model.safetensors", state)
    header = _safetensors.read_header(tmp_path / "model.safetensors")
    assert sorted(header.tensors) == sorted(state)
    assert header.metadata["format"] == "pt"
    nested = {"params": {"Dense_0": {"bias": np.zeros(3), "kernel": np.ones((2, 3))}}, "layers": [np.ones(1)]}
    treekit.save(tmp_path / "nested.safetensors", nested)
    assert sorted(_safetensors.read_header(tmp_path / "nested.safetensors").tensors) == [
        "layers.0", "params.Dense_0.bias", "params.Dense_0.kernel"
    ]


def test_gpt2_saved_by_treekit_loads_with_from_pretrained(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=100, n_positions=16)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config).eval()
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}  # (random weights)
    treekit.save(tmp_path / "model.safetensors", state)
    config.save_pretrained(tmp_path)
    loaded = transformers.GPT2LMHeadModel.from_pretrained(tmp_path).eval()
    ids = torch.arange(12)[None]
    with torch.no_grad():
        assert torch.equal(model(ids).logits, loaded(ids).logits)
    back = treekit.load(tmp_path / "model.safetensors")  # and treekit reads it back exactly
    assert list(back) == list(state) and all(np.array_equal(back[k], v) for k, v in state.items())


def test_rename_rules_that_miss_name_each_side_in_one_notation(tmp_path: Path) -> None:
    path = tmp_path / "foreign.safetensors"
    _safetensors.write(path, [("model.dense.weight", np.zeros((2, 3), np.float32)), ("model.extra", np.zeros(1))])
    like = {"dense": {"kernel": treekit.ShapeDtype((2, 3), "float32")}}
    with pytest.raises(treekit.StructureMismatchError) as info:
        treekit.load(path, like=like, rename=[(r"^model\.", "")])
    lines = str(info.value).splitlines()
    assert lines[0].startswith("file['dense']['kernel']: expected an array of shape (2, 3)")
    assert lines[0].endswith("got nothing (no tensor 'dense.kernel' in the file)")
    extra = sorted(line.split(": expected")[0] for line in lines[1:])
    assert extra == ["file: tensor 'dense.weight'", "file: tensor 'extra'"]


def _keys() -> Any:
    from hypothesis import strategies as st

    return st.text(alphabet="ab./0[]'", min_size=1, max_size=4)  # (separators and keystr's own marks)


def _trees() -> Any:
    from hypothesis import strategies as st

    leaves = st.integers(0, 3).map(lambda n: np.arange(n, dtype=np.int32))
    return st.recursive(
        st.dictionaries(_keys(), leaves, min_size=1, max_size=3),
        lambda inner: st.dictionaries(_keys(), inner | st.lists(inner, min_size=1, max_size=2), min_size=1, max_size=3),
        max_leaves=8,
    )


def test_any_keys_round_trip_exactly_or_name_the_two_leaves_that_clash(tmp_path: Path) -> None:
    from hypothesis import HealthCheck, given, settings

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(tree=_trees())
    def law(tree: Any) -> None:
        path = tmp_path / "t.safetensors"
        for names in (".", "/", "keystr"):
            try:
                treekit.save(path, tree, names=names)
            except ValueError as exc:  # two leaves' keys joined the same way: both named, never one dropped
                assert names != "keystr" and "expected array leaves with distinct tensor names" in str(exc)
                first, second = str(exc).split(":")[0].split(" and ")
                assert first.startswith("tree[") and second.startswith("tree[") and first != second
                continue
            back = treekit.load(path)
            assert treekit.tree_structure(back) == treekit.tree_structure(tree)
            assert all(np.array_equal(a, b) for a, b in zip(treekit.tree_leaves(back), treekit.tree_leaves(tree)))
            assert len(_safetensors.read_header(path).tensors) == len(treekit.tree_leaves(tree))

    law()

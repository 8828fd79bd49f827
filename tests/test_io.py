"""treekit.save / treekit.load: round trips, atomic writes, no pickle, like= checks, show's loader."""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import pickle
import re
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import treekit
from treekit import StructureMismatchError, _safetensors
from treekit.testing import array_trees, trees

WHY = "unpickling runs code chosen by whoever wrote the file"


class Stats(NamedTuple):
    mean: Any
    count: Any


@dataclasses.dataclass
class Layer:
    w: Any
    b: Any
    act: str = dataclasses.field(default="relu", metadata={"static": True})


def _same(a: Any, b: Any) -> bool:
    """Equal trees: same structure (types, dict order) and leaves of the same type and value."""
    if treekit.tree_structure(a) != treekit.tree_structure(b):
        return False
    if isinstance(a, dict) and list(a) != list(b):
        return False
    for x, y in zip(treekit.tree_leaves(a), treekit.tree_leaves(b)):
        if type(x) is not type(y):
            return False
        if isinstance(x, np.ndarray):
            if x.dtype != y.dtype or x.shape != y.shape or not np.array_equal(x, y, equal_nan=True):
                return False
        elif x != y and not (x != x and y != y):
            return False
    return True


def _round_trip(tmp_path: Path, tree: Any) -> Any:
    name = tmp_path / "t.npz"
    treekit.save(name, tree)
    return treekit.load(name)


def test_every_built_in_node_and_leaf_kind_comes_back(tmp_path: Path, registered: Any) -> None:
    registered(Layer, treekit.register_dataclass)
    tree = {
        "layers": [Layer(np.ones((2, 3), np.float32), np.zeros(3, np.float32), act="gelu"), None],
        (1, "a"): (1, 2.5, True, "s", b"\x00", complex(1, -2), float("nan"), 10**30),
        3: collections.OrderedDict(b=np.int8(3), a=np.arange(4)),
        "counts": collections.defaultdict(int, {"z": 1, "y": 2}),
        "stats": Stats(np.float64(0.5), 3),
        None: [],
        "empty": {},
    }
    back = _round_trip(tmp_path, tree)
    assert _same(back, tree)
    assert list(back) == list(tree)  # insertion order too
    assert list(back["counts"]) == ["z", "y"] and back["counts"].default_factory is int
    assert type(back["stats"]) is Stats and type(back["stats"].mean) is np.float64
    assert back["layers"][0].act == "gelu"


@given(trees(st.one_of(st.integers(), st.floats(), st.text(max_size=3), st.booleans())))
def test_round_trip_of_any_tree(tree: Any) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        assert _same(_round_trip(Path(folder), tree), tree)


@given(array_trees())
def test_round_trip_of_array_trees(tree: Any) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        assert _same(_round_trip(Path(folder), tree), tree)


def test_the_file_is_a_plain_npz_without_pickles(tmp_path: Path) -> None:
    treekit.save(tmp_path / "t.npz", {"w": np.ones(2), "lr": 0.1})
    with np.load(tmp_path / "t.npz", allow_pickle=False) as data:  # arrays named as flatten_dict names them
        assert sorted(data.files) == ["__treekit__", "w"]
        assert data["w"].tolist() == [1.0, 1.0]


def test_a_file_of_the_first_release_loads(tmp_path: Path) -> None:
    """Record version 1 (treekit 0.2.0's .npz): arrays named 0, 1, ..., no key paths, raw bf16 bytes."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    record = {
        "format": "treekit.save",
        "version": 1,
        "nodes": [
            {"array": "0", "dtype": "int64", "scalar": True},
            {"value": 0.5},
            {"node": "tuple", "n": 2},
            {"array": "1", "dtype": "bfloat16"},
            {"node": "dict", "n": 2, "keys": ["opt", "w"], "order": ["w", "opt"]},
        ],
    }
    w = np.array([1.5, -2.0], ml_dtypes.bfloat16)
    raw = np.frombuffer(json.dumps(record).encode(), np.uint8)
    np.savez(tmp_path / "old.npz", **{"0": np.array(3), "1": w.view("V2"), "__treekit__": raw})
    back = treekit.load(tmp_path / "old.npz")
    assert list(back) == ["w", "opt"] and back["w"].dtype == w.dtype and back["w"].tolist() == [1.5, -2.0]
    assert type(back["opt"][0]) is np.int64 and back["opt"][1] == 0.5
    restored = treekit.load(tmp_path / "old.npz", like={"w": w, "opt": (np.int64(0), 0.0)})
    assert restored["w"].dtype == w.dtype and restored["opt"] == (3, 0.5)


def test_keys_named_like_record_fields_and_a_root_leaf_round_trip(tmp_path: Path) -> None:
    tree = {"node": np.ones(1), "template": np.zeros(1), "value": {"array": np.arange(2)}, "path": 1}
    treekit.save(tmp_path / "t.safetensors", tree)
    for back in (treekit.load(tmp_path / "t.safetensors"), treekit.load(tmp_path / "t.safetensors", like=tree)):
        assert _same(back, tree)
    assert treekit.load_leaf(tmp_path / "t.safetensors", "['value']['array']").tolist() == [0, 1]
    treekit.save(tmp_path / "root.safetensors", np.arange(3))  # the root's key path is '': its tensor another name
    assert treekit.load(tmp_path / "root.safetensors").tolist() == [0, 1, 2]
    assert treekit.load_leaf(tmp_path / "root.safetensors", ()).tolist() == [0, 1, 2]
    assert treekit.metadata(tmp_path / "root.safetensors") == treekit.ShapeDtype((3,), "int64")


@pytest.mark.parametrize("start", [b"\x80", b"\x80\x02"], ids=["0x80", "as pickle protocol 2 starts"])
def test_a_header_length_that_starts_as_a_pickle_does_is_still_safetensors(
    tmp_path: Path, start: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    """The header length's low byte is 0x80 in 1 file in 32 (it is a multiple of 8)."""
    from treekit.__main__ import main

    name = tmp_path / "t.safetensors"
    for k in range(0, 4096, 8):  # a string leaf of each length, until the file starts so
        tree = {"w": np.arange(3.0), "note": "x" * k}
        treekit.save(name, tree)
        if name.read_bytes().startswith(start):
            break
    else:
        pytest.fail(f"no file started with {start!r}")
    assert _same(treekit.load(name), tree) and _same(treekit.load(name, like=tree), tree)
    assert treekit.metadata(name)["note"] == tree["note"]
    assert treekit.load_leaf(name, "['w']").tolist() == [0.0, 1.0, 2.0]
    assert main(["show", str(name)]) == 0 and "['w']" in capsys.readouterr().out


def test_other_names_save_the_safetensors_layout(tmp_path: Path) -> None:
    safetensors = pytest.importorskip("safetensors")
    name = tmp_path / "t.safetensors"
    tree = {"mlp/~/linear_0": {"w": np.ones((2, 3), np.float32)}, "step": np.int64(3), "lr": 0.1, 0: [np.zeros(2)]}
    treekit.save(name, tree)
    with safetensors.safe_open(name, "numpy") as f:  # the file other tools read, arrays named as they name them
        assert sorted(f.keys()) == ["0.0", "mlp/~/linear_0.w", "step"]
        assert f.get_tensor("mlp/~/linear_0.w").tolist() == [[1.0] * 3] * 2
        assert f.metadata()["format"] == "pt"  # (Hugging Face's loaders ask for it)
        assert json.loads(f.metadata()["__treekit__"])["format"] == "treekit.save"
    treekit.save(name, tree, names="keystr")
    with safetensors.safe_open(name, "numpy") as f:
        assert sorted(f.keys()) == ["['mlp/~/linear_0']['w']", "['step']", "[0][0]"]
    for names in (".", "/", "keystr"):  # every naming round-trips exactly, by the recorded key paths
        treekit.save(name, tree, names=names)
        got = treekit.load(name)
        assert list(got) == list(tree) and got["lr"] == 0.1 and got[0][0].tolist() == [0.0, 0.0]
        assert treekit.load_leaf(name, "['mlp/~/linear_0']['w']").shape == (2, 3)
    back = treekit.load(name)
    assert list(back) == list(tree) and back["lr"] == 0.1 and back["step"] == 3 and type(back["step"]) is np.int64
    assert back["mlp/~/linear_0"]["w"].dtype == np.float32 and type(back[0]) is list
    mapped = treekit.load(name, mmap=True)
    w = mapped["mlp/~/linear_0"]["w"]
    assert not w.flags.writeable and not w.flags.owndata and w.tolist() == [[1.0] * 3] * 2


def test_two_leaves_with_one_tensor_name_are_an_error_naming_both(tmp_path: Path) -> None:
    tree = {"a.b": np.zeros(2), "a": {"b": np.ones(2)}, "c": {"d": 1.0}, "c.d": np.ones(1)}
    with pytest.raises(ValueError, match=r"tree\['a'\]\['b'\] and tree\['a.b'\]: expected array leaves"):
        treekit.save(tmp_path / "t.safetensors", tree)
    treekit.save(tmp_path / "t.safetensors", {"c": {"d": 1.0}, "c.d": np.ones(1)})  # (a number makes no tensor)
    treekit.save(tmp_path / "t.safetensors", tree, names="keystr")
    assert treekit.load(tmp_path / "t.safetensors")["a"]["b"].tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match=re.escape("names: expected one of '.', '/', 'keystr', got ':'")):
        treekit.save(tmp_path / "t.safetensors", tree, names=":")


def test_jax_arrays_are_saved_as_numpy(tmp_path: Path) -> None:
    jnp = pytest.importorskip("jax.numpy")
    tree = {"w": jnp.ones((2, 2)), "h": jnp.zeros(3, jnp.bfloat16)}
    back = _round_trip(tmp_path, tree)
    assert type(back["w"]) is np.ndarray and back["w"].tolist() == [[1.0, 1.0], [1.0, 1.0]]
    assert back["h"].dtype.name == "bfloat16" and back["h"].shape == (3,)


def test_unsaveable_leaves_and_node_data_name_their_path(tmp_path: Path, registered: Any) -> None:
    name = tmp_path / "t.npz"
    with pytest.raises(TypeError, match=r"^tree\['a'\]: expected a leaf that saves without pickle, got an array "):
        treekit.save(name, {"a": np.array([{}], dtype=object)})
    assert not name.exists() and os.listdir(tmp_path) == []


def test_leaves_the_record_cannot_hold_come_from_the_template(tmp_path: Path) -> None:
    # An object, a function made in a function (equinox keeps its activations as leaves): not
    # saved; load without like= says to pass one, and like's leaf takes its place.
    name = tmp_path / "t.npz"

    def local() -> None:
        pass

    marker = object()
    treekit.save(name, {"a": [1, marker], "f": local})
    message = (
        "file: the leaf ['a'][1] is a builtins.object, which only its class can build: pass like= "
        "(a tree of the same structure, such as the model made again) to load into it"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        treekit.load(name)
    got = treekit.load(name, like={"a": [0, marker], "f": local})
    assert got == {"a": [1, marker], "f": local}


def test_nodes_only_their_class_builds_load_into_a_template(tmp_path: Path, registered: Any) -> None:
    # Node data that is not plain data (here a set) is not saved: the node is rebuilt from like's.
    name = tmp_path / "t.npz"
    registered(Layer, treekit.register_dataclass)
    treekit.save(name, {"x": [0, Layer(np.ones(2), 2.0, act={1})]})  # type: ignore[arg-type]
    message = (
        f"file: the node holding ['x'][1].w is a {__name__}.Layer, which only its class can build: pass like= "
        "(a tree of the same structure, such as the model made again) to load into it"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        treekit.load(name)
    got = treekit.load(name, like={"x": [5, Layer(np.zeros(2), 0.0, act={1})]})  # type: ignore[arg-type]
    assert got["x"][0] == 0 and got["x"][1].act == {1} and got["x"][1].w.tolist() == [1.0, 1.0]


def test_a_write_failing_midway_leaves_the_old_file_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = tmp_path / "ckpt.npz"
    treekit.save(name, {"step": 1})
    before = name.read_bytes()
    real = np.lib.format.write_array
    calls = []

    def failing(*args: Any, **kwargs: Any) -> None:
        calls.append(1)
        if len(calls) == 2:
            raise OSError("disk full")
        real(*args, **kwargs)

    monkeypatch.setattr(np.lib.format, "write_array", failing)
    with pytest.raises(OSError, match="disk full"):
        treekit.save(name, {"w": np.ones(1000), "b": np.ones(10), "step": 2})
    assert name.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt.npz"]
    assert treekit.load(name) == {"step": 1}


def test_a_crash_midway_never_leaves_a_half_written_file(tmp_path: Path) -> None:
    name = tmp_path / "ckpt.npz"
    script = textwrap.dedent(
        f"""
        import os, numpy as np, treekit
        treekit.save({str(name)!r}, {{'step': 1}})
        real = np.lib.format.write_array
        def crash(*args, **kwargs):
            real(*args, **kwargs)
            os._exit(3)  # the process dies after the first array is written
        np.lib.format.write_array = crash
        treekit.save({str(name)!r}, {{'w': np.ones(1000), 'b': np.ones(10), 'step': 2}})
        """
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 3, run.stderr
    assert treekit.load(name) == {"step": 1}
    leftovers = sorted(set(os.listdir(tmp_path)) - {"ckpt.npz"})
    assert len(leftovers) == 1 and leftovers[0].startswith(".ckpt.npz.") and leftovers[0].endswith(".tmp")


def test_load_like_names_every_mismatching_path(tmp_path: Path) -> None:
    name = tmp_path / "t.npz"
    treekit.save(name, {"dense": {"w": np.zeros((2, 3), np.float32), "b": np.zeros(3)}, "out": [np.zeros(2)]})
    like = {"dense": {"w": np.zeros((3, 3), np.float32), "b": np.zeros(3, np.int32)}, "out": (np.zeros(2),)}
    message = (
        "file['dense']['b']: expected dtype int32, got dtype float64 (values int32 cannot hold)\n"
        "file['dense']['w']: expected shape (3, 3), got shape (2, 3)"
    )
    with pytest.raises(StructureMismatchError, match=f"^{__import__('re').escape(message)}$") as info:
        treekit.load(name, like=like)
    assert info.value.label == "file" and treekit.keystr(info.value.path) == "['dense']['b']"
    good = {"dense": {"w": np.ones((2, 3), np.float32), "b": np.ones(3)}, "out": [np.ones(2)]}
    assert treekit.load(name, like=good)["dense"]["w"].shape == (2, 3)
    restored = treekit.load(name, like={**good, "out": (np.zeros(2),)})  # like's structure, the file's leaves
    assert type(restored["out"]) is tuple and restored["out"][0].tolist() == [0.0, 0.0]


def test_load_refuses_pickles_and_tells_them_from_damaged_files(tmp_path: Path) -> None:
    (tmp_path / "pickle.npz").write_bytes(pickle.dumps({"w": 1}))
    np.savez(tmp_path / "objects.npz", x=np.array([{"a": 1}], dtype=object))
    (tmp_path / "text.npz").write_text("hello")
    treekit.save(tmp_path / "good.npz", {"w": np.ones(100)})
    (tmp_path / "cut.npz").write_bytes((tmp_path / "good.npz").read_bytes()[:200])
    with pytest.raises(treekit.PickleRefused, match=f"^refusing to load a pickle file: {WHY}$"):
        treekit.load(tmp_path / "pickle.npz")
    with pytest.raises(treekit.PickleRefused, match=f"^refusing to load array 'x', stored with pickle: {WHY}$"):
        treekit.load(tmp_path / "objects.npz")
    with pytest.raises(ValueError, match=r"^not a valid \.npz \(zip\) file: it does not start as a zip file does$"):
        treekit.load(tmp_path / "text.npz")
    with pytest.raises(ValueError, match=r"^not a valid \.npz \(zip\) file: ") as info:
        treekit.load(tmp_path / "cut.npz")
    assert not isinstance(info.value, treekit.PickleRefused)


def test_a_damaged_record_and_an_unknown_class_say_so(tmp_path: Path) -> None:
    name = tmp_path / "t.npz"
    head = b'{"format": "treekit.save", "version": 1, "nodes": '
    np.savez(name, __treekit__=np.frombuffer(head + b'[{"node": "list", "n": 3}]}', np.uint8))
    with pytest.raises(ValueError, match="damaged or unreadable treekit structure record"):
        treekit.load(name)
    record = head + b'[{"node": "namedtuple", "n": 0, "type": "nowhere_mod:P"}]}'
    np.savez(name, __treekit__=np.frombuffer(record, np.uint8))
    with pytest.raises(ValueError) as info:
        treekit.load(name)
    assert str(info.value) == (  # (an intact file: not called damaged)
        f"{name}: nowhere_mod.P is not defined here: import nowhere_mod first (load imports nothing), "
        "or pass like= (a tree of the same structure)"
    )
    assert "nowhere_mod" not in sys.modules
    np.savez(name, __treekit__=np.frombuffer(record.replace(b"nowhere_mod", b"__main__"), np.uint8))
    with pytest.raises(ValueError, match=r"__main__\.P is not defined here: it was defined in the script that saved"):
        treekit.load(name)


def test_a_plain_npz_loads_as_nested_dicts(tmp_path: Path) -> None:
    np.savez(tmp_path / "t.npz", **{"a/b": np.ones(1), "c": np.zeros(2)})
    back = treekit.load(tmp_path / "t.npz")
    assert sorted(back) == ["a", "c"] and back["a"]["b"].tolist() == [1.0]


def test_save_and_load_do_not_load_numpy_on_import_treekit() -> None:
    code = "import sys, treekit; treekit.save, treekit.load; assert 'numpy' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_show_uses_the_same_loader(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from treekit.__main__ import main

    treekit.save(tmp_path / "t.npz", {"layers": [{"w": np.zeros((2, 3), np.float32)}]})
    assert main(["show", str(tmp_path / "t.npz")]) == 0
    assert "['layers'][0]['w']  (2, 3)  float32" in capsys.readouterr().out
    (tmp_path / "bad.npz").write_text("hello")
    (tmp_path / "pickled.npz").write_bytes(pickle.dumps({"w": 1}))
    assert main(["show", str(tmp_path / "bad.npz")]) == 1
    assert capsys.readouterr().err.endswith("not a valid .npz (zip) file: it does not start as a zip file does\n")
    assert main(["show", str(tmp_path / "pickled.npz")]) == 1
    assert capsys.readouterr().err.endswith(
        f"refusing to load a pickle file: {WHY}; pass --allow-pickle only for files you trust\n"
    )
    with zipfile.ZipFile(tmp_path / "t.npz") as z:
        assert "__treekit__.npy" in z.namelist()


def test_a_record_naming_a_function_as_a_class_runs_nothing(tmp_path: Path) -> None:
    name = tmp_path / "t.npz"
    head = b'{"format": "treekit.save", "version": 1, "nodes": '
    sentinel = tmp_path / "ran"
    command = f"touch {sentinel}".encode()
    record = head + b'[{"value": "' + command + b'"}, {"node": "namedtuple", "n": 1, "type": "os:system"}]}'
    np.savez(name, __treekit__=np.frombuffer(record, np.uint8))
    with pytest.raises(ValueError, match=r"os\.system is not a namedtuple class"):
        treekit.load(name)
    assert not sentinel.exists()
    record = head + b'[{"node": "defaultdict", "n": 0, "keys": [], "factory": {"ref": "os:abort"}}]}'
    np.savez(name, __treekit__=np.frombuffer(record, np.uint8))
    with pytest.raises(ValueError, match="default_factory must be a class or None"):
        treekit.load(name)
    assert os.path.exists(name)


def test_a_defaultdict_saves_with_a_class_factory_only(tmp_path: Path) -> None:
    tree = {"counts": collections.defaultdict(list, {"a": [1]})}
    treekit.save(tmp_path / "t.npz", tree)
    back = treekit.load(tmp_path / "t.npz")["counts"]
    assert back.default_factory is list and back == tree["counts"]
    with pytest.raises(TypeError, match="default_factory"):
        treekit.save(tmp_path / "u.npz", collections.defaultdict(_zero))


def _zero() -> int:
    return 0


def test_metadata_and_one_leaf_read_only_the_header_and_its_bytes(tmp_path: Path) -> None:
    name = tmp_path / "t.safetensors"
    tree = {"params": {"w": np.arange(6.0).reshape(2, 3), "b": np.zeros(3, np.float32)}, "step": 7, "tag": "run1"}
    treekit.save(name, tree)
    spec = treekit.metadata(name)
    assert spec == {
        "params": {"w": treekit.ShapeDtype((2, 3), "float64"), "b": treekit.ShapeDtype((3,), "float32")},
        "step": 7,
        "tag": "run1",
    }
    data = bytearray(name.read_bytes())  # the other leaf's bytes garbled: reading one leaf never looks at them
    b = _safetensors.read_header(name).tensors["params.b"]
    data[b.begin : b.end] = b"\xff" * (b.end - b.begin)
    name.write_bytes(bytes(data))
    assert treekit.load_leaf(name, "['params']['w']").tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    path = (treekit.DictKey("params"), treekit.DictKey("w"))
    assert treekit.load_leaf(name, path, mmap=True).tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    with pytest.raises(KeyError) as info:
        treekit.load_leaf(name, "['params']['x']")
    some = "[\"['params']['b']\", \"['params']['w']\"]"
    assert info.value.args[0] == f"{name}: no array leaf at \"['params']['x']\" (there are 2, e.g. {some})"
    treekit.save(tmp_path / "t.npz", tree)
    with pytest.raises(ValueError, match=re.escape("t.npz: expected a .safetensors file (treekit.save's layout)")):
        treekit.metadata(tmp_path / "t.npz")


def test_safetensors_files_of_other_tools_load_by_name(tmp_path: Path) -> None:
    st = pytest.importorskip("safetensors.numpy")
    name = tmp_path / "model.safetensors"
    w, b = np.ones((4, 2), np.float32), np.zeros(4, np.float32)
    st.save_file({"dense.kernel": w, "dense.bias": b}, str(name))
    flat = treekit.load(name)
    assert {k: v.tolist() for k, v in flat.items()} == {"dense.bias": b.tolist(), "dense.kernel": w.tolist()}
    specs = {"dense.bias": treekit.ShapeDtype((4,), "float32"), "dense.kernel": treekit.ShapeDtype((4, 2), "float32")}
    assert treekit.metadata(name) == specs
    like = {"dense": {"kernel": treekit.ShapeDtype((4, 2), "float32"), "bias": treekit.ShapeDtype((4,), "float32")}}
    loaded = treekit.load(name, like=like)
    assert loaded["dense"]["kernel"].tolist() == w.tolist() and loaded["dense"]["bias"].tolist() == b.tolist()
    assert treekit.load_leaf(name, "dense.kernel").shape == (4, 2)


def test_hugging_face_shards_load_into_a_template_with_rename_rules(tmp_path: Path) -> None:
    st = pytest.importorskip("safetensors.numpy")
    q, k, norm = np.ones((4, 4), np.float32), np.full((4, 4), 2.0, np.float32), np.zeros(4, np.float32)
    st.save_file({"model.layers.0.self_attn.q_proj.weight": q}, str(tmp_path / "model-00001-of-00002.safetensors"))
    st.save_file(
        {"model.layers.0.self_attn.k_proj.weight": k, "model.norm.weight": norm},
        str(tmp_path / "model-00002-of-00002.safetensors"),
    )
    weight_map = {
        "model.layers.0.self_attn.q_proj.weight": "model-00001-of-00002.safetensors",
        "model.layers.0.self_attn.k_proj.weight": "model-00002-of-00002.safetensors",
        "model.norm.weight": "model-00002-of-00002.safetensors",
    }
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": 160}, "weight_map": weight_map}))
    assert sorted(treekit.load(index)) == sorted(weight_map)
    spec = treekit.ShapeDtype((4, 4), "float32")
    norm_spec = treekit.ShapeDtype((4,), "float32")
    like = {"layers": [{"attn": {"q": {"kernel": spec}, "k": {"kernel": spec}}}], "norm": {"scale": norm_spec}}
    rules = [(r"^model\.", ""), (r"self_attn\.(\w)_proj", r"attn.\1"), (r"norm\.weight$", "norm.scale")]
    rules.append((r"weight$", "kernel"))
    loaded = treekit.load(index, like=like, rename=rules)
    assert loaded["layers"][0]["attn"]["k"]["kernel"].tolist() == k.tolist()
    assert loaded["norm"]["scale"].tolist() == norm.tolist()
    with pytest.raises(treekit.StructureMismatchError, match=re.escape("file['norm']['scale']: expected an array")):
        treekit.load(index, like=like, rename=rules[:2])
    (tmp_path / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(FileNotFoundError):
        treekit.load(index)
    index.write_text(json.dumps({"weight_map": {"w": "../elsewhere.safetensors"}}))
    outside = "expected shard file names in its folder, got '../elsewhere.safetensors'"
    with pytest.raises(ValueError, match=re.escape(outside)):
        treekit.load(index)


def _lying(tmp_path: Path, change: Any, extra: dict[str, Any] | None = None) -> Path:
    """A treekit file whose structure record ``change(record)`` rewrote (the tensors as saved, plus ``extra``)."""
    name = tmp_path / "t.safetensors"
    treekit.save(name, {"w": np.ones(3, np.float32), "b": np.zeros(2, np.float32)})
    tensors, metadata = _safetensors.read(name)
    record = json.loads(metadata["__treekit__"])
    change(record)
    _safetensors.write(name, [*tensors.items(), *(extra or {}).items()], {"__treekit__": json.dumps(record)})
    return name


DAMAGED = "damaged or unreadable treekit structure record"


def _set(entry: int, key: str, value: Any) -> Any:
    def change(record: Any) -> None:
        nodes = record["nodes"]
        if type(nodes[entry]) is str:  # an array named by its path: the same, as an object
            nodes[entry] = {"path": nodes[entry], "array": nodes[entry]}
        nodes[entry][key] = value

    return change


@pytest.mark.parametrize(
    ("change", "extra", "message"),
    [
        (_set(0, "array", "['x']"), None, "the structure record names tensor \"['x']\" but the header has no such"),
        (_set(1, "array", "b"), None, "the structure record names tensor 'b' twice"),
        (_set(0, "dtype", "int64"), None, "tensor 'b': the structure record says dtype 'int64', the header"),
        (lambda r: None, {"['z']": np.zeros(1)}, "tensors [\"['z']\"] (1 in all) are not in the structure record"),
        (_set(2, "n", 5), None, f"{DAMAGED} (a dict node with 5 children)"),
        (_set(2, "node", "bogus"), None, f"{DAMAGED} (unknown node kind 'bogus')"),
    ],
    ids=["missing tensor", "tensor twice", "dtype", "extra tensor", "arity", "node kind"],
)
def test_a_record_that_disagrees_with_the_header_is_one_clear_error(
    tmp_path: Path, change: Any, extra: Any, message: str
) -> None:
    name = _lying(tmp_path, change, extra)
    for read in (treekit.load, treekit.metadata, lambda p: treekit.load(p, like={"w": 0, "b": 0})):
        with pytest.raises(ValueError) as info:
            read(name)
        assert str(info.value).startswith(f"{name}: {message}"), str(info.value)


def test_saving_a_template_or_a_deleted_array_names_its_path(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"tree\['p'\]\['w'\]: expected an array with data, got a ShapeDtype, a shape"):
        treekit.save(tmp_path / "t.safetensors", {"p": {"w": treekit.ShapeDtype((2, 2), "float32")}})
    jnp = pytest.importorskip("jax.numpy")
    gone = jnp.ones(3)
    gone.delete()
    with pytest.raises(TypeError, match=r"tree\['w'\]: expected an array with data, got a deleted jax.Array"):
        treekit.save(tmp_path / "t.safetensors", {"w": gone})
    assert not list(tmp_path.iterdir())  # nothing written


def test_load_leaf_takes_every_path_form_treekit_prints(tmp_path: Path) -> None:
    name = tmp_path / "t.safetensors"
    tree = {"layers": [{"b": np.arange(2.0)}, {"b": np.arange(3.0)}], "head": {"w": np.ones(4)}}
    entries = (treekit.DictKey("layers"), treekit.SequenceKey(1), treekit.DictKey("b"))
    for names in (".", "keystr"):
        treekit.save(name, tree, names=names)
        for form in ("['layers'][1]['b']", "layers/1/b", "layers.1.b", entries):
            assert treekit.load_leaf(name, form).tolist() == [0.0, 1.0, 2.0], (names, form)
    with pytest.raises(KeyError) as info:
        treekit.load_leaf(name, "layers/2/b")
    assert "no array leaf at 'layers/2/b'" in info.value.args[0]


def test_like_s_dtypes_are_taken_where_the_values_fit(tmp_path: Path) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    name = tmp_path / "t.safetensors"
    tree = {"w": np.array([0.5, -2.0], np.float32), "i": np.array([1, 200], np.int64), "big": np.array([1e39])}
    treekit.save(name, tree)
    like = {"w": np.zeros(2, ml_dtypes.bfloat16), "i": np.zeros(2, np.uint8), "big": np.zeros(1, np.float64)}
    got = treekit.load(name, like=like)
    assert got["w"].dtype == ml_dtypes.bfloat16 and got["w"].astype(np.float32).tolist() == [0.5, -2.0]
    assert got["i"].dtype == np.uint8 and got["i"].tolist() == [1, 200]
    for bad, why in (
        ({**like, "i": np.zeros(2, np.int8)}, "file['i']: expected dtype int8, got dtype int64 (values int8 cannot"),
        ({**like, "big": np.zeros(1, np.float32)}, "file['big']: expected dtype float32, got dtype float64 (values"),
        ({**like, "w": np.zeros(2, np.int32)}, "file['w']: expected dtype int32, got dtype float32"),
    ):
        with pytest.raises(StructureMismatchError) as info:
            treekit.load(name, like=bad)
        assert str(info.value).startswith(why), str(info.value)


def test_strict_false_restores_what_matches_and_reports_the_rest(tmp_path: Path) -> None:
    name = tmp_path / "t.safetensors"
    treekit.save(name, {"encoder": {"w": np.ones(2)}, "head": {"w": np.ones(3)}})
    like = {"encoder": {"w": np.zeros(2)}, "decoder": {"w": np.zeros(4)}}
    tree, missing, unexpected = treekit.load(name, like=like, strict=False)
    assert tree["encoder"]["w"].tolist() == [1.0, 1.0] and tree["decoder"]["w"].tolist() == [0.0] * 4
    assert missing == ["['decoder']['w']"] and unexpected == ["['head']['w']"]
    with pytest.raises(StructureMismatchError, match="expected shape"):  # (a shape that differs: an error all the same)
        treekit.load(name, like={"encoder": {"w": np.zeros(5)}}, strict=False)
    with pytest.raises(ValueError, match="strict=False: expected like= too"):
        treekit.load(name, strict=False)


def test_dtype_casts_every_floating_array_where_its_values_fit(tmp_path: Path) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    name = tmp_path / "t.safetensors"
    treekit.save(name, {"w": np.array([0.5, 2.0]), "step": np.int64(7), "b": np.zeros(2, np.float32)})
    got = treekit.load(name, dtype=ml_dtypes.bfloat16)
    assert got["w"].dtype == got["b"].dtype == ml_dtypes.bfloat16
    assert got["step"] == 7 and got["step"].dtype == np.int64
    like = {"w": np.zeros(2), "step": 0, "b": np.zeros(2)}
    assert treekit.load(name, like=like, dtype="float16")["w"].dtype == np.float16
    treekit.save(name, {"big": np.array([1e39])})
    with pytest.raises(ValueError, match=r"file\['big'\]: expected values float32 can hold, got float64 ones"):
        treekit.load(name, dtype=np.float32)
    with pytest.raises(ValueError, match="dtype: expected a floating-point dtype"):
        treekit.load(name, dtype=np.int32)

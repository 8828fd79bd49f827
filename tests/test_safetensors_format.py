"""treekit.checkpoint._safetensors: the safetensors layout with numpy alone; round trips, interop, hostile files."""

from __future__ import annotations

import io
import json
import mmap as mapping
import os
import pickle
import re
import subprocess
import sys
import tracemalloc
import zipfile
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from treekit.checkpoint import _safetensors as sf

NATIVE = ["F64", "F32", "F16", "I64", "I32", "I16", "I8", "U64", "U32", "U16", "U8", "BOOL", "C64"]
ML = ["BF16", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ"]
SHAPES = [(), (0,), (5,), (2, 3), (3, 0, 2), (1, 1, 1, 2)]


def _sample(code: str, shape: tuple[int, ...]) -> np.ndarray:
    values = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) % 7 - 2
    if code == "BOOL":
        return np.asarray(values > 0)
    if code.startswith("U"):
        values = np.abs(values)
    if code == "F8_E8M0":  # powers of two only
        values = 2.0**values
    out = values.astype(sf.dtype_of(code))
    return np.asarray(out * (1 + 1j) if code == "C64" else out)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _raw(path: Path, header: Any, data: bytes = b"", length: int | None = None) -> Path:
    """A file of the layout with any header (an object as JSON, or bytes), data and length field."""
    blob = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes((len(blob) if length is None else length).to_bytes(8, "little") + blob + data)
    return path


# -- the dtype table --------------------------------------------------------------------------
@pytest.mark.parametrize("code", NATIVE + ML)
def test_code_and_dtype_invert(code: str) -> None:
    if code in ML:
        pytest.importorskip("ml_dtypes")
    assert sf.code_of(sf.dtype_of(code)) == code


@pytest.mark.parametrize("dtype", ["complex128", ">f4", ">i8", "O", "U3", "datetime64[s]", "V4", "float16,int8"])
def test_code_of_none(dtype: str) -> None:
    assert sf.code_of(dtype) is None


def test_dtype_of_unknown() -> None:
    with pytest.raises(ValueError, match=r"^dtype code: expected one of F64, F32, .*, got 'F4'$"):
        sf.dtype_of("F4")


# -- round trips ------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("code", NATIVE + ML)
def test_round_trip_every_code(tmp_path: Path, code: str, shape: tuple[int, ...]) -> None:
    if code in ML:
        pytest.importorskip("ml_dtypes")
    array = _sample(code, shape)
    sf.write(tmp_path / "t.safetensors", [("x", array)], {"code": code})
    for mmap in (False, True):
        tensors, metadata = sf.read(tmp_path / "t.safetensors", mmap=mmap)
        assert _same(tensors["x"], array) and metadata == {"code": code}
    assert sf.read_header(tmp_path / "t.safetensors").tensors["x"].dtype == code


@pytest.mark.parametrize(
    "view",
    [lambda a: a[::2], lambda a: a.T, lambda a: np.asfortranarray(a), lambda a: a[:, 1:3], lambda a: a[::-1, ::3]],
)
def test_non_contiguous(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, view: Any) -> None:
    monkeypatch.setattr(sf, "_CHUNK", 40)  # several slabs and several write() calls per array
    array = view(np.arange(120, dtype=np.float64).reshape(10, 12))
    assert not array.flags.c_contiguous
    sf.write(tmp_path / "t.safetensors", [("x", array)])
    assert _same(sf.read(tmp_path / "t.safetensors")[0]["x"], np.ascontiguousarray(array))


def test_array_likes_convert(tmp_path: Path) -> None:
    sf.write(tmp_path / "t.safetensors", [("list", [[1, 2], [3, 4]]), ("float", 2.5), ("scalar", np.float32(1))])
    tensors, _ = sf.read(tmp_path / "t.safetensors")
    assert _same(tensors["list"], np.array([[1, 2], [3, 4]])) and _same(tensors["float"], np.array(2.5))
    assert _same(tensors["scalar"], np.array(1, np.float32))


@pytest.mark.parametrize("name", ["", "w", "layer_0/attention/query", "é" * 5, "a" * 13])
def test_header_alignment(tmp_path: Path, name: str) -> None:
    """The data starts 8-byte aligned (the JSON padded with spaces), each tensor at its item size."""
    arrays = [(name, np.ones(3, np.int8)), ("h", np.ones(1, np.float16)), ("d", np.ones(2)), ("f", np.ones(1, "f4"))]
    path = tmp_path / "t.safetensors"
    sf.write(path, arrays)
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    blob = raw[8 : 8 + n]
    assert n % 8 == 0 and blob.rstrip(b" ").endswith(b"}") and len(blob) - len(blob.rstrip(b" ")) < 8
    assert json.loads(blob)
    header = sf.read_header(path)
    assert header.data_start == 8 + n and list(header.tensors) == ["d", "f", "h", name]  # by item size, then as given
    for t in header.tensors.values():
        assert (t.begin - header.data_start) % sf.dtype_of(t.dtype).itemsize == 0


names = st.text(max_size=12).filter(lambda s: s != "__metadata__")
arrays = hnp.arrays(
    st.sampled_from([sf.dtype_of(c) for c in NATIVE]),
    hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
)


@given(st.dictionaries(names, arrays, max_size=6), st.none() | st.dictionaries(st.text(), st.text(), max_size=3))
def test_round_trip_property(tmp_path_factory: pytest.TempPathFactory, tensors: dict[str, Any], meta: Any) -> None:
    path = tmp_path_factory.mktemp("prop") / "t.safetensors"
    sf.write(path, tensors.items(), meta)
    for mmap in (False, True):
        back, metadata = sf.read(path, mmap=mmap)
        assert set(back) == set(tensors) and all(_same(back[k], v) for k, v in tensors.items())
        assert metadata == (meta or {})


# -- reading parts of a file ------------------------------------------------------------------
class _Counting(io.BytesIO):
    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.got = 0

    def read(self, n: int | None = -1) -> bytes:
        out = super().read(n)
        self.got += len(out)
        return out

    def readinto(self, buffer: Any) -> int:
        k = super().readinto(buffer)
        self.got += k
        return k


def test_read_tensor_reads_only_its_bytes(tmp_path: Path) -> None:
    path = tmp_path / "t.safetensors"
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    sf.write(path, [("a", a), ("b", np.zeros(1000, np.float32)), ("c", np.zeros(3, np.float32))])
    header = sf.read_header(path)
    raw = bytearray(path.read_bytes())
    for name in ("b", "c"):  # the other tensors' bytes turned to garbage
        t = header.tensors[name]
        raw[t.begin : t.end] = b"\xff" * (t.end - t.begin)
    path.write_bytes(raw)
    assert _same(sf.read_tensor(path, header, "a"), a)
    assert _same(sf.read_tensor(path, header, "a", mmap=True), a)
    f = _Counting(bytes(raw))
    assert sf.read_header(f) == header and f.got == header.data_start
    f.got = 0
    assert _same(sf.read_tensor(f, header, "a"), a) and f.got == a.nbytes
    with pytest.raises(KeyError, match="no tensor 'z' in the header"):
        sf.read_tensor(path, header, "z")


def _root(array: Any) -> Any:
    """What an array's memory belongs to, at the end of its ``base`` chain."""
    while isinstance(array, (np.ndarray, memoryview)):
        array = array.obj if isinstance(array, memoryview) else array.base
    return array


def test_mmap_is_read_only(tmp_path: Path) -> None:
    path = tmp_path / "t.safetensors"
    sf.write(path, [("a", np.arange(4.0)), ("b", np.ones((2, 2), bool))])
    for x in [*sf.read(path, mmap=True)[0].values(), sf.read_tensor(path, sf.read_header(path), "a", mmap=True)]:
        assert isinstance(_root(x), mapping.mmap) and not x.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            x[...] = 0
    assert all(x.flags.writeable for x in sf.read(path)[0].values())


def test_file_shorter_than_its_header(tmp_path: Path) -> None:
    path = tmp_path / "t.safetensors"
    sf.write(path, [("a", np.arange(4.0)), ("b", np.arange(3, dtype=np.int8))])
    header = sf.read_header(path)
    with open(path, "r+b") as f:
        f.truncate(header.size - 2)
    b = header.tensors["b"]
    message = f"{path}: tensor 'b': expected bytes [{b.begin}, {b.end}], got a {header.size - 2}-byte file"
    for mmap in (False, True):
        with pytest.raises(ValueError) as info:
            sf.read_tensor(path, header, "b", mmap=mmap)
        assert str(info.value) == message
    assert _same(sf.read_tensor(path, header, "a"), np.arange(4.0))


@pytest.mark.skipif(sys.platform != "linux", reason="needs sparse files")
def test_big_sparse_file(tmp_path: Path) -> None:
    """A 1 GiB file (sparse: nothing written): the header and an mapped tensor cost no more than they touch."""
    path = _raw(tmp_path / "big.safetensors", {"w": {"dtype": "U8", "shape": [2**30], "data_offsets": [0, 2**30]}})
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size + 2**30)
    tracemalloc.start()
    header = sf.read_header(path)
    w = sf.read_tensor(path, header, "w", mmap=True)
    assert w.shape == (2**30,) and int(w[-5:].sum()) == 0
    assert tracemalloc.get_traced_memory()[1] < 1 << 20
    tracemalloc.stop()


# -- writing ----------------------------------------------------------------------------------
def test_write_streams(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Writing copies at most a slab of a non-contiguous array, never the data: peak memory stays small."""
    monkeypatch.setattr(sf, "_CHUNK", 1 << 16)
    tensors = [(f"w{i}", np.ones((256, 1024), np.float32)) for i in range(4)]  # 4 MiB
    tensors.append(("t", np.ones((512, 1024), np.float32)[:, ::2]))  # 1 MiB, not contiguous
    tracemalloc.start()
    sf.write(tmp_path / "t.safetensors", tensors)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 256 << 10
    assert _same(sf.read(tmp_path / "t.safetensors")[0]["t"], np.ones((512, 512), np.float32))


class _Exploding:
    """Claims a shape and dtype; converting it fails (as a device array whose copy to the host fails)."""

    shape, dtype = (4,), np.dtype(np.float32)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise RuntimeError("device lost")


def test_atomic_write(tmp_path: Path) -> None:
    path = tmp_path / "ckpt.safetensors"
    sf.write(path, [("old", np.arange(3))])
    before = path.read_bytes()
    big = np.ones(100_000, np.float32)  # written before the failing one
    with pytest.raises(RuntimeError, match="device lost"):
        sf.write(path, [("a", big), ("b", _Exploding())])
    with pytest.raises(TypeError):
        sf.write(path, [("a", big), ("b", np.ones(2, complex))])
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["ckpt.safetensors"]
    with pytest.raises(RuntimeError, match="device lost"):  # no file before: none after
        sf.write(tmp_path / "new.safetensors", [("b", _Exploding())])
    assert os.listdir(tmp_path) == ["ckpt.safetensors"]
    sf.write(tmp_path / "new.safetensors", [("a", np.ones(2))])
    assert sorted(os.listdir(tmp_path)) == ["ckpt.safetensors", "new.safetensors"]


class Bad(NamedTuple):
    name: str
    tensors: list[tuple[Any, Any]]
    metadata: Any
    error: type[Exception]
    message: str


BAD_WRITES = [
    Bad("duplicate", [("a", np.ones(1)), ("a", np.ones(2))], None, ValueError,
        "tensor 'a': expected a unique name other than '__metadata__', got it again"),
    Bad("reserved", [("__metadata__", np.ones(1))], None, ValueError,
        "tensor '__metadata__': expected a unique name other than '__metadata__', got it again"),
    Bad("name-type", [(3, np.ones(1))], None, TypeError, "tensor name: expected str, got int 3"),
    Bad("complex128", [("z", np.ones(2, complex))], None, TypeError,
        "tensor 'z': expected an array of a dtype with a safetensors code, got dtype complex128"),
    Bad("object", [("o", np.array([None]))], None, TypeError,
        "tensor 'o': expected an array of a dtype with a safetensors code, got dtype object"),
    Bad("big-endian", [("b", np.ones(2, ">f4"))], None, TypeError,
        "tensor 'b': expected an array of a dtype with a safetensors code, got dtype >f4"),
    Bad("metadata-value", [], {"step": 3}, TypeError, "metadata: expected a dict of str to str, got {'step': 3}"),
    Bad("metadata-type", [], [("a", "b")], TypeError, "metadata: expected a dict of str to str, got [('a', 'b')]"),
    Bad("surrogate", [("\ud800", np.ones(1))], None, ValueError, "tensor names and metadata: expected text UTF-8"),
]  # fmt: skip


@pytest.mark.parametrize("bad", BAD_WRITES, ids=lambda b: b.name)
def test_write_refuses(tmp_path: Path, bad: Bad) -> None:
    with pytest.raises(bad.error) as info:
        sf.write(tmp_path / "t.safetensors", bad.tensors, bad.metadata)
    assert str(info.value).startswith(bad.message)
    assert os.listdir(tmp_path) == []


def test_write_checks_the_conversion(tmp_path: Path) -> None:
    class Liar:
        shape, dtype = (3,), np.dtype(np.float32)

        def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
            return np.ones(2, np.float64)

    with pytest.raises(ValueError, match=r"^tensor 'x': expected float32\[3\] as it claimed, got float64\[2\]$"):
        sf.write(tmp_path / "t.safetensors", [("x", Liar())])
    assert os.listdir(tmp_path) == []


# -- interop with the safetensors package -----------------------------------------------------
def test_safetensors_reads_ours(tmp_path: Path) -> None:
    st_numpy = pytest.importorskip("safetensors.numpy")
    from safetensors import safe_open

    tensors = {f"{code}{shape}": _sample(code, shape) for code in NATIVE for shape in SHAPES}
    path = tmp_path / "ours.safetensors"
    sf.write(path, tensors.items(), {"format": "treekit", "é": "ü"})
    back = st_numpy.load_file(path)
    assert set(back) == set(tensors) and all(_same(back[k], v) for k, v in tensors.items())
    with safe_open(path, "numpy") as f:
        assert f.metadata() == {"format": "treekit", "é": "ü"}
        assert _same(f.get_tensor("F32(2, 3)"), tensors["F32(2, 3)"])


def test_safetensors_reads_our_bf16(tmp_path: Path) -> None:
    pytest.importorskip("safetensors")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from safetensors import safe_open

    array = np.arange(5, dtype=ml_dtypes.bfloat16)
    sf.write(tmp_path / "bf.safetensors", [("x", array)])
    with safe_open(tmp_path / "bf.safetensors", "numpy") as f:
        assert _same(f.get_tensor("x"), array)


def test_same_bytes_as_safetensors(tmp_path: Path) -> None:
    st_numpy = pytest.importorskip("safetensors.numpy")
    tensors = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(3, np.float32), "c": np.ones(2, "f4")}
    st_numpy.save_file(tensors, tmp_path / "theirs.safetensors", metadata={"k": "v"})
    sf.write(tmp_path / "ours.safetensors", sorted(tensors.items()), {"k": "v"})
    assert (tmp_path / "ours.safetensors").read_bytes() == (tmp_path / "theirs.safetensors").read_bytes()


def test_we_read_safetensors(tmp_path: Path) -> None:
    st_numpy = pytest.importorskip("safetensors.numpy")
    tensors = {f"{code}{shape}": _sample(code, shape) for code in NATIVE for shape in SHAPES}
    st_numpy.save_file(tensors, tmp_path / "theirs.safetensors", metadata={"step": "3"})
    for mmap in (False, True):
        back, metadata = sf.read(tmp_path / "theirs.safetensors", mmap=mmap)
        assert set(back) == set(tensors) and all(_same(back[k], v) for k, v in tensors.items())
        assert metadata == {"step": "3"}


# -- hostile files ----------------------------------------------------------------------------
def _entry(dtype: str = "F32", shape: Any = (2, 3), offsets: Any = (0, 24)) -> dict[str, Any]:
    return {"dtype": dtype, "shape": list(shape) if isinstance(shape, tuple) else shape,
            "data_offsets": list(offsets) if isinstance(offsets, tuple) else offsets}  # fmt: skip


def _zip(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("w.npy", b"x" * 100)


def _npy() -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.ones(3))
    return buffer.getvalue()


D24 = bytes(24)
TEXT = b"hello, world: this is a text file\n"
HOSTILE: list[tuple[str, Any, str]] = [
    ("empty", lambda p: p.write_bytes(b""),
     "expected a safetensors file (an 8-byte header length, then JSON), got 0 bytes"),
    ("five-bytes", lambda p: p.write_bytes(b"\x02\0\0\0\0"),
     "expected a safetensors file (an 8-byte header length, then JSON), got 5 bytes"),
    ("zip", _zip, "expected a safetensors file, got a zip file (.npz, or a torch .pt/.bin checkpoint?)"),
    ("pickle", lambda p: p.write_bytes(pickle.dumps({"w": [1.0] * 10}, protocol=4)),
     "expected a safetensors file, got a pickle (never unpickled)"),
    ("npy", lambda p: p.write_bytes(_npy()), "expected a safetensors file, got a .npy file"),
    ("text", lambda p: p.write_bytes(TEXT), f"header length: expected at most 26 (the file is 34 bytes), "
     f"got {int.from_bytes(TEXT[:8], 'little')} (not safetensors, or truncated?)"),
    ("length-past-end", lambda p: _raw(p, b"{}", length=1000),
     "header length: expected at most 2 (the file is 10 bytes), got 1000 (not safetensors, or truncated?)"),
    ("length-2**63", lambda p: _raw(p, b"{}", length=2**63),
     f"header length: expected at most 2 (the file is 10 bytes), got {2**63} (not safetensors, or truncated?)"),
    ("not-utf8", lambda p: _raw(p, b'{"\xff": 1}'), "header: expected UTF-8 JSON, got byte 0xff at 2"),
    ("not-json", lambda p: _raw(p, b"{'w': 1}"),
     "header: expected JSON, got JSONDecodeError: Expecting property name enclosed in double quotes: line 1 column 2"),
    ("empty-json", lambda p: _raw(p, b"        "), "header: expected JSON, got JSONDecodeError: Expecting value"),
    # nesting and floods are refused where they start, never parsed (no recursion, no memory)
    ("deep-json", lambda p: _raw(p, b'{"d": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
     "tensor 'd': expected an object with keys ['data_offsets', 'dtype', 'shape'], got an array"),
    ("deep-in-entry", lambda p: _raw(p, b'{"w": {"shape": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}"),
     "tensor 'w': shape: expected a list of at most 64 integers >= 0, got an array holding an array"),
    ("many-arrays", lambda p: _raw(p, b"[" * 100_000 + b"]" * 100_000), "header: expected a JSON object, got an array"),
    ("long-dims", lambda p: _raw(p, {"w": _entry(shape=[1] * 100_000)}, D24),
     "tensor 'w': shape: expected a list of at most 64 integers >= 0, got an array of more than 65 values"),
    ("many-keys", lambda p: _raw(p, {"w": {f"k{i}": 0 for i in range(100_000)}}, D24),
     "tensor 'w': expected an object with keys ['data_offsets', 'dtype', 'shape'], got keys ['k0', 'k1', 'k2',"),
    ("long-number", lambda p: _raw(p, b'{"w": {"shape": [' + b"9" * 100_000 + b"]}}"),
     "tensor 'w': expected an object with keys ['data_offsets', 'dtype', 'shape'], got keys ['shape']"),
    ("trailing-json", lambda p: _raw(p, b'{} {}'), "header: expected JSON, got JSONDecodeError: Extra data"),
    ("long-begin", lambda p: _raw(p, b'{"w": {"dtype": "U8", "shape": [1], "data_offsets": [%s, 1]}}' % (b"1" * 5000)),
     "tensor 'w': data_offsets: expected [begin, end], two integers, got [<a number of 5,000 characters>, 1]"),
    ("unquoted-value", lambda p: _raw(p, b'{"w": {"dtype": F32}}'),
     "header: expected JSON, got JSONDecodeError: Expecting value"),
    ("json-array", lambda p: _raw(p, []), "header: expected a JSON object, got an array"),
    ("duplicate-key", lambda p: _raw(p, b'{"w": %s, "w": %s}' % ((json.dumps(_entry()).encode(),) * 2), D24),
     "header: expected JSON, got ValueError: key 'w' appears twice in one object"),
    ("entry-not-object", lambda p: _raw(p, {"w": [1, 2]}),
     "tensor 'w': expected an object with keys ['data_offsets', 'dtype', 'shape'], got an array"),
    ("entry-extra-key", lambda p: _raw(p, {"w": {**_entry(), "code": "os.system"}}, D24),
     "tensor 'w': expected an object with keys ['data_offsets', 'dtype', 'shape'], "
     "got keys ['code', 'data_offsets', 'dtype', 'shape']"),
    ("entry-missing-key", lambda p: _raw(p, {"w": {"dtype": "F32", "shape": [1]}}, D24),
     "tensor 'w': expected an object with keys ['data_offsets', 'dtype', 'shape'], got keys ['dtype', 'shape']"),
    ("unknown-dtype", lambda p: _raw(p, {"w": _entry("F128")}, D24),
     "tensor 'w': dtype: expected one of F64, F32, F16, BF16, I64, I32, I16, I8, U64, U32, U16, U8, BOOL, C64, "
     "F8_E4M3, F8_E5M2, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ, got 'F128'"),
    ("sub-byte-dtype", lambda p: _raw(p, {"w": _entry("F4")}, D24), "tensor 'w': dtype: expected one of F64, "),
    ("dtype-not-str", lambda p: _raw(p, {"w": _entry(4)}, D24), "tensor 'w': dtype: expected one of F64, "),
    ("negative-dim", lambda p: _raw(p, {"w": _entry(shape=[2, -3])}, D24),
     "tensor 'w': shape: expected a list of at most 64 integers >= 0, got [2, -3]"),
    ("bool-dim", lambda p: _raw(p, {"w": _entry(shape=[True, 24])}, D24),
     "tensor 'w': shape: expected a list of at most 64 integers >= 0, got [True, 24]"),
    ("float-dim", lambda p: _raw(p, {"w": _entry(shape=[2.0, 3])}, D24),
     "tensor 'w': shape: expected a list of at most 64 integers >= 0, got [2.0, 3]"),
    ("shape-not-list", lambda p: _raw(p, {"w": _entry(shape="2x3")}, D24),
     "tensor 'w': shape: expected a list of at most 64 integers >= 0, got '2x3'"),
    ("too-many-dims", lambda p: _raw(p, {"w": _entry(shape=[1] * 65)}, D24),
     "tensor 'w': shape: expected a list of at most 64 integers >= 0, got [1, 1, 1, 1, 1, 1, 1, 1, ...]"),
    ("offsets-three", lambda p: _raw(p, {"w": _entry(offsets=[0, 12, 24])}, D24),
     "tensor 'w': data_offsets: expected [begin, end], two integers, got [0, 12, 24]"),
    ("offsets-float", lambda p: _raw(p, {"w": _entry(offsets=[0, 24.0])}, D24),
     "tensor 'w': data_offsets: expected [begin, end], two integers, got [0, 24.0]"),
    ("offsets-reversed", lambda p: _raw(p, {"w": _entry(offsets=[24, 0])}, D24),
     "tensor 'w': data_offsets: expected 0 <= begin <= end <= 24, got [24, 0]"),
    ("offsets-negative", lambda p: _raw(p, {"w": _entry(offsets=[-24, 0])}, D24),
     "tensor 'w': data_offsets: expected 0 <= begin <= end <= 24, got [-24, 0]"),
    ("truncated", lambda p: _raw(p, {"w": _entry()}, bytes(20)),
     "tensor 'w': data_offsets: expected 0 <= begin <= end <= 20, got [0, 24] (a truncated file?)"),
    ("bytes-not-shape", lambda p: _raw(p, {"w": _entry(offsets=[0, 20])}, bytes(20)),
     "tensor 'w': expected 24 bytes for shape [2, 3] of F32, got offsets [0, 20]"),
    ("overlap", lambda p: _raw(p, {"a": _entry(), "b": _entry(shape=[2], offsets=[16, 24])}, D24),
     "tensor 'b': expected data_offsets from 24, got [16, 24] (overlapping tensor 'a')"),
    ("same-region", lambda p: _raw(p, {"a": _entry(), "b": _entry()}, D24),
     "tensor 'b': expected data_offsets from 24, got [0, 24] (overlapping tensor 'a')"),
    ("hole", lambda p: _raw(p, {"a": _entry(shape=[2], offsets=[0, 8]), "b": _entry(shape=[2], offsets=[16, 24])}, D24),
     "tensor 'b': expected data_offsets from 8, got [16, 24] (8 bytes before it in no tensor)"),
    ("hole-at-start", lambda p: _raw(p, {"a": _entry(shape=[2], offsets=[8, 16])}, bytes(16)),
     "tensor 'a': expected data_offsets from 0, got [8, 16] (8 bytes before it in no tensor)"),
    ("trailing-bytes", lambda p: _raw(p, {"w": _entry()}, bytes(30)),
     "data: expected 24 bytes (all in tensors), got 30 (the rest in no tensor)"),
    ("metadata-not-object", lambda p: _raw(p, {"__metadata__": "x"}),
     "__metadata__: expected an object of strings, got a string"),
    ("metadata-value", lambda p: _raw(p, {"__metadata__": {"step": 3}}),
     "__metadata__['step']: expected a string, got a number 3"),
]  # fmt: skip


@pytest.mark.parametrize(("make", "message"), [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_hostile_file(tmp_path: Path, make: Any, message: str) -> None:
    path = tmp_path / "ckpt.safetensors"
    make(path)
    for read in (sf.read_header, sf.read):
        with pytest.raises(ValueError) as info:
            read(path)
        assert str(info.value).startswith(f"{path}: {message}")


def test_header_over_the_limit() -> None:
    """A header length over 100 MB in a file that big is refused before reading it (a fake file)."""

    class Huge(io.BytesIO):
        name = "huge.safetensors"

        def seek(self, offset: int, whence: int = 0) -> int:
            return 2**40 if whence == os.SEEK_END else super().seek(offset, whence)

    f = Huge((sf.MAX_HEADER + 1).to_bytes(8, "little") + b"{}")
    with pytest.raises(ValueError) as info:
        sf.read_header(f)
    assert str(info.value) == (
        "huge.safetensors: header length: expected at most 100000000 (the limit), got 100000001 "
        "(not safetensors, or truncated?)"
    )


@pytest.mark.parametrize(("shape", "offsets"), [([2**58], [0, 2**60]), ([2**60], [0, 16]), ([2**40] * 40, [0, 16])])
def test_huge_claims_are_refused_without_allocating(tmp_path: Path, shape: list[int], offsets: list[int]) -> None:
    path = _raw(tmp_path / "ckpt.safetensors", {"w": _entry("F32", shape, offsets)}, bytes(16))
    tracemalloc.start()
    with pytest.raises(ValueError, match=rf"^{path}: tensor 'w': "):
        sf.read(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2 << 20  # refused before anything the header claims is allocated


def test_code_in_a_header_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    payload = f"__import__('pathlib').Path({str(marker)!r}).touch()"
    path = _raw(tmp_path / "t.safetensors", {"__metadata__": {"x": payload}, "w": _entry(payload)}, D24)
    with pytest.raises(ValueError, match="dtype: expected one of"):
        sf.read(path)
    assert not marker.exists()


def test_import_is_numpy_free() -> None:
    code = "import sys, treekit.checkpoint._safetensors; assert 'numpy' not in sys.modules, 'numpy imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


# -- the header scanner against json.loads ----------------------------------------------------
def _json_reading(blob: bytes, data_size: int) -> Any:
    """What a header means read by json.loads and the format's rules: (tensors, metadata) or None."""
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        if len({k for k, _ in items}) != len(items):
            raise ValueError("a key twice")
        return dict(items)

    try:
        obj = json.loads(blob.decode("utf-8"), object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return None
    if type(obj) is not dict:
        return None
    metadata = obj.pop("__metadata__", None)
    metadata = {} if metadata is None else metadata
    if type(metadata) is not dict or any(type(v) is not str for v in metadata.values()):
        return None
    regions = []
    for name, info in obj.items():
        if type(info) is not dict or sorted(info) != ["data_offsets", "dtype", "shape"]:
            return None
        code, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if code not in sf.CODES or type(shape) is not list or len(shape) > 64:
            return None
        if any(type(d) is not int or d < 0 for d in shape) or np.prod([d or 1 for d in shape], dtype=object) >= 2**63:
            return None
        if type(offsets) is not list or len(offsets) != 2 or any(type(o) is not int for o in offsets):
            return None
        begin, end = offsets
        if not 0 <= begin <= end <= data_size or end - begin != np.prod(shape, dtype=object) * sf.CODES[code][1]:
            return None
        regions.append((begin, end, name, code, tuple(shape)))
    regions.sort()
    at = 0
    for begin, end, *_ in regions:
        if begin != at:
            return None
        at = end
    if at != data_size:
        return None
    return {name: (code, shape, b, e) for b, e, name, code, shape in regions}, metadata


def _header_text(draw: Any) -> tuple[bytes, int]:
    """A header as some writer might lay it out (key orders, spacing, escapes), maybe damaged."""
    names = draw(st.lists(st.text(max_size=6), max_size=4, unique=True))
    entries: dict[str, Any] = {}
    at = 0
    for name in names:
        code = draw(st.sampled_from(["F32", "U8", "BF16", "F64"]))
        shape = draw(st.lists(st.integers(0, 3), max_size=3))
        size = int(np.prod(shape, dtype=np.int64)) * sf.CODES[code][1]
        keys = draw(st.permutations(["dtype", "shape", "data_offsets"]))
        entries[name] = {k: {"dtype": code, "shape": shape, "data_offsets": [at, at + size]}[k] for k in keys}
        at += size
    if draw(st.booleans()):
        entries["__metadata__"] = draw(st.dictionaries(st.text(max_size=4), st.text(max_size=8), max_size=3))
    order = draw(st.permutations(list(entries)))
    space = draw(st.sampled_from([(",", ":"), (", ", ": "), (" ,\n", " :\t")]))
    blob = json.dumps({k: entries[k] for k in order}, separators=space, ensure_ascii=draw(st.booleans())).encode()
    for _ in range(draw(st.integers(0, 2))):  # damage: a byte dropped, doubled or replaced
        if not blob:
            break
        i = draw(st.integers(0, len(blob) - 1))
        how = draw(st.sampled_from(["drop", "double", "replace"]))
        new = draw(st.sampled_from(list(b'{}[]",:0-1. e\\\x01')))
        blob = blob[:i] + {"drop": b"", "double": blob[i : i + 1] * 2, "replace": bytes([new])}[how] + blob[i + 1 :]
    data_size = at + draw(st.sampled_from([0, 0, 0, 1]))
    return blob, data_size


@given(st.data())
def test_the_header_scanner_reads_what_json_loads_reads(tmp_path_factory: pytest.TempPathFactory, data: Any) -> None:
    blob, data_size = _header_text(data.draw)
    path = _raw(tmp_path_factory.mktemp("h") / "h.safetensors", blob, bytes(data_size))
    want = _json_reading(blob, data_size)
    if want is None:
        with pytest.raises(ValueError, match=f"^{re.escape(str(path))}: "):
            sf.read_header(path)
        return
    header = sf.read_header(path)
    tensors, metadata = want
    assert header.metadata == metadata
    start = 8 + len(blob)
    assert {k: (t.dtype, t.shape, t.begin - start, t.end - start) for k, t in header.tensors.items()} == tensors


@pytest.mark.parametrize(
    "entries",
    [
        # in any key order (a writer's json.dumps(sort_keys=True)), and tensors of no bytes: read member by member
        {f"h.{i}.ln.b": {"data_offsets": [16 * i, 16 * i + 16], "dtype": "F32", "shape": [4]} for i in range(3000)},
        {f"w{i}": {"shape": [1], "dtype": "U8", "data_offsets": [i, i + 1]} for i in range(3000)},
        {f"e{i}": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]} for i in range(5000)},
    ],
    ids=["sorted keys", "shape first", "no bytes"],
)
def test_valid_headers_in_any_key_order_are_read_however_many_entries(tmp_path: Path, entries: Any) -> None:
    size = max(e["data_offsets"][1] for e in entries.values())
    path = _raw(tmp_path / "h.safetensors", json.dumps(entries, separators=(",", ":")).encode(), bytes(size))
    header = sf.read_header(path)
    assert len(header.tensors) == len(entries)


def test_a_long_name_is_cut_short_in_messages(tmp_path: Path) -> None:
    name, entry = "n" * 10**6, json.dumps(_entry())
    path = _raw(tmp_path / "h.safetensors", f'{{"{name}": {entry}, "{name}": {entry}}}'.encode(), D24)
    with pytest.raises(ValueError, match="appears twice in one object") as info:
        sf.read_header(path)
    assert len(str(info.value)) < len(str(path)) + 200
    assert info.value.__context__ is None  # nothing holds the header's text: no exception, no frame
    tb = info.value.__traceback__.tb_next  # (past this test's own frame)
    while tb is not None:
        assert not any(isinstance(v, (str, bytes)) and len(v) > 10**5 for v in tb.tb_frame.f_locals.values())
        tb = tb.tb_next
    for header in ({"__metadata__": {name: 1}}, {"w": {name: [1]}}):  # (keys a message quotes: cut short too)
        path = _raw(tmp_path / "k.safetensors", header, D24)
        with pytest.raises(ValueError) as info:
            sf.read_header(path)
        assert len(str(info.value)) < len(str(path)) + 200

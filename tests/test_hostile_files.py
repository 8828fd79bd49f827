"""Hostile checkpoint files refused in bounded memory: every case runs in a child process whose
address space is capped (``resource.setrlimit(RLIMIT_AS)``), so a reader that allocates what a
file claims dies there of MemoryError instead of raising the ValueError that names the file."""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
import tracemalloc
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

np = pytest.importorskip("numpy")
resource = pytest.importorskip("resource")

import treekit  # noqa: E402

CAP = 1 << 30  # bytes of address space for the child: numpy and treekit fit, the claims do not

CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({cap}, {cap}))
import treekit
try:
    treekit.load(sys.argv[1], max_bytes={max_bytes})
except ValueError as exc:
    print('ValueError:', exc)
else:
    print('loaded')
"""


def load_capped(path: Path, max_bytes: int | None = None) -> str:
    """What ``treekit.load(path, max_bytes=...)`` does in a child capped at CAP bytes."""
    code = CHILD.format(cap=CAP, max_bytes=max_bytes)
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip()


def npy(shape: tuple[int, ...], data: bytes, descr: str = "<f8") -> bytes:
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}"
    header += " " * (-(len(header) + 11) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + data


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS caps the address space on Linux")
def test_an_npz_member_claiming_a_terabyte_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "tiny.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("w.npy", npy((1 << 40,), b"\0" * 16))
    assert path.stat().st_size < 300
    got = load_capped(path)
    assert got.startswith(f"ValueError: {path}: array 'w': expected 8,796,093,022,208 bytes of data"), got


def _claim(path: Path, size: int) -> None:
    """Rewrite the uncompressed size the zip's first member claims (local and central headers)."""
    data = bytearray(path.read_bytes())
    local, central = data.index(b"PK\x03\x04"), data.index(b"PK\x01\x02")
    struct.pack_into("<I", data, local + 22, size)
    struct.pack_into("<I", data, central + 24, size)
    path.write_bytes(bytes(data))


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS caps the address space on Linux")
def test_a_compressed_member_claiming_more_than_deflate_gives_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bomb.npz"
    np.savez_compressed(path, w=np.arange(1000.0))
    with zipfile.ZipFile(path) as z:
        compressed = z.infolist()[0].compress_size
    _claim(path, compressed * 5000)
    got = load_capped(path)
    assert got.startswith(f"ValueError: {path}: array 'w': expected at most 1100x its"), got


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS caps the address space on Linux")
def test_max_bytes_bounds_a_zip_bomb_and_a_safetensors_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bomb = tmp_path / "zeros.npz"
    np.savez_compressed(bomb, w=np.zeros(1 << 30, np.uint8))  # 1 GB of zeros in about 1 MB
    assert bomb.stat().st_size < 2 << 20
    got = load_capped(bomb, max_bytes=100 << 20)
    assert got.startswith(f"ValueError: {bomb}: inflates to 1,073,741,952 bytes, more than max_bytes=104,857,600"), got
    # without max_bytes: the default bound, 100x the file's size (at least 256 MiB), says so
    size = bomb.stat().st_size
    got = load_capped(bomb)
    why = f"the default bound of 268,435,456 (100x the file's {size:,} bytes, at least 268,435,456: a zip bomb?)"
    assert got.startswith(f"ValueError: {bomb}: inflates to 1,073,741,952 bytes, more than {why}; pass max_bytes"), got
    from treekit.cli import main

    assert main(["show", str(bomb)]) == 1  # (treekit show: the same default, before anything inflates)
    assert "more than the default bound of 268,435,456" in capsys.readouterr().err
    plain = tmp_path / "w.safetensors"
    treekit.save(plain, {"w": np.zeros(1000)})
    with pytest.raises(ValueError, match="expected at most max_bytes=100 bytes, got"):
        treekit.load(plain, max_bytes=100)
    assert treekit.load(plain, max_bytes=os.path.getsize(plain))["w"].shape == (1000,)


def test_a_member_whose_data_is_short_of_its_shape_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "short.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("w.npy", npy((10,), b"\0" * 24))
    expected = r"array 'w': expected 80 bytes of data for shape \(10,\) float64, got 24 \(a truncated"
    with pytest.raises(ValueError, match=expected):
        treekit.load(path)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("w.npy", npy((-1,), b""))
    with pytest.raises(ValueError, match=r"array 'w': expected a \.npy header whose shape has sizes >= 0"):
        treekit.load(path)


def _with_record(tmp_path: Path, change: Any) -> Path:
    """A treekit file of ``{'a': [1.0], 'b': [2.0]}`` whose structure record ``change`` rewrote."""
    from treekit.checkpoint import _safetensors

    path = tmp_path / "t.safetensors"
    treekit.save(path, {"a": np.ones(1), "b": np.full(1, 2.0)})
    tensors, metadata = _safetensors.read(path)
    record = json.loads(metadata["__treekit__"])
    change(record)
    text = json.dumps(record).replace('"DEEP"', "[" * 100_000 + "]" * 100_000)  # (JSON no parser nests)
    _safetensors.write(path, tensors.items(), {**metadata, "__treekit__": text})
    return path


def _dict_node(record: Any) -> Any:
    return next(e for e in record["nodes"] if type(e) is dict and e.get("node") == "dict")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: _dict_node(r).update(keys=["a", "a"]), "a dict node listing a key twice"),
        (lambda r: _dict_node(r).update(order=["a", "a"]), "a dict node whose order lists 1 of its 2 keys"),
        (lambda r: r["nodes"].insert(0, {"path": "x", "value": "DEEP"}), None),
    ],
    ids=["key twice", "order", "deep"],
)
def test_a_record_that_would_drop_a_leaf_or_recurse_is_a_value_error(tmp_path: Path, change: Any, message: Any) -> None:
    path = _with_record(tmp_path, change)
    with pytest.raises(ValueError, match="damaged or unreadable treekit structure record") as info:
        treekit.load(path)
    assert str(path) in str(info.value) and (message is None or message in str(info.value))


def test_a_deeply_nested_header_or_index_is_a_value_error(tmp_path: Path) -> None:
    deep = ("[" * 100_000 + "]" * 100_000).encode()
    path = tmp_path / "deep.safetensors"
    head = b'{"__metadata__": {"x": ' + deep + b"}}"
    head += b" " * (-len(head) % 8)
    path.write_bytes(len(head).to_bytes(8, "little") + head)
    with pytest.raises(ValueError, match=r"__metadata__\['x'\]: expected a string, got an array"):
        treekit.load(path)  # (refused where the nesting starts)
    index = tmp_path / "model.safetensors.index.json"
    index.write_bytes(b'{"weight_map": ' + deep + b"}")  # (refused before parsing: too many arrays)
    with pytest.raises(ValueError, match="at most 12 times its size, got 1 objects, 100,000 arrays"):
        treekit.load(index)
    padded = b'{"pad": "' + b"x" * 1_000_000 + b'", "weight_map": ' + deep + b"}"
    index.write_bytes(padded)  # (as deep, in a file big enough to hold it: past any parser's depth)
    with pytest.raises(ValueError, match=f"{re.escape(str(index))}: expected JSON, got RecursionError"):
        treekit.load(index)
    index.write_bytes(b'{"weight_map": [1, 2]}')
    with pytest.raises(ValueError, match="weight_map"):
        treekit.load(index)


def test_a_dimension_past_numpys_limit_is_refused_even_with_no_bytes(tmp_path: Path) -> None:
    path = tmp_path / "z.safetensors"
    head = json.dumps({"w": {"dtype": "F32", "shape": [2**63, 0], "data_offsets": [0, 0]}}).encode()
    head += b" " * (-len(head) % 8)
    path.write_bytes(len(head).to_bytes(8, "little") + head)
    with pytest.raises(ValueError, match=r"tensor 'w': shape: expected fewer than 2\*\*63 elements"):
        treekit.load(path)


def test_a_record_fetches_only_classes_and_functions_and_imports_nothing(tmp_path: Path) -> None:
    import types

    lazy = types.ModuleType("treekit_test_lazy")
    asked: list[str] = []

    def getattr_hook(name: str) -> Any:  # a module's lazy names, as scipy's and treekit's own
        asked.append(name)
        raise AttributeError(name)

    lazy.__getattr__ = getattr_hook  # type: ignore[method-assign]
    sys.modules["treekit_test_lazy"] = lazy
    try:
        cases = (
            ("os:environ", "os.environ is a _Environ: a record names classes and functions"),
            ("treekit_test_lazy:thing", "treekit_test_lazy.thing is not defined here"),
        )
        for ref, message in cases:
            leaf = {"path": "['x']", "value": {"ref": ref}}
            path = _with_record(tmp_path, lambda r, leaf=leaf: r["nodes"].insert(0, leaf))
            with pytest.raises(ValueError, match=message):
                treekit.load(path)
        assert asked == []  # (looked up in the module's __dict__: its __getattr__ never ran)
    finally:
        del sys.modules["treekit_test_lazy"]


def test_strings_from_a_file_never_reach_a_terminal_raw(tmp_path: Path, capsys: Any) -> None:
    from treekit.__main__ import main
    from treekit.checkpoint import _safetensors

    evil = "\x1b]0;owned\x07\x1b[2J"  # (a window title and a cleared screen, were they printed raw)
    foreign = tmp_path / "foreign.safetensors"
    _safetensors.write(foreign, [(evil, np.zeros(2))], {"note": evil})
    ours = tmp_path / "ours.safetensors"
    treekit.save(ours, {evil: np.zeros(2), "s": evil})
    bad = tmp_path / "bad.safetensors"
    head = json.dumps({evil: {"dtype": evil, "shape": [1], "data_offsets": [0, 4]}}).encode()
    head += b" " * (-len(head) % 8)
    bad.write_bytes(len(head).to_bytes(8, "little") + head + b"\0" * 4)
    said = []
    for path in (foreign, ours, bad):
        main(["show", str(path)])
        said.append("".join(capsys.readouterr()))
    for attempt in (lambda: treekit.load(bad), lambda: treekit.load_leaf(foreign, "nothing")):
        with pytest.raises((ValueError, KeyError)) as info:
            attempt()
        said.append(str(info.value))
    assert all("\x1b" not in text and "\x07" not in text for text in said), said
    assert all("\\x1b" in text for text in said[:3])  # (shown escaped)


def _header_file(path: Path, body: bytes) -> Path:
    path.write_bytes(len(body).to_bytes(8, "little") + body)
    return path


def _record(json_text: str) -> bytes:
    return json.dumps({"__metadata__": {"__treekit__": json_text}}).encode()


HEADERS = {  # 8 MB headers of what takes Python 10 to 30 times its size, and the most it may take
    "tiny objects": (lambda n: b'{"x": [' + b",".join([b"{}"] * (n // 3)) + b"]}", 4),
    "tiny arrays": (lambda n: b'{"x": [' + b",".join([b"[]"] * (n // 3)) + b"]}", 4),
    "short strings": (lambda n: b'{"x": [' + b",".join([b'"ab"'] * (n // 5)) + b"]}", 4),
    "keys in an entry": (lambda n: json.dumps({"x": {f"{i:x}": 0 for i in range(n // 8)}}).encode(), 4),
    "a record of empty arrays": (lambda n: _record("[" + ",".join(["[]"] * (n // 3)) + "]"), 4),
    "a record of small objects": (lambda n: _record("[" + ",".join(['{"a":0}'] * (n // 10)) + "]"), 4),
    "a record of one-item arrays": (lambda n: _record("[" + ",".join(["[0]"] * (n // 4)) + "]"), 4),
    # a record of one string whose braces push the first count over: counted a piece at a time
    "a record of one string of braces": (lambda n: _record(json.dumps("é{{" * (n // 5))), 4),
    "a record of one string of braces with no end": (lambda n: _record('"' + "{{ " * (n // 4)), 4),
    # the worst a header may be: valid, its metadata short strings, refused once it takes 8 times its size
    "metadata of short strings": (
        lambda n: json.dumps({"__metadata__": {f"{i:x}": "ab" for i in range(n // 14)}}).encode(),
        12,
    ),
    "metadata of characters past U+FFFF": (  # (four bytes each in Python: the text too)
        lambda n: json.dumps(
            {"__metadata__": {chr(0x10000 + i): chr(0x10000 + i) + "v" * 6 for i in range(n // 22)}}, ensure_ascii=False
        ).encode(),
        12,
    ),
}

PEAK = """
import re, sys
import numpy, treekit, treekit.checkpoint._safetensors

def peak():  # this process's peak resident memory (ru_maxrss would count the parent's, from before exec)
    with open('/proc/self/status') as f:
        return int(re.search(r'VmHWM:\\s+(\\d+) kB', f.read())[1]) << 10

before = peak()
try:
    treekit.load(sys.argv[1])
except ValueError as exc:
    print('ValueError:', str(exc)[-120:])
print('rise', peak() - before)
"""


def _peak_readable() -> bool:
    try:
        with open("/proc/self/status") as f:
            return "VmHWM:" in f.read()
    except OSError:
        return False


@pytest.mark.skipif(not _peak_readable(), reason="no peak memory (VmHWM) in /proc/self/status on this system")
@pytest.mark.parametrize("kind", HEADERS)
def test_a_header_that_would_take_many_times_its_size_is_refused_in_a_few(tmp_path: Path, kind: str) -> None:
    make, most = HEADERS[kind]
    path = _header_file(tmp_path / "h.safetensors", make(8 << 20))
    out = subprocess.run([sys.executable, "-c", PEAK, str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "ValueError" in out.stdout, out.stdout + out.stderr[-2000:]
    rise = int(out.stdout.split("rise ")[1])
    # the bytes, their text, what the scanner kept, and a few MB of the interpreter's own
    assert rise <= most * path.stat().st_size + (8 << 20), (kind, rise / path.stat().st_size)


@pytest.mark.parametrize(
    "tree",
    [[None] * 20_000, [()] * 5_000, {str(i): {} for i in range(3_000)}, [{"k": None, "l": [], "d": {}}] * 3_000],
    ids=["nones", "empty tuples", "empty dicts", "small nodes"],
)
@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
def test_trees_of_many_small_nodes_are_never_refused(tmp_path: Path, tree: Any, suffix: str) -> None:
    # what the bound before parsing assumes a value costs is what it certainly costs, never more:
    # a record of 20,000 Nones (26 bytes each) is under it
    path = tmp_path / f"t{suffix}"
    treekit.save(path, tree)
    assert treekit.load(path) == tree


_SCALARS = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats(allow_nan=False) | st.text(max_size=20)
_JSON = st.recursive(
    _SCALARS, lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=4), inner, max_size=6)
)


@given(st.lists(_JSON, min_size=1, max_size=20), st.sampled_from([(",", ":"), (", ", ": ")]), st.booleans())
def test_what_json_is_counted_to_take_it_takes_at_least(values: list[Any], separators: Any, ascii: bool) -> None:
    # the bound refuses only JSON that certainly takes more: the count never exceeds what json.loads allocates
    from treekit.checkpoint._json import _counts, _least

    raw = json.dumps(values * 300, separators=separators, ensure_ascii=ascii, allow_nan=True).encode()
    least = _least(*_counts(raw.replace(b"\\\\", b"_").replace(b'\\"', b"_")))
    text = raw.decode()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        parsed = json.loads(text)
        taken = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(parsed) == len(values) * 300
    assert least <= taken



def test_json_of_floats_with_exponents_only_is_counted_before_parsing() -> None:
    from treekit.checkpoint._json import bounded_json

    nested = "[" * 16 + ",".join(["1e5"] * 29) + "]" * 16  # (the first count must see 1e5 as a number)
    with pytest.raises(ValueError, match="at most 12 times its size, got 0 objects, 320,001 arrays"):
        bounded_json(("[" + ",".join([nested] * 20_000) + "]").encode(), "x")


HOSTILE_NAME = "\x1b]0;PWNED\x07\x1b[2K\r\x1b[32mall good\x1b[0m nomod:x"


def _with_type(path: Path, name: str, kind: str = "namedtuple") -> None:
    """A safetensors file whose structure record names ``name`` as a node's class."""
    from treekit.checkpoint import _safetensors

    record = {
        "format": "treekit.save", "version": 2,
        "nodes": [{"path": "['a'][0]", "value": 1}, {"node": kind, "n": 1, "type": name}, {"node": "dict", "n": 1,
                  "keys": ["a"]}],
    }  # fmt: skip
    if path.suffix == ".npz":
        np.savez(path, __treekit__=np.frombuffer(json.dumps(record).encode(), np.uint8))
    else:
        _safetensors.write(path, [], {"format": "pt", "__treekit__": json.dumps(record)})


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
@pytest.mark.parametrize("kind", ["namedtuple", "registered", "jax", "template"])
def test_file_text_in_messages_is_escaped(
    tmp_path: Path, kind: str, suffix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from treekit.cli import main

    path = tmp_path / f"hostile{suffix}"
    _with_type(path, HOSTILE_NAME, kind)
    with pytest.raises(ValueError) as info:
        treekit.load(path)
    message = str(info.value)
    assert "\x1b" not in message and "\x07" not in message and "\r" not in message
    assert r"\x1b]0;PWNED\x07\x1b[2K\r\x1b[32mall good\x1b[0m nomod" in message
    status = main(["show", str(path)])  # (a template's node: shown by its leaves' paths, status 0)
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "\x07" not in out + err and "\r" not in out + err
    assert status == 0 or r"\x1b]0;PWNED" in err

"""python -m treekit show: .npz, .npy and .json files; pickles refused unless asked for."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from treekit.__main__ import main
from treekit.cli._show import load_tree

PICKLE_WHY = "unpickling runs code chosen by whoever wrote the file; pass --allow-pickle only for files you trust"


def test_npz_keys_split_on_slash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = tmp_path / "ckpt.npz"
    np.savez(name, **{"layers/0/w": np.zeros((2, 3), np.float32), "layers/0/b": np.zeros(3, np.float32), "step": 7})
    assert main(["show", str(name)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "path                  shape   dtype    size  bytes",
        "['layers']['0']['b']  (3,)    float32     3     12",
        "['layers']['0']['w']  (2, 3)  float32     6     24",
        "['step']              ()      int64       1      8",
        "total                 3 arrays           10     44",
    ]


def test_json_and_npy(tmp_path: Path) -> None:
    (tmp_path / "t.json").write_text(json.dumps({"lr": 0.1, "sizes": [1, 2], "name": None}))
    assert load_tree(tmp_path / "t.json") == {"lr": 0.1, "sizes": [1, 2], "name": None}
    np.save(tmp_path / "a.npy", np.arange(3))
    assert load_tree(tmp_path / "a.npy").tolist() == [0, 1, 2]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("t.pkl", f"refusing to load a pickle file: {PICKLE_WHY}"),
        ("disguised.json", f"refusing to load a pickle file: {PICKLE_WHY}"),
        ("objects.npz", f"refusing to load array 'x', stored with pickle: {PICKLE_WHY}"),
        ("objects.npy", f"refusing to load a pickled array: {PICKLE_WHY}"),
        ("clash.npz", "flat['a/b']: expected a dict at ('a',), got a leaf (key 'a' clashes with key 'a/b')"),
        ("t.txt", "expected a .safetensors, .npz, .npy or .json file (or a pickle, with --allow-pickle), got '.txt'"),
    ],
)
def test_refusals_say_why(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, message: str) -> None:
    payload = {"w": np.zeros(2)}
    (tmp_path / "t.pkl").write_bytes(pickle.dumps(payload))
    (tmp_path / "disguised.json").write_bytes(pickle.dumps(payload))
    np.savez(tmp_path / "objects.npz", x=np.array([{"a": 1}], dtype=object))
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object))
    np.savez(tmp_path / "clash.npz", **{"a": np.zeros(1), "a/b": np.zeros(1)})
    (tmp_path / "t.txt").write_text("{}")
    path = tmp_path / name
    assert main(["show", str(path)]) == 1
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", f"treekit show: {path}: {message}\n")


def test_allow_pickle(tmp_path: Path) -> None:
    (tmp_path / "t.pkl").write_bytes(pickle.dumps({"w": np.zeros(2)}))
    np.savez(tmp_path / "objects.npz", x=np.array([{"a": 1}], dtype=object))
    assert load_tree(tmp_path / "t.pkl", allow_pickle=True)["w"].shape == (2,)
    assert load_tree(tmp_path / "objects.npz", allow_pickle=True)["x"][0] == {"a": 1}


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(tmp_path / "nope.npz")]) == 1
    assert "No such file or directory" in capsys.readouterr().err


def test_python_dash_m(tmp_path: Path) -> None:
    (tmp_path / "t.json").write_text('{"w": [1.5]}')
    command = [sys.executable, "-m", "treekit", "show", str(tmp_path / "t.json")]
    run = subprocess.run(command, capture_output=True, text=True)
    assert (run.returncode, run.stdout.splitlines()[1]) == (0, "['w'][0]  -      float     -      -")


# -- what the file says is not trusted (issue 13 items 9 and 12) --------------------------------
def npy_bytes(header: str, data: bytes = b"", version: int = 1) -> bytes:
    """A .npy file with this header dict text (padded as numpy pads it) and data."""
    width = 2 if version == 1 else 4
    header += " " * (-(10 + (width - 2) + len(header) + 1) % 64) + "\n"
    return b"\x93NUMPY" + bytes([version, 0]) + len(header).to_bytes(width, "little") + header.encode() + data


def show_err(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run `treekit show *argv`, check it failed with one line on stderr and nothing on stdout."""
    assert main(["show", *argv]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1, captured.err
    return captured.err


def test_npz_that_inflates_past_the_limit_is_refused_before_reading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A .npz of 64 KiB that inflates to 64 MiB: refused from the zip's declared sizes, unread."""
    import tracemalloc

    name = tmp_path / "bomb.npz"
    np.savez_compressed(name, w=np.zeros(64 << 20, np.uint8))
    assert name.stat().st_size < 1 << 20
    tracemalloc.start()
    try:
        err = show_err(capsys, str(name), "--max-bytes", "16M")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert err == (
        f"treekit show: {name}: inflates to {(64 << 20) + 128:,} bytes, more than --max-bytes 16,777,216; "
        "pass --max-bytes N or --no-limit to read it anyway\n"
    )
    assert peak < 4 << 20
    for lift in (["--no-limit"], ["--max-bytes", "1G"]):
        assert main(["show", str(name), *lift]) == 0
        assert capsys.readouterr().out.splitlines()[1].split() == [
            "['w']",
            "(67108864,)",
            "uint8",
            "67,108,864",
            "67,108,864",
        ]


def test_default_limit_is_a_gibibyte(tmp_path: Path) -> None:
    from treekit.cli._show import DEFAULT_MAX_BYTES

    assert DEFAULT_MAX_BYTES == 1 << 30


HUGE = "{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776,), }"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            npy_bytes(HUGE, b"\0" * 16),
            "expected 8,796,093,022,208 bytes of data for shape (1099511627776,) float64, got 16 "
            "(a truncated or corrupt file)",
        ),
        (
            npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }" + " " * 20_000, b"\0" * 16, 2),
            "expected a .npy header of at most 10,000 bytes, got 20,084 bytes (a header this long is slow to parse "
            "safely; pass --allow-pickle only for files you trust)",
        ),
        (b"\x93NUMPY\x01", "expected a .npy header starting with b'\\x93NUMPY', got b'\\x93NUMPY'"),
        (b"PK\x03\x04", "expected a .npy header starting with b'\\x93NUMPY', got b'PK\\x03\\x04'"),
        (npy_bytes("{'descr': '<f8', 'shape': (2,)}"), "expected a .npy header, got one numpy cannot read"),
        (
            npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", b"\0" * 8),
            "expected 16 bytes of data for shape (2,) float64, got 8",
        ),
    ],
    ids=["2**40 shape", "oversized header", "short", "not npy", "bad header", "truncated"],
)
def test_npy_header_is_checked_before_reading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, message: str
) -> None:
    """Issue 13 item 12: a 2**40 shape gave a MemoryError traceback; an oversized header was
    reported as "refusing to load a pickled array"."""
    name = tmp_path / "x.npy"
    name.write_bytes(content)
    err = show_err(capsys, str(name))
    assert err.startswith(f"treekit show: {name}: {message}")
    assert "pickled" not in err


def test_npz_members_headers_are_checked_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import zipfile

    name = tmp_path / "x.npz"
    with zipfile.ZipFile(name, "w") as archive:
        archive.writestr("ok.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", b"\0" * 4))
        archive.writestr("w.npy", npy_bytes(HUGE, b"\0" * 16))
    err = show_err(capsys, str(name))
    assert err.startswith(f"treekit show: {name}: array 'w': expected 8,796,093,022,208 bytes of data")


def test_npy_is_memory_mapped_not_read(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.arange(6.0).reshape(2, 3))
    tree = load_tree(tmp_path / "a.npy", max_bytes=1)
    assert isinstance(tree, np.memmap) and tree.shape == (2, 3) and tree[1, 2] == 5.0


@pytest.mark.parametrize("depth", [200_000, 1_000_000])
def test_json_deeper_than_the_parser_reads_is_one_line_not_a_recursion_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], depth: int
) -> None:
    """Issue 13 item 12: a deep JSON file gave a 31-line RecursionError traceback.

    Python's json parser recurses; how deep it goes depends on the Python (about 1,000 levels
    on 3.11, 10,000 on 3.13), so these files are deeper than any of them reads.
    """
    name = tmp_path / "deep.json"
    name.write_text("[" * depth + "1" + "]" * depth)
    err = show_err(capsys, str(name))
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert err == (
        f"treekit show: {name}: expected JSON nested no deeper than Python {version}'s json parser reads "
        "(it recurses), got deeper\n"
    )


def test_deep_json_that_the_parser_reads_is_shown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = tmp_path / "deep.json"  # 500 levels: under every Python's parser limit; treekit's walks do not recurse
    name.write_text("[" * 500 + "1" + "]" * 500)
    assert main(["show", str(name)]) == 0
    assert "[0]" * 500 in capsys.readouterr().out


def test_json_over_the_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = tmp_path / "big.json"
    name.write_text("[" + "1," * 1000 + "1]")
    err = show_err(capsys, str(name), "--max-bytes", "1K")
    assert err == (
        f"treekit show: {name}: a JSON file of 2,003 bytes, more than --max-bytes 1,024; "
        "pass --max-bytes N or --no-limit to read it anyway\n"
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"PK\x03\x04garbage", "File is not a zip file"),
        (b"{\xff}", "codec can't decode"),
        (b"{'a': 1}", "Expecting property name"),
    ],
    ids=["corrupt npz", "not utf-8", "bad json"],
)
def test_unreadable_files_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, message: str
) -> None:
    name = tmp_path / ("x.npz" if content.startswith(b"PK") else "x.json")
    name.write_bytes(content)
    assert message in show_err(capsys, str(name))


def test_show_json_and_depth(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = tmp_path / "ckpt.npz"
    np.savez(name, **{"dense/w": np.zeros((2, 3), np.float32), "dense/b": np.zeros(3, np.float32), "step": 7})
    assert main(["show", "--json", str(name)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["total"] == {"leaves": 3, "arrays": 3, "size": 10, "bytes": 44}
    assert data["rows"][1] == {
        "path": "['dense']['w']",
        "leaves": 1,
        "arrays": 1,
        "size": 6,
        "bytes": 24,
        "type": "ndarray",
        "shape": [2, 3],
        "dtype": "float32",
    }
    assert main(["show", "--depth", "1", str(name)]) == 0
    assert capsys.readouterr().out.splitlines() == [  # as summary(tree, depth=1) prints it
        "path       shape     dtype    size  bytes",
        "['dense']  2 arrays  float32     9     36",
        "['step']   ()        int64       1      8",
        "total      3 arrays             10     44",
    ]
    assert main(["show", "--depth", "0", "--json", str(name)]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == [
        {"path": "(root)", "leaves": 3, "arrays": 3, "size": 10, "bytes": 44}
    ]


def test_a_damaged_treekit_record_names_the_file_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import treekit

    treekit.save(tmp_path / "ok.npz", {"a": np.zeros(2), "b": [1, None]})
    with np.load(tmp_path / "ok.npz") as data:
        arrays = dict(data)
    arrays["__treekit__"] = np.frombuffer(b'{"format": "treekit", "nodes": 5}', np.uint8)
    name = tmp_path / "bad.npz"
    np.savez(name, **arrays)
    err = show_err(capsys, str(name))
    assert err.startswith(f"treekit show: {name}: damaged or unreadable treekit structure record (")
    assert err.count(str(name)) == 1


# -- hostile pickles and other files that gave a traceback (issue 21 item 4) --------------------------
def _zip_bytes(members: dict[str, bytes], flag: int = 0, method: int | None = None) -> bytes:
    """A zip file of these members; ``flag`` and ``method`` patched into every header after."""
    import io
    import struct
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    raw = bytearray(buffer.getvalue())
    for signature, at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        i = raw.find(signature)
        while i >= 0:
            struct.pack_into("<H", raw, i + at, struct.unpack_from("<H", raw, i + at)[0] | flag)
            if method is not None:
                struct.pack_into("<H", raw, i + at + 2, method)
            i = raw.find(signature, i + 4)
    return bytes(raw)


GOOD_NPY = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", b"\0" * 4)
TORCH_ZIP = (
    "expected a pickle, got a zip archive (torch.save's format): load it with torch.load, "
    "then treekit.save the tree to show it"
)
HOSTILE_FILES: dict[str, tuple[str, bytes, str]] = {
    # case: (file name, content, the one line after "treekit show: FILE: "; "..." ends a prefix of it)
    "truncated pickle": (
        "t.pkl",
        pickle.dumps({"w": list(range(100))})[:20],
        "could not unpickle it: pickle data was truncated",
    ),
    "pickle naming a missing module": (
        "t.pkl",
        b"\x80\x02cno_such_module_treekit_test\nThing\n)\x81.",
        "could not unpickle it: ModuleNotFoundError: No module named 'no_such_module_treekit_test'",
    ),
    "pickle naming a missing attribute": (
        "t.pkl",
        b"\x80\x02cbuiltins\nno_such_name\n)\x81.",
        "could not unpickle it: AttributeError: ...",  # (Python's words after that vary by version)
    ),
    "pickle that raises as it loads": (
        "t.pkl",
        b"\x80\x02cbuiltins\nint\nX\x01\x00\x00\x00x\x85R.",  # int('x')
        "could not unpickle it: ValueError: invalid literal for int() with base 10: 'x'",
    ),
    "not a pickle": ("t.pkl", b"hello", "could not unpickle it: ..."),
    "pickle ending too soon": (
        "t.pkl",
        b"\x80\x02]",
        "could not unpickle it: the data ends too soon, a truncated file (Ran out of input)",
    ),
    "torch legacy pickle": (
        "t.pt",
        b"\x80\x02X\x01\x00\x00\x00xQ.",  # a persistent id, as torch.save's tensors are
        "could not unpickle it: A load persistent id instruction was encountered, but no persistent_load "
        "function was specified. (torch.save's format? load it with torch.load)",
    ),
    "zip .pt": (
        "model.pt",
        _zip_bytes({"archive/data.pkl": pickle.dumps({"a": 1}), "archive/version": b"3\n"}),
        TORCH_ZIP,
    ),
    "zip .pth": ("model.pth", _zip_bytes({"archive/data.pkl": b"."}), TORCH_ZIP),
    "truncated pickle named .npz": (
        "t.npz",
        pickle.dumps({"a": 1})[:5],
        "could not unpickle it: pickle data was truncated",
    ),
    "pickled cycle": (
        "cycle.pkl",
        b"\x80\x02]q\x00h\x00a.",
        "could not summarize the tree it holds: tree[0]: expected a tree, "
        "got a cycle (this list is the same object as its ancestor tree)",
    ),
    "empty .pkl": ("t.pkl", b"", "expected a tree, got an empty file"),
    "empty .npz": ("t.npz", b"", "expected a tree, got an empty file"),
    "empty .npy": ("t.npy", b"", "expected a tree, got an empty file"),
    "empty .json": ("t.json", b"", "expected a tree, got an empty file"),
    ".npz that is no zip": (
        "t.npz",
        b"hello world",
        "not a valid .npz (zip) file: it does not start as a zip file does",
    ),
    "encrypted .npz member": (
        "t.npz",
        _zip_bytes({"w.npy": GOOD_NPY}, flag=1),
        "array 'w': expected a zip member as numpy writes it, got an encrypted one",
    ),
    "unknown compression": (
        "t.npz",
        _zip_bytes({"w.npy": GOOD_NPY}, method=99),
        "array 'w': cannot read it from the zip file (That compression method is not supported)",
    ),
    "negative .npy shape": (
        "t.npy",
        npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (-1,), }"),
        "expected a .npy header whose shape has sizes >= 0, got shape (-1,)",
    ),
    "invalid json": ("t.json", b'{"a": ', "not valid JSON: Expecting value: line 1 column 7 (char 6)"),
    "json with a BOM": (
        "t.json",
        b'\xef\xbb\xbf{"a": 1}',
        "not valid JSON: Unexpected UTF-8 BOM (decode using utf-8-sig): line 1 column 1 (char 0)",
    ),
    "json not utf-8": (
        "t.json",
        b'{"a": "\xff"}',
        "not valid JSON: 'utf-8' codec can't decode byte 0xff in position 7: invalid start byte",
    ),
    "json int too long": (
        "t.json",
        b"1" * 5000,
        "could not read it as JSON: Exceeds the limit (4300 digits) for integer string conversion: value has "
        "5000 digits; use sys.set_int_max_str_digits() to increase the limit",
    ),
    "json too deep": (
        "t.json",
        b'{"a":' * 200_000 + b"1" + b"}" * 200_000,
        f"expected JSON nested no deeper than Python {sys.version_info.major}.{sys.version_info.minor}'s json "
        "parser reads (it recurses), got deeper",
    ),
}


@pytest.mark.parametrize("case", list(HOSTILE_FILES))
def test_hostile_files_with_allow_pickle_are_one_line_and_status_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    """Issue 21 item 4: a truncated pickle, a pickle naming a missing module and torch's zip .pt
    printed a 19-20 line traceback with --allow-pickle; an empty file, a .npz that is no zip and
    bad JSON gave other errors' words. Now one line each, naming the file, and status 1."""
    name, content, message = HOSTILE_FILES[case]
    path = tmp_path / name
    path.write_bytes(content)
    err = show_err(capsys, "--allow-pickle", str(path))
    if message.endswith("..."):
        assert err.startswith(f"treekit show: {path}: {message[:-3]}"), err
    else:
        assert err == f"treekit show: {path}: {message}\n"


def test_a_zip_pt_is_named_a_zip_archive_with_or_without_allow_pickle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "model.pt"
    path.write_bytes(HOSTILE_FILES["zip .pt"][1])
    assert show_err(capsys, str(path)) == f"treekit show: {path}: {TORCH_ZIP}\n"


def test_a_pickle_in_an_npz_that_does_not_unpickle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An object array whose pickle names a missing module: numpy's unpickling error, in one line."""
    path = tmp_path / "objects.npz"
    member = npy_bytes("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", b"\x80\x02cno_such_module_tk\nT\n.")
    path.write_bytes(_zip_bytes({"x.npy": member}))
    err = show_err(capsys, "--allow-pickle", str(path))
    assert err.startswith(f"treekit show: {path}: could not unpickle it: ")
    assert "no_such_module_tk" in err


def test_a_json_file_larger_than_it_says_is_read_only_up_to_the_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """/dev/zero has size 0 in stat: it is read up to --max-bytes, then refused."""
    import os

    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero here")
    path = tmp_path / "zero.json"
    path.symlink_to("/dev/zero")
    assert show_err(capsys, str(path), "--max-bytes", "1K") == (
        f"treekit show: {path}: a JSON file of more than 1,024 bytes, more than --max-bytes 1,024; "
        "pass --max-bytes N or --no-limit to read it anyway\n"
    )


def test_a_reader_raising_anything_else_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import treekit.cli._show

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise LookupError("something unforeseen")

    monkeypatch.setattr(treekit.cli._show, "load_tree", broken)
    path = tmp_path / "t.json"
    path.write_text("{}")
    message = "could not read it: LookupError: something unforeseen"
    assert show_err(capsys, str(path)) == f"treekit show: {path}: {message}\n"


def test_a_safetensors_file_is_shown_from_its_header(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import treekit

    name = tmp_path / "ckpt.safetensors"
    treekit.save(name, {"dense": {"w": np.zeros((4, 3), np.float32), "b": np.zeros(3, np.float32)}, "step": 3})
    data = bytearray(name.read_bytes())  # the array bytes cut off: only the header is read
    end = 8 + int.from_bytes(data[:8], "little")
    name.write_bytes(bytes(data[:end]) + b"\0" * (len(data) - end))
    assert main(["show", str(name)]) == 0
    out = capsys.readouterr().out
    assert "['dense']['w']" in out and "(4, 3)" in out and "float32" in out


def test_files_are_recognised_by_content_whatever_their_names(tmp_path: Path, capsys: Any) -> None:
    """treekit.save's files named .ckpt or .bin: safetensors by their header, a .npz by its zip head."""
    import treekit

    for name, layout in (("model.ckpt", "w.safetensors"), ("model.bin", "w.npz"), ("weights", "w.safetensors")):
        treekit.save(tmp_path / layout, {"layer": {"w": np.zeros((2, 3), np.float32)}})
        (tmp_path / layout).rename(tmp_path / name)
        assert main(["show", str(tmp_path / name)]) == 0
        out = capsys.readouterr().out
        assert "(2, 3)" in out and "float32" in out, out
    (tmp_path / "notes.ckpt").write_text("not a checkpoint")
    assert main(["show", str(tmp_path / "notes.ckpt")]) != 0
    assert "expected a .safetensors, .npz, .npy or .json file" in capsys.readouterr().err

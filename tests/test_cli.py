"""The command line as a program: the ``treekit`` script, ``--version``, help, exit codes, stderr."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

import treekit
from treekit.__main__ import main, parser

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str, script: str | None = None, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    command = [script] if script else [sys.executable, "-m", "treekit"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=120, env=env, **kwargs)


def test_console_script_is_declared_and_is_main() -> None:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"] == {"treekit": "treekit.cli:main"}


def test_installed_console_script_runs(tmp_path: Path) -> None:
    """The ``treekit`` script that pip made runs the same main as ``python -m treekit``."""
    script = shutil.which("treekit", path=sysconfig.get_path("scripts"))
    if script is None:
        pytest.skip("treekit is not installed in this environment (run pip install -e .)")
    (tmp_path / "t.json").write_text('{"w": [1.5]}')
    result = run("show", str(tmp_path / "t.json"), script=script)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines()[1] == "['w'][0]  -      float     -      -"
    missing = run("show", str(tmp_path / "nope.json"), script=script)
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr.startswith(f"treekit show: {tmp_path / 'nope.json'}: ")


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out == f"treekit {treekit.__version__}\n"
    names = metadata.packages_distributions().get("treekit", [])
    if names:  # installed: the metadata and treekit.__version__ agree
        assert out == f"treekit {metadata.version(names[0])}\n"


def _all_actions(p: argparse.ArgumentParser, prefix: str = "") -> list[tuple[str, argparse.Action]]:
    out = []
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                out += _all_actions(child, f"{prefix}{name} ")
        else:
            out.append((prefix + "/".join(action.option_strings or [action.dest]), action))
    return out


def test_every_argument_has_help() -> None:
    actions = _all_actions(parser())
    assert {name for name, _ in actions} >= {"show file", "show --json", "show --depth", "demo --steps", "--version"}
    assert [name for name, action in actions if not (action.help or "").strip()] == []


def test_every_subcommand_has_help_and_a_description() -> None:
    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help for choice in sub._choices_actions}
    assert sorted(helps) == sorted(sub.choices) and all(helps.values())
    assert all(child.description for child in sub.choices.values())


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "treekit: error: the following arguments are required: COMMAND (see treekit --help)"),
        (["frobnicate"], "treekit: error: argument COMMAND: invalid choice: 'frobnicate'"),
        (["show"], "treekit show: error: the following arguments are required: FILE (see treekit show --help)"),
        (["show", "x.npz", "--max-bytes", "lots"], "treekit show: error: argument --max-bytes: expected a byte count"),
        (["show", "x.npz", "--depth", "-1"], "treekit show: error: argument --depth: expected an integer >= 0"),
        (["show", "x.npz", "--bogus"], "treekit: error: unrecognized arguments: --bogus"),
    ],
)
def test_usage_errors_are_one_line_and_status_2(argv: list[str], message: str, capsys: Any) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(message)
    assert captured.err.count("\n") == 1


def test_help_goes_to_stdout_with_status_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: treekit show ")
    assert "--max-bytes N" in out and "--no-limit" in out and "--json" in out and "--depth N" in out


def test_python_dash_m_names_itself() -> None:
    result = run("show")
    assert result.returncode == 2
    assert result.stderr.startswith("python -m treekit show: error: ")
    assert "Traceback" not in result.stderr


def test_a_closed_pipe_is_no_traceback(tmp_path: Path) -> None:
    """Issue 13 item 12: ``show ... | head -1`` printed a BrokenPipeError traceback."""
    lines = "".join(f'"k{i}": [1.5, 2.5],' for i in range(20_000))
    (tmp_path / "wide.json").write_text("{" + lines + '"end": 0}')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    reader = subprocess.Popen(
        [sys.executable, "-m", "treekit", "show", str(tmp_path / "wide.json")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert reader.stdout is not None and reader.stderr is not None
    assert reader.stdout.readline().startswith(b"path")
    reader.stdout.close()  # what `head -1` does after its line
    err = reader.stderr.read().decode()
    assert reader.wait(timeout=120) == 1
    assert err == ""


# -- hostile files, as the real command meets them (issue 13 items 9 and 12) -------------------
def _npy(shape: tuple[int, ...], data: bytes = b"", pad: int = 0) -> bytes:
    """A .npy file (format 2.0) of uint8 with this shape in its header, ``pad`` spaces of
    header padding, and ``data``, whatever the header says."""
    header = f"{{'descr': '|u1', 'fortran_order': False, 'shape': {shape}, }}" + " " * pad
    header += " " * (-(12 + len(header) + 1) % 64) + "\n"
    return b"\x93NUMPY\x02\x00" + len(header).to_bytes(4, "little") + header.encode() + data


def _zip_bomb(path: Path, inflated: int) -> None:
    """A .npz whose one member, a .npy of ``inflated`` zero bytes, is deflated to about 1/1000
    of that: written without ever holding (or compressing) more than 1 MiB at a time."""
    import struct
    import zlib

    chunk = bytes(1 << 20)
    header = _npy((inflated,))
    squeeze = zlib.compressobj(9, zlib.DEFLATED, -15)  # raw deflate, as zip members are
    data = [squeeze.compress(header) + squeeze.flush(zlib.Z_FULL_FLUSH)]
    # after a full flush the compressor starts afresh: every 1 MiB of zeros compresses the same
    piece = squeeze.compress(chunk) + squeeze.flush(zlib.Z_FULL_FLUSH)
    crc = zlib.crc32(header)
    for _ in range(inflated // len(chunk)):
        crc = zlib.crc32(chunk, crc)
    data += [piece] * (inflated // len(chunk)) + [squeeze.flush()]
    size, packed, name = len(header) + inflated, sum(map(len, data)), b"w.npy"
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 8, 0, 0, crc, packed, size, len(name), 0) + name
    central = struct.pack(
        "<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 8, 0, 0, crc, packed, size, len(name), 0, 0, 0, 0, 0, 0
    )
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1, len(central) + len(name), len(local) + packed, 0)
    with path.open("wb") as f:
        f.writelines([local, *data, central + name, end])


def test_a_zip_bomb_is_a_valid_npz(tmp_path: Path) -> None:
    """The bomb below is an honest file: numpy reads it (here 4 MiB) and its CRC checks out."""
    import numpy as np

    _zip_bomb(tmp_path / "small.npz", 4 << 20)
    with np.load(tmp_path / "small.npz") as data:
        assert data["w"].shape == (4 << 20,) and not data["w"].any()


DEEP = 200_000
HOSTILE: dict[str, tuple[Any, str]] = {
    # deeper than any Python's json parser reads (3.11 stops near 1,000 levels, 3.13 near 10,000)
    "200,000-deep json": (lambda p: p.write_text("[" * DEEP + "]" * DEEP), "expected JSON nested no deeper than"),
    "npy declaring 2**40": (lambda p: p.write_bytes(_npy((1 << 40,), b"\0" * 64)), "expected 1,099,511,627,776 bytes"),
    "oversized npy header": (
        lambda p: p.write_bytes(_npy((2,), b"\0\0", pad=20_000)),
        "expected a .npy header of at most 10,000 bytes, got 20,",
    ),
    "2 MiB npz inflating to 2 GiB": (
        lambda p: _zip_bomb(p, 2 << 30),
        "inflates to 2,147,483,776 bytes, more than the default bound of 268,435,456 (100x the file's",
    ),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_files_are_one_line_on_stderr_and_status_1(tmp_path: Path, case: str) -> None:
    """Issue 13 items 9 and 12: each of these gave a traceback (RecursionError, MemoryError) or
    a wrong reason, or inflated 2 GiB; now one line, status 1, in well under the timeout."""
    import time

    make, message = HOSTILE[case]
    path = tmp_path / ("x.json" if "json" in case else "x.npz" if "npz" in case else "x.npy")
    make(path)
    assert path.stat().st_size < 3 << 20
    start = time.perf_counter()
    result = run("show", str(path))
    elapsed = time.perf_counter() - start
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.startswith(f"python -m treekit show: {path}: {message}"), result.stderr
    assert result.stderr.count("\n") == 1 and "pickled" not in result.stderr
    assert elapsed < 60  # reading 2 GiB, or allocating 2**40 bytes, would not be


def _zip_pt(path: Path) -> None:
    """A file as torch.save (1.6 and later) writes it: a zip archive holding a pickle."""
    import pickle
    import zipfile

    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", pickle.dumps({"w": [1.0]}))
        archive.writestr("archive/version", "3\n")


HOSTILE_PICKLES: dict[str, tuple[str, Any, str]] = {
    # case: (file name, how to write it, the one line after "python -m treekit show: FILE: ")
    "truncated pickle": (
        "t.pkl",
        lambda p: p.write_bytes(__import__("pickle").dumps({"w": list(range(100))})[:20]),
        "could not unpickle it: pickle data was truncated",
    ),
    "pickle naming a missing module": (
        "t.pkl",
        lambda p: p.write_bytes(b"\x80\x02cno_such_module_treekit_cli\nThing\n)\x81."),
        "could not unpickle it: ModuleNotFoundError: No module named 'no_such_module_treekit_cli'",
    ),
    "zip .pt": (
        "model.pt",
        _zip_pt,
        "expected a pickle, got a zip archive (torch.save's format): load it with torch.load, "
        "then treekit.save the tree to show it",
    ),
    "empty file": ("t.pkl", lambda p: p.write_bytes(b""), "expected a tree, got an empty file"),
    "pickled cycle": (
        "t.pkl",
        lambda p: p.write_bytes(b"\x80\x02]q\x00h\x00a."),
        "could not summarize the tree it holds: tree[0]: expected a tree, got a cycle "
        "(this list is the same object as its ancestor tree)",
    ),
}


@pytest.mark.parametrize("case", list(HOSTILE_PICKLES))
def test_hostile_pickles_are_one_line_on_stderr_and_status_1(tmp_path: Path, case: str) -> None:
    """Issue 21 item 4: ``show --allow-pickle`` on these printed a 19-20 line traceback."""
    name, make, message = HOSTILE_PICKLES[case]
    path = tmp_path / name
    make(path)
    result = run("show", "--allow-pickle", str(path))
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == f"python -m treekit show: {path}: {message}\n"


def test_show_html_writes_the_view_of_a_checkpoint_from_its_header(tmp_path: Path) -> None:
    import numpy as np

    ckpt, page = tmp_path / "ckpt.safetensors", tmp_path / "ckpt.html"
    treekit.save(str(ckpt), {"layers": [{"w": np.ones((4, 4), np.float32)}, {"w": np.ones(4, np.float32)}]})
    result = run("show", str(ckpt), "--html", str(page), "--depth", "1")
    assert result.returncode == 0 and result.stdout.strip() == f"wrote {page}", result.stderr
    text = page.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "f32[4,4]" in text and "total: 2 arrays · 20 params" in text
    assert "&#x27;layers&#x27;][1][&#x27;w&#x27;]" in text

"""python -m treekit show: .npz, .npy and .json files; pickles refused unless asked for."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from treekit.__main__ import main
from treekit._show import load_tree

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
        ("t.txt", "expected a .npz, .npy or .json file (or a pickle, with --allow-pickle), got '.txt'"),
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
    assert (captured.out, captured.err) == ("", f"python -m treekit show: {path}: {message}\n")


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

"""benchmarks/compare.py: its output format and its leaf-agreement check (never its timings)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import treekit

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "compare.py"

OPS = (
    "flatten",
    "unflatten",
    "leaves",
    "structure",
    "map",
    "map3",
    "map_with_path",
    "flatten_with_path",
    "keystr",
    "same_structure",
)


@pytest.fixture(scope="module")
def compare() -> ModuleType:
    spec = importlib.util.spec_from_file_location("compare", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _liar(compare: ModuleType) -> Any:
    """treekit, except that its leaves come back in reverse order."""
    lib = compare._jax_style(treekit, "liar", "0")
    lib.ops["leaves"] = lambda i: lambda: treekit.tree_leaves(i.tree)[::-1]
    return lib


def test_same_objects_compares_identity(compare: ModuleType) -> None:
    a, b = float("1.5"), float("2.5")
    assert compare.same_objects((a, b), [a, b])
    assert not compare.same_objects([a, float("2.5")], [a, b])  # equal, not the same object
    assert not compare.same_objects([a], [a, b])
    assert compare.same_objects((b, a), [a, b], any_order=True)  # torch keeps insertion order
    assert not compare.same_objects([a, a], [a, b], any_order=True)
    assert not compare.same_objects([a, float("2.5")], [a, b], any_order=True)


def test_parameter_trees_keep_their_natural_key_order(compare: ModuleType) -> None:
    standard = compare.trees(quick=False)
    assert list(standard["mlp-1000"]()[0]) == ["weights", "biases"]
    assert list(standard["mlp-1000-sorted"]()[0]) == ["biases", "weights"]
    block = standard["transformer-12"]()["block_00"]
    assert list(block) == ["ln1", "attn", "ln2", "mlp"] and list(block["attn"]["q"]) == ["kernel", "bias"]


def test_a_library_in_insertion_order_agrees(compare: ModuleType) -> None:
    lib = compare._jax_style(treekit, "torch-like", "0")
    lib.any_order = True
    tree = {"w": LEAVES[1], "b": LEAVES[0]}
    assert compare.check(lib, "leaves", list(tree.values()), treekit.tree_leaves(tree), treekit.tree_leaves) is None


LEAVES = [object(), object()]
TREE = {"a": LEAVES[0], "b": LEAVES[1]}


@pytest.mark.parametrize(
    ("op", "result", "why"),
    [
        ("leaves", LEAVES, None),
        ("leaves", LEAVES[::-1], "leaves differ"),
        ("flatten", (LEAVES, None), None),
        ("flatten", ([object(), object()], None), "leaves differ"),
        ("map", TREE, None),
        ("map", {"a": LEAVES[0]}, "leaves differ"),
        ("keystr", ["['a']", "['b']"], None),
        ("keystr", ["['a']"], "leaves differ"),
        ("same_structure", True, None),
        ("same_structure", False, "leaves differ"),
    ],
)
def test_check(compare: ModuleType, op: str, result: Any, why: str | None) -> None:
    lib = compare._jax_style(treekit, "treekit", "0")
    assert compare.check(lib, op, result, LEAVES, treekit.tree_leaves) == why


def test_a_library_that_disagrees_is_left_out_of_the_tree(compare: ModuleType) -> None:
    baseline = compare._jax_style(treekit, "jax", "0")  # treekit stands in for jax here
    result = compare.run(
        {"jax": baseline, "liar": _liar(compare)}, {"torch": "not installed"}, True, 1, 1e-4, ["mlp-3"]
    )
    assert [row["op"] for row in result["rows"]] == list(compare.OPS)
    for row in result["rows"]:
        assert row["notes"] == {"liar": "leaves differ", "torch": "not installed"}
        assert set(row["ratio_to_jax"]) == {"jax"}
    assert result["geomean_ratio_to_jax"]["liar"] == {"geomean": None, "rows": 0, "of": len(compare.OPS)}


def test_worst_rows_and_the_torch_check(compare: ModuleType) -> None:
    def row(tree: str, op: str, treekit: float, torch: float) -> dict[str, Any]:
        seconds = {"jax": 1.0, "treekit": treekit, "torch": torch}
        return {"tree": tree, "op": op, "seconds": seconds, "ratio_to_jax": seconds, "notes": {}}

    rows = [row("a", "flatten", 0.5, 6.0), row("b", "leaves", 1.2, 24.0), row("c", "map", 0.125, 1.0)]
    worst = compare.worst_rows(rows, ["treekit", "torch"])
    assert worst["treekit"] == {"tree": "b", "op": "leaves", "ratio": 1.2, "above_1": 1}
    check = compare.torch_check(rows)
    assert (check["rows"], check["met"], check["smallest"]) == (3, 2, 8.0)
    assert [(b["tree"], b["op"]) for b in check["below"]] == [("c", "map")]


def test_several_runs_give_each_cell_its_median(compare: ModuleType) -> None:
    def result(*ratios: float) -> dict[str, Any]:
        rows = [
            {"tree": f"t{i}", "op": "flatten", "group": "model", "notes": {}, "seconds": {"jax": 2.0, "treekit": 2 * r}}
            | {"ratio_to_jax": {"jax": 1.0, "treekit": r}}
            for i, r in enumerate(ratios)
        ]
        settings = {"runs": 1, "statistic": "min"}
        return compare.totalled({"settings": settings, "libraries": ["treekit", "jax"], "rows": rows})

    runs = [result(0.5, 1.2), result(0.7, 0.8), result(0.6, 0.9)]
    assert compare.merged(runs[:1]) is runs[0]
    both = compare.merged(runs)
    assert [row["ratio_to_jax"]["treekit"] for row in both["rows"]] == [0.6, 0.9]
    assert [row["seconds"]["treekit"] for row in both["rows"]] == [1.2, 1.8]
    assert both["rows"][1]["ratio_runs"]["treekit"] == [1.2, 0.8, 0.9]
    assert both["model_rows"]["worst_row"]["treekit"] == {"tree": "t1", "op": "flatten", "ratio": 0.9, "above_1": 0}
    assert both["settings"]["runs"] == 3 and runs[0]["settings"]["runs"] == 1
    for run in runs:  # a library timed in another process: its own runs, given with each of these
        run["rows"][0]["ratio_runs"] = {"pure": [3.0, 2.0, 4.0]}
        run["rows"][0]["ratio_to_jax"]["pure"] = 3.0
    assert compare.merged(runs)["rows"][0]["ratio_runs"]["pure"] == [3.0, 2.0, 4.0]


def test_quick_run_times_both_cores_and_writes_json(tmp_path: Path) -> None:
    """The pure core is timed in a child process (under TREEKIT_PURE=1, in this one) and
    joins the table; the native column says n/b where the extension is not in use."""
    pytest.importorskip("jax")
    out, table = tmp_path / "out.json", tmp_path / "table.md"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    argv = ["--quick", "--libs", "treekit,treekit-pure,jax", "--trees", "mlp-3,custom-5"]
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *argv, "--json", str(out), "--markdown", str(table)],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if not line.startswith("timing ")]
    assert lines[0].split() == ["tree", "op", "jax", "us", "treekit", "treekit-pure", "jax", "torch/tk"]
    rows = [line.split() for line in lines[1:21]]
    assert [(r[0], r[1]) for r in rows] == [(tree, op) for tree in ("mlp-3", "custom-5") for op in OPS]
    native = treekit.backend() == "native"
    for r in rows:
        assert re.fullmatch(r"\d+\.\d", r[2]) and re.fullmatch(r"\d+\.\d\d", r[4]) and r[5] == "1.00"
        assert re.fullmatch(r"\d+\.\d\d", r[3]) if native else r[3] == "n/b"
    assert re.search(r"^  treekit-pure +\d+\.\d\d  \(20/20 rows\)  worst \d+\.\d\d \(", proc.stdout, re.M)
    result = json.loads(out.read_text())
    assert set(result) == {
        "machine",
        "versions",
        "settings",
        "libraries",
        "rows",
        "geomean_ratio_to_jax",
        "worst_row",
        "model_rows",
        "torch_check",
    }
    assert result["settings"]["quick"] is True and result["libraries"] == ["treekit", "treekit-pure", "jax"]
    timed = {"treekit", "treekit-pure", "jax"} if native else {"treekit-pure", "jax"}
    assert all(set(row["ratio_to_jax"]) == timed for row in result["rows"])
    assert "| **geometric mean, standard trees** |" in table.read_text() and "| **worst row** |" in table.read_text()


def test_model_trees_are_rows_of_their_own() -> None:
    """The dataclass trees (treekit's registration, and jax's alone) are read by treekit as jax
    reads them, and their rows have a geometric mean of their own."""
    pytest.importorskip("jax")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        argv = ["--quick", "--libs", "treekit,jax", "--trees", "dataclass-5,dataclass-jax-5", "--json", str(out)]
        argv += ["--ops", "flatten,unflatten,flatten_with_path"]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        command = [sys.executable, str(SCRIPT), *argv]
        proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=180)
        assert proc.returncode == 0, proc.stderr
        result = json.loads(out.read_text())
    rows = result["rows"]
    trees = ("dataclass-5", "dataclass-jax-5")
    assert [(r["tree"], r["group"]) for r in rows] == [(t, "model") for t in trees for _ in range(3)]
    name = "treekit" if treekit.backend() == "native" else None
    for r in rows:
        assert "jax" in r["ratio_to_jax"] and (name is None or name in r["ratio_to_jax"]), r["notes"]
    assert result["geomean_ratio_to_jax"]["jax"]["rows"] == 0
    assert result["model_rows"]["geomean_ratio_to_jax"]["jax"] == {"geomean": 1.0, "rows": 6, "of": 6}


def test_the_callgrind_child_calls_the_op(compare: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """--callgrind counts instructions of a child that makes ``calls`` calls of one op."""
    calls: list[Any] = []
    real = compare._inputs

    def spy(lib: Any, base: Any) -> Any:
        inputs = real(lib, base)
        op = lib.ops["leaves"]
        lib.ops["leaves"] = lambda i: lambda: calls.append(op(i)())
        return inputs

    monkeypatch.setattr(compare, "_inputs", spy)
    name = "treekit" if treekit.backend() == "native" else "treekit-pure"
    assert compare.main(["--count-child", f"{name},mlp-3,leaves,5", "--quick"]) == 0
    assert len(calls) == 5 and all(len(leaves) == 6 for leaves in calls)


def test_the_accelerator_benchmark_runs_and_its_checks_hold(tmp_path: Path) -> None:
    """benchmarks/accelerator.py --quick (on the CPU here; the TPU table comes from its full run)."""
    pytest.importorskip("jax")
    pytest.importorskip("optax")
    out = tmp_path / "out.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    command = [sys.executable, str(ROOT / "benchmarks" / "accelerator.py"), "--quick", "--json", str(out)]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert set(result["eager"]["rows"]) == {"leaves", "structure", "flatten+unflatten", "tree_map(jnp.negative)"}
    assert result["adam"]["same_loss"] is True
    assert result["look"]["programs_compiled_after_the_first_view"] == 0
    assert result["drift"]["same_gradients"] < 1e-4

"""``python -m treekit demo`` and examples/mlp_regression.py: with jax, with numpy, and with jax hidden."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from treekit.__main__ import main

ROOT = Path(__file__).resolve().parents[1]
HIDE_JAX = "import sys; sys.modules['jax'] = None\n"  # `import jax` now raises ImportError


def run_python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, *(["-c", code] if code else []), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )


def check_training(out: str, backend: str, steps: int) -> None:
    assert f"backend: {backend}" in out
    progress = re.findall(r"step +(\d+)/(\d+) \[([#.]{20})\] loss (\S+)", out)
    assert [int(step) for step, *_ in progress][-1] == steps
    final, first = map(float, re.search(r"final loss (\S+) \(initial (\S+)\)", out).groups())  # type: ignore[union-attr]
    assert final < first


def test_demo_with_numpy_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--steps", "40", "--backend", "numpy", "--widths", "1,16,1"]) == 0
    out = capsys.readouterr().out
    check_training(out, "numpy", 40)
    assert out.count("loss") >= 10


def test_demo_with_jax() -> None:
    pytest.importorskip("jax")
    result = run_python("", "-m", "treekit", "demo", "--steps", "40")
    assert result.returncode == 0, result.stderr
    check_training(result.stdout, "jax", 40)


def test_demo_with_jax_hidden_falls_back_to_numpy() -> None:
    code = HIDE_JAX + "from treekit.__main__ import main\nsys.exit(main(['demo', '--steps', '40']))\n"
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    check_training(result.stdout, "numpy", 40)


def test_backend_numpy_never_imports_jax() -> None:
    code = "from treekit.__main__ import main\nassert main(['demo', '--steps', '5', '--backend', 'numpy']) == 0\n"
    code += "assert 'jax' not in sys.modules, 'the numpy backend imported jax'\n"
    result = run_python("import sys\n" + code)
    assert result.returncode == 0, result.stderr


def test_backend_jax_without_jax_says_so() -> None:
    code = HIDE_JAX + "from treekit.__main__ import main\nsys.exit(main(['demo', '--backend', 'jax']))\n"
    result = run_python(code)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "treekit demo: --backend jax needs jax installed (pip install 'jax-treekit[jax]'); try --backend numpy\n"
    )


def test_demo_fails_when_the_loss_does_not_fall(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--steps", "3", "--backend", "numpy", "--learning-rate", "0"]) == 1
    assert re.fullmatch(r"treekit demo: the loss did not fall \(from \S+ to \S+\)\n", capsys.readouterr().err)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["demo", "--widths", "1"],
            "argument --widths: expected two or more positive integers like 1,128,128,1, got '1'",
        ),
        (["demo", "--widths", "1,0,1"], "argument --widths: expected two or more positive integers"),
        (["demo", "--steps", "0"], "argument --steps: expected a positive integer, got '0'"),
        (["demo", "--backend", "torch"], "argument --backend: invalid choice: 'torch'"),
        (["demo", "--seed", "-1"], "argument --seed: expected an integer >= 0, got '-1'"),
        (["demo", "--steps", "x"], "argument --steps: expected a positive integer, got 'x'"),
        ([], "the following arguments are required: COMMAND"),
    ],
)
def test_bad_arguments(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Usage errors: status 2 and one line on stderr (no usage dump, no traceback)."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert message in captured.err
    assert captured.err.count("\n") == 1


def test_demo_prints_the_param_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--steps", "2", "--backend", "numpy", "--widths", "1,4,1", "--learning-rate", "0.01"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2:6] == [  # one row per layer (summary's depth=1), with its subtotals
        "  path   shape     dtype    size  bytes",
        "  [0]    2 arrays  float32     8     32",
        "  [1]    2 arrays  float32     5     20",
        "  total  4 arrays             13     52",
    ]


@pytest.mark.parametrize("hide_jax", [False, True], ids=["auto", "jax hidden"])
def test_example_script(hide_jax: bool) -> None:
    script = ROOT / "examples" / "mlp_regression.py"
    if hide_jax:
        code = HIDE_JAX + f"sys.argv = [{str(script)!r}, '--steps', '30']\n"
        code += f"exec(compile(open({str(script)!r}).read(), {str(script)!r}, 'exec'), {{'__name__': '__main__'}})\n"
        result = run_python(code)
    else:
        pytest.importorskip("jax")
        result = run_python("", str(script), "--steps", "30")
    assert result.returncode == 0, result.stderr
    assert re.search(r"final loss \S+ < initial loss \S+", result.stdout), result.stdout


def test_two_processes_example_resumes_bit_for_bit(tmp_path: Path) -> None:
    pytest.importorskip("jax")
    from children import loopback_port

    loopback_port()  # (skips where localhost refuses connections: jax.distributed needs them)
    script = ROOT / "examples" / "two_processes.py"
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
    result = subprocess.run(
        [sys.executable, str(script), str(tmp_path)], env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "process 1: step 20" in result.stdout and "bit for bit: True" in result.stdout, result.stdout
    steps = sorted(os.listdir(tmp_path / "stopped" / "run"))
    assert steps == ["step_00000016", "step_00000020"]  # keep=2
    assert "process_00001.safetensors" in os.listdir(tmp_path / "stopped" / "run" / steps[-1])

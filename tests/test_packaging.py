"""Packaging: the distribution's name and install hints, the license, and an install that type
checkers can see."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

import treekit

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = Path(treekit.__file__).resolve().parent  # the checkout's, or the installed one (CI tests the wheel)
DISTRIBUTION = "jax-treekit"  # `treekit` on the package index is an unrelated project
TEXT_FILES = ["README.md", "CHANGELOG.md", "pyproject.toml", ".ci/run", "docs/*.md", "docs/*.py", "tests/**/*.py",
              "examples/**/*.py", "benchmarks/**/*.py"]


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _install_requirements(text: str) -> list[str]:
    """The requirement names (or paths) after each ``pip install`` in ``text``, options left out."""
    found = []
    for match in re.finditer(r"pip install\b([^\n`&;|)]*)", text):
        try:
            words = shlex.split(match.group(1), comments=True)
        except ValueError:  # an unclosed quote: the command goes on in prose
            words = match.group(1).split()
        found += [word.strip("'\"") for word in words if not word.startswith("-")]
    return found


def _problems(requirement: str) -> str | None:
    if requirement.startswith((".", "/", "~")) or "://" in requirement:
        return None  # a path or URL: the checkout itself
    name = re.match(r"[A-Za-z0-9._-]*", requirement).group(0)  # type: ignore[union-attr]
    if _normalized(name) == "treekit":
        return f"{requirement!r} installs the unrelated `treekit` package; the distribution is {DISTRIBUTION!r}"
    if "treekit" in _normalized(name) and _normalized(name) != DISTRIBUTION:
        return f"{requirement!r} is not the distribution's name {DISTRIBUTION!r}"
    return None


def test_install_hint_parser() -> None:
    bare = "tree" + "kit"  # spelled apart, so that this file does not say it
    text = (
        f"run `pip install \"{bare}[testing]\"`, or python -m pip install -e '.[dev]' && python -m treekit demo\n"
        f"(pip install 'jax-treekit[jax]'); pip install -U optree jax_treekit {bare}-jax"
    )
    assert _install_requirements(text) == [
        f"{bare}[testing]", ".[dev]", "jax-treekit[jax]", "optree", "jax_treekit", f"{bare}-jax"
    ]
    assert [_problems(r) is None for r in _install_requirements(text)] == [False, True, True, True, True, False]


def test_no_text_tells_users_to_install_the_unrelated_treekit() -> None:
    problems = []
    files = sorted({path for pattern in TEXT_FILES for path in ROOT.glob(pattern) if "_build" not in path.parts})
    files += sorted(PACKAGE.glob("**/*.py"))
    assert len(files) > 20
    for path in files:
        for requirement in _install_requirements(path.read_text()):
            problem = _problems(requirement)
            if problem:
                problems.append(f"{path.relative_to(ROOT)}: {problem}")
    assert problems == []


def test_install_hints_name_the_distribution() -> None:
    testing_page = (ROOT / "docs" / "testing.md").read_text()
    assert f"{DISTRIBUTION}[testing]" in _install_requirements(testing_page)
    main = (PACKAGE / "cli" / "_commands.py").read_text()
    assert f"{DISTRIBUTION}[jax]" in _install_requirements(main)


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())  # type: ignore[no-any-return]


def test_the_python_floor_is_the_same_everywhere() -> None:
    # requires-python, the classifiers, the wheels built and the README say the same versions.
    pyproject = _pyproject()
    floor = re.fullmatch(r">=3\.(\d+)", pyproject["project"]["requires-python"])
    assert floor is not None
    minors = [int(m) for c in pyproject["project"]["classifiers"] for m in re.findall(r"Python :: 3\.(\d+)$", c)]
    assert minors == list(range(int(floor.group(1)), minors[-1] + 1)), minors
    wheels = [int(m) for m in re.findall(r"cp3(\d+)-\*", pyproject["tool"]["cibuildwheel"]["build"])]
    assert wheels == minors
    assert pyproject["tool"]["ruff"]["target-version"] == f"py3{minors[0]}"
    assert pyproject["tool"]["mypy"]["python_version"] == f"3.{minors[0]}"
    readme = (ROOT / "README.md").read_text()
    assert f"Python 3.{minors[0]} to 3.{minors[-1]}" in readme
    assert sys.version_info[:2] >= (3, minors[0])


def test_pyproject_names_the_distribution_and_its_license() -> None:
    project = _pyproject()["project"]
    assert project["name"] == DISTRIBUTION
    assert project["license"] == "Apache-2.0"  # an SPDX expression (PEP 639)
    assert project["license-files"] == ["LICENSE"]


def test_license_file_is_the_apache_2_text() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:3] == ["Apache", "License", "Version"]
    assert "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert len(text.splitlines()) == 202  # the full text with its appendix, as apache.org gives it


def _installed() -> importlib.metadata.Distribution:
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{DISTRIBUTION} is not installed (python -m pip install -e '.[dev]')")
    return dist


def test_installed_metadata_matches_pyproject() -> None:
    dist = _installed()
    assert dist.metadata["Name"] == DISTRIBUTION
    assert dist.metadata["License-Expression"] == "Apache-2.0"
    assert dist.metadata.get_all("License-File") == ["LICENSE"]
    assert (dist.read_text("top_level.txt") or "treekit").split() == ["treekit"]


USER_CODE = """\
import treekit

leaves: list[int] = treekit.tree_leaves([1, 2])
treedef = treekit.tree_structure([1, 2])
oops = treedef.num_leaves + "1"
"""


def test_type_checkers_see_the_installed_package(tmp_path: Path) -> None:
    # A user's project, outside this checkout: mypy finds treekit only through the install
    # (setuptools' default editable install is an import hook, which type checkers cannot see).
    pytest.importorskip("mypy")
    _installed()
    (tmp_path / "user.py").write_text(USER_CODE)
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--no-error-summary", "user.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    # The planted error and nothing else: mypy found treekit (a missing module, or one without
    # py.typed, is an error on line 1 under --strict) and read its annotations (int + str).
    lines = result.stdout.splitlines()
    assert lines and all(line.startswith("user.py:5: error:") for line in lines), result.stdout + result.stderr
    assert result.returncode == 1


def test_the_wheels_test_command_passes_here() -> None:
    """pyproject's [tool.cibuildwheel] test command (what every published wheel must pass:
    the native core is in it) passes against this install where the native core is built."""
    if treekit.backend() != "native":
        pytest.skip("the native core is not in use")
    settings = _pyproject()["tool"]["cibuildwheel"]  # (its Pythons: test_the_python_floor_is_the_same_everywhere)
    command = shlex.split(settings["test-command"])
    assert command[:2] == ["python", "-c"]
    done = subprocess.run([sys.executable, *command[1:]], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "treekit core: native"
    env = dict(os.environ, TREEKIT_PURE="1")
    pure = subprocess.run([sys.executable, *command[1:]], capture_output=True, text=True, timeout=60, env=env)
    assert pure.returncode != 0 and "AssertionError: pure" in pure.stderr  # a wheel without the core fails it

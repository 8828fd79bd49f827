"""CI: the treekit that this Python imports is an installed package, whole, not the source tree.

    python .ci/installed.py FOLDER      (run from FOLDER, where the tests will run)

Checks that ``treekit`` comes from the environment's site-packages (not from FOLDER or the
checkout), carries the native core (``treekit.backend() == 'native'``), ships ``py.typed``, and
that the ``treekit`` console script runs and reports the installed distribution's version.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import sysconfig
from pathlib import Path


def main(folder: str) -> None:
    import treekit

    package = Path(treekit.__file__).resolve().parent
    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    platsite = Path(sysconfig.get_paths()["platlib"]).resolve()
    assert package.parent in (site, platsite), f"treekit is imported from {package}, not from {site}"
    assert not package.is_relative_to(Path(folder).resolve()), f"treekit is imported from {package}, inside {folder}"
    assert treekit.backend() == "native", f"treekit.backend() is {treekit.backend()!r}: the wheel lacks the C core"
    native = Path(sys.modules["treekit.core._native"].__file__ or "").resolve()
    assert native.parent == package / "core", f"treekit.core._native is {native}, not in {package / 'core'}"
    assert (package / "py.typed").is_file(), f"{package} has no py.typed"
    version = importlib.metadata.version("jax-treekit")
    assert version == treekit.__version__, f"installed {version}, treekit.__version__ {treekit.__version__}"
    script = Path(sysconfig.get_paths()["scripts"]) / ("treekit.exe" if os.name == "nt" else "treekit")
    assert script.is_file(), f"no console script {script}"
    out = subprocess.run([str(script), "--version"], capture_output=True, text=True, check=True).stdout
    assert out == f"treekit {version}\n", f"`treekit --version` printed {out!r}"
    print(f"installed: treekit {version} at {package} (native core {native.name}, py.typed, {script})")


if __name__ == "__main__":
    main(sys.argv[1])

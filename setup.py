"""Builds treekit's optional C core (treekit.core._native); everything else is in pyproject.toml.

Where the extension cannot be built (no C compiler, no Python headers, a free-threaded
Python), the install goes on without it and treekit runs its pure-Python core.
"""

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# gcc and clang (compilers that take Unix-style flags) build the core with every warning on,
# as errors: -Wextra without the two warnings CPython's own build turns off
# (-Wno-unused-parameter: the `self` of module functions; -Wno-missing-field-initializers:
# PyModuleDef and method tables left zero). .ci/sanitize adds the same flags to its build.
WARNING_FLAGS = ["-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter", "-Wno-missing-field-initializers"]


# The C files, the bottom layer first (src/native/state.h tells the layers), and the headers.
LAYERS = "state cache known node dict records errors walk guide build map pairs keystr entries header module".split()
HEADERS = "state cache known node records errors walk guide build map keystr entries header".split()


class BuildExt(build_ext):
    def build_extensions(self) -> None:
        if self.compiler.compiler_type == "unix":
            for ext in self.extensions:
                ext.extra_compile_args = [*ext.extra_compile_args, *WARNING_FLAGS]
        super().build_extensions()


setup(
    ext_modules=[
        Extension(
            "treekit.core._native",
            sources=[f"src/native/{name}.c" for name in LAYERS],
            depends=[f"src/native/{name}.h" for name in HEADERS],
            optional=True,
        )
    ],
    cmdclass={"build_ext": BuildExt},
)

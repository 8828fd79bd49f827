"""Builds treekit's optional C core (treekit._native); everything else is in pyproject.toml.

Where the extension cannot be built (no C compiler, no Python headers, a free-threaded
Python), the install goes on without it and treekit runs its pure-Python core.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "treekit._native",
            sources=[
                "src/native/module.c",
                "src/native/node.c",
                "src/native/walk.c",
                "src/native/guide.c",
                "src/native/map.c",
                "src/native/build.c",
            ],
            depends=["src/native/native.h"],
            optional=True,
        )
    ]
)

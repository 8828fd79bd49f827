"""Docs pages that need JAX are skipped where JAX is not installed."""

import importlib.util

collect_ignore = ["conf.py"]
if importlib.util.find_spec("jax") is None:
    collect_ignore.append("jax.md")

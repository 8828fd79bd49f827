"""compare.py's trees made of the node types model code holds: dataclasses (registered with
treekit and, for jax, with jax; or with jax alone), flax.struct dataclasses, an equinox
Module, an nnx State and a linen FrozenDict.

Each tree's leaves are distinct floats, as in the standard trees, so the walk is what is
timed; the model libraries' trees are made once with their own code (``eqx.nn.MLP``,
``nnx.Linear``, ``nn.Dense``) and their leaves swapped for floats with jax's ``tree_map``.
A tree whose library is not installed raises ImportError when built (the row is skipped).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable
from typing import Any


def _counter() -> Callable[[], float]:
    count = itertools.count()
    return lambda: float(next(count))


@dataclasses.dataclass
class Dense:
    """A layer registered with ``treekit.register_dataclass`` and, for jax, with
    ``jax.tree_util.register_dataclass`` first (each library times its own registration)."""

    kernel: Any
    bias: Any
    name: str = dataclasses.field(default="dense", metadata={"static": True})


@dataclasses.dataclass
class JaxDense:
    """The same layer registered with ``jax.tree_util.register_dataclass`` only: treekit
    learns it from jax."""

    kernel: Any
    bias: Any
    name: str = dataclasses.field(default="dense", metadata={"static": True})


@functools.cache
def _registered() -> None:
    import jax.tree_util as jtu

    import treekit

    jtu.register_dataclass(Dense)
    treekit.register_dataclass(Dense)
    jtu.register_dataclass(JaxDense)


def dataclasses_tree(nodes: int, cls_name: str = "Dense") -> Callable[[], Any]:
    def build() -> Any:
        _registered()
        cls = {"Dense": Dense, "JaxDense": JaxDense}[cls_name]
        x = _counter()
        return {"layers": [cls(x(), x(), f"dense_{i}") for i in range(nodes)]}

    return build


@functools.cache
def _struct_class() -> Any:
    from flax import struct

    @struct.dataclass
    class StructDense:
        kernel: Any
        bias: Any
        name: str = struct.field(pytree_node=False, default="dense")

    return StructDense


def flax_struct(nodes: int) -> Callable[[], Any]:
    def build() -> Any:
        cls = _struct_class()
        x = _counter()
        return {"layers": [cls(x(), x(), f"dense_{i}") for i in range(nodes)]}

    return build


def _floats(model: Callable[[], Any]) -> Callable[[], Any]:
    """The tree ``model()`` makes (once), its leaves new floats at each build."""

    def build() -> Any:
        import jax.tree_util as jtu

        x = _counter()
        return jtu.tree_map(lambda _: x(), made())

    made = functools.cache(model)
    return build


def eqx_mlp(depth: int) -> Callable[[], Any]:
    def model() -> Any:
        import equinox as eqx
        import jax

        return eqx.nn.MLP(2, 2, 2, depth=depth, key=jax.random.PRNGKey(0))

    return _floats(model)


def nnx_state(layers: int) -> Callable[[], Any]:
    def model() -> Any:
        from flax import nnx

        class Stack(nnx.Module):
            def __init__(self, rngs: Any) -> None:
                self.layers = nnx.List([nnx.Linear(2, 2, rngs=rngs) for _ in range(layers)])

        return nnx.state(Stack(nnx.Rngs(0)))

    return _floats(model)


def linen_frozen(layers: int) -> Callable[[], Any]:
    def model() -> Any:
        import flax.linen as nn
        import jax
        import jax.numpy as jnp
        from flax.core import freeze

        class Stack(nn.Module):
            @nn.compact
            def __call__(self, z: Any) -> Any:
                for _ in range(layers):
                    z = nn.Dense(2)(z)
                return z

        return freeze(Stack().init(jax.random.PRNGKey(0), jnp.ones((1, 2))))

    return _floats(model)


def model_trees(quick: bool) -> dict[str, Callable[[], Any]]:
    """Name -> builder, as compare.trees."""
    if quick:
        return {
            "dataclass-5": dataclasses_tree(5),
            "dataclass-jax-5": dataclasses_tree(5, "JaxDense"),
            "flax-struct-5": flax_struct(5),
            "eqx-mlp-2": eqx_mlp(2),
            "nnx-state-2": nnx_state(2),
            "linen-frozen-2": linen_frozen(2),
        }
    return {
        "dataclass-300": dataclasses_tree(300),
        "dataclass-3000": dataclasses_tree(3000),
        "dataclass-jax-300": dataclasses_tree(300, "JaxDense"),
        "flax-struct-300": flax_struct(300),
        "eqx-mlp-50": eqx_mlp(50),
        "nnx-state-50": nnx_state(50),
        "linen-frozen-50": linen_frozen(50),
    }

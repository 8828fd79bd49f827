"""Partial: a functools.partial whose bound arguments are children of a tree node."""

from __future__ import annotations

import functools
from typing import Any

from treekit.core import register_pytree_node

__all__ = ["Partial"]


class _HashableCallable:
    """Wraps a ``functools.partial`` so that ``Partial`` does not merge its arguments."""

    def __init__(self, fun: functools.partial[Any]) -> None:
        self.fun = fun

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fun(*args, **kwargs)

    def __hash__(self) -> int:
        return hash(self.fun)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _HashableCallable):
            return bool(self.fun == other.fun)
        return bool(self.fun == other)

    def __repr__(self) -> str:
        return f"_HashableCallable({self.fun!r})"


class Partial(functools.partial):  # type: ignore[type-arg]
    """A ``functools.partial`` that is a tree node: the function is node data, the bound
    arguments are children (jax's ``Partial``).

    >>> from treekit import tree_leaves, tree_map
    >>> add = Partial(lambda a, b, c: a + b + c, 1, c=10)
    >>> tree_leaves(add)
    [1, 10]
    >>> tree_map(lambda x: x * 2, add)(3)
    25
    """

    def __new__(cls, func: Any, *args: Any, **kwargs: Any) -> Partial:
        if isinstance(func, functools.partial):
            original = func
            func = _HashableCallable(original)
            out = super().__new__(cls, func, *args, **kwargs)
            func.func = original.func
            func.args = original.args
            func.keywords = original.keywords
            return out
        return super().__new__(cls, func, *args, **kwargs)


register_pytree_node(
    Partial,
    lambda p: ((p.args, p.keywords), p.func),
    lambda func, children: Partial(func, *children[0], **children[1]),  # type: ignore[index]
)

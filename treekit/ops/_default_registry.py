"""``default_registry``: treekit's one registry as an object with the methods of jax's."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

from treekit.core import (
    KeyEntry,
    KeyPath,
    NodeType,
    TreeDef,
    flatten_one_level,
    flatten_one_level_with_keys,
    is_tree_node,
    lookup,
    register_dataclass,
    register_pytree_node,
)
from treekit.ops._ops import tree_flatten, tree_flatten_with_path

__all__ = ["PyTreeRegistry", "default_registry"]


class PyTreeRegistry:
    """jax's ``default_registry`` methods over treekit's registry (there is only the one).

    >>> from treekit import default_registry
    >>> default_registry.flatten({'b': 1, 'a': (2,)})
    ([2, 1], PyTreeDef({'a': (*,), 'b': *}))
    >>> default_registry.flatten_one_level(3) is None, default_registry.is_node(tuple)
    (True, True)
    """

    def __repr__(self) -> str:
        return "treekit.default_registry"

    def register_node(
        self,
        type: type,
        to_iterable: Callable[[Any], tuple[Iterable[Any], Hashable]],
        from_iterable: Callable[[Any, Iterable[Any]], Any],
        to_iterable_with_keys: Callable[[Any], tuple[Iterable[tuple[KeyEntry, Any]], Hashable]] | None = None,
    ) -> None:
        """:func:`~treekit.register_pytree_node` under jax's registry method name."""
        register_pytree_node(type, to_iterable, from_iterable, to_iterable_with_keys)

    def register_dataclass_node(self, type: type, data_fields: Sequence[str], meta_fields: Sequence[str], /) -> None:
        """:func:`~treekit.register_dataclass` with explicit fields, under jax's method name."""
        register_dataclass(type, data_fields, meta_fields)

    def flatten(self, tree: Any, leaf_predicate: Callable[[Any], bool] | None = None) -> tuple[list[Any], TreeDef]:
        """:func:`~treekit.tree_flatten` (``leaf_predicate`` is ``is_leaf``)."""
        return tree_flatten(tree, leaf_predicate)

    def flatten_with_path(
        self, tree: Any, leaf_predicate: Callable[[Any, Any], bool] | None = None
    ) -> tuple[list[tuple[KeyPath, Any]], TreeDef]:
        """:func:`~treekit.tree_flatten_with_path`; ``leaf_predicate(key_path, x)`` takes the path."""
        return tree_flatten_with_path(tree, leaf_predicate, is_leaf_takes_path=leaf_predicate is not None)

    def flatten_one_level(self, tree: Any) -> tuple[Iterable[Any], Any] | None:
        """:func:`~treekit.flatten_one_level`, but ``None`` for a leaf (as jax's method)."""
        return flatten_one_level(tree) if is_tree_node(type(tree)) else None

    def flatten_one_level_with_keys(self, tree: Any) -> tuple[Iterable[tuple[KeyEntry, Any]], Any] | None:
        """:func:`~treekit.flatten_one_level_with_keys`, but ``None`` for a leaf."""
        return flatten_one_level_with_keys(tree) if is_tree_node(type(tree)) else None

    def is_node(self, type: type) -> bool:
        """:func:`~treekit.is_tree_node`."""
        return is_tree_node(type)

    def _node_type(self, cls: type) -> NodeType | None:
        # what TreeDef.from_node_data_and_children looks types up with
        return lookup(cls) if isinstance(cls, type) else None


default_registry = PyTreeRegistry()
"""The registry object jax code passes around (``PyTreeDef.from_node_data_and_children``)."""

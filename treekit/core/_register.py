"""Registering node types at run time: jax's ``register_*`` functions, dataclasses and static leaves."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, TypeVar

from treekit.core._keys import GetAttrKey, KeyEntry
from treekit.core._registry import FlattenFn, NodeType, UnflattenFn, add_type, flat_keys

C = TypeVar("C", bound=type)

__all__ = [
    "dataclass_entry",
    "register_dataclass",
    "register_pytree_node",
    "register_pytree_node_class",
    "register_pytree_with_keys",
    "register_pytree_with_keys_class",
    "register_static",
    "static",
]


def _pair(cls: type, what: str, out: Any) -> tuple[Any, Any]:
    if type(out) is not tuple or len(out) != 2:
        raise ValueError(
            f"the {what} function registered for {cls.__qualname__} returned {type(out).__name__} {out!r:.60}; "
            "expected a (children, node data) pair"
        )
    return out


def _children(cls: type, what: str, children: Any) -> Sequence[Any]:
    """The children as the function gave them if a list or tuple (no copy), else listed."""
    if type(children) is list or type(children) is tuple:
        return children
    try:
        return list(children)
    except TypeError:
        raise ValueError(
            f"the {what} function registered for {cls.__qualname__} returned children of type "
            f"{type(children).__name__}; expected an iterable"
        ) from None


def _unzip_keyed(cls: type, pairs: Any) -> tuple[list[Any], list[Any]]:
    keys, children = [], []
    for item in _children(cls, "flatten_with_keys", pairs):
        if not isinstance(item, tuple) or len(item) != 2:  # (a namedtuple pair too, as jax takes it)
            raise ValueError(
                f"the flatten_with_keys function registered for {cls.__qualname__} returned "
                f"{item!r:.60} among its children; expected (key entry, child) pairs"
            )
        keys.append(item[0])
        children.append(item[1])
    return keys, children


def _check_class(label: str, cls: Any) -> None:
    """Registration arguments are checked when given, not when a walk first meets them."""
    if not isinstance(cls, type):
        raise TypeError(f"{label}: expected a class, got {type(cls).__name__}")


def _check_function(label: str, fn: Any, optional: bool = False) -> None:
    if not (callable(fn) or (optional and fn is None)):
        raise TypeError(f"{label}: expected a function{' or None' if optional else ''}, got {type(fn).__name__}")


def _check_methods(cls: Any, *names: str) -> None:
    _check_class("cls", cls)
    for name in names:
        _check_function(f"cls.{name}", getattr(cls, name, None))


def make_flatten(
    cls: type,
    flatten: Callable[[Any], tuple[Any, Any]] | None,
    flatten_with_keys: Callable[[Any], tuple[Any, Any]] | None,
    convert_key: Callable[[Any], Any] | None = None,
    key_kinds: dict[type, tuple[str, dict[Any, Any]]] | None = None,
) -> FlattenFn:
    """The entry's flatten function, ``(node, with_path) -> (children, node data, keys)``, from
    the user's functions. ``convert_key`` makes each key entry ``flatten_with_keys`` gives
    treekit's (JAX's entries, for a class registered with JAX); the native walker reads the
    entries it already made from ``key_kinds`` (``{entry class: (field, {value: entry})}``)."""

    def finish(out: Any, keyed: bool, with_path: bool) -> tuple[Sequence[Any], Any, list[Any] | None]:
        """What the user's function returned (``flatten_with_keys``'s if ``keyed``), checked and
        made (children, node data, keys)."""
        if keyed:
            pairs, data = _pair(cls, "flatten_with_keys", out)
            keys, children = _unzip_keyed(cls, pairs)
            if convert_key is not None and with_path:
                keys = list(map(convert_key, keys))
            return children, data, keys if with_path else None
        children_it, data = _pair(cls, "flatten", out)
        kids = _children(cls, "flatten", children_it)
        return kids, data, flat_keys(len(kids)) if with_path else None

    def flatten_node(node: Any, with_path: bool) -> tuple[Sequence[Any], Any, list[Any] | None]:
        if flatten is None or (with_path and flatten_with_keys is not None):
            assert flatten_with_keys is not None
            return finish(flatten_with_keys(node), True, with_path)
        return finish(flatten(node), False, with_path)

    # The native walker calls these itself (`keyed` with key paths, `plain` without, where
    # given), and hands what they return to `finish` when it is not of the usual shape.
    flatten_node.plain = flatten  # type: ignore[attr-defined]
    flatten_node.keyed = flatten_with_keys  # type: ignore[attr-defined]
    flatten_node.finish = finish  # type: ignore[attr-defined]
    flatten_node.convert_key = convert_key  # type: ignore[attr-defined]
    flatten_node.key_kinds = key_kinds  # type: ignore[attr-defined]
    return flatten_node


def tuple_children(unflatten_func: Callable[[Any, Any], Any]) -> UnflattenFn:
    """``unflatten_func`` called with the children as a tuple, as jax calls it."""

    def unflatten(data: Any, children: Sequence[Any]) -> Any:
        return unflatten_func(data, children if type(children) is tuple else tuple(children))

    # The native builder calls it itself, with the children as a tuple.
    unflatten.func = unflatten_func  # type: ignore[attr-defined]
    return unflatten


def register_pytree_node(
    nodetype: type[Any],
    flatten_func: Callable[[Any], tuple[Iterable[Any], Hashable]],
    unflatten_func: Callable[[Any, Iterable[Any]], Any],
    flatten_with_keys_func: Callable[[Any], tuple[Iterable[tuple[KeyEntry, Any]], Hashable]] | None = None,
) -> None:
    """Register ``nodetype`` as a container with children and node data (jax's signature).

    >>> class Pair:
    ...     def __init__(self, a, b): self.a, self.b = a, b
    >>> register_pytree_node(Pair, lambda p: ((p.a, p.b), None), lambda _, c: Pair(*c))
    >>> from treekit import tree_leaves_with_path
    >>> tree_leaves_with_path(Pair(1, [2]))
    [((FlattenedIndexKey(key=0),), 1), ((FlattenedIndexKey(key=1), SequenceKey(idx=0)), 2)]

    Args:
        nodetype: The class; matched exactly (subclasses are leaves unless registered too).
        flatten_func: ``node -> (children, node_data)``; ``node_data`` must be hashable and
            comparable, it becomes part of the treedef.
        unflatten_func: ``(node_data, children) -> node``; ``children`` is a tuple.
        flatten_with_keys_func: ``node -> ((key entry, child) pairs, node_data)``; without it
            the children's key entries are :class:`FlattenedIndexKey`.

    Raises:
        TypeError: If ``nodetype`` is not a class or a function is not callable.
        ValueError: If ``nodetype`` is already registered.
    """
    _check_class("nodetype", nodetype)
    _check_function("flatten_func", flatten_func)
    _check_function("unflatten_func", unflatten_func)
    _check_function("flatten_with_keys_func", flatten_with_keys_func, optional=True)
    flatten = make_flatten(nodetype, flatten_func, flatten_with_keys_func)
    add_type(NodeType(nodetype, flatten, tuple_children(unflatten_func)))


def register_pytree_with_keys(
    nodetype: type[Any],
    flatten_with_keys: Callable[[Any], tuple[Iterable[tuple[KeyEntry, Any]], Hashable]],
    unflatten_func: Callable[[Any, Iterable[Any]], Any],
    flatten_func: Callable[[Any], tuple[Iterable[Any], Hashable]] | None = None,
) -> None:
    """Register ``nodetype`` with a flatten function that names each child (jax's signature).

    >>> class Point:
    ...     def __init__(self, x, y): self.x, self.y = x, y
    >>> register_pytree_with_keys(
    ...     Point,
    ...     lambda p: (((GetAttrKey('x'), p.x), (GetAttrKey('y'), p.y)), None),
    ...     lambda _, c: Point(*c))
    >>> from treekit import keystr, tree_leaves_with_path
    >>> [(keystr(path), leaf) for path, leaf in tree_leaves_with_path([Point(1, 2)])]
    [('[0].x', 1), ('[0].y', 2)]

    Args:
        nodetype: The class; matched exactly.
        flatten_with_keys: ``node -> ((key entry, child) pairs, node_data)``.
        unflatten_func: ``(node_data, children) -> node``; ``children`` is a tuple.
        flatten_func: ``node -> (children, node_data)``, a faster equivalent used when no
            key paths are asked for; without it ``flatten_with_keys`` serves both.

    Raises:
        TypeError: If ``nodetype`` is not a class or a function is not callable.
        ValueError: If ``nodetype`` is already registered.
    """
    _check_class("nodetype", nodetype)
    _check_function("flatten_with_keys", flatten_with_keys)
    _check_function("unflatten_func", unflatten_func)
    _check_function("flatten_func", flatten_func, optional=True)
    flatten = make_flatten(nodetype, flatten_func, flatten_with_keys)
    add_type(NodeType(nodetype, flatten, tuple_children(unflatten_func)))


def register_pytree_node_class(cls: C) -> C:
    """Class decorator: register ``cls`` with its ``tree_flatten`` / ``tree_unflatten`` methods.

    >>> @register_pytree_node_class
    ... class Box:
    ...     def __init__(self, v): self.v = v
    ...     def tree_flatten(self): return (self.v,), None
    ...     @classmethod
    ...     def tree_unflatten(cls, data, children): return cls(*children)
    >>> from treekit import tree_leaves
    >>> tree_leaves([Box(1), Box((2, 3))])
    [1, 2, 3]

    Args:
        cls: A class with a ``tree_flatten(self) -> (children, node_data)`` method and a
            ``tree_unflatten(cls, node_data, children)`` classmethod.

    Returns:
        ``cls``, unchanged.

    Raises:
        TypeError: If ``cls`` is not a class or lacks one of the two methods.
        ValueError: If ``cls`` is already registered.
    """
    _check_methods(cls, "tree_flatten", "tree_unflatten")
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)  # type: ignore[attr-defined]
    return cls


def register_pytree_with_keys_class(cls: C) -> C:
    """Class decorator: register ``cls`` with ``tree_flatten_with_keys`` / ``tree_unflatten``.

    A ``tree_flatten`` method, if the class has one, serves flattening without paths.

    >>> @register_pytree_with_keys_class
    ... class Box:
    ...     def __init__(self, v): self.v = v
    ...     def tree_flatten_with_keys(self): return ((GetAttrKey('v'), self.v),), None
    ...     @classmethod
    ...     def tree_unflatten(cls, data, children): return cls(*children)
    >>> from treekit import keystr, tree_leaves_with_path
    >>> [keystr(path) for path, _ in tree_leaves_with_path({'box': Box(1)})]
    ["['box'].v"]

    Args:
        cls: A class with a ``tree_flatten_with_keys(self) -> ((key entry, child) pairs,
            node_data)`` method and a ``tree_unflatten(cls, node_data, children)`` classmethod.

    Returns:
        ``cls``, unchanged.

    Raises:
        TypeError: If ``cls`` is not a class or lacks one of the two methods.
        ValueError: If ``cls`` is already registered.
    """
    _check_methods(cls, "tree_flatten_with_keys", "tree_unflatten")
    flatten = getattr(cls, "tree_flatten", None)
    register_pytree_with_keys(
        cls,
        lambda x: x.tree_flatten_with_keys(),
        cls.tree_unflatten,  # type: ignore[attr-defined]
        (lambda x: x.tree_flatten()) if flatten is not None else None,
    )
    return cls


def _names(names: Sequence[str] | str | None) -> Sequence[str] | None:
    """Field names as given, one name given as a ``str`` in a tuple."""
    return (names,) if isinstance(names, str) else names


def register_dataclass(
    nodetype: C,
    data_fields: Sequence[str] | None = None,
    meta_fields: Sequence[str] | None = None,
    drop_fields: Sequence[str] = (),
) -> C:
    """Register a dataclass: data fields are children, meta fields go to the treedef (jax's rules).

    Without ``data_fields`` / ``meta_fields``, fields marked ``static`` (``field(metadata=
    {'static': True})`` or :func:`static`) are meta fields and the others data fields.

    >>> import dataclasses
    >>> @register_dataclass
    ... @dataclasses.dataclass
    ... class Layer:
    ...     w: float
    ...     b: float
    ...     act: str = static(default='relu')
    >>> from treekit import tree_flatten_with_path, keystr
    >>> pairs, treedef = tree_flatten_with_path(Layer(1.0, 0.0))
    >>> [(keystr(p), v) for p, v in pairs], treedef
    ([('.w', 1.0), ('.b', 0.0)], PyTreeDef(CustomNode(Layer[('relu',)], [*, *])))

    Args:
        nodetype: The class, returned unchanged (so this works as a decorator).
        data_fields: Attribute names whose values are children (key entries :class:`GetAttrKey`).
        meta_fields: Attribute names whose values are node data; they must be hashable.
        drop_fields: Dataclass ``init`` fields that are neither (rebuilt by their defaults).
            Each of the three may be one name as a ``str`` (``drop_fields='cache'``).

    Returns:
        ``nodetype``, unchanged.

    Raises:
        TypeError: If only one of ``data_fields`` / ``meta_fields`` is given, or neither for a
            class that is not a dataclass.
        ValueError: If the fields do not cover the dataclass's ``init`` fields exactly, overlap,
            or the class is already registered.
    """
    _check_class("nodetype", nodetype)
    # (one name may come as a str: jax's own tests pass drop_fields="z"; jax reads a str as its
    # characters, which agrees for one-letter names)
    data_fields, meta_fields = (_names(data_fields), _names(meta_fields))
    drop_fields = _names(drop_fields) or ()
    for label, names in (("data_fields", data_fields), ("meta_fields", meta_fields), ("drop_fields", drop_fields)):
        if names is None:
            continue
        if not isinstance(names, Iterable) or not all(isinstance(n, str) for n in names):
            what = type(names).__name__ if not isinstance(names, Iterable) else "other items"
            raise TypeError(f"{label}: expected a sequence of attribute names (str), got {what}")
    if data_fields is None or meta_fields is None:
        if (data_fields is None) != (meta_fields is None):
            raise TypeError(
                "register_dataclass: pass both data_fields and meta_fields, or neither; "
                f"got data_fields={data_fields!r}, meta_fields={meta_fields!r}"
            )
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError(
                f"register_dataclass: {nodetype.__qualname__} is not a dataclass; "
                "pass data_fields and meta_fields"
            )
        fields = [f for f in dataclasses.fields(nodetype) if f.name not in drop_fields]
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
    data = tuple(data_fields)
    meta = tuple(meta_fields)
    if dataclasses.is_dataclass(nodetype):
        init = {f.name for f in dataclasses.fields(nodetype) if f.init} - set(drop_fields)
        if set(data) | set(meta) != init:
            missing = sorted(init - set(data) - set(meta))
            extra = sorted((set(data) | set(meta)) - init)
            raise ValueError(
                f"register_dataclass: {nodetype.__qualname__}: data_fields and meta_fields must list "
                f"every init field exactly once (missing {missing}; not init fields {extra}; "
                "put fields to leave out in drop_fields)"
            )
    if overlap := sorted(set(data) & set(meta)):
        raise ValueError(f"register_dataclass: {nodetype.__qualname__}: fields {overlap} are both data and meta")
    add_type(dataclass_entry(nodetype, data, meta))
    return nodetype


def dataclass_entry(nodetype: type, data: tuple[str, ...], meta: tuple[str, ...]) -> NodeType:
    """The entry of a dataclass-like class: the attributes ``data`` are its children (key
    entries ``GetAttrKey``), ``meta`` its node data; rebuilt by ``nodetype(**fields)``. Also
    the entry of a class registered with ``jax.tree_util.register_dataclass`` alone (_jax)."""
    data = tuple(sys.intern(n) if type(n) is str else n for n in data)
    meta = tuple(sys.intern(n) if type(n) is str else n for n in meta)
    keys = [GetAttrKey(name) for name in data]

    def flatten(node: Any, with_path: bool) -> tuple[list[Any], tuple[Any, ...], list[Any] | None]:
        return (
            [getattr(node, name) for name in data],
            tuple(getattr(node, name) for name in meta),
            keys if with_path else None,
        )

    def unflatten(meta_values: tuple[Any, ...], children: list[Any]) -> Any:
        return nodetype(**dict(zip(meta, meta_values)), **dict(zip(data, children)))

    # The native core reads the fields itself (flatten: the same getattr calls, in order) and
    # calls nodetype with them as keywords, where that is what these functions do: every
    # name an exact str, none twice (a name given twice: the dicts above keep the last).
    names = meta + data
    if all(type(n) is str for n in names) and len(set(names)) == len(names):
        flatten.dataclass_fields = (data, meta, tuple(keys))  # type: ignore[attr-defined]
        unflatten.dataclass_init = (nodetype, names, len(meta), *_stores(nodetype, names))  # type: ignore[attr-defined]
    return NodeType(nodetype, flatten, unflatten, "dataclass")


def _stores(nodetype: type, names: tuple[str, ...]) -> tuple[Any, ...]:
    """``(positions, frozen, init)`` where the native core may rebuild ``nodetype`` by storing
    its fields rather than calling ``nodetype(**fields)``: each of ``names`` is a field; the
    class's ``__init__`` has the code ``make_dataclass`` writes for such fields now (so it calls
    no ``__post_init__``, takes no ``InitVar``, sets no ``init=False`` field and was not written
    to do more); its ``__new__`` is object's and its metaclass calls it as type does. Then
    ``positions`` are the fields' places in ``names`` in the order ``__init__`` stores them,
    ``frozen`` says it stores them with ``object.__setattr__``, and ``init`` is that
    ``__init__`` (the native core checks it is still the class's). ``()`` otherwise."""
    if not dataclasses.is_dataclass(nodetype) or nodetype.__new__ is not object.__new__:
        return ()
    if type(nodetype).__call__ is not type.__call__:  # (a metaclass of its own calls it)
        return ()
    owner = next(c for c in nodetype.__mro__ if "__init__" in c.__dict__)
    init, params = owner.__dict__["__init__"], owner.__dict__.get("__dataclass_params__")
    fields = dataclasses.fields(nodetype)
    if params is None or sorted(f.name for f in fields) != sorted(names) or not all(f.init for f in fields):
        return ()
    try:
        like = dataclasses.make_dataclass("like", [(f.name, Any, _like(f)) for f in fields], frozen=bool(params.frozen))
    except (TypeError, ValueError):  # (a field name make_dataclass refuses)
        return ()
    code, written = getattr(init, "__code__", None), like.__init__.__code__  # type: ignore[misc]
    parts = ("co_code", "co_consts", "co_names", "co_varnames", "co_freevars", "co_argcount", "co_kwonlyargcount")
    if code is None or any(getattr(code, part) != getattr(written, part) for part in parts):
        return ()
    return tuple(names.index(f.name) for f in fields), bool(params.frozen), init


def _like(f: dataclasses.Field[Any]) -> Any:
    """A field that makes ``__init__`` take and store ``f`` as it does (a default, a factory
    or neither; keyword-only or not): the values themselves are not in that code."""
    if f.default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=int, kw_only=f.kw_only)
    if f.default is not dataclasses.MISSING:
        return dataclasses.field(default=None, kw_only=f.kw_only)
    return dataclasses.field(kw_only=f.kw_only)


def static(**kwargs: Any) -> Any:
    """A ``dataclasses.field`` marked static: a meta field for :func:`register_dataclass`.

    >>> import dataclasses
    >>> dataclasses.field(metadata={'static': True}, default=1).metadata == static(default=1).metadata
    True

    Args:
        **kwargs: Passed to ``dataclasses.field``; a ``metadata`` mapping is copied and gets
            ``'static': True`` unless it says ``'static'`` itself.

    Returns:
        The field, for a dataclass body (``act: str = static(default='relu')``).
    """
    metadata = dict(kwargs.pop("metadata", None) or {})
    metadata.setdefault("static", True)
    return dataclasses.field(metadata=metadata, **kwargs)


def register_static(cls: C) -> C:
    """Register ``cls`` as a node with no children whose instances are node data.

    Instances must be hashable; two trees holding equal instances have equal treedefs.

    >>> @register_static
    ... class Tag(str): pass
    >>> from treekit import tree_flatten
    >>> tree_flatten([1, Tag('relu')])
    ([1], PyTreeDef([*, CustomNode(Tag[relu], [])]))

    Args:
        cls: The class; matched exactly.

    Returns:
        ``cls``, unchanged.

    Raises:
        TypeError: If ``cls`` is not a class.
        ValueError: If ``cls`` is already registered.
    """
    _check_class("cls", cls)

    def flatten(node: Any, with_path: bool) -> tuple[tuple[()], Any, Any]:
        return (), node, () if with_path else None

    add_type(NodeType(cls, flatten, lambda node, _: node, "static"))
    return cls

"""Registered functions of model libraries that the native core does itself, each proved per class.

Model code's node types register with JAX through a few functions that both libraries called
once a node, and they were most of both libraries' time on such trees (docs/performance.md):

* equinox (0.13.8 and its neighbours) writes three functions per ``Module`` class from
  templates and ``exec``s them (``equinox/_module/_flatten.py``): flatten reads each field from
  the instance's ``__dict__`` (``MISSING`` where absent); unflatten makes the instance with
  ``object.__new__`` and stores each field with ``object.__setattr__`` (wrapper fields into
  ``__dict__``). Proof: each function's source text (equinox keeps it as ``__source__``)
  equals what the templates below (a copy of equinox's, Apache License 2.0) make for the
  class's fields, and its code object equals the one that text compiles to.
* flax nnx (0.12) flattens a ``Variable`` to its ``_raw_value`` and its ``_var_metadata``
  items, sorted, and a ``State`` to its ``_mapping``'s values and keys, by sorted key; it makes
  a ``Variable`` with ``cls._new(value, dict(metadata))``, which makes the instance with
  ``object.__new__``, gives it a ``tracers.TraceState()`` and stores the three fields with
  ``object.__setattr__``. Proof: each function's code object equals the one the copy below
  (flax's, Apache License 2.0) compiles to at the function's own first line, in a module that
  imports what flax's imports. ``TraceState()`` is still called (it asks JAX for its trace),
  and so is a ``State``'s unflatten (its class's ``__init__``).

Each proof also checks the names the function reads (``MISSING``, ``len``, ``sorted``, ``jtu``,
...) and that the class reads those fields as object does (no ``__getattribute__`` of its own
but equinox's, which returns dunder names as object's does; a ``__dict__`` or slot of the
usual kind) and, for equinox, is made by ``object.__new__``. Then the native core does what the
functions do, with no Python frame a node; anything else (another version whose functions
changed, a class of its own ``__getattribute__``) keeps calling them.
"""

from __future__ import annotations
import __future__

import builtins
import dataclasses
import functools
import inspect
import sys
import textwrap
import types
from typing import Any

from treekit.core._keys import GetAttrKey

# the kinds, as the native core tells them (src/native/known.c)
MODULE, VARIABLE, STATE = 0, 1, 2

__all__ = ["known_functions"]

# -- equinox 0.13.8's templates (equinox/_module/_flatten.py), as text ---------------------------
WRAPPER_FIELD_NAMES = ("__module__", "__name__", "__qualname__", "__doc__", "__annotations__")
_INDENT = " " * 4
_GETTER = "get({k!r},MISSING)"
_FLAT_WRAPPERS = ", ".join([_GETTER.format(k=k) for k in WRAPPER_FIELD_NAMES])
_FLAT_CODE = f'''
def {{func_name}}(obj: module_cls) -> {{return_annotation}}:
    """Generated {{func_name}} function for {{qualname}}.

    Dynamic fields: {{dynamic_fs}}
    Static fields: {{static_fs}}
    Wrapper fields: {WRAPPER_FIELD_NAMES}
    """
    get = obj.__dict__.get
    return (
        {{dynamic_vals}},
        (
            MISSING if len(obj.__dict__) == {{num_fields}} else ({_FLAT_WRAPPERS}),
            {{static_vals}}
        )
    )
'''
_SET_WRAPPERS = "\n".join(f"self.__dict__[{name!r}] = waux[{i}]" for i, name in enumerate(WRAPPER_FIELD_NAMES))
_SET_DYNAMIC = "if data[{i}] is not MISSING:\n    object.__setattr__(self, {name!r}, data[{i}])"
_SET_STATIC = "if aux[{i}] is not MISSING:\n    object.__setattr__(self, {name!r}, aux[{i}])"
_UNFLAT_FUNC = f'''
def unflatten(
    module_cls: type[T],
    aux: {{aux_type}},
    data: {{dynamic_type}},
) -> T:
    """Generated unflatten function for {{qualname}}.

    Dynamic fields: {{dynamic_fs}}
    Static fields: {{static_fs}}
    Wrapper fields: {WRAPPER_FIELD_NAMES}
    """
    self = object.__new__(module_cls)
    # Set fields directly by index
{{setters_dynamic}}
    if aux[0] is not MISSING:
        waux = aux[0]
{textwrap.indent(_SET_WRAPPERS, _INDENT * 2)}
{{setters_static}}
    return self
'''


def _tuple_type(count: int, elt: str) -> str:
    return "tuple[()]" if count == 0 else f"tuple[{', '.join([elt] * count)}]"


def _sources(qualname: str, dynamic: tuple[str, ...], static: tuple[str, ...]) -> tuple[str, str, str]:
    """The flatten, flatten_with_keys and unflatten source texts equinox writes for these fields."""
    static_type = f"tuple[Literal[MISSING]|tuple[Any, ...], {', '.join(['Any'] * len(static))}]"
    common = {
        "qualname": qualname,
        "dynamic_fs": dynamic,
        "static_fs": static,
        "num_fields": len(dynamic) + len(static),
        "static_vals": ", ".join(_GETTER.format(k=k) for k in static),
    }
    values = f"({', '.join(_GETTER.format(k=k) for k in dynamic)},)" if dynamic else "()"
    keyed = f"({', '.join(f'(jtu.GetAttrKey({k!r}), {_GETTER.format(k=k)})' for k in dynamic)},)" if dynamic else "()"
    flatten = _FLAT_CODE.format(
        func_name="flatten",
        dynamic_vals=values,
        **common,
        return_annotation=f"tuple[{_tuple_type(len(dynamic), 'Any')}, {static_type}]",
    )
    keys_type = _tuple_type(len(dynamic), "tuple[jtu.GetAttrKey, str]")
    with_keys = _FLAT_CODE.format(
        func_name="flatten_with_keys",
        dynamic_vals=keyed,
        **common,
        return_annotation=f"tuple[{keys_type}, {static_type}]",
    )
    unflatten = _UNFLAT_FUNC.format(
        aux_type=static_type,
        dynamic_type=_tuple_type(len(dynamic), "Any"),
        qualname=qualname,
        dynamic_fs=dynamic,
        static_fs=static,
        setters_dynamic=textwrap.indent(
            "\n".join(_SET_DYNAMIC.format(i=i, name=k) for i, k in enumerate(dynamic)), _INDENT
        ),
        setters_static=textwrap.indent(
            "\n".join(_SET_STATIC.format(i=i, name=k) for i, k in enumerate(static, start=1)), _INDENT
        ),
    )
    return flatten, with_keys, unflatten


# -- the proof --------------------------------------------------------------------------------
_ABSENT = object()


def _reads(fn: types.FunctionType, name: str) -> Any:
    """What the global ``name`` resolves to in ``fn`` (its globals, then its builtins)."""
    found = fn.__globals__.get(name, _ABSENT)
    return getattr(fn, "__builtins__", {}).get(name, _ABSENT) if found is _ABSENT else found


def _as_in_module(source: str, first_line: int, imported: tuple[str, ...]) -> str | None:
    """``source`` as a module holds it from line ``first_line`` (``None``: too near the top), the
    names ``imported`` bound by an import statement, which is never run: CPython compiles
    ``m.f()`` on a name a module imports otherwise than on another."""
    head = f"if 0:\n import {', '.join(imported)}\n" if imported else ""
    padding = first_line - 1 - head.count("\n")
    return None if padding < 0 else head + "\n" * padding + source


def _compiles_to(
    fn: Any, source: str, names: dict[str, Any], filename: str = "", first_line: int = 1, imported: tuple[str, ...] = ()
) -> bool:
    """Whether ``fn`` is the one function ``source`` defines (compiled from ``first_line``, with
    ``fn``'s ``from __future__ import annotations``, in a module importing ``imported``),
    reading ``names`` as given."""
    text = _as_in_module(source, first_line, imported)
    if text is None or type(fn) is not types.FunctionType or fn.__defaults__ or fn.__kwdefaults__ or fn.__closure__:
        return False
    flags = fn.__code__.co_flags & __future__.annotations.compiler_flag
    module = compile(text, filename, "exec", flags=flags, dont_inherit=True)
    code = [c for c in module.co_consts if isinstance(c, types.CodeType)]
    return len(code) == 1 and code[0] == fn.__code__ and all(_reads(fn, k) is v for k, v in names.items())


def _made_by_object(cls: type) -> bool:
    """Whether ``object.__new__(cls)`` makes a ``cls`` and ``object.__setattr__`` applies to one:
    the first base not made by a class statement is ``object``."""
    base: type | None = cls
    while base is not None and base.__flags__ & (1 << 9):  # Py_TPFLAGS_HEAPTYPE
        base = base.__base__
    return base is object


def _object_like(cls: type) -> bool:
    """Whether ``x.__dict__`` of a ``cls`` is its instance dict, read as object reads it, and
    ``object.__new__(cls)`` makes one."""
    for klass in cls.__mro__[:-1]:
        own = vars(klass).get("__getattribute__")
        if own is not None and getattr(own, "__module__", None) != "equinox._module._module":
            return False  # (equinox's returns a dunder name's value as object's __getattribute__ does)
    holder = next((k for k in cls.__mro__ if "__dict__" in vars(k)), None)
    if holder is None or type(vars(holder)["__dict__"]) is not types.GetSetDescriptorType:
        return False
    return _made_by_object(cls)


def _equinox(cls: type, flatten: Any, unflatten: Any, flatten_with_keys: Any) -> tuple[Any, ...] | None:
    if not dataclasses.is_dataclass(cls) or not _object_like(cls):
        return None
    if type(unflatten) is not functools.partial or unflatten.args != (cls,) or unflatten.keywords:
        return None
    fields = dataclasses.fields(cls)
    dynamic = tuple(f.name for f in fields if not f.metadata.get("static", False))
    static = tuple(f.name for f in fields if f.metadata.get("static", False))
    if not all(type(name) is str for name in dynamic + static):
        return None
    missing = getattr(flatten, "__globals__", {}).get("MISSING", _ABSENT)
    texts = _sources(cls.__qualname__, dynamic, static)
    jtu = sys.modules.get("jax.tree_util")
    checks = [
        (flatten, texts[0], "<generated_flatten_{0}>", {"MISSING": missing, "len": builtins.len}),
        (unflatten.func, texts[2], "<generated_unflatten_{0}>", {"MISSING": missing, "object": object}),
    ]
    if flatten_with_keys is not None:
        checks.append(
            (
                flatten_with_keys,
                texts[1],
                "<generated_flatten_with_keys_{0}>",
                {"MISSING": missing, "len": builtins.len, "jtu": jtu},
            )
        )
    if missing is _ABSENT or not all(
        getattr(fn, "__source__", None) == text and _compiles_to(fn, text, names, name.format(cls.__qualname__))
        for fn, text, name, names in checks
    ):
        return None
    return MODULE, cls, dynamic, static, WRAPPER_FIELD_NAMES, missing, tuple(GetAttrKey(name) for name in dynamic)


# -- flax nnx 0.12's functions (flax/nnx/variablelib.py, statelib.py), as text ------------------
_VARIABLE = (
    """def _variable_flatten(x: Variable[tp.Any]):
  metadata = tuple(sorted(x._var_metadata.items()))
  return (x._raw_value,), metadata
""",
    """def _variable_flatten_with_keys(x: Variable[tp.Any]):
  metadata = tuple(sorted(x._var_metadata.items()))
  node = (jtu.GetAttrKey('value'), x._raw_value)
  return (node,), metadata
""",
)
_STATE = (
    """def _state_flatten(x: State):
  items = sorted(x._mapping.items())
  leaves = [v for _, v in items]
  return leaves, tuple(k for k, _ in items)
""",
    """def _state_flatten_with_keys(x: State):
  items = sorted(x._mapping.items())
  children = [(jtu.DictKey(k), v) for k, v in items]
  return children, tuple(k for k, _ in items)
""",
)


_VARIABLE_MADE = (
    """def _variable_unflatten(
  cls: type[Variable[tp.Any]],
  static: tuple[tuple[str, tp.Any], ...],
  children: tuple[tp.Any],
):
  return cls._new(children[0], dict(static))
""",
    # (Variable._new, a classmethod: its class statement's indent kept by an `if`)
    """if 1:
  @classmethod
  def _new(
    cls,
    value: A,
    metadata: dict[str, tp.Any],
  ) -> Variable[A]:
    obj = object.__new__(cls)
    # skip __setattr__ for trace_state initialization
    object.__setattr__(obj, '_trace_state', tracers.TraceState())
    object.__setattr__(obj, '_var_metadata', metadata)
    object.__setattr__(obj, '_raw_value', value)
    return obj
""",
)
_FLAX_IMPORTS = ("jtu", "tracers")  # (modules flax's modules import that these functions use)


def _flax_text(fn: Any, text: str, names: dict[str, Any], lines_above: int = 0) -> bool:
    """Whether ``fn`` is the function ``text`` defines where flax's module holds it."""
    return type(fn) is types.FunctionType and _compiles_to(
        fn, text, names, first_line=fn.__code__.co_firstlineno - lines_above, imported=_FLAX_IMPORTS
    )


def _flax(texts: tuple[str, str], flatten: Any, flatten_with_keys: Any) -> bool:
    """Whether ``flatten`` (and ``flatten_with_keys``, unless ``None``) are these two functions."""
    names = {"tuple": tuple, "sorted": sorted}
    pairs = [(flatten, texts[0], names)]
    if flatten_with_keys is not None:
        pairs.append((flatten_with_keys, texts[1], {**names, "jtu": sys.modules.get("jax.tree_util")}))
    return all(_flax_text(fn, text, names) for fn, text, names in pairs)


def _variable_made(unflatten: Any) -> tuple[type, types.FunctionType] | None:
    """Where ``unflatten`` is ``partial(_variable_unflatten, cls)`` and ``cls._new`` is nnx's:
    ``cls`` and ``_new``'s function, which ``cls._new`` must still give when a node is made
    (else what it gives is called), whose globals an exact dict (``tracers`` read there then)."""
    if type(unflatten) is not functools.partial or unflatten.keywords or len(unflatten.args) != 1:
        return None
    cls = unflatten.args[0]
    if not isinstance(cls, type) or not _made_by_object(cls):
        return None
    new = inspect.getattr_static(cls, "_new", None)
    fn = getattr(new, "__func__", None)
    if type(new) is not classmethod or type(fn) is not types.FunctionType or type(fn.__globals__) is not dict:
        return None
    if _flax_text(unflatten.func, _VARIABLE_MADE[0], {"dict": dict}) and _flax_text(
        fn, _VARIABLE_MADE[1], {"object": object}, lines_above=1
    ):
        return cls, fn
    return None


def _nnx(cls: type, flatten: Any, unflatten: Any, flatten_with_keys: Any) -> tuple[Any, ...] | None:
    if any("__getattribute__" in vars(klass) for klass in cls.__mro__[:-1]):  # (object's reads the fields)
        return None
    if _flax(_VARIABLE, flatten, flatten_with_keys):
        raw, meta = (inspect.getattr_static(cls, name, None) for name in ("_raw_value", "_var_metadata"))
        if type(raw) is types.MemberDescriptorType and type(meta) is types.MemberDescriptorType:
            return VARIABLE, cls, raw, meta, (GetAttrKey("value"),), _variable_made(unflatten)
    if _flax(_STATE, flatten, flatten_with_keys) and _object_like(cls):
        if inspect.getattr_static(cls, "_mapping", _ABSENT) is _ABSENT:  # (read from the instance's __dict__)
            return STATE, cls
    return None


def known_functions(cls: type, flatten: Any, unflatten: Any, flatten_with_keys: Any) -> tuple[Any, ...] | None:
    """What the native core needs to do what ``cls``'s registered functions do, where this
    module proves they are ones it knows (``flatten_with_keys`` ``None``: not checked, as when
    JAX keeps it out of reach); else ``None``. See src/native/known.h for the tuples.

    >>> known_functions(dict, None, None, None) is None
    True
    """
    if not isinstance(cls, type):
        return None
    return _equinox(cls, flatten, unflatten, flatten_with_keys) or _nnx(cls, flatten, unflatten, flatten_with_keys)

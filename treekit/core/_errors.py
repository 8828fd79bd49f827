"""StructureMismatchError and the one builder of its message."""

from __future__ import annotations

import html
from typing import Any, NamedTuple

from treekit.core._html import fragment, pair
from treekit.core._keys import KeyPath, keystr

__all__ = [
    "Caller",
    "StructureAssertionError",
    "StructureMismatchError",
    "TransposeMismatchError",
    "TreeCycleError",
    "flatten_noted",
    "not_a_bool",
    "noted",
    "safe_keystr",
    "safe_repr",
    "type_names",
    "where_text",
]

def safe_repr(value: Any, limit: int | None = None) -> str:
    """``repr(value)`` (its first ``limit`` characters), or a stand-in if that ``repr`` raises:
    a message about the user's objects must not fail on them.

    >>> class Broken:
    ...     def __repr__(self): raise RuntimeError
    >>> safe_repr([1, 2]), safe_repr(Broken())
    ('[1, 2]', '<Broken object (its repr raised RuntimeError)>')
    """
    try:
        text = repr(value)
    except Exception as exc:
        return f"<{type(value).__name__} object (its repr raised {type(exc).__name__})>"
    return text if limit is None else text[:limit]


def safe_keystr(path: KeyPath) -> str:
    """``keystr(path)``, with a stand-in for each key whose ``str`` raises (see :func:`safe_repr`)."""
    try:
        return keystr(path)
    except Exception:
        parts = []
        for entry in path:
            try:
                parts.append(str(entry))
            except Exception:
                parts.append(f"[{safe_repr(getattr(entry, 'key', entry))}]")
        return "".join(parts)


def format_message(label: str, path: KeyPath, expected: str, got: str, detail: str | None, hint: str | None) -> str:
    message = f"{label}{safe_keystr(path)}: expected {expected}, got {got}"
    if detail:
        message += f" ({detail})"
    if hint:
        message += f"\n{hint}"
    return message


class StructureMismatchError(ValueError):
    """Two trees (or a tree and a treedef) differ at ``label + keystr(path)``.

    The message reads ``<label><key path>: expected <what>, got <what>[ (<detail>)]``,
    where ``label`` names the argument that differs (``tree``, ``rest[0]``, ``b``, ...)::

        rest[0]['layers'][1]: expected list of length 2, got list of length 3

    >>> from treekit import tree_map
    >>> try:
    ...     tree_map(lambda a, b: a + b, {'layers': [1, 2]}, {'layers': [1, 2, 3]})
    ... except StructureMismatchError as err:
    ...     print(err)
    ...     print(err.label, err.path)
    rest[0]['layers']: expected list of length 2, got list of length 3
    rest[0] (DictKey(key='layers'),)

    The constructor takes the attributes below, in this order.

    Attributes:
        label: The argument that differs, as named in the message.
        path: The key path of the first difference, from that argument's root.
        expected: What the reference structure has there.
        got: What the argument has there.
        detail: What exactly differs (missing and extra dict keys, ...), or ``None``.
        hint: How to fix it, the message's second line (``None`` for no hint).
    """

    __module__ = "treekit"  # tracebacks and reprs show the public name

    def __init__(
        self,
        label: str,
        path: KeyPath,
        expected: str,
        got: str,
        detail: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(format_message(label, path, expected, got, detail, hint))
        self.label = label
        self.path = tuple(path)
        self.expected = expected
        self.got = got
        self.detail = detail
        self.hint = hint

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.label, self.path, self.expected, self.got, self.detail, self.hint))

    def _repr_html_(self) -> str:
        """The error as a notebook shows it: the key path down to the difference, the expected
        and the got side by side there, highlighted, and the detail and hint under them."""
        esc = html.escape
        rows = [pair(0, "expected", f"got ({esc(self.label)})", ("tk-heads", "tk-heads"))]
        rows.append(pair(0, '<span class="tk-key">tree</span>', f'<span class="tk-key">{esc(self.label)}</span>'))
        for level, entry in enumerate(self.path, 1):
            key = f'<span class="tk-key">{esc(safe_keystr((entry,)))}</span>'
            rows.append(pair(level, key, key))
        rows.append(pair(len(self.path) + 1, esc(self.expected), esc(self.got), ("tk-changed", "tk-changed")))
        notes = [f'<div class="tk-why">{esc(self.detail)}</div>'] if self.detail else []
        notes += [f'<div class="tk-dim">{esc(self.hint)}</div>'] if self.hint else []
        where = esc(f"{self.label}{safe_keystr(self.path)}")
        head = f'<div class="tk-total">{type(self).__name__} at {where}</div>'
        return fragment(f'{head}<div class="tk-pairs">{"".join(rows)}</div>{"".join(notes)}')


class StructureAssertionError(StructureMismatchError, AssertionError):
    """What :func:`treekit.assert_same_structure` raises: a :class:`StructureMismatchError` that is
    also an ``AssertionError``, as every assertion helper's error is (``except ValueError`` and
    ``except StructureMismatchError`` still catch it).

    >>> from treekit import assert_same_structure
    >>> try:
    ...     assert_same_structure([1, 2], [1, 2, 3])
    ... except AssertionError as err:
    ...     print(type(err).__name__, isinstance(err, ValueError), err)
    StructureAssertionError True b: expected list of length 2, got list of length 3
    """

    __module__ = "treekit"

    @classmethod
    def of(cls, error: StructureMismatchError) -> StructureAssertionError:
        """The same error, as this class."""
        return cls(error.label, error.path, error.expected, error.got, error.detail, error.hint)


class TransposeMismatchError(StructureMismatchError, TypeError):
    """:func:`~treekit.tree_transpose`'s tree is not ``outer_treedef`` composed with ``inner_treedef``.

    A :class:`StructureMismatchError` (so a ``ValueError``) that is also a ``TypeError``, the
    class JAX raises there: ``except TypeError`` written for JAX keeps working.

    >>> from treekit import tree_structure, tree_transpose
    >>> try:
    ...     tree_transpose(tree_structure([0, 0]), tree_structure((0, 0)), [(1, 2), [3, 4]])
    ... except TypeError as err:
    ...     print(err)
    pytree_to_transpose[1]: expected tuple of length 2, got list of length 2
    """

    __module__ = "treekit"


class StructureKeyError(StructureMismatchError, KeyError):
    """A key name a tree does not hold, or holds at several places, where the peer whose name
    treekit uses raises ``KeyError`` (optax's ``tree_set``, ``tree_get``): a
    :class:`StructureMismatchError` (so a ``ValueError``) that is also a ``KeyError``, so
    ``except KeyError`` written for the peer keeps working; its message is not quoted as a
    plain ``KeyError``'s.

    >>> from treekit.params import tree_set
    >>> try:
    ...     tree_set({'adam': {'count': 3}}, ema=0.9)
    ... except KeyError as err:
    ...     print(type(err).__name__, isinstance(err, ValueError), err)
    StructureKeyError True tree: expected a key named 'ema', got none
    """

    __module__ = "treekit"
    __str__ = BaseException.__str__


class TreeCycleError(ValueError):
    """A container is its own descendant; ``path`` is where the cycle closes.

    The message reads ``<label><key path>: expected a tree, got a cycle (...)``.

    >>> from treekit import tree_leaves
    >>> tree = {'a': []}
    >>> tree['a'].append(tree)
    >>> try:
    ...     tree_leaves(tree)
    ... except TreeCycleError as err:
    ...     print(err)
    ...     print(err.path, err.ancestor)
    tree['a'][0]: expected a tree, got a cycle (this dict is the same object as its ancestor tree)
    (DictKey(key='a'), SequenceKey(idx=0)) ()

    The constructor takes ``(label, path, ancestor, what)``, ``what`` being the container's
    type name (``dict``).

    Attributes:
        label: The argument holding the cycle.
        path: The key path where the cycle closes: the container found again.
        ancestor: The key path of that same container higher up (``()``: the root).
    """

    __module__ = "treekit"  # tracebacks and reprs show the public name

    def __init__(self, label: str, path: KeyPath, ancestor: KeyPath, what: str) -> None:
        super().__init__(
            format_message(
                label,
                path,
                "a tree",
                "a cycle",
                f"this {what} is the same object as its ancestor {label}{safe_keystr(ancestor)}",
                None,
            )
        )
        self.label = label
        self.path = tuple(path)
        self.ancestor = tuple(ancestor)

    def __reduce__(self) -> tuple[Any, ...]:
        what = str(self).rsplit("(this ", 1)[-1].split(" is the same", 1)[0]
        return (type(self), (self.label, self.path, self.ancestor, what))


def flatten_noted(label: str, path: KeyPath, cls: type, exc: Exception) -> Exception:
    """``exc``, raised while flattening a ``cls`` at ``label + path``, noted with where: see
    :func:`noted`. Both walkers let the user's own exception through, class and all:

    >>> flatten_noted('rest[0]', (), dict, KeyError('w')).__notes__
    ['rest[0]: raised while flattening dict']
    """
    return noted(exc, f"{label}{safe_keystr(path)}: raised while flattening {cls.__qualname__}")


def count_children(n: int) -> str:
    """``1 child``, ``2 children``: a node's children counted in a message."""
    return "1 child" if n == 1 else f"{n} children"


def unflatten_noted(cls: type, data: Any, count: int, exc: Exception) -> Exception:
    """``exc``, raised by the unflatten function registered for ``cls`` while it built a node
    of ``count`` children with node data ``data``, noted with that (see :func:`noted`):

    >>> unflatten_noted(dict, 'aux', 2, KeyError('w')).__notes__
    ["raised by the unflatten function registered for dict (node data 'aux', 2 children)"]
    """
    return noted(
        exc,
        f"raised by the unflatten function registered for {cls.__qualname__} "
        f"(node data {data!r:.60}, {count_children(count)})",
    )


def not_a_bool(label: str, path: KeyPath, value: object) -> ValueError:
    """The error for an ``is_leaf`` that returned ``value`` at ``label + path``: jax accepts only
    ``True``, ``False`` and ``None`` (numpy's ``bool_`` too is refused, as in jax).

    >>> print(not_a_bool('tree', (), 1))
    is_leaf(tree): expected True, False or None, got int 1
    pass is_leaf=lambda x: bool(...) to convert
    """
    cls = type(value)
    name = cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    return ValueError(
        f"is_leaf({label}{keystr(path)}): expected True, False or None, got {name} {value!r:.40}\n"
        "pass is_leaf=lambda x: bool(...) to convert"
    )


def where_text(path: KeyPath) -> str:
    """A key path in a sentence: its ``keystr``, or ``the root`` for ``()``.

    >>> from treekit.core._keys import DictKey
    >>> where_text(()), where_text((DictKey('a'), DictKey(0)))
    ('the root', "['a'][0]")
    """
    return keystr(path) if path else "the root"


class Caller(NamedTuple):
    """Who called a user's function, for the note on what it raises: the ``function``
    (``tree_map: f``) and what its ``arguments`` were.

    >>> from treekit.core._keys import DictKey
    >>> Caller('tree_map: f', 'arguments from tree').note((DictKey('w'),))
    "tree_map: f raised at ['w'] (arguments from tree)"
    """

    function: str
    arguments: str

    def note(self, path: KeyPath) -> str:
        """The note for an exception raised at the leaf ``path``."""
        return f"{self.function} raised at {where_text(path)} ({self.arguments})"


def noted(exc: Exception, note: str) -> Exception:
    """``exc``, with ``note`` added (PEP 678: tracebacks print it under the message).

    >>> err = ValueError('bad shape')
    >>> noted(err, "tree_map: f raised at ['w'] (arguments from tree)") is err
    True
    >>> err.__notes__
    ["tree_map: f raised at ['w'] (arguments from tree)"]
    """
    exc.add_note(note)
    return exc


def type_names(a: type, b: type) -> tuple[str, str, str | None]:
    """Names for two classes in a message, and a detail when the names cannot tell them apart.

    ``__name__`` each; module + qualname when the names clash; and when those clash too (a
    class redefined in a notebook cell, or after ``importlib.reload``), a detail saying the
    two are different class objects.

    >>> import collections
    >>> P1 = collections.namedtuple('Point', 'x y'); P2 = collections.namedtuple('Point', 'x y')
    >>> type_names(P1, P2)
    ('treekit.core._errors.Point', 'treekit.core._errors.Point',
     'a different class object with the same name: redefined?')
    >>> P2.__module__ = 'other'
    >>> type_names(P1, P2)
    ('treekit.core._errors.Point', 'other.Point', None)
    >>> type_names(list, tuple)
    ('list', 'tuple', None)
    """
    if a is b or a.__name__ != b.__name__:
        return a.__name__, b.__name__, None
    a_name, b_name = f"{a.__module__}.{a.__qualname__}", f"{b.__module__}.{b.__qualname__}"
    return a_name, b_name, (_SAME_NAME if a_name == b_name else None)


_SAME_NAME = "a different class object with the same name: redefined?"

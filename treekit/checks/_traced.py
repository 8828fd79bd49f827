"""Value asserts on traced values, and ``chexify``, which makes them work inside ``jax.jit``.

Inside a function ``jit``, ``grad`` or ``vmap`` traces, a leaf has no values yet. A value
assert (close, equal, ULP, finite) that meets one checks what it can at once (structure, shapes,
dtypes: an ``AssertionError`` while tracing) and, under :func:`chexify` (or chex's ``chexify``),
adds one jax ``checkify`` check per traced leaf, whose failure the chexified function raises as
an ``AssertionError`` naming the key path, how many elements differ and the first of them.
Outside a chexify it raises a ``TypeError`` saying so, never jax's tracer error.
"""

from __future__ import annotations

import atexit
import collections
import functools
import itertools
import re
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from treekit.checks._leaf_values import beyond_tolerance, is_number, leaf_differences
from treekit.core import IsLeaf, KeyPath, LeafPaths, describe_leaf, flatten, is_array, is_key_dtype, keystr

__all__ = ["Checks", "block_until_chexify_assertions_complete", "chexify", "traced_checks"]

F = TypeVar("F", bound=Callable[..., Any])


class _Level(threading.local):
    level = 0


_LEVEL = _Level()  # how many chexified calls this thread is inside (at most 1)
_OURS = re.compile(r"treekit\.assert_\w+ failed under jit")
_CHECKIFY_TAIL = re.compile(r"\s*\((?:`check` failed|check failed at)[^\n]*\)\s*$")  # (jax's location words)


def _tracer_type() -> Any:
    jax = sys.modules.get("jax")
    return getattr(getattr(jax, "core", None), "Tracer", None)


def _chex_storage() -> Any:
    """chex's chexify state, if chex is imported (its ``chexify`` runs our checks too)."""
    internal = sys.modules.get("chex._src.asserts_internal")
    return getattr(internal, "CHEXIFY_STORAGE", None)


def traced_checks(
    trees: tuple[Any, ...], name: str, custom: str | None = None, custom_vars: Sequence[Any] = (),
    is_leaf: IsLeaf | None = None,
) -> Checks | None:
    """``None`` if no leaf of ``trees`` is being traced; the :class:`Checks` that ``name`` adds
    if a chexify runs (``custom``: chex's ``custom_message``, formatted with ``custom_vars``
    when the check fails, so they may be traced); else a ``TypeError`` naming the first traced
    leaf and what to do."""
    tracer = _tracer_type()
    if tracer is None:
        return None
    for i, tree in enumerate(trees):
        leaves, treedef, _ = flatten(tree, is_leaf)
        for k, x in enumerate(leaves):
            if isinstance(x, tracer):
                if _LEVEL.level or getattr(_chex_storage(), "level", 0):
                    return Checks(name, custom, custom_vars)
                where = f"tree {i}" if len(trees) > 1 else "tree"
                raise TypeError(
                    f"{name} reads values: {where}{keystr(LeafPaths(tree, treedef)[k])} is {describe_leaf(x)} "
                    "being traced (inside jax.jit, grad or vmap), whose values are not known until the function "
                    "runs\nwrap the outermost jitted function in treekit.chexify to check them when it runs, "
                    "or assert outside it, on its outputs"
                )
    return None


def _call_site() -> str:
    """``file:line`` of the innermost frame outside treekit's and jax's files: the assert's caller."""
    import os

    files = [getattr(sys.modules.get(name), "__file__", None) for name in ("treekit", "jax", "jaxlib")]
    inside = tuple(os.path.dirname(file) + os.sep for file in files if file)
    frame = sys._getframe(1)
    while frame is not None:
        if not frame.f_code.co_filename.startswith(inside):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return "?"


class _Shown:
    """A traced value in a message formatted while tracing: what it is, whatever the format spec."""

    def __init__(self, x: Any) -> None:
        self.text = f"<{describe_leaf(x)} being traced>"

    def __format__(self, spec: str) -> str:
        return self.text


def format_custom(message: str, format_vars: Sequence[Any]) -> str:
    """chex's ``custom_message`` formatted with ``custom_message_format_vars`` now (a traced
    value shown as such: its numbers are not known yet)."""
    return message.format(*(_Shown(v) if _traced(v) else v for v in format_vars))


def _traced(*leaves: Any) -> bool:
    return any(isinstance(x, _tracer_type()) for x in leaves)


def _key(x: Any) -> bool:
    return is_array(x) and is_key_dtype(x.dtype)


def _shape(x: Any) -> tuple[int, ...]:
    import numpy as np

    return tuple(x.shape) if is_array(x) else tuple(np.shape(x))


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


class Checks:
    """The checks one value assert adds to the traced computation, each naming a key path."""

    def __init__(self, name: str, custom: str | None, custom_vars: Sequence[Any]) -> None:
        self.name = name
        self.site = _call_site()
        # chex's custom_message: formatted now, or, where it shows traced numbers, when the check fails
        self.custom, self.custom_vars = custom, list(custom_vars)
        if custom and not (_traced(*custom_vars) and all(is_array(v) or is_number(v) for v in custom_vars)):
            self.custom, self.custom_vars = _escape(format_custom(custom, custom_vars)), []

    def traced(self, *leaves: Any) -> bool:
        """Whether a leaf of these is being traced (then checked here, not on the host)."""
        return _traced(*leaves)

    def leaf_differences(
        self, path: KeyPath, x: Any, y: Any, shapes: bool, dtypes: bool, rtol: float, atol: float, scalars: bool
    ) -> list[tuple[str, Any, Any]]:
        """:func:`leaf_differences` for a pair with a traced leaf: what tracing knows (shapes and
        dtypes, by the same rules) now; the values checked when the function runs."""
        found = leaf_differences(x, y, shapes, dtypes, False, rtol, atol)
        if found:
            return found
        sx, sy = _shape(x), _shape(y)
        if _key(x) != _key(y) or not all(is_array(v) or is_number(v) for v in (x, y)):
            return [("type", x, y)]  # (a string, or a typed PRNG key, against a traced array)
        if sx != sy and not (scalars and () in (sx, sy) and not _key(x)):  # (the host's scalar rule)
            return [("shape", sx, sy)]
        self.values(path, x, y, rtol, atol)
        return []

    def _check(self, ok: Any, line: str, **values: Any) -> None:
        """Add the check ``ok``; its error is ``line`` with ``values`` put in (by name, as the
        custom message's fields are by position)."""
        import jax.numpy as jnp
        from jax.experimental import checkify

        chex = _chex_storage()
        if getattr(chex, "level", 0) and not _LEVEL.level:  # chex's chexify: its message form, so it raises ours
            internal = sys.modules["chex._src.asserts_internal"]
            custom = f" Custom message: {self.custom}." if self.custom else ""
            message = internal.get_chexify_err_message(self.name, line) + custom + f" [failed at: {_escape(self.site)}]"
        else:
            first = f"{self.custom}\n" if self.custom else ""
            message = f"{first}treekit.{self.name} failed under jit at {_escape(self.site)}\n{line}"
        checkify.check(ok, message, *map(jnp.asarray, self.custom_vars), **values)

    def values(self, path: KeyPath, x: Any, y: Any, rtol: float, atol: float) -> None:
        """Check the host's rule (:func:`beyond_tolerance`, ``rtol`` a fraction of ``|y|``) in
        the device's widest float type (float32, float64 with x64) or complex."""
        import jax
        import jax.numpy as jnp

        if _key(x):  # typed PRNG keys (both: see leaf_differences): by their key data
            x, y, rtol, atol = jax.random.key_data(x), jax.random.key_data(y), 0.0, 0.0
        x, y = jnp.broadcast_arrays(jnp.asarray(x), jnp.asarray(y))
        if x.size == 0:
            return
        kind = complex if jnp.iscomplexobj(x) or jnp.iscomplexobj(y) else float
        a, b = x.astype(jnp.result_type(kind)), y.astype(jnp.result_type(kind))
        bad = (beyond_tolerance(jnp, a, b, rtol, atol, True) & (x != y)).reshape(-1)  # (x != y: ints exactly)
        first = jnp.argmax(bad)
        p = _escape(keystr(path))
        self._check(
            ~bad.any(),
            f"b{p}: expected the values of a{p}, got {{tk_count}} of {bad.size} different (the first at "
            f"flat index {{tk_at}}: {{tk_a}} in a, {{tk_b}} in b; dtypes {x.dtype} and {y.dtype})",
            tk_count=bad.sum(), tk_at=first, tk_a=x.reshape(-1)[first], tk_b=y.reshape(-1)[first],
        )

    def finite(self, path: KeyPath, x: Any) -> None:
        """Check ``x`` holds no NaN or inf."""
        import jax.numpy as jnp

        bad = ~jnp.isfinite(x).reshape(-1)
        if bad.size == 0:
            return
        first = jnp.argmax(bad)
        self._check(
            ~bad.any(),
            f"tree{_escape(keystr(path))}: expected finite values, got {{tk_count}} of {bad.size} not finite "
            f"(the first at flat index {{tk_at}}: {{tk_value}})",
            tk_count=bad.sum(), tk_at=first, tk_value=x.reshape(-1)[first],
        )

    def ulps(self, path: KeyPath, x: Any, y: Any, maxulp: int) -> None:
        """Check ``x`` and ``y`` are at most ``maxulp`` units in the last place apart (same dtype)."""
        import jax
        import jax.numpy as jnp

        x, y = jnp.asarray(x), jnp.asarray(y)
        kind = jnp.result_type(x, y)
        if jnp.issubdtype(kind, jnp.complexfloating):  # the real and imaginary parts, each
            self.ulps(path, jnp.real(x), jnp.real(y), maxulp)
            self.ulps(path, jnp.imag(x), jnp.imag(y), maxulp)
            return
        if not jnp.issubdtype(kind, jnp.floating):  # (no ULPs: equal or not)
            self.values(path, x, y, 0.0, 0.0)
            return
        x, y = x.astype(kind), y.astype(kind)
        bits = {2: jnp.int16, 4: jnp.int32, 8: jnp.int64}[kind.itemsize]
        unsigned = {2: jnp.uint16, 4: jnp.uint32, 8: jnp.uint64}[kind.itemsize]
        least = jnp.array(-(2 ** (8 * kind.itemsize - 1)), bits)  # (the bits' iinfo.min)
        ra, rb = (jnp.where(r < 0, least - r, r) for r in (jax.lax.bitcast_convert_type(v, bits) for v in (x, y)))
        apart = jnp.where(ra >= rb, (ra - rb).astype(unsigned), (rb - ra).astype(unsigned))  # (no overflow)
        apart = jnp.where(jnp.isnan(x) & jnp.isnan(y), 0, apart).reshape(-1)
        p = _escape(keystr(path))
        self._check(
            apart.max(initial=0) <= maxulp,
            f"b{p}: expected values at most {maxulp} ULP from a{p}, got values {{tk_apart}} ULP apart ({kind})",
            tk_apart=apart.max(initial=0),
        )


# ---- chexify ----------------------------------------------------------------------------------


class _Pending:
    """The check results of one chexified function's calls not yet looked at, oldest first,
    each with its call's number (calls are numbered across functions)."""

    def __init__(self) -> None:
        self.errors: collections.deque[tuple[int, Any]] = collections.deque()

    def raise_done(self, wait: bool) -> None:
        """Raise the first failed check among the calls done (all of them, waiting, with ``wait``)."""
        while self.raise_next(wait):
            pass

    def raise_next(self, wait: bool) -> bool:
        """Look at the oldest call's checks if done (or ``wait``): raise if one failed; whether
        there was one to look at."""
        with _LOCK:
            if not self.errors:
                _PENDING.pop(self, None)
                return False
            if not (wait or _ready(self.errors[0][1])):
                return False
            error = self.errors.popleft()[1]
        _raise(error)
        return True

    def add(self, error: Any) -> None:
        with _LOCK:
            self.errors.append((next(_CALLS), error))
            _PENDING[self] = None


_LOCK = threading.Lock()
_CALLS = itertools.count()
_PENDING: dict[_Pending, None] = {}  # those holding checks not yet read (even of functions since dropped)


def _ready(error: Any) -> bool:
    import jax

    arrays: list[Any] = [leaf for leaf in jax.tree_util.tree_leaves(error) if isinstance(leaf, jax.Array)]
    return all(leaf.is_ready() for leaf in arrays)


def _raise(error: Any) -> None:
    """Raise ``error`` (a checkify ``Error``) if a check failed: ours as an ``AssertionError``."""
    message = error.get()
    if message is None:
        return
    if _OURS.search(message):
        raise AssertionError(_CHECKIFY_TAIL.sub("", message))
    error.throw()  # (the user's own checkify checks and checkify's automatic ones: jax's error)


def chexify(fn: F, async_check: bool = True, errors: Any = None) -> F:
    """Make value asserts inside ``fn`` work when ``fn`` is jitted (chex's ``chexify``).

    Wrap the outermost jitted function. Each value assert (:func:`assert_trees_all_close`,
    ``_equal``, ``_close_ulp``, :func:`assert_tree_all_finite`) inside it checks structure,
    shapes and dtypes while tracing and adds a check of the values to the computation (jax's
    ``checkify``); a failed check raises an ``AssertionError`` naming the key path, the number
    of elements that fail and the first of them, and where the assert was called.
    With ``async_check=False`` it raises when ``fn`` returns (waiting for it); with ``True`` (the
    default, as chex) when a later call finds it done, or at ``fn.wait_checks()``,
    :func:`block_until_chexify_assertions_complete` or interpreter exit. Values are compared on
    the device, in its float type (see the docs' "Working with JAX" page for what differs from
    the host).

    >>> import jax, jax.numpy as jnp
    >>> from treekit import assert_tree_all_finite
    >>> @chexify
    ... @jax.jit
    ... def log1p_abs(x):
    ...     assert_tree_all_finite({'x': x})
    ...     return jnp.log(jnp.abs(x) + 1)
    >>> log1p_abs(jnp.ones(2)).tolist()  # doctest: +ELLIPSIS
    [0.69..., 0.69...]
    >>> _ = log1p_abs(jnp.array([1.0, jnp.nan])); log1p_abs.wait_checks()  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: treekit.assert_tree_all_finite failed under jit at <doctest ...>:4
    tree['x']: expected finite values, got 1 of 2 not finite (the first at flat index 1: nan)

    Args:
        fn: The function to check, jitted (or not).
        async_check: Whether ``fn`` returns before its checks are read (chex's default).
        errors: jax ``checkify`` error categories to check too (``checkify.float_checks``...;
            default: the ``checkify.check`` calls only).

    Returns:
        ``fn`` with its checks raised; its ``wait_checks()`` raises those not yet raised.

    Raises:
        RuntimeError: From the function returned, called inside another chexified call or
            on traced values (chexify the outermost function only).
    """
    from jax.experimental import checkify

    checked = checkify.checkify(fn, errors=checkify.user_checks if errors is None else errors)
    pending = _Pending()

    @functools.wraps(fn)
    def chexified(*args: Any, **kwargs: Any) -> Any:
        if _LEVEL.level:
            raise RuntimeError("chexify: a chexified function was called inside another; chexify the outermost only")
        tracer = _tracer_type()
        if any(isinstance(x, tracer) for x in flatten((args, kwargs))[0]):
            raise RuntimeError(
                "chexify: called on values being traced; chexify the outermost function, outside jax.jit, "
                "grad, vmap and pmap"
            )
        if async_check:
            pending.raise_done(wait=False)
        _LEVEL.level += 1
        try:
            error, out = checked(*args, **kwargs)
        finally:
            _LEVEL.level -= 1
        if async_check:
            pending.add(error)
        else:
            _raise(error)
        return out

    chexified.wait_checks = functools.partial(pending.raise_done, True)  # type: ignore[attr-defined]
    return chexified  # type: ignore[return-value]


def block_until_chexify_assertions_complete() -> None:
    """Wait for every chexified function's checks and raise the first that failed, in the
    order of the calls (chex's name); those after it are raised by later calls.

    >>> block_until_chexify_assertions_complete()  # nothing pending
    """
    while True:
        with _LOCK:
            oldest = min((p for p in _PENDING if p.errors), key=lambda p: p.errors[0][0], default=None)
        if oldest is None:
            return
        oldest.raise_next(wait=True)


def _at_exit() -> None:
    """Raise every failed check nobody waited for, together (the interpreter prints it)."""
    failures = []
    while True:
        try:
            block_until_chexify_assertions_complete()
            break
        except Exception as error:  # (an AssertionError; jax's error for checkify's own checks)
            failures.append(str(error) if isinstance(error, AssertionError) else f"{type(error).__name__}: {error}")
    if failures:
        n = len(failures)
        header = f"{n} chexify check{'s' if n > 1 else ''} failed, never waited for:"
        raise AssertionError("\n".join([header, *failures]))


atexit.register(_at_exit)

"""The sharding rules: match_rules, check_specs, shardings, shard, device_bytes (treekit.sharding says how)."""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from treekit.core import KeyPath, flatten, keystr
from treekit.core import ShapeDtype as ShapeDtype
from treekit.ops import broadcast
from treekit.sharding._annotations import annotation, box_level
from treekit.sharding._layout import device_nbytes, entry_axes
from treekit.sharding._layout import mesh_axes as mesh_axes
from treekit.sharding._layout import spec_str as spec_str

# The public names are listed once, in treekit.sharding's __all__.

PyTree = Any
Rules = Sequence[tuple[Any, Any]]
_REQUIRED: Any = object()


class ShardingError(ValueError):
    """Specs that don't fit their leaves, or leaves no rule matches; one line per leaf.

    Attributes:
        problems: The lines, each ``tree<key path>: expected ..., got ...``.
    """

    __module__ = "treekit.sharding"

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        head = "" if len(self.problems) == 1 else f"{len(self.problems)} leaves can't be sharded so:\n  "
        super().__init__(head + "\n  ".join(self.problems))


class UnusedRuleWarning(UserWarning):
    """A sharding rule that gives no leaf its spec (it matches nothing, or only what an earlier
    rule already took)."""

    __module__ = "treekit.sharding"


def _pspec() -> Any:
    from jax.sharding import PartitionSpec

    return PartitionSpec


def _as_spec(spec: Any, what: str) -> Any:
    """``spec`` as a PartitionSpec: a PartitionSpec, ``None`` (replicated) or a tuple/list of
    entries (each ``None``, an axis name or a tuple of axis names)."""
    pspec = _pspec()
    if isinstance(spec, pspec):
        return spec
    if spec is None:
        return pspec()
    if isinstance(spec, (tuple, list)):
        return pspec(*spec)
    raise TypeError(f"{what}: expected a PartitionSpec, None or a tuple of axis names, got {type(spec).__name__}")


def _rules(rules: Rules) -> list[tuple[re.Pattern[str], Any]]:
    if not isinstance(rules, (list, tuple)):
        raise TypeError(f"rules: expected a list of (pattern, spec) pairs, got {type(rules).__name__}")
    items = list(rules)
    out = []
    for k, item in enumerate(items):
        if not isinstance(item, tuple) or len(item) != 2:
            raise TypeError(f"rules[{k}]: expected a (pattern, spec) pair, got {item!r:.80}")
        pattern, spec = item
        if not isinstance(pattern, (str, re.Pattern)):
            raise TypeError(f"rules[{k}]: expected a regular expression (str), got {type(pattern).__name__}")
        out.append((re.compile(pattern), _as_spec(spec, f"rules[{k}]")))
    return out


def _is_rules(value: Any) -> bool:
    return (
        isinstance(value, (list, tuple))
        and all(isinstance(r, tuple) and len(r) == 2 and isinstance(r[0], (str, re.Pattern)) for r in value)
    )


def _path_forms(path: KeyPath) -> tuple[str, str]:
    return keystr(path, simple=True, separator="/"), keystr(path)


def match_rules(
    tree: PyTree, rules: Rules, default: Any = _REQUIRED, *, is_leaf: Callable[..., bool] | None = None
) -> PyTree:
    """A tree of PartitionSpecs with ``tree``'s structure: each leaf gets the first matching rule's spec.

    >>> from jax.sharding import PartitionSpec as P
    >>> params = [{'weights': 0, 'biases': 0}, {'weights': 0, 'biases': 0}]
    >>> specs = match_rules(params, [(r'^1/', P()), ('weights', P(None, 'model'))], default=P('model'))
    >>> [{name: spec_str(spec) for name, spec in layer.items()} for layer in specs]
    [{'weights': "P(None, 'model')", 'biases': "P('model')"}, {'weights': 'P()', 'biases': 'P()'}]

    A leaf in a flax box (``nn.with_partitioning``'s ``nn.Partitioned``, an nnx ``Variable``
    made with ``nnx.with_partitioning`` or ``out_sharding=``) whose path no rule matches
    (the leaf's, ``'params/Dense_0/kernel/value'``, or the box's, ``'params/Dense_0/kernel'``)
    gets the box's names as its spec: a rule overrides the annotation, the annotation the
    default. linen's ``LogicallyPartitioned`` names logical axes, not the mesh's, and counts
    as unannotated.

    Args:
        tree: Any pytree (arrays, ``jax.ShapeDtypeStruct``, :class:`treekit.ShapeDtype`, ...).
        rules: A list of ``(pattern, spec)`` pairs, in priority order (a list, not a dict, so
            that a dict always means a tree of specs).
            A pattern is a regular expression searched in the leaf's ``'a/b/0'`` path and in its
            ``keystr`` path ``['a']['b'][0]``. A spec is a ``PartitionSpec``, ``None``
            (replicated) or a tuple of axis names and ``None``.
        default: The spec of leaves no rule matches and no flax box annotates. Without it,
            such leaves raise.
        is_leaf: As in :func:`treekit.tree_flatten`.

    Returns:
        The tree of ``PartitionSpec``: ``tree``'s structure, but that a flax box of one leaf
        (an ``nn.Partitioned``, or an nnx ``Variable`` with sharding metadata) is replaced
        by its leaf's spec, as ``nn.get_partition_spec`` does (a prefix of ``tree``, which
        the functions here take).

    Raises:
        ShardingError: If no default is given and some leaves match no rule and carry no
            box's names; lists every one.
        TypeError: If a rule is not a ``(pattern, spec)`` pair.

    Warns:
        UnusedRuleWarning: Listing each rule that gave no leaf its spec.
    """
    compiled = _rules(rules)
    fallback = None if default is _REQUIRED else _as_spec(default, "default")
    paths = flatten(tree, is_leaf, with_path=True)[2]
    boxes, treedef, box_paths = flatten(tree, box_level(is_leaf), with_path=True)
    assert paths is not None and box_paths is not None
    found = [0] * len(compiled)  # leaves each rule matches
    won = [0] * len(compiled)  # leaves each rule gives its spec
    specs: list[Any] = []
    unmatched: list[str] = []
    for path, box, box_path in zip(paths, boxes, box_paths):
        forms = _path_forms(path)
        searched = forms if box_path == path else forms + _path_forms(box_path)  # a box's path too
        winner = None
        for k, (pattern, _) in enumerate(compiled):
            if any(pattern.search(form) for form in searched):
                found[k] += 1
                if winner is None:
                    winner = k
        names = annotation(box)
        if winner is not None:
            won[winner] += 1
            specs.append(compiled[winner][1])
        elif names is not None:
            specs.append(_as_spec(names, f"tree{forms[1]} (its box's names)"))
        elif fallback is not None:
            specs.append(fallback)
        else:
            unmatched.append(f"tree{forms[1]}: expected a path some rule matches, got none ({forms[0]!r})")
    if unmatched:
        raise ShardingError(unmatched)
    unused = [
        f"rules[{k}] {pattern.pattern!r} "
        + ("matches no leaf" if not found[k] else f"matches {found[k]} leaves, all taken by earlier rules")
        for k, (pattern, _) in enumerate(compiled)
        if not won[k]
    ]
    if unused:
        message = "sharding rules that give no leaf its spec: " + "; ".join(unused)
        warnings.warn(message, UnusedRuleWarning, stacklevel=2)
    return treedef.unflatten(specs)


def _spec_tree(tree: PyTree, specs: Any, mesh: Any = None) -> list[Any]:
    """The spec of each leaf of ``tree``: from rules, or a spec tree (``tree``'s structure or a prefix)."""
    if _is_rules(specs):
        specs = match_rules(tree, specs)
    pspec = _pspec()
    is_spec: Callable[[Any], bool] = lambda x: x is None or isinstance(x, pspec) or hasattr(x, "spec")  # noqa: E731
    full = broadcast(specs, tree, is_spec, "tree")
    out = []
    for x in flatten(tree, box_level())[1].flatten_up_to(full):  # (a None node of tree's stays one)
        if not is_spec(x):  # (a flax box of one leaf: the spec inside it)
            x = flatten(x, is_spec)[0][0]
        out.append(x.spec if hasattr(x, "spec") and not isinstance(x, pspec) else _as_spec(x, "specs"))
    return out


def _shape(x: Any) -> tuple[int, ...] | None:
    shape = getattr(x, "shape", None)
    if shape is None:
        return () if isinstance(x, (int, float, complex, bool)) else None
    return tuple(shape)


def _entries(n: int) -> str:
    return f"{n} entry" if n == 1 else f"{n} entries"


def _problems(path: KeyPath, shape: tuple[int, ...] | None, spec: Any, axes: Mapping[str, int]) -> Iterable[str]:
    where = f"tree{keystr(path)}"
    if shape is None:
        if len(spec):
            yield f"{where}: expected an array to shard by {spec_str(spec)}, got a leaf without a shape"
        return
    if len(spec) > len(shape):
        yield (
            f"{where}: expected a spec of at most {_entries(len(shape))} for shape {shape}, "
            f"got {spec_str(spec)} ({_entries(len(spec))})"
        )
        return
    seen: set[Any] = set()
    for dim, entry in enumerate(spec):
        names = entry_axes(entry)
        for name in names:
            if name not in axes:
                yield f"{where}: expected mesh axes among {list(axes)}, got {name!r} in {spec_str(spec)}"
                return
            if name in seen:
                yield f"{where}: expected each mesh axis at most once, got {name!r} twice in {spec_str(spec)}"
                return
            seen.add(name)
        parts = math.prod(axes[name] for name in names)
        if isinstance(shape[dim], int) and shape[dim] % parts:
            sizes = " x ".join(f"{name!r}={axes[name]}" for name in names)
            yield (
                f"{where}: expected dim {dim} (size {shape[dim]}) divisible by {parts} (mesh axes {sizes}), "
                f"got a remainder of {shape[dim] % parts} (shape {shape}, spec {spec_str(spec)})"
            )


def check_specs(tree: PyTree, specs: Any, mesh: Any) -> None:
    """Check that each leaf of ``tree`` can be sharded by its spec over ``mesh``.

    A spec must have no more entries than its leaf has dims, name only the mesh's axes (each at
    most once), and split each dim into equal parts: the dim's size divides by the product of
    its axes' sizes.

    >>> from jax.sharding import PartitionSpec as P
    >>> params = {'w': ShapeDtype((6, 8)), 'b': ShapeDtype((8,))}
    >>> check_specs(params, {'w': P('model', None), 'b': P('model', 'data')}, {'data': 2, 'model': 4})
    Traceback (most recent call last):
    ...
    treekit.sharding.ShardingError: 2 leaves can't be sharded so:
      tree['b']: expected a spec of at most 1 entry for shape (8,), got P('model', 'data') (2 entries)
      tree['w']: expected dim 0 (size 6) divisible by 4 (mesh axes 'model'=4), got a remainder of 2 (shape (6, 8), spec P('model', None))

    Args:
        tree: The tree to shard (arrays or anything with a ``shape``).
        specs: Rules (as :func:`match_rules` takes), or a tree of specs with ``tree``'s
            structure or a prefix of it (``None`` is replicated; ``NamedSharding`` leaves give
            their spec).
        mesh: A :class:`jax.sharding.Mesh`, or ``{axis name: size}``.

    Raises:
        ShardingError: Listing every leaf whose spec doesn't fit, with its key path.
        StructureMismatchError: If a spec tree is not a prefix of ``tree``.
    """  # noqa: E501 (the example's messages are one line each)
    axes = mesh_axes(mesh)
    spec_list = _spec_tree(tree, specs)
    leaves, _, paths = flatten(tree, with_path=True)
    assert paths is not None
    problems = [p for path, x, spec in zip(paths, leaves, spec_list) for p in _problems(path, _shape(x), spec, axes)]
    if problems:
        raise ShardingError(problems)


def device_bytes(tree: PyTree, specs: Any, mesh: Any) -> PyTree:
    """Bytes each leaf takes on one device when sharded by its spec over ``mesh`` (the most any
    device holds: a dim split ``n`` ways keeps ``ceil(size / n)`` entries per device).

    >>> from jax.sharding import PartitionSpec as P
    >>> params = {'w': ShapeDtype((8, 8), 'f32'), 'b': ShapeDtype((8,), 'f32')}
    >>> device_bytes(params, {'w': P('model'), 'b': None}, {'model': 4})
    {'w': 64, 'b': 32}

    Args:
        tree: Arrays (anything with ``shape`` and ``dtype``); other leaves count 0.
        specs: As :func:`check_specs` takes.
        mesh: As :func:`check_specs` takes.

    Returns:
        A tree of ints with ``tree``'s structure.
    """
    axes = mesh_axes(mesh)
    spec_list = _spec_tree(tree, specs)
    leaves, treedef, _ = flatten(tree)
    return treedef.unflatten([device_nbytes(x, spec, axes) or 0 for x, spec in zip(leaves, spec_list)])


def shardings(tree: PyTree, mesh: Any, rules_or_specs: Any = (), *, default: Any = _REQUIRED) -> PyTree:
    """The tree of :class:`jax.sharding.NamedSharding` for ``tree``, checked, for ``jax.jit``'s
    ``in_shardings`` / ``out_shardings`` or ``jax.device_put``.

    >>> import jax
    >>> from jax.sharding import PartitionSpec as P
    >>> mesh = jax.sharding.Mesh(jax.devices()[:1], ('model',))
    >>> shardings({'w': ShapeDtype((4, 4))}, mesh, [('w', P(None, 'model'))])['w'].spec == P(None, 'model')
    True

    Args:
        tree: The tree to shard.
        mesh: A :class:`jax.sharding.Mesh`; or, to plan without devices (for
            :func:`treekit.summary` and ``jax.eval_shape``), a ``jax.sharding.AbstractMesh`` or
            ``{axis name: size}``, which becomes one.
        rules_or_specs: Rules (as :func:`match_rules` takes), or a tree of specs with ``tree``'s
            structure or a prefix of it. Without it, each leaf's spec is its flax box's
            names, and a leaf without one is replicated (``PartitionSpec()``), as flax's
            ``nn.get_partition_spec`` has it.
        default: With rules: the spec of unmatched leaves (as in :func:`match_rules`);
            without rules, of leaves no box names (replicated unless given).

    Returns:
        A tree of ``NamedSharding`` with ``tree``'s structure, but that a flax box
        (``nn.Partitioned``, an nnx ``Variable``) of one leaf is replaced by its leaf's
        sharding, as flax's ``nn.get_sharding`` does: a prefix of ``tree``, which ``jax.jit``
        and ``jax.device_put`` take.

    Raises:
        ShardingError: If a leaf matches no rule (without ``default``) or its spec doesn't fit.
    """
    from jax.sharding import AbstractMesh, NamedSharding

    if isinstance(mesh, Mapping):
        axes = mesh_axes(mesh)
        mesh = AbstractMesh(tuple(axes.values()), tuple(axes))
    if _is_rules(rules_or_specs):
        if default is _REQUIRED and isinstance(rules_or_specs, (tuple, list)) and not rules_or_specs:
            import jax

            replicated: Any = jax.sharding.PartitionSpec
            default = replicated()  # no rules: a leaf no flax box names is replicated, as in flax
        rules_or_specs = match_rules(tree, rules_or_specs, default)
    check_specs(tree, rules_or_specs, mesh)
    specs = _spec_tree(tree, rules_or_specs)
    treedef = flatten(tree, box_level())[1]
    return treedef.unflatten([NamedSharding(mesh, spec) for spec in specs])


def shard(tree: PyTree, mesh: Any, rules_or_specs: Any = (), *, default: Any = _REQUIRED) -> PyTree:
    """Place ``tree``'s arrays on ``mesh``'s devices, each sharded by its spec (``jax.device_put``).

    >>> import jax, numpy as np
    >>> from jax.sharding import PartitionSpec as P
    >>> mesh = jax.sharding.Mesh(jax.devices()[:1], ('data',))
    >>> placed = shard({'x': np.ones((4, 2))}, mesh, [('x', P('data'))])
    >>> placed['x'].sharding.spec == P('data')
    True

    Args:
        tree: A tree of arrays.
        mesh: A :class:`jax.sharding.Mesh` (of devices).
        rules_or_specs: As :func:`shardings` takes.
        default: As :func:`shardings` takes.

    Returns:
        The tree of sharded ``jax.Array``.

    Raises:
        ShardingError: As :func:`shardings`.
        TypeError: If ``mesh`` has no devices (a mapping or an ``AbstractMesh``).
    """
    import jax

    if isinstance(mesh, Mapping) or not hasattr(mesh, "devices"):
        raise TypeError(f"mesh: expected a jax.sharding.Mesh of devices to place arrays on, got {mesh!r:.80}")
    return jax.device_put(tree, shardings(tree, mesh, rules_or_specs, default=default))

"""Param-tree helpers for model code: tree math, init, an MLP, optimizers, freezing, paths, stacking.

Import it as ``from treekit import params`` (``import treekit`` alone does not load numpy).
Everything works on numpy arrays without jax, and on jax arrays under ``jit`` and ``grad``:
functions use the array module the leaves come from.

>>> import numpy as np
>>> from treekit.params import adam, apply_updates, init_mlp_params, mse_loss, mse_loss_and_grad
>>> params = init_mlp_params([1, 8, 1], rng=0)
>>> x = np.linspace(-1, 1, 16)[:, None]
>>> opt = adam(0.05)
>>> state = opt.init(params)
>>> first = mse_loss(params, x, x**2)
>>> for _ in range(50):
...     loss, grads = mse_loss_and_grad(params, x, x**2)
...     updates, state = opt.update(grads, state, params)
...     params = apply_updates(params, updates)
>>> bool(mse_loss(params, x, x**2) < first / 10)
True

The tree math (:func:`~treekit.tree_add`, ...) lives in ``treekit._tree_math``, ``treekit._tree_reduce``
and ``treekit._tree_random``, the path functions in
``treekit._at`` and the optimizers in :mod:`treekit.optim`; they are all re-exported here.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from treekit._at import Path as Path
from treekit._at import tree_at as tree_at
from treekit._at import tree_get as tree_get
from treekit._at import tree_set as tree_set
from treekit._describe import is_inexact_dtype
from treekit._errors import StructureMismatchError, safe_keystr, safe_repr
from treekit._keys import keystr, plain_key
from treekit._ops import leafwise, tree_leaves_with_path, tree_map
from treekit._traverse import flatten
from treekit._tree_math import loaded_jax, namespace
from treekit._tree_math import tree_add as tree_add
from treekit._tree_math import tree_add_scale as tree_add_scale
from treekit._tree_math import tree_axpy as tree_axpy
from treekit._tree_math import tree_batch_shape as tree_batch_shape
from treekit._tree_math import tree_cast as tree_cast
from treekit._tree_math import tree_cast_like as tree_cast_like
from treekit._tree_math import tree_clip as tree_clip
from treekit._tree_math import tree_conj as tree_conj
from treekit._tree_math import tree_div as tree_div
from treekit._tree_math import tree_full_like as tree_full_like
from treekit._tree_math import tree_mul as tree_mul
from treekit._tree_math import tree_ones_like as tree_ones_like
from treekit._tree_math import tree_real as tree_real
from treekit._tree_math import tree_scale as tree_scale
from treekit._tree_math import tree_sub as tree_sub
from treekit._tree_math import tree_where as tree_where
from treekit._tree_math import tree_zeros_like as tree_zeros_like
from treekit._tree_random import generator_of
from treekit._tree_random import tree_random_like as tree_random_like
from treekit._tree_random import tree_split_key_like as tree_split_key_like
from treekit._tree_random import tree_unwrap_random_key_data as tree_unwrap_random_key_data
from treekit._tree_reduce import tree_allclose as tree_allclose
from treekit._tree_reduce import tree_bytes as tree_bytes
from treekit._tree_reduce import tree_dtype as tree_dtype
from treekit._tree_reduce import tree_max as tree_max
from treekit._tree_reduce import tree_min as tree_min
from treekit._tree_reduce import tree_norm as tree_norm
from treekit._tree_reduce import tree_size as tree_size
from treekit._tree_reduce import tree_sum as tree_sum
from treekit._tree_reduce import tree_vdot as tree_vdot
from treekit.optim import GradientTransformation as GradientTransformation
from treekit.optim import adam as adam
from treekit.optim import adamw as adamw
from treekit.optim import apply_updates as apply_updates
from treekit.optim import chain as chain
from treekit.optim import clip_by_global_norm as clip_by_global_norm
from treekit.optim import sgd as sgd
from treekit.optim import tree_bias_correction as tree_bias_correction
from treekit.optim import tree_map_params as tree_map_params
from treekit.optim import tree_update_infinity_moment as tree_update_infinity_moment
from treekit.optim import tree_update_moment as tree_update_moment
from treekit.optim import tree_update_moment_per_elem_norm as tree_update_moment_per_elem_norm

__all__ = [
    "GradientTransformation",
    "Path",
    "adam",
    "adamw",
    "apply_updates",
    "chain",
    "clip_by_global_norm",
    "combine",
    "flatten_dict",
    "init_mlp_params",
    "is_array",
    "is_inexact_array",
    "mlp_forward",
    "mse_loss",
    "mse_loss_and_grad",
    "partition",
    "sgd",
    "tree_add",
    "tree_add_scale",
    "tree_allclose",
    "tree_at",
    "tree_axpy",
    "tree_batch_shape",
    "tree_bias_correction",
    "tree_bytes",
    "tree_cast",
    "tree_cast_like",
    "tree_clip",
    "tree_conj",
    "tree_div",
    "tree_dtype",
    "tree_full_like",
    "tree_get",
    "tree_map_params",
    "tree_max",
    "tree_min",
    "tree_mul",
    "tree_norm",
    "tree_ones_like",
    "tree_random_like",
    "tree_real",
    "tree_scale",
    "tree_set",
    "tree_size",
    "tree_split_key_like",
    "tree_stack",
    "tree_sub",
    "tree_sum",
    "tree_unstack",
    "tree_unwrap_random_key_data",
    "tree_update_infinity_moment",
    "tree_update_moment",
    "tree_update_moment_per_elem_norm",
    "tree_vdot",
    "tree_where",
    "tree_zeros_like",
    "unflatten_dict",
]


# -- the MLP of the JAX pytree tutorial ----------------------------------------------------------
def _check_widths(layer_widths: Any) -> None:
    if isinstance(layer_widths, (str, bytes)) or not isinstance(layer_widths, Sequence):
        raise TypeError(f"layer_widths: expected a sequence of ints, got {type(layer_widths).__name__}")
    for i, width in enumerate(layer_widths):
        if not isinstance(width, int) or isinstance(width, bool):
            raise TypeError(f"layer_widths[{i}]: expected an int, got {type(width).__name__} {safe_repr(width, 40)}")
        if width < 1:
            raise ValueError(f"layer_widths[{i}]: expected an int >= 1, got {width}")
    if len(layer_widths) < 2:
        raise ValueError(f"layer_widths: expected at least 2 widths (input and output), got {len(layer_widths)}")


def init_mlp_params(layer_widths: Sequence[int], rng: Any) -> list[dict[str, Any]]:
    """MLP parameters as in the JAX pytree tutorial: one ``{'weights', 'biases'}`` dict per layer.

    ``weights`` of layer ``n_in -> n_out`` are ``normal(n_in, n_out) * sqrt(2 / n_in)`` (He
    initialization) and ``biases`` are ``ones(n_out)``.

    >>> params = init_mlp_params([1, 4, 1], rng=0)
    >>> [(layer['weights'].shape, layer['biases'].shape) for layer in params]
    [((1, 4), (4,)), ((4, 1), (1,))]

    Args:
        layer_widths: The widths of the layers, input first: ``[1, 128, 128, 1]``.
        rng: A ``numpy.random.Generator`` or an int seed (float64 numpy arrays), or a jax
            PRNG key (jax arrays in jax's default float dtype, one split key per layer).

    Returns:
        One ``{'weights': (n_in, n_out) array, 'biases': (n_out,) array}`` dict per layer.

    Raises:
        TypeError: If ``rng`` is none of those, or ``layer_widths`` is not a sequence of ints.
        ValueError: If ``layer_widths`` has fewer than 2 widths, or one below 1; the message
            names it (``layer_widths[0]: expected an int >= 1, got 0``).
    """
    _check_widths(layer_widths)
    pairs = list(itertools.pairwise(layer_widths))
    jax = loaded_jax()
    if jax is not None and isinstance(rng, jax.Array):
        keys = jax.random.split(rng, len(pairs))
        return [
            {
                "weights": jax.random.normal(key, (n_in, n_out)) * math.sqrt(2 / n_in),
                "biases": jax.numpy.ones((n_out,)),
            }
            for key, (n_in, n_out) in zip(keys, pairs)
        ]
    gen = generator_of(rng, "rng")
    return [
        {"weights": gen.normal(size=(n_in, n_out)) * np.sqrt(2 / n_in), "biases": np.ones(n_out)}
        for n_in, n_out in pairs
    ]


def mlp_forward(params: Sequence[dict[str, Any]], x: Any) -> Any:
    """The tutorial MLP: ``relu(x @ weights + biases)`` per hidden layer, linear last layer.

    >>> import numpy as np
    >>> params = [{'weights': np.array([[1.0, -1.0]]), 'biases': np.zeros(2)},
    ...           {'weights': np.array([[1.0], [1.0]]), 'biases': np.array([0.5])}]
    >>> mlp_forward(params, np.array([[2.0], [-3.0]]))
    array([[2.5],
           [3.5]])

    Args:
        params: As :func:`init_mlp_params` makes them.
        x: Inputs, shape ``(batch, layer_widths[0])``.

    Returns:
        Outputs, shape ``(batch, layer_widths[-1])``.

    Raises:
        ValueError: If ``params`` is empty, or a layer's arrays do not fit ``x`` or the layer
            before (the message names the layer: ``params[1]: expected weights of shape
            (4, n) ...``).
        TypeError: If a layer is not a dict with ``'weights'`` and ``'biases'``.
    """
    if len(params) == 0:
        raise ValueError("params: expected at least one layer, got none")
    last = len(params) - 1
    for k, layer in enumerate(params):
        try:
            weights, biases = layer["weights"], layer["biases"]
        except (KeyError, TypeError, IndexError):
            raise TypeError(
                f"params[{k}]: expected a dict with keys 'weights' and 'biases', got {safe_repr(layer, 60)}"
            ) from None
        try:
            z = x @ weights + biases
        except (ValueError, TypeError) as exc:
            raise type(exc)(
                f"params[{k}]: expected weights of shape ({_dim(x, -1)}, n) and biases of shape (n,) "
                f"for inputs of shape {_shape_of(x)}, got weights {_shape_of(weights)} and biases "
                f"{_shape_of(biases)}"
            ) from exc
        x = z if k == last else namespace(z).maximum(z, 0)
    return x


def _shape_of(x: Any) -> str:
    shape = getattr(x, "shape", None)
    return str(tuple(shape)) if isinstance(shape, tuple) else f"{type(x).__name__} (no shape)"


def _dim(x: Any, axis: int) -> str:
    shape = getattr(x, "shape", None)
    return str(shape[axis]) if isinstance(shape, tuple) and shape else "?"


def mse_loss(params: Sequence[dict[str, Any]], x: Any, y: Any) -> Any:
    """The mean squared error of :func:`mlp_forward` on inputs ``x`` against targets ``y``.

    >>> import numpy as np
    >>> params = [{'weights': np.array([[2.0]]), 'biases': np.array([0.0])}]
    >>> float(mse_loss(params, np.array([[1.0], [2.0]]), np.array([[2.0], [2.0]])))
    2.0

    Args:
        params: As :func:`init_mlp_params` makes them.
        x: Inputs, shape ``(batch, layer_widths[0])``.
        y: Targets, of the outputs' shape.

    Returns:
        The mean of the squared errors, a 0-d array.
    """
    error = mlp_forward(params, x) - y
    return namespace(error).mean(error**2)


def mse_loss_and_grad(params: Sequence[dict[str, Any]], x: Any, y: Any) -> tuple[Any, list[dict[str, Any]]]:
    """:func:`mse_loss` and its gradient in ``params``, by a hand-written backward pass.

    What ``jax.value_and_grad(mse_loss)(params, x, y)`` gives, for training without jax
    (the ``relu`` gradient at exactly 0 is 0, as ``jax.nn.relu``'s).

    >>> import numpy as np
    >>> params = [{'weights': np.array([[2.0]]), 'biases': np.array([0.0])}]
    >>> loss, grads = mse_loss_and_grad(params, np.array([[1.0]]), np.array([[3.0]]))
    >>> float(loss), grads
    (1.0, [{'weights': array([[-2.]]), 'biases': array([-2.])}])

    Args:
        params: As :func:`init_mlp_params` makes them.
        x: Inputs, shape ``(batch, layer_widths[0])``.
        y: Targets, of the outputs' shape.

    Returns:
        ``(loss, grads)``: the loss as :func:`mse_loss` gives it, and a tree of ``params``'
        structure and dtypes holding its gradient.
    """
    inputs = [x]
    for layer in params[:-1]:
        z = inputs[-1] @ layer["weights"] + layer["biases"]
        inputs.append(namespace(z).maximum(z, 0))
    out = inputs[-1] @ params[-1]["weights"] + params[-1]["biases"]
    error = out - y
    xp = namespace(error)
    grads: list[dict[str, Any]] = []
    delta = 2 * error / error.size  # d loss / d out
    for k in range(len(params) - 1, -1, -1):
        grads.append({"weights": inputs[k].T @ delta, "biases": delta.sum(axis=0)})
        if k:
            delta = (delta @ params[k]["weights"].T) * (inputs[k] > 0)
    grads.reverse()
    return xp.mean(error**2), grads


# -- filters for partition ---------------------------------------------------------------------------
def is_array(x: Any) -> bool:
    """Whether ``x`` is an array that holds data: a numpy array or scalar, a jax array (or a
    tracer under ``jit``), a torch tensor; not a Python number or a ``ShapeDtypeStruct`` (as
    equinox's ``is_array``). A filter for :func:`partition`.

    >>> import numpy as np
    >>> is_array(np.zeros(3)), is_array(np.float32(1)), is_array(1.0), is_array('relu')
    (True, True, False, False)
    >>> partition({'w': np.ones(2), 'act': 'relu'}, is_array)
    ({'w': array([1., 1.]), 'act': None}, {'w': None, 'act': 'relu'})

    Args:
        x: Any object.

    Returns:
        ``True`` if ``x`` has a ``shape``, a ``dtype`` and ``__array__``.
    """
    return hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "__array__")



def is_inexact_array(x: Any) -> bool:
    """Whether ``x`` is an array (:func:`is_array`) of floating-point or complex numbers: the
    leaves a gradient is taken for (as equinox's ``is_inexact_array``). A filter for
    :func:`partition`, to train the float params and keep int counters and masks out.

    >>> import numpy as np
    >>> is_inexact_array(np.zeros(2, np.float32)), is_inexact_array(np.zeros(2, np.int32)), is_inexact_array(0.5)
    (True, False, False)
    >>> params = {'w': np.ones(2), 'step': np.array(3)}
    >>> trainable, static = partition(params, is_inexact_array)
    >>> trainable, static
    ({'w': array([1., 1.]), 'step': None}, {'w': None, 'step': array(3)})

    Args:
        x: Any object.

    Returns:
        ``True`` for arrays of ``float*``, ``bfloat16`` and ``complex*`` dtypes.
    """
    return is_array(x) and is_inexact_dtype(x.dtype)


# -- freezing ------------------------------------------------------------------------------------
def _is_none(x: Any) -> bool:
    return x is None


def partition(tree: Any, predicate_or_mask: Any) -> tuple[Any, Any]:
    """Split ``tree`` into the selected leaves and the rest, ``None`` in place of the others.

    Train only the selected part: differentiate with respect to ``selected`` through
    ``combine(selected, rest)``; ``rest`` gets no gradient (``None`` is a node without
    leaves, so ``jax.grad`` and the optimizers skip it), as equinox's ``partition``.

    >>> params = [{'w': 1.0, 'b': 0.0}, {'w': 2.0, 'b': 0.0}]
    >>> trained, frozen = partition(params, [False, True])
    >>> trained
    [{'w': None, 'b': None}, {'w': 2.0, 'b': 0.0}]
    >>> frozen
    [{'w': 1.0, 'b': 0.0}, {'w': None, 'b': None}]
    >>> combine(trained, frozen) == params
    True
    >>> partition({'w': 3.0, 'b': -1.0}, lambda x: x > 0)
    ({'w': 3.0, 'b': None}, {'w': None, 'b': -1.0})

    Args:
        tree: Any pytree.
        predicate_or_mask: A function ``leaf -> bool`` (:func:`is_array` and
            :func:`is_inexact_array` are two), or a tree of bools whose structure
            is a prefix of ``tree``'s: a ``True`` selects the whole subtree under it. Masks
            by key path come from ``tree_map_with_path(lambda path, _: ..., tree)``.

    Returns:
        ``(selected, rest)``: two trees of ``tree``'s structure, with ``None`` at the leaves
        the other one holds.

    Raises:
        StructureMismatchError: If ``tree`` does not extend the mask's structure; labelled
            ``tree``.
    """
    if callable(predicate_or_mask):
        leaves, treedef, _ = flatten(tree)
        picks = leafwise(
            lambda x: bool(predicate_or_mask(x)),
            [leaves],
            lambda i: tree_leaves_with_path(tree)[i][0],
            "partition: predicate_or_mask|the leaf of tree",
        )
        subtrees = leaves
    else:
        picks, treedef, _ = flatten(predicate_or_mask)
        picks = [bool(m) for m in picks]
        subtrees = treedef._walk(tree, "tree")
    selected = [sub if pick else tree_map(_none, sub) for pick, sub in zip(picks, subtrees)]
    rest = [tree_map(_none, sub) if pick else sub for pick, sub in zip(picks, subtrees)]
    return treedef._build(selected), treedef._build(rest)


def _none(_: Any) -> None:
    return None


def combine(*trees: Any) -> Any:
    """Merge trees that hold ``None`` in place of leaves: each leaf from the first tree that
    has one there (the inverse of :func:`partition`, as equinox's ``combine``).

    >>> combine({'w': None, 'b': 0.5}, {'w': 2.0, 'b': None})
    {'w': 2.0, 'b': 0.5}

    Args:
        *trees: Trees of one structure, except for ``None`` in place of leaves (or of whole
            subtrees).

    Returns:
        A tree of the first tree's structure, ``None`` replaced from the later trees.

    Raises:
        StructureMismatchError: If the trees differ other than by ``None`` at leaves;
            labelled ``rest[k]`` for the ``k + 1``-th tree.
    """
    return tree_map(_first_not_none, *trees, is_leaf=_is_none)


def _first_not_none(*xs: Any) -> Any:
    return next((x for x in xs if x is not None), None)


# -- stacking --------------------------------------------------------------------------------------
def tree_stack(trees: Sequence[Any]) -> Any:
    """One tree whose leaves stack the matching leaves of ``trees`` along a new axis 0.

    Batches a list of example dicts into one tree of arrays, or replicates params per device.

    >>> import numpy as np
    >>> tree_stack([{'x': np.array([1, 2]), 'y': 0}, {'x': np.array([3, 4]), 'y': 1}])
    {'x': array([[1, 2],
           [3, 4]]), 'y': array([0, 1])}

    Args:
        trees: A list or tuple of trees of one structure whose matching leaves have one
            shape (a tuple subclass, such as a namedtuple, is taken as a sequence too).

    Returns:
        A tree of that structure whose leaves have a new leading axis of length
        ``len(trees)`` (``jax.numpy.stack`` for jax leaves, ``numpy.stack`` otherwise).

    Raises:
        TypeError: If ``trees`` is not a list or tuple (a dict, a single tree, a generator:
            ``trees: expected a list or tuple of trees, got dict``).
        ValueError: If ``trees`` is empty, or leaves at one key path have different shapes
            (``trees[1]['x']: expected a leaf of shape (2,) (as trees[0]['x']), got (3,)``).
        StructureMismatchError: If a tree differs from the first; labelled ``trees[k]``, the
            message names the key path of the first difference.
    """
    if not isinstance(trees, (list, tuple)):
        got = "None" if trees is None else type(trees).__name__
        raise TypeError(f"trees: expected a list or tuple of trees, got {got}")
    if not trees:
        raise ValueError("trees: expected at least one tree, got an empty sequence")
    first, treedef, _ = flatten(trees[0], label="trees[0]")
    columns = [first] + [treedef._walk(t, f"trees[{k}]", strict=True) for k, t in enumerate(trees) if k]
    stacked = []
    for j, xs in enumerate(zip(*columns)):
        try:
            stacked.append(namespace(*xs).stack(xs))
        except (ValueError, TypeError) as exc:
            raise _stack_error(trees[0], j, xs, exc) from exc
    return treedef._build(stacked)


def _stack_error(tree: Any, j: int, xs: tuple[Any, ...], exc: Exception) -> Exception:
    """The error for leaves ``xs`` (leaf ``j`` of each tree) that do not stack: the first tree
    whose leaf's shape differs from ``trees[0]``'s, named by its key path."""
    path = keystr(tree_leaves_with_path(tree)[j][0])
    shapes = [_shape_of(x) for x in xs]
    k = next((k for k, shape in enumerate(shapes) if shape != shapes[0]), None)
    if k is None:
        return type(exc)(f"trees[*]{path}: expected leaves that stack, got {shapes[0]}: {exc}")
    return type(exc)(f"trees[{k}]{path}: expected a leaf of shape {shapes[0]} (as trees[0]{path}), got {shapes[k]}")


def tree_unstack(tree: Any) -> list[Any]:
    """The trees ``tree_stack`` was given: one tree per index along the leaves' axis 0.

    >>> import numpy as np
    >>> tree_unstack({'x': np.array([[1, 2], [3, 4]]), 'y': np.array([[0], [1]])})
    [{'x': array([1, 2]), 'y': array([0])}, {'x': array([3, 4]), 'y': array([1])}]

    Args:
        tree: A tree whose leaves are arrays with one leading axis length.

    Returns:
        A list of trees of ``tree``'s structure, one per index along that axis.

    Raises:
        ValueError: If ``tree`` has no leaves.
        StructureMismatchError: If a leaf has no axis 0, or one of another length than the
            first leaf's; the message names its key path.
    """
    leaves, treedef, _ = flatten(tree)
    if not leaves:
        raise ValueError("tree: expected at least one leaf to unstack, got none")
    lengths = [np.shape(x)[0] if np.ndim(x) else None for x in leaves]
    if lengths[0] is None:  # checked first: the first leaf's length is what the others must have
        _, _, paths = flatten(tree, with_path=True)
        assert paths is not None
        raise StructureMismatchError("tree", paths[0], "an array with a leading axis", "shape ()")
    if any(n != lengths[0] for n in lengths):
        _, _, paths = flatten(tree, with_path=True)
        assert paths is not None
        k = next(k for k, n in enumerate(lengths) if n != lengths[0])
        got = f"shape {tuple(np.shape(leaves[k]))}"
        raise StructureMismatchError("tree", paths[k], f"an array with leading axis of length {lengths[0]}", got)
    return [treedef._build([x[i] for x in leaves]) for i in range(lengths[0])]


# -- flat dicts, for checkpoint files --------------------------------------------------------------
def _plain(entry: Any) -> Any:
    value = plain_key(entry)
    return str(entry) if value is entry else value


def _check_sep(sep: Any) -> None:
    if sep is not None and not isinstance(sep, str):
        raise TypeError(f"sep: expected a str or None, got {type(sep).__name__}")
    if sep == "":
        raise ValueError("sep: expected a non-empty str or None, got ''\npass sep=None for tuple keys")


def flatten_dict(tree: Any, sep: str | None = "/") -> dict[Any, Any]:
    """A flat dict from each leaf's key path, joined by ``sep``, to the leaf.

    The keys are ``keystr(path, simple=True, separator=sep)`` (``'0/weights'``); with
    ``sep=None`` they are tuples of the raw keys (``(0, 'weights')``), as flax's
    ``flatten_dict`` gives. Any pytree works, not only nested dicts.

    >>> flatten_dict([{'weights': 1, 'biases': 2}])
    {'0/biases': 2, '0/weights': 1}
    >>> flatten_dict({'a': {'b': 1}}, sep=None)
    {('a', 'b'): 1}

    A flat key must split back on ``sep`` into its path's keys, so that :func:`unflatten_dict`
    rebuilds what was flattened. A key holding ``sep`` (haiku's module names, ``'mlp/~/linear_0'``)
    is refused rather than escaped: an escaped key would be a name no other tool reads (``np.load``,
    flax, orbax), and no longer a path ``tree_get(tree, key, sep=sep)`` takes. Pass ``sep=None``
    or a separator none of the keys hold:

    >>> params = {'mlp/~/linear_0': {'w': 1}}
    >>> flatten_dict(params)
    Traceback (most recent call last):
    ...
    ValueError: tree['mlp/~/linear_0']: expected a key without the separator '/', got 'mlp/~/linear_0'
    (unflatten_dict would split 'mlp/~/linear_0/w' into 'mlp', '~', 'linear_0', 'w')
    pass sep=None for tuple keys, or a separator none of the keys hold, e.g. sep='.'
    >>> flatten_dict(params, sep='.')
    {'mlp/~/linear_0.w': 1}

    For the same reason, two keys of one node with the same text (``0`` and ``'0'``) are refused:
    :func:`unflatten_dict` would merge them. So ``unflatten_dict(flatten_dict(t, sep), sep) == t``
    for every tree ``t`` of nested dicts with ``str`` keys that ``flatten_dict`` accepts, keys
    in sorted (leaf) order; only subtrees without leaves (``{}``, ``[]``, ``None``), which have
    no flat key, do not come back. Other nodes come back as dicts and other keys as their text
    (a list's ``0`` as ``'0'``); with ``sep=None`` the keys stay as they are.

    Args:
        tree: Any pytree.
        sep: Joins the keys of a path, a non-empty string; ``None`` for tuple keys.

    Returns:
        A dict from flat key to leaf, in leaf order.

    Raises:
        ValueError: If a key holds ``sep`` (or, for a separator of 2 or more characters, its
            flat key does not split back into the path's keys), two leaves get the same flat
            key, or two keys of one node the same text; the message names the key path. Also
            if ``sep`` is ``''``.
        TypeError: If ``sep`` is neither a string nor ``None``.
    """
    _check_sep(sep)
    leaves, _, paths = flatten(tree, with_path=True)
    assert paths is not None
    out: dict[Any, Any] = {}
    texts: _TextTrie = {}  # the keys' texts so far, as unflatten_dict will nest them
    for path, leaf in zip(paths, leaves):
        key: Any = tuple(_plain(e) for e in path) if sep is None else keystr(path, simple=True, separator=sep)
        if key in out:
            raise ValueError(f"tree{keystr(path)}: expected a unique flat key, got {key!r} twice (sep={sep!r})")
        if sep is not None and path:
            _check_flat_key(paths, path, key, sep, texts)
        out[key] = leaf
    return out


_TextTrie = dict[str, tuple[Any, "_TextTrie"]]  # text -> (the first key entry with that text, its trie)
_SEP_HINT = "pass sep=None for tuple keys, or a separator none of the keys hold"


def _check_flat_key(paths: list[Any], path: Any, key: str, sep: str, texts: _TextTrie) -> None:
    """Raise unless ``key`` splits on ``sep`` into the texts of ``path``'s entries, and no entry's
    text is that of another entry of the same node (``texts`` holds the paths so far)."""
    parts = key.split(sep)
    if len(parts) != len(path) or (len(sep) > 1 and parts != [keystr((e,), simple=True) for e in path]):
        raise _held_sep(paths, path, sep)
    node = texts
    for depth, (part, entry) in enumerate(zip(parts, path)):
        seen = node.get(part)
        if seen is None:
            seen = node[part] = (entry, {})
        elif seen[0] is not entry and seen[0] != entry:
            raise ValueError(
                f"tree{safe_keystr(path[: depth + 1])}: expected a key whose text no other key of its node has, "
                f"got {part!r}, the text of tree{safe_keystr((*path[:depth], seen[0]))} too "
                "(unflatten_dict would merge the two)\npass sep=None for tuple keys, which keep each key as it is"
            )
        node = seen[1]


def _held_sep(paths: list[Any], path: Any, sep: str) -> ValueError:
    """The error for a leaf at ``path`` whose flat key does not split back on ``sep``."""
    parts = [keystr((e,), simple=True) for e in path]
    flat = sep.join(parts)
    i = next((i for i, part in enumerate(parts) if sep in part), None)
    if i is None:  # a separator of 2 or more characters, straddling two keys
        head = f"tree{safe_keystr(path)}: expected keys that {sep!r} joins and splits back, got {_reprs(parts)}"
    else:
        head = f"tree{safe_keystr(path[: i + 1])}: expected a key without the separator {sep!r}, got {parts[i]!r}"
    free = next((c for c in "/.:|" if not any(c in keystr((e,), simple=True) for p in paths for e in p)), None)
    hint = _SEP_HINT if free is None else f"{_SEP_HINT}, e.g. sep={free!r}"
    return ValueError(f"{head} (unflatten_dict would split {flat!r} into {_reprs(flat.split(sep))})\n{hint}")


def _reprs(texts: list[str]) -> str:
    return ", ".join(map(repr, texts))


def unflatten_dict(flat: dict[Any, Any], sep: str | None = "/") -> dict[Any, Any]:
    """Nested dicts from a flat dict of :func:`flatten_dict` (flax's ``unflatten_dict``).

    Every key is split on ``sep``: a key cannot say that a part was meant whole. That is why
    :func:`flatten_dict` refuses keys holding ``sep``, so that
    ``unflatten_dict(flatten_dict(t, sep), sep) == t`` for every tree of nested dicts with
    ``str`` keys it accepts (sub-dicts without leaves aside). Only dicts come back: a list's
    items come back under their indices as keys (``'0'``, or ``0`` with ``sep=None``). To
    restore another structure exactly, use ``tree_unflatten(tree_structure(like), flat.values())``.
    Values are never looked into or changed: a dict value is a leaf here, and a key under it
    clashes with it.

    >>> unflatten_dict({'a/b': 1, 'a/c': 2, 'd': 3})
    {'a': {'b': 1, 'c': 2}, 'd': 3}
    >>> unflatten_dict({'mlp/~/linear_0.w': 1}, sep='.')
    {'mlp/~/linear_0': {'w': 1}}

    Args:
        flat: A dict from flat keys (strings joined by ``sep``, or tuples) to leaves.
        sep: What :func:`flatten_dict` joined the keys with; ``None`` for tuple keys.

    Returns:
        Nested dicts, in the order the keys first appear.

    Raises:
        TypeError: If ``flat`` is not a dict, ``sep`` not a string or ``None``, or a key not a
            string (a tuple with ``sep=None``).
        ValueError: If a key is both a leaf and a prefix of another key (the message names both),
            a tuple key is empty, or ``sep`` is ``''``.
    """
    if not isinstance(flat, dict):
        raise TypeError(f"flat: expected a dict, got {type(flat).__name__}")
    _check_sep(sep)
    out: dict[Any, Any] = {}
    made = {id(out)}  # the dicts made here: the only ones a key may go into
    for key, value in flat.items():
        parts = _flat_key_parts(key, sep)
        node = out
        for depth, part in enumerate(parts[:-1]):
            if part not in node:
                node[part] = {}
                made.add(id(node[part]))
            elif id(node[part]) not in made:
                other = _flat_key_at(flat, parts[: depth + 1], sep)
                raise ValueError(
                    f"flat[{key!r}]: expected a dict at {parts[: depth + 1]!r}, got a leaf "
                    f"(key {other!r} clashes with key {key!r})"
                )
            node = node[part]
        if parts[-1] in node:
            other = _flat_key_under(flat, parts, sep)
            raise ValueError(
                f"flat[{key!r}]: expected a leaf, got a dict of other keys under it "
                f"(key {key!r} clashes with key {other!r})"
            )
        node[parts[-1]] = value
    return out


def _flat_key_parts(key: Any, sep: str | None) -> tuple[Any, ...]:
    if sep is None:
        if not isinstance(key, tuple):
            raise TypeError(f"flat[{key!r}]: expected a tuple key (sep=None), got {type(key).__name__}")
        if not key:
            raise ValueError("flat[()]: expected a tuple of one or more keys, got ()")
        return key
    if not isinstance(key, str):
        raise TypeError(f"flat[{key!r}]: expected a str key (sep={sep!r}), got {type(key).__name__}")
    return tuple(key.split(sep))


def _flat_key_at(flat: dict[Any, Any], parts: tuple[Any, ...], sep: str | None) -> Any:
    """The key of ``flat`` whose parts are ``parts`` (for a clash message; run only on failure)."""
    return next(k for k in flat if _flat_key_parts(k, sep) == parts)


def _flat_key_under(flat: dict[Any, Any], parts: tuple[Any, ...], sep: str | None) -> Any:
    """The first key of ``flat`` that goes under ``parts`` (for a clash message; run only on failure)."""
    n = len(parts)
    return next(k for k in flat if len(_flat_key_parts(k, sep)) > n and _flat_key_parts(k, sep)[:n] == parts)

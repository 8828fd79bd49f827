"""The MLP of the JAX pytree tutorial, as plain lists of dicts: init, forward, mean squared error and its gradient."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from treekit.core import safe_repr, shape_text
from treekit.ops import generator_of, loaded_jax, namespace


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
                f"for inputs of shape {shape_text(x)}, got weights {shape_text(weights)} and biases "
                f"{shape_text(biases)}"
            ) from exc
        x = z if k == last else namespace(z).maximum(z, 0)
    return x


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

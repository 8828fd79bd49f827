"""Random trees: draws shaped like a tree, and jax PRNG keys split or unwrapped to match one.

:func:`tree_random_like` takes numpy seeds and Generators as well as jax keys;
:func:`tree_split_key_like` and :func:`tree_unwrap_random_key_data` are about jax keys and
need jax (they import it, and say so if it is missing). Public through :mod:`treekit.params`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np

from treekit.core import Caller, flatten, keystr
from treekit.ops._ops import leafwise, tree_map
from treekit.ops._tree_math import loaded_jax

__all__ = ["tree_random_like", "tree_split_key_like", "tree_unwrap_random_key_data"]


def generator_of(rng: Any, label: str) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return np.random.default_rng(int(rng))
    raise TypeError(
        f"{label}: expected a numpy.random.Generator, an int seed or a jax PRNG key, got {type(rng).__name__}"
    )



def _path_words(path: Any) -> list[int]:
    digest = hashlib.blake2b(keystr(path).encode(), digest_size=8).digest()
    return [int.from_bytes(digest[:4], "little"), int.from_bytes(digest[4:], "little")]


def tree_random_like(
    rng_key: Any,
    target_tree: Any,
    sampler: str | Callable[..., Any] = "normal",
    dtype: Any = None,
    *,
    by_path: bool = False,
) -> Any:
    """A tree of random arrays shaped like ``target_tree``'s leaves (optax's ``tree_random_like``).

    As optax's, the key is split into one key per leaf by position
    (:func:`treekit.params.tree_split_key_like`), so with a jax key the draws equal optax's. With
    ``by_path=True`` each leaf's draw depends only on the key and that leaf's key path, so
    adding, removing or reordering other leaves leaves a leaf's values unchanged:

    >>> import numpy as np
    >>> a = tree_random_like(0, {'w': np.zeros(2)}, by_path=True)
    >>> b = tree_random_like(0, {'v': np.zeros(3), 'w': np.zeros(2)}, by_path=True)
    >>> bool((a['w'] == b['w']).all())
    True
    >>> tree_random_like(0, {'w': np.zeros((2, 3), np.float32)})['w'].dtype
    dtype('float32')

    Args:
        rng_key: A jax PRNG key, an int seed, or a ``numpy.random.Generator`` (one number is
            drawn from it per call, so successive calls differ).
        target_tree: The tree whose structure and leaf shapes the result has.
        sampler: ``'normal'`` (standard normal, optax's ``jax.random.normal``), ``'uniform'``
            (on ``[0, 1)``), or a function ``sampler(key, shape, dtype)`` called per leaf with
            a jax key or a numpy ``Generator`` (``jax.random.normal`` fits, as in optax).
        dtype: The dtype of every leaf; ``None`` keeps each leaf's own.
        by_path: Derive each leaf's key from its key path (``fold_in`` of a hash of it)
            rather than from its position.

    Returns:
        A tree of ``target_tree``'s structure with an array of the leaf's shape at each leaf:
        numpy arrays for a seed or Generator, jax arrays for a jax key.

    Raises:
        TypeError: If ``rng_key`` is not a key, seed or Generator.
        ValueError: If ``sampler`` is an unknown name.
    """
    if not callable(sampler) and sampler not in ("normal", "uniform"):
        raise ValueError(f"sampler: expected 'normal', 'uniform' or a function, got {sampler!r}")
    leaves, treedef, paths = flatten(target_tree, with_path=True)
    assert paths is not None
    words = [_path_words(path) for path in paths] if by_path else [[i] for i in range(len(leaves))]
    jax = loaded_jax()
    if jax is not None and isinstance(rng_key, jax.Array):
        if by_path:
            keys = []
            for leaf_words in words:
                key = rng_key
                for word in leaf_words:
                    key = jax.random.fold_in(key, word)
                keys.append(key)
        else:  # optax's keys, one per leaf by position
            keys = list(jax.random.split(rng_key, len(leaves))) if leaves else []

        def draw_jax(key: Any, x: Any) -> Any:
            kind = dtype if dtype is not None else jax.numpy.asarray(x).dtype
            if callable(sampler):
                return sampler(key, np.shape(x), kind)
            return (jax.random.normal if sampler == "normal" else jax.random.uniform)(key, np.shape(x), kind)

        return treedef._build(leafwise(draw_jax, [keys, leaves], paths.__getitem__, _DRAWING))
    if isinstance(rng_key, np.random.Generator):
        base = int(rng_key.integers(2**63))
    else:
        base = int(generator_of(rng_key, "rng_key").integers(2**63))

    def draw(leaf_words: Any, x: Any) -> Any:
        gen = np.random.default_rng([base, *leaf_words])
        kind = dtype if dtype is not None else np.asarray(x).dtype
        if callable(sampler):
            return sampler(gen, np.shape(x), kind)
        values = gen.standard_normal(np.shape(x)) if sampler == "normal" else gen.random(np.shape(x))
        return values.astype(kind)

    return treedef._build(leafwise(draw, [words, leaves], paths.__getitem__, _DRAWING))


_DRAWING = Caller("tree_random_like: drawing the leaf", "sampler on the shape and dtype of target_tree's leaf")


def _jax(function: str) -> Any:
    try:
        import jax
    except ImportError as error:
        raise ImportError(f"{function} needs jax, which is not installed (pip install jax)") from error
    return jax


def tree_split_key_like(rng_key: Any, target_tree: Any) -> Any:
    """A tree of ``target_tree``'s structure holding one new jax PRNG key per leaf (optax's).

    The keys are ``jax.random.split(rng_key, number of leaves)``, in leaf order, so the result
    equals optax's. Needs jax.

    >>> import jax
    >>> keys = tree_split_key_like(jax.random.key(0), {'w': 1.0, 'b': 2.0})
    >>> sorted(keys), keys['w'].shape
    (['b', 'w'], ())

    Args:
        rng_key: A jax PRNG key (``jax.random.key`` or ``jax.random.PRNGKey``).
        target_tree: The tree whose structure the result has.

    Returns:
        A tree of ``target_tree``'s structure with a key at each leaf.

    Raises:
        ImportError: If jax is not installed.
        TypeError: If ``rng_key`` is not a jax array.
    """
    jax = _jax("tree_split_key_like")
    if not isinstance(rng_key, jax.Array):
        raise TypeError(f"rng_key: expected a jax PRNG key, got {type(rng_key).__name__}")
    leaves, treedef, _ = flatten(target_tree)
    return treedef._build(list(jax.random.split(rng_key, len(leaves))))


def tree_unwrap_random_key_data(input_tree: Any) -> Any:
    """Every typed jax PRNG key leaf (``jax.random.key``) replaced by its ``key_data``, the
    other leaves kept (optax's); for comparing trees that hold keys as numbers.

    A tree can only hold typed keys once jax is imported, so without jax this returns a copy
    of the tree's structure with the same leaves.

    >>> tree_unwrap_random_key_data({'step': 3})
    {'step': 3}

    Args:
        input_tree: Any tree.

    Returns:
        A tree of ``input_tree``'s structure.
    """
    jax = loaded_jax()

    def unwrap(x: Any) -> Any:
        if jax is not None and isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            return jax.random.key_data(x)
        return x

    return tree_map(unwrap, input_tree)

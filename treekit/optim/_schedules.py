"""The schedules of treekit.schedules (its docstring says how they count): functions of the step count."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from treekit.ops import namespace

# The public names are listed once, in treekit.schedules's __all__.

Schedule = Callable[[Any], Any]
"""A function of the step count (an int32 scalar) giving a value, such as a learning rate."""


def constant_schedule(value: Any) -> Schedule:
    """The schedule that is ``value`` at every step (optax's ``constant_schedule``).

    >>> constant_schedule(0.1)(1000)
    0.1

    Args:
        value: The value.

    Returns:
        The schedule.
    """
    return lambda count: value


def linear_schedule(init_value: Any, end_value: Any, transition_steps: int, transition_begin: int = 0) -> Schedule:
    """From ``init_value`` to ``end_value`` in a straight line over ``transition_steps`` steps,
    starting at step ``transition_begin``; constant before and after (optax's).

    >>> schedule = linear_schedule(1.0, 0.0, transition_steps=4)
    >>> [float(schedule(step)) for step in range(6)]
    [1.0, 0.75, 0.5, 0.25, 0.0, 0.0]

    Args:
        init_value: The value up to ``transition_begin``.
        end_value: The value from ``transition_begin + transition_steps`` on.
        transition_steps: How many steps the change takes; ``<= 0`` gives the constant
            ``init_value``, as in optax.
        transition_begin: The step at which the change starts (a negative one counts as 0).

    Returns:
        The schedule.
    """
    if transition_steps <= 0:
        return lambda count: init_value
    transition_begin = max(transition_begin, 0)

    def schedule(count: Any) -> Any:
        count = namespace(count).clip(count - transition_begin, 0, transition_steps)
        frac = 1 - count / transition_steps
        return (init_value - end_value) * frac**1 + end_value

    return schedule


def cosine_decay_schedule(init_value: Any, decay_steps: int, alpha: Any = 0.0, exponent: Any = 1.0) -> Schedule:
    """Half a cosine from ``init_value`` down to ``alpha * init_value`` over ``decay_steps``
    steps, then constant (optax's ``cosine_decay_schedule``; Loshchilov and Hutter, 2016).

    >>> schedule = cosine_decay_schedule(1.0, decay_steps=4)
    >>> [round(float(schedule(step)), 3) for step in range(6)]
    [1.0, 0.854, 0.5, 0.146, 0.0, 0.0]

    Args:
        init_value: The value at step 0.
        decay_steps: The step at which the decay ends; must be positive.
        alpha: The end value as a fraction of ``init_value``.
        exponent: The power the cosine factor is raised to.

    Returns:
        The schedule.

    Raises:
        ValueError: If ``decay_steps`` is not positive.
    """
    if not decay_steps > 0:
        raise ValueError(f"decay_steps: expected a positive number of steps, got {decay_steps!r}")
    steps = float(decay_steps) if isinstance(decay_steps, int) else decay_steps

    def schedule(count: Any) -> Any:
        count = float(count) if isinstance(count, int) else count
        xp = namespace(count)
        count = xp.minimum(count, steps)
        cosine_decay = 0.5 * (1 + xp.cos(xp.pi * count / steps))
        decayed = (1 - alpha) * cosine_decay**exponent + alpha
        return init_value * decayed

    return schedule


def _join(schedules: Sequence[Schedule], boundaries: Sequence[int]) -> Schedule:
    """``schedules[k]`` from ``boundaries[k - 1]`` on, counted from there (optax's join)."""

    def schedule(step: Any) -> Any:
        xp = namespace(step)
        output = schedules[0](step)
        for boundary, later in zip(boundaries, schedules[1:]):
            output = xp.where(step < boundary, output, later(step - boundary))
        return output

    return schedule


def warmup_cosine_decay_schedule(
    init_value: Any, peak_value: Any, warmup_steps: int, decay_steps: int, end_value: Any = 0.0, exponent: Any = 1.0
) -> Schedule:
    """A linear warmup from ``init_value`` to ``peak_value`` over ``warmup_steps``, then a
    cosine decay to ``end_value`` at step ``decay_steps`` (optax's; ``decay_steps`` counts the
    warmup too).

    >>> schedule = warmup_cosine_decay_schedule(0.0, 1.0, warmup_steps=2, decay_steps=4)
    >>> [float(schedule(step)) for step in range(5)]
    [0.0, 0.5, 1.0, 0.5, 0.0]

    Args:
        init_value: The value at step 0.
        peak_value: The value at step ``warmup_steps``.
        warmup_steps: The length of the warmup.
        decay_steps: The step at which the decay ends (warmup included); must be larger
            than ``warmup_steps``.
        end_value: The value from ``decay_steps`` on.
        exponent: The power the cosine factor is raised to.

    Returns:
        The schedule.

    Raises:
        ValueError: If ``decay_steps <= warmup_steps``.
    """
    alpha = 0.0 if peak_value == 0.0 else end_value / peak_value
    if not decay_steps - warmup_steps > 0:
        raise ValueError(
            f"decay_steps: expected more steps than warmup_steps ({warmup_steps!r}), got {decay_steps!r}"
        )
    schedules = [
        linear_schedule(init_value, peak_value, transition_steps=warmup_steps),
        cosine_decay_schedule(peak_value, decay_steps=decay_steps - warmup_steps, alpha=alpha, exponent=exponent),
    ]
    return _join(schedules, [warmup_steps])


def exponential_decay(
    init_value: Any,
    transition_steps: int,
    decay_rate: float,
    transition_begin: int = 0,
    staircase: bool = False,
    end_value: Any = None,
) -> Schedule:
    """``init_value * decay_rate ** ((count - transition_begin) / transition_steps)`` (optax's).

    >>> schedule = exponential_decay(1.0, transition_steps=2, decay_rate=0.5, staircase=True)
    >>> [float(schedule(step)) for step in range(5)]
    [1.0, 1.0, 0.5, 0.5, 0.25]

    Args:
        init_value: The value up to ``transition_begin``.
        transition_steps: The steps over which the value is multiplied by ``decay_rate``;
            ``<= 0`` gives the constant ``init_value``, as in optax.
        decay_rate: The factor per ``transition_steps``; ``0`` gives the constant
            ``init_value``, as in optax.
        transition_begin: The step at which the decay starts (a negative one counts as 0).
        staircase: Decay in whole steps of ``transition_steps`` (``floor`` of the exponent).
        end_value: A bound the value does not pass (a floor when decaying, a ceiling when
            ``decay_rate > 1``); ``None`` for none.

    Returns:
        The schedule.
    """
    if transition_steps <= 0 or decay_rate == 0:
        return lambda count: init_value
    transition_begin = max(transition_begin, 0)

    def schedule(count: Any) -> Any:
        xp = namespace(count)
        decreased_count = count - transition_begin
        p = decreased_count / transition_steps
        if staircase:
            p = xp.floor(p)
        decayed_value = xp.where(decreased_count <= 0, init_value, init_value * xp.power(decay_rate, p))
        if end_value is not None:
            decayed_value = (xp.maximum if decay_rate < 1.0 else xp.minimum)(decayed_value, end_value)
        return decayed_value

    return schedule

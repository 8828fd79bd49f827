"""Learning-rate schedules: functions of the step count, with optax's names and arithmetic.

A schedule is any callable ``schedule(count) -> value``; every optimizer in
:mod:`treekit.optim` accepts one wherever it takes a learning rate (or a weight decay). The
count is an int32 scalar of the optimizer state's array module (numpy, or jax under ``jit``),
and the arithmetic is optax's operation for operation, so jax values equal optax's.

>>> import numpy as np
>>> schedule = warmup_cosine_decay_schedule(0.0, 1.0, warmup_steps=2, decay_steps=6)
>>> [round(float(schedule(np.int32(step))), 3) for step in range(8)]
[0.0, 0.5, 1.0, 0.854, 0.5, 0.146, 0.0, 0.0]
"""

from treekit.ops import namespace as namespace  # importable from here before 0.3
from treekit.optim import Schedule as Schedule
from treekit.optim import constant_schedule as constant_schedule
from treekit.optim import cosine_decay_schedule as cosine_decay_schedule
from treekit.optim import exponential_decay as exponential_decay
from treekit.optim import linear_schedule as linear_schedule
from treekit.optim import warmup_cosine_decay_schedule as warmup_cosine_decay_schedule

__all__ = [
    "Schedule",
    "constant_schedule",
    "cosine_decay_schedule",
    "exponential_decay",
    "linear_schedule",
    "warmup_cosine_decay_schedule",
]

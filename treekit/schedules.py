"""Learning-rate schedules: functions of the step count, with optax's names and arithmetic.

Every optimizer in :mod:`treekit.optim` takes one wherever it takes a learning rate; they live
in ``treekit/optim/_schedules.py``, which says how they count.

>>> import numpy as np
>>> [float(linear_schedule(1.0, 0.0, transition_steps=4)(np.int32(step))) for step in (0, 2, 9)]
[1.0, 0.5, 0.0]
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

"""The demo's sharded run: the MLP trained data- and model-parallel on a device mesh, under jit.

Params and optimizer state are placed by one set of key-path rules (:mod:`treekit.sharding`),
the batch is split over the ``data`` axis, and the same steps are run again on one device as
the reference the sharded losses must match.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

AXES = ("data", "model")
ATOL = 1e-3  # differences are measured relative to |value| + ATOL (losses end near 1e-4)


def parse_mesh(text: str) -> dict[str, int]:
    """``'data=2,model=4'`` -> ``{'data': 2, 'model': 4}``; axes are ``data`` and ``model``."""
    out: dict[str, int] = {}
    for part in text.split(","):
        name, _, size = part.partition("=")
        name = name.strip()
        if name not in AXES or name in out or not size.strip().isdigit() or int(size) < 1:
            raise ValueError(f"expected axes like data=2,model=4 (names {', '.join(AXES)}, each once), got {text!r}")
        out[name] = int(size)
    return out


def ask_devices(count: int) -> None:
    """Ask for ``count`` CPU devices; works only before jax is imported (XLA reads the flag then)."""
    if "jax" in sys.modules:
        return
    flag = f"--xla_force_host_platform_device_count={count}"
    os.environ["XLA_FLAGS"] = " ".join([os.environ.get("XLA_FLAGS", ""), flag]).strip()


def mlp_rules(num_layers: int, axes: Sequence[str]) -> list[tuple[str, Any]]:
    """Megatron-style rules for :func:`treekit.params.init_mlp_params`' params (and any optimizer
    state holding trees like them): hidden layers split their outputs over ``model``, the last
    layer its inputs. Without a ``model`` axis every leaf is replicated."""
    import jax

    P: Any = jax.sharding.PartitionSpec  # untyped in jax: Any keeps mypy --strict quiet

    if "model" not in axes:
        return []
    last = num_layers - 1
    rules = [(rf"(^|/){last}/weights$", P("model", None)), (rf"(^|/){last}/biases$", P())]
    if num_layers > 1:
        rules += [(r"weights$", P(None, "model")), (r"biases$", P("model"))]
    return rules


def pick_devices(count: int) -> list[Any]:
    """``count`` devices of one platform: the default one's, else the CPU's."""
    import jax

    for devices in (jax.devices(), jax.devices("cpu")):
        if len(devices) >= count:
            return list(devices[:count])
    raise RuntimeError(
        f"expected {count} devices, got {len(jax.devices('cpu'))} CPU devices: jax was imported before "
        f"--devices could ask for more; set XLA_FLAGS=--xla_force_host_platform_device_count={count}"
    )


def _step_fn(opt: Any) -> Callable[[Any, Any, Any, Any], Any]:
    import jax

    from treekit.params import apply_updates, mse_loss

    def step(params: Any, state: Any, x: Any, y: Any) -> Any:
        loss, grads = jax.value_and_grad(mse_loss)(params, x, y)
        updates, state = opt.update(grads, state, params)
        return apply_updates(params, updates), state, loss

    return step


def _relative(a: Any, b: Any) -> float:
    import numpy as np

    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b) / (np.abs(b) + ATOL), initial=0.0))


def train(
    params: Any, opt: Any, x: Any, y: Any, steps: int, mesh_sizes: dict[str, int], report: Callable[[int, float], None]
) -> tuple[list[float], float, str]:
    """Train sharded on a mesh of ``mesh_sizes``, checking each step against the same step on one
    device from the same params and state. Returns (losses, the largest relative difference of
    any loss or param between the two, summary table)."""
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding

    P: Any = jax.sharding.PartitionSpec

    from treekit import summary, tree_leaves
    from treekit.sharding import shardings

    names = tuple(mesh_sizes)
    devices = pick_devices(int(np.prod(list(mesh_sizes.values()))))
    mesh = Mesh(np.array(devices).reshape(tuple(mesh_sizes.values())), names)
    rules = mlp_rules(len(params), names)
    state = opt.init(params)
    param_sh = shardings(params, mesh, rules, default=P())
    state_sh = shardings(state, mesh, rules, default=P())
    batch_sh = NamedSharding(mesh, P("data", None) if "data" in names else P())
    scalar_sh = NamedSharding(mesh, P())

    step = _step_fn(opt)
    single_step = jax.jit(step)
    sharded_step = jax.jit(
        step, in_shardings=(param_sh, state_sh, batch_sh, batch_sh), out_shardings=(param_sh, state_sh, scalar_sh)
    )
    params, state = jax.device_put(params, param_sh), jax.device_put(state, state_sh)
    x, y = jax.device_put(x, batch_sh), jax.device_put(y, batch_sh)
    table = summary({"params": params, "opt_state": state})
    one = jax.devices()[0]
    x1, y1 = jax.device_put(jax.device_get(x), one), jax.device_put(jax.device_get(y), one)
    losses: list[float] = []
    worst = 0.0
    for k in range(1, steps + 1):
        before = jax.device_put(jax.device_get((params, state)), one)
        params, state, loss = sharded_step(params, state, x, y)
        want_params, _, want_loss = single_step(*before, x1, y1)
        worst = max(worst, _relative(loss, want_loss), *map(_relative, tree_leaves(params), tree_leaves(want_params)))
        losses.append(float(loss))
        report(k, losses[-1])
    return losses, worst, table


def reference(params: Any, opt: Any, x: Any, y: Any, steps: int) -> list[float]:
    """The same training on one device from the start (free-running: it drifts from the sharded
    run as float rounding in differently ordered sums compounds over many steps)."""
    import jax

    step = jax.jit(_step_fn(opt))
    state = opt.init(params)
    losses = []
    for _ in range(steps):
        params, state, loss = step(params, state, x, y)
        losses.append(float(loss))
    return losses

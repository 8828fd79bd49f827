"""``python -m treekit``: command-line entry points, one subcommand each.

``python -m treekit show FILE`` prints the summary of a tree stored in a file.
``python -m treekit demo`` trains the JAX pytree tutorial's MLP on ``y = x**2`` with treekit's
init, Adam and ``apply_updates`` (a ``tree_map``): under ``jax.jit`` when jax is installed,
with numpy and a hand-written backward pass otherwise (``--backend`` chooses).
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from typing import Any


def _progress(step: int, steps: int, loss: float, width: int = 20) -> str:
    filled = width * step // steps
    return f"  step {step:>{len(str(steps))}}/{steps} [{'#' * filled}{'.' * (width - filled)}] loss {loss:.6f}"


def _jax_trainer(opt: Any, x: Any, y: Any) -> tuple[Callable[[Any], Any], Callable[[Any, Any], Any]]:
    """(to_backend, step) for jax: one jitted step of value_and_grad, Adam, apply_updates."""
    import jax

    from treekit import tree_map
    from treekit.params import apply_updates, mse_loss

    x, y = jax.numpy.asarray(x), jax.numpy.asarray(y)

    @jax.jit
    def step(params: Any, state: Any) -> Any:
        loss, grads = jax.value_and_grad(mse_loss)(params, x, y)
        updates, state = opt.update(grads, state, params)
        return apply_updates(params, updates), state, loss

    return (lambda tree: tree_map(jax.numpy.asarray, tree)), step


def _numpy_trainer(opt: Any, x: Any, y: Any) -> tuple[Callable[[Any], Any], Callable[[Any, Any], Any]]:
    """(to_backend, step) for numpy: the hand-written backward pass, Adam, apply_updates."""
    from treekit.params import apply_updates, mse_loss_and_grad

    def step(params: Any, state: Any) -> Any:
        loss, grads = mse_loss_and_grad(params, x, y)
        updates, state = opt.update(grads, state, params)
        return apply_updates(params, updates), state, loss

    return (lambda tree: tree), step


def _pick_backend(asked: str) -> str | None:
    if asked == "numpy":
        return "numpy"
    try:
        import jax  # noqa: F401
    except ImportError:
        return None if asked == "jax" else "numpy"
    return "jax"


def _demo(args: argparse.Namespace) -> int:
    backend = _pick_backend(args.backend)
    if backend is None:
        print("demo: --backend jax needs jax installed (pip install 'jax-treekit[jax]'); try --backend numpy")
        return 2
    if backend == "numpy" and "numpy" not in sys.modules:
        # 128-row matmuls gain nothing from BLAS threads, and on a busy machine their spinning
        # makes each step ten times slower. Only for this process, and only if not set already.
        for name in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
            os.environ.setdefault(name, "1")

    import numpy as np

    from treekit import summary
    from treekit.params import adam, init_mlp_params, mse_loss, tree_cast

    widths, steps = args.widths, args.steps
    rng = np.random.default_rng(args.seed)
    params = tree_cast(init_mlp_params(widths, rng), np.float32)
    x = rng.normal(size=(128, widths[0])).astype(np.float32)
    y = x**2 if widths[0] == widths[-1] else np.repeat(x[:, :1] ** 2, widths[-1], axis=1)
    print(f"treekit demo: MLP {widths} learns y = x**2 on 128 points with Adam (learning rate {args.learning_rate})")
    print(f"backend: {backend}" + (" (jax.jit)" if backend == "jax" else " (hand-written backward pass)"))
    print(textwrap.indent(summary(params, depth=1), "  "))

    opt = adam(args.learning_rate)
    to_backend, step = (_jax_trainer if backend == "jax" else _numpy_trainer)(opt, x, y)
    params = to_backend(params)
    state = opt.init(params)
    every = max(1, steps // 10)
    start = time.perf_counter()
    first = None
    for k in range(1, steps + 1):
        params, state, loss = step(params, state)
        if first is None:
            first = float(loss)
        if k % every == 0 or k == steps:
            print(_progress(k, steps, float(loss)), flush=True)
    final = float(mse_loss(params, to_backend(x), to_backend(y)))
    elapsed = time.perf_counter() - start
    assert first is not None
    print(f"final loss {final:.6f} (initial {first:.6f}) after {steps} steps in {elapsed:.2f}s")
    if not final < first:
        print("demo: the loss did not fall")
        return 1
    return 0


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _widths(text: str) -> list[int]:
    try:
        widths = [int(w) for w in text.split(",")]
    except ValueError:
        widths = []
    if len(widths) < 2 or min(widths) < 1:
        raise argparse.ArgumentTypeError(f"expected two or more positive integers like 1,128,128,1, got {text!r}")
    return widths


def _add_demo(sub: Any) -> None:
    demo = sub.add_parser(
        "demo",
        help="train the JAX tutorial's MLP on y = x**2 with treekit (jax.jit, or numpy alone)",
        description="Train the JAX pytree tutorial's MLP on y = x**2 (128 points) with treekit's init, "
        "Adam and apply_updates: under jax.jit when jax is installed, with numpy and a hand-written "
        "backward pass otherwise. Exits 1 if the loss did not fall.",
    )
    demo.add_argument("--steps", type=_positive, default=1000, help="training steps (default 1000)")
    demo.add_argument("--seed", type=int, default=0, help="seed of the init and the data (default 0)")
    demo.add_argument("--widths", type=_widths, default="1,128,128,1", help="layer widths (default 1,128,128,1)")
    demo.add_argument("--learning-rate", type=float, default=1e-3, help="Adam's step size (default 0.001)")
    demo.add_argument(
        "--backend",
        choices=["auto", "jax", "numpy"],
        default="auto",
        help="jax (jax.jit), numpy (no jax needed), or auto: jax when installed (default)",
    )
    demo.set_defaults(run=_demo)


def _show(args: argparse.Namespace) -> int:
    from treekit._show import show as show_file

    return show_file(args.file, allow_pickle=args.allow_pickle)


def _add_show(sub: Any) -> None:
    show = sub.add_parser("show", help="print the summary of a tree stored in .npz, .npy or .json")
    show.add_argument("file")
    show.add_argument("--allow-pickle", action="store_true", help="also load pickles (this runs code from the file)")
    show.set_defaults(run=_show)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m treekit``; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m treekit")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_demo(sub)
    _add_show(sub)
    args = parser.parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())

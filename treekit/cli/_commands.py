"""``treekit`` (also ``python -m treekit``): command-line entry points, one subcommand each.

``treekit show FILE`` prints the summary of a tree stored in a file.
``python -m treekit demo`` trains the JAX pytree tutorial's MLP on ``y = x**2`` with treekit's
init, Adam and ``apply_updates`` (a ``tree_map``): under ``jax.jit`` when jax is installed,
with numpy and a hand-written backward pass otherwise (``--backend`` chooses).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from typing import Any, NoReturn


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
    from treekit.cli import _demo_mesh

    mesh = args.mesh or ({"data": args.devices} if args.devices else None)
    if mesh is not None:
        count = math.prod(mesh.values())
        if args.devices not in (None, count):
            print(f"{args.prog} demo: --devices {args.devices} but --mesh has {count} devices", file=sys.stderr)
            return 2
        if args.backend == "numpy":
            print(f"{args.prog} demo: --devices and --mesh need the jax backend", file=sys.stderr)
            return 2
        _demo_mesh.ask_devices(count)
    backend = _pick_backend(args.backend)
    if backend is None:
        message = "--backend jax needs jax installed (pip install 'jax-treekit[jax]'); try --backend numpy"
        print(f"{args.prog} demo: {message}", file=sys.stderr)
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
    if mesh is not None:
        return _demo_sharded(args.prog, params, opt, x, y, steps, mesh)
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
        print(f"{args.prog} demo: the loss did not fall (from {first:.6f} to {final:.6f})", file=sys.stderr)
        return 1
    return 0


def _demo_sharded(prog: str, params: Any, opt: Any, x: Any, y: Any, steps: int, mesh: dict[str, int]) -> int:
    """The demo on a device mesh, checked against the same steps on one device."""
    from treekit.cli import _demo_mesh

    every = max(1, steps // 10)
    start = time.perf_counter()
    try:
        losses, worst, table = _demo_mesh.train(
            params,
            opt,
            x,
            y,
            steps,
            mesh,
            lambda k, loss: print(_progress(k, steps, loss), flush=True) if k % every == 0 or k == steps else None,
        )
    except RuntimeError as err:
        print(f"{prog} demo: {err}", file=sys.stderr)
        return 2
    elapsed = time.perf_counter() - start
    print(f"sharded over mesh {', '.join(f'{k}={v}' for k, v in mesh.items())}: params and Adam state on each device")
    print(textwrap.indent(table, "  "))
    single = _demo_mesh.reference(params, opt, x, y, steps)
    print(f"final loss {losses[-1]:.6f} (initial {losses[0]:.6f}) after {steps} steps in {elapsed:.2f}s")
    print(f"each step vs the same step on one device: largest relative difference {worst:.1e} (losses and params)")
    print(f"single-device run from the start: final loss {single[-1]:.6f}")
    if not losses[-1] < losses[0]:
        print(f"{prog} demo: the loss did not fall (from {losses[0]:.6f} to {losses[-1]:.6f})", file=sys.stderr)
        return 1
    if worst > _MESH_RTOL:
        message = f"a sharded step differs from the single-device step by more than {_MESH_RTOL}"
        print(f"{prog} demo: {message}", file=sys.stderr)
        return 1
    return 0


_MESH_RTOL = 1e-4  # float32 sums split across devices add in another order


def _mesh(text: str) -> dict[str, int]:
    from treekit.cli._demo_mesh import parse_mesh

    try:
        return parse_mesh(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _at_least(low: int, what: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    return parse


_positive = _at_least(1, "a positive integer")
_natural = _at_least(0, "an integer >= 0")


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
    demo.add_argument("--seed", type=_natural, default=0, help="seed of the init and the data (default 0)")
    demo.add_argument("--widths", type=_widths, default="1,128,128,1", help="layer widths (default 1,128,128,1)")
    demo.add_argument("--learning-rate", type=float, default=1e-3, help="Adam's step size (default 0.001)")
    demo.add_argument(
        "--backend",
        choices=["auto", "jax", "numpy"],
        default="auto",
        help="jax (jax.jit), numpy (no jax needed), or auto: jax when installed (default)",
    )
    demo.add_argument(
        "--devices",
        type=_positive,
        default=None,
        help="train sharded over this many devices (CPU devices are made if there are too few); "
        "without --mesh the mesh is data=N",
    )
    demo.add_argument(
        "--mesh",
        type=_mesh,
        default=None,
        help="mesh axes and sizes, like data=2,model=4: the batch is split over data, the layers over model",
    )
    demo.set_defaults(run=_demo)


def _show(args: argparse.Namespace) -> int:
    from treekit.cli._show import show as show_file

    max_bytes = None if args.no_limit else args.max_bytes
    return show_file(
        args.file,
        allow_pickle=args.allow_pickle,
        max_bytes=max_bytes,
        as_json=args.json,
        depth=args.depth,
        html=args.html,
        prog=args.prog,
    )


_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def _byte_count(text: str) -> int:
    """``4096``, ``512M``, ``2G`` (binary units, an optional trailing ``B`` or ``iB``)."""
    spec = text.strip().lower().removesuffix("ib").removesuffix("b")
    unit = spec[-1:] if spec[-1:].isalpha() else ""
    try:
        value = int(spec[: len(spec) - len(unit)]) * _UNITS[unit]
    except (ValueError, KeyError):
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a byte count like 4096, 512M or 2G, got {text!r}")
    return value


def _add_show(sub: Any) -> None:
    from treekit.cli._show import DEFAULT_MAX_BYTES

    show = sub.add_parser(
        "show",
        help="print the summary of a tree stored in .safetensors, .npz, .npy or .json",
        description="Print the summary table (key path, shape, dtype, size, bytes) of the tree in FILE: "
        ".safetensors (from its header alone), .npz (keys split on / into nested dicts), .npy or .json; "
        "a path or a URL (s3://, gs://, any fsspec filesystem). Sizes are checked before anything "
        "is read. Exits 1 if the file cannot be read or is refused.",
    )
    show.add_argument(
        "file", metavar="FILE", help="a .safetensors, .npz, .npy or .json file or URL (a pickle with --allow-pickle)"
    )
    show.add_argument(
        "--depth",
        type=_natural,
        metavar="N",
        help="one row per subtree N key entries deep, with its subtotals, instead of one per leaf",
    )
    show.add_argument("--json", action="store_true", help="print the rows and totals as JSON instead of a table")
    show.add_argument(
        "--html",
        metavar="OUT",
        help="write the tree as a foldable HTML page to OUT (treekit.view; nodes below --depth start folded)",
    )
    show.add_argument(
        "--max-bytes",
        type=_byte_count,
        default=DEFAULT_MAX_BYTES,
        metavar="N",
        help="refuse a .npz that inflates to, or a .json file of, more than N bytes (512M, 2G; default 1G)",
    )
    show.add_argument("--no-limit", action="store_true", help="lift --max-bytes: read files of any size")
    show.add_argument("--allow-pickle", action="store_true", help="also load pickles (this runs code from the file)")
    show.set_defaults(run=_show)


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line on stderr (exit status 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _Version(argparse.Action):
    """``--version``: looked up only when asked (reading the installed metadata takes time)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print treekit's version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> NoReturn:
        print(f"treekit {version()}")
        parser.exit(0)


def version() -> str:
    """The installed distribution's version (whatever its name on the package index), else
    ``treekit.__version__`` (running from a source tree)."""
    from importlib import metadata

    import treekit

    for name in metadata.packages_distributions().get("treekit", []):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return treekit.__version__


def parser(prog: str = "treekit") -> argparse.ArgumentParser:
    """The command line's parser (its subcommands are in the ``choices`` of its last action)."""
    top = _Parser(prog=prog, description="Pytrees for JAX model code: command-line tools.")
    top.add_argument("--version", action=_Version)
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_demo(sub)
    _add_show(sub)
    return top


def main(argv: Sequence[str] | None = None, prog: str = "treekit") -> int:
    """Entry point of the ``treekit`` command (and ``python -m treekit``); returns the exit status.

    Status 0: done; 1: the job failed (a file that cannot be read, a loss that did not fall);
    2: a usage error. Errors are one line on stderr, never a traceback.
    """
    try:
        args = parser(prog).parse_args(argv)
    except SystemExit as stop:  # --help, --version and usage errors
        return stop.code if isinstance(stop.code, int) else 2
    args.prog = prog
    try:
        status = int(args.run(args))
        sys.stdout.flush()
    except BrokenPipeError:  # `treekit show ... | head -1`: the reader has gone; stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that the flush at exit does not fail again
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        print(f"{prog} {args.command}: out of memory", file=sys.stderr)
        return 1
    return status


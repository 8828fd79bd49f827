"""Remake the screenshots of docs/looking-at-trees.md in headless Chromium.

    python docs/screenshots.py            # needs flax, equinox (the dev extra) and chromium

Each picture is a page treekit wrote (``View.save_html``, or a diff's HTML in a page), opened
in ``chromium --headless --screenshot`` at a fixed window size; the PNGs go to
``docs/_static/looking-at-trees/``. ``--treescope DIR`` also writes treescope's rendering of
the equinox tree to ``DIR`` (treescope installed), for comparing the two.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "_static" / "looking-at-trees"
PAGE = '<!DOCTYPE html><html><head><meta charset="utf-8"></head><body style="margin:8px">{}</body></html>'


def pages() -> dict[str, tuple[str, tuple[int, int]]]:
    """name -> (HTML page, window size): the trees the docs page shows."""
    import equinox as eqx
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    from flax import nnx

    import treekit

    class Block(nnx.Module):
        def __init__(self, rngs: nnx.Rngs) -> None:
            self.attn = nnx.MultiHeadAttention(4, 16, decode=False, rngs=rngs)
            self.norm = nnx.LayerNorm(16, rngs=rngs)
            self.mlp = nnx.Linear(16, 64, rngs=rngs)

    flax_state = nnx.state(Block(nnx.Rngs(0)), nnx.Param)
    mlp = eqx.nn.MLP(8, 4, 16, depth=2, key=jax.random.key(0))

    class MLP(nn.Module):
        @nn.compact
        def __call__(self, x: Any) -> Any:
            dense = nn.with_partitioning(nn.initializers.lecun_normal(), (None, "model"))
            x = nn.relu(nn.Dense(512, kernel_init=dense)(x))
            out = nn.with_partitioning(nn.initializers.lecun_normal(), ("model", None))
            return nn.Dense(128, kernel_init=out)(x)

    sharded = MLP().init(jax.random.key(0), jnp.ones((1, 256)))
    old = {"encoder": {"kernel": jnp.ones((8, 16)), "bias": jnp.zeros(16)}, "head": [jnp.ones((16, 4))], "step": 10}
    new = {"encoder": {"kernel": jnp.ones((8, 32)), "b": jnp.zeros(16)}, "head": [jnp.ones((16, 4), jnp.bfloat16)]}
    new["step"] = 10.0
    diff = treekit.tree_diff(old, new)
    return {
        "flax-nnx": (PAGE.format(treekit.view(flax_state)._repr_html_()), (1100, 720)),
        "equinox": (PAGE.format(treekit.view(mlp)._repr_html_()), (1100, 300)),
        "sharded": (PAGE.format(treekit.view(sharded, mesh={"data": 2, "model": 4})._repr_html_()), (1300, 330)),
        "diff": (PAGE.format(diff._repr_html_()), (1100, 330)),
    }


def shoot(chromium: str, page: str, size: tuple[int, int], png: Path) -> None:
    with tempfile.TemporaryDirectory() as d:
        name = os.path.join(d, "page.html")
        with open(name, "w", encoding="utf-8") as f:
            f.write(page)
        subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--screenshot={png}", f"--window-size={size[0]},{size[1]}", f"file://{name}"],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--treescope", type=Path, help="also write treescope's view of the equinox tree here")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("chromium is not installed (apt-get install chromium)")
    OUT.mkdir(parents=True, exist_ok=True)
    for name, (page, size) in pages().items():
        shoot(chromium, page, size, OUT / f"{name}.png")
        print(f"wrote {OUT / f'{name}.png'}")
    if args.treescope:
        import equinox as eqx
        import jax
        import treescope

        mlp = eqx.nn.MLP(8, 4, 16, depth=2, key=jax.random.key(0))
        with treescope.active_autovisualizer.set_scoped(treescope.ArrayAutovisualizer()):
            page = treescope.render_to_html(mlp, roundtrip_mode=False)
        args.treescope.mkdir(parents=True, exist_ok=True)
        shoot(chromium, page, (1000, 700), args.treescope / "treescope-equinox.png")
        print(f"wrote {args.treescope / 'treescope-equinox.png'}")


if __name__ == "__main__":
    main()

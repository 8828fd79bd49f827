"""What the tests' child processes share: where they run, and how several of them meet.

Children run on the CPU (tests/conftest.py sets ``JAX_PLATFORMS=cpu`` for them): an accelerator
such as a TPU admits one process at a time, and the test process may hold it. Several processes
meet through ``jax.distributed`` on localhost; a machine that refuses loopback connections (the
TPU machines do) cannot run those tests, which skip there with that reason and run in CI.
"""

from __future__ import annotations

import socket

import pytest

EIGHT_CPUS = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu"}


def loopback_port() -> int:
    """A free port on localhost that accepts a connection; skips the test where none does."""
    try:
        with socket.socket() as server:
            server.bind(("localhost", 0))
            server.listen(1)
            port = int(server.getsockname()[1])
            with socket.create_connection(("localhost", port), timeout=5):
                pass
        return port
    except OSError as error:
        pytest.skip(f"this machine refuses connections on localhost ({error}); jax.distributed needs them")

"""An S3-compatible server for the tests, started by them: moto's server in a process of its own
on a free localhost port, with the environment every S3 client reads (``AWS_ENDPOINT_URL``,
keys, region) pointed at it. Skips where moto's server or s3fs is not installed."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def s3_server() -> Iterator[dict[str, str]]:
    """Moto's S3 server running; yields the environment that points clients at it."""
    pytest.importorskip("s3fs")
    pytest.importorskip("moto.server")
    pytest.importorskip("flask")
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.skip("moto's S3 server did not start")
            time.sleep(0.1)
        yield {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
    finally:
        server.kill()
        server.wait()


def new_bucket(env: dict[str, str]) -> str:
    """A new empty bucket on the server of ``env``; its ``s3://`` URL."""
    import s3fs

    name = f"treekit-{uuid.uuid4().hex[:12]}"
    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": env["AWS_ENDPOINT_URL"]}, key="testing", secret="testing")
    fs.mkdir(name)
    return f"s3://{name}"


@pytest.fixture(scope="session")
def s3_env() -> Iterator[dict[str, str]]:
    with s3_server() as env:
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            yield env
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


@pytest.fixture
def bucket(s3_env: dict[str, str]) -> str:
    """A new bucket's URL on the tests' S3 server (the environment points at it)."""
    return new_bucket(s3_env)

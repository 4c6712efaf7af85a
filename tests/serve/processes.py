"""The proxy run as a process by the tests that need one (start-up, several workers)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def spawn_proxy(upstream: str, store: Path, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    """``autocompact serve`` in a process group of its own on a free port of 127.0.0.1, its
    OpenAI upstream at ``upstream`` and a SQLite store at ``store`` (its stderr piped), and its
    URL; started, not yet serving (:func:`wait_until_serving`)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    command = [
        sys.executable, "-m", "autocompact.cli.main", "serve", "--upstream",
        f"openai={upstream}/v1", "--host", "127.0.0.1", "--port", str(port), "--store",
        f"sqlite:///{store}", *extra,
    ]  # fmt: skip
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    return process, f"http://127.0.0.1:{port}"


def wait_until_serving(process: subprocess.Popen[bytes], url: str, seconds: float) -> None:
    """Wait until the proxy at ``url`` answers ``/healthz``; a process that exits first, or
    does not answer within ``seconds``, is killed and fails the test with its stderr."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"the proxy did not start: {process.stderr.read()!r}")  # type: ignore[union-attr]
        time.sleep(0.2)


def stop(process: subprocess.Popen[bytes], seconds: float) -> None:
    """Stop the proxy and its workers (SIGTERM to its process group, SIGKILL after
    ``seconds``)."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()

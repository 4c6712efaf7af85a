"""``autocompact serve`` starting as a process: the port it listens on, taken or free, with one
worker or several."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from autocompact.serve.threaded import serve_in_thread

from .processes import spawn_proxy, stop, wait_until_serving
from .scripted import ScriptedUpstream

START_SECONDS = 90.0
"""How long a proxy process may take to answer ``/healthz`` (a busy machine, workers spawned)."""


def _command(upstream: str, port: int, store: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "autocompact.cli.main", "serve", "--upstream",
        f"openai={upstream}/v1", "--host", "127.0.0.1", "--port", str(port), "--store",
        f"sqlite:///{store}", *extra,
    ]  # fmt: skip


@pytest.fixture
def taken() -> Iterator[int]:
    """A port on 127.0.0.1 that another program listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_port_in_use_is_one_line_naming_it_and_no_banner(
    tmp_path: Path, taken: int, workers: str
) -> None:
    """A --port another program listens on: exit 2 with one line naming the address and what
    to do, no banner, no traceback (the banner said the proxy was listening, then uvicorn's
    bind error followed and the exit status was 3)."""
    command = _command("http://127.0.0.1:9", taken, tmp_path / "s.db", "--workers", workers)
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"Error: cannot listen on 127.0.0.1:{taken}: the address is already in use (another "
        "program, or another autocompact serve, listens there): give another --port, or stop "
        "the process using it\n"
    )
    assert done.stdout == ""


@pytest.mark.parametrize("workers", ["1", "2"])
def test_the_proxy_serves_on_the_port_it_announced(tmp_path: Path, workers: str) -> None:
    """Started as a process, with one worker or two, the proxy prints its banner, answers
    /healthz and forwards a request on the port it announced, logs the request (a worker of
    --workers N logged nothing: the log was set up in the parent only), and stops on
    SIGTERM, saying so, with exit status 0 (-15 with one worker: killed by the signal)."""
    script = ScriptedUpstream()
    with serve_in_thread(script.app()) as upstream:
        process, url = spawn_proxy(upstream, tmp_path / "s.db", "--workers", workers)
        try:
            wait_until_serving(process, url, START_SECONDS)
            client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
            reply = client.chat.completions.create(
                model="scripted", messages=[{"role": "user", "content": "hi"}]
            )
            assert reply.choices[0].message.content == "ok 1"
        finally:
            stop(process, 30)
    err = process.stderr.read().decode()  # type: ignore[union-attr]
    assert err.startswith(f"autocompact serve on {url} → openai={upstream}/v1\n"), err
    assert "Traceback" not in err
    assert " autocompact.serve INFO POST /v1/chat/completions conversation=" in err
    assert err.endswith("\nautocompact serve stopped\n"), err
    assert process.returncode == 0, err

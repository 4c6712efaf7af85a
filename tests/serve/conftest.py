"""Fixtures for the proxy's tests: the scripted upstream and the proxy, both on 127.0.0.1."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from autocompact.serve import ServeApp, ServeConfig
from autocompact.serve.threaded import serve_in_thread

from .scripted import ScriptedUpstream


@dataclass
class Proxy:
    """A running proxy and what is behind it."""

    url: str
    app: ServeApp
    upstream: ScriptedUpstream
    upstream_url: str


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """``autocompact serve`` run in-process serves nothing: each start it reaches is recorded
    (its worker count), on a socket bound to a free port (the test's --port may be taken)."""
    from autocompact.cli import serve_cmd

    starts: list[int] = []

    def listen(host: str, port: int) -> socket.socket:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        return sock

    def serve(sock: socket.socket, config: object, workers: int) -> int:
        starts.append(workers)
        return 0

    monkeypatch.setattr(serve_cmd, "_listen", listen)
    monkeypatch.setattr(serve_cmd, "_serve", serve)
    return starts


@pytest.fixture
def upstream() -> Iterator[tuple[ScriptedUpstream, str]]:
    """The scripted upstream, running."""
    script = ScriptedUpstream()
    with serve_in_thread(script.app()) as url:
        yield script, url


@pytest.fixture
def proxy(tmp_path: Path, upstream: tuple[ScriptedUpstream, str]) -> Iterator[Proxy]:
    """The proxy over the scripted upstream, its state in a fresh SQLite file."""
    script, url = upstream
    config = ServeConfig(
        upstreams={"openai": url + "/v1", "anthropic": url},
        store=f"sqlite:///{tmp_path / 'serve.db'}",
        context_window=script.window,
        lease_wait=5.0,
    )
    app = ServeApp(config)
    with serve_in_thread(app.asgi) as proxy_url:
        yield Proxy(url=proxy_url, app=app, upstream=script, upstream_url=url)
    app.store.close()

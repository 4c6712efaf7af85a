"""Provider-test fixtures: an HTTP-level guard against real hosts, and the scripted wire.

The global socket guard (``tests/conftest.py``) stops connections; this one stops an SDK
request before it is even built into a connection when no transport was injected and the
host is not the loopback interface, and names the URL.
"""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from .wire import Wire

_LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


class RealHostError(BaseException):
    """A provider test tried to send a request to a real host (a ``BaseException``: no
    ``except Exception`` on its way, the SDK's or an adapter's, turns it into another error)."""


@pytest.fixture(autouse=True)
def _no_real_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any request the real httpx2 transports would send to a non-loopback host."""
    real_sync = httpx2.HTTPTransport.handle_request
    real_async = httpx2.AsyncHTTPTransport.handle_async_request

    def check(request: httpx2.Request) -> None:
        if request.url.host not in _LOOPBACK:
            raise RealHostError(f"provider tests must not reach {request.url} (inject a transport)")

    def handle(self: httpx2.HTTPTransport, request: httpx2.Request) -> Any:
        check(request)
        return real_sync(self, request)

    async def ahandle(self: httpx2.AsyncHTTPTransport, request: httpx2.Request) -> Any:
        check(request)
        return await real_async(self, request)

    monkeypatch.setattr(httpx2.HTTPTransport, "handle_request", handle)
    monkeypatch.setattr(httpx2.AsyncHTTPTransport, "handle_async_request", ahandle)


@pytest.fixture
def wire() -> Wire:
    """A fresh scripted wire."""
    return Wire()

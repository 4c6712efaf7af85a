"""Shared test fixtures: an autouse guard that keeps every test off the network.

Any connection (or name lookup) to a host other than the loopback interface fails the test with
a clear message. Local servers on 127.0.0.1 / localhost / ::1, Unix sockets and subprocesses keep
working (the guard lives in this process only).
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback", "::1"}


class NetworkAccessError(AssertionError):
    """A test tried to reach a host other than the loopback interface."""


def _is_local(host: object) -> bool:
    if host is None:
        return True  # a bind / wildcard lookup, never a remote host
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    name = host.strip("[]").lower()
    if name in _LOCAL_NAMES or name.startswith("127.") or name in ("", "0.0.0.0", "::"):
        return True
    return name.startswith("::ffff:127.")


def _check_address(address: Any) -> None:
    if isinstance(address, (str, bytes)):
        return  # AF_UNIX path
    if isinstance(address, tuple) and address and not _is_local(address[0]):
        raise NetworkAccessError(
            f"tests must not reach the network: connection to {address[0]!r} blocked "
            "(use an injected transport or a server on 127.0.0.1)"
        )


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any test that connects to (or resolves) a non-loopback host."""
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_create_connection = socket.create_connection
    real_getaddrinfo = socket.getaddrinfo

    def connect(self: socket.socket, address: Any) -> None:
        _check_address(address)
        return real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        _check_address(address)
        return real_connect_ex(self, address)

    def create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        _check_address(address)
        return real_create_connection(address, *args, **kwargs)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not _is_local(host):
            raise NetworkAccessError(
                f"tests must not reach the network: name lookup of {host!r} blocked "
                "(use an injected transport or a server on 127.0.0.1)"
            )
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "create_connection", create_connection)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


_DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.fixture
def doc_example() -> Callable[[str, str], str]:
    """The python block that follows ``<!-- example: NAME -->`` in ``docs/PAGE``, as
    ``doc_example(PAGE, NAME)``: the examples the docs say run as written."""

    def example(page: str, name: str) -> str:
        doc = _DOCS / page
        match = re.search(
            rf"<!-- example: {re.escape(name)} -->\s*```python\n(.*?)```", doc.read_text(), re.S
        )
        assert match is not None, f"no example {name!r} in {doc}"
        return match.group(1)

    return example

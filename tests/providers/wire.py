"""Wire-level test helpers: an injected httpx2 transport that records requests and replays
scripted responses, and encoders for each provider's streaming format.

The SDKs under test are real; only the HTTP exchange is scripted, so the assertions are about
the JSON the SDK actually put on the wire and about what the adapter made of real responses.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx2

Reply = httpx2.Response | BaseException | Callable[[httpx2.Request], httpx2.Response]


@dataclass
class Sent:
    """One request as it went out."""

    method: str
    url: str
    headers: dict[str, str]
    body: Any

    @property
    def json(self) -> dict[str, Any]:
        """The JSON body (a dict)."""
        assert isinstance(self.body, dict), self.body
        return self.body


@dataclass
class Wire:
    """Scripted HTTP responses and the recorded requests of one test."""

    replies: deque[Reply] = field(default_factory=deque)
    sent: list[Sent] = field(default_factory=list)

    def queue(self, *replies: Reply) -> None:
        """Queue replies (responses, exceptions to raise, or callables) in order."""
        self.replies.extend(replies)

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        """The MockTransport handler."""
        raw = request.read()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        self.sent.append(Sent(request.method, str(request.url), dict(request.headers), body))
        if not self.replies:
            raise AssertionError(f"unexpected request to {request.url}")
        reply = self.replies.popleft()
        if isinstance(reply, BaseException):
            raise reply
        if callable(reply) and not isinstance(reply, httpx2.Response):
            return reply(request)
        return reply

    def client(self) -> httpx2.Client:
        """A sync client over this wire."""
        return httpx2.Client(transport=httpx2.MockTransport(self.handler))

    def async_client(self) -> httpx2.AsyncClient:
        """An async client over this wire."""
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self.handler))

    @property
    def last(self) -> Sent:
        """The last request sent."""
        assert self.sent, "nothing was sent"
        return self.sent[-1]


def json_response(
    payload: Any, status: int = 200, headers: dict[str, str] | None = None
) -> httpx2.Response:
    """A JSON response."""
    return httpx2.Response(status, json=payload, headers=headers)


def sse(events: Iterable[Any], *, named: bool = False, done: bool = False) -> httpx2.Response:
    """A ``text/event-stream`` response; ``named`` adds ``event:`` lines (Anthropic)."""
    out = []
    for event in events:
        prefix = f"event: {event['type']}\n" if named else ""
        out.append(f"{prefix}data: {json.dumps(event)}\n\n")
    if done:
        out.append("data: [DONE]\n\n")
    return httpx2.Response(
        200, content="".join(out).encode(), headers={"content-type": "text/event-stream"}
    )


def timeout_error(request: httpx2.Request) -> httpx2.Response:
    """A reply callable that times out."""
    raise httpx2.ReadTimeout("timed out", request=request)


def connect_error(request: httpx2.Request) -> httpx2.Response:
    """A reply callable that cannot connect."""
    raise httpx2.ConnectError("connection refused", request=request)


def find_nulls(value: Any, path: str = "$") -> list[str]:
    """Paths of every ``null`` in a JSON value (unset values must be omitted, not null)."""
    if value is None:
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in find_nulls(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in find_nulls(v, f"{path}[{i}]")]
    return []

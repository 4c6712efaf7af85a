"""Talking to the upstream: which headers go, and the side query as a provider.

The client's headers go to the upstream as sent (its credentials included: ``Authorization``,
``x-api-key``, ``anthropic-version``, ``anthropic-beta``, ...), except hop-by-hop headers, the
ones the HTTP client sets itself (``host``, ``content-length``) and the proxy's own
``X-Autocompact-*`` headers. ``accept-encoding`` is sent as ``identity`` so the proxy reads the
bytes the upstream wrote and passes them back unchanged. An upstream that encodes its body
anyway is decoded when httpx can undo every coding it names (:func:`decodes`: gzip, deflate;
br and zstd with their packages), and its ``content-encoding`` not passed back; a body in any
other coding is passed back as sent, with its ``content-encoding``, and not read (no usage is
learnt from it, no error in it is recognised as "too long"). Nothing here stores or logs a
header.

:class:`UpstreamProvider` is the provider the compaction's side query goes through: the same
upstream, the same model, the client's own credentials, the protocol's plain request shape.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from functools import cache
from typing import Any

import anyio
import httpx

from autocompact.errors import (
    REPLY_ERRORS,
    AuthenticationError,
    ContentError,
    ContextOverflowError,
    MalformedResponseError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    described,
)
from autocompact.jsonsafe import loads
from autocompact.providers.base import ChatRequest, Completion, StreamDone, StreamEvent
from autocompact.serve.failures import CONNECT_SECONDS, not_reached, upstream_named
from autocompact.serve.protocol import WireProtocol, looks_like_overflow
from autocompact.serve.wire import dump

__all__ = [
    "HOP_BY_HOP",
    "UpstreamProvider",
    "decodes",
    "forward_headers",
    "header_bytes",
    "is_event_stream",
    "read_body",
    "response_headers",
]

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
_SET_BY_CLIENT = frozenset({"host", "content-length", "accept-encoding"})
_NOT_RETURNED = frozenset({"content-length", "content-encoding", "date", "server"})


# What reading a summary reply whose fields have types they cannot have raises.
_UNREADABLE: tuple[type[Exception], ...] = (ContentError, *REPLY_ERRORS)


def forward_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The client's header lines (name, value; a name may come more than once, each line goes
    as sent) as they go to the upstream (see the module docstring)."""
    lines = list(headers)
    connection = {
        token.strip().lower()
        for name, value in lines
        if name.lower() == "connection"
        for token in value.split(",")
    }
    out = [
        (name, value)
        for name, value in lines
        if name.lower() not in HOP_BY_HOP
        and name.lower() not in _SET_BY_CLIENT
        and name.lower() not in connection
        and not name.lower().startswith("x-autocompact-")
    ]
    out.append(("accept-encoding", "identity"))
    return out


def header_bytes(headers: Iterable[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    """Header lines as the bytes they came in: a value that is not ASCII (a client's UTF-8,
    which the server read as Latin-1) goes out as its own bytes again, which httpx would
    otherwise refuse to encode."""
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


@cache
def _decodable() -> frozenset[str]:
    """The content codings httpx decodes here: it reads any other as if it were none."""
    codings = {"identity", "gzip", "deflate"}
    if _importable("brotli") or _importable("brotlicffi"):
        codings.add("br")
    if _importable("zstandard"):
        codings.add("zstd")
    return frozenset(codings)


def decodes(headers: httpx.Headers) -> bool:
    """Whether httpx undoes every content coding a response names (none: nothing to undo)."""
    codings = (c.strip().lower() for c in headers.get_list("content-encoding", split_commas=True))
    return all(not coding or coding in _decodable() for coding in codings)


async def read_body(response: httpx.Response) -> bytes:
    """A response's whole body: decoded when :func:`decodes` says so, else as sent."""
    if decodes(response.headers):
        return await response.aread()
    return b"".join([chunk async for chunk in response.aiter_raw()])


def response_headers(
    headers: httpx.Headers, ours: Mapping[str, str] | None = None
) -> list[tuple[bytes, bytes]]:
    """The upstream's response header lines as they go back to the client: each line as the
    bytes it came in (a name sent twice, two ``Set-Cookie``, stays two lines), its
    ``content-encoding`` kept only for a body passed back as sent (see :func:`decodes`), then
    ``ours`` (the proxy's, which replace the upstream's of the same names)."""
    dropped = _NOT_RETURNED if decodes(headers) else _NOT_RETURNED - {"content-encoding"}
    replaced = {name.lower() for name in ours or {}}
    lines = [
        (name.lower(), value)
        for name, value in headers.raw
        if (text := name.decode("latin-1").lower()) not in HOP_BY_HOP
        and text not in dropped
        and text not in replaced
    ]
    lines.extend(header_bytes((ours or {}).items()))
    return lines


def is_event_stream(headers: httpx.Headers, sent: bytes) -> bool:
    """Whether an upstream response is an SSE stream, passed back as it comes: its media type
    is ``text/event-stream`` in any case and with any parameters (media types are
    case-insensitive, RFC 9110), or it names none and the request (``sent``) asked for a stream
    (``"stream": true``)."""
    content_type: str = headers.get("content-type", "")
    if content_type.strip():
        return content_type.split(";", 1)[0].strip().lower() == "text/event-stream"
    try:
        body = loads(sent)
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("stream") is True


def _error(protocol: WireProtocol, status: int, body: bytes, model: str) -> ProviderError:
    text = body[:500].decode("utf-8", "replace")
    message = f"the upstream answered the summary request with HTTP {status}: {text}"
    kwargs: dict[str, Any] = {"provider": protocol.upstream, "model": model, "status": status}
    if looks_like_overflow(status, body):
        return ContextOverflowError(message, **kwargs)
    if status in (401, 403):
        return AuthenticationError(message, **kwargs)
    if status == 429:
        return RateLimitError(message, **kwargs)
    return ProviderError(message, retryable=status >= 500, **kwargs)


def _wants_completion_tokens(response: httpx.Response, body: Mapping[str, Any]) -> bool:
    return (
        response.status_code == 400
        and "max_tokens" in body
        and b"max_completion_tokens" in response.content[:2000]
    )


class UpstreamProvider:
    """The side query's provider: the upstream behind the proxy, with the client's headers.

    Args:
        protocol: the wire protocol of the request being compacted.
        client: the proxy's HTTP client.
        url: the upstream endpoint (``…/v1/chat/completions`` or ``…/v1/messages``).
        headers: the header lines to send (already filtered by :func:`forward_headers`), or
            a mapping of them.
        model: the request's model.
        timeout: seconds to wait for the summary (``--side-query-timeout``).
        connect: seconds to wait for the upstream to accept a connection, as the main
            request does, and at most half of ``timeout`` (the connection's wait ends before
            the whole request's): an upstream that accepts none is said not reached (it waited
            the whole ``timeout``, 300 s by default, and was called a timed-out summary).
    """

    def __init__(
        self,
        *,
        protocol: WireProtocol,
        client: httpx.AsyncClient,
        url: str,
        headers: Mapping[str, str] | Iterable[tuple[str, str]],
        model: str,
        timeout: float,
        connect: float = CONNECT_SECONDS,
    ) -> None:
        self.name = f"serve:{protocol.upstream}"
        self.model = model
        self.protocol = protocol
        self.client = client
        self.url = url
        self.headers = list(headers.items() if isinstance(headers, Mapping) else headers)
        self.timeout = timeout
        self.connect = min(connect, timeout / 2)
        self.calls = 0

    def _timeouts(self) -> httpx.Timeout:
        return httpx.Timeout(self.timeout, connect=self.connect)

    def _request(self, body: Any) -> dict[str, Any]:
        """The summary request's content and headers: its JSON written as the proxy writes
        bodies (:func:`~autocompact.serve.wire.dump`), the client's headers as httpx can send
        them (:func:`header_bytes`)."""
        lines = [(k, v) for k, v in self.headers if k.lower() != "content-type"]
        headers = header_bytes([*lines, ("content-type", "application/json")])
        return {"content": dump(body), "headers": headers}

    def _parse(self, response: httpx.Response) -> Completion:
        where: dict[str, Any] = {"provider": self.protocol.upstream, "model": self.model}
        if not decodes(response.headers):
            coding = response.headers.get("content-encoding")
            raise MalformedResponseError(
                f"the upstream's summary reply (HTTP {response.status_code}) is in a content "
                f"coding the proxy cannot decode: {coding}",
                **where,
            )
        if response.status_code >= 400:
            raise _error(self.protocol, response.status_code, response.content, self.model)
        try:
            # A count of thousands of digits is no count: read as none, not as a failed reply.
            reply = loads(response.content, long_integers_as_none=True)
        except ValueError as exc:
            raise MalformedResponseError(
                f"the upstream's summary reply is not JSON: {exc}", **where
            ) from exc
        try:
            return self.protocol.side_query_reply(reply)
        except MalformedResponseError as exc:
            raise MalformedResponseError(str(exc), **where) from exc
        except _UNREADABLE as exc:
            raise MalformedResponseError(
                f"the upstream's summary reply cannot be read: {described(exc)}",
                **where,
            ) from exc

    def _failed(self, exc: httpx.HTTPError | TimeoutError) -> ProviderError:
        """The summary request failed on the way: the upstream not reached (named, with what to
        check, as for the main request), no whole reply within the timeout, or broken off once
        there (said by its type when httpx gives no text)."""
        upstream = self.protocol.upstream
        fields: dict[str, Any] = {"provider": upstream, "model": self.model}
        if isinstance(exc, httpx.HTTPError) and (
            why := not_reached(upstream, exc, connect=self.connect)
        ):
            message = (
                f"the summary request could not reach {upstream_named(upstream, self.url)}: {why}"
            )
            return ProviderConnectionError(message, **fields)
        if isinstance(exc, httpx.TimeoutException | TimeoutError):
            message = (
                f"the summary request timed out after {self.timeout:g} s "
                "(autocompact serve --side-query-timeout)"
            )
            return ProviderTimeoutError(message, **fields)
        message = f"the summary request failed after reaching the upstream: {described(exc)}"
        return ProviderConnectionError(message, **fields)

    async def _post(self, body: Any) -> httpx.Response:
        """One summary request, its whole reply within the timeout (httpx bounds each read
        only: a reply trickled out a byte at a time would outlast it, and the lease)."""
        with anyio.fail_after(self.timeout):
            return await self.client.post(self.url, **self._request(body), timeout=self._timeouts())

    async def acomplete(self, request: ChatRequest) -> Completion:
        """Send the summary request and wait for the whole reply."""
        self.calls += 1
        body = self.protocol.side_query_body(self.model, request)
        try:
            response = await self._post(body)
            if _wants_completion_tokens(response, body):
                # OpenAI's newer models take max_completion_tokens only; compatible servers the
                # older max_tokens: the summary request is sent once more in the form asked for.
                body["max_completion_tokens"] = body.pop("max_tokens")
                response = await self._post(body)
        except (httpx.HTTPError, TimeoutError) as exc:
            raise self._failed(exc) from exc
        return self._parse(response)

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """The whole reply as one event (the side query needs no deltas)."""
        yield StreamDone(completion=await self.acomplete(request))

    def complete(self, request: ChatRequest) -> Completion:
        """Synchronous :meth:`acomplete` (a blocking client of its own)."""
        self.calls += 1
        body = self.protocol.side_query_body(self.model, request)
        try:
            with httpx.Client(timeout=self._timeouts()) as client:
                response = client.post(self.url, **self._request(body))
        except httpx.HTTPError as exc:
            raise self._failed(exc) from exc
        return self._parse(response)

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """The whole reply as one event."""
        yield StreamDone(completion=self.complete(request))

"""What the client is told when the upstream fails: its status, its kind and its message.

An upstream can fail before it answers (it cannot be reached, it accepts no connection, it closes
the connection without an answer, it does not answer within ``--timeout``) or after (its answer
breaks off, stalls past ``--timeout``, or cannot be decoded). The two call for different
remedies (start the server, or look at what the server did), so each message says which it
was, names the upstream's URL and, for a timeout, the option that sets it.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from autocompact.errors import described
from autocompact.serve.config import shown_url

__all__ = [
    "CONNECT_SECONDS",
    "Failure",
    "not_reached",
    "stream_broke",
    "upstream_failed",
    "upstream_named",
]

CONNECT_SECONDS = 10.0
"""Seconds to wait for the upstream to accept a connection (``--timeout`` bounds the rest)."""


@dataclass(frozen=True, kw_only=True)
class Failure:
    """An error the proxy answers in the upstream's place."""

    status: int
    kind: str
    message: str


def upstream_named(upstream: str, url: str) -> str:
    """The upstream as a message names it: its name and its URL (no password)."""
    return f"the {upstream} upstream ({shown_url(url)})"


def _stalled(timeout: float) -> str:
    return f"sent nothing for {timeout:g} s (autocompact serve --timeout)"


def not_reached(
    upstream: str, exc: httpx.HTTPError, *, connect: float = CONNECT_SECONDS
) -> str | None:
    """Why ``exc`` means that the ``upstream`` (``openai`` or ``anthropic``) was not reached,
    with what to check; ``None`` when it was reached (``connect``: the seconds it had to accept
    a connection). The main request and the summary request say it alike: a connection that
    was never accepted is no timeout of ``--timeout`` or ``--side-query-timeout``."""
    check = (
        f"check that it is running and that autocompact serve --upstream {upstream}=URL names it"
    )
    if isinstance(exc, httpx.ConnectTimeout):
        return f"it accepted no connection within {connect:g} s ({check})"
    if isinstance(exc, httpx.ConnectError | httpx.UnsupportedProtocol | httpx.ProxyError):
        return f"{described(exc)} ({check})"
    return None


def upstream_failed(
    upstream: str, url: str, exc: httpx.HTTPError, *, timeout: float, answered: bool
) -> Failure:
    """What the client gets when sending to ``url`` (``upstream``: ``openai`` or
    ``anthropic``) failed with ``exc``; ``answered``: the upstream's status had arrived and
    its body was being read; ``timeout``: ``--timeout``."""
    at = upstream_named(upstream, url)
    if (why := not_reached(upstream, exc)) is not None:
        message = f"{at} could not be reached: {why}"
        if isinstance(exc, httpx.ConnectTimeout):
            return Failure(status=504, kind="timeout_error", message=message)
        return Failure(status=502, kind="api_error", message=message)
    if isinstance(exc, httpx.TimeoutException):
        what = "its answer stopped: it" if answered else "it did not answer: it"
        message = f"{at} timed out; {what} {_stalled(timeout)}"
        return Failure(status=504, kind="timeout_error", message=message)
    if isinstance(exc, httpx.DecodingError):
        message = f"{at} sent an answer that cannot be decoded: {described(exc)}"
    elif answered:
        message = f"{at} broke off its answer before its end: {described(exc)}"
    else:
        message = f"{at} was reached but gave no answer: {described(exc)}"
    return Failure(status=502, kind="api_error", message=message)


def stream_broke(upstream: str, url: str, exc: httpx.HTTPError, *, timeout: float) -> str:
    """Why a stream from ``url`` ended before its end, for the error event the client gets and
    the log (the status was sent when the stream began: only an event can say it now)."""
    at = upstream_named(upstream, url)
    if isinstance(exc, httpx.TimeoutException):
        return f"{at} timed out mid-stream: it {_stalled(timeout)}"
    return f"{at} broke off its stream: {described(exc)}"

"""Responses followed by work the client does not wait for.

The proxy learns from the usage a response reports, and writes its log line, once the response's
last byte went out (``ServeApp._then``): :class:`Followed` and :class:`FollowedStream` are
Starlette's responses with that follow-up run after them, also when the client hung up (shielded
from the cancellation), so it runs exactly once whatever became of the response.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import anyio
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

__all__ = ["Followed", "FollowedStream"]


async def _followed(sending: Awaitable[None], then: Callable[[], Awaitable[None]]) -> None:
    try:
        await sending
    finally:  # shielded: a client that hung up cancels the sending, not what follows it
        with anyio.CancelScope(shield=True):
            await then()


class Followed(Response):
    """A response, then what follows it, once it was sent or could not be.

    ``lines``: header lines (name, value) as bytes, each sent as it is (a name may repeat).
    """

    def __init__(
        self,
        content: bytes,
        then: Callable[[], Awaitable[None]],
        *,
        lines: Sequence[tuple[bytes, bytes]] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(content, **kwargs)
        self.raw_headers.extend(lines)
        self.then = then

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await _followed(super().__call__(scope, receive, send), self.then)


class FollowedStream(StreamingResponse):
    """A streamed response, then what follows it, as :class:`Followed`."""

    def __init__(
        self,
        content: AsyncIterator[bytes],
        then: Callable[[], Awaitable[None]],
        *,
        lines: Sequence[tuple[bytes, bytes]] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(content, **kwargs)
        self.raw_headers.extend(lines)
        self.then = then

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await _followed(super().__call__(scope, receive, send), self.then)

"""Stopping a stream early (Ctrl-C in the REPL) closes the HTTP response, for every adapter."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx2
import pytest

from autocompact.content import Message
from autocompact.providers.anthropic import AnthropicProvider
from autocompact.providers.base import ChatRequest, Provider, TextDelta
from autocompact.providers.gemini import GeminiProvider
from autocompact.providers.openai import OpenAIProvider

from . import test_anthropic as anth
from . import test_gemini as gem
from . import test_openai as oai
from .wire import Wire


class TrackedStream(httpx2.SyncByteStream):
    """A response body that records whether it was closed."""

    def __init__(self, events: list[bytes]) -> None:
        self.events = events
        self.closed = False

    def __iter__(self) -> Iterator[bytes]:
        yield from self.events

    def close(self) -> None:
        self.closed = True


def _lines(events: list[dict[str, Any]], *, named: bool = False) -> list[bytes]:
    out = []
    for event in events:
        prefix = f"event: {event['type']}\n" if named else ""
        out.append(f"{prefix}data: {json.dumps(event)}\n\n".encode())
    return out


CASES: list[Any] = [
    pytest.param(
        lambda w: OpenAIProvider("gpt-4.1", api_key="k", http_client=w.client(), max_retries=0),
        _lines([oai.chunk({"content": "one "}), oai.chunk({"content": "two"}, finish="stop")]),
        id="openai",
    ),
    pytest.param(
        lambda w: AnthropicProvider(anth.MODEL, api_key="k", http_client=w.client(), max_retries=0),
        _lines(
            anth.events(
                [
                    (
                        "text",
                        [
                            {"type": "text_delta", "text": "one "},
                            {"type": "text_delta", "text": "two"},
                        ],
                    )
                ]
            ),
            named=True,
        ),
        id="anthropic",
    ),
    pytest.param(
        lambda w: GeminiProvider(gem.MODEL, api_key="k", http_client=w.client(), max_retries=0),
        _lines([gem.reply([{"text": "one "}], finish=None), gem.reply([{"text": "two"}])]),
        id="gemini",
    ),
]


@pytest.mark.parametrize(("build", "events"), CASES)
def test_closing_a_stream_early_closes_the_response(
    wire: Wire, build: Callable[[Wire], Provider], events: list[bytes]
) -> None:
    """After the first delta the caller stops: the response body is closed, nothing leaks."""
    body = TrackedStream(events)
    wire.queue(httpx2.Response(200, stream=body, headers={"content-type": "text/event-stream"}))
    stream = build(wire).stream(ChatRequest(messages=(Message.user("x"),)))
    first = next(stream)
    assert first == TextDelta(text="one ")
    stream.close()  # type: ignore[attr-defined]
    assert body.closed

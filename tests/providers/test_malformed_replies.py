"""Replies no provider should send, through the real SDKs on a scripted wire: each ends in the
library's own error, naming the provider, or is read (a count that is no count reads as not
reported), never in a raw ``AssertionError``, ``IndexError``, ``OverflowError``,
``RecursionError`` or ``TypeError``. The cases come from a fuzzer run (2026-12-06); each
failed on the code before."""

from __future__ import annotations

from types import SimpleNamespace

import httpx2
import pytest

from autocompact.errors import MalformedResponseError, ProviderError
from autocompact.providers.anthropic_compaction import supported_by_capabilities

from . import test_anthropic, test_gemini, test_openai
from .wire import Wire, json_response, sse

CHAT = test_anthropic.CHAT
ANTHROPIC_START = test_anthropic.events([])[0]


def _raw(body: bytes) -> httpx2.Response:
    return httpx2.Response(200, content=body, headers={"content-type": "application/json"})


def test_an_anthropic_reply_that_is_no_stream_is_malformed(wire: Wire) -> None:
    wire.queue(httpx2.Response(200, content=b""))
    with pytest.raises(MalformedResponseError) as caught:
        test_anthropic.make(wire).complete(CHAT)
    assert caught.value.provider == "anthropic"


def test_an_anthropic_delta_before_its_block_is_malformed(wire: Wire) -> None:
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta"}}
    wire.queue(sse([ANTHROPIC_START, delta], named=True))
    with pytest.raises(MalformedResponseError):
        test_anthropic.make(wire).complete(CHAT)


def test_an_error_type_that_is_no_string_still_names_the_error(wire: Wire) -> None:
    """The status decides (a 500: retryable), not a ``TypeError`` on the odd ``type``."""
    wire.queue(json_response({"type": "error", "error": {"type": 500, "message": "boom"}}, 500))
    with pytest.raises(ProviderError) as caught:
        test_anthropic.make(wire).complete(CHAT)
    assert caught.value.status == 500
    assert "boom" in str(caught.value)


def test_a_body_nested_past_the_parser_is_malformed(wire: Wire) -> None:
    wire.queue(_raw(b"[" * 100_000))
    with pytest.raises(MalformedResponseError):
        test_openai.make(wire).complete(CHAT)


def test_a_usage_count_of_1e999_reads_as_not_reported(wire: Wire) -> None:
    """The reply is kept; only the count that is no count is dropped (it was OverflowError)."""
    wire.queue(
        _raw(
            b'{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,'
            b'"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],'
            b'"usage":{"prompt_tokens":1e999,"completion_tokens":1,"total_tokens":2}}'
        )
    )
    completion = test_openai.make(wire).complete(CHAT)
    assert completion.message.text == "ok"
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == 0


def test_a_gemini_error_status_that_is_no_string_still_names_the_error(wire: Wire) -> None:
    wire.queue(json_response({"error": {"code": 400, "message": "boom", "status": 5}}, 400))
    with pytest.raises(ProviderError) as caught:
        test_gemini.make(wire).complete(CHAT)
    assert "boom" in str(caught.value)


@pytest.mark.parametrize(
    "compaction",
    ["yes", SimpleNamespace(supported="true"), SimpleNamespace()],
    ids=["a-string", "a-string-flag", "no-flag"],
)
def test_capability_data_of_another_shape_does_not_say_supported(compaction: object) -> None:
    info = SimpleNamespace(capabilities=SimpleNamespace(compaction=compaction))
    assert supported_by_capabilities(info) is False

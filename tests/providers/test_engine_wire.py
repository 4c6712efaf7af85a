"""The engine over each real adapter on a scripted wire: a truncated summary is refused, and a
"prompt too long" rejection triggers one reactive compaction and one retry."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from autocompact.chat import AsyncChatSession, ChatSession
from autocompact.compaction import CompressionStatus, CompressionTrigger
from autocompact.content import Message
from autocompact.errors import ContextOverflowError
from autocompact.providers.anthropic import AnthropicProvider
from autocompact.providers.base import Provider, StreamDone, TextDelta
from autocompact.providers.gemini import GeminiProvider
from autocompact.providers.openai import OpenAIProvider
from autocompact.thresholds import COMPACT_MAX_OUTPUT_TOKENS

from . import test_anthropic as anth
from . import test_gemini as gem
from . import test_openai as oai
from .wire import Sent, Wire, json_response, sse

SUMMARY = "<state_snapshot><overall_goal>ship it</overall_goal></state_snapshot>"


@dataclass(frozen=True)
class Script:
    """How one provider says things on the wire."""

    name: str
    build: Callable[[Wire], Provider]
    ok: Callable[[str], Any]  # a normal reply with some text
    truncated: Callable[[str], Any]  # a reply stopped by the output cap
    overflow: Callable[[], Any]  # a "prompt is too long" rejection
    is_side_query: Callable[[Sent], bool]
    stream_ok: Callable[[str], Any]  # a normal streamed reply


def _openai_ok(text: str) -> Any:
    usage = {"prompt_tokens": 900, "completion_tokens": 40, "total_tokens": 940}
    return json_response(oai.completion(text, usage=usage))


SCRIPTS = [
    Script(
        name="openai",
        build=lambda wire: OpenAIProvider(
            "gpt-5.1",
            api_key=oai.KEY,
            http_client=wire.client(),
            async_http_client=wire.async_client(),
            max_retries=0,
        ),
        ok=_openai_ok,
        truncated=lambda text: json_response(oai.completion(text, finish="length")),
        overflow=lambda: json_response(
            oai.error_body("maximum context length exceeded", "context_length_exceeded"), 400
        ),
        is_side_query=lambda sent: (
            sent.json.get("reasoning_effort") == "none"
            and sent.json.get("max_completion_tokens") == COMPACT_MAX_OUTPUT_TOKENS
        ),
        stream_ok=lambda text: sse(
            [
                oai.chunk({"role": "assistant", "content": text}, finish="stop"),
                oai.chunk(
                    None, usage={"prompt_tokens": 900, "completion_tokens": 4, "total_tokens": 904}
                ),
            ],
            done=True,
        ),
    ),
    Script(
        name="anthropic",
        build=lambda wire: AnthropicProvider(
            anth.MODEL,
            api_key=anth.KEY,
            http_client=wire.client(),
            async_http_client=wire.async_client(),
            max_retries=0,
            native_compaction=False,  # these scripts answer our own summary prompt
        ),
        ok=lambda text: anth.text_stream(text, output_tokens=40),
        truncated=lambda text: anth.text_stream(text, stop="max_tokens"),
        overflow=lambda: anth.error(
            "invalid_request_error", "prompt is too long: 250000 tokens > 200000 maximum", 400
        ),
        is_side_query=lambda sent: (
            sent.json.get("thinking") == {"type": "disabled"}
            and sent.json.get("max_tokens") == COMPACT_MAX_OUTPUT_TOKENS
        ),
        stream_ok=lambda text: anth.text_stream(
            text, output_tokens=4, start_usage=anth.usage(input_tokens=900)
        ),
    ),
    Script(
        name="gemini",
        build=lambda wire: GeminiProvider(
            gem.MODEL,
            api_key=gem.KEY,
            http_client=wire.client(),
            async_http_client=wire.async_client(),
            max_retries=0,
        ),
        ok=lambda text: json_response(
            gem.reply([{"text": text}], usage={"promptTokenCount": 900, "candidatesTokenCount": 40})
        ),
        truncated=lambda text: json_response(gem.reply([{"text": text}], finish="MAX_TOKENS")),
        overflow=lambda: gem.error(
            400, "INVALID_ARGUMENT", "The input token count (2000000) exceeds the maximum"
        ),
        is_side_query=lambda sent: (
            sent.json.get("generationConfig", {}).get("thinkingConfig")
            == {"include_thoughts": False, "thinking_budget": 0}
        ),
        stream_ok=lambda text: sse(
            [
                gem.reply(
                    [{"text": text}], usage={"promptTokenCount": 900, "candidatesTokenCount": 4}
                )
            ]
        ),
    ),
]
IDS = [s.name for s in SCRIPTS]


def _history(turns: int = 6) -> list[Message]:
    out: list[Message] = []
    for i in range(turns):
        out.append(Message.user(f"question {i}: " + "details " * 150))
        out.append(Message.model(f"answer {i}: " + "findings " * 150))
    return out


@pytest.mark.parametrize("script", SCRIPTS, ids=IDS)
def test_truncated_side_query_is_refused(wire: Wire, script: Script) -> None:
    """A summary that stopped on its cap is never kept: status truncated, history unchanged."""
    history = _history()
    session = ChatSession(script.build(wire), context_window=200_000, history=history)
    wire.queue(script.truncated("<state_snapshot><overall_goal>ship"))
    info = session.compress()
    assert info.status is CompressionStatus.COMPRESSION_FAILED_OUTPUT_TRUNCATED
    assert session.history == tuple(history)
    assert len(wire.sent) == 1
    assert script.is_side_query(wire.last)


@pytest.mark.parametrize("script", SCRIPTS, ids=IDS)
def test_side_query_success_replaces_history(wire: Wire, script: Script) -> None:
    """A complete summary replaces the older turns (the positive control of the test above)."""
    history = _history()
    session = ChatSession(script.build(wire), context_window=200_000, history=history)
    wire.queue(script.ok(SUMMARY))
    info = session.compress()
    assert info.status is CompressionStatus.COMPRESSED
    assert len(session.history) < len(history)
    assert SUMMARY in session.history[0].text


@pytest.mark.parametrize("script", SCRIPTS, ids=IDS)
def test_overflow_triggers_one_reactive_compaction_and_retry(wire: Wire, script: Script) -> None:
    """Too long → forced compaction through the side query → the send is retried once."""
    history = _history()
    session = ChatSession(script.build(wire), context_window=200_000, history=history)
    wire.queue(script.overflow(), script.ok(SUMMARY), script.ok("retried fine"))
    completion = session.send("next step please")
    assert completion.text == "retried fine"
    assert len(wire.sent) == 3
    first, side, retry = wire.sent
    assert not script.is_side_query(first)
    assert script.is_side_query(side)
    assert not script.is_side_query(retry)
    assert len(str(retry.body)) < len(str(first.body))
    info = session.compactions[-1]
    assert (info.trigger, info.status) == (
        CompressionTrigger.REACTIVE,
        CompressionStatus.COMPRESSED,
    )


@pytest.mark.parametrize("script", SCRIPTS, ids=IDS)
def test_overflow_after_the_retry_surfaces_the_provider_error(wire: Wire, script: Script) -> None:
    """If the retried send is still too long, the provider's error is raised: no second retry."""
    history = _history()
    session = ChatSession(script.build(wire), context_window=200_000, history=history)
    wire.queue(script.overflow(), script.ok(SUMMARY), script.overflow())
    with pytest.raises(ContextOverflowError) as info:
        session.send("next step please")
    assert info.value.provider == script.name
    assert len(wire.sent) == 3


@pytest.mark.parametrize("script", SCRIPTS, ids=IDS)
def test_streamed_turn_overflow_compacts_and_streams_the_retry(wire: Wire, script: Script) -> None:
    """send_stream: an overflow before the stream starts → reactive compaction → streamed retry."""
    session = ChatSession(script.build(wire), context_window=200_000, history=_history())
    wire.queue(script.overflow(), script.ok(SUMMARY), script.stream_ok("streamed retry"))
    events = list(session.send_stream("next step please"))
    assert TextDelta(text="streamed retry") in events
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.completion.text == "streamed retry"
    assert script.is_side_query(wire.sent[1])
    assert session.last_prompt_token_count == 900
    assert session.compactions[-1].trigger is CompressionTrigger.REACTIVE


@pytest.mark.parametrize("script", SCRIPTS, ids=IDS)
async def test_async_session_refuses_truncation_and_retries_overflow(
    wire: Wire, script: Script
) -> None:
    """AsyncChatSession over each adapter: truncated summary refused; overflow → one retry."""
    history = _history()
    session = AsyncChatSession(script.build(wire), context_window=200_000, history=history)
    wire.queue(script.truncated("<state_snapshot> cut"))
    info = await session.compress()
    assert info.status is CompressionStatus.COMPRESSION_FAILED_OUTPUT_TRUNCATED
    assert session.history == tuple(history)
    wire.queue(script.overflow(), script.ok(SUMMARY), script.stream_ok("async retry"))
    events = [e async for e in session.send_stream("go on")]
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.completion.text == "async retry"
    assert len(wire.sent) == 4

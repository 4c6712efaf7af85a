"""The Anthropic adapter through the real ``anthropic`` SDK on a scripted wire."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from autocompact.content import FunctionCallPart, Message, TextPart, ThinkingPart
from autocompact.errors import (
    AuthenticationError,
    ContextOverflowError,
    MalformedResponseError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
)
from autocompact.providers.anthropic import AnthropicProvider
from autocompact.providers.base import (
    ChatRequest,
    FinishReason,
    StreamDone,
    TextDelta,
    ThinkingDelta,
    ToolSpec,
)
from autocompact.thresholds import COMPACT_MAX_OUTPUT_TOKENS

from .wire import Wire, connect_error, find_nulls, json_response, sse, timeout_error

KEY = "sk-ant-api03-SECRETSECRETSECRET-0123456789"
MODEL = "claude-sonnet-4-6"

SIDE_QUERY = ChatRequest(
    messages=(Message.user("summarize this"),),
    system_instruction="You summarize.",
    max_output_tokens=COMPACT_MAX_OUTPUT_TOKENS,
    thinking=False,
    purpose="side_query",
)
CHAT = ChatRequest(messages=(Message.user("hello"),))


def usage(**counts: int) -> dict[str, int]:
    return {"input_tokens": 10, "output_tokens": 1, **counts}


def events(
    blocks: list[tuple[str, list[dict[str, Any]]]],
    *,
    stop: str | None = "end_turn",
    start_usage: dict[str, int] | None = None,
    output_tokens: int = 5,
) -> list[dict[str, Any]]:
    """A Messages stream: message_start, one block per (start type, deltas), message_delta."""
    out: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": start_usage or usage(),
            },
        }
    ]
    for index, (kind, deltas) in enumerate(blocks):
        start: dict[str, Any] = {"type": kind}
        if kind == "text":
            start["text"] = ""
        elif kind == "thinking":
            start |= {"thinking": "", "signature": ""}
        elif kind == "tool_use":
            start |= {"id": "toolu_1", "name": "Read", "input": {}}
        out.append({"type": "content_block_start", "index": index, "content_block": start})
        out.extend({"type": "content_block_delta", "index": index, "delta": d} for d in deltas)
        out.append({"type": "content_block_stop", "index": index})
    out.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens},
        }
    )
    out.append({"type": "message_stop"})
    return out


def text_stream(text: str = "ok", **kwargs: Any) -> Any:
    return sse(events([("text", [{"type": "text_delta", "text": text}])], **kwargs), named=True)


def make(wire: Wire, model: str = MODEL, **kwargs: Any) -> AnthropicProvider:
    return AnthropicProvider(
        model,
        api_key=KEY,
        http_client=wire.client(),
        async_http_client=wire.async_client(),
        max_retries=0,
        **kwargs,
    )


# -- the side query on the wire ----------------------------------------------------------------


@pytest.mark.parametrize("model", ["claude-sonnet-4-6", "claude-opus-4-1", "claude-haiku-4-5"])
def test_side_query_sends_max_tokens_and_thinking_disabled(wire: Wire, model: str) -> None:
    """The side query carries max_tokens=20K and thinking disabled (streamed, so Opus 4.1 works)."""
    wire.queue(text_stream("summary"))
    result = make(wire, model).complete(SIDE_QUERY)
    body = wire.last.json
    assert body["max_tokens"] == COMPACT_MAX_OUTPUT_TOKENS
    assert body["thinking"] == {"type": "disabled"}
    assert body["system"] == "You summarize."
    assert body["model"] == model
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "summarize this"}]}
    ]
    assert find_nulls(body) == []
    assert wire.last.url == "https://api.anthropic.com/v1/messages"
    assert result.text == "summary"


def test_chat_without_cap_still_sends_max_tokens_and_no_thinking_field(wire: Wire) -> None:
    """max_tokens is required: an uncapped turn sends the default; thinking unset sends nothing."""
    wire.queue(text_stream())
    make(wire, default_max_tokens=4096).complete(CHAT)
    body = wire.last.json
    assert body["max_tokens"] == 4096
    assert "thinking" not in body
    assert "system" not in body


def test_thinking_on_sends_a_budget_below_the_cap_and_tools(wire: Wire) -> None:
    """thinking=True enables thinking with a budget under max_tokens (on a model that takes
    budgets); tools use input_schema."""
    wire.queue(text_stream())
    tool = ToolSpec(name="Read", parameters={"type": "object", "properties": {}})
    make(wire, "claude-haiku-4-5").complete(
        ChatRequest(messages=CHAT.messages, thinking=True, max_output_tokens=8000, tools=(tool,))
    )
    body = wire.last.json
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 4000}
    assert body["tools"] == [{"name": "Read", "input_schema": {"type": "object", "properties": {}}}]


# What each family is sent: the side query (thinking=False, 20K cap) and thinking=True (8K cap).
_SUMMARIZED = {"thinking": {"type": "adaptive", "display": "summarized"}}
THINKING = [
    pytest.param(
        "claude-haiku-4-5",
        {"thinking": {"type": "disabled"}, "max_tokens": 20_000},
        {"thinking": {"type": "enabled", "budget_tokens": 4000}},
        id="budget",
    ),
    # Opus and Sonnet 4.6: adaptive preferred ("enabled" is deprecated), "disabled" accepted.
    pytest.param(
        "claude-sonnet-4-6",
        {"thinking": {"type": "disabled"}, "max_tokens": 20_000},
        {"thinking": {"type": "adaptive"}},
        id="4.6-adaptive",
    ),
    # Opus 4.7 and 4.8 refuse "disabled" and a budget, and do not think unless asked.
    pytest.param(
        "claude-opus-4-7",
        {"thinking": None, "output_config": None, "max_tokens": 20_000},
        _SUMMARIZED,
        id="opus-4.7-left-out",
    ),
    # Opus 5, Sonnet 5, Haiku 5.5 think when the field is left out, and take "disabled".
    pytest.param(
        "claude-sonnet-5",
        {"thinking": {"type": "disabled"}, "max_tokens": 20_000},
        _SUMMARIZED,
        id="sonnet-5-disabled",
    ),
    # Sonnet 5.5 refuses "disabled"; "between_tools" turns thinking off.
    pytest.param(
        "claude-sonnet-5-5",
        {"thinking": {"type": "between_tools"}, "max_tokens": 20_000},
        _SUMMARIZED,
        id="sonnet-5.5-between-tools",
    ),
    # Fable, Mythos, Opus 5.5 (and families not known yet) cannot turn thinking off.
    *(
        pytest.param(
            model,
            {"thinking": None, "output_config": {"effort": "low"}, "max_tokens": 28_192},
            _SUMMARIZED,
            id=model,
        )
        for model in ("claude-fable-5-2", "claude-opus-5-5", "claude-opus-6")
    ),
]


@pytest.mark.parametrize(("model", "side", "on"), THINKING)
def test_each_family_gets_the_thinking_setting_it_accepts(
    wire: Wire, model: str, side: dict[str, Any], on: dict[str, Any]
) -> None:
    """The side query turns thinking off where the model allows it, and else asks for the
    lowest effort with room for its thinking; thinking=True uses the form the model takes."""
    wire.queue(text_stream("summary"), text_stream("answer"))
    make(wire, model).complete(SIDE_QUERY)
    body = wire.last.json
    assert {key: body.get(key) for key in side} == side
    make(wire, model).complete(
        ChatRequest(messages=CHAT.messages, thinking=True, max_output_tokens=8000)
    )
    body = wire.last.json
    assert {key: body.get(key) for key in on} == on
    assert body["max_tokens"] == 8000


def test_unsigned_thinking_is_left_out_and_signed_thinking_kept(wire: Wire) -> None:
    """Thinking without a signature (another provider's) is not sent; signed thinking is."""
    wire.queue(text_stream())
    history = (
        Message.user("a"),
        Message.model(
            ThinkingPart(text="foreign"), ThinkingPart(text="mine", signature="sig"), "b"
        ),
        Message.user("c"),
    )
    make(wire).complete(ChatRequest(messages=history))
    assert wire.last.json["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "mine", "signature": "sig"},
        {"type": "text", "text": "b"},
    ]


# -- replies -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("end_turn", FinishReason.STOP),
        ("stop_sequence", FinishReason.STOP),
        ("max_tokens", FinishReason.LENGTH),
        ("tool_use", FinishReason.TOOL_CALL),
        ("refusal", FinishReason.CONTENT_FILTER),
        ("pause_turn", FinishReason.OTHER),
    ],
)
def test_stop_reasons_map(wire: Wire, raw: str, expected: FinishReason) -> None:
    """Every stop_reason maps to the normalized reason."""
    wire.queue(text_stream(stop=raw))
    result = make(wire).complete(CHAT)
    assert result.finish_reason is expected
    assert result.raw_finish_reason == raw


def test_context_window_exceeded_stop_reason_is_an_overflow(wire: Wire) -> None:
    """stop_reason model_context_window_exceeded raises ContextOverflowError."""
    wire.queue(text_stream(stop="model_context_window_exceeded"))
    with pytest.raises(ContextOverflowError) as info:
        make(wire).complete(CHAT)
    assert info.value.provider == "anthropic"


def test_prompt_size_sums_input_and_both_cache_counts(wire: Wire) -> None:
    """Prompt tokens = input + cache creation + cache read; cached = cache read."""
    start = usage(input_tokens=3, cache_creation_input_tokens=2000, cache_read_input_tokens=150000)
    wire.queue(text_stream(start_usage=start, output_tokens=321))
    result = make(wire).complete(CHAT)
    assert result.usage is not None
    assert result.usage.prompt_tokens == 152003
    assert result.usage.cached_tokens == 150000
    assert result.usage.output_tokens == 321


def test_stream_yields_thinking_text_and_tool_use_then_usage(wire: Wire) -> None:
    """A streamed turn yields thinking and text deltas and ends with the parsed message."""
    stream = events(
        [
            (
                "thinking",
                [
                    {"type": "thinking_delta", "thinking": "let me"},
                    {"type": "signature_delta", "signature": "SIG"},
                ],
            ),
            (
                "text",
                [{"type": "text_delta", "text": "Rea"}, {"type": "text_delta", "text": "ding"}],
            ),
            ("tool_use", [{"type": "input_json_delta", "partial_json": '{"path": "a.py"}'}]),
        ],
        stop="tool_use",
        start_usage=usage(input_tokens=77),
    )
    wire.queue(sse(stream, named=True))
    out = list(make(wire).stream(CHAT))
    assert out[:3] == [ThinkingDelta(text="let me"), TextDelta(text="Rea"), TextDelta(text="ding")]
    done = out[-1]
    assert isinstance(done, StreamDone)
    assert done.completion.message.parts == (
        ThinkingPart(text="let me", signature="SIG"),
        TextPart(text="Reading"),
        FunctionCallPart(id="toolu_1", name="Read", arguments={"path": "a.py"}),
    )
    assert done.completion.finish_reason is FinishReason.TOOL_CALL
    assert done.completion.usage is not None
    assert done.completion.usage.prompt_tokens == 77
    assert wire.last.json["stream"] is True


async def test_async_complete_and_stream(wire: Wire) -> None:
    """The async methods send the same body and parse the same way."""
    wire.queue(text_stream("one", stop="max_tokens"), text_stream("two"))
    provider = make(wire)
    result = await provider.acomplete(SIDE_QUERY)
    assert result.finish_reason is FinishReason.LENGTH
    assert wire.sent[0].json["thinking"] == {"type": "disabled"}
    out = [e async for e in provider.astream(CHAT)]
    assert out[0] == TextDelta(text="two")
    assert isinstance(out[-1], StreamDone)


# -- errors ------------------------------------------------------------------------------------


def error(kind: str, message: str, status: int) -> Any:
    return json_response({"type": "error", "error": {"type": kind, "message": message}}, status)


ERRORS = [
    pytest.param(
        error("invalid_request_error", "prompt is too long: 212345 tokens > 200000 maximum", 400),
        ContextOverflowError,
        400,
        id="prompt-too-long",
    ),
    pytest.param(
        error("request_too_large", "Request exceeds the maximum size", 413),
        ContextOverflowError,
        413,
        id="413",
    ),
    pytest.param(
        error("authentication_error", f"invalid x-api-key {KEY}", 401),
        AuthenticationError,
        401,
        id="401",
    ),
    pytest.param(error("permission_error", "no access", 403), AuthenticationError, 403, id="403"),
    pytest.param(error("rate_limit_error", "slow down", 429), RateLimitError, 429, id="429"),
    pytest.param(error("overloaded_error", "Overloaded", 529), RateLimitError, 529, id="529"),
    pytest.param(error("api_error", "internal", 500), ProviderError, 500, id="500"),
    pytest.param(timeout_error, ProviderTimeoutError, None, id="timeout"),
    pytest.param(connect_error, ProviderConnectionError, None, id="connection"),
]


@pytest.mark.parametrize(("reply", "expected", "status"), ERRORS)
def test_errors_become_project_errors_without_the_key(
    wire: Wire,
    caplog: pytest.LogCaptureFixture,
    reply: Any,
    expected: type[ProviderError],
    status: int | None,
) -> None:
    """SDK failures become project errors with provider/model/status, the key never shown."""
    caplog.set_level(logging.DEBUG)
    wire.queue(reply)
    with pytest.raises(expected) as info:
        make(wire).complete(CHAT)
    err = info.value
    assert type(err) is expected
    assert (err.provider, err.model, err.status) == ("anthropic", MODEL, status)
    assert KEY not in str(err)
    chain = err.__cause__
    while chain is not None:
        assert KEY not in str(chain)
        chain = chain.__cause__
    assert KEY not in caplog.text


def test_error_event_inside_a_stream(wire: Wire) -> None:
    """An overloaded error event mid-stream becomes a RateLimitError."""
    stream = events([("text", [{"type": "text_delta", "text": "par"}])])[:3]
    stream.append({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    wire.queue(sse(stream, named=True))
    with pytest.raises(RateLimitError) as info:
        list(make(wire).stream(CHAT))
    assert info.value.provider == "anthropic"


def test_malformed_stream_is_a_malformed_response(wire: Wire) -> None:
    """A stream whose events are not the Messages format is a MalformedResponseError."""
    import httpx2

    wire.queue(
        httpx2.Response(
            200,
            content=b"event: message_start\ndata: {not json}\n\n",
            headers={"content-type": "text/event-stream"},
        )
    )
    with pytest.raises(MalformedResponseError) as info:
        make(wire).complete(CHAT)
    assert (info.value.provider, info.value.model) == ("anthropic", MODEL)


# -- the command line's default model --------------------------------------------------------


def _deprecated_models() -> dict[str, str]:
    """The installed SDK's own table of deprecated models and their end-of-life dates (it warns
    on every request to one): ``anthropic._data`` in newer releases, the messages resource
    module in older ones."""
    import importlib

    for module in ("anthropic._data.deprecated_models", "anthropic.resources.messages.messages"):
        try:
            return dict(importlib.import_module(module).DEPRECATED_MODELS)
        except (ImportError, AttributeError):
            continue
    pytest.fail("the anthropic SDK has no DEPRECATED_MODELS table where it used to: look again")


def _sdk_model_names() -> tuple[str, ...]:
    """The model names the installed SDK lists (the literal part of ``ModelParam``)."""
    import typing

    from anthropic.types.model_param import ModelParam

    for arg in typing.get_args(ModelParam):
        if typing.get_origin(arg) is typing.Literal:
            return typing.get_args(arg)
    pytest.fail("the anthropic SDK's ModelParam lists no model names: look again")


def test_the_default_model_is_not_deprecated_by_the_sdk(wire: Wire) -> None:
    """`autocompact chat --provider anthropic` defaults to a model the installed SDK does not
    list as deprecated, and a request to it raises no DeprecationWarning (the default was
    claude-sonnet-4-5, whose end of life was 30 November 2026: a new user's first chat failed)."""
    import warnings

    from autocompact.cli.provider_choice import DEFAULT_MODELS
    from autocompact.limits import known_limits

    table = _deprecated_models()
    assert table  # the table was found and read
    default = DEFAULT_MODELS["anthropic"]
    assert default not in table, f"{default} reaches end of life on {table[default]}"
    # A model past its end of life leaves the table and the SDK's list of model names with it.
    assert default in _sdk_model_names()
    limits = known_limits(default)
    assert limits is not None
    assert limits.context_window == 200_000
    wire.queue(text_stream("hi"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert make(wire, default).complete(CHAT).message.text == "hi"
    assert wire.last.json["model"] == default


def test_the_family_is_read_through_provider_prefixes_and_dates() -> None:
    """Bedrock and gateway names, and dated snapshots, are the same family."""
    from autocompact.providers.claude_thinking import claude_thinking

    assert claude_thinking("us.anthropic.claude-opus-4-7").off is None
    assert claude_thinking("anthropic/claude-sonnet-5-5").off == {"type": "between_tools"}
    assert claude_thinking("claude-opus-4-5-20251101").on is None  # a budget
    assert claude_thinking("claude-fable-5-1").always_thinks
    assert not claude_thinking("gpt-6-luna").always_thinks

"""The OpenAI Responses API adapter through the real ``openai`` SDK on a scripted wire.

Every scripted response is validated against the SDK's own ``Response`` / ``CompactedResponse``
/ stream-event models, and sent input items against the SDK's input item types, so the test
data follows the wire format the wheel describes.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest
from openai.types.responses import (
    CompactedResponse,
    Response,
    ResponseCompletedEvent,
    ResponseTextDeltaEvent,
)
from pydantic import TypeAdapter

from autocompact.compaction import CompressionService, CompressionStatus, CompressOptions
from autocompact.content import FunctionCallPart, Message, OpaquePart, TextPart, ThinkingPart
from autocompact.content import FunctionResponsePart as Result
from autocompact.errors import (
    AuthenticationError,
    ContentError,
    ContextOverflowError,
    ProviderConnectionError,
    ProviderError,
    RateLimitError,
)
from autocompact.providers.base import (
    ChatRequest,
    FinishReason,
    NativeOutcome,
    NativeSource,
    StreamDone,
    TextDelta,
    ThinkingDelta,
    ToolSpec,
)
from autocompact.providers.openai_responses import OpenAIResponsesProvider, openai_family
from autocompact.providers.registry import get_provider
from autocompact.thresholds import COMPACT_MAX_OUTPUT_TOKENS

from .wire import Wire, connect_error, find_nulls, json_response, sse

KEY = "sk-test-SECRETSECRETSECRET-0123456789"
MODEL = "gpt-5.4"

SIDE_QUERY = ChatRequest(
    messages=(Message.user("summarize this"),),
    system_instruction="You summarize.",
    max_output_tokens=COMPACT_MAX_OUTPUT_TOKENS,
    thinking=False,
    purpose="side_query",
)
CHAT = ChatRequest(messages=(Message.user("hello"),))


def usage(input_tokens: int = 100, output_tokens: int = 10, cached: int = 0) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 3},
        "total_tokens": input_tokens + output_tokens,
    }


def message_item(text: str, kind: str = "output_text") -> dict[str, Any]:
    block: dict[str, Any] = (
        {"type": "output_text", "text": text, "annotations": []}
        if kind == "output_text"
        else {"type": "refusal", "refusal": text}
    )
    return {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [block],
    }


REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "thinking about it"}],
    "encrypted_content": "gAAAA-encrypted",
}
CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "Read",
    "arguments": '{"path": "a.py"}',
    "status": "completed",
}


def response(
    output: list[dict[str, Any]],
    *,
    status: str = "completed",
    incomplete: str | None = None,
    error: dict[str, Any] | None = None,
    cached: int = 0,
) -> dict[str, Any]:
    """A Responses API response, validated against the SDK's ``Response``."""
    payload: dict[str, Any] = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1.0,
        "model": MODEL,
        "status": status,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage(cached=cached),
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        "error": error,
    }
    Response.model_validate(payload)
    return payload


def stream_of(*deltas: str, final: dict[str, Any]) -> Any:
    """A stream: text deltas, then response.completed (each validated as an SDK event)."""
    events: list[dict[str, Any]] = []
    for n, delta in enumerate(deltas):
        event = {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "delta": delta,
            "logprobs": [],
            "sequence_number": n,
        }
        ResponseTextDeltaEvent.model_validate(event)
        events.append(event)
    kind = {"completed": "response.completed", "incomplete": "response.incomplete"}[final["status"]]
    done = {"type": kind, "response": final, "sequence_number": len(deltas)}
    if kind == "response.completed":
        ResponseCompletedEvent.model_validate(done)
    events.append(done)
    return sse(events, named=True)


def make(wire: Wire, model: str = MODEL, **kwargs: Any) -> OpenAIResponsesProvider:
    return OpenAIResponsesProvider(
        model,
        api_key=KEY,
        http_client=wire.client(),
        async_http_client=wire.async_client(),
        max_retries=0,
        **kwargs,
    )


def _valid_input(items: list[dict[str, Any]]) -> None:
    from openai.types.responses import ResponseInputItemParam

    adapter = TypeAdapter(list[ResponseInputItemParam])
    adapter.validate_python(items)


# -- requests -----------------------------------------------------------------------------------


def test_side_query_is_stateless_capped_and_at_the_lowest_effort(wire: Wire) -> None:
    """store=false, the 20K cap as max_output_tokens, the lowest effort, our instructions."""
    wire.queue(json_response(response([message_item("summary")])))
    result = make(wire).complete(SIDE_QUERY)
    body = wire.last.json
    assert wire.last.url == "https://api.openai.com/v1/responses"
    assert body["store"] is False
    assert body["max_output_tokens"] == COMPACT_MAX_OUTPUT_TOKENS
    assert body["reasoning"] == {"effort": "none"}
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["instructions"] == "You summarize."
    assert "previous_response_id" not in body
    assert find_nulls(body) == []
    _valid_input(body["input"])
    assert result.text == "summary"
    assert result.finish_reason is FinishReason.STOP


@pytest.mark.parametrize(
    ("model", "effort"),
    [("gpt-5.4", "none"), ("gpt-5", "minimal"), ("o3", "low"), ("gpt-4.1", None)],
)
def test_lowest_effort_per_model(wire: Wire, model: str, effort: str | None) -> None:
    """Reasoning models get their floor; other models no reasoning field and no include."""
    wire.queue(json_response(response([message_item("s")])))
    make(wire, model).complete(SIDE_QUERY)
    body = wire.last.json
    assert body.get("reasoning") == ({"effort": effort} if effort else None)
    assert ("include" in body) is (effort is not None)


def test_tools_and_history_are_written_as_input_items(wire: Wire) -> None:
    """Function calls, outputs, reasoning items and tools take the Responses shapes."""
    wire.queue(json_response(response([message_item("done")])))
    thinking = ThinkingPart(
        text="thinking about it",
        signature='openai-responses:reasoning:{"id":"rs_1","encrypted_content":"gAAAA"}',
    )
    history = (
        Message.user("read a.py"),
        Message.model(thinking, FunctionCallPart(id="call_1", name="Read", arguments={"p": 1})),
        Message.user(Result(id="call_1", name="Read", response="print(1)"), "thanks"),
        Message.model(ThinkingPart(text="foreign", signature="anthropic-sig"), "ok"),
    )
    tool = ToolSpec(name="Read", description="read a file", parameters={"type": "object"})
    make(wire).complete(ChatRequest(messages=history, tools=(tool,)))
    body = wire.last.json
    _valid_input(body["input"])
    assert body["input"] == [
        {"role": "user", "content": [{"type": "input_text", "text": "read a.py"}]},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "thinking about it"}],
            "encrypted_content": "gAAAA",
        },
        {"type": "function_call", "call_id": "call_1", "name": "Read", "arguments": '{"p": 1}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "print(1)"},
        {"role": "user", "content": [{"type": "input_text", "text": "thanks"}]},
        {"role": "assistant", "content": "ok"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "name": "Read",
            "description": "read a file",
            "parameters": {"type": "object"},
            "strict": False,
        }
    ]


# -- responses ----------------------------------------------------------------------------------


def test_reply_with_reasoning_and_a_tool_call(wire: Wire) -> None:
    """Reasoning becomes signed thinking that goes back; a call is a tool-call finish."""
    wire.queue(json_response(response([REASONING, CALL], cached=40)))
    result = make(wire).complete(CHAT)
    thinking, call = result.message.parts
    assert isinstance(thinking, ThinkingPart)
    assert thinking.text == "thinking about it"
    assert isinstance(call, FunctionCallPart)
    assert (call.id, call.name, dict(call.arguments)) == ("call_1", "Read", {"path": "a.py"})
    assert result.finish_reason is FinishReason.TOOL_CALL
    assert result.usage is not None
    assert (result.usage.prompt_tokens, result.usage.cached_tokens) == (100, 40)
    assert result.usage.thinking_tokens == 3
    # chained statelessly: the next request carries the encrypted reasoning item back
    wire.queue(json_response(response([message_item("ok")])))
    make(wire).complete(ChatRequest(messages=(Message.user("go"), result.message)))
    sent = wire.last.json["input"]
    assert sent[1] == {
        "type": "reasoning",
        "id": "rs_1",
        "summary": REASONING["summary"],
        "encrypted_content": "gAAAA-encrypted",
    }


@pytest.mark.parametrize(
    ("status", "incomplete", "finish"),
    [
        ("incomplete", "max_output_tokens", FinishReason.LENGTH),
        ("incomplete", "content_filter", FinishReason.CONTENT_FILTER),
        ("incomplete", "max_messages", FinishReason.OTHER),
        ("completed", None, FinishReason.STOP),
    ],
    ids=["max-output", "filter", "other", "completed"],
)
def test_incomplete_reasons(wire: Wire, status: str, incomplete: str | None, finish: Any) -> None:
    """incomplete_details.reason maps to the normalized finish reason."""
    try:
        payload = response([message_item("part")], status=status, incomplete=incomplete)
    except ValueError:  # pydantic's ValidationError: this SDK has no such reason (openai 3.0)
        pytest.skip(f"the installed openai SDK has no incomplete reason {incomplete!r}")
    wire.queue(json_response(payload))
    result = make(wire).complete(SIDE_QUERY)
    assert result.finish_reason is finish
    if incomplete:
        assert result.raw_finish_reason == incomplete


def test_refusal_is_a_content_filter_finish(wire: Wire) -> None:
    """A refusal block is the reply's text and a content-filter finish."""
    wire.queue(json_response(response([message_item("I can't help", kind="refusal")])))
    result = make(wire).complete(CHAT)
    assert result.finish_reason is FinishReason.CONTENT_FILTER
    assert result.text == "I can't help"


def test_failed_response_raises(wire: Wire) -> None:
    """A failed response with rate_limit_exceeded is a rate-limit error."""
    failed = response(
        [], status="failed", error={"code": "rate_limit_exceeded", "message": "slow down"}
    )
    wire.queue(json_response(failed))
    with pytest.raises(RateLimitError):
        make(wire).complete(CHAT)


def test_stream_yields_deltas_then_done(wire: Wire) -> None:
    """Text deltas stream, then one StreamDone with the final response's usage."""
    wire.queue(stream_of("Hel", "lo", final=response([message_item("Hello")])))
    events = list(make(wire).stream(CHAT))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hel", "lo"]
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.completion.text == "Hello"
    assert wire.last.json["stream"] is True


def test_stream_of_an_incomplete_response_is_truncated(wire: Wire) -> None:
    """response.incomplete ends a stream with the length finish."""
    final = response([message_item("Hel")], status="incomplete", incomplete="max_output_tokens")
    wire.queue(stream_of("Hel", final=final))
    done = list(make(wire).stream(SIDE_QUERY))[-1]
    assert isinstance(done, StreamDone)
    assert done.completion.finish_reason is FinishReason.LENGTH


def test_stream_reasoning_summary_deltas(wire: Wire) -> None:
    """Reasoning summary deltas stream as thinking."""
    event = {
        "type": "response.reasoning_summary_text.delta",
        "item_id": "rs_1",
        "output_index": 0,
        "summary_index": 0,
        "delta": "hmm",
        "sequence_number": 0,
    }
    final = response([REASONING, message_item("ok")])
    done = {"type": "response.completed", "response": final, "sequence_number": 1}
    wire.queue(sse([event, done], named=True))
    events = list(make(wire).stream(CHAT))
    assert isinstance(events[0], ThinkingDelta)
    assert events[0].text == "hmm"


async def test_async_stream_and_complete(wire: Wire) -> None:
    """The async methods read the same shapes."""
    wire.queue(
        stream_of("a", "b", final=response([message_item("ab")])),
        json_response(response([message_item("c")])),
    )
    provider = make(wire)
    events = [e async for e in provider.astream(CHAT)]
    assert isinstance(events[-1], StreamDone)
    assert events[-1].completion.text == "ab"
    assert (await provider.acomplete(CHAT)).text == "c"


# -- errors -------------------------------------------------------------------------------------


_OVERFLOW = "context_length_exceeded"


def _error(status: int, message: str, code: str | None = None) -> Any:
    return json_response(
        {"error": {"message": message, "type": "invalid_request_error", "code": code}}, status
    )


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (_error(400, "Your input exceeds the context window", _OVERFLOW), ContextOverflowError),
        (_error(401, f"bad key {KEY}", "invalid_api_key"), AuthenticationError),
        (_error(429, "Rate limit reached", "rate_limit_exceeded"), RateLimitError),
        (_error(500, "boom", None), ProviderError),
        (connect_error, ProviderConnectionError),
    ],
    ids=["overflow", "auth", "rate", "server", "connect"],
)  # fmt: skip
def test_errors_are_converted(wire: Wire, reply: Any, error: type[Exception]) -> None:
    """SDK errors become the project's errors; the key never shows."""
    wire.queue(reply)
    with pytest.raises(error) as info:
        make(wire).complete(CHAT)
    assert KEY not in str(info.value)


def test_registry_builds_it(wire: Wire) -> None:
    """openai-responses:MODEL (and the responses alias) build this adapter with OPENAI_API_KEY."""
    for spec in ("openai-responses:gpt-5.4", "responses:gpt-5.4"):
        provider = get_provider(spec, env={"OPENAI_API_KEY": KEY}, http_client=wire.client())
        assert isinstance(provider, OpenAIResponsesProvider)
        assert provider.name == "openai-responses"


# -- native compaction through responses.compact ------------------------------------------------

# The SDK's docstring says the output is "all user messages, followed by a single compaction
# item", but its type (``List[ResponseOutputItem]``) admits no user-role message; the fixture
# keeps to what the type validates. Whatever items come are stored and sent back as they are.
COMPACTED_OUTPUT = [
    {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA-compacted-state"},
]


def compacted(output: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    payload = {
        "id": "resp_c",
        "object": "response.compaction",
        "created_at": 1,
        "output": COMPACTED_OUTPUT if output is None else output,
        "usage": usage(input_tokens=5000, output_tokens=600),
    }
    CompactedResponse.model_validate(payload)
    return payload


HISTORY = (
    Message.user("please fix the parser " * 300),
    Message.model("fixed it " * 400),
    Message.user("add tests " * 300),
    Message.model("tests added " * 400),
    Message.user("what next?"),
    Message.model("docs"),
)


def test_compact_request_and_the_opaque_part(wire: Wire) -> None:
    """responses.compact gets the range as input; its raw output becomes the opaque part."""
    wire.queue(json_response(compacted()))
    result = make(wire).compact_natively(
        NativeSource(messages=HISTORY[:4], instructions="keep paths")
    )
    sent = wire.last
    assert sent.url == "https://api.openai.com/v1/responses/compact"
    assert sent.json["model"] == MODEL
    assert sent.json["instructions"] == "keep paths"
    _valid_input(sent.json["input"])
    assert result.outcome is NativeOutcome.COMPACTED
    part = result.part
    assert part is not None
    assert part.payload == {"items": COMPACTED_OUTPUT}
    assert part.family == openai_family(MODEL)
    assert part.tokens >= 600
    assert result.usage is not None
    assert result.usage.output_tokens == 600


def test_compacted_items_go_back_byte_exact_and_first(wire: Wire) -> None:
    """After a native compaction the next request starts with the compacted items, unchanged."""
    wire.queue(json_response(compacted()))
    provider = make(wire)
    options = CompressOptions(context_window=200_000, force=True)
    result = CompressionService(provider).compress(HISTORY, options)
    assert result.info.status is CompressionStatus.COMPRESSED, result.info.error
    assert result.info.method == "native"
    head = result.history[0].parts[0]
    assert isinstance(head, OpaquePart)
    assert "parser" in head.summary  # our own extractive summary, for other providers
    wire.queue(json_response(response([message_item("ok")])))
    provider.complete(ChatRequest(messages=(*result.history, Message.user("go on"))))
    sent = wire.last.json["input"]
    assert json.dumps(sent[: len(COMPACTED_OUTPUT)]) == json.dumps(COMPACTED_OUTPUT)


def test_another_provider_gets_our_summary_instead(wire: Wire) -> None:
    """An OpenAI compaction item never goes to another family: its summary goes as text."""
    part = OpaquePart(
        provider="openai-responses",
        family="gpt-9",
        payload={"items": COMPACTED_OUTPUT},
        summary="S",
    )
    wire.queue(json_response(response([message_item("ok")])))
    make(wire).complete(ChatRequest(messages=(Message.model(part), Message.user("hi"))))
    first = wire.last.json["input"][0]
    assert first["role"] == "assistant"
    assert first["content"].endswith("S")
    assert "compaction" not in json.dumps(wire.last.json["input"])


@pytest.mark.parametrize(
    ("reply", "outcome"),
    [
        (_error(400, "Your input exceeds the context window", _OVERFLOW), NativeOutcome.TOO_LARGE),
        (_error(400, "Compaction is not supported", None), NativeOutcome.UNSUPPORTED),
        (_error(503, "unavailable", None), NativeOutcome.UNAVAILABLE),
        (json_response(compacted(output=[])), NativeOutcome.EMPTY),
    ],
    ids=["too-large", "unsupported", "unavailable", "no-item"],
)  # fmt: skip
def test_compact_outcomes(wire: Wire, reply: Any, outcome: NativeOutcome) -> None:
    """Each error or empty output is an outcome; an unsupported 400 is remembered."""
    wire.queue(reply)
    provider = make(wire)
    assert provider.compact_natively(NativeSource(messages=HISTORY[:2])).outcome is outcome
    if outcome is NativeOutcome.UNSUPPORTED:
        assert provider.native_compaction_supported() is False
        assert provider.compact_natively(NativeSource(messages=HISTORY[:2])).outcome is outcome
        assert len(wire.sent) == 1


def test_unsupported_falls_back_to_our_summary(wire: Wire) -> None:
    """An unsupported model writes our own summary in the same compaction."""
    wire.queue(
        _error(400, "Compaction is not supported for this model"),
        json_response(response([message_item("<state_snapshot>ours</state_snapshot>")])),
    )
    options = CompressOptions(context_window=200_000, force=True)
    result = CompressionService(make(wire)).compress(HISTORY, options)
    assert result.info.status is CompressionStatus.COMPRESSED
    assert result.info.method == "summary"
    assert wire.last.url == "https://api.openai.com/v1/responses"


async def test_async_compact(wire: Wire) -> None:
    """The async compaction path returns the same part."""
    wire.queue(json_response(compacted()))
    result = await make(wire).acompact_natively(NativeSource(messages=HISTORY[:4]))
    assert result.outcome is NativeOutcome.COMPACTED


def test_text_parts_are_read_back(wire: Wire) -> None:
    """A plain reply is one text part."""
    wire.queue(json_response(response([message_item("hi")])))
    assert make(wire).complete(CHAT).message.parts == (TextPart(text="hi"),)


def test_a_model_dump_of_the_compacted_item_would_add_a_field(wire: Wire) -> None:
    """The SDK model's dump adds created_by (not in the param type): the raw item is stored."""
    from openai.types.responses.response_compaction_item_param_param import (
        ResponseCompactionItemParamParam,
    )

    parsed = CompactedResponse.model_validate(compacted()).output[0]
    assert set(parsed.model_dump()) - set(ResponseCompactionItemParamParam.__annotations__)
    wire.queue(json_response(compacted()))
    part = make(wire).compact_natively(NativeSource(messages=HISTORY[:4])).part
    assert part is not None
    (item,) = part.payload["items"]
    assert set(item) <= set(ResponseCompactionItemParamParam.__annotations__)


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_a_range_native_compaction_cannot_send_is_a_content_error(
    wire: Wire, asynchronous: bool
) -> None:
    """What ``responses.compact`` cannot carry (here audio a tool returned: a function call's
    output holds images and files only) is the request's error, raised before anything is
    sent; it was reported as a reply that "cannot be read" (MalformedResponseError)."""
    audio = {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}
    history = (
        Message(role="user", parts=(TextPart(text="record it"),)),
        Message(role="model", parts=(FunctionCallPart(id="c1", name="record"),)),
        Message(role="user", parts=(Result(id="c1", name="record", response=[audio]),)),
    )
    provider = make(wire)
    source = NativeSource(messages=history)
    compact = provider.acompact_natively if asynchronous else provider.compact_natively
    with pytest.raises(ContentError, match=r"'audio' block"):
        await _awaited(compact(source))
    assert wire.sent == []


def test_a_range_native_compaction_cannot_send_gets_our_own_summary(wire: Wire) -> None:
    """A compaction whose range ``responses.compact`` cannot carry writes our own summary in
    the same compaction (its request leaves the audio out); no compact request goes out. It
    failed as a malformed reply, a failed summary counted by the breaker."""
    audio = {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}
    history = (
        *HISTORY[:2],
        Message(role="model", parts=(FunctionCallPart(id="c1", name="record"),)),
        Message(role="user", parts=(Result(id="c1", name="record", response=[audio]),)),
        *HISTORY[2:],
    )
    wire.queue(json_response(response([message_item("<state_snapshot>ours</state_snapshot>")])))
    options = CompressOptions(context_window=200_000, force=True)
    result = CompressionService(make(wire)).compress(history, options)
    assert result.info.status is CompressionStatus.COMPRESSED, result.info.error
    assert result.info.method == "summary"
    assert [sent.url for sent in wire.sent] == ["https://api.openai.com/v1/responses"]


async def _awaited(value: Any) -> Any:
    """``value``, awaited when it is a coroutine (one test for the sync and async call)."""
    return await value if inspect.iscoroutine(value) else value

"""Anthropic's compaction beta as a summary backend, through the real ``anthropic`` SDK.

Every scripted response is first validated against the SDK's own response model, and every
request the adapter sends is checked against the SDK's request TypedDicts, so the test data
cannot drift from the wire format the wheel describes.
"""

from __future__ import annotations

import copy
import inspect
import json
from typing import Any

import pytest
from anthropic.types.beta import (
    BetaCompactionBlock,
    BetaCompactionBlockParam,
    BetaCompactionConfigParam,
    BetaMessage,
    BetaModelInfo,
)

from autocompact.codec import history_from_dicts, history_to_dicts
from autocompact.compaction import CompressionService, CompressionStatus, CompressOptions
from autocompact.compaction.plan import CompressionTrigger
from autocompact.content import (
    FunctionCallPart,
    FunctionResponsePart,
    Message,
    OpaquePart,
    TextPart,
)
from autocompact.errors import ContentError, RateLimitError
from autocompact.providers.anthropic import AnthropicProvider
from autocompact.providers.anthropic_compaction import COMPACTION_BETA, anthropic_family
from autocompact.providers.base import ChatRequest, NativeOutcome, NativeSource, ToolSpec

from .test_anthropic import KEY, MODEL, text_stream
from .wire import Wire, find_nulls, json_response

BLOCK: dict[str, Any] = {
    "type": "compaction",
    "content": "<state_snapshot>goal: ship the parser; file src/parse.py</state_snapshot>",
    "encrypted_content": None,
    "signature": "c2lnbmF0dXJl",
    "tool_changes": [
        {
            "type": "tool_addition",
            "tool": {
                "type": "tool_definition",
                "definition": {"name": "Read", "input_schema": {"type": "object"}},
            },
        }
    ],
}


def compaction_reply(
    *, block: dict[str, Any] | None = None, stop: str = "compaction", output: int = 700
) -> dict[str, Any]:
    """A compaction response, validated against the SDK's ``BetaMessage``."""
    content = [] if block is None else [block]
    payload = {
        "id": "msg_c",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 3,
            "output_tokens": 2,
            "iterations": [
                {
                    "type": "compaction",
                    "input_tokens": 5000,
                    "output_tokens": output,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 1000,
                }
            ],
        },
    }
    BetaMessage.model_validate(payload)
    return payload


def model_info(*, supported: bool | None) -> dict[str, Any]:
    """A Models API entry whose capability data says whether compaction is supported."""
    yes = {"supported": True}
    caps: dict[str, Any] = {
        "batch": yes,
        "citations": yes,
        "code_execution": yes,
        "context_management": {"supported": True},
        "effort": {"supported": True},
        "image_input": yes,
        "pdf_input": yes,
        "server_tools": {"supported": True},
        "structured_outputs": yes,
        "thinking": {"supported": True},
    }
    if supported is not None:
        caps["compaction"] = {"supported": supported, "summarize": {"supported": supported}}
    payload = {
        "id": MODEL,
        "type": "model",
        "display_name": "Claude",
        "created_at": "2025-09-29T00:00:00Z",
        "lifecycle": "active",
        "capabilities": caps,
    }
    BetaModelInfo.model_construct(**payload)
    return payload


def api_error(status: int, kind: str, message: str, code: str | None = None) -> Any:
    """An error body as the API sends it, ``error.details.error_code`` when given."""
    error: dict[str, Any] = {"type": kind, "message": message}
    if code is not None:
        error["details"] = {"error_code": code}
    return json_response({"type": "error", "error": error}, status=status)


def make(wire: Wire, **kwargs: Any) -> AnthropicProvider:
    return AnthropicProvider(
        MODEL,
        api_key=KEY,
        http_client=wire.client(),
        async_http_client=wire.async_client(),
        max_retries=0,
        **kwargs,
    )


HISTORY = (
    Message.user("please fix the parser in src/parse.py " * 40),
    Message.model("I read the file and fixed the bug " * 40),
    Message.user("now add tests " * 40),
    Message.model("tests added " * 40),
    Message.user("thanks, what next?"),
    Message.model("the docs"),
)
SOURCE = NativeSource(messages=HISTORY[:4], tools=(ToolSpec(name="Read"),))


def _keys_within(value: dict[str, Any], typed: Any) -> bool:
    return set(value) <= set(typed.__annotations__)


# -- the compaction request on the wire --------------------------------------------------------


def test_compaction_request_carries_the_beta_header_and_the_summarize_config(wire: Wire) -> None:
    """One beta request: compaction {type: summarize}, beta header, tools, max_tokens 20K."""
    wire.queue(json_response(compaction_reply(block=BLOCK)))
    result = make(wire, native_compaction=True).compact_natively(SOURCE)
    sent = wire.last
    assert sent.url.startswith("https://api.anthropic.com/v1/messages")
    assert COMPACTION_BETA in sent.headers["anthropic-beta"]
    assert sent.json["compaction"] == {"type": "summarize"}
    assert _keys_within(sent.json["compaction"], BetaCompactionConfigParam)
    assert sent.json["max_tokens"] == 20_000
    assert sent.json["tools"] == [{"name": "Read", "input_schema": {"type": "object"}}]
    assert "stream" not in sent.json
    assert "thinking" not in sent.json
    assert "context_management" not in sent.json
    assert find_nulls(sent.json) == []
    assert result.outcome is NativeOutcome.COMPACTED


def test_user_instructions_extend_a_full_summary_instruction(wire: Wire) -> None:
    """instructions replace the server prompt, so the user's words follow a full instruction."""
    wire.queue(json_response(compaction_reply(block=BLOCK)))
    source = NativeSource(messages=HISTORY[:4], instructions="keep every file path")
    make(wire, native_compaction=True).compact_natively(source)
    instructions = wire.last.json["compaction"]["instructions"]
    assert instructions.endswith("keep every file path")
    assert "next step" in instructions


def test_success_yields_the_raw_block_and_usage_from_iterations(wire: Wire) -> None:
    """The opaque part is the raw JSON block; usage is the compaction iteration, not top-level."""
    wire.queue(json_response(compaction_reply(block=BLOCK)))
    result = make(wire, native_compaction=True).compact_natively(SOURCE)
    part = result.part
    assert isinstance(part, OpaquePart)
    assert part.payload == BLOCK
    assert part.provider == "anthropic"
    assert part.family == anthropic_family(MODEL)
    assert part.summary == BLOCK["content"]
    assert part.tokens == 700
    assert result.usage is not None
    assert (result.usage.prompt_tokens, result.usage.output_tokens) == (6000, 700)
    assert result.usage.cached_tokens == 1000


def test_a_model_dump_of_the_parsed_block_would_add_fields(wire: Wire) -> None:
    """The SDK's model_dump adds nulls the param type does not take: we keep the raw JSON."""
    dumped = BetaCompactionBlock.model_validate(BLOCK).model_dump()
    definition = dumped["tool_changes"][0]["tool"]["definition"]
    assert "strict" in definition
    assert definition["strict"] is None
    assert dumped != BLOCK
    wire.queue(json_response(compaction_reply(block=BLOCK)))
    part = make(wire, native_compaction=True).compact_natively(SOURCE).part
    assert part is not None
    assert part.payload == BLOCK
    assert _keys_within(dict(part.payload), BetaCompactionBlockParam)


@pytest.mark.parametrize(
    ("stop", "block", "outcome"),
    [
        ("compaction", BLOCK, NativeOutcome.COMPACTED),
        ("compaction", {**BLOCK, "content": None}, NativeOutcome.EMPTY),
        ("max_tokens", None, NativeOutcome.TRUNCATED),
        ("model_context_window_exceeded", None, NativeOutcome.TOO_LARGE),
        ("refusal", None, NativeOutcome.REFUSED),
        ("end_turn", None, NativeOutcome.EMPTY),
        ("tool_use", None, NativeOutcome.EMPTY),
        ("pause_turn", None, NativeOutcome.EMPTY),
        ("stop_sequence", None, NativeOutcome.EMPTY),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_every_stop_reason_maps_to_an_outcome(
    wire: Wire, stop: str, block: dict[str, Any] | None, outcome: NativeOutcome
) -> None:
    """Each BetaStopReason of a compaction response has its outcome."""
    wire.queue(json_response(compaction_reply(block=block, stop=stop)))
    assert make(wire, native_compaction=True).compact_natively(SOURCE).outcome is outcome


_IR = "invalid_request_error"
_UNAVAILABLE = NativeOutcome.UNAVAILABLE


@pytest.mark.parametrize(
    ("status", "kind", "code", "message", "outcome"),
    [
        (529, "overloaded_error", "compaction_unavailable", "retry", _UNAVAILABLE),
        (400, _IR, "compaction_block_misplaced", "m", _UNAVAILABLE),
        (400, _IR, "compaction_block_ambiguous", "m", _UNAVAILABLE),
        (400, _IR, "compaction_signature_invalid", "m", _UNAVAILABLE),
        (400, _IR, "compaction_content_mismatch", "m", _UNAVAILABLE),
        (400, _IR, "compaction_tool_changes_mismatch", "m", _UNAVAILABLE),
        (400, _IR, "compaction_incomplete_turn", "m", _UNAVAILABLE),
        (400, _IR, "compaction_too_many_tool_references", "m", _UNAVAILABLE),
        (400, _IR, "compaction_nothing_to_summarize", "m", NativeOutcome.EMPTY),
        (400, _IR, None, "prompt is too long: 250000 tokens", NativeOutcome.TOO_LARGE),
        (400, _IR, None, "compaction is not supported for this model", NativeOutcome.UNSUPPORTED),
    ],
    ids=lambda v: v if isinstance(v, str) and v not in ("m", _IR) else None,
)
def test_each_error_maps_to_an_outcome(
    wire: Wire, status: int, kind: str, code: str | None, message: str, outcome: NativeOutcome
) -> None:
    """The compaction error codes and a clean 400 become outcomes, not exceptions."""
    wire.queue(api_error(status, kind, message, code))
    provider = make(wire, native_compaction=True)
    assert provider.compact_natively(SOURCE).outcome is outcome


def test_other_errors_raise_provider_errors(wire: Wire) -> None:
    """A rate limit is an ordinary provider error (the summary fails, counted by the caller)."""
    wire.queue(api_error(429, "rate_limit_error", "slow down"))
    with pytest.raises(RateLimitError):
        make(wire, native_compaction=True).compact_natively(SOURCE)


def test_a_clean_400_is_remembered(wire: Wire) -> None:
    """After an unsupported 400 the adapter says unsupported and sends nothing more."""
    wire.queue(api_error(400, "invalid_request_error", "unknown beta compact-2026-09-04"))
    provider = make(wire)
    provider._capabilities_checked = True  # no capability data for this model
    assert provider.compact_natively(SOURCE).outcome is NativeOutcome.UNSUPPORTED
    assert provider.native_compaction_supported() is False
    assert provider.compact_natively(SOURCE).outcome is NativeOutcome.UNSUPPORTED
    assert len(wire.sent) == 1


@pytest.mark.parametrize(
    ("supported", "requests", "expected"),
    [(False, 1, False), (True, 2, True), (None, 2, True)],
    ids=["says-no", "says-yes", "says-nothing"],
)
def test_capability_data_decides_first(
    wire: Wire, supported: bool | None, requests: int, expected: bool
) -> None:
    """The Models API's capability data is read once; a 'no' sends no compaction request."""
    wire.queue(json_response(model_info(supported=supported)))
    if supported is not False:
        wire.queue(json_response(compaction_reply(block=BLOCK)))
    provider = make(wire)
    provider.compact_natively(SOURCE)
    assert len(wire.sent) == requests
    assert f"/v1/models/{MODEL}" in wire.sent[0].url
    assert provider.native_compaction_supported() is expected


# -- later requests: the block first, byte-exact, with the beta header -------------------------


def _compacted_history(provider: AnthropicProvider, wire: Wire) -> tuple[Message, ...]:
    wire.queue(json_response(compaction_reply(block=BLOCK)))
    options = CompressOptions(context_window=200_000, force=True, trigger=CompressionTrigger.MANUAL)
    result = CompressionService(provider).compress(HISTORY, options)
    assert result.info.status is CompressionStatus.COMPRESSED, result.info.error
    assert result.info.method == "native"
    return result.history


def test_every_later_request_sends_the_block_first_and_the_beta_header(wire: Wire) -> None:
    """Two later turns both go to the beta API with the block first, unchanged."""
    provider = make(wire, native_compaction=True)
    history = _compacted_history(provider, wire)
    for turn in ("go on", "and then?"):
        wire.queue(text_stream("sure"))
        history = (*history, Message.user(turn))
        reply = provider.complete(ChatRequest(messages=history))
        history = (*history, reply.message)
        sent = wire.last
        assert COMPACTION_BETA in sent.headers["anthropic-beta"]
        first = sent.json["messages"][0]
        assert first["role"] == "assistant"
        assert first["content"][0] == BLOCK


def test_the_block_goes_back_byte_exact_after_a_save_and_load(wire: Wire) -> None:
    """The session codec keeps the block as JSON: what is sent equals what was received."""
    provider = make(wire, native_compaction=True)
    history = _compacted_history(provider, wire)

    restored = history_from_dicts(json.loads(json.dumps(history_to_dicts(history))))
    wire.queue(text_stream("ok"))
    provider.complete(ChatRequest(messages=(*restored, Message.user("hi"))))
    assert json.dumps(wire.last.json["messages"][0]["content"][0]) == json.dumps(BLOCK)


def test_another_family_gets_the_summary_as_text(wire: Wire) -> None:
    """A block made for another model family is never sent: its summary goes as text."""
    part = OpaquePart(
        provider="anthropic", family="claude-opus-9", payload=copy.deepcopy(BLOCK), summary="S"
    )
    wire.queue(text_stream("ok"))
    make(wire).complete(ChatRequest(messages=(Message.model(part), Message.user("hi"))))
    sent = wire.last
    assert "anthropic-beta" not in sent.headers
    assert sent.json["messages"][0]["content"][0]["type"] == "text"
    assert sent.json["messages"][0]["content"][0]["text"].endswith("S")


def test_fallback_to_our_summary_when_the_provider_cannot(wire: Wire) -> None:
    """compaction_unavailable: the same compaction sends our own summary prompt instead."""
    wire.queue(
        api_error(529, "overloaded_error", "try again", "compaction_unavailable"),
        text_stream("<state_snapshot>our own</state_snapshot>"),
    )
    provider = make(wire, native_compaction=True)
    options = CompressOptions(context_window=200_000, force=True)
    result = CompressionService(provider).compress(HISTORY, options)
    assert result.info.status is CompressionStatus.COMPRESSED
    assert result.info.method == "summary"
    assert "compaction" not in wire.last.json
    assert not any(isinstance(p, OpaquePart) for m in result.history for p in m.parts)


_EMPTY_SUMMARY = CompressionStatus.COMPRESSION_FAILED_EMPTY_SUMMARY


@pytest.mark.parametrize(
    ("stop", "block", "status"),
    [
        ("max_tokens", None, CompressionStatus.COMPRESSION_FAILED_OUTPUT_TRUNCATED),
        ("compaction", {**BLOCK, "content": None}, _EMPTY_SUMMARY),
        ("end_turn", None, _EMPTY_SUMMARY),
    ],
    ids=["truncated", "null-content", "no-block"],
)
def test_failed_native_outcomes_leave_the_history_untouched(
    wire: Wire, stop: str, block: dict[str, Any] | None, status: CompressionStatus
) -> None:
    """Truncated and empty native compactions are failures: the history object is returned."""
    wire.queue(json_response(compaction_reply(block=block, stop=stop)))
    options = CompressOptions(context_window=200_000, force=True)
    result = CompressionService(make(wire, native_compaction=True)).compress(HISTORY, options)
    assert result.info.status is status
    assert result.history is HISTORY or result.history == HISTORY


def test_native_compaction_can_be_turned_off(wire: Wire) -> None:
    """native_compaction=False: the summary prompt goes out, no compaction field, no beta."""
    wire.queue(text_stream("<state_snapshot>ours</state_snapshot>"))
    options = CompressOptions(context_window=200_000, force=True)
    service = CompressionService(make(wire, native_compaction=True), native_compaction=False)
    result = service.compress(HISTORY, options)
    assert result.info.method == "summary"
    assert "compaction" not in wire.last.json
    assert len(wire.sent) == 1


async def test_async_native_compaction_and_later_turn(wire: Wire) -> None:
    """The async path compacts natively and the next async turn carries the block."""
    wire.queue(json_response(compaction_reply(block=BLOCK)), text_stream("ok"))
    provider = make(wire, native_compaction=True)
    options = CompressOptions(context_window=200_000, force=True)
    result = await CompressionService(provider).acompress(HISTORY, options)
    assert result.info.method == "native"
    await provider.acomplete(ChatRequest(messages=(*result.history, Message.user("go"))))
    assert wire.last.json["messages"][0]["content"][0] == BLOCK
    assert COMPACTION_BETA in wire.last.headers["anthropic-beta"]


def test_the_compacted_history_estimate_uses_the_reported_size(wire: Wire) -> None:
    """The ladder's estimate of the block is its reported output size (700 tokens)."""
    provider = make(wire, native_compaction=True)
    history = _compacted_history(provider, wire)
    head = history[0]
    assert isinstance(head.parts[0], OpaquePart)
    assert head.stats.text_chars == 700 * 4
    assert not isinstance(head.parts[0], TextPart)


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_a_range_the_compaction_request_cannot_carry_is_a_content_error(
    wire: Wire, asynchronous: bool
) -> None:
    """Audio a tool returned cannot go in a ``tool_result``: the request's own ContentError,
    raised before anything is sent (it was reported as a reply that "cannot be read")."""
    audio = {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}
    history = (
        Message(role="user", parts=(TextPart(text="record it"),)),
        Message(role="model", parts=(FunctionCallPart(id="c1", name="record"),)),
        Message(
            role="user", parts=(FunctionResponsePart(id="c1", name="record", response=[audio]),)
        ),
    )
    provider = make(wire, native_compaction=True)
    source = NativeSource(messages=history)
    compact = provider.acompact_natively if asynchronous else provider.compact_natively
    with pytest.raises(ContentError, match=r"tool call 'c1' \(record\)"):
        await _awaited(compact(source))
    assert [
        sent.url for sent in wire.sent if "/messages" in sent.url and "models" not in sent.url
    ] == []


async def _awaited(value: Any) -> Any:
    """``value``, awaited when it is a coroutine (one test for the sync and async call)."""
    return await value if inspect.iscoroutine(value) else value

"""Native summary backends in the engine, with a scripted native compactor (no SDK).

The SDK wire tests live in ``tests/providers/test_*_compaction.py`` and
``test_openai_responses.py``; these check the engine's side: outcomes → statuses, the fallback,
the setting, opaque parts in the codec, the estimate, /context and provider switches.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import pytest

from autocompact import ChatSession, ContentError, ContextOverflowError
from autocompact.codec import history_from_dicts, history_to_dicts
from autocompact.compaction import CompressionService, CompressionStatus, CompressOptions
from autocompact.content import (
    OPAQUE_SUMMARY_PREFIX,
    Message,
    OpaquePart,
    TextPart,
    ThinkingPart,
    portable_history,
)
from autocompact.context_report import native_block_lines
from autocompact.convert import to_openai_messages
from autocompact.estimation import estimate_content_tokens
from autocompact.providers.base import (
    ChatRequest,
    Completion,
    FinishReason,
    NativeCompaction,
    NativeOutcome,
    NativeSource,
    StreamDone,
    StreamEvent,
)
from autocompact.settings import load_settings

BLOCK = {"type": "compaction", "content": "S", "signature": "sig"}


def opaque(tokens: int = 50, family: str = "fam") -> OpaquePart:
    return OpaquePart(
        provider="scripted", family=family, payload=BLOCK, summary="the summary", tokens=tokens
    )


class Scripted:
    """A provider with a scripted native backend; our own summaries answer ``ours``."""

    name = "scripted"
    model = "m"
    family = "fam"

    def __init__(self, *outcomes: NativeCompaction, supported: bool | None = None) -> None:
        self.outcomes = list(outcomes)
        self.supported = supported
        self.native_calls: list[NativeSource] = []
        self.requests: list[ChatRequest] = []

    def native_compaction_supported(self) -> bool | None:
        return self.supported

    def compact_natively(self, source: NativeSource) -> NativeCompaction:
        self.native_calls.append(source)
        return self.outcomes.pop(0)

    async def acompact_natively(self, source: NativeSource) -> NativeCompaction:
        return self.compact_natively(source)

    def complete(self, request: ChatRequest) -> Completion:
        self.requests.append(request)
        text = "<state_snapshot>ours</state_snapshot>"
        if request.purpose != "side_query":
            text = "reply"
        return Completion(message=Message.model(text), finish_reason=FinishReason.STOP)

    async def acomplete(self, request: ChatRequest) -> Completion:
        return self.complete(request)

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        yield StreamDone(completion=self.complete(request))

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        yield StreamDone(completion=self.complete(request))


HISTORY = (
    Message.user("fix the parser " * 400),
    Message.model("done " * 800),
    Message.user("add tests " * 400),
    Message.model("added " * 800),
    Message.user("next?"),
    Message.model("docs"),
)
FORCED = CompressOptions(context_window=200_000, force=True, instructions="keep paths")


@pytest.mark.parametrize(
    ("outcome", "status"),
    [
        (NativeOutcome.TRUNCATED, CompressionStatus.COMPRESSION_FAILED_OUTPUT_TRUNCATED),
        (NativeOutcome.REFUSED, CompressionStatus.COMPRESSION_FAILED_CONTENT_FILTER),
        (NativeOutcome.EMPTY, CompressionStatus.COMPRESSION_FAILED_EMPTY_SUMMARY),
    ],
    ids=["truncated", "refused", "empty"],
)
def test_failed_outcomes_map_to_statuses(outcome: NativeOutcome, status: CompressionStatus) -> None:
    """Truncated, refused and empty native outcomes are the matching failed statuses."""
    provider = Scripted(NativeCompaction(outcome=outcome))
    result = CompressionService(provider).compress(HISTORY, FORCED)
    assert result.info.status is status
    assert result.history == HISTORY
    assert provider.requests == []  # no fallback: the provider did answer


@pytest.mark.parametrize(
    "outcome", [NativeOutcome.TOO_LARGE, NativeOutcome.UNSUPPORTED, NativeOutcome.UNAVAILABLE]
)
def test_what_the_provider_cannot_do_falls_back_to_our_summary(outcome: NativeOutcome) -> None:
    """Too large, unsupported and unavailable send our own summary prompt in the same attempt."""
    provider = Scripted(NativeCompaction(outcome=outcome))
    result = CompressionService(provider).compress(HISTORY, FORCED)
    assert result.info.status is CompressionStatus.COMPRESSED
    assert result.info.method == "summary"
    assert len(provider.requests) == 1
    assert provider.requests[0].purpose == "side_query"


def test_success_puts_the_block_first_and_counts_its_size() -> None:
    """The block replaces the summarized range at the head; the new count uses its size."""
    provider = Scripted(NativeCompaction(outcome=NativeOutcome.COMPACTED, part=opaque(tokens=300)))
    result = CompressionService(provider).compress(HISTORY, FORCED)
    info = result.info
    assert info.status is CompressionStatus.COMPRESSED
    assert info.method == "native"
    assert result.history[0].parts == (opaque(tokens=300),)
    assert result.history[1:] == HISTORY[-len(result.history) + 1 :]
    assert info.new_token_count < info.original_token_count
    source = provider.native_calls[0]
    assert source.instructions == "keep paths"
    assert source.messages == HISTORY[: len(source.messages)]


def test_known_unsupported_is_never_asked() -> None:
    """A provider that says it cannot compact gets our summary prompt, no native call."""
    provider = Scripted(supported=False)
    result = CompressionService(provider).compress(HISTORY, FORCED)
    assert result.info.method == "summary"
    assert provider.native_calls == []


def test_the_setting_turns_it_off() -> None:
    """native_compaction=False never asks the provider to compact."""
    provider = Scripted(NativeCompaction(outcome=NativeOutcome.COMPACTED, part=opaque()))
    result = CompressionService(provider, native_compaction=False).compress(HISTORY, FORCED)
    assert result.info.method == "summary"
    assert provider.native_calls == []


def test_settings_file_key(tmp_path: Path) -> None:
    """chatCompression.nativeCompaction reads true/false and names a wrong type."""
    path = tmp_path / "settings.json"
    assert load_settings([path]).native_compaction is True
    path.write_text(json.dumps({"chatCompression": {"nativeCompaction": False}}))
    assert load_settings([path]).native_compaction is False
    path.write_text(json.dumps({"chatCompression": {"nativeCompaction": "no"}}))
    with pytest.raises(Exception, match=r"chatCompression\.nativeCompaction"):
        load_settings([path])


def test_chat_session_manual_compress_uses_the_native_backend() -> None:
    """/compress on a ChatSession goes through the same backend, and the next turn sends it."""
    provider = Scripted(NativeCompaction(outcome=NativeOutcome.COMPACTED, part=opaque()))
    session = ChatSession(provider, context_window=200_000, history=HISTORY)
    info = session.compress()
    assert info.method == "native"
    session.send("go on")
    sent = provider.requests[-1]
    assert isinstance(sent.messages[0].parts[0], OpaquePart)


async def test_async_path_uses_the_native_backend() -> None:
    """acompress drives the async native call."""
    provider = Scripted(NativeCompaction(outcome=NativeOutcome.COMPACTED, part=opaque()))
    result = await CompressionService(provider).acompress(HISTORY, FORCED)
    assert result.info.method == "native"


# -- opaque parts as history --------------------------------------------------------------------


def test_codec_round_trip_keeps_the_payload() -> None:
    """Saved and loaded, the part and its payload are equal, JSON for JSON."""
    history = (Message.model(opaque()), Message.user("hi"))
    dicts = history_to_dicts(history)
    assert dicts[0]["parts"][0]["kind"] == "opaque"
    restored = history_from_dicts(json.loads(json.dumps(dicts)))
    assert tuple(restored) == history
    assert json.dumps(dict(restored[0].parts[0].payload)) == json.dumps(BLOCK)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("field", "value"),
    [("payload", "not an object"), ("tokens", -1), ("provider", 3)],
)
def test_codec_names_a_bad_field(field: str, value: object) -> None:
    """A damaged opaque part in a session file is a ContentError naming the field."""
    data = history_to_dicts([Message.model(opaque())])
    data[0]["parts"][0][field] = value
    with pytest.raises(ContentError, match=field):
        history_from_dicts(data)


def test_estimate_uses_the_reported_size_else_the_summary() -> None:
    """The ladder counts the provider's size of the block, or its summary when unknown."""
    assert estimate_content_tokens([Message.model(opaque(tokens=700))]) == 700
    no_size = OpaquePart(provider="p", family="f", payload={}, summary="x" * 400)
    assert estimate_content_tokens([Message.model(no_size)]) == 100


def test_other_providers_get_the_summary_text() -> None:
    """portable_history keeps readable blocks and turns the others into summary text."""
    history = [Message.model(opaque()), Message.user("hi")]
    assert portable_history(history, provider="scripted", family="fam") == history
    other = portable_history(history, provider="scripted", family="other")
    assert other[0].parts == (TextPart(text=OPAQUE_SUMMARY_PREFIX + "the summary"),)
    assert other[1] is history[1]
    sent = to_openai_messages(history)
    assert sent[0] == {"role": "assistant", "content": OPAQUE_SUMMARY_PREFIX + "the summary"}


def test_context_lines_show_blocks_and_where_they_go() -> None:
    """/context names each block, its size and whether the current provider reads it."""
    history = [Message.model(opaque(tokens=1500)), Message.user("hi")]
    (line,) = native_block_lines(history, provider="scripted", family="fam")
    assert "scripted (fam)" in line
    assert "1.5K" in line
    assert "sent as received" in line
    (other,) = native_block_lines(history, provider="anthropic", family="claude")
    assert "summary text" in other
    assert native_block_lines([Message.user("x")]) == ()


class Overflowing(Scripted):
    """Rejects the first chat turn as too long (the reactive path)."""

    def __init__(self, *outcomes: NativeCompaction) -> None:
        super().__init__(*outcomes)
        self.rejected = False

    def complete(self, request: ChatRequest) -> Completion:
        if request.purpose != "side_query" and not self.rejected:
            self.rejected = True
            raise ContextOverflowError("prompt is too long", provider="scripted", model="m")
        return super().complete(request)


def test_reactive_compaction_uses_the_native_backend() -> None:
    """A turn the provider rejects as too long compacts natively, then the retry sends it."""
    provider = Overflowing(NativeCompaction(outcome=NativeOutcome.COMPACTED, part=opaque()))
    session = ChatSession(provider, context_window=200_000, history=HISTORY)
    reply = session.send("go on")
    assert reply.text == "reply"
    assert len(provider.native_calls) == 1
    assert isinstance(provider.requests[-1].messages[0].parts[0], OpaquePart)


def test_automatic_compaction_uses_the_native_backend() -> None:
    """Past the threshold the send compacts through the native backend before sending."""
    big = (
        tuple(Message(role=m.role, parts=(TextPart(text=m.text * 10),)) for m in HISTORY[:4])
        + HISTORY[4:]
    )
    provider = Scripted(NativeCompaction(outcome=NativeOutcome.COMPACTED, part=opaque()))
    session = ChatSession(provider, context_window=60_000, history=big, clear_tool_outputs=False)
    session.send("go on")
    assert len(provider.native_calls) == 1
    assert isinstance(session.history[0].parts[0], OpaquePart)


def test_a_local_summarizer_reads_a_native_block_as_its_summary() -> None:
    """An offline compaction of a range that begins with a native block keeps its summary."""
    seen: list[str] = []

    def summarizer(messages: Sequence[Message]) -> str:
        seen.append(" ".join(m.text for m in messages))
        return "<state_snapshot>merged</state_snapshot>"

    history = (Message.model(opaque()), *HISTORY)
    result = CompressionService(None, summarizer=summarizer).compress(history, FORCED)
    assert result.info.status is CompressionStatus.COMPRESSED
    assert "the summary" in seen[0]


def test_openai_reasoning_is_not_sent_to_anthropic_shaped_requests() -> None:
    """Thinking signed by the Responses API never reaches another API as a signature."""
    from autocompact.providers.anthropic import _sendable

    thinking = ThinkingPart(text="t", signature='openai-responses:reasoning:{"id":"rs_1"}')
    (message,) = _sendable((Message.model(thinking, "answer"),))
    assert message.parts == (TextPart(text="answer"),)

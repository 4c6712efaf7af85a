"""A framework's content block carried unread (``OpaquePart`` of family ``CONTENT_BLOCK``): sized
as its JSON, read as its summary text (no compaction prefix), never a native summary."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from autocompact.compaction import CompressionService, CompressionStatus, CompressOptions
from autocompact.compaction.slimming import slim_for_summary
from autocompact.content import (
    CONTENT_BLOCK,
    OPAQUE_SUMMARY_PREFIX,
    Message,
    OpaquePart,
    TextPart,
    portable_history,
)
from autocompact.context_report import native_block_lines
from autocompact.convert import to_anthropic_messages, to_openai_messages
from autocompact.convert.openai_responses import to_responses_input
from autocompact.estimation import content_stats, estimate_content_tokens
from autocompact.providers.base import ChatRequest, Completion, FinishReason
from autocompact.testing import FakeProvider

SEARCH = {"type": "web_search_call", "id": "ws_1", "action": {"query": "release notes"}}


def block(summary: str = "[web search: release notes]", tokens: int = 300) -> OpaquePart:
    """A carried web-search block as the LangChain integration makes it."""
    return OpaquePart(
        provider="langchain", family=CONTENT_BLOCK, payload=SEARCH, summary=summary, tokens=tokens
    )


HISTORY = (
    Message.user("find the release notes " * 200),
    Message.model(block(), "Version 2 is out. " * 100),
    Message.user("and the changelog?"),
    Message.model(block(summary=""), "It lists the fixes."),
    Message.user("thanks"),
    Message.model("welcome"),
)
FORCED = CompressOptions(context_window=200_000, force=True)


def test_a_content_block_counts_its_tokens_as_json() -> None:
    """Its size is its tokens, counted as JSON (as a tool call's), not as its summary."""
    message = Message.model(block(tokens=300))
    assert estimate_content_tokens([message]) == 300
    assert content_stats([message]).json_chars == 600
    assert content_stats([message]).text_chars == 0


def test_other_providers_get_its_text_without_the_compaction_prefix() -> None:
    """portable_history sends what the block holds as text, not as "the earlier conversation";
    a block with nothing to read (it only adds to a part beside it) is left out."""
    out = portable_history(HISTORY[1:4])
    assert out[0].parts[0] == TextPart(text="[web search: release notes]")
    assert not out[0].parts[0].text.startswith(OPAQUE_SUMMARY_PREFIX)
    assert out[1] is HISTORY[2]
    assert out[2].parts == (TextPart(text="It lists the fixes."),)


def test_the_side_query_gets_its_text_and_the_history_keeps_it() -> None:
    """Slimming turns the block into its text for the summarizer; the history keeps the block."""
    slim = slim_for_summary(HISTORY)
    assert slim[1].parts[0] == TextPart(text="[web search: release notes]")
    assert slim[3].parts == (TextPart(text="It lists the fixes."),)
    assert slim[0] is HISTORY[0]
    fake = FakeProvider()
    CompressionService(fake).compress(HISTORY, FORCED)
    sent = [p for m in fake.requests[0].messages for p in m.parts]
    assert not any(isinstance(p, OpaquePart) for p in sent)
    assert TextPart(text="[web search: release notes]") in sent
    assert isinstance(HISTORY[1].parts[0], OpaquePart)


class Reasoning(FakeProvider):
    """A summarizer whose reply carries a content block (a reasoning item) before its text."""

    def complete(self, request: ChatRequest) -> Completion:
        self.requests.append(request)
        item = block(summary="[reasoning]", tokens=20)
        return Completion(
            message=Message.model(item, "<state_snapshot>goal: notes</state_snapshot>"),
            finish_reason=FinishReason.STOP,
        )


def test_a_summarizer_reply_with_a_content_block_is_no_native_summary() -> None:
    """The summary is the reply's text; its content block is not taken for a native block."""
    result = CompressionService(Reasoning()).compress(HISTORY, FORCED)
    assert result.info.status is CompressionStatus.COMPRESSED
    first = result.history[0]
    assert not any(isinstance(p, OpaquePart) for p in first.parts)
    assert "goal: notes" in first.text


def test_the_local_summarizer_reads_its_text() -> None:
    """An offline summary reads the block's text as it is (no compaction prefix)."""
    seen: list[str] = []

    def summarizer(messages: Sequence[Message]) -> str:
        seen.append("\n".join(m.text for m in messages))
        return "<state_snapshot>merged</state_snapshot>"

    result = CompressionService(None, summarizer=summarizer).compress(HISTORY, FORCED)
    assert result.info.status is CompressionStatus.COMPRESSED
    assert "[web search: release notes]" in seen[0]
    assert OPAQUE_SUMMARY_PREFIX not in seen[0]


def test_context_lines_list_no_content_block() -> None:
    """/context lists native summaries only: a content block is none."""
    assert native_block_lines(HISTORY, provider="anthropic", family="claude") == ()


def test_each_provider_adapter_sends_its_text_without_the_compaction_prefix() -> None:
    """Chat Completions, Responses, Anthropic and Gemini requests carry what the block holds
    as text (not as "the earlier conversation"), and nothing for a block with no text."""
    history = [Message.user("q"), *HISTORY[1:4]]
    sent = [
        json.dumps(to_openai_messages(history)),
        json.dumps(to_responses_input(history, family=None)),
        json.dumps(to_anthropic_messages(history)),
    ]
    pytest.importorskip("google.genai")
    from autocompact.providers.gemini import GeminiProvider

    sent.append(json.dumps(GeminiProvider("gemini-2.5-flash", api_key="k").build_contents(history)))
    for body in sent:
        assert "[web search: release notes]" in body
        assert json.dumps(OPAQUE_SUMMARY_PREFIX)[1:-1] not in body
        assert "web_search_call" not in body

"""ContextGuard: the chat session's pre-send steps for frameworks that send their own requests."""

from __future__ import annotations

import pytest

from autocompact import ContentError, Message, MessageTooLargeError
from autocompact.compaction import CompressionService, CompressionStatus, CompressionTrigger
from autocompact.compaction.extractive import extractive_summary
from autocompact.estimation import Calibration
from autocompact.guard import ContextGuard, GuardState, learn_from_usage, request_stats
from autocompact.providers.base import ToolSpec
from autocompact.testing import FakeProvider, FakeReply
from histories import text_history

WINDOW = 100_000  # warn 60,000 · auto 70,000 · hard 77,000


def offline_guard() -> ContextGuard:
    """A guard that summarizes with the offline extractive summarizer."""
    return ContextGuard(
        context_window=WINDOW, compression=CompressionService(None, summarizer=extractive_summary)
    )


def test_below_auto_nothing_happens() -> None:
    """A small request comes back unchanged, with no compaction."""
    messages = text_history(20_000, end_on_user=True)
    result = offline_guard().run(messages)
    assert result.history == tuple(messages)
    assert result.request == tuple(messages)
    assert result.compactions == ()
    assert not result.compacted
    assert not result.trimmed


def test_auto_tier_compacts_and_keeps_pending_last() -> None:
    """Over auto the guard compacts; the pending message stays last and the request shrinks."""
    messages = text_history(72_000, end_on_user=True)
    result = offline_guard().run(messages)
    assert result.compacted
    assert result.compactions[0].trigger is CompressionTrigger.AUTO
    assert result.history[-1] is messages[-1]
    assert result.request == result.history
    assert len(result.history) < len(messages)


def test_system_prompt_and_tools_are_counted() -> None:
    """A large system prompt and tool set push a small history over the auto threshold."""
    messages = text_history(40_000, end_on_user=True)
    tools = [ToolSpec(name=f"t{i}", parameters={"description": "x" * 4_000}) for i in range(8)]
    assert not offline_guard().run(messages).compacted
    result = offline_guard().run(messages, system_instruction="s" * 80_000, tools=tools)
    assert result.tokens >= 70_000
    assert result.compacted


def test_failed_summaries_count_and_history_unchanged() -> None:
    """A failing side query leaves the history as it was and adds one to the breaker."""
    fake = FakeProvider()
    fake.enqueue(FakeReply(text=""), purpose="side_query")
    guard = ContextGuard(
        context_window=WINDOW, compression=CompressionService(fake), clear_tool_outputs=False
    )
    messages = text_history(72_000, end_on_user=True)
    result = guard.run(messages, state=GuardState(consecutive_failures=1))
    assert result.compactions[0].status is CompressionStatus.COMPRESSION_FAILED_EMPTY_SUMMARY
    assert result.history == tuple(messages)
    assert result.state.consecutive_failures == 2


def test_breaker_open_skips_auto_and_hard_trims_request_only() -> None:
    """With the breaker open the auto tier is skipped; past hard a failed rescue trims the
    request, never the history."""
    fake = FakeProvider(responder=lambda r: FakeReply(text=""))
    guard = ContextGuard(
        context_window=WINDOW, compression=CompressionService(fake), clear_tool_outputs=False
    )
    open_state = GuardState(consecutive_failures=3)
    auto = guard.run(text_history(72_000, end_on_user=True), state=open_state)
    assert auto.compactions == ()
    hard = guard.run(text_history(90_000, end_on_user=True), state=open_state)
    assert hard.compactions[0].trigger is CompressionTrigger.HARD
    assert hard.history == tuple(text_history(90_000, end_on_user=True))
    assert hard.trimmed
    assert len(hard.request) < len(hard.history)
    assert hard.state.consecutive_failures == 3


def test_reactive_forces_a_compaction() -> None:
    """A reactive step compacts even a small history; on failure the request is unchanged."""
    messages = text_history(30_000, end_on_user=True)
    result = offline_guard().run(messages, reactive=True)
    assert result.compacted
    assert result.compactions[0].trigger is CompressionTrigger.REACTIVE
    fake = FakeProvider(responder=lambda r: FakeReply(text=""))
    failed = ContextGuard(context_window=WINDOW, compression=CompressionService(fake)).run(
        messages, reactive=True
    )
    assert not failed.compacted
    assert failed.request == tuple(messages)
    assert failed.state.consecutive_failures == 1


async def test_async_run_uses_acomplete() -> None:
    """The async driver sends the side query through the provider's async path."""
    fake = FakeProvider()
    guard = ContextGuard(
        context_window=WINDOW, compression=CompressionService(fake), clear_tool_outputs=False
    )
    result = await guard.arun(text_history(72_000, end_on_user=True))
    assert result.compacted
    assert [r.purpose for r in fake.requests] == ["side_query"]
    assert fake.requests[0].max_output_tokens == 20_000
    assert fake.requests[0].thinking is False


def test_request_must_end_with_user_message() -> None:
    """A request ending with a model message is refused with a clear error."""
    with pytest.raises(ContentError, match="pending user message"):
        offline_guard().run([Message.user("hi"), Message.model("hello")])


def test_state_round_trip_and_bad_state() -> None:
    """The state survives its JSON form; a bad field is named."""
    state = GuardState(consecutive_failures=2, calibration=Calibration(factor=1.3, samples=4))
    assert GuardState.from_dict(state.to_dict()) == state
    assert GuardState.from_dict(None) == GuardState()
    with pytest.raises(ContentError, match="consecutive_failures"):
        GuardState.from_dict({"consecutive_failures": -1})


def test_learn_from_usage_raises_cold_estimates() -> None:
    """A reported size larger than the estimate teaches a factor above 1."""
    messages = text_history(20_000, end_on_user=True)
    stats = request_stats(messages, system_instruction="sys", tools=())
    plain = offline_guard().run(messages).tokens
    state = learn_from_usage(GuardState(), stats, int(plain * 1.5))
    assert state.calibration.factor == pytest.approx(1.5, rel=0.02)
    assert learn_from_usage(state, stats, 0) is state
    assert offline_guard().run(messages, state=state).tokens > plain


def test_a_request_over_the_window_even_trimmed_is_a_result_when_asked() -> None:
    """A request the guarantee cannot bring under the window raises MessageTooLargeError; with
    ``over_window_ok`` it is a result saying why, its request the history untrimmed and its
    state counting the failed summary (a driver that sends it anyway keeps the breaker's
    count). The error was the only answer, and the failed compaction's count was lost."""
    fake = FakeProvider(responder=lambda r: FakeReply(text=""))
    guard = ContextGuard(
        context_window=8_000, compression=CompressionService(fake), clear_tool_outputs=False
    )
    messages = [
        Message.user("Task 0"),
        Message.model("ok"),
        Message.user("notes " * 2_000),
        Message.model("noted"),
        Message.user("log " * 10_000),
        Message.model("read it"),
        Message.user("go on"),
    ]
    with pytest.raises(MessageTooLargeError):
        guard.run(messages)
    with pytest.raises(MessageTooLargeError):
        guard.guarantee(messages)
    result = guard.run(messages, over_window_ok=True)
    assert result.over_window is not None
    assert "cannot fit" in result.over_window
    assert result.request == result.history == tuple(messages)
    assert result.compactions
    assert not result.compacted
    assert result.state.consecutive_failures == 1
    measured = guard.guarantee(messages, over_window_ok=True)
    assert measured.over_window is not None
    assert measured.request == tuple(messages)
    assert measured.tokens > 8_000


@pytest.mark.parametrize(
    "earlier",
    [[], [Message.user("short"), Message.model("done")]],
    ids=["alone", "after-a-short-turn"],
)
def test_guarantee_refuses_a_pending_message_over_the_window_as_the_flow_does(
    earlier: list[Message],
) -> None:
    """guarantee() (the trim-only path) refuses a pending message larger than the whole window
    with the flow's words; it sent it when there was nothing (worth) leaving out. With
    ``over_window_ok`` the refusal is a result, the request untrimmed."""
    guard = ContextGuard(
        context_window=4_000, compression=CompressionService(None, summarizer=extractive_summary)
    )
    messages = [*earlier, Message.user("word " * 20_000)]
    with pytest.raises(MessageTooLargeError) as flow:
        guard.run(messages)
    with pytest.raises(MessageTooLargeError) as trim_only:
        guard.guarantee(messages)
    assert str(trim_only.value) == str(flow.value)
    assert "the message being sent is about 25,000 tokens" in str(trim_only.value)
    measured = guard.guarantee(messages, over_window_ok=True)
    assert measured.over_window == str(flow.value)
    assert measured.request == tuple(messages)

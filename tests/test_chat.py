"""ChatSession (SPEC §5): breaker, hard rescue, cold path, reactive retry, events, threads."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

import pytest

from autocompact import (
    ChatRequest,
    Completion,
    ContextOverflowError,
    Message,
    StreamDone,
    TextDelta,
    Tier,
    Usage,
)
from autocompact.chat import ChatSession
from autocompact.compaction import CompressionService, CompressionStatus, CompressionTrigger
from autocompact.events import (
    BreakerClosed,
    BreakerOpened,
    CompactionFailed,
    CompactionStarted,
    CompactionSucceeded,
    Event,
    ThresholdCrossed,
)
from autocompact.testing import FakeProvider, FakeReply
from histories import text_history as history_of

WINDOW = 100_000  # warn 60,000 · auto 70,000 · hard 77,000
S = CompressionStatus


def failing_summaries(request: ChatRequest) -> FakeReply:
    """A responder whose every side query comes back empty."""
    return FakeReply(text="" if request.purpose == "side_query" else "OK.")


def purposes(fake: FakeProvider) -> list[str]:
    """The purpose of each request the fake received, in order."""
    return [r.purpose for r in fake.requests]


def kinds(events: Sequence[Event]) -> list[str]:
    """The kind of each event, in order."""
    return [e.kind for e in events]


# -- breaker --------------------------------------------------------------------------------


def test_three_unforced_failures_open_the_breaker() -> None:
    """After 3 failed auto compactions the gate is NOOP: no side query is sent any more."""
    fake = FakeProvider(responder=failing_summaries)
    session = ChatSession(fake, context_window=WINDOW, history=history_of(72_000))
    assert session.tier is Tier.AUTO
    for expected in (1, 2, 3):
        session.send("next")
        assert session.consecutive_failures == expected
    assert session.breaker_open
    assert purposes(fake) == ["side_query", "chat"] * 3
    session.send("next")
    session.send("next")
    assert purposes(fake)[6:] == ["chat", "chat"]
    assert session.consecutive_failures == 3
    assert session.tier is Tier.AUTO


def test_a_single_failure_never_blocks() -> None:
    """After one failure the next send tries again, and a success resets the count to 0."""
    fake = FakeProvider()
    fake.enqueue_empty()
    session = ChatSession(fake, context_window=WINDOW, history=history_of(72_000))
    session.send("next")
    assert session.consecutive_failures == 1
    assert not session.breaker_open
    session.send("again")
    assert purposes(fake) == ["side_query", "chat", "side_query", "chat"]
    assert session.compactions[-1].status is S.COMPRESSED
    assert session.consecutive_failures == 0


def test_success_resets_the_count() -> None:
    """A successful auto compaction resets a count of 2 to 0."""
    session = ChatSession(
        FakeProvider(), context_window=WINDOW, history=history_of(72_000), consecutive_failures=2
    )
    session.send("next")
    assert session.compactions[-1].status is S.COMPRESSED
    assert session.consecutive_failures == 0


def test_manual_compress_recovers_an_open_breaker() -> None:
    """A forced manual compaction runs with the breaker open and closes it on success."""
    events: list[Event] = []
    fake = FakeProvider()
    session = ChatSession(
        fake,
        context_window=WINDOW,
        history=history_of(72_000),
        consecutive_failures=3,
        hooks=[events.append],
    )
    session.send("next")
    assert purposes(fake) == ["chat"]
    info = session.compress()
    assert info.status is S.COMPRESSED
    assert info.trigger is CompressionTrigger.MANUAL
    assert session.consecutive_failures == 0
    assert not session.breaker_open
    closed = [e for e in events if isinstance(e, BreakerClosed)]
    assert closed == [BreakerClosed(previous_failures=3)]


def test_forced_failures_add_nothing() -> None:
    """A failed manual compaction and a failed hard rescue leave the count unchanged."""
    fake = FakeProvider(responder=failing_summaries)
    session = ChatSession(
        fake, context_window=WINDOW, history=history_of(72_000), consecutive_failures=1
    )
    assert session.compress().status is S.COMPRESSION_FAILED_EMPTY_SUMMARY
    assert session.consecutive_failures == 1
    hard = ChatSession(
        fake, context_window=WINDOW, history=history_of(80_000), consecutive_failures=1
    )
    hard.send("next")
    assert hard.compactions[0].trigger is CompressionTrigger.HARD
    assert hard.compactions[0].status.failed
    assert hard.consecutive_failures == 1


def test_reactive_failure_adds_one() -> None:
    """A failed reactive compaction counts as a failure (adds 1)."""
    fake = FakeProvider()
    fake.enqueue_too_long()
    fake.enqueue_empty()
    session = ChatSession(fake, context_window=1_000_000, history=history_of(20_000))
    with pytest.raises(ContextOverflowError):
        session.send("hi")
    assert session.compactions[-1].trigger is CompressionTrigger.REACTIVE
    assert session.consecutive_failures == 1


def test_breaker_count_survives_from_the_constructor() -> None:
    """consecutive_failures given at construction is the breaker's starting count."""
    fake = FakeProvider()
    session = ChatSession(
        fake, context_window=WINDOW, history=history_of(72_000), consecutive_failures=3
    )
    assert session.breaker_open
    session.send("x")
    assert purposes(fake) == ["chat"]


# -- hard rescue ----------------------------------------------------------------------------


def test_hard_rescue_compacts_before_the_send_even_with_breaker_open() -> None:
    """At or above hard a forced compaction runs before the send, despite an open breaker."""
    fake = FakeProvider()
    session = ChatSession(
        fake, context_window=WINDOW, history=history_of(80_000), consecutive_failures=3
    )
    assert session.tier is Tier.HARD
    session.send("next")
    assert purposes(fake) == ["side_query", "chat"]
    info = session.compactions[0]
    assert info.trigger is CompressionTrigger.HARD
    assert info.status is S.COMPRESSED
    assert session.consecutive_failures == 0
    assert len(fake.requests[1].messages) < 40


def test_hard_rescue_does_not_reset_the_count_first() -> None:
    """The count is not reset before the rescue: a failed rescue leaves 2 at 2 (not 0)."""
    fake = FakeProvider(responder=failing_summaries)
    session = ChatSession(
        fake, context_window=WINDOW, history=history_of(80_000), consecutive_failures=2
    )
    session.send("next")
    assert session.compactions[0].trigger is CompressionTrigger.HARD
    assert session.consecutive_failures == 2


def test_hard_crossed_by_the_pending_message() -> None:
    """A pending message that lifts the count over hard triggers the rescue (not the auto tier)."""
    fake = FakeProvider()
    session = ChatSession(fake, context_window=WINDOW, history=history_of(66_000))
    session.send("p" * 4 * 14_000)
    assert session.compactions[0].trigger is CompressionTrigger.HARD


# -- cold path ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tokens", "trigger"),
    [(72_000, CompressionTrigger.AUTO), (90_000, CompressionTrigger.HARD)],
    ids=["auto", "hard"],
)
def test_first_send_with_inherited_history_compacts(
    tokens: int, trigger: CompressionTrigger
) -> None:
    """With last_prompt_token_count=0 a large inherited history is estimated and compacted."""
    fake = FakeProvider()
    session = ChatSession(fake, context_window=WINDOW, history=history_of(tokens))
    assert session.last_prompt_token_count == 0
    session.send("continue")
    assert purposes(fake) == ["side_query", "chat"]
    assert session.compactions[0].trigger is trigger
    assert session.compactions[0].status is S.COMPRESSED


def test_cold_path_counts_the_system_instruction() -> None:
    """On the first send the system instruction is part of the estimate and can cross auto."""
    fake = FakeProvider()
    session = ChatSession(
        fake, context_window=WINDOW, history=history_of(64_000), system_instruction="s" * 4 * 7_000
    )
    assert session.estimate_tokens() == 64_000 + 7_000
    session.send("go")
    assert session.compactions[0].trigger is CompressionTrigger.AUTO


def test_small_history_sends_without_compaction() -> None:
    """Below auto nothing but the chat request is sent."""
    fake = FakeProvider()
    session = ChatSession(fake, context_window=WINDOW, history=history_of(40_000))
    reply = session.send("hi")
    assert reply.text == "OK."
    assert purposes(fake) == ["chat"]
    assert session.compactions == []


# -- counts ---------------------------------------------------------------------------------


def test_last_prompt_count_comes_from_usage() -> None:
    """The provider's reported prompt size becomes the base of the next estimate."""
    fake = FakeProvider()
    fake.enqueue_text("ok", usage=Usage(prompt_tokens=12_345, output_tokens=7), purpose="chat")
    session = ChatSession(fake, context_window=WINDOW)
    session.send("hello")
    assert session.last_prompt_token_count == 12_345
    assert session.estimate_tokens("abcd") == 12_345 + 7 + 1
    assert session.tier is session.thresholds.tier(session.estimate_tokens())


def test_no_usage_falls_back_to_the_cold_path() -> None:
    """A reply without usage leaves the count unknown: the next estimate walks the history."""
    fake = FakeProvider()
    fake.enqueue(FakeReply(text="ok", report_usage=False), purpose="chat")
    session = ChatSession(fake, context_window=WINDOW, history=history_of(8_000))
    session.send("x" * 40)
    assert session.last_prompt_token_count == 0
    assert session.estimate_tokens() == 8_000 + 10 + 1


def test_history_grows_by_message_and_reply() -> None:
    """A send appends the user message and the model reply."""
    session = ChatSession(FakeProvider(), context_window=WINDOW)
    session.send("hello")
    assert session.history == (Message.user("hello"), Message.model("OK."))


def test_request_carries_system_tools_and_output_cap() -> None:
    """The chat request carries the system instruction, the tools and max_output_tokens."""
    from autocompact import ToolSpec

    fake = FakeProvider()
    tool = ToolSpec(name="grep")
    session = ChatSession(
        fake, context_window=WINDOW, system_instruction="sys", tools=[tool], max_output_tokens=512
    )
    session.send("hi")
    request = fake.requests[0]
    assert (request.system_instruction, request.tools, request.max_output_tokens) == (
        "sys",
        (tool,),
        512,
    )
    assert request.purpose == "chat"


def test_clear_forgets_everything() -> None:
    """clear() empties the history and resets counts and the breaker."""
    session = ChatSession(
        FakeProvider(), context_window=WINDOW, history=history_of(10_000), consecutive_failures=3
    )
    session.send("x")
    session.clear()
    assert session.history == ()
    assert session.last_prompt_token_count == 0
    assert session.consecutive_failures == 0
    assert session.estimate_tokens() == 0


def test_manual_compress_passes_instructions() -> None:
    """compress(instructions) puts them in the side query's system prompt."""
    fake = FakeProvider()
    session = ChatSession(fake, context_window=WINDOW, history=history_of(20_000))
    session.compress("keep the file list")
    assert "keep the file list" in (fake.requests[0].system_instruction or "")


def test_separate_compression_service_writes_the_summary() -> None:
    """A compression_service with another provider receives the side query."""
    main, side = FakeProvider(), FakeProvider()
    session = ChatSession(
        main,
        context_window=WINDOW,
        history=history_of(72_000),
        compression_service=CompressionService(side),
    )
    session.send("x")
    assert purposes(main) == ["chat"]
    assert purposes(side) == ["side_query"]


# -- reactive -------------------------------------------------------------------------------


def _overflow(n: int) -> ContextOverflowError:
    return ContextOverflowError(f"prompt is too long #{n}", provider="fake", status=400)


def test_reactive_compacts_and_retries_once() -> None:
    """A too-long rejection forces a compaction and the send is retried once."""
    fake = FakeProvider()
    fake.enqueue_error(_overflow(1), purpose="chat")
    session = ChatSession(fake, context_window=1_000_000, history=history_of(20_000))
    reply = session.send("hi")
    assert reply.text == "OK."
    assert purposes(fake) == ["chat", "side_query", "chat"]
    info = session.compactions[-1]
    assert (info.trigger, info.status) == (CompressionTrigger.REACTIVE, S.COMPRESSED)
    assert session.history[-2:] == (Message.user("hi"), Message.model("OK."))
    assert len(fake.requests[2].messages) < len(fake.requests[0].messages)


def test_reactive_failure_raises_the_original_error() -> None:
    """When the reactive compaction fails, the provider's original overflow error is raised."""
    fake = FakeProvider()
    original = _overflow(1)
    fake.enqueue_error(original, purpose="chat")
    fake.enqueue_truncated()
    history = history_of(20_000)
    session = ChatSession(fake, context_window=1_000_000, history=history)
    with pytest.raises(ContextOverflowError) as info:
        session.send("hi")
    assert info.value is original
    assert session.history == tuple(history)
    assert purposes(fake) == ["chat", "side_query"]


def test_reactive_noop_raises_the_original_error() -> None:
    """With nothing to compact (empty history) the original overflow error is raised."""
    fake = FakeProvider()
    original = _overflow(1)
    fake.enqueue_error(original, purpose="chat")
    session = ChatSession(fake, context_window=1_000_000)
    with pytest.raises(ContextOverflowError) as info:
        session.send("hi")
    assert info.value is original
    assert session.history == ()
    assert session.consecutive_failures == 0


def test_second_overflow_propagates() -> None:
    """A second too-long rejection after the retry propagates (no second retry)."""
    fake = FakeProvider()
    fake.enqueue_error(_overflow(1), purpose="chat")
    second = _overflow(2)
    fake.enqueue_error(second, purpose="chat")
    session = ChatSession(fake, context_window=1_000_000, history=history_of(20_000))
    with pytest.raises(ContextOverflowError) as info:
        session.send("hi")
    assert info.value is second
    assert purposes(fake) == ["chat", "side_query", "chat"]
    assert Message.user("hi") not in session.history


# -- events ---------------------------------------------------------------------------------


def test_auto_compaction_events_in_order() -> None:
    """Crossing into auto emits ThresholdCrossed, CompactionStarted, CompactionSucceeded, then
    ThresholdCrossed back down."""
    events: list[Event] = []
    session = ChatSession(
        FakeProvider(), context_window=WINDOW, history=history_of(66_000), hooks=[events.append]
    )
    session.send("p" * 4 * 6_000)
    assert kinds(events) == [
        "threshold_crossed",
        "compaction_started",
        "compaction_succeeded",
        "threshold_crossed",
    ]
    assert events[0] == ThresholdCrossed(previous=Tier.WARN, current=Tier.AUTO, tokens=70_000)
    assert events[1] == CompactionStarted(trigger=CompressionTrigger.AUTO, tokens=70_000)
    assert isinstance(events[2], CompactionSucceeded)
    assert events[2].info is session.compactions[0]
    assert isinstance(events[3], ThresholdCrossed)
    assert events[3].previous is Tier.AUTO


def test_breaker_events_in_order() -> None:
    """Three failures emit CompactionFailed ×3 then BreakerOpened; a manual success closes it."""
    events: list[Event] = []
    fake = FakeProvider()
    for _ in range(3):
        fake.enqueue_empty()
    session = ChatSession(
        fake, context_window=WINDOW, history=history_of(72_000), hooks=[events.append]
    )
    for _ in range(3):
        session.send("n")
    session.compress()
    compaction_events = [e for e in events if not isinstance(e, ThresholdCrossed)]
    assert kinds(compaction_events) == [
        "compaction_started",
        "compaction_failed",
        "compaction_started",
        "compaction_failed",
        "compaction_started",
        "compaction_failed",
        "breaker_opened",
        "compaction_started",
        "compaction_succeeded",
        "breaker_closed",
    ]
    assert compaction_events[6] == BreakerOpened(consecutive_failures=3)
    failed = compaction_events[1]
    assert isinstance(failed, CompactionFailed)
    assert failed.info.status is S.COMPRESSION_FAILED_EMPTY_SUMMARY


def test_a_raising_hook_does_not_break_the_send(caplog: pytest.LogCaptureFixture) -> None:
    """A hook that raises is logged; later hooks still run and the send completes."""
    events: list[Event] = []

    def bad(event: Event) -> None:
        raise RuntimeError("hook bug")

    session = ChatSession(
        FakeProvider(), context_window=WINDOW, history=history_of(72_000), hooks=[bad]
    )
    session.add_hook(events.append)
    with caplog.at_level(logging.ERROR, logger="autocompact"):
        reply = session.send("x")
    assert reply.text == "OK."
    assert "compaction_succeeded" in kinds(events)
    assert "hook raised" in caplog.text


# -- streaming ------------------------------------------------------------------------------


def test_send_stream_yields_deltas_then_done_and_commits() -> None:
    """send_stream yields text deltas then one StreamDone; the history is committed at the end."""
    fake = FakeProvider()
    fake.enqueue_text("hello there world", purpose="chat")
    session = ChatSession(fake, context_window=WINDOW)
    events = list(session.send_stream("hi"))
    assert isinstance(events[-1], StreamDone)
    assert all(isinstance(e, TextDelta) for e in events[:-1])
    assert "".join(e.text for e in events[:-1]) == "hello there world"  # type: ignore[union-attr]
    assert session.history == (Message.user("hi"), Message.model("hello there world"))


def test_send_stream_compacts_first() -> None:
    """send_stream runs the same pre-send compaction as send."""
    fake = FakeProvider()
    session = ChatSession(fake, context_window=WINDOW, history=history_of(72_000))
    list(session.send_stream("x"))
    assert purposes(fake) == ["side_query", "chat"]
    assert session.compactions[0].status is S.COMPRESSED


def test_send_stream_reactive_retry() -> None:
    """A too-long rejection during a stream triggers the same compact-and-retry."""
    fake = FakeProvider()
    fake.enqueue_too_long()
    session = ChatSession(fake, context_window=1_000_000, history=history_of(20_000))
    events = list(session.send_stream("x"))
    assert isinstance(events[-1], StreamDone)
    assert purposes(fake) == ["chat", "side_query", "chat"]


# -- concurrency ----------------------------------------------------------------------------


class _TrackingProvider(FakeProvider):
    """A fake that records how many calls run at once and echoes the user's text."""

    def __init__(self) -> None:
        super().__init__(responder=lambda r: FakeReply(text="re:" + r.messages[-1].text))
        self.active = 0
        self.max_active = 0
        self._guard = threading.Lock()

    def complete(self, request: ChatRequest) -> Completion:
        with self._guard:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            threading.Event().wait(0.001)  # a tiny window in which a second sender could enter
            return super().complete(request)
        finally:
            with self._guard:
                self.active -= 1


def test_two_threads_are_serialized() -> None:
    """Sends from two threads on one session never overlap; the history stays well-formed."""
    fake = _TrackingProvider()
    session = ChatSession(fake, context_window=1_000_000)
    start = threading.Barrier(2)

    def worker(name: str) -> None:
        start.wait()
        for i in range(10):
            session.send(f"{name}{i}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert fake.max_active == 1
    history = session.history
    assert len(history) == 40
    for user, model in zip(history[::2], history[1::2], strict=True):
        assert (user.role, model.role) == ("user", "model")
        assert model.text == "re:" + user.text
    assert {m.text for m in history[::2]} == {f"{n}{i}" for n in "ab" for i in range(10)}


def test_context_window_accepts_suffixes_and_rejects_bad_values() -> None:
    """The session parses its window like the CLI does and refuses a bad one with ConfigError."""
    from autocompact import ConfigError

    assert ChatSession(FakeProvider(), context_window="128k").context_window == 128_000  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="-5"):
        ChatSession(FakeProvider(), context_window=-5)


def test_abandoned_stream_keeps_history_and_releases_the_lock() -> None:
    """Breaking out of a stream keeps the history, and another thread can send afterwards."""
    fake = FakeProvider()
    fake.enqueue_text("a b c d e", purpose="chat")
    session = ChatSession(fake, context_window=WINDOW)
    for _event in session.send_stream("hi"):
        break
    assert session.history == ()
    other = threading.Thread(target=session.send, args=("again",))
    other.start()
    other.join(timeout=10)
    assert not other.is_alive()
    assert session.history == (Message.user("again"), Message.model("OK."))

"""Issue 16: refusals never kept, every started compaction ends, clear() and event loops."""

from __future__ import annotations

import asyncio
import threading

import pytest

from autocompact import (
    ChatRequest,
    Completion,
    ConfigError,
    FinishReason,
    Usage,
)
from autocompact.chat import AsyncChatSession, ChatSession
from autocompact.compaction import CompressionService, CompressionStatus, CompressOptions
from autocompact.events import (
    CompactionCancelled,
    CompactionFailed,
    Event,
)
from autocompact.testing import FakeProvider, FakeReply
from histories import assert_paired
from histories import text_history as history_of

WINDOW = 100_000  # auto 70,000 · hard 77,000
S = CompressionStatus


# -- (3) content filter / refusal -----------------------------------------------------------


def test_a_filtered_summary_is_a_counted_failure_with_its_own_status() -> None:
    """A side query stopped by a filter or refusal: its own failed status, history unchanged."""
    fake = FakeProvider()
    fake.enqueue(
        FakeReply(text="<state_snapshot>partial", finish_reason=FinishReason.CONTENT_FILTER),
        purpose="side_query",
    )
    history = tuple(history_of(72_000))  # auto ≤ count < hard: an unforced attempt
    session = ChatSession(fake, context_window=WINDOW, history=history)
    events: list[Event] = []
    session.add_hook(events.append)
    session.send("next")
    info = session.compactions[-1]
    assert info.status is S.COMPRESSION_FAILED_CONTENT_FILTER
    assert info.status.failed
    assert session.consecutive_failures == 1  # the breaker counts it
    assert session.history[: len(history)] == history  # nothing summarized
    assert any(isinstance(e, CompactionFailed) for e in events)


def test_the_service_never_keeps_a_filtered_summary() -> None:
    """CompressionService returns the input history object itself on a filtered reply."""
    fake = FakeProvider()
    fake.enqueue(
        FakeReply(text="<state_snapshot>x", finish_reason=FinishReason.CONTENT_FILTER),
        purpose="side_query",
    )
    history = tuple(history_of(40_000))
    result = CompressionService(fake).compress(
        history, CompressOptions(context_window=WINDOW, force=True)
    )
    assert result.history is history
    assert result.info.status is S.COMPRESSION_FAILED_CONTENT_FILTER
    assert result.info.summary is None


# -- (4) every start ends -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "reason", "said"),
    [
        (KeyboardInterrupt(), "interrupted", None),
        (RuntimeError("a bug in a provider"), "error", "RuntimeError: a bug in a provider"),
        (ValueError(), "error", "ValueError"),  # no text: the type alone, no dangling colon
    ],
    ids=["keyboard-interrupt", "unexpected-exception", "exception-without-text"],
)
def test_an_interrupted_summary_ends_with_a_cancelled_event(
    error: BaseException, reason: str, said: str | None
) -> None:
    """Ctrl-C or a raw exception in the side query: one CompactionCancelled, history kept."""
    fake = FakeProvider()
    fake.enqueue_error(error, purpose="side_query")
    history = tuple(history_of(80_000))
    session = ChatSession(fake, context_window=WINDOW, history=history)
    events: list[Event] = []
    session.add_hook(events.append)
    with pytest.raises(type(error)):
        session.send("next")
    assert_paired(events)
    cancelled = [e for e in events if isinstance(e, CompactionCancelled)]
    assert [c.reason for c in cancelled] == [reason]
    assert [c.error for c in cancelled] == [said]
    assert session.history == history
    assert session.consecutive_failures == 0


def test_an_interrupted_streamed_turn_ends_its_compaction() -> None:
    """send_stream drives its own loop: an interrupted side query still ends its compaction."""
    fake = FakeProvider()
    fake.enqueue_error(KeyboardInterrupt(), purpose="side_query")
    session = ChatSession(fake, context_window=WINDOW, history=history_of(80_000))
    events: list[Event] = []
    session.add_hook(events.append)
    with pytest.raises(KeyboardInterrupt):
        list(session.send_stream("next"))
    assert_paired(events)
    assert [e.reason for e in events if isinstance(e, CompactionCancelled)] == ["interrupted"]


def test_a_cancelled_async_summary_ends_with_a_cancelled_event() -> None:
    """asyncio cancellation during the side query: CompactionCancelled(reason='cancelled')."""
    started = asyncio.Event()

    class Slow(FakeProvider):
        async def acomplete(self, request: ChatRequest) -> Completion:
            if request.purpose == "side_query":
                started.set()
                await asyncio.sleep(3600)
            return await super().acomplete(request)

    history = tuple(history_of(80_000))
    session = AsyncChatSession(Slow(), context_window=WINDOW, history=history)
    events: list[Event] = []
    session.add_hook(events.append)

    async def main() -> None:
        task = asyncio.ensure_future(session.send("next"))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert_paired(events)
    assert [e.reason for e in events if isinstance(e, CompactionCancelled)] == ["cancelled"]
    assert session.history == history


# -- (2) clear() during a compaction; two event loops ----------------------------------------


def test_clear_from_another_thread_waits_and_the_conversation_stays_cleared() -> None:
    """clear() during a compaction takes the session lock: the summary never brings it back."""
    in_summary = threading.Event()
    release = threading.Event()

    class Blocking(FakeProvider):
        def complete(self, request: ChatRequest) -> Completion:
            if request.purpose == "side_query":
                in_summary.set()
                assert release.wait(10)
            return super().complete(request)

    session = ChatSession(Blocking(), context_window=WINDOW, history=history_of(80_000))
    sender = threading.Thread(target=session.send, args=("next",))
    sender.start()
    assert in_summary.wait(10)
    clearer = threading.Thread(target=session.clear)
    clearer.start()
    clearer.join(0.2)
    assert clearer.is_alive()  # it waits for the lock instead of racing the summary
    release.set()
    sender.join(10)
    clearer.join(10)
    assert session.history == ()
    assert session.last_prompt_token_count == 0


def test_clear_during_an_async_compaction_wins() -> None:
    """AsyncChatSession.clear() while a summary is written: neither it nor the turn come back."""
    started = asyncio.Event()
    release = asyncio.Event()

    class Slow(FakeProvider):
        async def acomplete(self, request: ChatRequest) -> Completion:
            if request.purpose == "side_query":
                started.set()
                await release.wait()
            return await super().acomplete(request)

    session = AsyncChatSession(Slow(), context_window=WINDOW, history=history_of(80_000))
    events: list[Event] = []
    session.add_hook(events.append)

    async def main() -> None:
        task = asyncio.ensure_future(session.send("next"))
        await started.wait()
        session.clear()
        release.set()
        await task

    asyncio.run(main())
    assert session.history == ()
    assert_paired(events)
    assert any(isinstance(e, CompactionCancelled) for e in events)


def test_an_async_session_on_two_event_loops_gives_a_clear_error() -> None:
    """A second loop using a session while the first loop's send is in flight: ConfigError."""
    in_send = threading.Event()
    release = threading.Event()

    class Slow(FakeProvider):
        async def acomplete(self, request: ChatRequest) -> Completion:
            in_send.set()
            while not release.is_set():
                await asyncio.sleep(0.01)
            return await super().acomplete(request)

    session = AsyncChatSession(Slow(), context_window=WINDOW)
    first = threading.Thread(target=lambda: asyncio.run(session.send("one")))
    first.start()
    assert in_send.wait(10)
    try:
        with pytest.raises(ConfigError, match="another event loop") as info:
            asyncio.run(session.send("two"))
        assert info.value.key == "AsyncChatSession"
    finally:
        release.set()
        first.join(10)
    # Once the first loop is done, another loop may use the session.
    asyncio.run(session.send("three"))
    assert [m.text for m in session.history if m.role == "user"] == ["one", "three"]


def test_an_async_session_works_across_sequential_event_loops() -> None:
    """asyncio.run twice on one session (with waiting sends each time) works."""
    session = AsyncChatSession(FakeProvider(), context_window=WINDOW)

    async def two_at_once() -> None:
        await asyncio.gather(session.send("a"), session.send("b"))

    asyncio.run(two_at_once())
    asyncio.run(two_at_once())
    assert len(session.history) == 8


def test_usage_with_a_refusal_from_openai_maps_to_content_filter() -> None:
    """A Completion built with CONTENT_FILTER is what the plan refuses (usage kept for counts)."""
    fake = FakeProvider()
    fake.enqueue(
        FakeReply(
            text="I can't help with that.",
            usage=Usage(prompt_tokens=10, output_tokens=5),
            finish_reason=FinishReason.CONTENT_FILTER,
        ),
        purpose="side_query",
    )
    history = tuple(history_of(40_000))
    result = CompressionService(fake).compress(
        history, CompressOptions(context_window=WINDOW, force=True)
    )
    assert result.info.status is S.COMPRESSION_FAILED_CONTENT_FILTER
    assert result.info.compression_output_token_count == 5

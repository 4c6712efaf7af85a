"""AsyncChatSession: the same turn flow as ChatSession, on asyncio (breaker, rescue, tasks)."""

from __future__ import annotations

import asyncio

import pytest

from autocompact import (
    ChatRequest,
    Completion,
    ContextOverflowError,
    Message,
    StreamDone,
    StreamEvent,
    TextDelta,
    Tier,
)
from autocompact.chat import AsyncChatSession
from autocompact.compaction import CompressionStatus, CompressionTrigger
from autocompact.events import Event
from autocompact.testing import FakeProvider, FakeReply
from histories import text_history as history_of

WINDOW = 100_000  # warn 60,000 · auto 70,000 · hard 77,000
S = CompressionStatus


def purposes(fake: FakeProvider) -> list[str]:
    """The purpose of each request the fake received, in order."""
    return [r.purpose for r in fake.requests]


async def test_send_appends_message_and_reply() -> None:
    """await send() returns the reply and appends both messages."""
    session = AsyncChatSession(FakeProvider(), context_window=WINDOW)
    reply = await session.send("hello")
    assert reply.text == "OK."
    assert session.history == (Message.user("hello"), Message.model("OK."))


async def test_breaker_opens_after_three_failures() -> None:
    """Three failed auto compactions open the breaker; the fourth send makes no side query."""
    fake = FakeProvider(
        responder=lambda r: FakeReply(text="" if r.purpose == "side_query" else "OK.")
    )
    session = AsyncChatSession(fake, context_window=WINDOW, history=history_of(72_000))
    for _ in range(4):
        await session.send("next")
    assert purposes(fake) == ["side_query", "chat"] * 3 + ["chat"]
    assert session.consecutive_failures == 3
    info = await session.compress()
    assert info.status is S.COMPRESSION_FAILED_EMPTY_SUMMARY
    assert session.consecutive_failures == 3


async def test_hard_rescue_with_breaker_open_recovers() -> None:
    """Crossing hard forces a compaction before the send and closes an open breaker."""
    events: list[Event] = []
    fake = FakeProvider()
    session = AsyncChatSession(
        fake,
        context_window=WINDOW,
        history=history_of(80_000),
        consecutive_failures=3,
        hooks=[events.append],
    )
    assert session.tier is Tier.HARD
    await session.send("next")
    assert purposes(fake) == ["side_query", "chat"]
    assert session.compactions[0].trigger is CompressionTrigger.HARD
    assert session.consecutive_failures == 0
    assert "breaker_closed" in [e.kind for e in events]


async def test_cold_path_first_send_compacts() -> None:
    """A large inherited history with no provider count compacts on the first send."""
    fake = FakeProvider()
    session = AsyncChatSession(fake, context_window=WINDOW, history=history_of(72_000))
    await session.send("continue")
    assert session.compactions[0].status is S.COMPRESSED


async def test_reactive_retry_and_original_error() -> None:
    """A too-long rejection compacts and retries once; when compaction fails the original error
    is raised."""
    fake = FakeProvider()
    fake.enqueue_too_long()
    session = AsyncChatSession(fake, context_window=1_000_000, history=history_of(20_000))
    await session.send("hi")
    assert purposes(fake) == ["chat", "side_query", "chat"]

    fake2 = FakeProvider()
    original = ContextOverflowError("too long", provider="fake")
    fake2.enqueue_error(original, purpose="chat")
    fake2.enqueue_empty()
    history = history_of(20_000)
    session2 = AsyncChatSession(fake2, context_window=1_000_000, history=history)
    with pytest.raises(ContextOverflowError) as info:
        await session2.send("hi")
    assert info.value is original
    assert session2.history == tuple(history)
    assert session2.consecutive_failures == 1


async def test_send_stream_yields_and_commits() -> None:
    """async send_stream yields deltas and a final StreamDone, then the history is committed."""
    fake = FakeProvider()
    fake.enqueue_text("one two three", purpose="chat")
    session = AsyncChatSession(fake, context_window=WINDOW)
    events: list[StreamEvent] = [e async for e in session.send_stream("hi")]
    assert isinstance(events[-1], StreamDone)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "one two three"
    assert session.history[-1] == Message.model("one two three")


class _YieldingProvider(FakeProvider):
    """A fake whose async calls yield to the loop and record how many run at once."""

    def __init__(self) -> None:
        super().__init__(responder=lambda r: FakeReply(text="re:" + r.messages[-1].text))
        self.active = 0
        self.max_active = 0

    async def acomplete(self, request: ChatRequest) -> Completion:
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            for _ in range(3):
                await asyncio.sleep(0)
            return await super().acomplete(request)
        finally:
            self.active -= 1


async def test_two_tasks_are_serialized() -> None:
    """Two tasks sending on one session never overlap; user/model alternate, replies match."""
    fake = _YieldingProvider()
    session = AsyncChatSession(fake, context_window=1_000_000)

    async def worker(name: str) -> None:
        for i in range(10):
            await session.send(f"{name}{i}")

    await asyncio.gather(worker("a"), worker("b"))
    assert fake.max_active == 1
    history = session.history
    assert len(history) == 40
    for user, model in zip(history[::2], history[1::2], strict=True):
        assert (user.role, model.role) == ("user", "model")
        assert model.text == "re:" + user.text


class _BlockingProvider(FakeProvider):
    """A fake whose async call for one purpose waits until cancelled."""

    def __init__(self, block: str) -> None:
        super().__init__()
        self.block = block
        self.entered = asyncio.Event()

    async def acomplete(self, request: ChatRequest) -> Completion:
        if request.purpose == self.block:
            self.requests.append(request)
            self.entered.set()
            await asyncio.Event().wait()
        return await super().acomplete(request)


@pytest.mark.parametrize(("block", "tokens"), [("side_query", 72_000), ("chat", 20_000)])
async def test_task_cancel_keeps_history(block: str, tokens: int) -> None:
    """Cancelling the task mid side query or mid main call leaves the history as it was."""
    fake = _BlockingProvider(block)
    history = history_of(tokens)
    session = AsyncChatSession(fake, context_window=WINDOW, history=history)
    task = asyncio.create_task(session.send("next"))
    await fake.entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert session.history == tuple(history)
    assert session.consecutive_failures == 0
    fake.block = "none"
    await session.send("again")  # the lock was released
    assert session.history[-2] == Message.user("again")


async def test_abandoned_stream_keeps_history_and_releases_the_lock() -> None:
    """Breaking out of a stream without aclose() keeps the history; the next send proceeds."""
    fake = FakeProvider()
    fake.enqueue_text("a b c d e", purpose="chat")
    session = AsyncChatSession(fake, context_window=WINDOW)
    async for _event in session.send_stream("hi"):
        break
    assert session.history == ()
    await asyncio.wait_for(session.send("again"), timeout=10)
    assert session.history == (Message.user("again"), Message.model("OK."))

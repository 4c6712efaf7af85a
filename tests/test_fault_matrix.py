"""Fault matrix: every fault × {ChatSession, AsyncChatSession} × {side query, main call, stream}.

Each fault leaves the history exactly as it was (the same tuple object) and ends in the right
status or exception.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from autocompact import (
    ChatRequest,
    MalformedResponseError,
    Message,
    ProviderError,
    ProviderTimeoutError,
    StreamDone,
    StreamEvent,
    TextDelta,
)
from autocompact.chat import AsyncChatSession, ChatSession
from autocompact.compaction import CompressionInfo, CompressionStatus
from autocompact.content import Usage
from autocompact.providers.base import Completion
from autocompact.testing import FakeProvider

WINDOW = 100_000  # auto 70,000 · hard 77,000
S = CompressionStatus


def history_of(tokens: int, per: int = 2_000) -> tuple[Message, ...]:
    """A user/model text history of about ``tokens`` estimated tokens, ending on a model reply."""
    n = tokens // per
    n -= n % 2
    return tuple(
        Message.user(chr(97 + i % 26) * per * 4) if i % 2 == 0 else Message.model("m" * per * 4)
        for i in range(n)
    )


class StreamFaultProvider(FakeProvider):
    """A fake whose stream raises ``fault`` after the first delta."""

    def __init__(self, fault: BaseException | None = None) -> None:
        super().__init__()
        self.fault = fault

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        events = super().stream(request)
        yield next(events)
        if self.fault is not None:
            raise self.fault
        yield from events

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        events = super().astream(request)
        yield await events.__anext__()
        if self.fault is not None:
            raise self.fault
        async for event in events:
            yield event


@dataclass
class Adapter:
    """Drives one session class through a plain, synchronous interface."""

    name: str
    cls: type[ChatSession] | type[AsyncChatSession]
    cancel: Callable[[], BaseException]

    def make(self, provider: FakeProvider, **kwargs: Any) -> Any:
        return self.cls(provider, context_window=WINDOW, **kwargs)

    def send(self, session: Any, message: str) -> Completion:
        if self.cls is ChatSession:
            result: Completion = session.send(message)
            return result
        return asyncio.run(session.send(message))  # type: ignore[no-any-return]

    def compress(self, session: Any) -> CompressionInfo:
        if self.cls is ChatSession:
            info: CompressionInfo = session.compress()
            return info
        return asyncio.run(session.compress())  # type: ignore[no-any-return]

    def stream(self, session: Any, message: str, *, stop_after: int | None = None) -> list[Any]:
        """Collect a stream's events; with ``stop_after`` close it after that many events."""
        if self.cls is ChatSession:
            gen = session.send_stream(message)
            out: list[Any] = []
            for event in gen:
                out.append(event)
                if stop_after is not None and len(out) >= stop_after:
                    gen.close()
                    break
            return out

        async def collect() -> list[Any]:
            agen = session.send_stream(message)
            got: list[Any] = []
            async for event in agen:
                got.append(event)
                if stop_after is not None and len(got) >= stop_after:
                    await agen.aclose()
                    break
            return got

        return asyncio.run(collect())


ADAPTERS = [
    Adapter("sync", ChatSession, KeyboardInterrupt),
    Adapter("async", AsyncChatSession, asyncio.CancelledError),
]


@pytest.fixture(params=ADAPTERS, ids=[a.name for a in ADAPTERS])
def adapter(request: pytest.FixtureRequest) -> Adapter:
    """The sync and the async session class behind one interface."""
    param: Adapter = request.param
    return param


# side-query faults: how to script them, and the status they must give
SIDE_FAULTS: dict[str, tuple[Callable[[FakeProvider], None], CompressionStatus]] = {
    "provider-error": (
        lambda f: f.enqueue_error(purpose="side_query"),
        S.COMPRESSION_FAILED_PROVIDER_ERROR,
    ),
    "timeout": (
        lambda f: f.enqueue_timeout(purpose="side_query"),
        S.COMPRESSION_FAILED_PROVIDER_ERROR,
    ),
    "malformed": (
        lambda f: f.enqueue_malformed(purpose="side_query"),
        S.COMPRESSION_FAILED_PROVIDER_ERROR,
    ),
    "empty": (lambda f: f.enqueue_empty(), S.COMPRESSION_FAILED_EMPTY_SUMMARY),
    "truncated-finish-reason": (
        lambda f: f.enqueue_truncated(),
        S.COMPRESSION_FAILED_OUTPUT_TRUNCATED,
    ),
    "truncated-by-size": (
        lambda f: f.enqueue_truncated(by_size=True),
        S.COMPRESSION_FAILED_OUTPUT_TRUNCATED,
    ),
    "inflated": (lambda f: f.enqueue_inflated(), S.COMPRESSION_FAILED_INFLATED_TOKEN_COUNT),
}

# main-call faults: the exception the send must raise
MAIN_FAULTS: dict[str, Callable[[], BaseException]] = {
    "provider-error": lambda: ProviderError("boom", provider="fake"),
    "timeout": lambda: ProviderTimeoutError("slow", provider="fake"),
    "malformed": lambda: MalformedResponseError("garbage", provider="fake"),
}


# -- side query -----------------------------------------------------------------------------


@pytest.mark.parametrize("fault", list(SIDE_FAULTS))
def test_side_query_fault_in_manual_compress(adapter: Adapter, fault: str) -> None:
    """A faulty summary in a manual compress gives its status and the very same history."""
    script, status = SIDE_FAULTS[fault]
    fake = FakeProvider()
    script(fake)
    history = history_of(20_000)
    session = adapter.make(fake, history=history, consecutive_failures=1)
    before = session.history
    info = adapter.compress(session)
    assert info.status is status
    assert session.history is before
    assert session.history == history
    assert session.consecutive_failures == 1  # forced: adds nothing


@pytest.mark.parametrize("fault", list(SIDE_FAULTS))
def test_side_query_fault_during_send(adapter: Adapter, fault: str) -> None:
    """A faulty summary during an auto compaction: the send still completes on the old history,
    and the failure is counted."""
    script, status = SIDE_FAULTS[fault]
    fake = FakeProvider()
    script(fake)
    history = history_of(72_000)
    session = adapter.make(fake, history=history)
    reply = adapter.send(session, "next")
    assert session.compactions[-1].status is status
    assert session.history == (*history, Message.user("next"), reply.message)
    assert session.consecutive_failures == 1


@pytest.mark.parametrize("fault", list(SIDE_FAULTS))
def test_side_query_fault_during_stream(adapter: Adapter, fault: str) -> None:
    """A faulty summary during a streamed send behaves like during send."""
    script, status = SIDE_FAULTS[fault]
    fake = FakeProvider()
    script(fake)
    history = history_of(72_000)
    session = adapter.make(fake, history=history)
    events = adapter.stream(session, "next")
    assert isinstance(events[-1], StreamDone)
    assert session.compactions[-1].status is status
    assert session.history[: len(history)] == history
    assert len(session.history) == len(history) + 2


@pytest.mark.parametrize("where", ["manual", "auto", "stream"])
def test_side_query_cancellation(adapter: Adapter, where: str) -> None:
    """A cancellation during the summary propagates; history, counts and telemetry unchanged."""
    fake = FakeProvider()
    fake.enqueue_error(adapter.cancel(), purpose="side_query")
    history = history_of(20_000 if where == "manual" else 72_000)
    session = adapter.make(fake, history=history, consecutive_failures=2)
    before = session.history
    actions: dict[str, Callable[[], object]] = {
        "manual": lambda: adapter.compress(session),
        "auto": lambda: adapter.send(session, "next"),
        "stream": lambda: adapter.stream(session, "next"),
    }
    with pytest.raises(adapter.cancel):
        actions[where]()
    assert session.history is before
    assert session.consecutive_failures == 2
    assert session.compactions == []
    assert [r.purpose for r in fake.requests] == ["side_query"]


# -- main call ------------------------------------------------------------------------------


@pytest.mark.parametrize("fault", list(MAIN_FAULTS))
def test_main_call_fault(adapter: Adapter, fault: str) -> None:
    """A provider error on the main call is raised as is; the history is the same tuple."""
    error = MAIN_FAULTS[fault]()
    fake = FakeProvider()
    fake.enqueue_error(error, purpose="chat")
    history = history_of(20_000)
    session = adapter.make(fake, history=history, last_prompt_token_count=20_500)
    before = session.history
    with pytest.raises(type(error)) as info:
        adapter.send(session, "next")
    assert info.value is error
    assert session.history is before
    assert session.last_prompt_token_count == 20_500
    assert session.consecutive_failures == 0


def test_main_call_cancellation(adapter: Adapter) -> None:
    """A cancellation of the main call propagates and keeps the history."""
    fake = FakeProvider()
    fake.enqueue_error(adapter.cancel(), purpose="chat")
    session = adapter.make(fake, history=history_of(20_000))
    before = session.history
    with pytest.raises(adapter.cancel):
        adapter.send(session, "next")
    assert session.history is before
    adapter.send(session, "again")  # the session is still usable (lock released)
    assert session.history[-2] == Message.user("again")


def test_main_call_overflow_after_failed_summary(adapter: Adapter) -> None:
    """Too long, then a summary that comes back empty: the original error, the same history."""
    fake = FakeProvider()
    fake.enqueue_too_long()
    fake.enqueue_empty()
    session = adapter.make(fake, history=history_of(20_000))
    before = session.history
    with pytest.raises(ProviderError, match="too long"):
        adapter.send(session, "next")
    assert session.history is before


def test_main_reply_without_usage_is_accepted(adapter: Adapter) -> None:
    """A reply with no usage is kept and the next estimate falls back to the cold path."""
    from autocompact.testing import FakeReply

    fake = FakeProvider()
    fake.enqueue(FakeReply(text="fine", report_usage=False), purpose="chat")
    session = adapter.make(fake, history=history_of(4_000), last_prompt_token_count=4_100)
    adapter.send(session, "next")
    assert session.last_prompt_token_count == 0
    assert session.history[-1] == Message.model("fine")


def test_main_reply_with_usage_updates_the_count(adapter: Adapter) -> None:
    """The count after a send is the provider's reported prompt size."""
    fake = FakeProvider()
    fake.enqueue_text("ok", usage=Usage(prompt_tokens=33_333), purpose="chat")
    session = adapter.make(fake)
    adapter.send(session, "hi")
    assert session.last_prompt_token_count == 33_333


# -- streaming ------------------------------------------------------------------------------


@pytest.mark.parametrize("fault", list(MAIN_FAULTS))
def test_stream_fault_mid_stream(adapter: Adapter, fault: str) -> None:
    """An error raised after the first delta propagates; nothing of the turn is kept."""
    error = MAIN_FAULTS[fault]()
    fake = StreamFaultProvider(error)
    fake.enqueue_text("a b c d", purpose="chat")
    session = adapter.make(fake, history=history_of(20_000))
    before = session.history
    with pytest.raises(type(error)):
        adapter.stream(session, "next")
    assert session.history is before


def test_stream_cancellation_mid_stream(adapter: Adapter) -> None:
    """A cancellation raised mid-stream propagates and keeps the history."""
    fake = StreamFaultProvider(adapter.cancel())
    fake.enqueue_text("a b c d", purpose="chat")
    session = adapter.make(fake, history=history_of(20_000))
    before = session.history
    with pytest.raises(adapter.cancel):
        adapter.stream(session, "next")
    assert session.history is before


def test_consumer_closes_stream_mid_way(adapter: Adapter) -> None:
    """Closing the stream after the first delta keeps the history; the session stays usable."""
    fake = FakeProvider()
    fake.enqueue_text("one two three four", purpose="chat")
    session = adapter.make(fake, history=history_of(20_000))
    before = session.history
    events = adapter.stream(session, "next", stop_after=1)
    assert isinstance(events[0], TextDelta)
    assert session.history is before
    adapter.send(session, "again")
    assert session.history[-2:] == (Message.user("again"), Message.model("OK."))


def test_stream_without_final_event_is_malformed(adapter: Adapter) -> None:
    """A stream that ends without StreamDone raises MalformedResponseError and keeps history."""

    class NoDone(FakeProvider):
        def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
            yield TextDelta(text="partial")

        async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
            yield TextDelta(text="partial")

    session = adapter.make(NoDone(), history=history_of(20_000))
    before = session.history
    with pytest.raises(MalformedResponseError, match="without a final message"):
        adapter.stream(session, "next")
    assert session.history is before

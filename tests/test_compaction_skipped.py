"""A started compaction with nothing to do ends with CompactionSkipped (never with no event)."""

from __future__ import annotations

import asyncio

import pytest

from autocompact import CompactionSkipped as PublicSkipped
from autocompact import ContextOverflowError, Message
from autocompact.chat import AsyncChatSession, ChatSession
from autocompact.compaction import CompressionService, CompressionStatus, CompressionTrigger
from autocompact.events import (
    CompactionSkipped,
    Event,
)
from autocompact.guard import ContextGuard
from autocompact.testing import FakeProvider
from histories import assert_paired

WINDOW = 100_000  # auto 70,000 · hard 77,000


def short_history() -> list[Message]:
    """One short exchange."""
    return [Message.user("hello"), Message.model("hi there")]


def test_a_manual_compaction_of_an_empty_history_ends_skipped() -> None:
    """compress() with nothing to compact: Started, then one Skipped saying why."""
    session = ChatSession(FakeProvider(), context_window=WINDOW)
    events: list[Event] = []
    session.add_hook(events.append)
    info = session.compress()
    assert info.status is CompressionStatus.NOOP
    (ending,) = assert_paired(events)
    assert isinstance(ending, CompactionSkipped)
    assert ending.kind == "compaction_skipped"
    assert ending.info is info
    assert ending.info.trigger is CompressionTrigger.MANUAL
    assert ending.info.error == "the history is empty"


@pytest.mark.parametrize(
    ("words", "trigger"),
    [(58_000, CompressionTrigger.AUTO), (64_000, CompressionTrigger.HARD)],
    ids=["auto-tier", "hard-tier"],
)
def test_a_compaction_whose_only_big_item_is_the_message_ends_skipped(
    words: int, trigger: CompressionTrigger
) -> None:
    """A send whose only large item is the pending message (about 72.5K or 80K estimated
    tokens, auto or hard tier): the attempt has nothing to cut and ends with
    CompactionSkipped saying why; the reply still comes back and the history is kept."""
    session = ChatSession(FakeProvider(), context_window=WINDOW, history=short_history())
    events: list[Event] = []
    session.add_hook(events.append)
    message = "word " * words
    assert session.thresholds.tier(session.estimate_tokens(message)).value == trigger.value
    session.send(message)
    (ending,) = assert_paired(events)
    assert isinstance(ending, CompactionSkipped)
    assert ending.info.trigger is trigger
    assert ending.info.status is CompressionStatus.NOOP
    assert "cannot buy room" in (ending.info.error or "")
    assert session.history[:2] == tuple(short_history())


def test_a_reactive_compaction_with_nothing_to_cut_ends_skipped() -> None:
    """The provider refuses a request as too long and there is no history to compact: the
    reactive attempt ends with CompactionSkipped before the provider's error is raised."""
    fake = FakeProvider()
    fake.enqueue_error(ContextOverflowError("too long", provider="fake"), purpose="chat")
    session = ChatSession(fake, context_window=WINDOW)
    events: list[Event] = []
    session.add_hook(events.append)
    with pytest.raises(ContextOverflowError):
        session.send("next")
    (ending,) = assert_paired(events)
    assert isinstance(ending, CompactionSkipped)
    assert ending.info.trigger is CompressionTrigger.REACTIVE


def test_an_async_manual_compaction_of_an_empty_history_ends_skipped() -> None:
    """AsyncChatSession.compress() on an empty history ends its compaction the same way."""
    session = AsyncChatSession(FakeProvider(), context_window=WINDOW)
    events: list[Event] = []
    session.add_hook(events.append)
    asyncio.run(session.compress())
    (ending,) = assert_paired(events)
    assert isinstance(ending, CompactionSkipped)


def test_a_framework_step_whose_only_big_item_is_the_pending_message_ends_skipped() -> None:
    """The guard (frameworks that own their history) emits the same pairing."""
    events: list[Event] = []
    guard = ContextGuard(
        context_window=WINDOW,
        compression=CompressionService(FakeProvider()),
        hooks=[events.append],
    )
    result = guard.run([*short_history(), Message.user("word " * 58_000)])
    (info,) = result.compactions
    assert info.status is CompressionStatus.NOOP
    (ending,) = assert_paired(events)
    assert isinstance(ending, CompactionSkipped)
    assert ending.info is info


def test_the_event_is_public() -> None:
    """CompactionSkipped is exported from the package like the other events."""
    assert PublicSkipped is CompactionSkipped


def test_the_chat_and_the_demo_describe_a_skipped_compaction() -> None:
    """The chat's event line and the demo's say why nothing was compacted."""
    from autocompact.cli.render import describe_event
    from autocompact.demo import describe_event as demo_line

    session = ChatSession(FakeProvider(), context_window=WINDOW)
    events: list[Event] = []
    session.add_hook(events.append)
    session.compress()
    skipped = events[-1]
    assert describe_event(skipped) == "Nothing to compress: the history is empty"
    assert demo_line(skipped) == "compaction skipped (manual): the history is empty"

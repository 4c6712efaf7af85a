"""The reason a RequestTrimmed gives says what happened: a rescue only when one ran."""

from __future__ import annotations

from autocompact import Message
from autocompact.chat import ChatSession
from autocompact.compaction import CompressionService
from autocompact.errors import ProviderError
from autocompact.events import CompactionStarted, Event, RequestTrimmed
from autocompact.guard import ContextGuard
from autocompact.providers.base import ChatRequest
from autocompact.testing import FakeProvider, FakeReply, FakeTokenizer

WINDOW = 8_000  # warn 4,800 · auto = hard 5,600 (collapsed)


def calibrated_session(events: list[Event]) -> ChatSession:
    """An 8K session whose provider counts 7 % more than the plain estimate, after six turns
    that taught the session that scale (a count of 3,868 tokens)."""
    fake = FakeProvider(tokenizer=FakeTokenizer(factor=1.07))
    session = ChatSession(fake, context_window=WINDOW)
    for i in range(6):
        session.send(f"turn {i} " + "alpha " * 400)
    session.add_hook(events.append)
    return session


def test_a_trim_below_hard_on_the_ladder_does_not_name_a_rescue() -> None:
    """The ladder puts the request in the warn tier (no compaction runs) while the guarantee,
    sizing it on the provider's scale with its margin, puts it at hard and trims it: the reason
    says no compaction ran and why, with both sizes (it said 'after the rescue')."""
    events: list[Event] = []
    session = calibrated_session(events)
    message = "beta " * 1_230
    estimate = session.estimate_tokens(message)
    assert session.thresholds.warn <= estimate < session.thresholds.hard
    session.send(message)
    assert not [e for e in events if isinstance(e, CompactionStarted)]
    (trimmed,) = [e for e in events if isinstance(e, RequestTrimmed)]
    assert trimmed.tokens_before >= session.thresholds.hard > estimate
    assert "rescue" not in trimmed.reason
    assert trimmed.reason == (
        f"sized at {trimmed.tokens_before:,} tokens on the provider's scale with a 10 % margin, "
        f"at or above the hard threshold (5,600); no compaction ran: the estimate the "
        f"thresholds use is {estimate:,} (warn tier)"
    )


def test_a_trim_after_a_failed_rescue_names_it_and_the_hold_after_it() -> None:
    """A hard-threshold compaction that failed before the send: the reason names it; on the
    next send the hold it started stops any attempt, and the reason says that instead."""
    events: list[Event] = []

    def respond(request: ChatRequest) -> FakeReply:
        if request.purpose == "side_query":
            return FakeReply(error=ProviderError("summary failed", provider="fake"))
        return FakeReply(text="OK.")

    history: list[Message] = []
    for i in range(12):
        history += [Message.user(f"q{i} " + "u" * 2_000), Message.model("m" * 2_000)]
    session = ChatSession(
        FakeProvider(responder=respond),
        context_window=WINDOW,
        history=history,
        hooks=[events.append],
        clear_tool_outputs=False,
    )
    session.send("go")
    (trimmed,) = [e for e in events if isinstance(e, RequestTrimmed)]
    assert trimmed.reason.endswith("after the hard-threshold compaction that failed")
    events.clear()
    session.send("again")
    assert not [e for e in events if isinstance(e, CompactionStarted)]
    (trimmed,) = [e for e in events if isinstance(e, RequestTrimmed)]
    assert session.hold_until is not None
    assert trimmed.reason.endswith(
        f"; no compaction ran: automatic compaction is on hold until {session.hold_until:,} tokens"
    )


def test_the_guarantee_alone_says_no_compaction_ran() -> None:
    """ContextGuard.guarantee() never compacts: its trim says so, not 'after the rescue'."""
    events: list[Event] = []
    guard = ContextGuard(
        context_window=WINDOW,
        compression=CompressionService(FakeProvider()),
        hooks=[events.append],
    )
    messages: list[Message] = []
    for i in range(12):
        messages += [Message.user(f"q{i} " + "u" * 2_000), Message.model("m" * 2_000)]
    guard.guarantee([*messages, Message.user("go")])
    (trimmed,) = [e for e in events if isinstance(e, RequestTrimmed)]
    assert trimmed.reason.endswith("; no compaction ran")
    assert "rescue" not in trimmed.reason

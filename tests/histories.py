"""Histories and event checks several engine tests share (a helper module, not a test file)."""

from __future__ import annotations

from collections.abc import Sequence

from autocompact.content import FunctionCallPart, FunctionResponsePart, Message
from autocompact.events import (
    CompactionCancelled,
    CompactionFailed,
    CompactionSkipped,
    CompactionStarted,
    CompactionSucceeded,
    Event,
)

ENDINGS = (CompactionSucceeded, CompactionFailed, CompactionSkipped, CompactionCancelled)
"""The events that end a started compaction (exactly one of them does)."""


def text_history(tokens: int, per: int = 2_000, *, end_on_user: bool = False) -> list[Message]:
    """A user/model text history of about ``tokens`` estimated tokens, ending on a reply (or,
    with ``end_on_user``, on a user message)."""
    n = tokens // per
    n += (1 - n % 2) if end_on_user else -(n % 2)
    return [
        Message.user(chr(97 + i % 26) * per * 4) if i % 2 == 0 else Message.model("m" * per * 4)
        for i in range(n)
    ]


def agent_history(calls: int, result_tokens: int) -> list[Message]:
    """One typed request, then ``calls`` tool steps whose results are ``result_tokens`` each."""
    history = [Message.user("fix the failing build in src/app.py")]
    for n in range(calls):
        history.append(Message.model(f"step {n}", FunctionCallPart(id=f"c{n}", name="bash")))
        history.append(
            Message.user(
                FunctionResponsePart(id=f"c{n}", name="bash", response="o" * result_tokens * 2)
            )
        )
    history.append(Message.model("all steps done"))
    return history


def assert_paired(events: Sequence[Event]) -> list[Event]:
    """Every CompactionStarted is followed by exactly one ending before the next start; returns
    the endings in order."""
    endings: list[Event] = []
    open_ = False
    for event in events:
        if isinstance(event, CompactionStarted):
            assert not open_, "a compaction started before the previous one ended"
            open_ = True
        elif isinstance(event, ENDINGS):
            assert open_, "an ending event without a start"
            open_ = False
            endings.append(event)
    assert not open_, "a started compaction never ended"
    return endings

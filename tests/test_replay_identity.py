"""Replay keys two things by message identity: its summary cache and the last request whose
tool pairs it checked. An ``id()`` is reused once its object is freed, so each holds the
objects themselves and checks them by identity: new messages at a freed address get their own
summary, and a new head is checked for orphaned tool results."""

from __future__ import annotations

from collections.abc import Sequence

from autocompact.content import FunctionCallPart, FunctionResponsePart, Message
from autocompact.replay import ReplayOptions
from autocompact.replay.policies import _Sim, _Step, _Summaries


def _first_text(messages: Sequence[Message]) -> str:
    return messages[0].text


def test_new_messages_at_a_freed_address_get_their_own_summary() -> None:
    summaries = _Summaries(ReplayOptions(window=8_000, summarizer=_first_text), 0)
    for i in range(300):
        messages = [Message.user(f"note {i}")]  # the previous list and message are freed
        assert summaries(messages) == f"note {i}"
    assert summaries.calls == 300


def test_a_new_head_is_checked_even_where_the_old_one_lived() -> None:
    call = Message.model("run", FunctionCallPart(id="c1", name="bash"))
    result = Message.user(FunctionResponsePart(id="c1", name="bash", response="ok"))
    options = ReplayOptions(window=8_000)
    sim = _Sim("ladder", (call, result), options, _Summaries(options, 0), 0)
    for i in range(200):
        sim.head = (Message.user(f"summary {i}"),)
        sim._check_pairs(_Step(1, 10, 2), None)
        # A head (the previous one freed) holding a tool result whose call it lost.
        lost = FunctionResponsePart(id=f"lost{i}", name="bash", response="ok")
        sim.head = (Message.user(lost),)
        sim._check_pairs(_Step(1, 10, 2), None)
    assert sim.orphans == {f"lost{i}" for i in range(200)}

"""The split point (SPEC §6): keep ~30 %, never orphan a call or a response."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autocompact import FunctionCallPart, FunctionResponsePart, Message
from autocompact.compaction import (
    CompressionService,
    CompressionStatus,
    CompressOptions,
    find_split_point,
)
from autocompact.compaction.split import COMPRESSION_PRESERVE_THRESHOLD, MIN_COMPRESSION_FRACTION
from autocompact.testing import FakeProvider

_step = st.tuples(
    st.sampled_from(["text", "call"]),
    st.integers(min_value=1, max_value=3),
    st.integers(min_value=1, max_value=3000),
    st.booleans(),
)


def build_history(steps: Sequence[tuple[str, int, int, bool]], pending_call: bool) -> list[Message]:
    """A well-formed history: user text, model text, model calls then user responses."""
    history = [Message.user("start " + "s" * 10)]
    next_id = 0
    for kind, ncalls, size, flag in steps:
        if history[-1].role == "model":
            history.append(Message.user("u" * size))
            continue
        if kind == "text":
            history.append(Message.model("m" * size))
            continue
        ids = [f"call{next_id + k}" for k in range(ncalls)]
        next_id += ncalls
        calls = [FunctionCallPart(id=i, name="tool", arguments={"n": size}) for i in ids]
        history.append(Message.model(*(["thinking aloud"] if flag else []), *calls))
        responses = [FunctionResponsePart(id=i, name="tool", response="r" * size) for i in ids]
        if flag and ncalls > 1:  # answered in separate user messages
            history.extend(Message.user(r) for r in responses)
        elif flag:  # a response with text beside it
            history.append(Message.user(*responses, "and a note"))
        else:
            history.append(Message.user(*responses))
    if pending_call and history[-1].role == "user":
        history.append(Message.model(FunctionCallPart(id="pending", name="tool")))
    return history


def _call_ids(messages: Sequence[Message]) -> set[str]:
    return {c.id for m in messages for c in m.function_calls}


def _response_ids(messages: Sequence[Message]) -> set[str]:
    return {r.id for m in messages for r in m.function_responses}


@settings(max_examples=300, deadline=None)
@given(st.lists(_step, max_size=40), st.booleans(), st.sampled_from([0.1, 0.3, 0.5, 0.9]))
def test_split_never_orphans_a_call_or_response(
    steps: list[tuple[str, int, int, bool]], pending_call: bool, preserve: float
) -> None:
    """For random well-formed histories the kept tail holds whole call/response pairs only."""
    history = build_history(steps, pending_call)
    split = find_split_point(history, preserve)
    assert 0 <= split <= len(history)
    head, tail = history[:split], history[split:]
    if tail:
        assert tail[0].role == "user"
        assert not tail[0].function_responses
    # Every response kept has its call kept, and no call kept has its response compressed.
    assert _response_ids(tail) <= _call_ids(tail)
    assert not (_call_ids(tail) & _response_ids(head))
    assert _response_ids(head) <= _call_ids(head)
    if split == len(history) and history:
        assert history[-1].role == "model"
        assert not history[-1].function_calls


def test_split_keeps_about_30_percent() -> None:
    """With equal-sized turns the cut is the first user turn past 70 % of the characters."""
    history = [
        Message.user("u" * 100) if i % 2 == 0 else Message.model("m" * 100) for i in range(20)
    ]
    assert COMPRESSION_PRESERVE_THRESHOLD == 0.3
    assert find_split_point(history) == 14


def test_split_skips_user_turns_that_carry_function_responses() -> None:
    """A user message holding a function response is never a cut point."""
    history = [
        Message.user("u" * 100),
        Message.model("m" * 100),
        Message.user("u" * 100),
        Message.model(FunctionCallPart(id="a", name="t")),
        Message.user(FunctionResponsePart(id="a", name="t", response="r" * 100)),
        Message.model("m" * 50),
        Message.user("next"),
        Message.model(FunctionCallPart(id="b", name="t")),
    ]
    split = find_split_point(history)
    assert split == 6
    assert history[split].text == "next"


def test_compress_everything_when_last_is_plain_model() -> None:
    """When no user turn lies past 70 % and the last message is a plain model reply, all goes."""
    history = [Message.user("hi"), Message.model("m" * 10_000)]
    assert find_split_point(history) == 2


def test_nothing_when_last_model_message_has_a_pending_call() -> None:
    """With a pending call at the end and no cut point past 70 %, nothing past the start is cut."""
    history = [Message.user("hi"), Message.model("x" * 100, FunctionCallPart(id="p", name="t"))]
    assert find_split_point(history) == 0


def test_empty_history_splits_at_zero() -> None:
    """An empty history has nothing to split."""
    assert find_split_point([]) == 0


@pytest.mark.parametrize("fraction", [0, 1, -0.5, 1.5])
def test_preserve_fraction_must_be_between_0_and_1(fraction: float) -> None:
    """preserve_fraction outside (0, 1) raises ValueError."""
    with pytest.raises(ValueError, match="preserve_fraction"):
        find_split_point([Message.user("x")], fraction)


def test_less_than_min_fraction_is_a_noop() -> None:
    """When the only safe cut would compress under 5 % of the history, the service does nothing."""
    assert MIN_COMPRESSION_FRACTION == 0.05
    history = (
        Message.user("a"),
        Message.model("b"),
        Message.user("c" * 10_000),
        Message.model(FunctionCallPart(id="p", name="t")),
    )
    fake = FakeProvider()
    result = CompressionService(fake).compress(
        history, CompressOptions(context_window=1_000, force=True)
    )
    assert result.info.status is CompressionStatus.NOOP
    assert result.history is history
    assert fake.requests == []

"""The split point (SPEC §10.1): any complete boundary, keep ~30 % by tokens, never an orphan."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

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
from autocompact.compaction.split import (
    COMPRESSION_PRESERVE_THRESHOLD,
    MIN_COMPRESSION_FRACTION,
    exact_tokens,
    valid_cuts,
)
from autocompact.estimation import estimate_content_tokens
from autocompact.testing import FakeProvider
from autocompact.transcripts import read_transcript

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


def _check_cut(history: Sequence[Message], split: int) -> None:
    """The wire-level oracle: pairs intact on both sides, no orphan at the tail's start."""
    head, tail = history[:split], history[split:]
    if tail and split > 0:
        assert not tail[0].function_responses, "the kept tail begins with a function response"
    # No call in the head is answered in the tail; no response in the tail lacks its call there.
    assert not (_call_ids(head) & _response_ids(tail))
    assert _response_ids(tail) <= _call_ids(tail) | (_response_ids(tail) - _call_ids(history))
    if split == len(history) and history:
        answered = _response_ids(history)
        assert all(c.id in answered for c in history[-1].function_calls)


@settings(max_examples=300, deadline=None)
@given(st.lists(_step, max_size=40), st.booleans(), st.sampled_from([0.0, 0.1, 0.3, 0.5, 0.9]))
def test_split_never_orphans_a_call_or_response(
    steps: list[tuple[str, int, int, bool]], pending_call: bool, preserve: float
) -> None:
    """Random histories with parallel calls: the kept tail holds whole call/response pairs only."""
    history = build_history(steps, pending_call)
    split = find_split_point(history, preserve)
    assert 0 <= split <= len(history)
    _check_cut(history, split)


@settings(max_examples=300, deadline=None)
@given(st.lists(_step, max_size=40), st.booleans(), st.sampled_from([0.0, 0.1, 0.3, 0.5]))
def test_split_keeps_at_most_the_share_when_a_valid_cut_allows(
    steps: list[tuple[str, int, int, bool]], pending_call: bool, preserve: float
) -> None:
    """The cut is the first valid boundary past (1 − share) of the tokens: no valid cut between
    a later target and it, and the tail is at most the share whenever such a cut exists."""
    history = build_history(steps, pending_call)
    split = find_split_point(history, preserve)
    cuts = valid_cuts(history)

    def size(part: Sequence[Message]) -> float:
        return sum(exact_tokens(m.stats) for m in part)

    total = size(history)
    reachable = [
        i for i in range(1, len(history) + 1) if cuts[i] and size(history[i:]) <= preserve * total
    ]
    if reachable:
        assert size(history[split:]) <= preserve * total
        assert split == reachable[0]
    else:  # keep only what must be kept: the latest valid cut
        assert split == max((i for i in range(len(history) + 1) if cuts[i]), default=0)


def test_a_single_long_agent_turn_can_be_cut() -> None:
    """One typed request then many tool calls: the cut falls between tool steps (was a NOOP)."""
    history = [Message.user("fix the build")]
    for n in range(30):
        history.append(Message.model(FunctionCallPart(id=f"c{n}", name="bash")))
        history.append(
            Message.user(FunctionResponsePart(id=f"c{n}", name="bash", response="o" * 500))
        )
    history.append(Message.model("done"))
    split = find_split_point(history)
    assert 10 < split < len(history)
    assert history[split].role == "model"
    tail = estimate_content_tokens(history[split:])
    assert tail <= 0.3 * estimate_content_tokens(history) + 1
    _check_cut(history, split)


def test_parallel_calls_answered_in_separate_messages_are_never_split() -> None:
    """Two calls in one message answered in two messages: no cut between the two answers."""
    history = [
        Message.user("go"),
        Message.model(FunctionCallPart(id="a", name="t"), FunctionCallPart(id="b", name="t")),
        Message.user(FunctionResponsePart(id="a", name="t", response="r" * 4_000)),
        Message.user(FunctionResponsePart(id="b", name="t", response="r" * 4_000)),
        Message.model("m" * 100),
    ]
    cuts = valid_cuts(history)
    assert cuts == [True, True, False, False, True, True]
    assert find_split_point(history) == 4


def test_a_call_never_answered_does_not_block_later_cuts() -> None:
    """An interrupted call (never answered, not the last message) leaves later cuts valid."""
    history = [
        Message.user("go"),
        Message.model(FunctionCallPart(id="lost", name="t")),
        Message.user("[Request interrupted by user]"),
        Message.model("m" * 400),
        Message.user("u" * 40),
        Message.model("m" * 40),
    ]
    assert valid_cuts(history) == [True, True, True, True, True, True, True]


def test_split_keeps_about_30_percent() -> None:
    """With equal-sized turns the cut leaves the newest 30 % of the tokens."""
    history = [
        Message.user("u" * 100) if i % 2 == 0 else Message.model("m" * 100) for i in range(20)
    ]
    assert COMPRESSION_PRESERVE_THRESHOLD == 0.3
    assert find_split_point(history) == 14


def test_split_never_cuts_before_a_function_response() -> None:
    """A user message holding a function response is never where the tail begins."""
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
    assert split == 5
    assert history[split].role == "model"


def test_compress_everything_when_last_is_plain_model() -> None:
    """When the last message is a plain model reply, the cut may take everything."""
    history = [Message.user("hi"), Message.model("m" * 10_000)]
    assert find_split_point(history) == 2


def test_pending_call_at_the_end_stays_in_the_tail() -> None:
    """A pending call at the end is kept with what must be kept (the latest exchange)."""
    history = [Message.user("hi"), Message.model("x" * 100, FunctionCallPart(id="p", name="t"))]
    assert find_split_point(history) == 1
    assert find_split_point(history, 0.0) == 1


def test_keep_share_zero_summarizes_everything_it_can() -> None:
    """keep share 0: the cut is the end of the history when that is a valid boundary."""
    history = [
        Message.user("u" * 100) if i % 2 == 0 else Message.model("m" * 100) for i in range(6)
    ]
    assert find_split_point(history, 0.0) == 6


def test_empty_history_splits_at_zero() -> None:
    """An empty history has nothing to split."""
    assert find_split_point([]) == 0


@pytest.mark.parametrize("fraction", [1, -0.5, 1.5])
def test_preserve_fraction_must_be_in_0_1(fraction: float) -> None:
    """preserve_fraction outside [0, 1) raises ValueError."""
    with pytest.raises(ValueError, match="preserve_fraction"):
        find_split_point([Message.user("x")], fraction)


def test_less_than_min_fraction_is_a_noop() -> None:
    """When the only safe cut would compress under 5 % of the history, the service does nothing."""
    assert MIN_COMPRESSION_FRACTION == 0.05
    history = (
        Message.user("a"),
        Message.model("b"),
        Message.user("c"),
        Message.model("d" * 10_000, FunctionCallPart(id="p", name="t")),
    )
    fake = FakeProvider()
    result = CompressionService(fake).compress(
        history, CompressOptions(context_window=200_000, force=True, keep_share=0.0)
    )
    assert result.info.status is CompressionStatus.NOOP
    assert result.history is history
    assert fake.requests == []


DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "claude-code-sessions"
_SESSIONS = sorted(DATA.glob("*.jsonl.gz")) if DATA.is_dir() else []


@pytest.mark.skipif(not _SESSIONS, reason=f"recorded sessions not found at {DATA}")
@pytest.mark.parametrize("path", _SESSIONS, ids=lambda p: p.name.split(".")[0][:8])
def test_recorded_sessions_have_a_valid_cut_at_every_call(path: Path) -> None:
    """Every recorded call's context: a cut exists that compresses ≥ 5 %, and none orphans."""
    transcript = read_transcript(path)
    for call in transcript.calls:
        context = transcript.context_before(call)
        if len(context) < 2 or context[0].function_responses:
            continue
        for share in (0.3, 0.0):
            split = find_split_point(context, share)
            _check_cut(context, split)
            if estimate_content_tokens(context) > 2_000:
                compressed = estimate_content_tokens(context[:split])
                assert compressed >= MIN_COMPRESSION_FRACTION * estimate_content_tokens(context)

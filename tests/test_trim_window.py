"""The guarantee's trim sizes on the window less the reply's room: just below hard, never over."""

from __future__ import annotations

import pytest

from autocompact import ChatRequest, FunctionCallPart, FunctionResponsePart, Message
from autocompact.chat import ChatSession
from autocompact.engine import EngineConfig
from autocompact.engine.sizing import trim_window
from autocompact.testing import FakeProvider, FakeReply, estimate_request_tokens
from autocompact.thresholds import compute_thresholds


def failing(request: ChatRequest) -> FakeReply:
    """Every summary fails; chat turns answer."""
    return FakeReply(text="" if request.purpose == "side_query" else "OK.")


def uniform_history(window: int) -> list[Message]:
    """About 1.3 × ``window`` tokens of equal turns with a tool call and its response each."""
    per = max(window // 25, 50)
    history: list[Message] = []
    n = 0
    while estimate_request_tokens(ChatRequest(messages=tuple(history))) < 1.3 * window:
        history.append(Message.user(f"task {n} " + "u" * per * 4))
        history.append(Message.model(FunctionCallPart(id=f"c{n}", name="read", arguments={})))
        history.append(
            Message.user(FunctionResponsePart(id=f"c{n}", name="read", response="r" * per * 2))
        )
        history.append(Message.model("m" * per * 4))
        n += 1
    return history


def run(window: int, max_output_tokens: int | None, turns: int = 4) -> list[int]:
    """The provider's counts of the chat requests of a session restored over the window, with
    the breaker open and every summary failing (only the trim keeps requests in)."""
    fake = FakeProvider(context_window=window, responder=failing)
    session = ChatSession(
        fake,
        context_window=window,
        history=uniform_history(window),
        consecutive_failures=3,
        clear_tool_outputs=False,
        max_output_tokens=max_output_tokens,
    )
    per = max(window // 25, 50)
    for turn in range(turns):
        session.send(f"turn {turn} " + "p" * per * 4)
    return [c for r, c in zip(fake.requests, fake.counts, strict=True) if r.purpose == "chat"]


@pytest.mark.parametrize(("window", "cap"), [(16_000, 8_000), (32_000, 20_000), (64_000, 20_000)])
def test_output_reserve_is_kept_free_in_every_trimmed_request(window: int, cap: int) -> None:
    """With an output cap, no trimmed request holds more than the window less the cap (the rule
    on the whole window sent 31K on 32K; the plain threshold rule sent 19K + 20K)."""
    counts = run(window, cap)
    assert counts
    assert all(count + cap <= window for count in counts), counts


def test_collapsed_window_trims_to_just_below_hard() -> None:
    """Where hard equals auto (32K) and the output cap leaves room, the first request (no count
    yet, worst-case scale) is trimmed to fill the window less the cap, not to half of hard; the
    later ones (scale learned) sit just below hard."""
    window, cap = 32_000, 2_000
    ladder = compute_thresholds(window)
    assert ladder.hard == ladder.auto
    first, *later = run(window, cap)
    assert ladder.hard / 2 < first <= (window - cap) / 2
    assert later
    assert all(0.8 * ladder.hard < count < ladder.hard for count in later), later


@pytest.mark.parametrize(
    ("window", "cap", "bound"),
    [
        (32_000, 20_000, 12_000),  # the cap: input + output within the window
        (32_000, None, 22_400),  # collapsed: the ladder's hard
        (200_000, None, 180_000),  # large: the effective window (the 20K reserve)
        (8_000, 9_000, 0),  # a cap over the window leaves nothing
    ],
)
def test_trim_window_is_the_window_less_the_replys_room(
    window: int, cap: int | None, bound: int
) -> None:
    """The bound is window minus the output cap when set, else the larger of hard and the
    effective window."""
    assert trim_window(EngineConfig(context_window=window, max_output_tokens=cap)) == bound

"""The never-oversized guarantee on the provider's own count (issue 11, SPEC §10.6).

The oracle is the scripted provider's own tokenizer (its own walk and JSON serialization, an
overall factor of 0.5–2.0 and per-part factors), never the engine's estimate.
"""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autocompact import (
    ChatRequest,
    ContextOverflowError,
    FunctionCallPart,
    FunctionResponsePart,
    Message,
    MessageTooLargeError,
)
from autocompact.chat import ChatSession
from autocompact.content import CharStats, json_form
from autocompact.estimation import Calibration, content_stats, update_calibration
from autocompact.providers.base import ToolSpec
from autocompact.testing import FakeProvider, FakeReply, FakeTokenizer, estimate_request_tokens


def always_failing(request: ChatRequest) -> FakeReply:
    """Every summary fails (empty); chat turns answer briefly."""
    if request.purpose == "side_query":
        return FakeReply(text="")
    return FakeReply(text="done")


def text_history(tokens: int, per: int = 4_000) -> list[Message]:
    """About ``tokens`` estimated tokens of plain user/model turns."""
    history: list[Message] = []
    for i in range(max(2, tokens // per)):
        role = "user" if i % 2 == 0 else "model"
        history.append(Message(role=role, parts=Message.user(f"{i} " + "w" * per * 4).parts))
    if history[-1].role == "user":
        history.append(Message.model("ok"))
    return history


def chat_counts(fake: FakeProvider) -> list[int]:
    """The provider's count of every main request it received."""
    return [c for c, r in zip(fake.counts, fake.requests, strict=True) if r.purpose == "chat"]


@pytest.mark.parametrize(
    ("estimated", "window", "factor"),
    [(304_000, 64_000, 0.6), (304_000, 64_000, 0.8), (608_000, 128_000, 0.6)],
    ids=["304K-0.6x-64K", "304K-0.8x-64K", "608K-0.6x-128K"],
)
def test_issue_reproduction_restored_history_larger_than_the_window(
    estimated: int, window: int, factor: float
) -> None:
    """The issue's reproduction: a restored history of ``estimated`` plain tokens whose provider
    count is ``factor`` × that (restored with that count), every summary failing: no main
    request goes over the window by the provider's count. The engine before issue 11 (389e7b2^)
    subtracted a plain estimate of what it left out from the provider's count and sent 98,436
    (0.6×, 64K), 83,239 (0.8×, 64K) and 201,664 (608K at 0.6×, 128K) tokens."""
    history = text_history(estimated)
    fake = FakeProvider(
        context_window=window,
        responder=always_failing,
        tokenizer=FakeTokenizer(factor=factor),
        reject_oversized=False,
    )
    count = fake.count_tokens(ChatRequest(messages=tuple(history)))
    assert count == pytest.approx(factor * estimated, rel=0.02)
    session = ChatSession(
        fake, context_window=window, history=history, last_prompt_token_count=count
    )
    for turn in range(6):
        session.send(f"next step {turn}")
    counts = chat_counts(fake)
    assert len(counts) == 6
    assert max(counts) <= window, counts
    assert fake.oversized == []


def test_a_clearing_that_changes_the_mix_is_sized_on_the_new_mix() -> None:
    """A tokenizer that counts prose at 1.4× and tool output at 0.5× the estimate (as Claude
    counts them above and below it), a restored agent history of 2.5 windows, a calibration
    learned on it (0.78), every summary failing: the clearing that stands removes most tool
    output, so the history left is counted ~1.03× — sized on the old factor it looked like it
    fit and was sent at 138,995 tokens on a 128K window. The count after the clearing sizes what
    the clearing changed at UNLEARNED_FACTOR, and the trimming follows that count (note 67)."""
    tokenizer = FakeTokenizer(factor=0.7, text_factor=2.0, json_factor=0.72)
    fake = FakeProvider(
        context_window=128_000,
        responder=always_failing,
        tokenizer=tokenizer,
        reject_oversized=False,
    )
    history = agent_history(320_000, 400)
    system = "s" * 800
    calibration = saved_calibration("learned", fake, history, system, [])
    assert calibration is not None
    assert calibration.factor < 0.8
    session = ChatSession(
        fake,
        context_window=128_000,
        system_instruction=system,
        history=history,
        calibration=calibration,
    )
    for turn in range(4):
        session.send(f"step {turn}")
    assert any(info.method == "clearing" for info in session.compactions)
    counts = chat_counts(fake)
    assert len(counts) == 4
    assert max(counts) <= 128_000, counts
    assert fake.oversized == []


def test_system_prompt_and_tools_count_in_the_size_check() -> None:
    """Window 4,000, a 200-char system prompt and a 16,000-char message: refused, not sent."""
    fake = FakeProvider(context_window=4_000)
    session = ChatSession(fake, context_window=4_000, system_instruction="s" * 200)
    with pytest.raises(MessageTooLargeError, match="system prompt"):
        session.send("m" * 16_000)
    assert fake.requests == []


def test_tool_declarations_push_a_message_over_and_it_is_refused() -> None:
    """A message that fits alone but not with the tool declarations is refused before sending."""
    tools = [
        ToolSpec(name=f"t{i}", description="d" * 400, parameters={"type": "object"})
        for i in range(10)
    ]
    fake = FakeProvider(context_window=8_000)
    session = ChatSession(fake, context_window=8_000, tools=tools)
    with contextlib.suppress(MessageTooLargeError):
        session.send("m" * 4 * 7_000)
    assert fake.requests == []


def test_count_after_a_trimmed_request_is_on_the_provider_scale() -> None:
    """After a trimmed send, the count adds what was left out scaled by the learned ratio."""
    fake = FakeProvider(responder=always_failing, tokenizer=FakeTokenizer(factor=0.6))
    history = text_history(304_000)
    session = ChatSession(fake, context_window=64_000, history=history)
    session.send("go")
    counted = fake.counts[-1]
    whole = fake.count_tokens(ChatRequest(messages=session.history))
    # The provider's count of the whole history, within the margin (not count + plain estimate).
    assert counted < 64_000
    assert 0.9 * whole <= session.last_prompt_token_count <= 1.1 * whole


def test_a_trimmed_request_rejected_as_too_long_is_retried_once_smaller() -> None:
    """A provider that counts far more than learned rejects the trimmed request; the engine
    trims again to a lower target and retries once, then the turn succeeds."""
    fake = FakeProvider(
        context_window=64_000, responder=always_failing, tokenizer=FakeTokenizer(factor=1.0)
    )
    history = text_history(200_000)
    # A saved calibration that is wrong by half (the tokenizer changed under the session).
    session = ChatSession(
        fake,
        context_window=64_000,
        history=history,
        calibration=Calibration(factor=0.5, samples=10),
    )
    session.send("go")
    chats = [r for r in fake.requests if r.purpose == "chat"]
    assert len(chats) == 2
    assert len(chats[1].messages) < len(chats[0].messages)
    assert fake.counts[-1] <= 64_000


def test_an_uncalibrated_first_send_rejected_as_too_long_fits_on_the_next_send() -> None:
    """With nothing learned, a restored history below hard is sent whole; when the provider
    (counting 2× the estimate) rejects it and the summary fails, the error surfaces, and the
    next send is sized on what the rejection implied: it fits."""
    fake = FakeProvider(
        context_window=64_000, responder=always_failing, tokenizer=FakeTokenizer(factor=2.0)
    )
    session = ChatSession(fake, context_window=64_000, history=text_history(40_000))
    with contextlib.suppress(ContextOverflowError):
        session.send("first")
    session.send("second")
    assert fake.counts[-1] <= 64_000
    assert fake.requests[-1].purpose == "chat"


# -- the property: random histories, windows, tokenizers, every summary failing ----------------


@st.composite
def sessions(draw: st.DrawFn) -> dict[str, object]:
    """A random session: window, tokenizer, history shape, system prompt, tools, saved scale.

    The tokenizer's ratio to the estimate is 0.5–2.0 overall and for text and JSON apart (a
    per-part factor on top of the overall one, the product kept within 0.5–2.0): text and JSON
    may be counted up to 4× apart, as Claude counts prose above and tool output below the
    estimate. A saved calibration is what an earlier run learned from the provider's counts of
    this history (with its JSON share), or a plain factor without one (older files)."""
    window = draw(st.sampled_from([8_000, 16_000, 32_000, 64_000, 128_000, 200_000, 1_000_000]))
    factor = draw(st.floats(0.5, 2.0))
    low, high = max(0.5, 0.5 / factor), min(2.0, 2.0 / factor)
    text_factor = draw(st.floats(low, high))
    json_factor = draw(st.floats(low, high))
    size = draw(st.floats(0.2, 3.0))  # the restored history, in windows
    turn = draw(st.integers(200, max(400, window // 20)))  # tokens per message
    system = draw(st.integers(0, window // 20))
    tools = draw(st.integers(0, 8))
    calibrated = draw(st.sampled_from(["none", "learned", "factor"]))
    switch = draw(st.sampled_from([None, 0.5, 2.0]))  # a window switched mid-session
    return {
        "window": window,
        "tokenizer": FakeTokenizer(factor=factor, text_factor=text_factor, json_factor=json_factor),
        "history_tokens": int(size * window),
        "turn": turn,
        "system": "s" * 4 * system,
        "tools": [ToolSpec(name=f"tool{i}", description="d" * 200) for i in range(tools)],
        "calibrated": calibrated,
        "switch": switch,
        "factor": factor,
    }


def saved_calibration(
    how: object, fake: FakeProvider, history: list[Message], system: str, tools: list[ToolSpec]
) -> Calibration | None:
    """The calibration a restored session brings: none, learned by an earlier run from two of
    the provider's counts of this history, or a bare factor (a file written before json_share)."""
    if how == "none":
        return None
    request = ChatRequest(messages=tuple(history), system_instruction=system, tools=tuple(tools))
    count = fake.count_tokens(request)
    if how == "factor":
        plain = estimate_request_tokens(request)
        return Calibration(factor=min(4.0, max(0.25, count / plain)), samples=5)
    stats = content_stats(history) + CharStats(
        text_chars=len(system), json_chars=sum(len(json_form(t.as_json())) for t in tools)
    )
    calibration = Calibration()
    for _ in range(2):
        calibration = update_calibration(calibration, stats, count)
    return calibration


def agent_history(tokens: int, turn: int) -> list[Message]:
    """A coding-agent history: a task, then tool calls with results and model notes."""
    history = [Message.user("task: " + "t" * 4 * turn)]
    i = 0
    total = turn
    while total < tokens:
        history.append(
            Message.model(FunctionCallPart(id=f"c{i}", name="read", arguments={"path": f"f{i}"}))
        )
        history.append(
            Message.user(FunctionResponsePart(id=f"c{i}", name="read", response="r" * 2 * turn))
        )
        history.append(Message.model("note " + "n" * 2 * turn))
        history.append(Message.user("continue"))
        total += 2 * turn + 10
        i += 1
    history.append(Message.model("ok"))
    return history


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(sessions())
def test_no_main_request_over_the_window_by_the_providers_count(case: dict[str, object]) -> None:
    """Random restored histories (larger than the window too), windows 8K–1M, tokenizers
    0.5–2.0 overall and per part, saved calibrations learned on the history or bare, switched
    windows, every summary failing: no main request the
    engine sends is over the window by the provider's count, once the scale is known (saved
    calibration, or after the first reported count)."""
    window = int(case["window"])  # type: ignore[call-overload]
    tokenizer = case["tokenizer"]
    assert isinstance(tokenizer, FakeTokenizer)
    fake = FakeProvider(
        context_window=window,
        responder=always_failing,
        tokenizer=tokenizer,
        reject_oversized=False,
    )
    history = agent_history(int(case["history_tokens"]), int(case["turn"]))  # type: ignore[call-overload]
    system, tools = case["system"], case["tools"]
    assert isinstance(system, str)
    assert isinstance(tools, list)
    calibration = saved_calibration(case["calibrated"], fake, history, system, tools)
    kwargs = {
        "system_instruction": system,
        "tools": tools,
        "history": history,
        "calibration": calibration,
    }
    session = ChatSession(fake, context_window=window, **kwargs)  # type: ignore[arg-type]
    sent_before_known = 0 if calibration is not None else 1
    windows: list[int] = []  # the window in force for each request received
    for turn in range(4):
        windows.extend([window] * (len(fake.requests) - len(windows)))
        if turn == 2 and case["switch"] is not None:
            window = max(8_000, int(window * float(case["switch"])))  # type: ignore[arg-type]
            fake.context_window = window
            session = ChatSession(
                fake,
                context_window=window,
                system_instruction=session.system_instruction,
                tools=session.tools,
                history=session.history,
                calibration=session.calibration,
            )
        with contextlib.suppress(MessageTooLargeError, ContextOverflowError):
            session.send(f"step {turn} " + "p" * 40)
    windows.extend([window] * (len(fake.requests) - len(windows)))
    chats = [
        (count, limit)
        for count, limit, request in zip(fake.counts, windows, fake.requests, strict=True)
        if request.purpose == "chat"
    ]
    over = [(c, w) for n, (c, w) in enumerate(chats) if n >= sent_before_known and c > w]
    assert over == [], (over, case)

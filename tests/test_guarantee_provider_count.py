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
from autocompact.estimation import Calibration
from autocompact.providers.base import ToolSpec
from autocompact.testing import FakeProvider, FakeReply, FakeTokenizer


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


def test_issue_reproduction_restored_history_at_0_6x_on_64k() -> None:
    """304K estimated, restored with the provider's count of it (0.6×: 182K), 64K window, every
    summary failing: no request goes over 64K by the provider's count (the old engine
    subtracted a plain estimate of what it left out from the provider's count and sent 99.8K)."""
    history = text_history(304_000)
    fake = FakeProvider(
        context_window=64_000,
        responder=always_failing,
        tokenizer=FakeTokenizer(factor=0.6),
        reject_oversized=False,
    )
    count = fake.count_tokens(ChatRequest(messages=tuple(history)))
    assert 180_000 <= count <= 184_000
    session = ChatSession(
        fake, context_window=64_000, history=history, last_prompt_token_count=count
    )
    for turn in range(6):
        session.send(f"next step {turn}")
    counts = chat_counts(fake)
    assert len(counts) == 6
    assert max(counts) <= 64_000, counts


def test_reproduction_at_0_8x_and_608k_on_128k() -> None:
    """The issue's other figures (0.8× on 64K; 608K on 128K) stay under the window too."""
    for estimated, window, factor in ((304_000, 64_000, 0.8), (608_000, 128_000, 0.6)):
        fake = FakeProvider(
            context_window=window,
            responder=always_failing,
            tokenizer=FakeTokenizer(factor=factor),
            reject_oversized=False,
        )
        history = text_history(estimated)
        count = fake.count_tokens(ChatRequest(messages=tuple(history)))
        session = ChatSession(
            fake, context_window=window, history=history, last_prompt_token_count=count
        )
        for turn in range(4):
            session.send(f"step {turn}")
        assert max(chat_counts(fake)) <= window


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
    """A random session: window, tokenizer, history shape, system prompt, tools, saved scale."""
    window = draw(st.sampled_from([8_000, 16_000, 32_000, 64_000, 128_000, 200_000, 1_000_000]))
    factor = draw(st.floats(0.5, 2.0))
    text_factor = draw(st.floats(0.85, 1.15))
    json_factor = draw(st.floats(0.85, 1.15))
    size = draw(st.floats(0.2, 3.0))  # the restored history, in windows
    turn = draw(st.integers(200, max(400, window // 20)))  # tokens per message
    system = draw(st.integers(0, window // 20))
    tools = draw(st.integers(0, 8))
    calibrated = draw(st.booleans())
    switch = draw(st.sampled_from([None, 0.5, 2.0]))  # a window switched mid-session
    return {
        "window": window,
        "tokenizer": FakeTokenizer(factor=factor, text_factor=text_factor, json_factor=json_factor),
        "history_tokens": int(size * window),
        "turn": turn,
        "system": "s" * 4 * system,
        "tools": [ToolSpec(name=f"tool{i}", description="d" * 200) for i in range(tools)],
        "calibration": Calibration(factor=factor, samples=5) if calibrated else None,
        "switch": switch,
        "factor": factor,
    }


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
    0.5–2.0 with per-part factors, switched windows, every summary failing: no main request the
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
    calibration = case["calibration"]
    assert calibration is None or isinstance(calibration, Calibration)
    kwargs = {
        "system_instruction": case["system"],
        "tools": case["tools"],
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

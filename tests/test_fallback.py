"""The guarantee: no request over the window, even when every summary fails (issue 6)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import pytest

from autocompact import (
    ChatRequest,
    FunctionCallPart,
    FunctionResponsePart,
    Message,
    MessageTooLargeError,
    ProviderError,
    TextPart,
)
from autocompact.chat import ChatSession
from autocompact.compaction.fallback import ProviderScale, check_message_fits, trim_request
from autocompact.events import Event, RequestTrimmed
from autocompact.providers.base import FinishReason
from autocompact.testing import FakeProvider, FakeReply, estimate_request_tokens
from autocompact.thresholds import compute_thresholds

WINDOWS = [8_000, 16_000, 32_000, 64_000, 100_000, 128_000, 200_000, 1_000_000]

SIDE_FAILURES: dict[str, Callable[[], FakeReply]] = {
    "empty": lambda: FakeReply(text=""),
    "error": lambda: FakeReply(error=ProviderError("summary failed", provider="fake")),
    "truncated": lambda: FakeReply(text="cut", finish_reason=FinishReason.LENGTH),
}


def failing(kind: str) -> Callable[[ChatRequest], FakeReply]:
    """A responder whose side queries all fail in the given way."""

    def respond(request: ChatRequest) -> FakeReply:
        if request.purpose == "side_query":
            return SIDE_FAILURES[kind]()
        return FakeReply(text="OK.")

    return respond


def uniform_history(window: int, factor: float = 1.3) -> list[Message]:
    """About ``factor × window`` tokens of equal-sized turns with tool calls and responses."""
    per = max(window // 25, 50)
    history: list[Message] = []
    n = 0
    while sum(_size(m) for m in history) < factor * window:
        history.append(Message.user(f"task {n} " + "u" * per * 4))
        history.append(Message.model(FunctionCallPart(id=f"c{n}", name="read", arguments={})))
        history.append(
            Message.user(FunctionResponsePart(id=f"c{n}", name="read", response="r" * per * 2))
        )
        history.append(Message.model("m" * per * 4))
        n += 1
    return history


def _size(message: Message) -> int:
    return estimate_request_tokens(ChatRequest(messages=(message,)))


def assert_pairs_whole(messages: tuple[Message, ...]) -> None:
    """Every call in the request has its response in it and vice versa (pending calls aside)."""
    calls = {c.id for m in messages for c in m.function_calls}
    responses = {r.id for m in messages for r in m.function_responses}
    assert responses <= calls
    last = messages[-1]
    assert calls - responses <= {c.id for c in last.function_calls}


@pytest.mark.parametrize("kind", list(SIDE_FAILURES))
@pytest.mark.parametrize("window", WINDOWS, ids=[f"{w // 1000}K" for w in WINDOWS])
def test_every_request_fits_when_every_summary_fails(window: int, kind: str) -> None:
    """With the breaker open and every summary failing, each chat request estimates below the
    window; the first user message and call/response pairs are kept; the history is untouched."""
    fake = FakeProvider(context_window=window, responder=failing(kind))
    events: list[Event] = []
    history = uniform_history(window)
    session = ChatSession(
        fake,
        context_window=window,
        history=history,
        consecutive_failures=3,
        hooks=[events.append],
        clear_tool_outputs=False,
    )
    per = max(window // 25, 50)
    for turn in range(4):
        session.send(f"turn {turn} " + "p" * per * 4)
        request = fake.requests[-1]
        assert request.purpose == "chat"
        assert estimate_request_tokens(request) < window
        assert request.messages[0] is history[0]
        assert request.messages[-1].text.startswith(f"turn {turn} ")
        assert_pairs_whole(request.messages)
    assert session.history[: len(history)] == tuple(history)
    assert len(session.history) == len(history) + 8
    trimmed = [e for e in events if isinstance(e, RequestTrimmed)]
    assert trimmed
    # Trimmed to just below the threshold, within the window less the reply's room on the
    # worst-case scale (twice the estimate before the provider reported a count).
    ladder = compute_thresholds(window)
    bound = max(int(ladder.hard), ladder.effective_window)
    assert all(e.dropped_messages > 0 and e.tokens_after <= bound for e in trimmed)
    assert all(e.tokens_before >= compute_thresholds(window).hard for e in trimmed)
    assert session.consecutive_failures == 3


@pytest.mark.parametrize("window", WINDOWS, ids=[f"{w // 1000}K" for w in WINDOWS])
def test_every_request_fits_with_clearing_and_failing_summaries(window: int) -> None:
    """With tool-output clearing on (the default) and every summary failing, each chat request
    still estimates below the window."""
    fake = FakeProvider(context_window=window, responder=failing("error"))
    session = ChatSession(
        fake, context_window=window, history=uniform_history(window), consecutive_failures=3
    )
    per = max(window // 25, 50)
    for turn in range(4):
        session.send(f"turn {turn} " + "p" * per * 4)
        request = fake.requests[-1]
        assert request.purpose == "chat"
        assert estimate_request_tokens(request) < window
        assert_pairs_whole(request.messages)


def test_trimmed_request_carries_a_marker() -> None:
    """The trimmed request says how many messages were left out, right after the first one."""
    fake = FakeProvider(responder=failing("empty"))
    history = uniform_history(32_000)
    session = ChatSession(
        fake,
        context_window=32_000,
        history=history,
        consecutive_failures=3,
        clear_tool_outputs=False,
    )
    session.send("go")
    request = fake.requests[-1]
    assert request.messages[1].role == "model"
    assert "left out of this request" in request.messages[1].text


def test_trim_without_a_plain_first_message_marks_the_first_kept_turn() -> None:
    """When the history does not start with a plain user message, the marker joins the first
    kept user turn and pairs stay whole."""
    history = [Message.model("greeting " + "g" * 4000), *uniform_history(8_000)]
    pending = Message.user("go")
    scale = ProviderScale(factor=1.0, known=True)
    result = trim_request(history, pending, target=5_600, image_token_estimate=1_600, scale=scale)
    assert result.dropped > 0
    first = result.messages[0]
    assert first.role == "user"
    assert isinstance(first.parts[0], TextPart)
    assert "left out of this request" in first.parts[0].text
    assert_pairs_whole(result.messages)
    assert result.messages[-1] is pending
    assert result.tokens_after < 5_600
    assert estimate_request_tokens(ChatRequest(messages=result.messages)) < 5_600


def test_trim_is_a_noop_below_target() -> None:
    """Below the target nothing is left out."""
    history = uniform_history(8_000)
    pending = Message.user("go")
    scale = ProviderScale(factor=1.0, known=True)
    result = trim_request(history, pending, target=20_000, image_token_estimate=1_600, scale=scale)
    assert result.dropped == 0
    assert result.messages == (*history, pending)


def test_message_larger_than_the_window_is_refused_before_sending() -> None:
    """A single message larger than the window raises MessageTooLargeError; nothing is sent."""
    fake = FakeProvider()
    session = ChatSession(fake, context_window=8_000)
    with pytest.raises(MessageTooLargeError) as info:
        session.send("x" * 4 * 9_000)
    assert info.value.tokens == 9_000
    assert info.value.window == 8_000
    assert "8,000" in str(info.value)
    assert fake.requests == []
    assert session.history == ()


def test_a_short_first_turn_teaches_no_scale_that_refuses_a_normal_message() -> None:
    """A chat template's tokens per message dwarf a greeting: "hi" counted as 9 tokens (a ratio
    of 9 to its plain estimate) must not make a 1,900-token paste "larger than the 8K window".
    A sample under the calibration's minimum teaches no ratio; a real one still does."""
    from autocompact.testing import FakeTokenizer

    paste = "word " * 1_500  # about 1,900 tokens on the provider's count
    for first in ("hi", "Please read this log and find the failing test. " * 60):
        fake = FakeProvider(context_window=8_192, tokenizer=FakeTokenizer(per_message=8))
        session = ChatSession(fake, context_window=8_192)
        session.send(first)
        session.send(paste)
        assert len(fake.requests) == 2, first
        assert session.history[-2].text == paste
    # A ratio learned from a real sample is still used to refuse what cannot fit.
    fake = FakeProvider(context_window=8_192, tokenizer=FakeTokenizer(factor=2.0))
    session = ChatSession(fake, context_window=8_192)
    session.send("Please read this log and find the failing test. " * 60)
    with pytest.raises(MessageTooLargeError):
        session.send("word " * 5_000)  # 6,250 plain tokens: 12,500 on this provider's count
    assert len(fake.requests) == 1


def test_check_message_fits_names_the_history_index() -> None:
    """check_message_fits names the history message when given an index."""
    with pytest.raises(MessageTooLargeError, match="history message 3"):
        check_message_fits(Message.user("x" * 400), window=10, image_token_estimate=1_600, index=3)
    check_message_fits(Message.user("x" * 40), window=10, image_token_estimate=1_600)


def test_the_refusal_names_the_tool_result_and_the_whole_request() -> None:
    """A tool result too large for the window is named by its tool and call id, and the size
    with the system prompt and tools reads as the request's (not the prompt's) size."""
    result = FunctionResponsePart(id="c1", name="read", response={"output": "log line " * 4_000})
    with pytest.raises(MessageTooLargeError) as alone:
        check_message_fits(
            Message(role="user", parts=(result,)),
            window=8_000,
            image_token_estimate=1_600,
            fixed_tokens=61,
        )
    text = str(alone.value)
    assert "the result of tool 'read' (call id 'c1'), is about" in text
    assert "system prompt and tool declarations (about 61 tokens) the request is about" in text
    assert f"the request is about {alone.value.tokens:,}," in text
    assert "make the tool return less" in text
    with_text = Message(role="user", parts=(result, TextPart(text="and say hi")))
    with pytest.raises(MessageTooLargeError, match=r"tokens, [\d,]+ of them the result of tool"):
        check_message_fits(with_text, window=8_000, image_token_estimate=1_600)
    with pytest.raises(MessageTooLargeError, match="split it, shorten it") as plain:
        check_message_fits(Message.user("word " * 9_000), window=8_000, image_token_estimate=1_600)
    assert "tool" not in str(plain.value)


def test_message_larger_than_the_window_sends_no_side_query_either() -> None:
    """With a history present, an oversized message still fails before any request is sent."""
    fake = FakeProvider()
    history = uniform_history(8_000, factor=0.3)
    session = ChatSession(fake, context_window=8_000, history=history)
    with pytest.raises(MessageTooLargeError):
        session.send("x" * 4 * 9_000)
    assert fake.requests == []
    assert session.history == tuple(history)


def test_count_after_a_trimmed_request_covers_what_was_left_out() -> None:
    """After a trimmed send the next estimate still covers the whole history, so the next
    request is trimmed again and fits the window."""
    window = 100_000
    history = [Message.user("task")]
    for i in range(4):
        history.append(Message.model(chr(97 + i) * 4 * 25_000))
        history.append(Message.user(f"user {i}"))
    history.append(Message.model("ok"))
    fake = FakeProvider(responder=failing("empty"))
    session = ChatSession(fake, context_window=window, history=history, consecutive_failures=3)
    for _ in range(3):
        session.send("go")
        assert estimate_request_tokens(fake.requests[-1]) < window
    whole = estimate_request_tokens(ChatRequest(messages=session.history))
    assert session.estimate_tokens() >= whole


def test_large_first_message_plus_pending_still_fits() -> None:
    """A large first task message plus a large pending one never produce an over-window send."""
    window = 100_000
    history = [
        Message.user("t" * 4 * 60_000),
        Message.model("ok"),
        Message.user("u" * 4 * 30_000),
        Message.model("ok"),
    ]
    fake = FakeProvider(responder=failing("empty"))
    session = ChatSession(fake, context_window=window, history=history, consecutive_failures=3)
    with contextlib.suppress(MessageTooLargeError):
        session.send("p" * 4 * 45_000)
    chats = [r for r in fake.requests if r.purpose == "chat"]
    assert all(estimate_request_tokens(r) < window for r in chats)


def test_failed_rescue_then_trim_events_in_order() -> None:
    """A failed hard rescue emits CompactionStarted, CompactionFailed, then RequestTrimmed
    (a 128K window: hard above auto, so the open breaker does not stop the rescue)."""
    events: list[Event] = []
    fake = FakeProvider(responder=failing("error"))
    session = ChatSession(
        fake,
        context_window=128_000,
        history=uniform_history(128_000),
        consecutive_failures=3,
        hooks=[events.append],
        clear_tool_outputs=False,
    )
    session.send("go")
    kinds = [e.kind for e in events if e.kind != "threshold_crossed"]
    assert kinds == ["compaction_started", "compaction_failed", "request_trimmed"]
    assert [r.purpose for r in fake.requests] == ["side_query", "chat"]


def test_trim_keeps_the_call_of_a_pending_function_response() -> None:
    """In one long agentic turn (tool call after tool call), a trimmed request that sends a
    tool result still carries the call it answers."""
    window = 32_000
    history = [Message.user("fix the bug")]
    for i in range(20):
        history.append(Message.model(FunctionCallPart(id=f"c{i}", name="read", arguments={})))
        history.append(
            Message.user(FunctionResponsePart(id=f"c{i}", name="read", response="x" * 3_000))
        )
    history.append(Message.model(FunctionCallPart(id="last", name="read", arguments={})))
    fake = FakeProvider(context_window=window, responder=failing("empty"))
    session = ChatSession(
        fake,
        context_window=window,
        history=history,
        consecutive_failures=3,
        clear_tool_outputs=False,
    )
    session.send([FunctionResponsePart(id="last", name="read", response="y" * 2_000)])
    request = fake.requests[-1]
    assert estimate_request_tokens(request) < window
    assert_pairs_whole(request.messages)

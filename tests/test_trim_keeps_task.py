"""Trimming keeps what the request is for: the current task, the newest exchange, whole pairs."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from autocompact import FunctionCallPart, FunctionResponsePart, Message
from autocompact.compaction.fallback import ProviderScale, TrimResult, trim_request
from autocompact.estimation import estimate_content_tokens

KNOWN = ProviderScale(factor=1.0, known=True)


def call(n: str) -> Message:
    """A model message with one call."""
    return Message.model(FunctionCallPart(id=n, name="read_file", arguments={"path": n}))


def result(n: str, chars: int) -> Message:
    """The user-side response to call ``n``."""
    return Message.user(FunctionResponsePart(id=n, name="read_file", response="r" * chars))


def plain(messages: Sequence[Message]) -> int:
    """The plain estimate of messages."""
    return estimate_content_tokens(messages, 1_600)


def holds(request: Sequence[Message], message: Message) -> bool:
    """Whether the request carries every part of ``message`` in one of its messages."""
    return any(m.role == message.role and all(p in m.parts for p in message.parts) for m in request)


def assert_pairs_whole(history: Sequence[Message], trimmed: TrimResult) -> None:
    """No call in the request without its response (when one exists) and no orphan response."""
    answered = {r.id for m in history for r in m.function_responses}
    calls = {c.id for m in trimmed.messages for c in m.function_calls}
    responses = {r.id for m in trimmed.messages for r in m.function_responses}
    assert responses <= calls
    assert calls & answered <= responses


def test_mid_loop_trim_keeps_the_current_task_not_only_the_first() -> None:
    """During Task 1's tool loop the trimmed request holds "Task 1", not only "Task 0"."""
    history = [
        Message.user("Task 0: read the two files"),
        call("a0"),
        result("a0", 12_000),
        Message.model("Done with task 0."),
        Message.user("Task 1: now read the config"),
        call("a1"),
        result("a1", 12_000),
        call("b1"),
    ]
    pending = result("b1", 12_000)
    whole = plain([*history, pending])
    trimmed = trim_request(
        history, pending, target=whole - 6_500, image_token_estimate=1_600, scale=KNOWN
    )
    assert trimmed.dropped > 0
    assert holds(trimmed.messages, history[4])
    assert trimmed.messages[-1] is pending
    assert trimmed.tokens_after < whole - 6_500
    assert_pairs_whole([*history, pending], trimmed)


def test_trim_that_gains_nothing_sends_the_whole_request() -> None:
    """A short first question is not left out when the request stays over the target anyway
    (the ``23.2K → 23.2K`` trim): leaving it out would gain nothing."""
    history = [Message.user("Hi?"), Message.model("Hello.")]
    pending = Message.user("p" * 84_389)
    whole = plain([*history, pending])
    trimmed = trim_request(
        history, pending, target=whole * 0.9, image_token_estimate=1_600, scale=KNOWN
    )
    assert trimmed.dropped == 0
    assert trimmed.messages == (*history, pending)


def test_trim_that_cannot_reach_the_target_leaves_out_nothing_when_it_fits() -> None:
    """Knowing the window, a request that no trim gets below the target is sent whole when it
    fits the window, even when leaving turns out would make it a little smaller."""
    history = [Message.user("question " * 200), Message.model("answer " * 200)]
    pending = Message.user("p" * 84_389)
    whole = plain([*history, pending])
    scale = ProviderScale(factor=1.0, known=True)
    trimmed = trim_request(
        history,
        pending,
        target=whole * 0.9,
        image_token_estimate=1_600,
        scale=scale,
        window=int(whole * 1.5),
    )
    assert trimmed.dropped == 0


def test_trim_on_an_unknown_scale_stops_just_below_the_threshold() -> None:
    """With the window known, an unknown scale trims to below the threshold on the scale that
    decided to trim (and within the window at the worst case), not to half of it."""
    history: list[Message] = []
    for n in range(12):
        history += [Message.user(f"task {n} " + "u" * 2_000), Message.model("m" * 2_000)]
    pending = Message.user("go")
    whole = plain([*history, pending])
    target = whole * 0.8
    blind = trim_request(history, pending, target=target, image_token_estimate=1_600)
    aware = trim_request(
        history, pending, target=target, image_token_estimate=1_600, window=int(whole * 2)
    )
    assert blind.plain_after < target / 2  # the worst-case scale: far below the threshold
    assert target * 0.85 < aware.plain_after < target
    assert aware.dropped < blind.dropped


def test_new_task_keeps_the_newest_exchange() -> None:
    """Before a new user message the last user-to-model step stays in the request."""
    history = [
        Message.user("Task 0"),
        call("a"),
        result("a", 40_000),
        Message.model("summary of a " * 10),
    ]
    pending = Message.user("Task 1")
    trimmed = trim_request(history, pending, target=100, image_token_estimate=1_600, scale=KNOWN)
    assert holds(trimmed.messages, history[2])
    assert holds(trimmed.messages, history[3])


@st.composite
def agent_histories(draw: st.DrawFn) -> tuple[list[Message], Message, int]:
    """A random agent history (tasks, tool loops, replies), the pending message and the index
    of the current task in history (-1: the pending message is the task)."""
    history: list[Message] = []
    task = -1
    ids = iter(range(10_000))
    for turn in range(draw(st.integers(1, 6))):
        history.append(Message.user(f"Task {turn} " + "t" * draw(st.integers(0, 3_000))))
        task = len(history) - 1
        for _ in range(draw(st.integers(0, 4))):
            batch = [f"c{next(ids)}" for _ in range(draw(st.integers(1, 3)))]
            history.append(
                Message.model(
                    *(FunctionCallPart(id=b, name="read", arguments={"p": b}) for b in batch)
                )
            )
            history.append(
                Message.user(
                    *(
                        FunctionResponsePart(
                            id=b, name="read", response="r" * draw(st.integers(0, 20_000))
                        )
                        for b in batch
                    )
                )
            )
        history.append(Message.model("reply " * draw(st.integers(0, 500))))
    if draw(st.booleans()):
        return history, Message.user("Next task " + "n" * draw(st.integers(0, 2_000))), -1
    # Mid-loop: the last reply becomes a call whose result is pending.
    history[-1] = call("pending")
    return history, result("pending", draw(st.integers(0, 20_000))), task


@settings(max_examples=300, deadline=None)
@given(
    case=agent_histories(),
    ratio=st.floats(0.05, 1.2),
    known=st.booleans(),
    fixed=st.integers(0, 4_000),
    windowed=st.booleans(),
)
def test_every_trimmed_request_holds_the_task_and_whole_pairs(
    case: tuple[list[Message], Message, int],
    ratio: float,
    known: bool,
    fixed: int,
    windowed: bool,
) -> None:
    """Over random agent histories and targets: the current task is in every request, no call
    is separated from its result, the pending message is last, and a trim always shrinks."""
    history, pending, task = case
    whole = plain([*history, pending]) + fixed
    scale = ProviderScale(factor=1.3, known=True) if known else ProviderScale()
    trimmed = trim_request(
        history,
        pending,
        target=whole * ratio,
        image_token_estimate=1_600,
        scale=scale,
        fixed_tokens=fixed,
        window=int(whole * ratio * 1.4) if windowed else None,
    )
    assert trimmed.messages[-1] == pending
    if task >= 0:
        assert holds(trimmed.messages, history[task])
    assert_pairs_whole([*history, pending], trimmed)
    if trimmed.dropped:
        # Smaller as the one request it is (plain_after sums per-message estimates, each
        # rounded up, so it can equal the whole when a note replaces turns of its own size).
        assert plain(trimmed.messages) + fixed < whole
        assert any("left out of this request" in m.text for m in trimmed.messages)
    else:
        assert trimmed.messages == (*history, pending)


def test_a_note_as_long_as_the_turns_it_replaces_is_no_trim() -> None:
    """Found by the property test: leaving out four turns saves one token on the per-message
    sums, none as one request (the note costs what the turns did): the request stays whole."""
    history = [
        Message.user("Task 0 "),
        Message.model(""),
        Message.user("Task 1 " + "t" * 74),
        Message.model("reply reply reply reply "),
        Message.user("Task 2 "),
        Message.model(FunctionCallPart(id="pending", name="read_file", arguments={"path": "p"})),
    ]
    pending = Message.user(FunctionResponsePart(id="pending", name="read_file", response=""))
    whole = plain([*history, pending])
    trimmed = trim_request(history, pending, target=whole, image_token_estimate=1_600)
    assert trimmed.dropped == 0 or plain(trimmed.messages) < whole


def test_mid_loop_trim_keeps_the_turns_earlier_pairs_that_fit() -> None:
    """Deep in a tool loop, the trim leaves out the older turns first, then the current turn's
    oldest pairs, and keeps every newer pair of the turn that fits, whole (on a known scale
    the current turn is not cut down to its latest call)."""
    old = [Message.user("Task 0: read"), call("a0"), result("a0", 8_000), Message.model("ok")]
    turn = [Message.user("Task 1: read five files")]
    for n in range(4):
        turn += [call(f"b{n}"), result(f"b{n}", 8_000)]
    turn.append(call("b4"))
    history, pending = [*old, *turn], result("b4", 8_000)
    pair = plain([call("b0"), result("b0", 8_000)])
    # Room for the task, two earlier pairs of the turn and the pending pair, not three.
    target = plain([turn[0], *turn[-5:], pending]) + pair // 2 + 200
    trimmed = trim_request(history, pending, target=target, image_token_estimate=1_600, scale=KNOWN)
    kept = {c.id for m in trimmed.messages for c in m.function_calls}
    assert kept == {"b2", "b3", "b4"}
    assert holds(trimmed.messages, turn[0])
    assert_pairs_whole([*history, pending], trimmed)


def test_user_messages_before_the_pending_one_are_one_turn_with_it() -> None:
    """Tool results followed by a user message of their own are trimmed as the same text in
    the results' message is: the task, the newest call with its results and the text are
    kept, every older pair is left out. The two user messages made the call before the newest
    one part of "the latest exchange", kept however large."""
    history = [Message.user("Task: read five files")]
    for n in range(5):
        history += [call(f"c{n}"), result(f"c{n}", 8_000)]
    pending = Message.user("now answer")
    merged = Message.user(*history[-1].parts, *pending.parts)
    target = plain([history[0], history[-2], merged]) * 1.25  # (the scale adds a margin)
    apart = trim_request(history, pending, target=target, image_token_estimate=1_600, scale=KNOWN)
    joined = trim_request(
        history[:-1], merged, target=target, image_token_estimate=1_600, scale=KNOWN
    )
    assert apart.tokens_after < target
    assert {c.id for m in apart.messages for c in m.function_calls} == {"c4"}
    assert holds(apart.messages, history[0])
    assert apart.messages[-2:] == (history[-1], pending)
    assert apart.dropped == joined.dropped
    assert_pairs_whole([*history, pending], apart)

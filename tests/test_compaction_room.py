"""SPEC §10.2–§10.5, §10.7: compactions buy room, clearing stands, side queries fit, no thrash."""

from __future__ import annotations

import re
from dataclasses import replace
from itertools import pairwise

import pytest

from autocompact import Message
from autocompact.chat import ChatSession
from autocompact.cli.render import describe_event, describe_info
from autocompact.compaction import (
    CompressionInfo,
    CompressionService,
    CompressionStatus,
    CompressionTrigger,
    CompressOptions,
)
from autocompact.compaction.accounting import (
    HOLD_GROWTH_SHARE,
    BreakerState,
    automatic_trigger,
    record_refused,
)
from autocompact.compaction.sidequery import CARRY_PREAMBLE
from autocompact.estimation import estimate_content_tokens
from autocompact.providers.base import ChatRequest
from autocompact.testing import FakeProvider, FakeReply, FakeTokenizer
from autocompact.thresholds import compute_thresholds
from histories import agent_history

S = CompressionStatus


def text_history(tokens: int, per: int = 2_000) -> list[Message]:
    """A user/model text history of about ``tokens`` estimated tokens, ending on a model reply."""
    n = max(2, tokens // per)
    n -= n % 2
    return [
        Message.user(chr(97 + i % 26) * per * 4) if i % 2 == 0 else Message.model("m" * per * 4)
        for i in range(n)
    ]


def empty_summaries(request: ChatRequest) -> FakeReply:
    """Every side query comes back empty; chat turns answer OK."""
    return FakeReply(text="" if request.purpose == "side_query" else "OK.")


def side_queries(fake: FakeProvider) -> int:
    """How many side queries the fake received."""
    return sum(1 for r in fake.requests if r.purpose == "side_query")


# -- §10.2 ineffective compactions and the hold ------------------------------------------------


def _crowded_session(fake: FakeProvider) -> ChatSession:
    """A 200K session whose system prompt alone (168K) keeps every compaction above auto."""
    return ChatSession(
        fake,
        context_window=200_000,
        system_instruction="s" * 672_000,
        history=text_history(20_000),
        clear_tool_outputs=False,
    )


def test_ineffective_compaction_is_kept_counted_explained_and_held() -> None:
    """Left ≥ warn: history kept, breaker +1, the line names what holds the space, then a hold."""
    fake = FakeProvider()
    session = _crowded_session(fake)
    before = len(session.history)
    session.send("x" * 4)
    info = session.compactions[0]
    assert info.status is S.COMPRESSED
    assert info.ineffective
    assert len(session.history) < before + 2  # the compacted history was kept
    assert session.consecutive_failures == 1
    assert info.breakdown is not None
    assert info.breakdown.largest() == "System prompt and tools"
    line = describe_info(info)
    assert "warn" in line
    assert "System prompt and tools" in line
    # The hold: small sends make no side query although the count is above auto.
    assert session.estimate_tokens("y") >= session.thresholds.auto
    for _ in range(3):
        session.send("y" * 40)
    assert side_queries(fake) == 1
    assert session.hold_until is not None


def test_the_hold_ends_when_the_count_grows_by_a_tenth_of_the_window() -> None:
    """After 10 % of the window of growth the session tries an automatic side query again."""
    fake = FakeProvider()
    session = _crowded_session(fake)
    session.send("x")
    assert side_queries(fake) == 1
    half = "g" * 4 * round(HOLD_GROWTH_SHARE * 200_000 / 2 + 500)
    session.send(half)  # held: grown by half of the tenth
    assert side_queries(fake) == 1
    session.send(half)  # grown by the tenth; the first half can be summarized
    assert side_queries(fake) == 2


def test_no_side_query_when_no_summary_can_buy_room() -> None:
    """Design decision 70: when what could be summarized frees less than the clearing minimum
    and even an empty summary leaves the count at or above warn, no side query is sent; the
    no-op is reported as ineffective with what holds the space, and the session holds."""
    fake = FakeProvider()
    session = _crowded_session(fake)
    session.send("x")
    assert side_queries(fake) == 1
    hold = session.hold_until
    assert hold is not None
    # Past the hold in one message: what is left to summarize is the earlier small summary.
    session.send("g" * 4 * round(HOLD_GROWTH_SHARE * 200_000 + 1_000))
    assert side_queries(fake) == 1
    info = session.compactions[-1]
    assert info.status is S.NOOP
    assert info.ineffective
    assert info.breakdown is not None
    assert info.breakdown.largest() == "System prompt and tools"
    line = describe_info(info)
    assert "cannot buy room" in line
    assert "System prompt and tools holds the most" in line
    assert session.consecutive_failures == 1  # nothing counted: no side query was spent
    assert session.hold_until is not None
    assert session.hold_until > hold


def test_manual_compress_is_never_held_back() -> None:
    """During a hold /compress still runs a side query, and a success ends the hold."""
    fake = FakeProvider()
    session = _crowded_session(fake)
    session.send("x")
    assert session.hold_until is not None
    info = session.compress()
    assert side_queries(fake) == 2
    assert info.status is S.COMPRESSED
    assert session.hold_until is None


def test_clearing_must_free_at_least_the_minimum() -> None:
    """Clearing that frees less than clear_at_least does not act (the summary runs instead)."""
    history = agent_history(calls=30, result_tokens=400)
    small = CompressOptions(
        context_window=200_000,
        force=True,
        trigger=CompressionTrigger.HARD,
        protect_tool_tokens=5_000,
    )
    result = CompressionService(FakeProvider()).compress(history, small)
    assert result.info.method == "summary"
    assert result.info.cleared_tool_outputs == 0
    low = CompressOptions(
        context_window=200_000,
        force=True,
        trigger=CompressionTrigger.HARD,
        protect_tool_tokens=5_000,
        clear_at_least_tokens=1_000,
    )
    result = CompressionService(FakeProvider()).compress(history, low)
    assert result.info.cleared_tool_outputs > 0


# -- §10.3 clearing stands ---------------------------------------------------------------------


def test_clearing_stands_when_the_summary_after_it_fails() -> None:
    """Clearing then an empty summary: the cleared history is kept, the failure is reported."""
    history = [Message.user("t" * 4 * 130_000), *agent_history(calls=8, result_tokens=8_000)[1:]]
    fake = FakeProvider(responder=empty_summaries)
    options = CompressOptions(
        context_window=200_000,
        force=True,
        trigger=CompressionTrigger.HARD,
        clear_at_least_tokens=1_000,
    )
    result = CompressionService(fake).compress(history, options)
    info = result.info
    assert info.status is S.COMPRESSED
    assert info.method == "clearing"
    assert info.summary_failure is S.COMPRESSION_FAILED_EMPTY_SUMMARY
    assert info.cleared_tool_outputs > 0
    assert estimate_content_tokens(result.history) < estimate_content_tokens(history)
    assert len(result.history) == len(history)


def test_a_failed_summary_after_clearing_counts_toward_the_breaker() -> None:
    """In a session the standing clearing is adopted and its summary's failure counted."""
    history = [Message.user("t" * 4 * 116_000), *agent_history(calls=6, result_tokens=9_000)[1:]]
    fake = FakeProvider(responder=empty_summaries)
    session = ChatSession(fake, context_window=200_000, history=history)
    session.send("next")
    info = session.compactions[0]
    assert info.summary_failure is S.COMPRESSION_FAILED_EMPTY_SUMMARY
    assert session.consecutive_failures == 1
    assert estimate_content_tokens(session.history) < estimate_content_tokens(history)


# -- §10.4 / §10.5 the side query fits, summaries merge ------------------------------------


def test_side_query_never_exceeds_the_window_by_the_providers_own_count() -> None:
    """150K tokens to summarize, a 64K summarizer counting 1.5× the estimate: chunks that fit."""
    history = agent_history(calls=60, result_tokens=2_500)
    fake = FakeProvider(context_window=64_000, tokenizer=FakeTokenizer(factor=1.5))
    options = CompressOptions(
        context_window=64_000,
        force=True,
        trigger=CompressionTrigger.REACTIVE,
        token_scale=1.5,
        clear_tool_outputs=False,
    )
    result = CompressionService(fake).compress(history, options)
    assert result.info.status is S.COMPRESSED
    assert len(fake.requests) > 1
    assert fake.oversized == []
    for request, count in zip(fake.requests, fake.counts, strict=True):
        assert request.max_output_tokens is not None
        assert count + request.max_output_tokens <= 64_000
        assert request.max_output_tokens <= 20_000
    assert result.info.side_queries == len(fake.requests)


def test_chunks_carry_the_summary_so_far_oldest_first() -> None:
    """Each chunk after the first begins with the previous chunk's summary, to be updated."""
    history = agent_history(calls=40, result_tokens=2_000)
    fake = FakeProvider()
    for n in range(10):
        fake.enqueue_text(f"<state_snapshot>part {n}</state_snapshot>", purpose="side_query")
    options = CompressOptions(
        context_window=200_000, summarizer_window=32_000, force=True, clear_tool_outputs=False
    )
    result = CompressionService(fake).compress(history, options)
    assert result.info.status is S.COMPRESSED
    assert len(fake.requests) >= 2
    for n, request in enumerate(fake.requests[1:]):
        first = request.messages[0].text
        assert first.startswith(CARRY_PREAMBLE)
        assert f"part {n}</state_snapshot>" in first
    assert "section by section" in (fake.requests[0].system_instruction or "")
    assert result.info.summary == f"<state_snapshot>part {len(fake.requests) - 1}</state_snapshot>"


def test_output_cap_is_what_the_window_leaves_after_the_input() -> None:
    """On a 30K summarizer the cap is min(20K, window − input): below 20K, and it fits."""
    history = text_history(30_000)
    fake = FakeProvider()
    options = CompressOptions(context_window=30_000, force=True, keep_share=0.0)
    CompressionService(fake).compress(history, options)
    for request, count in zip(fake.requests, fake.counts, strict=True):
        assert request.max_output_tokens is not None
        assert request.max_output_tokens < 20_000
        assert count + request.max_output_tokens <= 30_000


def test_summary_target_goes_to_the_prompt_and_the_cap() -> None:
    """summary_target_tokens below 20K is the side query's cap and is named in its prompt."""
    fake = FakeProvider()
    options = CompressOptions(
        context_window=200_000, force=True, summary_target_tokens=3_000, keep_share=0.0
    )
    CompressionService(fake).compress(text_history(40_000), options)
    assert fake.requests[0].max_output_tokens == 3_000
    assert "3,000 tokens" in (fake.requests[0].system_instruction or "")


def test_keep_share_zero_summarizes_the_whole_history() -> None:
    """keep_share 0: nothing is kept verbatim when the history ends on a plain reply."""
    history = text_history(40_000)
    options = CompressOptions(context_window=200_000, force=True, keep_share=0.0)
    result = CompressionService(FakeProvider()).compress(history, options)
    assert result.info.compressed_messages == len(history)
    assert result.info.kept_messages == 0


# -- §10.7 small windows keep a breaker, failed rescues back off -----------------------------


def test_small_window_hard_attempts_count_and_failed_rescues_back_off() -> None:
    """32K (hard = auto): a failed rescue counts, and no side query follows until 10 % growth."""
    fake = FakeProvider(responder=empty_summaries)
    session = ChatSession(fake, context_window=32_000, history=text_history(26_000))
    thresholds = compute_thresholds(32_000)
    assert thresholds.hard == thresholds.auto
    for _ in range(4):
        session.send("z" * 40)
    assert side_queries(fake) == 1
    assert session.consecutive_failures == 1
    session.send("g" * 4 * 3_400)
    assert side_queries(fake) == 2
    assert session.consecutive_failures == 2
    session.compress()  # manual: never blocked
    assert side_queries(fake) == 3


def test_a_failed_rescue_holds_from_the_count_it_was_made_at() -> None:
    """The hold starts at the pre-send count, the message being sent included: a message of
    more than a tenth of the window whose rescue failed made the hold end before the next send,
    and every turn after ran another failed side query (a real 8K llama-server generated for
    minutes before each)."""
    fake = FakeProvider(responder=empty_summaries)
    session = ChatSession(fake, context_window=32_000, history=text_history(26_000))
    message = "z" * 4 * 3_500  # more than HOLD_GROWTH_SHARE of the window
    at = session.estimate_tokens(message)
    session.send(message)
    assert side_queries(fake) == 1
    assert session.compactions[-1].status.failed
    assert session.hold_until is not None
    assert session.hold_until >= at + HOLD_GROWTH_SHARE * 32_000
    session.send("y" * 40)  # the count has not grown: held
    assert side_queries(fake) == 1


def test_small_window_open_breaker_stops_the_hard_attempt() -> None:
    """Where hard equals auto an open breaker stops the "hard" attempt like an automatic one."""
    thresholds = compute_thresholds(32_000)
    open_breaker = BreakerState(consecutive_failures=3)
    assert automatic_trigger(30_000, thresholds, open_breaker) is None
    big = compute_thresholds(200_000)
    assert automatic_trigger(190_000, big, open_breaker) is CompressionTrigger.HARD


_T = CompressionTrigger


@pytest.mark.parametrize(
    ("window", "trigger", "ineffective", "count", "expected"),
    [
        pytest.param(200_000, _T.AUTO, False, 0, (1, None), id="auto-counts"),
        pytest.param(200_000, _T.AUTO, True, 2, (3, None), id="ineffective-counts-once"),
        pytest.param(200_000, _T.HARD, False, 1, (1, 61_000 + 20_000), id="hard-holds"),
        pytest.param(32_000, _T.HARD, False, 0, (1, 61_000 + 3_200), id="small-hard-both"),
        pytest.param(200_000, _T.MANUAL, False, 2, (2, None), id="manual-nothing"),
    ],
)
def test_a_refused_compaction_counts_as_that_attempt_failed(
    window: int,
    trigger: CompressionTrigger,
    ineffective: bool,
    count: int,
    expected: tuple[int, int | None],
) -> None:
    """A compaction (60,000 → 20,000) whose result the model refused, at a pre-send count of
    61,000, counts as that attempt failed: an automatic one adds 1, a forced rescue holds from
    the pre-send count (a small window's counts too), a manual one counts nothing."""
    info = CompressionInfo(
        status=CompressionStatus.COMPRESSED,
        trigger=trigger,
        original_token_count=60_000,
        new_token_count=20_000,
        ineffective=ineffective,
    )
    start = BreakerState(consecutive_failures=count)
    after = record_refused(start, [info], compute_thresholds(window), tokens=61_000)
    assert (after.consecutive_failures, after.hold_until) == expected


def test_clearing_protects_at_most_a_fifth_of_a_small_window() -> None:
    """On a 64K window the 40K default protection shrinks to 12.8K, so clearing can act."""
    history = agent_history(calls=12, result_tokens=3_000)
    options = CompressOptions(
        context_window=64_000, force=True, trigger=CompressionTrigger.HARD, clear_at_least_tokens=1
    )
    result = CompressionService(FakeProvider()).compress(history, options)
    assert result.info.cleared_tool_outputs >= 7


# -- design decision 63: room for the session's pace, and outgrown compactions ---------------


def _paced_session(fake: FakeProvider, events: list[object]) -> ChatSession:
    """64K (auto 44.8K) with a 26K system prompt, as in the recorded Claude Code sessions."""
    session = ChatSession(
        fake,
        context_window=64_000,
        system_instruction="s" * 104_000,
        history=text_history(10_000),
        clear_tool_outputs=False,
    )
    session.add_hook(events.append)
    return session


def _compaction_calls(session: ChatSession, sends: list[str]) -> list[int]:
    """The send (1-based) before which each automatic compaction ran."""
    calls = []
    for number, text in enumerate(sends, start=1):
        before = len(session.compactions)
        session.send(text)
        calls.extend(number for _ in range(len(session.compactions) - before))
    return calls


def test_a_compaction_leaves_room_for_five_calls_at_the_sessions_pace() -> None:
    """Steady growth of 3.5K a call: the kept tail shrinks so the next compaction is ≥ 5 calls
    away (with the fixed 30 % tail it came 4 calls later), and nothing is judged outgrown."""
    from autocompact.events import CompactionOutgrown

    events: list[object] = []
    session = _paced_session(FakeProvider(), events)
    calls = _compaction_calls(session, ["p" * 4 * 3_500] * 30)
    assert len(calls) >= 3
    assert min(b - a for a, b in pairwise(calls)) >= 5
    assert not any(isinstance(e, CompactionOutgrown) for e in events)
    auto = session.thresholds.auto
    for info in session.compactions:
        assert info.status is S.COMPRESSED
        assert info.new_token_count <= auto - 5 * 3_500 + 1_000  # the room, give or take


def test_growth_room_shrinks_the_kept_tail_down_to_nothing() -> None:
    """``growth_room_tokens`` lowers the count after to ``auto − room`` where the history
    allows; more room than can be bought keeps only what must be kept."""
    history = text_history(40_000)
    base = CompressOptions(context_window=64_000, force=True, trigger=CompressionTrigger.HARD)
    fake = FakeProvider()
    plain = CompressionService(fake).compress(history, base)
    roomy = CompressionService(fake).compress(history, replace(base, growth_room_tokens=35_000))
    auto = compute_thresholds(64_000).auto
    assert plain.info.new_token_count > auto - 35_000  # the 30 % tail alone leaves less room
    assert roomy.info.new_token_count <= auto - 35_000
    assert roomy.info.kept_messages < plain.info.kept_messages
    everything = CompressionService(fake).compress(
        history, replace(base, growth_room_tokens=64_000)
    )
    assert everything.info.kept_messages == 0


def test_clearing_alone_must_leave_room_for_the_pace() -> None:
    """Clearing that gets below warn but not ``auto − room`` is followed by the summary."""
    history = agent_history(calls=30, result_tokens=1_000)
    options = CompressOptions(
        context_window=64_000,
        force=True,
        trigger=CompressionTrigger.HARD,
        protect_tool_tokens=2_000,
        last_prompt_token_count=44_000,
    )
    alone = CompressionService(FakeProvider()).compress(history, options)
    assert alone.info.method == "clearing"
    room = round(compute_thresholds(64_000).auto - alone.info.new_token_count) + 1
    paced = CompressionService(FakeProvider()).compress(
        history, replace(options, growth_room_tokens=room)
    )
    assert paced.info.method == "summary"
    assert paced.info.cleared_tool_outputs > 0


def test_a_burst_after_a_compaction_judges_it_outgrown() -> None:
    """A burst no call foretold brings the count back to auto 2 calls after an effective
    compaction: that one is reported outgrown, counted toward the breaker, its hold measured
    from the count it left; the compaction that follows is explained, not thrash."""
    from autocompact.events import CompactionOutgrown

    events: list[object] = []
    session = _paced_session(FakeProvider(), events)
    sends = ["p" * 4 * 500] * 12 + ["b" * 4 * 9_000] * 3 + ["p" * 4 * 500] * 6
    calls = _compaction_calls(session, sends)
    outgrown = [e for e in events if isinstance(e, CompactionOutgrown)]
    assert len(outgrown) == 1
    judged = outgrown[0]
    assert judged.calls < 5
    assert judged.tokens >= session.thresholds.auto
    assert judged.hold_until == round(judged.compacted_to + HOLD_GROWTH_SHARE * 64_000)
    first, second = calls[0], calls[1]
    assert second - first < 5  # the close pair happened, and was reported
    # Counted like an ineffective compaction; the effective one after it reset the count.
    assert session.consecutive_failures == 0
    line = describe_event(judged)  # type: ignore[arg-type]
    assert line is not None
    assert "outgrown" in line


def test_growth_log_judges_only_within_five_calls() -> None:
    """The clock starts at an effective automatic compaction and stops after 5 calls; a manual
    or ineffective compaction starts none."""
    from autocompact.compaction.accounting import GrowthLog
    from autocompact.compaction.plan import CompressionInfo

    done = CompressionInfo(
        status=S.COMPRESSED,
        trigger=CompressionTrigger.HARD,
        original_token_count=50,
        new_token_count=20,
    )
    log = GrowthLog().before_send(10).before_send(13).after_compaction(done, 20)
    assert log.outgrown
    assert log.compacted_to == 20
    for _ in range(4):
        log = log.before_send(30)
        assert log.outgrown
    assert not log.before_send(30).outgrown
    assert log.expected_growth() == 5 * 0  # median of (3, 10, 0, 0, 0): 0
    manual = replace(done, trigger=CompressionTrigger.MANUAL)
    assert not GrowthLog().after_compaction(manual, 20).outgrown
    assert not GrowthLog().after_compaction(replace(done, ineffective=True), 20).outgrown
    assert GrowthLog(recent=(1_000, 3_000, 2_000)).expected_growth() == 10_000


def test_the_guard_carries_the_growth_log_and_judges_outgrown() -> None:
    """Frameworks (``ContextGuard``) get the same rules: the growth log travels in
    ``GuardState`` (and its JSON form), and a burst right after a compaction judges it outgrown."""
    from autocompact.compaction.extractive import extractive_summary
    from autocompact.events import CompactionOutgrown
    from autocompact.guard import ContextGuard, GuardState

    events: list[object] = []
    guard = ContextGuard(
        context_window=64_000,
        compression=CompressionService(None, summarizer=extractive_summary),
        clear_tool_outputs=False,
        hooks=(events.append,),
    )
    system = "s" * 104_000  # 26K, as in the recorded sessions
    messages = [*text_history(17_000), Message.user("start")]
    state = GuardState()
    compacted_at = []
    for step in range(12):
        result = guard.run(messages, system_instruction=system, state=state)
        if result.compacted:
            compacted_at.append(step)
        state = GuardState.from_dict(result.state.to_dict())
        burst = len(compacted_at) == 1 and step - compacted_at[0] < 3
        size = 9_000 if burst else 500
        messages = [*result.history, Message.model("ok"), Message.user(f"{step} " + "b" * 4 * size)]
    assert state.growth.recent  # carried from request to request
    assert len(compacted_at) >= 2
    assert compacted_at[1] - compacted_at[0] < 5
    assert sum(isinstance(e, CompactionOutgrown) for e in events) == 1


def test_a_malformed_growth_log_in_a_stored_state_is_named() -> None:
    """A bad ``growth`` field in a framework's stored state is an error naming the field."""
    from autocompact.errors import ContentError
    from autocompact.guard import GuardState

    assert GuardState.from_dict({}).growth.recent == ()
    for bad, field in (
        ({"recent": [1, -2]}, "growth.recent"),
        ({"last_count": "x"}, "growth.last_count"),
        ([], "growth"),
    ):
        with pytest.raises(ContentError, match=re.escape(f"'{field}'")):
            GuardState.from_dict({"growth": bad})


def test_learning_from_usage_keeps_the_growth_log() -> None:
    """A framework that reports each call's usage (pydantic-ai) keeps the growth log: without
    it the pace and the clock after a compaction started over at every call."""
    from autocompact.compaction.accounting import GrowthLog
    from autocompact.content import CharStats
    from autocompact.guard import GuardState, learn_from_usage

    log = GrowthLog(recent=(500, 700), last_count=40_000, since_compaction=1, compacted_to=30_000)
    state = GuardState(consecutive_failures=1, hold_until=36_400, growth=log)
    after = learn_from_usage(state, CharStats(text_chars=40_000), 12_000)
    assert after.growth == log
    assert (after.consecutive_failures, after.hold_until) == (1, 36_400)
    assert after.calibration.samples == 1

"""A compaction's new count is on the scale of the count it started from (SPEC §10.6).

The count a compaction starts from is the provider's (or the engine's calibrated estimate); the
part it summarizes is measured plain. Subtracting the plain size from a count on a tokenizer
that counts 1.6× the estimate overstated what is left by 0.6× the part summarized, and on a
small window a compaction that bought room was judged ineffective: a failure counted, a hold
started, and repeated, the breaker opened.
"""

from __future__ import annotations

import pytest

from autocompact import Message, Usage
from autocompact.chat import ChatSession
from autocompact.compaction import CompressionService, CompressionStatus, CompressOptions
from autocompact.estimation import Calibration
from autocompact.guard import ContextGuard, GuardState, learn_from_usage, request_stats
from autocompact.providers.base import ChatRequest
from autocompact.testing import FakeProvider, FakeReply, FakeTokenizer
from autocompact.thresholds import compute_thresholds
from histories import agent_history

WINDOW = 32_000  # a small local server: warn 19,200 · auto = hard 22,400
SCALE = 1.6  # the server's tokenizer: 2.5 characters a token (the estimate uses four)
SYSTEM = "s" * 4 * 4_750  # 4,750 estimated tokens, 7,600 on the server's count


def text_history(tokens: int, per: int = 1_000) -> list[Message]:
    """A user/model text history of about ``tokens`` estimated tokens, ending on a model reply."""
    n = tokens // per
    n -= n % 2
    return [
        Message.user(chr(97 + i % 26) * per * 4) if i % 2 == 0 else Message.model("m" * per * 4)
        for i in range(n)
    ]


def server() -> FakeProvider:
    """A fake server whose own count of text runs ``SCALE`` times the engine's estimate."""
    return FakeProvider(context_window=WINDOW, tokenizer=FakeTokenizer(text_factor=SCALE))


def counted(fake: FakeProvider, messages: list[Message] | tuple[Message, ...]) -> int:
    """The server's count of a request of ``messages`` with the system prompt."""
    return fake.count_tokens(ChatRequest(messages=tuple(messages), system_instruction=SYSTEM))


def test_a_compaction_on_the_calibrated_count_is_judged_on_that_scale() -> None:
    """A guard calibrated at 1.6 compacts a request at ~30K (its count) on a 32K window to what
    the server counts ~14K, well below warn: effective, no failure counted, no hold, and the
    new count is the server's within a few percent."""
    fake = server()
    state = GuardState()
    for tokens in (4_000, 6_000):  # two earlier requests teach the server's scale
        earlier = [*text_history(tokens), Message.user("go on")]
        stats = request_stats(earlier, system_instruction=SYSTEM, tools=())
        state = learn_from_usage(state, stats, counted(fake, earlier))
    assert abs(state.calibration.factor - SCALE) < 0.01
    guard = ContextGuard(context_window=WINDOW, compression=CompressionService(fake))
    messages = [*text_history(14_000), Message.user("go on")]
    thresholds = compute_thresholds(WINDOW)
    result = guard.run(messages, system_instruction=SYSTEM, state=state)
    assert result.tokens >= thresholds.auto
    (info,) = result.compactions
    assert info.status is CompressionStatus.COMPRESSED
    now = counted(fake, result.history[:-1])
    assert now < 0.8 * thresholds.warn
    assert not info.ineffective
    assert result.state.consecutive_failures == 0
    assert result.state.hold_until is None
    assert abs(info.new_token_count - now) <= 0.05 * now


def test_a_compaction_on_the_providers_count_is_judged_on_that_scale() -> None:
    """A restored session with the server's count (~30K of a 32K window) and its calibration
    compacts before the next send to what the server then counts, well below warn: effective,
    no failure counted, no hold, the new count the server's within a few percent."""
    fake = server()
    history = text_history(14_000)
    session = ChatSession(
        fake,
        context_window=WINDOW,
        system_instruction=SYSTEM,
        history=history,
        last_prompt_token_count=counted(fake, history),
        calibration=Calibration(factor=SCALE, samples=4),
    )
    thresholds = session.thresholds
    assert session.estimate_tokens("go on") >= thresholds.auto
    session.send("go on")
    (info,) = session.compactions
    assert info.status is CompressionStatus.COMPRESSED
    sent = fake.requests[-1]
    assert sent.purpose == "chat"
    now = counted(fake, sent.messages[:-1])  # the compacted history, as the server counts it
    assert now < 0.8 * thresholds.warn
    assert not info.ineffective
    assert session.consecutive_failures == 0
    assert session.hold_until is None
    assert abs(info.new_token_count - now) <= 0.05 * now


def test_a_clearing_frees_its_size_on_the_counts_scale() -> None:
    """Clearing old tool output on a count 1.6× the estimate takes off 1.6× the plain size of
    what it cleared: the new count is the server's count of the cleared history, within a few
    percent, not 0.6× the cleared output above it."""
    fake = FakeProvider(tokenizer=FakeTokenizer(text_factor=SCALE, json_factor=SCALE))
    history = agent_history(10, 1_500)
    count = fake.count_tokens(ChatRequest(messages=tuple(history)))
    options = CompressOptions(
        context_window=WINDOW, last_prompt_token_count=count, token_scale=SCALE
    )
    assert count >= compute_thresholds(WINDOW).auto
    result = CompressionService(fake).compress(history, options)
    assert result.info.method == "clearing"
    assert fake.requests == []
    now = fake.count_tokens(ChatRequest(messages=result.history))
    assert abs(result.info.new_token_count - now) <= 0.05 * now


def test_a_summary_smaller_on_the_counts_scale_is_not_inflated() -> None:
    """A summary the server counts at 1,300 tokens replacing a part it counts at about 1,600
    (1,000 estimated) makes the history smaller: it is kept, not refused as "not smaller"."""
    fake = FakeProvider(tokenizer=FakeTokenizer(text_factor=SCALE))
    history = [Message.user("a" * 4_000), Message.model("b" * 4 * 50)]  # 1,000 + 50 estimated
    count = fake.count_tokens(ChatRequest(messages=tuple(history)))
    fake.enqueue(
        FakeReply(text="<state_snapshot>goal</state_snapshot>", usage=Usage(output_tokens=1_300)),
        purpose="side_query",
    )
    options = CompressOptions(
        context_window=WINDOW,
        force=True,
        last_prompt_token_count=count,
        token_scale=SCALE,
        keep_share=0.0,
    )
    result = CompressionService(fake).compress(history, options)
    assert result.info.status is CompressionStatus.COMPRESSED
    assert result.info.new_token_count < count


@pytest.mark.parametrize("count", [0, 6_000], ids=["cold-plain", "count-at-plain"])
def test_a_plain_count_takes_the_plain_size_off_whatever_was_learned(count: int) -> None:
    """A count the compaction estimated itself, or one at the plain estimate, has the plain
    scale: a learned factor of 1.6 changes nothing in the new count (the removal never
    outgrows the count's own ratio)."""
    history = text_history(6_000)  # 6,000 estimated tokens
    results = []
    for scale in (1.0, SCALE):
        fake = FakeProvider()
        options = CompressOptions(
            context_window=WINDOW, force=True, last_prompt_token_count=count, token_scale=scale
        )
        results.append(CompressionService(fake).compress(history, options).info)
    assert results[0].status is results[1].status is CompressionStatus.COMPRESSED
    assert results[0].new_token_count == results[1].new_token_count

"""Slash-command handlers, event lines, the footer and the tip cooldown, compared as text."""

from __future__ import annotations

import pytest

from autocompact.chat import ChatSession
from autocompact.cli.render import TipScheduler, bar, describe_event, describe_info, footer_text
from autocompact.cli.slash import REGISTRY, ChatContext, context_lines
from autocompact.compaction import CompressionInfo, CompressionStatus, CompressionTrigger
from autocompact.content import Message
from autocompact.context_report import WindowSource
from autocompact.events import (
    BreakerClosed,
    BreakerOpened,
    CompactionFailed,
    CompactionSkipped,
    CompactionStarted,
    CompactionSucceeded,
    Event,
    ThresholdCrossed,
)
from autocompact.testing import FakeProvider
from autocompact.thresholds import Tier, compute_thresholds

CONTEXT_CASES = {
    "8K": (
        8_000,
        5_000,
        "server",
        """\
Current           5K of 8K (62.5%), tier warn
Window            8,000 tokens (reported by the server)
                  [███████████████████░░░░░░░░░░░]
Effective window  0 (the window is no larger than the 20K reserve; the thresholds are shares \
of the window)
Warn threshold    4.8K ← current
Auto threshold    5.6K
Hard threshold    5.6K""",
    ),
    "32K": (
        32_000,
        20_000,
        "configured",
        """\
Current           20K of 32K (62.5%), tier warn
Window            32,000 tokens (set in settings or on the command line)
                  [███████████████████░░░░░░░░░░░]
Effective window  12K (window − 20K reserve)
Warn threshold    19.2K ← current
Auto threshold    22.4K
Hard threshold    22.4K""",
    ),
    "128K": (
        128_000,
        100_000,
        "known",
        """\
Current           100K of 128K (78.1%), tier auto
Window            128,000 tokens (known for this model)
                  [███████████████████████░░░░░░░]
Effective window  108K (window − 20K reserve)
Warn threshold    76.8K
Auto threshold    95K ← current
Hard threshold    105K""",
    ),
    "200K": (
        200_000,
        170_000,
        "server",
        """\
Current           170K of 200K (85.0%), tier auto
Window            200,000 tokens (reported by the server)
                  [██████████████████████████░░░░]
Effective window  180K (window − 20K reserve)
Warn threshold    147K
Auto threshold    167K ← current
Hard threshold    177K""",
    ),
    "1M": (
        1_000_000,
        990_000,
        "assumed",
        """\
Current           990K of 1M (99.0%), tier hard
Window            1,000,000 tokens (ASSUMED: the model is unknown; set model.contextWindow \
or --window)
                  [██████████████████████████████]
Effective window  980K (window − 20K reserve)
Warn threshold    947K
Auto threshold    967K
Hard threshold    977K ← current""",
    ),
}


@pytest.mark.parametrize("case", CONTEXT_CASES, ids=list(CONTEXT_CASES))
def test_context_text(case: str) -> None:
    """/context prints the count, tier, window source, a bar and SPEC §7's four lines."""
    window, tokens, source, expected = CONTEXT_CASES[case]
    session = ChatSession(FakeProvider(), context_window=window, last_prompt_token_count=tokens)
    ctx = ChatContext(
        session=session, provider_name="fake", model="fake-model", window_source=source
    )
    assert "\n".join(REGISTRY.dispatch(ctx, "/context").lines) == expected


def test_context_shows_what_holds_the_space_by_category() -> None:
    """/context ends with the breakdown: system prompt and tools, summary, tool traffic, talk."""
    from autocompact.compaction.prompts import SUMMARY_ACKNOWLEDGEMENT, SUMMARY_PREAMBLE
    from autocompact.content import FunctionCallPart, FunctionResponsePart

    history = [
        Message.user(SUMMARY_PREAMBLE + "s" * 8_000),
        Message.model(SUMMARY_ACKNOWLEDGEMENT),
        Message.user("q" * 4_000),
        Message.model(FunctionCallPart(id="a", name="read")),
        Message.user(FunctionResponsePart(id="a", name="read", response="r" * 6_000)),
    ]
    session = ChatSession(
        FakeProvider(), context_window=32_000, system_instruction="p" * 20_000, history=history
    )
    lines = context_lines(session, "known")
    tail = lines[lines.index("What holds the space (estimated):") + 1 :]
    assert [line.split("  ")[1].strip() for line in tail] == [
        "System prompt and tools",
        "Summary",
        "Tool calls and results",
        "Conversation",
    ]
    assert tail[0].endswith("5K")
    assert tail[3].endswith("1K")


def test_context_lines_use_the_cold_estimate_when_no_count() -> None:
    """Without a provider count (a restored session) /context shows the cold estimate."""
    history = [Message.user("x" * 40_000), Message.model("ok")]
    session = ChatSession(FakeProvider(), context_window=32_000, history=history)
    source: WindowSource = "configured"
    assert context_lines(session, source)[0].startswith("Current           10K of 32K")


def _ctx(fake: FakeProvider, history: list[Message]) -> ChatContext:
    session = ChatSession(fake, context_window=128_000, history=history)
    return ChatContext(session=session, provider_name="fake", model=fake.model)


def test_compress_instructions_reach_the_side_query() -> None:
    """/compress INSTRUCTIONS forces a compaction whose side query carries the instructions."""
    fake = FakeProvider()
    history = []
    for i in range(6):
        history += [Message.user(f"question {i} " + "words " * 300), Message.model(f"answer {i}")]
    ctx = _ctx(fake, history)
    result = REGISTRY.dispatch(ctx, "/compress keep every PINEAPPLE fact")
    assert result.changed
    (side,) = [r for r in fake.requests if r.purpose == "side_query"]
    seen = (side.system_instruction or "") + "".join(m.text for m in side.messages)
    assert "keep every PINEAPPLE fact" in seen
    assert side.max_output_tokens == 20_000
    assert ctx.session.compactions[-1].trigger == CompressionTrigger.MANUAL
    assert ctx.session.compactions[-1].status == CompressionStatus.COMPRESSED


def test_compress_with_nothing_to_do_says_so() -> None:
    """/compress on an empty chat answers at once, starting no compaction; a compaction that
    does start with nothing to do ends with a skipped event whose line says so."""
    ctx = _ctx(FakeProvider(), [])
    events: list[Event] = []
    ctx.session.add_hook(events.append)
    assert REGISTRY.dispatch(ctx, "/compress").lines == (
        "Nothing to compress: the history is empty",
    )
    assert events == []
    ctx.session.compress()
    started, skipped = events
    assert isinstance(started, CompactionStarted)
    assert isinstance(skipped, CompactionSkipped)
    assert describe_event(skipped) == "Nothing to compress: the history is empty"


def test_clear_quit_and_help() -> None:
    """/clear empties the history and calls the hook; /quit ends; /help lists every command."""
    cleared: list[bool] = []
    ctx = _ctx(FakeProvider(), [Message.user("a"), Message.model("b")])
    ctx.on_clear = lambda: cleared.append(True)
    assert REGISTRY.dispatch(ctx, "/clear").lines == ("Conversation cleared.",)
    assert ctx.session.history == ()
    assert cleared == [True]
    assert REGISTRY.dispatch(ctx, "/quit").quit
    assert REGISTRY.dispatch(ctx, "/exit").quit
    help_text = "\n".join(REGISTRY.dispatch(ctx, "/help").lines)
    for cmd in REGISTRY:
        assert f"/{cmd.name}" in help_text
        assert cmd.help in help_text


def test_model_switch_uses_the_switcher() -> None:
    """/model NAME goes through the context's switcher; without one it says it cannot."""
    ctx = _ctx(FakeProvider(), [])
    assert REGISTRY.dispatch(ctx, "/model other").lines == ("This chat cannot switch models.",)
    ctx.switch_model = lambda c, name: f"now {name}"
    assert REGISTRY.dispatch(ctx, "/model other").lines == ("now other",)


def _info(status: CompressionStatus, **kw: object) -> CompressionInfo:
    base: dict[str, object] = {
        "status": status,
        "trigger": CompressionTrigger.AUTO,
        "original_token_count": 98_072,
        "new_token_count": 12_345,
        "compressed_messages": 40,
        "kept_messages": 10,
        "method": "summary",
    }
    base.update(kw)
    return CompressionInfo(**base)  # type: ignore[arg-type]


def test_event_lines() -> None:
    """Each compaction event has its line; tier crossings are left to the footer."""
    ok = _info(CompressionStatus.COMPRESSED)
    bad = _info(
        CompressionStatus.COMPRESSION_FAILED_OUTPUT_TRUNCATED, new_token_count=98_072, error=None
    )
    assert (
        describe_event(CompactionStarted(trigger=CompressionTrigger.HARD, tokens=105_500))
        == "Compacting the conversation (hard, 105.5K tokens)…"
    )
    assert describe_event(CompactionSucceeded(info=ok)) == (
        "Compressed 98.1K → 12.3K tokens (auto; summarized 40 messages, kept 10)"
    )
    assert describe_event(CompactionFailed(info=bad)) == (
        "Compaction failed (auto): the summary hit its output cap; the history is unchanged"
    )
    assert "paused after 3 failures" in (
        describe_event(BreakerOpened(consecutive_failures=3)) or ""
    )
    assert describe_event(BreakerClosed(previous_failures=3)) == "Automatic compaction resumed."
    assert describe_event(ThresholdCrossed(previous=Tier.SAFE, current=Tier.WARN, tokens=1)) is None


@pytest.mark.parametrize(
    ("tokens", "indicator"),
    [(76_799, False), (76_800, True), (94_999, True), (95_000, False), (120_000, False)],
)
def test_footer_indicator_only_between_warn_and_auto(tokens: int, indicator: bool) -> None:
    """The footer shows 'approaching auto-compaction' exactly while warn ≤ count < auto."""
    text = footer_text(tokens, compute_thresholds(128_000))
    assert ("approaching auto-compaction (at 95K)" in text) is indicator
    assert "128K tokens (" in text


def test_footer_text_in_the_warn_band() -> None:
    """The footer's exact text in the warn band: count, share and the indicator."""
    assert footer_text(80_000, compute_thresholds(128_000)) == (
        "80K / 128K tokens (62%) · approaching auto-compaction (at 95K)"
    )


def test_footer_shows_a_paused_breaker() -> None:
    """With the breaker open the footer says automatic compaction is paused."""
    text = footer_text(10, compute_thresholds(128_000), consecutive_failures=3)
    assert text == "10 / 128K tokens (0%) · auto-compaction paused (/compress to retry)"


def test_tip_scheduler_cooldown() -> None:
    """A tip shows when its band is entered, then only after the cooldown in the same band."""
    th = compute_thresholds(128_000)
    tips = TipScheduler(cooldown_turns=3)
    shown = [tips.after_turn(t, th) for t in (10_000, 80_000, 81_000, 82_000, 83_000, 84_000)]
    ids = [t.id if t else None for t in shown]
    assert ids == [None, "compress-intro", None, None, "compress-intro", None]
    # a new band shows at once, and coming back to the old band shows it again
    assert (tips.after_turn(100_000, th) or None) is not None
    assert (tips.after_turn(85_000, th) or None) is not None


def test_bar() -> None:
    """The gauge fills proportionally and clamps."""
    assert bar(0.5, width=10) == "[█████░░░░░]"
    assert bar(2.0, width=4) == "[████]"
    assert bar(-1, width=4) == "[░░░░]"


def test_compaction_lines_say_which_tier_acted() -> None:
    """Clearing alone, clearing then a summary, and a summary alone each say what they did."""

    def info(method: str, cleared: int) -> CompressionInfo:
        return CompressionInfo(
            status=CompressionStatus.COMPRESSED,
            trigger=CompressionTrigger.AUTO,
            original_token_count=170_000,
            new_token_count=90_000,
            compressed_messages=40 if method == "summary" else 0,
            kept_messages=12,
            method=method,  # type: ignore[arg-type]
            cleared_tool_outputs=cleared,
        )

    assert describe_info(info("clearing", 7)) == (
        "Compressed 170K → 90K tokens (auto; cleared 7 old tool outputs, no summary needed)"
    )
    assert "cleared 3 old tool outputs, then summarized 40 messages" in describe_info(
        info("summary", 3)
    )
    assert "(auto; summarized 40 messages, kept 12)" in describe_info(info("summary", 0))

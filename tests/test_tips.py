"""Tips follow the ladder's bands (SPEC §7): one band each, in order, with a fallback."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autocompact import ChatSession, ConfigError, Message, compute_thresholds
from autocompact.context_report import build_context_report
from autocompact.testing import FakeProvider, FakeReply
from autocompact.thresholds import Tier, tier_of
from autocompact.tips import format_tokens, select_tip

WINDOWS = [32_000, 128_000, 200_000, 1_000_000]


def _band(tokens: float, window: int) -> str | None:
    t = compute_thresholds(window)
    if tokens >= t.hard:
        return "context-critical"
    if tokens >= t.auto:
        return "context-high"
    if tokens >= t.warn:
        return "compress-intro"
    return None


@pytest.mark.parametrize("window", WINDOWS, ids=[f"{w // 1000}K" for w in WINDOWS])
def test_each_band_fires_in_its_range_and_nowhere_else(window: int) -> None:
    """Just below, at and just above each threshold, the tip is the band's and only that."""
    t = compute_thresholds(window)
    for edge in (t.warn, t.auto, t.hard):
        for tokens in (edge - 1, edge, edge + 1):
            tip = select_tip(tokens, window=window, thresholds=t)
            assert (tip.id if tip else None) == _band(tokens, window), (window, tokens)


@given(st.integers(min_value=0, max_value=2_000_000), st.sampled_from(WINDOWS))
def test_bands_never_overlap(tokens: int, window: int) -> None:
    """For any count exactly one band (or none) applies, the same one the ladder names."""
    tip = select_tip(tokens, window=window, thresholds=compute_thresholds(window))
    assert (tip.id if tip else None) == _band(tokens, window)


def test_collapsed_window_goes_straight_to_critical() -> None:
    """On 32K hard collapses onto auto: at auto the tip is critical, never high."""
    t = compute_thresholds(32_000)
    tip = select_tip(t.auto, window=32_000, thresholds=t)
    assert tip is not None
    assert tip.id == "context-critical"


@pytest.mark.parametrize(
    ("fraction", "expected"),
    [
        (0.49, None),
        (0.50, "compress-intro"),
        (0.79, "compress-intro"),
        (0.80, "context-high"),
        (0.94, "context-high"),
        (0.95, "context-critical"),
        (1.20, "context-critical"),
    ],
)
def test_without_thresholds_the_bands_are_50_80_95_percent(
    fraction: float, expected: str | None
) -> None:
    """With no thresholds from the caller, the tips fall back to 50 / 80 / 95 % of the window."""
    tip = select_tip(fraction * 100_000, window=100_000)
    assert (tip.id if tip else None) == expected


def test_zero_window_does_not_break() -> None:
    """A 0-token window gives the critical tip and no division error."""
    tip = select_tip(10, window=0, thresholds=compute_thresholds(0))
    assert tip is not None
    assert "n/a" in tip.message


def test_breaker_open_changes_the_advice() -> None:
    """In the auto band with the breaker open, the tip says compaction is paused."""
    t = compute_thresholds(200_000)
    paused = select_tip(t.auto + 1, window=200_000, thresholds=t, breaker_open=True)
    normal = select_tip(t.auto + 1, window=200_000, thresholds=t)
    assert paused is not None
    assert normal is not None
    assert "paused" in paused.message
    assert "paused" not in normal.message


def test_critical_tip_says_the_rescue_already_ran() -> None:
    """context-critical tells the user the forced compaction already ran before the send, when
    one did, and that another runs before the next."""
    t = compute_thresholds(200_000)
    tip = select_tip(t.hard, window=200_000, thresholds=t, rescue_ran=True)
    assert tip is not None
    assert "A forced compaction already ran before this send" in tip.message
    assert "another runs before the next one" in tip.message


def test_critical_tip_after_a_reply_that_crossed_hard_says_the_rescue_is_to_come() -> None:
    """When the reply pushed the count past hard (no forced compaction ran before the send),
    context-critical says one runs before the next send, not that one already ran."""
    t = compute_thresholds(200_000)
    for breaker_open in (False, True):  # on a large window an open breaker stops no rescue
        tip = select_tip(t.hard + 5_000, window=200_000, thresholds=t, breaker_open=breaker_open)
        assert tip is not None
        assert tip.id == "context-critical"
        assert "already ran" not in tip.message
        assert "A forced compaction runs before the next send" in tip.message


def test_critical_tip_says_when_no_rescue_runs() -> None:
    """During a hold, or with the breaker open where hard equals auto, no forced compaction
    runs: the tip says compaction is paused instead of saying one ran."""
    small, big = compute_thresholds(8_192), compute_thresholds(200_000)
    assert small.hard == small.auto
    for thresholds, kwargs in (
        (small, {"held": True}),
        (small, {"breaker_open": True}),
        (big, {"held": True}),
    ):
        tip = select_tip(thresholds.hard, window=thresholds.window, thresholds=thresholds, **kwargs)
        assert tip is not None
        assert tip.id == "context-critical"
        assert "already ran" not in tip.message
        assert "paused" in tip.message
        assert "left out of each request" in tip.message
    # on a large window an open breaker does not stop the hard rescue
    tip = select_tip(big.hard, window=200_000, thresholds=big, breaker_open=True, rescue_ran=True)
    assert tip is not None
    assert "already ran" in tip.message


def test_on_the_failure_path_the_three_fire_in_order() -> None:
    """With every summary failing, the count climbs through warn, auto and hard in order."""
    provider = FakeProvider(context_window=100_000)
    provider.responder = lambda request: FakeReply(
        text=" " if request.purpose == "side_query" else "ok"
    )
    session = ChatSession(provider, context_window=100_000, clear_tool_outputs=False)
    seen: list[str] = []
    for i in range(40):
        session.send(Message.user(f"step {i} " + "x" * 8_000))
        tip = select_tip(
            session.estimate_tokens(),
            window=100_000,
            thresholds=session.thresholds,
            breaker_open=session.breaker_open,
        )
        if tip is not None and (not seen or seen[-1] != tip.id):
            seen.append(tip.id)
    assert seen[:3] == ["compress-intro", "context-high", "context-critical"]
    assert session.breaker_open


_THRESHOLDS = compute_thresholds(200_000)
_NOT_COUNTS = [math.nan, math.inf, -5, "5", None, True]


@pytest.mark.parametrize("tokens", _NOT_COUNTS, ids=repr)
@pytest.mark.parametrize(
    "call",
    [
        lambda t: tier_of(t, _THRESHOLDS),
        lambda t: _THRESHOLDS.tier(t),
        lambda t: select_tip(t, window=200_000),
        lambda t: build_context_report(t, _THRESHOLDS),
    ],
    ids=["tier_of", "tier", "select_tip", "build_context_report"],
)
def test_a_count_that_is_no_count_is_named(call: Any, tokens: object) -> None:
    """NaN read as safe, and the others raised raw TypeError/ValueError from the arithmetic."""
    with pytest.raises(ConfigError, match=r"^tokens must be a finite token count, 0 or more, got"):
        call(tokens)


def test_an_int_past_any_float_is_no_count_for_a_tip_or_a_report() -> None:
    """(``tier_of`` orders it exactly: it is past hard.)"""
    assert tier_of(10**400, _THRESHOLDS) is Tier.HARD
    for call in (
        lambda: select_tip(10**400, window=1),
        lambda: build_context_report(10**400, _THRESHOLDS),
    ):
        with pytest.raises(ConfigError, match=r"^tokens must be a finite token count"):
            call()


@pytest.mark.parametrize(
    "tokens", [math.nan, math.inf, "5", None, 10**400], ids=["nan", "inf", "str", "None", "huge"]
)
def test_format_tokens_names_what_is_no_number(tokens: object) -> None:
    with pytest.raises(ConfigError, match=r"^tokens must be a finite number, got"):
        format_tokens(tokens)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda: tier_of(5, {}), "thresholds"),  # type: ignore[arg-type]
        (lambda: select_tip(5, window=200_000, thresholds=5), "thresholds"),  # type: ignore[arg-type]
        (lambda: select_tip(150_000, window=-5), "window"),
        (lambda: select_tip(150_000, window=math.nan), "window"),  # type: ignore[arg-type]
        (lambda: build_context_report(5, None), "thresholds"),  # type: ignore[arg-type]
        (lambda: build_context_report(5, _THRESHOLDS, window_source="bogus"), "window_source"),  # type: ignore[arg-type]
    ],
)
def test_a_ladder_or_window_that_is_none_is_named(call: Any, named: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{named} must be"):
        call()


def test_counts_of_any_real_type_still_read() -> None:
    """Floats and int subclasses are counts (averages are floats)."""
    assert tier_of(0.0, _THRESHOLDS) is Tier.SAFE
    assert tier_of(_THRESHOLDS.hard + 0.5, _THRESHOLDS) is Tier.HARD
    assert select_tip(float(_THRESHOLDS.auto), window=200_000, thresholds=_THRESHOLDS) is not None
    assert format_tokens(-1500) == "-1.5K"
    assert build_context_report(170_000, _THRESHOLDS).tier is Tier.AUTO

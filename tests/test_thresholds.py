"""The warn / auto / hard ladder (SPEC §2–§3): table, invariants, tiers, window parsing."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autocompact import ConfigError
from autocompact.thresholds import (
    AUTOCOMPACT_BUFFER,
    COMPACT_MAX_OUTPUT_TOKENS,
    DEFAULT_IMAGE_TOKEN_ESTIMATE,
    DEFAULT_PCT,
    HARD_BUFFER,
    MAX_CONSECUTIVE_FAILURES,
    SUMMARY_RESERVE,
    WARN_BUFFER,
    WARN_PCT_OFFSET,
    Tier,
    compute_thresholds,
    parse_window,
    tier_of,
)

# window, warn, auto, hard, effective, (warn_source, auto_source, hard_source)
TABLE = [
    ("32K", 32_000, 19_200, 22_400, 22_400, 12_000, ("proportional", "proportional", "collapsed")),
    ("64K", 64_000, 38_400, 44_800, 44_800, 44_000, ("proportional", "proportional", "collapsed")),
    ("128K", 128_000, 76_800, 95_000, 105_000, 108_000, ("proportional", "absolute", "absolute")),
    (
        "131072",
        131_072,
        78_643.2,
        98_072,
        108_072,
        111_072,
        ("proportional", "absolute", "absolute"),
    ),
    ("200K", 200_000, 147_000, 167_000, 177_000, 180_000, ("absolute", "absolute", "absolute")),
    ("256K", 256_000, 203_000, 223_000, 233_000, 236_000, ("absolute", "absolute", "absolute")),
    ("1M", 1_000_000, 947_000, 967_000, 977_000, 980_000, ("absolute", "absolute", "absolute")),
    ("10K", 10_000, 6_000, 7_000, 7_000, 0, ("proportional", "proportional", "collapsed")),
    ("0", 0, 0, 0, 0, 0, ("proportional", "proportional", "collapsed")),
]


def test_constants_match_spec() -> None:
    """Every SPEC §2 constant has its value, and the reserve equals the side-query cap."""
    assert DEFAULT_PCT == 0.7
    assert WARN_PCT_OFFSET == 0.1
    assert COMPACT_MAX_OUTPUT_TOKENS == SUMMARY_RESERVE == 20_000
    assert (AUTOCOMPACT_BUFFER, WARN_BUFFER, HARD_BUFFER) == (13_000, 20_000, 3_000)
    assert MAX_CONSECUTIVE_FAILURES == 3
    assert DEFAULT_IMAGE_TOKEN_ESTIMATE == 1_600


@pytest.mark.parametrize(
    ("window", "warn", "auto", "hard", "effective", "sources"),
    [row[1:] for row in TABLE],
    ids=[row[0] for row in TABLE],
)
def test_reference_table(
    window: int,
    warn: float,
    auto: float,
    hard: float,
    effective: int,
    sources: tuple[str, str, str],
) -> None:
    """compute_thresholds reproduces SPEC §3's table exactly, with the branch of each tier."""
    t = compute_thresholds(window)
    assert t.window == window
    assert t.warn == pytest.approx(warn, abs=1e-6)
    assert t.auto == pytest.approx(auto, abs=1e-6)
    assert t.hard == pytest.approx(hard, abs=1e-6)
    assert t.effective_window == effective
    assert (t.warn_source, t.auto_source, t.hard_source) == sources


def test_131072_values_are_exact_not_rounded() -> None:
    """0.7 × 131,072 = 91,750.4 and 0.6 × 131,072 = 78,643.2 are kept exact (no rounding)."""
    t = compute_thresholds(131_072)
    assert t.warn == pytest.approx(78_643.2, abs=1e-9)
    assert t.warn != round(t.warn)


@given(st.integers(min_value=0, max_value=10_000_000))
def test_warn_le_auto_le_hard_everywhere(window: int) -> None:
    """0 ≤ warn ≤ auto ≤ hard and effective ≥ 0 for every window in 0..10M."""
    t = compute_thresholds(window)
    assert 0 <= t.warn <= t.auto <= t.hard
    assert t.effective_window >= 0
    assert t.hard <= max(window, 0) or window == 0


@given(
    st.integers(min_value=0, max_value=10_000_000),
    st.integers(min_value=0, max_value=12_000_000),
    st.integers(min_value=0, max_value=12_000_000),
)
def test_tier_is_monotonic_in_tokens(window: int, a: int, b: int) -> None:
    """More tokens never give a lower tier."""
    t = compute_thresholds(window)
    order = [Tier.SAFE, Tier.WARN, Tier.AUTO, Tier.HARD]
    low, high = sorted((a, b))
    assert order.index(t.tier(low)) <= order.index(t.tier(high))


@given(st.integers(min_value=0, max_value=10_000_000))
def test_ladder_is_continuous(window: int) -> None:
    """Moving the window by one token moves every threshold by at most one token (no jump)."""
    a, b = compute_thresholds(window), compute_thresholds(window + 1)
    for name in ("warn", "auto", "hard", "effective_window"):
        step = getattr(b, name) - getattr(a, name)
        assert 0 <= step <= 1 + 1e-9, (name, window, step)


@pytest.mark.parametrize(
    ("name", "boundary"),
    [
        ("auto", 110_000),  # 0.7w == w − 33,000
        ("warn", 132_500),  # 0.6w == w − 53,000
        ("hard", 76_666),  # w − 23,000 == 0.7w (about 76.7K)
    ],
    ids=["auto-110K", "warn-132.5K", "hard-76.7K"],
)
def test_continuity_at_each_branch_switch(name: str, boundary: int) -> None:
    """Around each branch switch the value changes by at most the step times the slope (≤ 1)."""
    values = [getattr(compute_thresholds(w), name) for w in range(boundary - 3, boundary + 4)]
    steps = [b - a for a, b in itertools.pairwise(values)]
    assert all(0 <= s <= 1 + 1e-9 for s in steps), steps


def test_sources_switch_at_the_auto_boundary() -> None:
    """Below 110K auto is proportional, above it absolute; ties go to proportional."""
    assert compute_thresholds(109_999).auto_source == "proportional"
    assert compute_thresholds(110_000).auto_source == "proportional"
    assert compute_thresholds(110_001).auto_source == "absolute"
    assert compute_thresholds(110_000).auto == pytest.approx(77_000)


def test_hard_collapses_up_to_about_76_7k() -> None:
    """Windows up to about 76.7K collapse hard onto auto; above it hard is absolute."""
    assert compute_thresholds(76_666).hard_source == "collapsed"
    assert compute_thresholds(76_667).hard_source == "absolute"


@pytest.mark.parametrize(
    ("tokens", "tier"),
    [
        (0, Tier.SAFE),
        (146_999, Tier.SAFE),
        (147_000, Tier.WARN),
        (166_999, Tier.WARN),
        (167_000, Tier.AUTO),
        (176_999, Tier.AUTO),
        (177_000, Tier.HARD),
        (10**9, Tier.HARD),
    ],
    ids=lambda v: str(v),
)
def test_tier_bands_200k(tokens: int, tier: Tier) -> None:
    """Tiers are half-open bands [warn, auto), [auto, hard), [hard, ∞) on a 200K window."""
    assert tier_of(tokens, compute_thresholds(200_000)) is tier


def test_hard_checked_first_on_collapsed_window() -> None:
    """On a collapsed window (auto == hard) a count at auto reports hard, never auto."""
    t = compute_thresholds(32_000)
    assert t.auto == t.hard
    assert t.tier(t.auto) is Tier.HARD
    assert t.tier(t.auto - 1) is Tier.WARN


def test_zero_window_is_all_hard() -> None:
    """A window of 0 does not break: every count is at hard."""
    assert compute_thresholds(0).tier(0) is Tier.HARD


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (131_072, 131_072),
        ("131072", 131_072),
        ("128k", 128_000),
        ("128K", 128_000),
        ("1m", 1_000_000),
        ("1.5M", 1_500_000),
        (" 200k ", 200_000),
        (0, 0),
        (64_000.0, 64_000),
    ],
    ids=lambda v: repr(v),
)
def test_parse_window_accepts(value: object, expected: int) -> None:
    """parse_window accepts plain ints and k/m suffixed strings."""
    assert parse_window(value) == expected


@pytest.mark.parametrize(
    ("value", "named"),
    [
        (-1, "-1"),
        ("-5k", "-5"),
        ("abc", "abc"),
        ("", "''"),
        ("k", "'k'"),
        (True, "True"),
        (False, "False"),
        (1.5, "1.5"),
        ("1.5", "1.5"),
        ("1.0005k", "1.0005k"),
        ("nan", "nan"),
        (None, "None"),
        ([128_000], "128000"),
    ],
    ids=lambda v: repr(v),
)
def test_parse_window_rejects_with_a_message_naming_the_value(value: object, named: str) -> None:
    """Negative, non-numeric, boolean and fractional windows raise ConfigError naming the value."""
    with pytest.raises(ConfigError) as info:
        parse_window(value)
    assert named in str(info.value)


def test_compute_thresholds_rejects_a_negative_window() -> None:
    """compute_thresholds refuses a negative window with ConfigError."""
    with pytest.raises(ConfigError, match="-10"):
        compute_thresholds(-10)

"""Session calibration: learned from reported usage, applied to cold estimates both ways."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autocompact.content import CharStats
from autocompact.errors import ContentError
from autocompact.estimation import (
    APPLIED_FACTOR_BOUNDS,
    CALIBRATION_MIN_SAMPLES,
    LOW_SIDE_MARGIN,
    MIN_CALIBRATION_TOKENS,
    MIX_TOLERANCE,
    UNLEARNED_FACTOR,
    Calibration,
    calibrated_estimate,
    calibrated_tokens,
    estimate_stats_tokens,
    learned_mix_tokens,
    update_calibration,
)

stats_strategy = st.builds(
    CharStats,
    text_chars=st.integers(0, 2_000_000),
    json_chars=st.integers(0, 2_000_000),
    media_parts=st.integers(0, 20),
)
calibration_strategy = st.builds(
    Calibration,
    factor=st.floats(0.25, 4.0),
    samples=st.integers(0, 1000),
    json_share=st.none() | st.floats(0.0, 1.0),
)


def test_first_sample_learns_the_ratio() -> None:
    """A session whose provider counts 1.5× the plain estimate learns factor 1.5."""
    stats = CharStats(text_chars=40_000, json_chars=20_000)  # plain: 10K + 10K tokens
    learned = update_calibration(Calibration(), stats, 30_000 + 5_000, baseline_tokens=5_000)
    assert learned.samples == 1
    assert learned.factor == pytest.approx(1.5)
    assert learned.text_chars_per_token == pytest.approx(4 / 1.5)
    assert learned.json_chars_per_token == pytest.approx(2 / 1.5)
    bigger = CharStats(text_chars=80_000, json_chars=40_000)
    assert calibrated_tokens(learned, bigger) == 60_000


def test_weight_blends_old_and_new() -> None:
    """With weight 0.5 the new factor is halfway between the old one and the sample."""
    stats = CharStats(text_chars=40_000)  # plain 10K
    first = update_calibration(Calibration(), stats, 20_000)
    second = update_calibration(first, stats, 10_000, weight=0.5)
    assert second.factor == pytest.approx(1.5)
    assert second.samples == 2


def test_small_or_impossible_samples_teach_nothing() -> None:
    """Tiny content, a report below the baseline, or a bad weight leave it unchanged."""
    calibration = Calibration(factor=1.2, samples=3)
    tiny = CharStats(text_chars=4 * (MIN_CALIBRATION_TOKENS - 1))
    assert update_calibration(calibration, tiny, 10_000) is calibration
    stats = CharStats(text_chars=40_000)
    assert update_calibration(calibration, stats, 900, baseline_tokens=1_000) is calibration
    assert update_calibration(calibration, stats, 20_000, weight=0) is calibration


def test_media_keep_their_fixed_estimate() -> None:
    """Images are counted at image_token_estimate, outside the learned factor."""
    stats = CharStats(text_chars=40_000, media_parts=2)
    learned = update_calibration(
        Calibration(), stats, 20_000 + 2 * 1_000, image_token_estimate=1_000
    )
    assert learned.factor == pytest.approx(2.0)
    assert calibrated_tokens(learned, stats, image_token_estimate=1_000) == 22_000


def test_factor_is_clamped() -> None:
    """An absurd report cannot teach an absurd factor."""
    learned = update_calibration(Calibration(), CharStats(text_chars=4_000), 10**9)
    assert learned.factor == 4.0


def test_dict_round_trip_and_errors() -> None:
    """Calibration persists as a small dict; bad dicts name the field."""
    calibration = Calibration(factor=1.37, samples=12)
    assert Calibration.from_dict(calibration.to_dict()) == calibration
    assert Calibration.from_dict(None) == Calibration()
    with pytest.raises(ContentError, match="'factor'"):
        Calibration.from_dict({"factor": "x"})
    with pytest.raises(ContentError, match="'factor' must be in"):
        Calibration.from_dict({"factor": 100.0})
    with pytest.raises(ContentError, match="'samples'"):
        Calibration.from_dict({"factor": 1.0, "samples": -1})
    with pytest.raises(ContentError, match="must be an object"):
        Calibration.from_dict([1.0])


@given(calibration_strategy, stats_strategy)
def test_calibration_lowers_only_once_learned_and_clamped(
    calibration: Calibration, stats: CharStats
) -> None:
    """Before CALIBRATION_MIN_SAMPLES reports the estimate only rises; after, content of the
    learned mix follows the clamped factor both ways, with the low-side margin, and content
    beyond that mix is sized at UNLEARNED_FACTOR: never below half the plain estimate, and
    never below the plain estimate when the mix is far from the learned one."""
    plain = estimate_stats_tokens(stats)
    applied = calibrated_estimate(plain, calibration, stats)
    if calibration.samples < CALIBRATION_MIN_SAMPLES:
        assert applied == max(plain, calibrated_tokens(calibration, stats))
        return
    low, high = APPLIED_FACTOR_BOUNDS
    content = stats.text_chars / 4 + stats.json_chars / 2
    media = stats.media_parts * 1_600
    factor = min(high, max(low, calibration.factor))
    if factor < 1:
        factor = min(1.0, factor * (1 + LOW_SIDE_MARGIN))
    matched = learned_mix_tokens(calibration, stats)
    assert 0 <= matched <= content + 1e-6
    expected = factor * matched + max(factor, UNLEARNED_FACTOR) * (content - matched)
    assert applied == math.ceil(expected + media)
    assert applied >= math.floor(low * content + media)
    share = stats.json_chars / 2 / content if content else None
    learned_on = calibration.json_share
    if share is None or learned_on is None or abs(share - learned_on) <= MIX_TOLERANCE:
        assert matched == content
        if factor <= 1:
            assert applied <= plain
    else:  # the matched part has the learned mix and takes all of the scarcer kind
        text, json_tokens = stats.text_chars / 4, stats.json_chars / 2
        scarce, scarce_share = (
            (json_tokens, learned_on) if share < learned_on else (text, 1 - learned_on)
        )
        assert matched * scarce_share == pytest.approx(scarce, rel=1e-9, abs=1e-6)


@given(
    calibration_strategy,
    stats_strategy,
    st.integers(0, 10_000_000),
    st.integers(0, 100_000),
    st.floats(0.01, 1.0),
)
def test_update_keeps_a_valid_calibration(
    calibration: Calibration, stats: CharStats, reported: int, baseline: int, weight: float
) -> None:
    """Any update gives a factor inside the bounds that round-trips through its dict."""
    updated = update_calibration(
        calibration, stats, reported, baseline_tokens=baseline, weight=weight
    )
    assert 0.25 <= updated.factor <= 4.0
    assert math.isfinite(updated.factor)
    assert updated.samples in (calibration.samples, calibration.samples + 1)
    assert Calibration.from_dict(updated.to_dict()) == updated


def test_a_low_factor_learned_on_json_is_not_applied_to_text() -> None:
    """A factor below 1 learned on tool output (JSON) lowers an estimate of the same mix; the
    text of content that is mostly text (a summary that replaced the tool output) is of a kind
    the calibration never measured, and is sized at UNLEARNED_FACTOR: above the plain estimate,
    never below it."""
    json_stats = CharStats(text_chars=400, json_chars=100_000)
    text_stats = CharStats(text_chars=200_000, json_chars=1_000)
    calibration = Calibration()
    for _ in range(CALIBRATION_MIN_SAMPLES):
        calibration = update_calibration(calibration, json_stats, 35_000)
    assert calibration.factor < 0.75
    plain_text = estimate_stats_tokens(text_stats)
    applied_text = calibrated_estimate(plain_text, calibration, text_stats)
    assert applied_text > plain_text
    # the JSON and the little text that goes with it in the learned mix keep the factor
    assert calibration.json_share is not None
    matched = 500 / calibration.json_share
    factor = min(1.0, calibration.factor * (1 + LOW_SIDE_MARGIN))
    unlearned = 50_000 + 500 - matched
    assert applied_text == math.ceil(factor * matched + UNLEARNED_FACTOR * unlearned)
    plain_json = estimate_stats_tokens(json_stats)
    assert calibrated_estimate(plain_json, calibration, json_stats) < 0.8 * plain_json


def test_a_factor_learned_on_text_sizes_new_json_at_the_unlearned_factor() -> None:
    """The other way round: a factor learned on prose is applied to the prose part only; a large
    tool output (JSON) it never measured is sized at UNLEARNED_FACTOR until reported."""
    calibration = Calibration(factor=1.2, samples=5, json_share=0.0)
    stats = CharStats(text_chars=40_000, json_chars=40_000)  # 10K text, 20K JSON
    plain = estimate_stats_tokens(stats)
    assert calibrated_estimate(plain, calibration, stats) == math.ceil(
        1.2 * 10_000 + UNLEARNED_FACTOR * 20_000
    )
    # the next report teaches the new mix, and the factor applies to all of it again
    learned = update_calibration(calibration, stats, 24_000)
    assert calibrated_estimate(plain, learned, stats) == math.ceil(
        min(1.0, 0.8 * (1 + LOW_SIDE_MARGIN)) * 30_000
    )


def test_within_the_tolerance_the_factor_applies_to_all_content() -> None:
    """Small drifts of the mix (consecutive calls) keep the learned factor for everything."""
    calibration = Calibration(factor=0.7, samples=5, json_share=0.9)
    stats = CharStats(text_chars=4 * 3_500, json_chars=2 * 6_500)  # JSON share 0.65 (−0.25)
    assert learned_mix_tokens(calibration, stats) == pytest.approx(10_000)
    assert calibrated_estimate(estimate_stats_tokens(stats), calibration, stats) == math.ceil(
        0.7 * (1 + LOW_SIDE_MARGIN) * 10_000
    )


def test_calibration_round_trips_its_json_share_and_old_files_load() -> None:
    """json_share is saved and restored; a saved calibration without it still loads."""
    calibration = Calibration(factor=0.8, samples=3, json_share=0.9)
    assert Calibration.from_dict(calibration.to_dict()) == calibration
    assert Calibration.from_dict({"factor": 0.8, "samples": 3}).json_share is None
    with pytest.raises(ContentError, match="json_share"):
        Calibration.from_dict({"factor": 0.8, "samples": 3, "json_share": 2})

"""Tips that follow the ladder (SPEC §7): one band each, never overlapping.

=================== ============================== ==================================
tip                 band (with thresholds)          band (fallback, no thresholds)
=================== ============================== ==================================
``compress-intro``  warn ≤ t < auto                 50 % ≤ t < 80 % of the window
``context-high``    auto ≤ t < hard                 80 % ≤ t < 95 %
``context-critical`` t ≥ hard                        t ≥ 95 %
=================== ============================== ==================================

Tips receive the thresholds from their caller; they never compute them. How often a tip may be
shown (cooldowns) is the caller's business.
"""

from __future__ import annotations

from dataclasses import dataclass

from autocompact.errors import ConfigError
from autocompact.thresholds import (
    CompactionThresholds,
    Tier,
    check_thresholds,
    check_tokens,
    finite_number,
    parse_window,
)

__all__ = ["FALLBACK_BANDS", "TIP_IDS", "Tip", "format_tokens", "select_tip"]

TIP_IDS = ("compress-intro", "context-high", "context-critical")
FALLBACK_BANDS = (0.5, 0.8, 0.95)
"""Fractions of the window where the three tips start when no thresholds are given."""


@dataclass(frozen=True, kw_only=True)
class Tip:
    """A tip to show the user: its id, its text and the tier band it belongs to."""

    id: str
    message: str
    tier: Tier


def format_tokens(tokens: float) -> str:
    """A token count for people: ``980``, ``98.1K``, ``167K``, ``1M``, ``1.5M``.

    Raises:
        ConfigError: ``tokens`` is no finite number.
    """
    value = _finite(tokens)
    for size, suffix in ((1_000_000, "M"), (1_000, "K")):
        if abs(value) >= size:
            scaled = round(value / size, 1)
            return f"{scaled:g}{suffix}"
    return f"{round(value):d}"


def _finite(tokens: object) -> float:
    value = finite_number(tokens)
    if value is not None:
        return value
    raise ConfigError(
        f"tokens must be a finite number, got {type(tokens).__name__} {tokens!r:.60}",
        key="tokens",
    )


def select_tip(
    tokens: float,
    *,
    window: int,
    thresholds: CompactionThresholds | None = None,
    breaker_open: bool = False,
    held: bool = False,
    rescue_ran: bool = False,
) -> Tip | None:
    """The tip for a token count, or ``None`` below the first band.

    Args:
        tokens: the current (pre-send) count.
        window: the context window, for percentages.
        thresholds: the ladder from the caller; ``None`` falls back to 50 / 80 / 95 %.
        breaker_open: automatic compaction is paused (changes the advice of ``context-high``,
            and of ``context-critical`` where *hard* equals *auto*: no rescue runs there).
        held: a hold stops automatic compaction at this count, the hard rescue included (after
            a failed rescue or an ineffective compaction); ``context-critical`` then says so.
        rescue_ran: a forced compaction (the hard rescue, or a reactive one after a "too long"
            rejection) ran before the send this count follows. ``context-critical`` says one
            already ran only then: when the reply is what crossed *hard*, none did, and the
            tip says one runs before the next send.

    Raises:
        ConfigError: ``tokens`` is no finite count of 0 or more, ``window`` no window, or
            ``thresholds`` neither ``None`` nor a :class:`CompactionThresholds`.
    """
    tokens = check_tokens(tokens)
    window = parse_window(window)
    if thresholds is not None:
        check_thresholds(thresholds)
        warn, auto, hard = thresholds.warn, thresholds.auto, thresholds.hard
    else:
        warn, auto, hard = (fraction * window for fraction in FALLBACK_BANDS)
    pct = f"{100 * tokens / window:.0f}%" if window > 0 else "n/a"
    used = f"{format_tokens(tokens)} of {format_tokens(window)} tokens ({pct})"
    if tokens >= hard:
        if held or (breaker_open and hard <= auto):
            # No rescue runs at this count (SPEC §10.7): do not say one did.
            what = (
                "Automatic compaction is paused after a failed or ineffective one: none runs "
                "before the next send, and the oldest turns are left out of each request."
            )
        elif rescue_ran:
            what = (
                "A forced compaction already ran before this send, and another runs before the "
                "next one; if it fails, the oldest turns are left out of each request."
            )
        else:  # the reply crossed hard (the send was below it): no rescue has run yet
            what = (
                "A forced compaction runs before the next send; if it fails, the oldest turns "
                "are left out of each request."
            )
        return Tip(
            id="context-critical",
            tier=Tier.HARD,
            message=(
                f"Context is critical: {used}, at or past the hard limit of "
                f"{format_tokens(hard)}. {what} Run /compress, or /clear to start over."
            ),
        )
    if tokens >= auto:
        advice = (
            "Automatic compaction is paused after repeated failures: run /compress."
            if breaker_open
            else "Older turns will be summarized before the next send."
        )
        return Tip(
            id="context-high",
            tier=Tier.AUTO,
            message=(
                f"Context is high: {used}, past the auto-compaction threshold of "
                f"{format_tokens(auto)}. {advice}"
            ),
        )
    if tokens >= warn:
        return Tip(
            id="compress-intro",
            tier=Tier.WARN,
            message=(
                f"Context is filling up: {used}. autocompact will summarize older turns at "
                f"{format_tokens(auto)}; run /compress to do it now, with instructions if you like."
            ),
        )
    return None

"""The breaker and the hold: when an automatic side query may run, and what an attempt costs.

Pure, and shared by the chat sessions and ``replay`` so both follow one rule (SPEC §5, §10.2,
§10.3, §10.7):

- an unforced (auto) or reactive failure adds 1 to the breaker's count; a hard-rescue failure
  adds 1 only where *hard* equals *auto* (small windows, where every automatic attempt is a
  "hard" one); a manual failure adds nothing;
- an *ineffective* compaction (automatic, hard or reactive, leaving the count at or above
  *warn*) is kept but counts like a failure, and starts a **hold**;
- a clearing that stood while the summary after it failed counts the summary's failure;
- a failed forced rescue (hard or reactive) starts a hold too;
- during a hold no automatic side query (auto or hard) runs until the count has grown by
  :data:`HOLD_GROWTH_SHARE` of the window past where the hold began; the guarantee's trimming
  carries every request meanwhile. A manual ``/compress`` is never blocked and ends the hold;
- an effective success resets the count and ends the hold.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from autocompact.compaction.plan import CompressionInfo, CompressionStatus, CompressionTrigger
from autocompact.thresholds import MAX_CONSECUTIVE_FAILURES, CompactionThresholds

__all__ = ["HOLD_GROWTH_SHARE", "BreakerState", "automatic_trigger", "record_attempt"]

HOLD_GROWTH_SHARE = 0.1
"""How much the count must grow (share of the window) before a held session tries again."""


@dataclass(frozen=True, kw_only=True)
class BreakerState:
    """The failure accounting between attempts.

    Attributes:
        consecutive_failures: counted failures in a row (3 open the breaker).
        hold_until: no automatic side query while the count is below this (``None``: no hold).
    """

    consecutive_failures: int = 0
    hold_until: int | None = None

    @property
    def breaker_open(self) -> bool:
        """Whether the breaker stops unforced attempts."""
        return self.consecutive_failures >= MAX_CONSECUTIVE_FAILURES

    def held(self, tokens: int) -> bool:
        """Whether a hold stops automatic attempts at this count."""
        return self.hold_until is not None and tokens < self.hold_until


def automatic_trigger(
    tokens: int, thresholds: CompactionThresholds, state: BreakerState
) -> CompressionTrigger | None:
    """The automatic attempt to make before a send at ``tokens``, if any.

    At or above *hard*: the hard rescue (bypasses the breaker, not the hold). At or above *auto*:
    an unforced attempt, unless the breaker is open or a hold is on. Below: none.
    """
    if tokens < thresholds.auto or state.held(tokens):
        return None
    if tokens >= thresholds.hard:
        if thresholds.hard == thresholds.auto and state.breaker_open:
            return None  # small window: this "hard" attempt is an automatic one (SPEC §10.7)
        return CompressionTrigger.HARD
    if state.breaker_open:
        return None
    return CompressionTrigger.AUTO


def _counts(trigger: CompressionTrigger, thresholds: CompactionThresholds) -> bool:
    if trigger in (CompressionTrigger.AUTO, CompressionTrigger.REACTIVE):
        return True
    return trigger is CompressionTrigger.HARD and thresholds.hard == thresholds.auto


def record_attempt(
    state: BreakerState, info: CompressionInfo, thresholds: CompactionThresholds
) -> BreakerState:
    """The state after one attempt (see the module docstring for the rules)."""
    if info.status is CompressionStatus.NOOP:
        return state
    trigger = info.trigger
    hold_at = round(info.new_token_count + HOLD_GROWTH_SHARE * thresholds.window)
    if trigger is CompressionTrigger.MANUAL:
        if info.status is CompressionStatus.COMPRESSED and info.summary_failure is None:
            return BreakerState()
        return replace(state, hold_until=None)
    counted = state.consecutive_failures + (1 if _counts(trigger, thresholds) else 0)
    forced = trigger in (CompressionTrigger.HARD, CompressionTrigger.REACTIVE)
    if info.status is CompressionStatus.COMPRESSED:
        if info.ineffective:  # counts like a failure whatever the trigger (SPEC §10.2)
            return BreakerState(
                consecutive_failures=state.consecutive_failures + 1, hold_until=hold_at
            )
        if info.summary_failure is not None:
            return BreakerState(
                consecutive_failures=counted, hold_until=hold_at if forced else None
            )
        return BreakerState()
    return BreakerState(
        consecutive_failures=counted, hold_until=hold_at if forced else state.hold_until
    )

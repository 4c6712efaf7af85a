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
- an attempt that made no side query because none could buy room (a no-op judged ineffective,
  design decision 70) starts a hold and counts nothing;
- during a hold no automatic side query (auto or hard) runs until the count has grown by
  :data:`HOLD_GROWTH_SHARE` of the window past where the hold began; the guarantee's trimming
  carries every request meanwhile. A manual ``/compress`` is never blocked and ends the hold;
- an effective success resets the count and ends the hold;
- a compaction whose result the model then refused (a proxy's upstream rejected the compacted
  request and took the uncompacted one) counts as that attempt failed (:func:`record_refused`).

Room for growth (design decision 63, SPEC §10.2 extended): a compaction aims to leave the count
at most ``auto − expected growth`` (:meth:`GrowthLog.expected_growth`: the session's typical
pace, :data:`CLOSE_COMPACTIONS` times the median growth of its recent calls), so that its own
pace does not bring the next compaction within :data:`CLOSE_COMPACTIONS` calls. When it is
needed again sooner all the same (a burst no recent call foretold, or no more room to buy: the
system prompt and tools fill the rest), the earlier compaction is judged **outgrown**: reported,
counted like an ineffective one, and its hold measured from the count it left
(:func:`record_outgrown`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from autocompact.averages import median
from autocompact.compaction.plan import CompressionInfo, CompressionStatus, CompressionTrigger
from autocompact.errors import ContentError
from autocompact.thresholds import MAX_CONSECUTIVE_FAILURES, CompactionThresholds

__all__ = [
    "CLOSE_COMPACTIONS",
    "GROWTH_CALLS",
    "HOLD_GROWTH_SHARE",
    "BreakerState",
    "GrowthLog",
    "automatic_trigger",
    "growth_from_dict",
    "record_attempt",
    "record_outgrown",
    "record_refused",
]

HOLD_GROWTH_SHARE = 0.1
"""How much the count must grow (share of the window) before a held session tries again."""

CLOSE_COMPACTIONS = 5
"""A compaction should buy room for at least this many calls; one needed again sooner (and not
already judged ineffective) is judged outgrown."""

GROWTH_CALLS = 20
"""How many recent calls' growth :class:`GrowthLog` remembers."""


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
    state: BreakerState,
    info: CompressionInfo,
    thresholds: CompactionThresholds,
    *,
    pending_tokens: int = 0,
) -> BreakerState:
    """The state after one attempt (see the module docstring for the rules).

    ``pending_tokens``: the size of the message being sent when the attempt ran (the attempt's
    counts are of the history without it). A hold starts from the pre-send count, the one
    :func:`automatic_trigger` is given, so that message is part of where it begins.
    """
    hold_at = round(info.new_token_count + pending_tokens + HOLD_GROWTH_SHARE * thresholds.window)
    if info.status is CompressionStatus.NOOP:
        if info.ineffective:  # no side query could buy room: hold, count nothing (decision 70)
            return replace(state, hold_until=hold_at)
        return state
    trigger = info.trigger
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


def record_refused(
    state: BreakerState,
    attempts: Sequence[CompressionInfo],
    thresholds: CompactionThresholds,
    *,
    tokens: int = 0,
) -> BreakerState:
    """The state after ``attempts`` (one step's, in order) whose compacted history the model
    refused: each compaction counts as the same attempt failed, the others as they are
    (:func:`record_attempt`). ``tokens``: the step's pre-send count, where a hold begins."""
    for info in attempts:
        if info.status is CompressionStatus.COMPRESSED:
            info = replace(
                info,
                status=CompressionStatus.COMPRESSION_FAILED_PROVIDER_ERROR,
                new_token_count=info.original_token_count,
                ineffective=False,
                summary_failure=None,
            )
        pending = max(0, tokens - info.original_token_count)
        state = record_attempt(state, info, thresholds, pending_tokens=pending)
    return state


@dataclass(frozen=True, kw_only=True)
class GrowthLog:
    """How fast the count grows, and how long ago the last compaction was (pure, in memory).

    Attributes:
        recent: the growth of the count at each recent call (newest last, at most
            :data:`GROWTH_CALLS`; a call whose count fell counts 0).
        last_count: the count the previous call was sent with (after any compaction).
        since_compaction: calls made since the last effective automatic compaction (``None``:
            none to judge; it was ineffective, outgrown, manual, or long ago).
        compacted_to: the count that compaction left.
    """

    recent: tuple[int, ...] = ()
    last_count: int | None = None
    since_compaction: int | None = None
    compacted_to: int = 0

    def before_send(self, count: int) -> GrowthLog:
        """A new call's pre-send count: note how much the count grew since the previous one."""
        recent = self.recent
        if self.last_count is not None:
            recent = (*recent, max(0, count - self.last_count))[-GROWTH_CALLS:]
        since = self.since_compaction
        if since is not None:
            since = since + 1 if since + 1 < CLOSE_COMPACTIONS else None
        return replace(self, recent=recent, last_count=count, since_compaction=since)

    def after_compaction(self, info: CompressionInfo, count: int) -> GrowthLog:
        """The count after an attempt; an effective automatic compaction starts the clock."""
        if info.status is not CompressionStatus.COMPRESSED:
            return self
        effective = (
            info.trigger is not CompressionTrigger.MANUAL
            and not info.ineffective
            and info.summary_failure is None  # already counted as a failure
        )
        return replace(
            self,
            last_count=count,
            since_compaction=0 if effective else None,
            compacted_to=count,
        )

    def expected_growth(self) -> int:
        """The room a compaction should leave below *auto*: the session's typical pace,
        :data:`CLOSE_COMPACTIONS` times the median growth of the recent calls (0 before any
        call was seen). A burst beyond the typical pace is judged after the fact (outgrown)."""
        if not self.recent:
            return 0
        return round(CLOSE_COMPACTIONS * median(self.recent))

    @property
    def outgrown(self) -> bool:
        """Whether a compaction needed now would follow an effective one too closely."""
        return self.since_compaction is not None

    def judged(self) -> GrowthLog:
        """The log once the last compaction was judged outgrown (it is judged only once)."""
        return replace(self, since_compaction=None)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``GuardState``'s ``growth`` field; a store keeps it with each turn)."""
        return {
            "recent": list(self.recent),
            "last_count": self.last_count,
            "since_compaction": self.since_compaction,
            "compacted_to": self.compacted_to,
        }


def growth_from_dict(data: object, where: str = "autocompact state field") -> GrowthLog:
    """A growth log from its JSON form (``None``: a fresh log, as in states written before it).

    Raises:
        ContentError: a field is not a count; the message names it (``where`` says whose).
    """
    if data is None:
        return GrowthLog()

    def bad(field_name: str, value: object) -> ContentError:
        return ContentError(f"{where} 'growth.{field_name}' must be a count ≥ 0, got {value!r}")

    if not isinstance(data, Mapping):
        raise ContentError(f"{where} 'growth' must be an object, got {data!r}")

    def count(field_name: str, value: object, *, optional: bool) -> int | None:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise bad(field_name, value)
        return value

    recent = data.get("recent", [])
    if not isinstance(recent, list):
        raise bad("recent", recent)
    values = tuple(count("recent", v, optional=False) or 0 for v in recent)
    return GrowthLog(
        recent=values[-GROWTH_CALLS:],
        last_count=count("last_count", data.get("last_count"), optional=True),
        since_compaction=count("since_compaction", data.get("since_compaction"), optional=True),
        compacted_to=count("compacted_to", data.get("compacted_to", 0), optional=False) or 0,
    )


def record_outgrown(
    state: BreakerState, log: GrowthLog, thresholds: CompactionThresholds
) -> BreakerState:
    """The state once the last compaction is judged outgrown: counted like an ineffective one,
    with its hold measured from the count it left (SPEC §10.2; design decision 63)."""
    return BreakerState(
        consecutive_failures=state.consecutive_failures + 1,
        hold_until=round(log.compacted_to + HOLD_GROWTH_SHARE * thresholds.window),
    )

"""The replay's options and result records (rows, error summaries, policy results). Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Literal

from autocompact.averages import fmean, median
from autocompact.compaction.plan import Summarizer
from autocompact.errors import ConfigError
from autocompact.estimation import Calibration
from autocompact.thresholds import DEFAULT_IMAGE_TOKEN_ESTIMATE, CompactionThresholds, Tier

__all__ = [
    "ESTIMATORS",
    "POLICIES",
    "CallRow",
    "ErrorSummary",
    "FileReport",
    "PolicyEvent",
    "PolicyName",
    "PolicyResult",
    "ReplayOptions",
    "summarize_errors",
]

ESTIMATORS = ("cold", "warm", "calibrated", "calibrated_applied")
PolicyName = Literal["ladder", "legacy"]
POLICIES: tuple[PolicyName, ...] = ("ladder", "legacy")


@dataclass(frozen=True, kw_only=True)
class ReplayOptions:
    """How to replay.

    Attributes:
        window: the context window to simulate, in tokens.
        failure_rate: the probability that one summary fails, 0 to 1.
        seed: seeds the failures (the same seed gives the same run).
        image_token_estimate: tokens per image or document.
        summarizer: writes the offline summary; the extractive summarizer when ``None``.
    """

    window: int
    failure_rate: float = 0.0
    seed: int = 0
    image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE
    summarizer: Summarizer | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.failure_rate <= 1:
            raise ConfigError(
                f"failure rate must be between 0 and 1, got {self.failure_rate}",
                key="failure_rate",
            )
        if self.window <= 0:
            raise ConfigError(f"window must be a positive number of tokens, got {self.window}")


@dataclass(frozen=True, kw_only=True)
class CallRow:
    """One recorded call: what was reported and what each estimator said before it.

    Attributes:
        call: 1-based call number.
        reported: the prompt size the provider reported.
        estimate_cold, estimate_warm: the plain cold and warm estimates.
        estimate_calibrated: the calibration's own estimate (two-sided).
        estimate_calibrated_applied: what the engine uses (:func:`calibrated_estimate`).
        tier: the tier of the reported size on the simulated window's ladder.
        compacted_before: the recorded agent compacted just before this call.
    """

    call: int
    reported: int
    estimate_cold: int
    estimate_warm: int
    estimate_calibrated_applied: int
    estimate_calibrated: int
    tier: Tier
    compacted_before: bool = False

    def estimate(self, name: str) -> int:
        """The estimate of one estimator (a name in :data:`ESTIMATORS`)."""
        value: int = getattr(self, f"estimate_{name}")
        return value

    def as_json(self) -> dict[str, Any]:
        """The row as ``--json`` prints it."""
        return {
            "call": self.call,
            "reported": self.reported,
            "estimate_cold": self.estimate_cold,
            "estimate_warm": self.estimate_warm,
            "estimate_calibrated": self.estimate_calibrated,
            "estimate_calibrated_applied": self.estimate_calibrated_applied,
            "compacted_before": self.compacted_before,
            "tier": self.tier.value,
        }


@dataclass(frozen=True, kw_only=True)
class ErrorSummary:
    """Relative errors of one estimator over a set of calls (fractions; ``None``: no calls).

    Attributes:
        count: calls summarized.
        mean_error, median_error: signed, ``(estimate − reported) / reported``.
        p95_abs_error: the 95th percentile of the absolute error.
        within_10pct, within_30pct: the share of calls within ±10 % and ±30 %.
    """

    count: int
    mean_error: float | None
    median_error: float | None
    p95_abs_error: float | None
    within_10pct: float | None
    within_30pct: float | None

    def as_json(self) -> dict[str, Any]:
        """The summary as ``--json`` prints it."""
        return {
            "mean_error": self.mean_error,
            "median_error": self.median_error,
            "p95_abs_error": self.p95_abs_error,
            "within_10pct": self.within_10pct,
            "within_30pct": self.within_30pct,
        }


def summarize_errors(pairs: Sequence[tuple[int, int]]) -> ErrorSummary:
    """Summarize ``(estimate, reported)`` pairs (pairs with a reported size of 0 are skipped)."""
    errors = [(est - rep) / rep for est, rep in pairs if rep > 0]
    if not errors:
        return ErrorSummary(
            count=0,
            mean_error=None,
            median_error=None,
            p95_abs_error=None,
            within_10pct=None,
            within_30pct=None,
        )
    absolute = sorted(abs(e) for e in errors)
    # Nearest-rank percentile: the smallest value with at least 95 % of the errors at or below.
    p95 = absolute[max(0, math.ceil(0.95 * len(absolute)) - 1)]
    return ErrorSummary(
        count=len(errors),
        mean_error=fmean(errors),
        median_error=median(errors),
        p95_abs_error=p95,
        within_10pct=sum(a <= 0.10 for a in absolute) / len(errors),
        within_30pct=sum(a <= 0.30 for a in absolute) / len(errors),
    )


@dataclass(frozen=True, kw_only=True)
class PolicyEvent:
    """Something a policy did before or at one call.

    Attributes:
        call: 1-based call number.
        kind: ``compacted``, ``failed``, ``trimmed``, ``oversized``, ``refused`` (a message
            alone larger than the window: the engine refuses it before sending) or ``outgrown``
            (the previous compaction judged outgrown: needed again within 5 calls) or
            ``no_room`` (no side query: no summary could buy room, design decision 70).
        trigger: ``auto``, ``hard`` or ``reactive`` for compactions.
        tokens_before, tokens_after: the simulated size before and after.
    """

    call: int
    kind: Literal["compacted", "failed", "trimmed", "oversized", "refused", "outgrown", "no_room"]
    trigger: str | None
    tokens_before: int
    tokens_after: int


@dataclass(frozen=True, kw_only=True)
class PolicyResult:
    """What one policy did on a transcript's recorded growth.

    Attributes:
        name: ``ladder`` or ``legacy``.
        sizes: the size of the request sent at each call (after any compaction or trim).
        size_calls: the call each size belongs to (a refused call has no size, so ``sizes``
            can be shorter than the calls).
        events: compactions, failures, trims and oversized requests, in order.
        compactions: successful compactions.
        failed_attempts: compaction attempts that failed.
        side_queries: summary requests made (clearing alone makes none).
        oversized_requests: requests sent over the window (the provider would reject them).
        refused_requests: requests the engine refuses before sending because one message alone
            (with the system prompt and tools) is larger than the window; never counted as
            oversized, since nothing is sent.
        peak_prompt_tokens: the largest request sent.
        prompt_tokens_sent: the prompt tokens of every accepted request plus every side query.
        mean_fill_at_compaction: the mean of size ÷ window when a compaction was triggered
            (``None`` when none was).
        ineffective_compactions: compactions that left the count at or above *warn*.
        outgrown_compactions: effective compactions judged outgrown after the fact: another
            was needed fewer than 5 calls later (reported and counted like ineffective ones).
        no_room_skips: attempts that made no side query because no summary could buy room
            (design decision 70): reported and held like an ineffective compaction.
        compaction_calls: the call before which each compaction happened.
        orphaned_pairs: tool results sent without their call in the same request (distinct
            ids; a compaction's cut or a trim must never orphan one).
        close_compactions: consecutive compactions < 5 calls apart, the first neither
            ineffective nor reported outgrown (thrash nobody was told about).
        cache_write_tokens, cache_read_tokens: prompt-cache tokens of the main requests: a
            request that begins with the previous one unchanged reads it from the cache and
            writes the rest; after a compaction or a trimmed request only the system prompt
            and tools are read.
    """

    name: str
    sizes: tuple[int, ...]
    events: tuple[PolicyEvent, ...]
    compactions: int
    failed_attempts: int
    side_queries: int
    oversized_requests: int
    peak_prompt_tokens: int
    prompt_tokens_sent: int
    mean_fill_at_compaction: float | None
    refused_requests: int = 0
    ineffective_compactions: int = 0
    outgrown_compactions: int = 0
    no_room_skips: int = 0
    orphaned_pairs: int = 0
    compaction_calls: tuple[int, ...] = ()
    close_compactions: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    size_calls: tuple[int, ...] = ()

    @property
    def calls_between_compactions(self) -> tuple[int, ...]:
        """The number of calls between each two consecutive compactions."""
        calls = self.compaction_calls
        return tuple(b - a for a, b in pairwise(calls))

    def as_json(self) -> dict[str, Any]:
        """The metrics as ``--json`` prints them."""
        gaps = self.calls_between_compactions
        return {
            "ineffective_compactions": self.ineffective_compactions,
            "outgrown_compactions": self.outgrown_compactions,
            "no_room_skips": self.no_room_skips,
            "mean_calls_between_compactions": fmean(gaps) if gaps else None,
            "min_calls_between_compactions": min(gaps) if gaps else None,
            "close_compactions": self.close_compactions,
            "orphaned_pairs": self.orphaned_pairs,
            "cache_write_tokens": self.cache_write_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "compactions": self.compactions,
            "failed_attempts": self.failed_attempts,
            "side_queries": self.side_queries,
            "oversized_requests": self.oversized_requests,
            "refused_requests": self.refused_requests,
            "peak_prompt_tokens": self.peak_prompt_tokens,
            "prompt_tokens_sent": self.prompt_tokens_sent,
            "mean_fill_at_compaction": self.mean_fill_at_compaction,
        }


@dataclass(frozen=True, kw_only=True)
class FileReport:
    """The replay of one transcript.

    Attributes:
        file, format: where it came from.
        window: the simulated window; ``thresholds`` its ladder.
        rows: one per recorded call.
        baseline_tokens: what the first call showed beyond the visible content.
        estimation: the error summary of each estimator in :data:`ESTIMATORS`.
        policies: ``ladder`` and ``legacy``.
        calibration: what the session had learned after its last call.
        recorded_compactions: the calls (1-based) the recorded agent compacted before.
    """

    file: str
    format: str
    window: int
    thresholds: CompactionThresholds
    rows: tuple[CallRow, ...]
    baseline_tokens: int
    estimation: dict[str, ErrorSummary]
    policies: dict[str, PolicyResult]
    calibration: Calibration
    recorded_compactions: tuple[int, ...] = ()

    def as_json(self) -> dict[str, Any]:
        """The object ``--json`` prints for this file (exactly the documented keys)."""
        return {
            "file": self.file,
            "format": self.format,
            "window": self.window,
            "calls": len(self.rows),
            "estimation": {name: self.estimation[name].as_json() for name in ESTIMATORS},
            "policies": {name: self.policies[name].as_json() for name in POLICIES},
            "rows": [row.as_json() for row in self.rows],
        }

"""Replay a recorded transcript through the engine: how good was the estimate, and what would each
compaction policy have done on the same growth. Pure (no I/O beyond the reader, no printing).

**Estimation.** For every recorded call, against the prompt size the provider reported:

* *cold*: the whole live context by the plain counter (SPEC §4), plus a *baseline* for what
  the transcript does not show (system prompt, tool schemas, hidden reminders) learned from the
  first call: ``baseline = reported₁ − plain(context₁)``;
* *warm*: the previous call's reported size plus the plain estimate of the messages added since
  (the engine's main path); after a recorded compaction, the cold estimate;
* *calibrated*: the session's :class:`Calibration` applied to the cold estimate, learned only
  from the calls before the one estimated (:func:`calibrated_tokens`, two-sided): how well the
  calibration knows this tokenizer;
* *calibrated_applied*: what the engine actually uses (:func:`calibrated_estimate`): only
  raising the cold estimate until the calibration learned from enough reports, then the
  clamped factor both ways with a margin on the low side (issue 11).

Summaries cover every call after the first (the first defines the baseline). Errors are
fractions: ``(estimate − reported) / reported``.

**Policies.** Both run on the same *recorded growth*: the simulated size of call *i* is the
previous simulated size plus ``reported_i − reported_{i−1}`` (across a compaction the agent
made, the calibrated estimate of the messages added instead, so the recorded compaction is
replayed as if it had not happened). When a policy compacts, the engine's own
:func:`compress_flow` (tool-output clearing, split point, validation) runs on the real history
with an offline summary (:func:`extractive_summary`); the simulated size becomes the old size
minus the calibrated size of what was removed plus that of what was added. Each summary fails
with probability ``failure_rate`` (seeded).

* ``ladder``: SPEC §5 — warm pre-send estimate; at or above hard a forced rescue (bypasses the
  breaker, a failure adds nothing); at or above auto an unforced attempt while fewer than 3
  failures in a row; still at or above hard, the request is trimmed (the engine's guarantee);
  a request over the window triggers a reactive compaction and one retry.
* ``legacy``: one threshold at 70 % of the window checked against the one-turn-stale reported
  size; one failure disables automatic compaction for good; only the reactive retry remains.
"""

from __future__ import annotations

from collections.abc import Callable

from autocompact.replay.estimation import EstimationPass, estimate_calls, iter_rows
from autocompact.replay.policies import simulate_policies, simulate_policy
from autocompact.replay.records import (
    ESTIMATORS,
    POLICIES,
    CallRow,
    ErrorSummary,
    FileReport,
    PolicyEvent,
    PolicyName,
    PolicyResult,
    ReplayOptions,
    summarize_errors,
)
from autocompact.thresholds import compute_thresholds
from autocompact.transcripts import Transcript

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
    "iter_rows",
    "replay",
    "simulate_policy",
    "summarize_errors",
]


def replay(
    transcript: Transcript,
    options: ReplayOptions,
    *,
    on_row: Callable[[CallRow], None] | None = None,
) -> FileReport:
    """Replay one transcript: estimation rows and summaries, and both policies.

    Args:
        transcript: what to replay.
        options: the window, failure rate and seed.
        on_row: called with each estimation row as soon as it is computed.
    """
    result = EstimationPass()
    for item in estimate_calls(transcript, options, result):
        if on_row is not None:
            on_row(item.row)
    rows = tuple(item.row for item in result.items)
    scored = rows[1:]  # the first call defines the baseline
    estimation = {
        name: summarize_errors([(row.estimate(name), row.reported) for row in scored])
        for name in ESTIMATORS
    }
    policies = simulate_policies(transcript, options, result.items)
    return FileReport(
        file=transcript.path,
        format=transcript.format,
        window=options.window,
        thresholds=compute_thresholds(options.window),
        rows=rows,
        baseline_tokens=result.baseline,
        estimation=estimation,
        policies=policies,
        calibration=result.final,
        recorded_compactions=tuple(row.call for row in rows if row.compacted_before),
    )

"""Calibration applied both ways, against real usage on every recorded session (issue 11).

Replay's ``calibrated_applied`` is the cold estimate the engine actually applies. Pooled over
``../shared/data`` (333 scored calls): 97.6 % within ±10 % of the reported size. The only calls
more than 10 % under after the first five are the two first calls after a compaction recorded
in the transcript, where even the plain estimate is 13–16 % low (the agent re-attached content
the transcript does not show); they are listed, not hidden.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autocompact.replay.estimation import estimate_calls
from autocompact.replay.records import ReplayOptions
from autocompact.transcripts import read_transcript

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
FILES = sorted(DATA.glob("**/*.jsonl*")) if DATA.is_dir() else []

pytestmark = pytest.mark.skipif(not FILES, reason="../shared/data is not present")


def _scored() -> list[tuple[str, int, float, bool, float]]:
    """(file, call index, error of calibrated_applied, after a recorded compaction, cold error)."""
    scored = []
    for path in FILES:
        transcript = read_transcript(path)
        for index, item in enumerate(estimate_calls(transcript, ReplayOptions(window=200_000))):
            row = item.row
            if index == 0 or row.reported <= 0:
                continue
            error = (row.estimate_calibrated_applied - row.reported) / row.reported
            cold = (row.estimate_cold - row.reported) / row.reported
            scored.append((path.name, index, error, row.compacted_before, cold))
    return scored


def test_applied_estimate_within_10_percent_on_90_percent_of_calls() -> None:
    """Pooled over the recorded sessions, ≥ 90 % of calls are within ±10 % (measured 97.6 %)."""
    scored = _scored()
    within = sum(abs(error) <= 0.10 for _, _, error, _, _ in scored)
    assert len(scored) >= 300
    assert within / len(scored) >= 0.90


def test_no_call_after_the_fifth_is_more_than_10_percent_under_except_where_plain_is() -> None:
    """After the first five calls, an applied estimate more than 10 % under only happens where
    the plain estimate itself is as low (content the transcript does not show): calibration
    never makes an estimate more than 10 % low."""
    late_under = [s for s in _scored() if s[1] >= 5 and s[2] < -0.10]
    assert all(cold <= error + 1e-9 for _, _, error, _, cold in late_under), late_under
    assert len(late_under) <= 2

"""Calibration applied both ways, against real usage on every recorded session (issue 11).

Replay's ``calibrated_applied`` is the cold estimate the engine actually applies. Pooled over
``../shared/data`` (333 scored calls): 98.2 % within ±10 % of the reported size, and no call after
the first five more than 10 % under (worst −8.6 %). The two first calls after a compaction
recorded in the transcript were 13–16 % under while a factor learned on tool output was applied
to the summary; content of a mix the calibration has not measured is now sized at
``UNLEARNED_FACTOR`` (−2.4 % and −5.0 %).
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
    """Pooled over the recorded sessions, ≥ 90 % of calls are within ±10 % (measured 98.2 %)."""
    scored = _scored()
    within = sum(abs(error) <= 0.10 for _, _, error, _, _ in scored)
    assert len(scored) >= 300
    assert within / len(scored) >= 0.90


def test_no_call_after_the_fifth_is_more_than_10_percent_under() -> None:
    """After the first five calls, no applied estimate is more than 10 % under the reported size
    (measured worst: −8.6 %), including the first call after each recorded compaction."""
    scored = _scored()
    late_under = [s for s in scored if s[1] >= 5 and s[2] < -0.10]
    assert late_under == []
    after_compaction = [s for s in scored if s[3]]
    assert len(after_compaction) >= 2  # the recorded compactions are in the data and scored
    assert all(error >= -0.10 for _, _, error, _, _ in after_compaction), after_compaction

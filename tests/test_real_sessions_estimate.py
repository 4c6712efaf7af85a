"""The cold estimate (SPEC §4) against real provider usage on recorded Claude Code sessions.

For every API call in ``../shared/data/claude-code-sessions`` the engine estimates the
conversation sent before that call (``estimate_content_tokens``), plus a system/tool baseline
taken from the session's first call (reported size − estimate of what preceded it, as the data
README says), and compares it with the reported prompt size (input + cache_creation +
cache_read, each ``message.id`` once; ``toolUseResult`` is a UI copy and is not read).

Measured (``pytest -s tests/test_real_sessions_estimate.py`` prints the table), 333 calls:

* overall mean error +16.5 %, median +16.4 %, 72 % of calls within ±30 %; the estimate errs
  high (function responses are counted as JSON at 2 characters a token, SPEC §4), which only
  makes compaction fire earlier;
* main sessions: 258c7280 mean +17.5 % (81 % within ±30 %), 4d5611e5 +14.6 % (62 %),
  subagent +12.9 % (100 %), tool_heavy +0.1 % (100 %): the SPEC's ±30 % holds on the mean;
* where ±30 % does NOT hold: the sub-agent conversations ``agent-a881341`` (2 calls, +57 %) and
  ``agent-a2898e3`` (+35 % mean, 18 % within): tool output dominated by escaped JSON that
  Claude tokenizes at more than 2 characters a token. Recorded here, not asserted.

Dropping thinking blocks from earlier turns changes the mean by under 1 point.
"""

from __future__ import annotations

import gzip
import json
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autocompact.content import Message
from autocompact.convert import from_anthropic_message
from autocompact.estimation import estimate_content_tokens

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "claude-code-sessions"
MAIN_SESSIONS = ("258c7280", "4d5611e5", "subagent", "tool_heavy")
KNOWN_CALLS = {"258c7280": 152, "4d5611e5": 139}

pytestmark = pytest.mark.skipif(
    not DATA.is_dir(),
    reason=f"real session data not found at {DATA} (CI keeps it beside the clone)",
)


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def load_calls(path: Path) -> list[tuple[int, tuple[Message, ...]]]:
    """Each API call of a transcript: (reported prompt size, the conversation sent before it).

    One response is split over several lines sharing ``message.id`` (tool results may be
    recorded in between): the call is counted once, at its first line, and each line's blocks
    join the history in order (estimates are additive, so the split does not matter).
    A ``compact_boundary`` starts a new conversation (the summary line that follows opens it).
    """
    history: list[Message] = []
    names: dict[str, str] = {}
    seen: set[str] = set()
    calls: list[tuple[int, tuple[Message, ...]]] = []
    for record in _lines(path):
        kind = record.get("type")
        if kind == "system" and record.get("subtype") == "compact_boundary":
            history.clear()
            continue
        message = record.get("message")
        if kind not in ("user", "assistant") or not isinstance(message, dict):
            continue
        if kind == "assistant":
            if message.get("model") == "<synthetic>":
                continue
            message_id = str(message.get("id"))
            if message_id not in seen:
                seen.add(message_id)
                usage = message.get("usage") or {}
                real = (
                    int(usage.get("input_tokens") or 0)
                    + int(usage.get("cache_creation_input_tokens") or 0)
                    + int(usage.get("cache_read_input_tokens") or 0)
                )
                calls.append((real, tuple(history)))
        history.append(from_anthropic_message(message, tool_names=names))
    return calls


def _transcripts() -> list[Path]:
    if not DATA.is_dir():
        return []
    main = sorted(DATA.glob("*.jsonl.gz"))
    agents = sorted(
        p for p in DATA.glob("*/subagents/agent-*.jsonl.gz") if "acompact" not in p.name
    )
    return main + agents


def _short(path: Path) -> str:
    stem = path.name.removesuffix(".jsonl.gz")
    return stem[:8] if len(stem) > 30 else stem


@pytest.fixture(scope="module")
def errors() -> dict[str, list[float]]:
    """Relative error (estimate − real) / real of every call but each session's first."""
    result: dict[str, list[float]] = {}
    for path in _transcripts():
        calls = load_calls(path)
        if len(calls) < 2:
            continue
        first_real, first_history = calls[0]
        baseline = first_real - estimate_content_tokens(first_history)
        result[_short(path)] = [
            (baseline + estimate_content_tokens(history) - real) / real
            for real, history in calls[1:]
            if real > 0
        ]
    return result


def _within(values: list[float], bound: float = 0.30) -> float:
    return sum(abs(v) <= bound for v in values) / len(values)


def test_report_the_error_distribution(errors: dict[str, list[float]]) -> None:
    """Print the per-session and overall error distribution (visible with pytest -s)."""
    assert errors, "no transcript with two or more calls"
    print("\nsession          calls    mean  median     min     max  within±30%")
    everything: list[float] = []
    for name, values in errors.items():
        everything += values
        print(
            f"{name:15} {len(values):6} {statistics.mean(values):+7.1%} "
            f"{statistics.median(values):+7.1%} {min(values):+7.1%} {max(values):+7.1%} "
            f"{_within(values):10.0%}"
        )
    print(
        f"{'all':15} {len(everything):6} {statistics.mean(everything):+7.1%} "
        f"{statistics.median(everything):+7.1%} {min(everything):+7.1%} "
        f"{max(everything):+7.1%} {_within(everything):10.0%}"
    )
    assert all(v > -1 for v in everything)


def test_each_message_id_is_one_call() -> None:
    """The loader counts each API response once: the README's call counts are reproduced."""
    for path in _transcripts():
        key = _short(path)
        if key in KNOWN_CALLS:
            assert len(load_calls(path)) == KNOWN_CALLS[key], key


def test_mean_error_within_30_percent_on_main_sessions(errors: dict[str, list[float]]) -> None:
    """On every main session the mean error of the cold estimate is within ±30 %."""
    present = [name for name in MAIN_SESSIONS if name in errors]
    assert present
    for name in present:
        assert abs(statistics.mean(errors[name])) <= 0.30, name


def test_overall_mean_and_share_within_30_percent(errors: dict[str, list[float]]) -> None:
    """Across all calls the mean error is within ±30 % and most calls (≥ 65 %) are too."""
    everything = [v for values in errors.values() for v in values]
    assert abs(statistics.mean(everything)) <= 0.30
    assert _within(everything) >= 0.65


def test_estimate_errs_high_on_average(errors: dict[str, list[float]]) -> None:
    """On these sessions the estimate errs high on average (compaction fires earlier, never
    later), and no call is underestimated by more than 30 %."""
    everything = [v for values in errors.values() for v in values]
    assert statistics.mean(everything) > 0
    assert min(everything) >= -0.30

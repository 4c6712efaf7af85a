"""Replay a recorded transcript through the engine: how good was the estimate, and what would each
compaction policy have done on the same growth. Pure (no I/O beyond the reader, no printing).

**Estimation.** For every recorded call, against the prompt size the provider reported:

* *cold*: the whole live context by the plain counter (SPEC §4), plus a *baseline* for what
  the transcript does not show (system prompt, tool schemas, hidden reminders) learned from the
  first call: ``baseline = reported₁ − plain(context₁)``;
* *warm*: the previous call's reported size plus the plain estimate of the messages added since
  (the engine's main path); after a recorded compaction, the cold estimate;
* *calibrated*: the cold estimate raised by the session's :class:`Calibration`, learned only
  from the calls before the one estimated (:func:`calibrated_estimate`: never below cold);
* *learned* (reported in the terminal only): the calibration's own two-sided estimate.

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

import math
import random
import statistics
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from autocompact.compaction.fallback import trim_request
from autocompact.compaction.plan import (
    CompressionStatus,
    CompressionTrigger,
    CompressOptions,
    Summarizer,
    compress_flow,
)
from autocompact.compaction.service import drive_flow
from autocompact.content import CharStats, Message
from autocompact.errors import ConfigError, ContentError
from autocompact.estimation import (
    Calibration,
    calibrated_estimate,
    calibrated_tokens,
    estimate_content_tokens,
    estimate_stats_tokens,
    update_calibration,
)
from autocompact.thresholds import (
    DEFAULT_IMAGE_TOKEN_ESTIMATE,
    DEFAULT_PCT,
    MAX_CONSECUTIVE_FAILURES,
    CompactionThresholds,
    Tier,
    compute_thresholds,
)
from autocompact.transcripts import Transcript

__all__ = [
    "ESTIMATORS",
    "POLICIES",
    "CallRow",
    "ErrorSummary",
    "FileReport",
    "PolicyEvent",
    "PolicyResult",
    "ReplayOptions",
    "iter_rows",
    "replay",
    "simulate_policy",
    "summarize_errors",
]

ESTIMATORS = ("cold", "warm", "calibrated")
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
        estimate_cold, estimate_warm, estimate_calibrated, estimate_learned: the estimates.
        tier: the tier of the reported size on the simulated window's ladder.
        compacted_before: the recorded agent compacted just before this call.
    """

    call: int
    reported: int
    estimate_cold: int
    estimate_warm: int
    estimate_calibrated: int
    estimate_learned: int
    tier: Tier
    compacted_before: bool = False

    def estimate(self, name: str) -> int:
        """The estimate of one estimator (``cold``, ``warm``, ``calibrated``, ``learned``)."""
        value: int = getattr(self, f"estimate_{name}")
        return value

    def as_json(self) -> dict[str, Any]:
        """The row as ``--json`` prints it."""
        return {
            "call": self.call,
            "reported": self.reported,
            "estimate_cold": self.estimate_cold,
            "estimate_warm": self.estimate_warm,
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
        mean_error=statistics.fmean(errors),
        median_error=statistics.median(errors),
        p95_abs_error=p95,
        within_10pct=sum(a <= 0.10 for a in absolute) / len(errors),
        within_30pct=sum(a <= 0.30 for a in absolute) / len(errors),
    )


@dataclass(frozen=True, kw_only=True)
class PolicyEvent:
    """Something a policy did before or at one call.

    Attributes:
        call: 1-based call number.
        kind: ``compacted``, ``failed``, ``trimmed`` or ``oversized``.
        trigger: ``auto``, ``hard`` or ``reactive`` for compactions.
        tokens_before, tokens_after: the simulated size before and after.
    """

    call: int
    kind: Literal["compacted", "failed", "trimmed", "oversized"]
    trigger: str | None
    tokens_before: int
    tokens_after: int


@dataclass(frozen=True, kw_only=True)
class PolicyResult:
    """What one policy did on a transcript's recorded growth.

    Attributes:
        name: ``ladder`` or ``legacy``.
        sizes: the size of the request sent at each call (after any compaction or trim).
        events: compactions, failures, trims and oversized requests, in order.
        compactions: successful compactions.
        failed_attempts: compaction attempts that failed.
        side_queries: summary requests made (clearing alone makes none).
        oversized_requests: requests sent over the window (the provider would reject them).
        peak_prompt_tokens: the largest request sent.
        prompt_tokens_sent: the prompt tokens of every accepted request plus every side query.
        mean_fill_at_compaction: the mean of size ÷ window when a compaction was triggered
            (``None`` when none was).
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

    def as_json(self) -> dict[str, Any]:
        """The metrics as ``--json`` prints them."""
        return {
            "compactions": self.compactions,
            "failed_attempts": self.failed_attempts,
            "side_queries": self.side_queries,
            "oversized_requests": self.oversized_requests,
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
        estimation: ``cold``, ``warm``, ``calibrated`` and ``learned`` error summaries.
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


# -- estimation ----------------------------------------------------------------------------------


@dataclass
class _Prefix:
    """Prefix sums of character statistics, so any slice of messages costs O(1)."""

    text: list[int] = field(default_factory=lambda: [0])
    json: list[int] = field(default_factory=lambda: [0])
    media: list[int] = field(default_factory=lambda: [0])

    @classmethod
    def of(cls, messages: Sequence[Message]) -> _Prefix:
        prefix = cls()
        for message in messages:
            stats = message.stats
            prefix.text.append(prefix.text[-1] + stats.text_chars)
            prefix.json.append(prefix.json[-1] + stats.json_chars)
            prefix.media.append(prefix.media[-1] + stats.media_parts)
        return prefix

    def stats(self, start: int, stop: int) -> CharStats:
        return CharStats(
            text_chars=self.text[stop] - self.text[start],
            json_chars=self.json[stop] - self.json[start],
            media_parts=self.media[stop] - self.media[start],
        )


@dataclass(frozen=True)
class _Estimated:
    row: CallRow
    calibration: Calibration  # learned from the calls before this one


@dataclass
class _Pass:
    """One estimation pass over a transcript."""

    items: list[_Estimated] = field(default_factory=list)
    baseline: int = 0
    final: Calibration = field(default_factory=Calibration)


def _estimate(
    transcript: Transcript, options: ReplayOptions, out: _Pass | None = None
) -> Iterator[_Estimated]:
    """Yield the estimates call by call; ``out`` collects them with the baseline and the
    calibration learned after the last call."""
    out = out if out is not None else _Pass()
    calls = transcript.calls
    if not calls:
        return
    images = options.image_token_estimate
    thresholds = compute_thresholds(options.window)
    prefix = _Prefix.of(transcript.messages)
    first = calls[0]
    first_plain = estimate_stats_tokens(prefix.stats(first.context_start, first.preceding), images)
    baseline = out.baseline = max(0, first.prompt_tokens - first_plain)
    calibration = Calibration()
    previous = None
    for call in calls:
        stats = prefix.stats(call.context_start, call.preceding)
        plain = estimate_stats_tokens(stats, images)
        cold = baseline + plain
        new_context = previous is not None and previous.context_start != call.context_start
        if previous is None or new_context or previous.prompt_tokens <= 0:
            warm = cold
        else:
            added = prefix.stats(previous.preceding, call.preceding)
            warm = previous.prompt_tokens + estimate_stats_tokens(added, images)
        calibrated = baseline + calibrated_estimate(
            plain, calibration, stats, image_token_estimate=images
        )
        learned = baseline + calibrated_tokens(calibration, stats, image_token_estimate=images)
        row = CallRow(
            call=call.index + 1,
            reported=call.prompt_tokens,
            estimate_cold=cold,
            estimate_warm=warm,
            estimate_calibrated=calibrated,
            estimate_learned=learned,
            tier=thresholds.tier(call.prompt_tokens),
            compacted_before=new_context,
        )
        item = _Estimated(row, calibration)
        out.items.append(item)
        yield item
        if previous is not None:  # the first call defines the baseline: it teaches nothing
            calibration = update_calibration(
                calibration,
                stats,
                call.prompt_tokens,
                baseline_tokens=baseline,
                image_token_estimate=images,
            )
        previous = call
    out.final = calibration


def iter_rows(transcript: Transcript, options: ReplayOptions) -> Iterator[CallRow]:
    """The estimation rows of a transcript, one per recorded call, as they are computed."""
    for estimated in _estimate(transcript, options):
        yield estimated.row


# -- policies ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Step:
    """One recorded call as the simulation sees it."""

    call: int
    growth: int  # tokens added since the previous call (recorded, or estimated across a cut)
    stop: int  # the call is preceded by conversation[:stop]


def _steps(
    transcript: Transcript, estimated: Sequence[_Estimated], options: ReplayOptions
) -> tuple[tuple[Message, ...], list[_Step]]:
    """The conversation without recorded summaries, and the growth between calls."""
    conversation: list[Message] = []
    position_map: list[int] = []  # transcript index -> conversation count before it
    for index, message in enumerate(transcript.messages):
        position_map.append(len(conversation))
        if index not in transcript.summary_positions:
            conversation.append(message)
    position_map.append(len(conversation))
    prefix = _Prefix.of(conversation)
    steps: list[_Step] = []
    previous = None
    for call, est in zip(transcript.calls, estimated, strict=True):
        stop = position_map[call.preceding]
        if previous is None:
            growth = call.prompt_tokens
        elif previous.context_start == call.context_start:
            growth = call.prompt_tokens - previous.prompt_tokens
        else:
            added = prefix.stats(position_map[previous.preceding], stop)
            growth = calibrated_tokens(
                est.calibration, added, image_token_estimate=options.image_token_estimate
            )
        steps.append(_Step(call.index + 1, growth, stop))
        previous = call
    return tuple(conversation), steps


class _Summaries:
    """The offline summarizer behind a seeded failure rate, counting side queries."""

    def __init__(self, options: ReplayOptions, seed_offset: int) -> None:
        self.rng = random.Random(options.seed * 1_000_003 + seed_offset)
        self.failure_rate = options.failure_rate
        self.inner = options.summarizer or _default_summarizer()
        self.calls = 0
        self.cache: dict[tuple[int, ...], str] = {}

    def __call__(self, messages: Sequence[Message]) -> str:
        self.calls += 1
        if self.failure_rate > 0 and self.rng.random() < self.failure_rate:
            return ""  # an empty summary: the engine reports COMPRESSION_FAILED_EMPTY_SUMMARY
        key = tuple(id(m) for m in messages)
        if key not in self.cache:
            self.cache[key] = self.inner(messages)
        return self.cache[key]


def _default_summarizer() -> Summarizer:
    try:
        from autocompact.compaction.extractive import extractive_summary
    except ImportError:  # pragma: no cover - the extractive summarizer ships with the engine
        return _first_lines
    return extractive_summary


def _first_lines(messages: Sequence[Message]) -> str:
    """A crude stand-in summary: the first line of every user request."""
    lines = [
        m.text.strip().splitlines()[0] for m in messages if m.role == "user" and m.text.strip()
    ]
    return "\n".join(f"- {line[:200]}" for line in lines) or "(earlier conversation)"


class _Sim:
    """The state of one policy's simulated session."""

    def __init__(
        self,
        name: PolicyName,
        conversation: tuple[Message, ...],
        options: ReplayOptions,
        summaries: _Summaries,
        baseline: int,
    ) -> None:
        self.name = name
        self.conversation = conversation
        self.options = options
        self.thresholds = compute_thresholds(options.window)
        self.summaries = summaries
        self.baseline = baseline  # what the transcript does not show (system prompt, tools)
        self.head: tuple[Message, ...] = ()  # summary + acknowledgement (+ kept head)
        self.start = 0  # the live context is head + conversation[start:stop]
        self.size = 0  # the true (simulated) size of the live context
        self.stale = 0  # the size the provider reported for the previous request
        self.plain_growth = 0  # the plain estimate of what was added since the previous call
        self.failures = 0  # ladder: the breaker's count
        self.disabled = False  # legacy: one failure stops automatic compaction for good
        self.sizes: list[int] = []
        self.events: list[PolicyEvent] = []
        self.fills: list[float] = []
        self.compactions = self.failed = self.oversized = 0
        self.peak = 0
        self.sent_tokens = 0

    def live(self, stop: int) -> tuple[Message, ...]:
        return (*self.head, *self.conversation[self.start : stop])

    def share(self, part: Sequence[Message], whole: Sequence[Message]) -> int:
        """The simulated tokens of ``part`` of the live context ``whole``.

        The live context's content (its size minus the baseline) is shared out in proportion
        to the plain estimate, so sizes stay consistent with the recorded growth.
        """
        images = self.options.image_token_estimate
        whole_plain = estimate_content_tokens(whole, images)
        if whole_plain <= 0:
            return 0
        content = max(0, self.size - self.baseline)
        return round(content * estimate_content_tokens(part, images) / whole_plain)

    def estimate(self) -> int:
        """The engine's pre-send estimate: the last reported count plus the plain growth."""
        return self.stale + self.plain_growth

    def event(self, step: _Step, kind: Any, trigger: str | None, before: int, after: int) -> None:
        self.events.append(
            PolicyEvent(
                call=step.call, kind=kind, trigger=trigger, tokens_before=before, tokens_after=after
            )
        )

    def compact(self, step: _Step, trigger: CompressionTrigger) -> bool:
        """One attempt through the engine's own flow; True when it compacted."""
        live = self.live(step.stop)
        options = CompressOptions(
            context_window=self.options.window,
            # Legacy's own 70 % gate already decided: the engine's auto gate must not veto it.
            force=trigger is not CompressionTrigger.AUTO or self.name == "legacy",
            consecutive_failures=self.failures if self.name == "ladder" else 0,
            last_prompt_token_count=self.estimate(),
            trigger=trigger,
            image_token_estimate=self.options.image_token_estimate,
            clear_tool_outputs=self.name == "ladder",
        )
        side_queries = self.summaries.calls
        try:
            result = drive_flow(compress_flow(live, options, summarizer=self.summaries), None)
        except ContentError:
            return False  # the engine refuses this history (e.g. it starts with a tool result)
        info = result.info
        if self.summaries.calls > side_queries:
            self.sent_tokens += self.share(live[: info.compressed_messages], live)
        before = self.size
        if info.status is CompressionStatus.NOOP:
            return False
        self.fills.append(before / self.options.window)
        if info.status is CompressionStatus.COMPRESSED:
            after = self.baseline + self.share(result.history, live)
            self._adopt(result.history, live, step.stop)
            self.size = self.stale = after
            self.plain_growth = 0  # the pending messages are inside the compacted history
            self.compactions += 1
            self.failures = 0
            self.event(step, "compacted", trigger.value, before, self.size)
            return True
        self.failed += 1
        if self.name == "legacy":
            self.disabled = self.disabled or trigger is CompressionTrigger.AUTO
        elif trigger in (CompressionTrigger.AUTO, CompressionTrigger.REACTIVE):
            self.failures += 1
        self.event(step, "failed", trigger.value, before, before)
        return False

    def _adopt(self, history: tuple[Message, ...], live: tuple[Message, ...], stop: int) -> None:
        """Re-express the compacted history as a head plus a suffix of the conversation."""
        tail = 0
        while (
            tail < len(history)
            and tail < stop - self.start
            and history[len(history) - 1 - tail] is live[len(live) - 1 - tail]
        ):
            tail += 1
        self.head = history[: len(history) - tail]
        self.start = stop - tail

    def _trimmed(self, step: _Step, estimate: int) -> int:
        """The size of the request after the engine's guarantee left old turns out of it."""
        live = self.live(step.stop)
        if len(live) < 2:
            return self.size
        trimmed = trim_request(
            live[:-1],
            live[-1],
            count=estimate,
            target=self.thresholds.auto,
            image_token_estimate=self.options.image_token_estimate,
        )
        if not trimmed.dropped:
            return self.size
        sent = self.baseline + self.share(trimmed.messages, live)
        self.event(step, "trimmed", None, self.size, sent)
        return sent

    def send(self, step: _Step) -> None:
        """Send one call's request: trimming (ladder) and the reactive retry (both)."""
        sent = self.size
        if self.name == "ladder" and self.estimate() >= self.thresholds.hard:
            sent = self._trimmed(step, self.estimate())
        if sent > self.options.window:
            self.oversized += 1
            self.peak = max(self.peak, sent)
            self.event(step, "oversized", None, sent, sent)
            if self.compact(step, CompressionTrigger.REACTIVE):
                sent = self.size
                if sent > self.options.window:
                    self.oversized += 1
        self.peak = max(self.peak, sent)
        self.sizes.append(sent)
        if sent <= self.options.window:
            self.sent_tokens += sent
        self.stale = self.size

    def check(self, step: _Step) -> None:
        """The pre-send decision of the policy."""
        if self.name == "ladder":
            estimate = self.estimate()
            if estimate >= self.thresholds.hard:
                self.compact(step, CompressionTrigger.HARD)
            elif estimate >= self.thresholds.auto and self.failures < MAX_CONSECUTIVE_FAILURES:
                self.compact(step, CompressionTrigger.AUTO)
        elif not self.disabled and self.stale >= DEFAULT_PCT * self.options.window:
            self.compact(step, CompressionTrigger.AUTO)

    def run(self, steps: Sequence[_Step], plain_growth: Sequence[int]) -> PolicyResult:
        for step, plain in zip(steps, plain_growth, strict=True):
            self.size = max(1, self.size + step.growth)
            self.plain_growth = plain if self.stale > 0 else self.size
            self.check(step)
            self.send(step)
        return PolicyResult(
            name=self.name,
            sizes=tuple(self.sizes),
            events=tuple(self.events),
            compactions=self.compactions,
            failed_attempts=self.failed,
            side_queries=self.summaries.calls,
            oversized_requests=self.oversized,
            peak_prompt_tokens=self.peak,
            prompt_tokens_sent=self.sent_tokens,
            mean_fill_at_compaction=statistics.fmean(self.fills) if self.fills else None,
        )


def simulate_policy(
    name: PolicyName,
    transcript: Transcript,
    options: ReplayOptions,
    *,
    _estimated: Sequence[_Estimated] | None = None,
) -> PolicyResult:
    """Run one policy over a transcript's recorded growth (see the module docstring)."""
    if name not in POLICIES:
        raise ConfigError(f"unknown policy {name!r}; expected one of {', '.join(POLICIES)}")
    estimated = list(_estimated if _estimated is not None else _estimate(transcript, options))
    conversation, steps = _steps(transcript, estimated, options)
    prefix = _Prefix.of(conversation)
    plain_growth = []
    previous_stop = 0
    for step in steps:
        added = prefix.stats(previous_stop, step.stop)
        plain_growth.append(estimate_stats_tokens(added, options.image_token_estimate))
        previous_stop = step.stop
    summaries = _Summaries(options, POLICIES.index(name))
    baseline = max(0, estimated[0].row.estimate_cold - plain_growth[0]) if estimated else 0
    return _Sim(name, conversation, options, summaries, baseline).run(steps, plain_growth)


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
    result = _Pass()
    for item in _estimate(transcript, options, result):
        if on_row is not None:
            on_row(item.row)
    rows = tuple(item.row for item in result.items)
    scored = rows[1:]  # the first call defines the baseline
    estimation = {
        name: summarize_errors([(row.estimate(name), row.reported) for row in scored])
        for name in (*ESTIMATORS, "learned")
    }
    policies: dict[str, PolicyResult] = {
        name: simulate_policy(name, transcript, options, _estimated=result.items)
        for name in POLICIES
    }
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

"""The ladder and legacy policies simulated on a transcript's recorded growth. Pure.

See :mod:`autocompact.replay` for the rules of each policy and how sizes are simulated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from itertools import pairwise
from typing import TYPE_CHECKING, Any, Final

from autocompact.averages import fmean
from autocompact.compaction.accounting import (
    CLOSE_COMPACTIONS,
    HOLD_GROWTH_SHARE,
    BreakerState,
    GrowthLog,
    automatic_trigger,
    record_attempt,
    record_outgrown,
)
from autocompact.compaction.fallback import SIZE_MARGIN, ProviderScale, TrimResult, trim_request
from autocompact.compaction.plan import (
    CompressionStatus,
    CompressionTrigger,
    CompressOptions,
    Summarizer,
)
from autocompact.compaction.service import CompressionService
from autocompact.compaction.sidequery import call_summarizer
from autocompact.content import Message
from autocompact.errors import ConfigError, ContentError
from autocompact.estimation import calibrated_tokens, estimate_content_tokens
from autocompact.replay.estimation import CharPrefix, Estimated, estimate_calls
from autocompact.replay.records import (
    POLICIES,
    PolicyEvent,
    PolicyName,
    PolicyResult,
    ReplayOptions,
)
from autocompact.thresholds import DEFAULT_PCT, compute_thresholds
from autocompact.transcripts import Transcript

if TYPE_CHECKING:  # random is imported at the first draw
    import random

__all__ = ["simulate_policies", "simulate_policy"]


class _Step:
    """One recorded call as the simulation sees it (a plain class: a dataclass compiles its
    methods at import)."""

    __slots__ = ("call", "growth", "stop")

    def __init__(self, call: int, growth: int, stop: int) -> None:
        self.call: Final = call
        # Tokens added since the previous call (recorded, or estimated across a cut).
        self.growth: Final = growth
        self.stop: Final = stop  # the call is preceded by conversation[:stop]


def _steps(
    transcript: Transcript, estimated: Sequence[Estimated], options: ReplayOptions
) -> tuple[tuple[Message, ...], CharPrefix, list[_Step]]:
    """The conversation without recorded summaries, its prefix sums, and the growth between
    calls."""
    conversation: list[Message] = []
    position_map: list[int] = []  # transcript index -> conversation count before it
    for index, message in enumerate(transcript.messages):
        position_map.append(len(conversation))
        if index not in transcript.summary_positions:
            conversation.append(message)
    position_map.append(len(conversation))
    prefix = CharPrefix.of(conversation)
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
    return tuple(conversation), prefix, steps


class _Summaries:
    """The offline summarizer behind a seeded failure rate, counting side queries."""

    def __init__(self, options: ReplayOptions, seed_offset: int) -> None:
        self.seed = options.seed * 1_000_003 + seed_offset
        self.rng: random.Random | None = None  # made at the first draw (with failures only)
        self.failure_rate = options.failure_rate
        self.inner = options.summarizer or _default_summarizer()
        self.calls = 0
        # Keyed by message identities and the cap; each entry holds its messages, so no other
        # message takes one of those ids while it is cached, and a hit is checked by identity.
        self.cache: dict[tuple[int, ...], tuple[tuple[Message, ...], str]] = {}

    def __call__(self, messages: Sequence[Message], *, max_tokens: int | None = None) -> str:
        self.calls += 1
        if self.failure_rate > 0 and self._draw() < self.failure_rate:
            return ""  # an empty summary: the engine reports COMPRESSION_FAILED_EMPTY_SUMMARY
        key = (*(id(m) for m in messages), max_tokens or 0)
        hit = self.cache.get(key)
        if hit is None or any(a is not b for a, b in zip(hit[0], messages, strict=True)):
            summary = call_summarizer(self.inner, messages, max_tokens or 20_000)
            hit = self.cache[key] = (tuple(messages), summary)
        return hit[1]

    def _draw(self) -> float:
        """The seeded generator's next number; random is imported here, when a failure rate is set:
        a replay without failures never draws."""
        if self.rng is None:
            import random

            self.rng = random.Random(self.seed)
        return self.rng.random()


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
        prefix: CharPrefix | None = None,
    ) -> None:
        self.name = name
        self.conversation = conversation
        self.options = options
        self.thresholds = compute_thresholds(options.window)
        self.summaries = summaries
        self.baseline = baseline  # what the transcript does not show (system prompt, tools)
        self.head: tuple[Message, ...] = ()  # summary + acknowledgement (+ kept head)
        # What every call reads of the head, kept with it (it changes only in _adopt): its
        # plain estimate.
        self.head_plain = 0
        self.start = 0  # the live context is head + conversation[start:stop]
        self.size = 0  # the true (simulated) size of the live context
        self.stale = 0  # the size the provider reported for the previous request
        self.plain_growth = 0  # the plain estimate of what was added since the previous call
        self.state = BreakerState()  # ladder: the breaker's count and the hold (SPEC §10.2)
        self.growth = GrowthLog()  # ladder: the recent growth and the last compaction's age
        self.outgrown = 0
        self.no_room = 0
        self.orphans: set[str] = set()  # ids of tool results sent without their call
        self.pairs_checked: tuple[TrimResult | None, tuple[Message, ...], int] | None = None
        self.disabled = False  # legacy: one failure stops automatic compaction for good
        self.sizes: list[int] = []
        self.size_calls: list[int] = []
        self.events: list[PolicyEvent] = []
        self.fills: list[float] = []
        self.compactions = self.failed = self.oversized = self.refused = 0
        # The conversation's prefix sums: the caller's when it made them already.
        self.prefix = prefix if prefix is not None else CharPrefix.of(conversation)
        # Provider tokens (past the baseline) per plain-estimate token of the last request, as
        # the engine learns it from reported counts (None: nothing reported yet).
        self.ratio: float | None = None
        self.ineffective = 0
        self.compacted_at: list[tuple[int, bool]] = []  # (call, ineffective) per compaction
        self.cache_read = self.cache_write = 0
        self.last_sent = 0  # the previous request's size, cached whole by the provider
        self.prefix_kept = False  # the next request begins with the previous one unchanged
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
            consecutive_failures=self.state.consecutive_failures if self.name == "ladder" else 0,
            last_prompt_token_count=self.estimate(),
            trigger=trigger,
            image_token_estimate=self.options.image_token_estimate,
            clear_tool_outputs=self.name == "ladder",
            growth_room_tokens=self.growth.expected_growth() if self.name == "ladder" else 0,
            skip_without_room=self.name == "ladder",
        )
        side_queries = self.summaries.calls
        try:
            result = CompressionService(None, summarizer=self.summaries).compress(live, options)
        except ContentError:
            return False  # the engine refuses this history (e.g. it starts with a tool result)
        info = result.info
        if self.summaries.calls > side_queries:
            self.sent_tokens += self.share(live[: info.compressed_messages], live)
        before = self.size
        if info.status is CompressionStatus.NOOP:
            if self.name == "ladder" and info.ineffective:  # no summary could buy room
                self.state = record_attempt(self.state, info, self.thresholds)
                self.no_room += 1
                self.event(step, "no_room", trigger.value, before, before)
            return False
        self.fills.append(before / self.options.window)
        if self.name == "ladder":
            self.state = record_attempt(self.state, info, self.thresholds)
        if info.status is CompressionStatus.COMPRESSED:
            after = self.baseline + self.share(result.history, live)
            self._adopt(result.history, live, step.stop)
            self.size = self.stale = after
            self.plain_growth = 0  # the pending messages are inside the compacted history
            self.prefix_kept = False  # the cached prefix is rewritten
            self.compactions += 1
            self.ineffective += info.ineffective
            self.compacted_at.append((step.call, info.ineffective))
            if info.summary_failure is not None:
                self.failed += 1
            self._hold_on_simulated_size()
            if self.name == "ladder":
                self.growth = self.growth.after_compaction(info, self.estimate())
            self.event(step, "compacted", trigger.value, before, self.size)
            return True
        self.failed += 1
        if self.name == "legacy":
            self.disabled = self.disabled or trigger is CompressionTrigger.AUTO
        self._hold_on_simulated_size()
        self.event(step, "failed", trigger.value, before, before)
        return False

    def judge_outgrown(self, step: _Step) -> None:
        """The engine's after-the-fact judgment (design decision 63): a compaction needed again
        fewer than :data:`CLOSE_COMPACTIONS` calls after an effective one makes that one
        outgrown — reported, counted like an ineffective one, its hold measured from the count
        it left."""
        if self.name != "ladder" or not self.growth.outgrown:
            return
        self.state = record_outgrown(self.state, self.growth, self.thresholds)
        self.growth = self.growth.judged()
        self.outgrown += 1
        call, _ = self.compacted_at[-1]
        self.compacted_at[-1] = (call, True)
        self.event(step, "outgrown", None, self.size, self.size)

    def _hold_on_simulated_size(self) -> None:
        """A hold counts growth from the simulated size (the engine's own count here)."""
        if self.state.hold_until is not None:
            hold = round(self.size + HOLD_GROWTH_SHARE * self.options.window)
            self.state = replace(self.state, hold_until=hold)

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
        self.head_plain = estimate_content_tokens(self.head, self.options.image_token_estimate)
        self.start = stop - tail

    def scale(self) -> ProviderScale:
        """The engine's provider scale: the ratio learned from the last reported size."""
        if self.ratio is None:
            return ProviderScale()
        return ProviderScale(factor=self.ratio, known=True)

    def plain_live(self, stop: int) -> int:
        """The plain estimate of the live context (head plus conversation[start:stop])."""
        return self.head_plain + self.prefix.tokens(
            self.start, stop, self.options.image_token_estimate
        )

    def refuses(self, step: _Step) -> bool:
        """The engine's first check: the pending message alone, with what every request
        carries (the baseline), larger than the window is refused before anything is sent."""
        if step.stop <= self.start:
            return False
        # The plain estimate of conversation[stop - 1] alone.
        plain = self.prefix.tokens(step.stop - 1, step.stop, self.options.image_token_estimate)
        return self.baseline + self.scale().tokens(plain, scale="best") > self.options.window

    def _trimmed(self, step: _Step, scale: ProviderScale) -> tuple[int, TrimResult | None, bool]:
        """The size of the request after the engine's guarantee left old turns out of it, what
        was trimmed, and whether the engine refuses the result (it cannot fit)."""
        live = self.live(step.stop)
        if len(live) < 2:
            return self.size, None, False
        trimmed = trim_request(
            live[:-1],
            live[-1],
            target=self.thresholds.auto - self.baseline,
            image_token_estimate=self.options.image_token_estimate,
            scale=scale,
        )
        if not trimmed.dropped:
            return self.size, None, False
        self.prefix_kept = False  # the oldest turns left out: the prefix changes
        final = self.baseline + scale.tokens(trimmed.plain_after, scale="best")
        if final > self.options.window:
            return self.size, trimmed, True
        sent = self.baseline + self.share(trimmed.messages, live)
        self.event(step, "trimmed", None, self.size, sent)
        return sent, trimmed, False

    def _refuse(self, step: _Step) -> None:
        self.refused += 1
        self.event(step, "refused", None, self.size, self.size)

    def send(self, step: _Step) -> None:
        """Send one call's request: trimming (ladder), the reactive retry (both) and the count
        the engine keeps afterwards (SPEC §10.6)."""
        sent, trim = self.size, None
        if self.name == "ladder" and self.estimate() >= self.thresholds.hard:
            sent, trim, refused = self._trimmed(step, self.scale())
            if refused:
                self._refuse(step)
                return
        if sent > self.options.window:
            self.oversized += 1
            self.peak = max(self.peak, sent)
            self.event(step, "oversized", None, sent, sent)
            self.judge_outgrown(step)
            if self.compact(step, CompressionTrigger.REACTIVE):
                sent, trim = self.size, None
                if sent > self.options.window:
                    self.oversized += 1
            elif trim is not None:
                # The engine's one retry after a trimmed request was still too long: a scale
                # raised so the rejected request is over the window, plus the margin.
                least = max(
                    self.scale().best, (self.options.window - self.baseline) / trim.plain_after
                )
                raised = ProviderScale(factor=least * (1 + SIZE_MARGIN), known=True)
                retry, retry_trim, refused = self._trimmed(step, raised)
                if refused or retry_trim is None:
                    return
                sent, trim = retry, retry_trim
                if sent > self.options.window:
                    self.oversized += 1
        self.peak = max(self.peak, sent)
        self.sizes.append(sent)
        self.size_calls.append(step.call)
        self._check_pairs(step, trim)
        if sent <= self.options.window:
            self.sent_tokens += sent
            # Prompt caching: an unchanged prefix is read, the rest written (the system prompt
            # and tools stay cached across a compaction).
            read = min(self.last_sent, sent) if self.prefix_kept else min(self.baseline, sent)
            self.cache_read += read
            self.cache_write += sent - read
            self.last_sent, self.prefix_kept = sent, True
        self._count_after(step, sent, trim)

    def _check_pairs(self, step: _Step, trim: TrimResult | None) -> None:
        """Note every tool result sent without its call in the same request (an orphaned pair).
        Only a compaction or a trim can orphan one, so a request is checked when its beginning
        changed since the last check."""
        checked = self.pairs_checked  # held (not their ids): checked by identity
        if checked and checked[0] is trim and checked[1] is self.head and checked[2] == self.start:
            return
        self.pairs_checked = (trim, self.head, self.start)
        messages = trim.messages if trim is not None else self.live(step.stop)
        calls: set[str] = set()
        for message in messages:
            calls.update(call.id for call in message.function_calls)
            for response in message.function_responses:
                if response.id not in calls:
                    self.orphans.add(response.id)

    def _count_after(self, step: _Step, sent: int, trim: TrimResult | None) -> None:
        """What the engine keeps as the count after a send: the reported size, plus what a
        trimmed request left out on the provider's scale."""
        if trim is None:
            plain = self.plain_live(step.stop)
            self.stale = self.size
        else:
            plain = max(1, trim.plain_after)
            self.stale = sent
        if plain >= 1 and sent > self.baseline:
            self.ratio = (sent - self.baseline) / plain
        if trim is not None:
            self.stale = sent + self.scale().tokens(trim.left_out_tokens, scale="best")

    def check(self, step: _Step) -> None:
        """The pre-send decision of the policy."""
        if self.name == "ladder":
            estimate = self.estimate()
            self.growth = self.growth.before_send(estimate)
            trigger = automatic_trigger(estimate, self.thresholds, self.state)
            if trigger is not None and self.growth.outgrown:
                self.judge_outgrown(step)
                trigger = automatic_trigger(estimate, self.thresholds, self.state)
            if trigger is not None:
                self.compact(step, trigger)
        elif not self.disabled and self.stale >= DEFAULT_PCT * self.options.window:
            self.compact(step, CompressionTrigger.AUTO)

    def run(self, steps: Sequence[_Step], plain_growth: Sequence[int]) -> PolicyResult:
        for step, plain in zip(steps, plain_growth, strict=True):
            self.size = max(1, self.size + step.growth)
            self.plain_growth = plain if self.stale > 0 else self.size
            if self.name == "ladder" and self.refuses(step):
                self._refuse(step)
                continue
            self.check(step)
            self.send(step)
        return PolicyResult(
            name=self.name,
            sizes=tuple(self.sizes),
            size_calls=tuple(self.size_calls),
            events=tuple(self.events),
            compactions=self.compactions,
            failed_attempts=self.failed,
            side_queries=self.summaries.calls,
            oversized_requests=self.oversized,
            refused_requests=self.refused,
            peak_prompt_tokens=self.peak,
            prompt_tokens_sent=self.sent_tokens,
            mean_fill_at_compaction=fmean(self.fills) if self.fills else None,
            ineffective_compactions=self.ineffective,
            outgrown_compactions=self.outgrown,
            no_room_skips=self.no_room,
            orphaned_pairs=len(self.orphans),
            compaction_calls=tuple(call for call, _ in self.compacted_at),
            close_compactions=_close_pairs(self.compacted_at),
            cache_write_tokens=self.cache_write,
            cache_read_tokens=self.cache_read,
        )


def _close_pairs(compacted_at: Sequence[tuple[int, bool]]) -> int:
    """Pairs of consecutive compactions < 5 calls apart whose first one was not ineffective
    (an ineffective or outgrown one is reported and starts a hold; a close pair after it is
    explained)."""
    return sum(
        1
        for (call, ineffective), (following, _) in pairwise(compacted_at)
        if following - call < CLOSE_COMPACTIONS and not ineffective
    )


def simulate_policy(
    name: PolicyName,
    transcript: Transcript,
    options: ReplayOptions,
    *,
    estimated: Sequence[Estimated] | None = None,
) -> PolicyResult:
    """Run one policy over a transcript's recorded growth (see :mod:`autocompact.replay`).

    Args:
        name: ``ladder`` or ``legacy``.
        transcript: the recorded session.
        options: window, failure rate, seed, summarizer.
        estimated: the estimation pass over the same transcript, when already made.
    """
    if name not in POLICIES:
        raise ConfigError(f"unknown policy {name!r}; expected one of {', '.join(POLICIES)}")
    if estimated is None:
        estimated = list(estimate_calls(transcript, options))
    return _simulate(name, _Growth(transcript, estimated, options), options)


def simulate_policies(
    transcript: Transcript, options: ReplayOptions, estimated: Sequence[Estimated]
) -> dict[str, PolicyResult]:
    """Every policy of :data:`POLICIES` over the same recorded growth, measured once."""
    growth = _Growth(transcript, estimated, options)
    return {name: _simulate(name, growth, options) for name in POLICIES}


class _Growth:
    """What every policy replays: the conversation without recorded summaries, its prefix sums,
    the steps, the plain growth before each call and the baseline (read only by the runs)."""

    __slots__ = ("baseline", "conversation", "plain_growth", "prefix", "steps")

    def __init__(
        self, transcript: Transcript, estimated: Sequence[Estimated], options: ReplayOptions
    ) -> None:
        self.conversation, self.prefix, self.steps = _steps(transcript, estimated, options)
        self.plain_growth: list[int] = []
        previous_stop = 0
        images = options.image_token_estimate
        for step in self.steps:
            self.plain_growth.append(self.prefix.tokens(previous_stop, step.stop, images))
            previous_stop = step.stop
        first = self.plain_growth[0] if self.plain_growth else 0
        self.baseline = max(0, estimated[0].row.estimate_cold - first) if estimated else 0


def _simulate(name: PolicyName, growth: _Growth, options: ReplayOptions) -> PolicyResult:
    summaries = _Summaries(options, POLICIES.index(name))
    sim = _Sim(name, growth.conversation, options, summaries, growth.baseline, growth.prefix)
    return sim.run(growth.steps, growth.plain_growth)

"""What the chat shows besides the reply: compaction events, tips, the footer and the /context bar.

Every function here returns plain text (or takes a rich console only to print it), so tests
compare what a user sees as strings. The tip cooldown lives here too (:class:`TipScheduler`):
the engine says which tip fits a count; the CLI decides when to repeat it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from autocompact.compaction import CompressionInfo, CompressionStatus
from autocompact.events import (
    BreakerClosed,
    BreakerOpened,
    CompactionCancelled,
    CompactionFailed,
    CompactionOutgrown,
    CompactionSkipped,
    CompactionStarted,
    CompactionSucceeded,
    Event,
    RequestTrimmed,
    ThresholdCrossed,
    WindowLearned,
)
from autocompact.thresholds import MAX_CONSECUTIVE_FAILURES, CompactionThresholds
from autocompact.tips import Tip, format_tokens, select_tip

__all__ = [
    "TipScheduler",
    "bar",
    "describe_event",
    "describe_info",
    "footer_text",
    "format_tokens",
]

WINDOW_SOURCES = {
    "known": "the model's published window",
    "configured": "set by --window or a settings file",
    "server": "reported by the server",
    "assumed": "the model is unknown; set --window to be exact",
}


def bar(fraction: float, width: int = 30) -> str:
    """A text gauge such as ``[██████░░░░]`` (clamped to 0–100 %)."""
    fraction = min(max(fraction, 0.0), 1.0)
    filled = round(fraction * width)
    return "[" + "█" * filled + "░" * (width - filled) + "]"


def _percent(tokens: float, window: int) -> int:
    return round(100 * tokens / window) if window > 0 else 100


def footer_text(
    tokens: int,
    thresholds: CompactionThresholds,
    *,
    consecutive_failures: int = 0,
) -> str:
    """The bottom toolbar: the count, its share of the window and the ladder's indicator.

    The "approaching auto-compaction" indicator shows exactly while warn ≤ tokens < auto
    (SPEC §7's optional footer); a paused breaker is shown at any count.
    """
    window = thresholds.window
    text = f"{format_tokens(tokens)} / {format_tokens(window)} tokens ({_percent(tokens, window)}%)"
    if thresholds.warn <= tokens < thresholds.auto:
        text += f" · approaching auto-compaction (at {format_tokens(thresholds.auto)})"
    if consecutive_failures >= MAX_CONSECUTIVE_FAILURES:
        text += " · auto-compaction paused (/compress to retry)"
    return text


_FAILURE_REASONS = {
    CompressionStatus.COMPRESSION_FAILED_OUTPUT_TRUNCATED: "the summary hit its output cap",
    CompressionStatus.COMPRESSION_FAILED_EMPTY_SUMMARY: "the summary came back empty",
    CompressionStatus.COMPRESSION_FAILED_INFLATED_TOKEN_COUNT: (
        "the summary would not have made the history smaller"
    ),
    CompressionStatus.COMPRESSION_FAILED_TOKEN_COUNT_ERROR: "the history could not be counted",
    CompressionStatus.COMPRESSION_FAILED_PROVIDER_ERROR: "the summary request failed",
    CompressionStatus.COMPRESSION_FAILED_CONTENT_FILTER: (
        "the summary was stopped by a content filter or refused"
    ),
}


def _explain_space(info: CompressionInfo) -> str:
    """Why a compaction bought too little room: what holds the space (SPEC §10.2)."""
    text = "still at or above the warn threshold"
    if info.breakdown is not None:
        rows = ", ".join(
            f"{label.lower()} {format_tokens(tokens)}"
            for label, tokens in info.breakdown.rows()
            if tokens
        )
        text += f": {info.breakdown.largest()} holds the most ({rows})"
    return text + "; automatic compaction waits until the context grows by 10 % of the window"


def describe_info(info: CompressionInfo) -> str:
    """One line about a finished compaction attempt (success, failure or nothing to do)."""
    trigger = str(info.trigger)
    if info.status == CompressionStatus.COMPRESSED:
        if info.method == "clearing":
            detail = (
                f"{trigger}; cleared {info.cleared_tool_outputs} old tool outputs, "
                "no summary needed"
            )
        else:
            cleared = (
                f"cleared {info.cleared_tool_outputs} old tool outputs, then "
                if info.cleared_tool_outputs
                else ""
            )
            detail = (
                f"{trigger}; {cleared}summarized {info.compressed_messages} messages, "
                f"kept {info.kept_messages}"
            )
        line = (
            f"Compressed {format_tokens(info.original_token_count)} → "
            f"{format_tokens(info.new_token_count)} tokens ({detail})"
        )
        if info.summary_failure is not None:
            reason = info.error or _FAILURE_REASONS.get(info.summary_failure, "")
            line += f"; the summary after the clearing failed ({reason}), the clearing stands"
        if info.ineffective:
            line += "; " + _explain_space(info)
        return line
    if info.status == CompressionStatus.NOOP:
        line = f"Nothing to compress: {info.error or 'the history is too short'}"
        if info.ineffective:  # no side query could buy room (design decision 70)
            line += "; " + _explain_space(info)
        return line
    reason = info.error or _FAILURE_REASONS.get(info.status, str(info.status))
    return f"Compaction failed ({trigger}): {reason}; the history is unchanged"


def describe_event(event: Event) -> str | None:
    """The line shown for an engine event, or ``None`` for events the footer already shows."""
    match event:
        case CompactionStarted(trigger=trigger, tokens=tokens):
            return f"Compacting the conversation ({trigger}, {format_tokens(tokens)} tokens)…"
        case (
            CompactionSucceeded(info=info)
            | CompactionFailed(info=info)
            | CompactionSkipped(info=info)
        ):
            return describe_info(info)
        case CompactionCancelled(reason=reason, error=error):
            # Ctrl-C and cancellation are reported by the chat loop itself.
            if reason == "error":
                return f"Compaction stopped by an unexpected error ({error}); history unchanged"
            return None
        case CompactionOutgrown(calls=calls, compacted_to=left, tokens=tokens):
            after = "1 call" if calls == 1 else f"{calls} calls"
            return (
                f"The last compaction (to {format_tokens(left)} tokens) was outgrown after "
                f"{after} ({format_tokens(tokens)} now): counted as ineffective; automatic "
                "compaction waits until the context grows by 10 % of the window past it"
            )
        case BreakerOpened(consecutive_failures=n):
            return (
                f"Automatic compaction paused after {n} failures in a row; it resumes after a "
                "success. Use /compress to try now."
            )
        case BreakerClosed():
            return "Automatic compaction resumed."
        case RequestTrimmed(dropped_messages=n, tokens_before=before, tokens_after=after):
            what = "1 earlier message" if n == 1 else f"{n} earlier messages"
            return (
                f"Left {what} out of this request; kept the first message where it fits, the "
                f"most recent turns and yours ({format_tokens(before)} → "
                f"{format_tokens(after)} tokens): {event.reason}"
            )
        case WindowLearned(previous=previous, context_window=window):
            return (
                f"The server says its context window is {window:,} tokens (not "
                f"{previous:,}); using {format_tokens(window)} from now on. Pass --window "
                f"{window} to start with it."
            )
        case ThresholdCrossed():
            return None


TipSelector = Callable[..., Tip | None]


@dataclass
class TipScheduler:
    """Picks the tip to show after a turn, without repeating one every turn.

    A tip shows when its band is entered (the tip changes from the last turn's, or the breaker
    opens or closes), and then again only after ``cooldown_turns`` turns in the same band.

    Args:
        cooldown_turns: turns before the same tip may show again while the band is unchanged.
        selector: the engine's tip selector (``autocompact.tips.select_tip``).
    """

    cooldown_turns: int = 5
    selector: TipSelector = select_tip
    _turn: int = 0
    _previous_id: str | None = None
    _last_shown: dict[str, int] = field(default_factory=dict)

    def after_turn(
        self,
        tokens: int,
        thresholds: CompactionThresholds,
        *,
        breaker_open: bool = False,
        held: bool = False,
        rescue_ran: bool = False,
    ) -> Tip | None:
        """The tip to show now for ``tokens``, or ``None`` (``held``: a hold stops automatic
        compaction at this count; ``rescue_ran``: a forced compaction ran before this turn's
        send)."""
        self._turn += 1
        tip = self.selector(
            tokens,
            window=thresholds.window,
            thresholds=thresholds,
            breaker_open=breaker_open,
            held=held,
            rescue_ran=rescue_ran,
        )
        # A paused breaker or a hold changes the advice, so it counts as a new tip.
        key = None if tip is None else tip.id + (":paused" if breaker_open or held else "")
        entered = key != self._previous_id
        self._previous_id = key
        if tip is None or key is None:
            return None
        last = self._last_shown.get(key)
        if entered or last is None or self._turn - last >= self.cooldown_turns:
            self._last_shown[key] = self._turn
            return tip
        return None

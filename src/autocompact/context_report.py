"""The ``/context`` report as data (SPEC §7); the CLI renders it.

For a 200K window with 170K tokens in use::

    Effective window  180K (window − 20K reserve)
    Warn threshold    147K
    Auto threshold    167K ← current
    Hard threshold    177K

The marker stands on the tier the current count is in; below warn no threshold is marked. On a
window no larger than the 20K reserve the effective window is 0 and the line says that the
thresholds are then shares of the window (``0 (the window is no larger than the 20K reserve;
the thresholds are shares of the window)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from autocompact.content import CONTENT_BLOCK, Message, OpaquePart
from autocompact.errors import ConfigError
from autocompact.thresholds import (
    SUMMARY_RESERVE,
    CompactionThresholds,
    Tier,
    check_thresholds,
    check_tokens,
)
from autocompact.tips import format_tokens

__all__ = ["ContextReport", "WindowSource", "build_context_report", "native_block_lines"]

WindowSource: TypeAlias = Literal["known", "configured", "server", "assumed"]

_SOURCE_TEXT: dict[str, str] = {
    "known": "known for this model",
    "configured": "set in settings or on the command line",
    "server": "reported by the server",
    "assumed": "ASSUMED: the model is unknown; set model.contextWindow or --window",
}
_LABEL_WIDTH = 17


@dataclass(frozen=True, kw_only=True)
class ContextReport:
    """Where the conversation stands on the ladder.

    Attributes:
        window, tokens, tier, thresholds: the facts.
        window_source: where the window came from (``assumed`` deserves a warning).
        lines: the four ladder lines, the current tier marked with ``← current``.
        summary: one line with the count, its share of the window and the tier.
        source_line: one line saying where the window size came from.
    """

    window: int
    tokens: int
    tier: Tier
    thresholds: CompactionThresholds
    window_source: WindowSource
    lines: tuple[str, ...]
    summary: str
    source_line: str

    @property
    def fraction(self) -> float:
        """The share of the window in use (0 when the window is 0)."""
        return self.tokens / self.window if self.window else 0.0


def _effective_window_text(thresholds: CompactionThresholds) -> str:
    """The effective window and how it was made: ``window − 20K reserve``, or, on a window no
    larger than the reserve (where the formula gives 0), that the thresholds are shares of the
    window (60 % and 70 %), so a 0 does not read as a ladder with no room."""
    reserve = format_tokens(SUMMARY_RESERVE)
    value = format_tokens(thresholds.effective_window)
    if thresholds.window <= SUMMARY_RESERVE:
        return (
            f"{value} (the window is no larger than the {reserve} reserve; the thresholds are "
            "shares of the window)"
        )
    return f"{value} (window − {reserve} reserve)"


def build_context_report(
    tokens: int, thresholds: CompactionThresholds, *, window_source: WindowSource = "known"
) -> ContextReport:
    """The report for a count on a ladder.

    Raises:
        ConfigError: ``tokens`` is no finite count of 0 or more, ``thresholds`` no
            :class:`CompactionThresholds`, or ``window_source`` none of the four sources.
    """
    check_tokens(tokens)
    check_thresholds(thresholds)
    if window_source not in _SOURCE_TEXT:
        raise ConfigError(
            f"window_source must be one of {', '.join(map(repr, _SOURCE_TEXT))}, "
            f"got {window_source!r:.60}",
            key="window_source",
        )
    tier = thresholds.tier(tokens)
    marker = " ← current"
    rows = (
        ("Effective window", _effective_window_text(thresholds), None),
        ("Warn threshold", format_tokens(thresholds.warn), Tier.WARN),
        ("Auto threshold", format_tokens(thresholds.auto), Tier.AUTO),
        ("Hard threshold", format_tokens(thresholds.hard), Tier.HARD),
    )
    lines = tuple(
        f"{label:<{_LABEL_WIDTH}} {value}{marker if band is tier else ''}"
        for label, value, band in rows
    )
    window = thresholds.window
    pct = f"{100 * tokens / window:.1f}%" if window else "n/a"
    used = f"{format_tokens(tokens)} of {format_tokens(window)} ({pct})"
    summary = f"{'Current':<{_LABEL_WIDTH}} {used}, tier {tier.value}"
    source_line = f"{'Window':<{_LABEL_WIDTH}} {window:,} tokens ({_SOURCE_TEXT[window_source]})"
    return ContextReport(
        window=window,
        tokens=tokens,
        tier=tier,
        thresholds=thresholds,
        window_source=window_source,
        lines=lines,
        summary=summary,
        source_line=source_line,
    )


def native_block_lines(
    history: Sequence[Message], *, provider: str | None = None, family: str | None = None
) -> tuple[str, ...]:
    """One ``/context`` line per native compaction block in the history: who made it, its size,
    and whether the current provider (``provider``/``family``) receives it or its summary text.
    """
    lines = []
    for message in history:
        for part in message.parts:
            if not isinstance(part, OpaquePart) or part.family == CONTENT_BLOCK:
                continue  # (a framework's content block is no native summary)
            readable = provider is not None and family is not None
            sent = (
                "sent as received"
                if readable and part.readable_by(str(provider), str(family))
                else "sent as its summary text (another provider or model family)"
            )
            size = format_tokens(part.tokens) if part.tokens else "size unknown"
            lines.append(
                f"{'Native summary':<{_LABEL_WIDTH}} {part.provider} ({part.family}), "
                f"~{size} tokens, {sent}"
            )
    return tuple(lines)

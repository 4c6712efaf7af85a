"""Estimation in replay: cold, warm and calibrated estimates per recorded call. Pure.

See :mod:`autocompact.replay` for what each estimate is.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Final

from autocompact.content import CharStats, Message
from autocompact.estimation import (
    Calibration,
    calibrated_estimate,
    calibrated_tokens,
    chars_tokens,
    estimate_stats_tokens,
    update_calibration,
)
from autocompact.replay.records import CallRow, ReplayOptions
from autocompact.thresholds import compute_thresholds
from autocompact.transcripts import Transcript

__all__ = ["CharPrefix", "Estimated", "EstimationPass", "estimate_calls", "iter_rows"]


# The records below are the replay's own working state, never handed out: plain classes, which
# cost nothing to define (a dataclass generates and compiles its methods at import).


class CharPrefix:
    """Prefix sums of character statistics, so any slice of messages costs O(1)."""

    __slots__ = ("json", "media", "text")

    def __init__(self) -> None:
        self.text: list[int] = [0]
        self.json: list[int] = [0]
        self.media: list[int] = [0]

    @classmethod
    def of(cls, messages: Sequence[Message]) -> CharPrefix:
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

    def tokens(self, start: int, stop: int, image_token_estimate: int) -> int:
        """``estimate_stats_tokens(self.stats(start, stop), image_token_estimate)``, without
        making the statistics."""
        return chars_tokens(
            self.text[stop] - self.text[start],
            self.json[stop] - self.json[start],
            self.media[stop] - self.media[start],
            image_token_estimate,
        )


class Estimated:
    """One call's estimation row, and the calibration learned from the calls before it."""

    __slots__ = ("calibration", "row")

    def __init__(self, row: CallRow, calibration: Calibration) -> None:
        self.row: Final = row
        self.calibration: Final = calibration


class EstimationPass:
    """One estimation pass over a transcript."""

    __slots__ = ("baseline", "final", "items")

    def __init__(self) -> None:
        self.items: list[Estimated] = []
        self.baseline = 0
        self.final = Calibration()


def estimate_calls(
    transcript: Transcript, options: ReplayOptions, out: EstimationPass | None = None
) -> Iterator[Estimated]:
    """Yield the estimates call by call; ``out`` collects them with the baseline and the
    calibration learned after the last call."""
    out = out if out is not None else EstimationPass()
    calls = transcript.calls
    if not calls:
        return
    images = options.image_token_estimate
    thresholds = compute_thresholds(options.window)
    prefix = CharPrefix.of(transcript.messages)
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
            warm = previous.prompt_tokens + prefix.tokens(
                previous.preceding, call.preceding, images
            )
        calibrated = baseline + calibrated_estimate(
            plain, calibration, stats, image_token_estimate=images
        )
        learned = baseline + calibrated_tokens(calibration, stats, image_token_estimate=images)
        row = CallRow(
            call=call.index + 1,
            reported=call.prompt_tokens,
            estimate_cold=cold,
            estimate_warm=warm,
            estimate_calibrated_applied=calibrated,
            estimate_calibrated=learned,
            tier=thresholds.tier(call.prompt_tokens),
            compacted_before=new_context,
        )
        item = Estimated(row, calibration)
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
    for estimated in estimate_calls(transcript, options):
        yield estimated.row

"""The counts a compaction works with, and the scale they are on (SPEC §6, §10.6). Pure.

The count a compaction starts from is the provider's, the engine's calibrated estimate or its
own plain estimate; what it removes and adds is measured by the local counter, plain, unless the
provider reported it. :func:`count_scale` says how the two relate, so a new count is taken on
the scale of the original (design decision 98), never as "provider count minus a plain
estimate".
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from autocompact.compaction.attempt import CompressOptions
from autocompact.content import Message, Usage
from autocompact.estimation import (
    estimate_content_tokens,
    estimate_text_tokens,
    estimate_tools_tokens,
)

__all__ = ["cold_options", "count_history_tokens", "count_scale", "summary_size"]


def count_history_tokens(history: Sequence[Message], options: CompressOptions) -> int:
    """The history's size: the provider's count when known, else the cold estimate."""
    if options.last_prompt_token_count > 0:
        return options.last_prompt_token_count
    return (
        estimate_content_tokens(history, options.image_token_estimate)
        + estimate_text_tokens(options.system_instruction)
        + estimate_tools_tokens(options.tools)
    )


def cold_options(options: CompressOptions) -> CompressOptions:
    """``options`` with no count: :func:`count_history_tokens` then gives the plain estimate."""
    return CompressOptions(
        context_window=options.context_window,
        system_instruction=options.system_instruction,
        tools=options.tools,
        image_token_estimate=options.image_token_estimate,
    )


def count_scale(history: Sequence[Message], options: CompressOptions, original: int) -> Fraction:
    """Provider tokens per plain estimated token of ``original``, the count of ``history`` a
    compaction starts from: what it removes is taken off that count at this scale.

    At or below 1, the count's own ratio to the plain estimate of the history (design decision
    83). Above, the learned ``options.token_scale``, capped at that ratio; a count the
    compaction estimated itself is plain (1). The ratio alone is not the tokenizer's: a count
    also holds what the local counter cannot see (a hidden system prompt), which no compaction
    removes. The factor alone could outgrow a count that holds the messages added since the
    provider counted at their plain estimate, or was learned on another mix of text and JSON.
    """
    plain = count_history_tokens(history, cold_options(options))
    if plain <= 0:
        return Fraction(1)
    ratio = Fraction(original, plain)  # exact: the figures it sizes are whole tokens
    if ratio <= 1:
        return ratio
    return min(ratio, max(Fraction(1), Fraction(options.token_scale)))


def summary_size(
    usage: Usage | None, summary: str, model_text: str, *, local: bool, scale: Fraction
) -> tuple[int, int]:
    """The summary's size as written (telemetry) and on the count's scale (the new count).

    The model's own count of what it wrote is on the provider's scale already; what the
    retention audit appended to ``model_text`` to make ``summary``, and a size that is an
    estimate (the local summarizer's, or no usage reported), are plain and scaled up by
    ``scale`` (never down: an estimate may only raise a count). A whole estimate times a factor
    is rounded to the nearest token: a factor a hair above 1 (a provider's rounding) adds none.
    """
    up = max(Fraction(1), scale)
    counted = usage.output_tokens if usage and usage.output_tokens > 0 else 0
    if counted and not local:
        appended = max(0, estimate_text_tokens(summary) - estimate_text_tokens(model_text))
        return counted + appended, counted + round(appended * up)
    written = counted or estimate_text_tokens(summary)  # an estimate, the local one too
    return written, round(written * up)

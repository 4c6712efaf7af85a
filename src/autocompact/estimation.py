"""Local token estimates (SPEC §4). Pure.

One character counter, shared with input slimming: text and thinking by length, function calls
and responses by the length of their JSON form, each image or document as
``image_token_estimate × BYTES_PER_TOKEN`` characters. Tokens: text at 4 characters a token, JSON
at 2, each image or document at ``image_token_estimate``; rounded up.

The estimate may only make compaction fire earlier; paths that lower a count or skip a
compaction use the provider's count.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autocompact.content import CharStats, Message, Part, as_message, json_form
from autocompact.errors import ContentError
from autocompact.thresholds import DEFAULT_IMAGE_TOKEN_ESTIMATE

__all__ = [
    "BYTES_PER_TOKEN",
    "BYTES_PER_TOKEN_JSON",
    "PendingMessage",
    "content_stats",
    "estimate_content_chars",
    "estimate_content_tokens",
    "estimate_prompt_tokens",
    "estimate_stats_tokens",
    "estimate_text_tokens",
    "estimate_tools_tokens",
    "stats_chars",
]

BYTES_PER_TOKEN = 4
BYTES_PER_TOKEN_JSON = 2

PendingMessage = Message | str | Sequence[Part] | None
"""What may be passed as the message about to be sent."""

Contents = Iterable[Message | Part]


def content_stats(contents: Contents) -> CharStats:
    """Sum of the cached character statistics of messages and/or parts."""
    text = json_chars = media = 0
    for item in contents:
        stats = item.stats
        text += stats.text_chars
        json_chars += stats.json_chars
        media += stats.media_parts
    return CharStats(text_chars=text, json_chars=json_chars, media_parts=media)


def estimate_content_chars(
    contents: Contents, image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE
) -> int:
    """The character count of messages or parts, as the one shared counter sees them."""
    return stats_chars(content_stats(contents), image_token_estimate)


def stats_chars(stats: CharStats, image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE) -> int:
    """The character count of already-summed statistics (media at a fixed size each)."""
    return (
        stats.text_chars
        + stats.json_chars
        + stats.media_parts * image_token_estimate * BYTES_PER_TOKEN
    )


def estimate_stats_tokens(
    stats: CharStats, image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE
) -> int:
    """Tokens of already-summed character statistics, rounded up."""
    exact = (
        stats.text_chars / BYTES_PER_TOKEN
        + stats.json_chars / BYTES_PER_TOKEN_JSON
        + stats.media_parts * image_token_estimate
    )
    return math.ceil(exact)


def estimate_content_tokens(
    contents: Contents, image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE
) -> int:
    """Estimated tokens of messages or parts: text at 4 chars, JSON at 2, media at a fixed count."""
    return estimate_stats_tokens(content_stats(contents), image_token_estimate)


def estimate_text_tokens(text: str | None) -> int:
    """Estimated tokens of a plain string (the system instruction)."""
    return math.ceil(len(text) / BYTES_PER_TOKEN) if text else 0


def estimate_tools_tokens(tools: Iterable[Mapping[str, Any] | object] | None) -> int:
    """Estimated tokens of tool declarations, by the length of their JSON form."""
    if not tools:
        return 0
    chars = sum(len(json_form(_tool_as_json(tool))) for tool in tools)
    return math.ceil(chars / BYTES_PER_TOKEN_JSON)


def _tool_as_json(tool: Mapping[str, Any] | object) -> object:
    if isinstance(tool, Mapping):
        return tool
    as_dict = getattr(tool, "as_json", None)
    return as_dict() if callable(as_dict) else tool


def estimate_prompt_tokens(
    history: Sequence[Message],
    user_message: PendingMessage,
    last_prompt_token_count: int,
    *,
    system_instruction: str | None = None,
    tools: Iterable[Mapping[str, Any] | object] | None = None,
    image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE,
) -> int:
    """The size of the next request before it is sent (SPEC §4).

    Main path (``last_prompt_token_count > 0``): the provider's last count plus the pending
    message; no walk over the history. Cold path (first send of a restored session or of a
    sub-agent that inherits a history): the whole history, the pending message, and the system
    instruction and tool declarations when given.
    """
    pending = 0
    if user_message is not None:
        pending = estimate_content_tokens([as_message(user_message)], image_token_estimate)
    if last_prompt_token_count > 0:
        return last_prompt_token_count + pending
    return (
        estimate_content_tokens(history, image_token_estimate)
        + pending
        + estimate_text_tokens(system_instruction)
        + estimate_tools_tokens(tools)
    )


# -- Calibration ---------------------------------------------------------------------------------
#
# The fixed ratios above are a guess about the tokenizer. A session learns its own from the
# prompt sizes the provider reports: after each call, the reported size (minus what the local
# counter cannot see, such as a hidden system prompt) over the plain estimate of the same content
# is the session's calibration factor. A later cold estimate (a restored session's first send)
# uses it, but only to RAISE the plain estimate: the estimate may make compaction fire earlier,
# never later (SPEC §4).

MIN_CALIBRATION_TOKENS = 500
"""Samples whose visible content is smaller than this (plain tokens) do not teach the ratio."""

_FACTOR_BOUNDS = (0.25, 4.0)


@dataclass(frozen=True, kw_only=True, slots=True)
class Calibration:
    """What a session learned about its tokenizer from reported usage.

    Attributes:
        factor: reported content tokens over the plain estimate of the same content, for text
            and JSON alike (1.0 until a sample taught otherwise). Images and documents keep
            their fixed estimate.
        samples: how many reported sizes taught it.
    """

    factor: float = 1.0
    samples: int = 0

    @property
    def text_chars_per_token(self) -> float:
        """The effective characters per token of text and thinking."""
        return BYTES_PER_TOKEN / self.factor

    @property
    def json_chars_per_token(self) -> float:
        """The effective characters per token of function call / response JSON."""
        return BYTES_PER_TOKEN_JSON / self.factor

    def to_dict(self) -> dict[str, Any]:
        """The JSON form saved with a session."""
        return {"factor": self.factor, "samples": self.samples}

    @classmethod
    def from_dict(cls, data: object) -> Calibration:
        """A calibration from its JSON form (``None`` gives the uncalibrated default).

        Raises:
            ContentError: the value is not a calibration; the message names the field.
        """
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise ContentError(f"calibration must be an object, got {type(data).__name__}")
        factor = data.get("factor", 1.0)
        samples = data.get("samples", 0)
        if isinstance(factor, bool) or not isinstance(factor, int | float):
            raise ContentError(f"calibration field 'factor' must be a number, got {factor!r}")
        low, high = _FACTOR_BOUNDS
        if not math.isfinite(factor) or not low <= factor <= high:
            raise ContentError(
                f"calibration field 'factor' must be in [{low}, {high}], got {factor}"
            )
        if isinstance(samples, bool) or not isinstance(samples, int) or samples < 0:
            raise ContentError(f"calibration field 'samples' must be a count ≥ 0, got {samples!r}")
        return cls(factor=float(factor), samples=samples)


def _plain_content_tokens(stats: CharStats) -> float:
    return stats.text_chars / BYTES_PER_TOKEN + stats.json_chars / BYTES_PER_TOKEN_JSON


def update_calibration(
    calibration: Calibration,
    stats: CharStats,
    reported_tokens: int,
    *,
    baseline_tokens: int = 0,
    image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE,
    weight: float = 1.0,
) -> Calibration:
    """Learn from one reported prompt size.

    Args:
        calibration: what was learned so far.
        stats: the character statistics of everything the provider counted that the local
            counter can see (history, and the system instruction / tools when known).
        reported_tokens: the prompt size the provider reported for exactly that content.
        baseline_tokens: tokens the provider counted that ``stats`` does not cover (a system
            prompt and tools the caller cannot see); 0 when ``stats`` covers everything.
        image_token_estimate: tokens per image or document (kept fixed, not learned).
        weight: how much the new sample counts against the old factor (1.0: only the newest).
            Consecutive calls share almost all their content, so the newest ratio predicts
            the next call best.

    Returns:
        The updated calibration; unchanged when the sample is too small to teach anything.
    """
    plain = _plain_content_tokens(stats)
    content = reported_tokens - baseline_tokens - stats.media_parts * image_token_estimate
    if plain < MIN_CALIBRATION_TOKENS or content <= 0 or not 0 < weight <= 1:
        return calibration
    low, high = _FACTOR_BOUNDS
    ratio = min(high, max(low, content / plain))
    if calibration.samples == 0:
        factor = ratio
    else:
        factor = (1 - weight) * calibration.factor + weight * ratio
    return Calibration(factor=factor, samples=calibration.samples + 1)


def calibrated_tokens(
    calibration: Calibration,
    stats: CharStats,
    *,
    image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE,
) -> int:
    """The learned estimate of content (two-sided: may be below the plain estimate)."""
    exact = calibration.factor * _plain_content_tokens(stats)
    return math.ceil(exact + stats.media_parts * image_token_estimate)


def calibrated_estimate(
    plain: int,
    calibration: Calibration,
    stats: CharStats,
    *,
    image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE,
) -> int:
    """A cold estimate raised by calibration: ``max(plain, learned)``, never below ``plain``.

    Args:
        plain: the plain estimate of the same content (as from :func:`estimate_stats_tokens`,
            plus any baseline the caller adds on both sides).
        calibration: what the session learned.
        stats: the character statistics ``plain`` was computed from.
        image_token_estimate: tokens per image or document.
    """
    learned = calibrated_tokens(calibration, stats, image_token_estimate=image_token_estimate)
    return max(plain, learned)


__all__ += [
    "MIN_CALIBRATION_TOKENS",
    "Calibration",
    "calibrated_estimate",
    "calibrated_tokens",
    "update_calibration",
]

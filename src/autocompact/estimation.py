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

from autocompact.content import CharStats, Message, Part, as_message, json_length
from autocompact.errors import ConfigError, ContentError
from autocompact.jsonsafe import is_array
from autocompact.thresholds import DEFAULT_IMAGE_TOKEN_ESTIMATE
from autocompact.validation import (
    check_count,
    check_optional_str,
    explain_bad_items,
)

__all__ = [
    "BYTES_PER_TOKEN",
    "BYTES_PER_TOKEN_JSON",
    "PendingMessage",
    "chars_tokens",
    "content_stats",
    "estimate_content_chars",
    "estimate_content_tokens",
    "estimate_prompt_tokens",
    "estimate_stats_tokens",
    "estimate_text_tokens",
    "estimate_tools_tokens",
    "stats_chars",
    "tool_json_chars",
    "tools_json_chars",
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
        stats = item._stats  # measured already (the usual case), else measured now
        if isinstance(stats, tuple):  # a message history_from_dicts left undecoded: its counts
            text += stats[1]
            json_chars += stats[2]
            continue
        if stats is None:
            stats = item.stats
        text += stats.text_chars
        json_chars += stats.json_chars
        media += stats.media_parts
    return CharStats(text_chars=text, json_chars=json_chars, media_parts=media)


def estimate_content_chars(
    contents: Contents, image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE
) -> int:
    """The character count of messages or parts, as the one shared counter sees them."""
    try:
        return stats_chars(content_stats(contents), image_token_estimate)
    except (AttributeError, TypeError) as exc:
        explain_bad_items(contents, "contents", exc, parts=True)


def stats_chars(stats: CharStats, image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE) -> int:
    """The character count of already-summed statistics (media at a fixed size each)."""
    return (
        stats.text_chars
        + stats.json_chars
        + stats.media_parts * image_token_estimate * BYTES_PER_TOKEN
    )


def chars_tokens(
    text_chars: int,
    json_chars: int,
    media_parts: int,
    image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE,
) -> int:
    """Tokens of character counts, rounded up: text at 4 characters a token, JSON at 2, each
    media part at a fixed count (for counts summed without making a :class:`CharStats`)."""
    exact = (
        text_chars / BYTES_PER_TOKEN
        + json_chars / BYTES_PER_TOKEN_JSON
        + media_parts * image_token_estimate
    )
    return math.ceil(exact)


def estimate_stats_tokens(
    stats: CharStats, image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE
) -> int:
    """Tokens of already-summed character statistics, rounded up."""
    return chars_tokens(stats.text_chars, stats.json_chars, stats.media_parts, image_token_estimate)


def estimate_content_tokens(
    contents: Contents, image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE
) -> int:
    """Estimated tokens of messages or parts: text at 4 chars, JSON at 2, media at a fixed count.

    Raises:
        ContentError: an item is neither a message nor a part (named by its index).
    """
    try:
        return estimate_stats_tokens(content_stats(contents), image_token_estimate)
    except (AttributeError, TypeError) as exc:
        explain_bad_items(contents, "contents", exc, parts=True)


def estimate_text_tokens(text: str | None) -> int:
    """Estimated tokens of a plain string (the system instruction)."""
    return math.ceil(len(text) / BYTES_PER_TOKEN) if text else 0


def estimate_tools_tokens(tools: Iterable[Mapping[str, Any] | object] | None) -> int:
    """Estimated tokens of tool declarations, by the length of their JSON form (each distinct
    declaration object measured once: see :func:`tool_json_chars`)."""
    if not tools:
        return 0
    return math.ceil(tools_json_chars(tools) / BYTES_PER_TOKEN_JSON)


# Tool declarations measured so far: id -> (the declaration, its JSON length). The entry holds
# the object itself, so its id cannot be reused by another object while it is cached, and the
# identity check below makes a hit certain. Bounded: cleared when it grows past the limit.
_TOOL_CHARS: dict[int, tuple[object, int]] = {}
_TOOL_CACHE_LIMIT = 4096


def tool_json_chars(tool: Mapping[str, Any] | object) -> int:
    """The JSON length of one tool declaration (a mapping, or an object with ``as_json()``),
    measured once per distinct object (issue 25: agents pass the same declarations on every
    call). A declaration is treated as immutable once measured, as messages are: to change
    one, pass a new object."""
    key = id(tool)
    hit = _TOOL_CHARS.get(key)
    if hit is not None and hit[0] is tool:
        return hit[1]
    chars = json_length(_tool_as_json(tool))
    if len(_TOOL_CHARS) >= _TOOL_CACHE_LIMIT:
        _TOOL_CHARS.clear()
    _TOOL_CHARS[key] = (tool, chars)
    return chars


def tools_json_chars(tools: Iterable[Mapping[str, Any] | object] | None) -> int:
    """The summed JSON length of tool declarations, each measured once per object
    (:func:`tool_json_chars`)."""
    if not tools:
        return 0
    return sum(tool_json_chars(tool) for tool in tools)


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

    Raises:
        ConfigError: a count that is not a whole number of 0 or more, a system instruction that
            is not a string, tools that are not a list of declarations.
        ContentError: a history item that is not a :class:`~autocompact.content.Message`.
    """
    check_count(last_prompt_token_count, "last_prompt_token_count")
    check_count(image_token_estimate, "image_token_estimate")
    check_optional_str(system_instruction, "system_instruction")
    if tools is not None and not is_array(tools):
        raise ConfigError(
            f"tools must be a list of tool declarations, got {type(tools).__name__}", key="tools"
        )
    pending = 0
    if user_message is not None:
        pending = estimate_content_tokens([as_message(user_message)], image_token_estimate)
    if last_prompt_token_count > 0:
        return last_prompt_token_count + pending
    try:
        walked = estimate_stats_tokens(content_stats(history), image_token_estimate)
    except (AttributeError, TypeError) as exc:  # not a history: the check names what is wrong
        explain_bad_items(history, "history", exc)
    return (
        walked + pending + estimate_text_tokens(system_instruction) + estimate_tools_tokens(tools)
    )


# -- Calibration ---------------------------------------------------------------------------------
#
# The fixed ratios above are a guess about the tokenizer. A session learns its own from the
# prompt sizes the provider reports: after each call, the reported size (minus what the local
# counter cannot see, such as a hidden system prompt) over the plain estimate of the same content
# is the session's calibration factor. A later cold estimate (a restored session's first send)
# uses it: first only to raise the plain estimate, and once it has learned from enough reports
# both ways, clamped and with a margin on the low side (issue 11): a restored session whose
# plain estimate runs 25 % high no longer compacts 25 % early.

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
        json_share: the share of function-call / response JSON (in plain tokens) in the content
            of the last report (``None``: unknown). A factor learned on one mix of text and JSON
            is not applied downward to content of a very different mix.
    """

    factor: float = 1.0
    samples: int = 0
    json_share: float | None = None

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
        data: dict[str, Any] = {"factor": self.factor, "samples": self.samples}
        if self.json_share is not None:
            data["json_share"] = self.json_share
        return data

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
        share = data.get("json_share")
        if share is not None and (
            isinstance(share, bool)
            or not isinstance(share, int | float)
            or not math.isfinite(share)
            or not 0 <= share <= 1
        ):
            raise ContentError(f"calibration field 'json_share' must be in [0, 1], got {share!r}")
        return cls(
            factor=float(factor),
            samples=samples,
            json_share=None if share is None else float(share),
        )


def _plain_content_tokens(stats: CharStats) -> float:
    return stats.text_chars / BYTES_PER_TOKEN + stats.json_chars / BYTES_PER_TOKEN_JSON


def _json_share(stats: CharStats) -> float | None:
    content = _plain_content_tokens(stats)
    return (stats.json_chars / BYTES_PER_TOKEN_JSON) / content if content > 0 else None


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
    return Calibration(
        factor=factor, samples=calibration.samples + 1, json_share=_json_share(stats)
    )


def calibrated_tokens(
    calibration: Calibration,
    stats: CharStats,
    *,
    image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE,
) -> int:
    """The learned estimate of content (two-sided: may be below the plain estimate)."""
    exact = calibration.factor * _plain_content_tokens(stats)
    return math.ceil(exact + stats.media_parts * image_token_estimate)


CALIBRATION_MIN_SAMPLES = 2
"""Reports a calibration must have learned from before it may LOWER a cold estimate (before
that it only raises). Measured on the recorded sessions (docs/design.md): one report already
predicts the next call within ±10 % on 98 % of calls, since consecutive calls share almost all
their content; a second report guards against one unrepresentative count (a first call that is
mostly a hidden system prompt) for a cost of 0.6 points."""

APPLIED_FACTOR_BOUNDS = (0.5, 2.0)
"""The factor applied to a cold estimate is clamped here (real tokenizers measure 0.5–2.0)."""

MIX_TOLERANCE = 0.25
"""A factor is applied as learned to content whose JSON share is within this of the share it was
learned on. Beyond it, only the part of the content that has the learned mix is scaled by the
factor; the rest is of a kind the session has not measured and is sized at
:data:`UNLEARNED_FACTOR` (see :func:`calibrated_estimate`)."""

UNLEARNED_FACTOR = APPLIED_FACTOR_BOUNDS[1]
"""Provider tokens per plain-estimate token assumed for content whose ratio the session has not
measured: the top of the supported tokenizer range, the safe side (an estimate that errs high
makes compaction fire early, one that errs low late). The same worst case sizes a trimmed
request before anything is learned (``compaction.fallback.UNKNOWN_SCALE``). On the recorded
sessions this covers the first call after a compaction, where a factor learned on tool output
(JSON, ~0.7) put the estimate 13–16 % under; it is replaced by a measured factor at the next
report (docs/design.md, issue 11: content the calibration has not seen)."""

LOW_SIDE_MARGIN = 0.03
"""A factor below 1 is applied 3 % closer to 1: an estimate that errs low makes compaction fire
late, one that errs high only early (SPEC §4)."""


def applied_factor(calibration: Calibration) -> float | None:
    """The factor a cold estimate of content of the learned mix is scaled by, both ways, or None
    while the calibration has too few reports to lower an estimate (it may still raise it)."""
    if calibration.samples < CALIBRATION_MIN_SAMPLES:
        return None
    low, high = APPLIED_FACTOR_BOUNDS
    factor = min(high, max(low, calibration.factor))
    if factor < 1:
        factor = min(1.0, factor * (1 + LOW_SIDE_MARGIN))
    return factor


def learned_mix_tokens(calibration: Calibration, stats: CharStats) -> float:
    """Plain tokens of the part of ``stats`` that has the mix of text and JSON the calibration
    was learned on (all of it within :data:`MIX_TOLERANCE`, or when the mix is unknown).

    Content with more text than the learned mix keeps all its JSON and the text that goes with
    it in the learned proportion; content with more JSON, the reverse. What is left over is of a
    kind the calibration has not measured.
    """
    text = stats.text_chars / BYTES_PER_TOKEN
    json_tokens = stats.json_chars / BYTES_PER_TOKEN_JSON
    content = text + json_tokens
    learned_on = calibration.json_share
    if learned_on is None or content <= 0:
        return content
    share = json_tokens / content
    if abs(share - learned_on) <= MIX_TOLERANCE:
        return content
    return _mix_portion(learned_on, text, json_tokens)


def _mix_portion(learned_on: float, text: float, json_tokens: float) -> float:
    """Plain tokens of the part of (``text``, ``json_tokens``) that has JSON share
    ``learned_on``: all of the scarcer kind and the other in the learned proportion."""
    content = text + json_tokens
    if content <= 0:
        return 0.0
    if json_tokens / content < learned_on:  # more text than learned on
        portion = json_tokens / learned_on
    else:  # more JSON than learned on
        portion = text / (1 - learned_on) if learned_on < 1 else 0.0
    return min(content, portion)


def changed_mix_tokens(
    factor: float,
    learned: CharStats,
    stats: CharStats,
    *,
    image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE,
) -> int:
    """Provider tokens of ``stats`` sized on a ``factor`` learned on content ``learned``, when
    the content changed under the count (a compaction or a clearing replaced part of it).

    The part of ``stats`` that has the mix of ``learned`` is scaled by ``factor``; the rest, of
    a kind the factor says nothing about, by :data:`UNLEARNED_FACTOR` (or ``factor``, if
    higher). No tolerance: this sizes what the guarantee then relies on, and a tokenizer may
    count text and JSON up to 4× apart (SPEC §10.6).
    """
    learned_on = _json_share(learned)
    content = _plain_content_tokens(stats)
    matched = (
        content
        if learned_on is None
        else _mix_portion(
            learned_on, stats.text_chars / BYTES_PER_TOKEN, stats.json_chars / BYTES_PER_TOKEN_JSON
        )
    )
    exact = factor * matched + max(factor, UNLEARNED_FACTOR) * (content - matched)
    return math.ceil(exact + stats.media_parts * image_token_estimate)


def calibrated_estimate(
    plain: int,
    calibration: Calibration,
    stats: CharStats,
    *,
    image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE,
) -> int:
    """The cold estimate the engine applies (issue 11: calibration both ways).

    Once the calibration learned from :data:`CALIBRATION_MIN_SAMPLES` reports, the learned
    factor, clamped to :data:`APPLIED_FACTOR_BOUNDS` and with :data:`LOW_SIDE_MARGIN` when it
    lowers, replaces the fixed ratios for the content of the mix it was learned on: the estimate
    may go below ``plain``. Content beyond that mix (:func:`learned_mix_tokens`: the summary
    that replaced tool output after a compaction) is sized at :data:`UNLEARNED_FACTOR` (or the
    factor, if higher) until a report on the new mix teaches its ratio. Before enough reports the
    calibration only raises: ``max(plain, learned)``.

    Args:
        plain: the plain estimate of ``stats`` (as from :func:`estimate_stats_tokens`).
        calibration: what the session learned.
        stats: the character statistics ``plain`` was computed from.
        image_token_estimate: tokens per image or document.
    """
    factor = applied_factor(calibration)
    if factor is None:
        learned = calibrated_tokens(calibration, stats, image_token_estimate=image_token_estimate)
        return max(plain, learned)
    content = _plain_content_tokens(stats)
    matched = learned_mix_tokens(calibration, stats)
    exact = factor * matched + max(factor, UNLEARNED_FACTOR) * (content - matched)
    return math.ceil(exact + stats.media_parts * image_token_estimate)


__all__ += [
    "APPLIED_FACTOR_BOUNDS",
    "CALIBRATION_MIN_SAMPLES",
    "LOW_SIDE_MARGIN",
    "MIN_CALIBRATION_TOKENS",
    "MIX_TOLERANCE",
    "UNLEARNED_FACTOR",
    "Calibration",
    "applied_factor",
    "calibrated_estimate",
    "calibrated_tokens",
    "changed_mix_tokens",
    "learned_mix_tokens",
    "update_calibration",
]

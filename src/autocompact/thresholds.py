"""The warn / auto / hard ladder (SPEC §2–§3): constants, thresholds and tiers. Pure.

::

    effective_window = max(0, window − SUMMARY_RESERVE)
    auto = max(DEFAULT_PCT × window, effective_window − AUTOCOMPACT_BUFFER)
    warn = max((DEFAULT_PCT − WARN_PCT_OFFSET) × window, auto − WARN_BUFFER)
    hard = max(effective_window − HARD_BUFFER, auto)

Values are exact floats (0.7 × 131,072 = 91,750.4); displays round.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, TypeAlias

from autocompact.errors import ConfigError

__all__ = [
    "AUTOCOMPACT_BUFFER",
    "COMPACT_MAX_OUTPUT_TOKENS",
    "DEFAULT_IMAGE_TOKEN_ESTIMATE",
    "DEFAULT_PCT",
    "HARD_BUFFER",
    "MAX_CONSECUTIVE_FAILURES",
    "MAX_CONTEXT_WINDOW",
    "SMALLEST_WINDOW",
    "SUMMARY_RESERVE",
    "WARN_BUFFER",
    "WARN_PCT_OFFSET",
    "CompactionThresholds",
    "Tier",
    "TierSource",
    "check_thresholds",
    "check_tokens",
    "compute_thresholds",
    "finite_number",
    "parse_window",
    "tier_of",
]

DEFAULT_PCT = 0.7
WARN_PCT_OFFSET = 0.1
COMPACT_MAX_OUTPUT_TOKENS = 20_000
SUMMARY_RESERVE = 20_000
AUTOCOMPACT_BUFFER = 13_000
WARN_BUFFER = 20_000
HARD_BUFFER = 3_000
MAX_CONSECUTIVE_FAILURES = 3
DEFAULT_IMAGE_TOKEN_ESTIMATE = 1_600

# Load-bearing (SPEC §2): with thinking off the whole output budget is the summary.
assert SUMMARY_RESERVE == COMPACT_MAX_OUTPUT_TOKENS

TierSource: TypeAlias = Literal["proportional", "absolute", "collapsed"]


class Tier(StrEnum):
    """Where a token count stands on the ladder."""

    SAFE = "safe"
    WARN = "warn"
    AUTO = "auto"
    HARD = "hard"


@dataclass(frozen=True, kw_only=True, slots=True)
class CompactionThresholds:
    """The ladder for one context window. Invariant: ``0 ≤ warn ≤ auto ≤ hard``.

    Attributes:
        window: the model's context window in tokens.
        warn: from here the user is told compaction is coming.
        auto: from here an automatic compaction runs before the send.
        hard: from here a forced compaction runs before the send (bypasses the breaker).
        effective_window: the window minus the summary reserve.
        warn_source, auto_source, hard_source: which branch of the ``max()`` set each value
            (``"collapsed"``: hard fell onto auto, as on windows up to about 76.7K).
    """

    window: int
    warn: float
    auto: float
    hard: float
    effective_window: int
    warn_source: TierSource
    auto_source: TierSource
    hard_source: TierSource

    def tier(self, tokens: float) -> Tier:
        """The tier of a token count (hard is checked first)."""
        return tier_of(tokens, self)


MAX_CONTEXT_WINDOW = 100_000_000
"""The largest window accepted: ten times the largest published one (a typo guard)."""

SMALLEST_WINDOW = 1_000
"""The smallest window the command line and the settings files accept: below it no request of a
real agent fits (the ladder's arithmetic itself accepts any window)."""


def parse_window(value: object, *, name: str = "window", minimum: int = 0) -> int:
    """A context window from an int or a string such as ``131072``, ``128k``, ``1m`` or ``1.5M``.

    Args:
        value: the window.
        name: the argument, option or settings key to name in errors.
        minimum: the smallest value accepted (a session needs at least 1 token; the pure
            threshold arithmetic accepts 0).

    Raises:
        ConfigError: the value is below ``minimum``, above :data:`MAX_CONTEXT_WINDOW`, not a
            number, or not a whole number of tokens.
    """
    if isinstance(value, bool):
        raise ConfigError(f"{name} must be a number of tokens, not {value!r}", key=name)
    if isinstance(value, numbers.Integral):
        number = int(value)
    elif isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            raise ConfigError(
                f"{name} must be a whole number of tokens such as 131072, got {value!r}",
                key=name,
            )
        if value > MAX_CONTEXT_WINDOW:
            raise _too_large(name, value)
        number = int(value)
    elif isinstance(value, str):
        number = _parse_window_text(value, name)
    else:
        raise ConfigError(
            f"{name} must be a number of tokens such as 131072, 128k or 1m, "
            f"got {type(value).__name__} {value!r}",
            key=name,
        )
    if number < 0 and minimum <= 0:
        raise ConfigError(f"{name} must be 0 or more tokens, got {number}", key=name)
    if number < minimum:
        raise ConfigError(
            f"{name} must be at least {minimum:,} token{'s' if minimum != 1 else ''}, "
            f"got {number}: give the model's context window, e.g. 128k",
            key=name,
        )
    if number > MAX_CONTEXT_WINDOW:
        raise _too_large(name, number)
    return number


def _too_large(name: str, value: object) -> ConfigError:
    shown = f"{value:.3g}" if isinstance(value, float) else str(value)
    if len(shown) > 30:
        shown = shown[:12] + "…"
    return ConfigError(
        f"{name} {shown} is larger than any model's context window (at most "
        f"{MAX_CONTEXT_WINDOW:,} tokens): give the model's window, e.g. 128k or 1m",
        key=name,
    )


_SUFFIXES = {"": 1, "k": 1_000, "m": 1_000_000}


def _parse_window_text(text: str, name: str) -> int:
    cleaned = text.strip().lower().replace("_", "").replace(",", "")
    suffix = cleaned[-1:] if cleaned[-1:] in ("k", "m") else ""
    digits = cleaned[: len(cleaned) - len(suffix)]
    if digits.isascii() and digits.isdigit():
        # Whole digits are read exactly, never through a float (which rounds past 2**53).
        exact = int(digits) * _SUFFIXES[suffix]
        if exact > MAX_CONTEXT_WINDOW:
            raise _too_large(name, text.strip())
        return exact
    try:
        amount = float(digits)
    except ValueError:
        raise ConfigError(
            f"{name} {text!r} is not a number of tokens: write it like 131072, 128k or 1m",
            key=name,
        ) from None
    total = amount * _SUFFIXES[suffix]
    if math.isfinite(total) and total > MAX_CONTEXT_WINDOW:
        raise _too_large(name, text.strip())
    if not math.isfinite(total) or total != int(total):
        raise ConfigError(
            f"{name} {text!r} is not a whole number of tokens: write it like 131072, 128k or 1m",
            key=name,
        )
    return int(total)


def compute_thresholds(window: int) -> CompactionThresholds:
    """The warn / auto / hard ladder for a context window (SPEC §3).

    Args:
        window: the model's context window in tokens (0 or more).

    Raises:
        ConfigError: the window is negative or not a whole number.
    """
    window = parse_window(window)
    effective = max(0, window - SUMMARY_RESERVE)

    auto_prop = DEFAULT_PCT * window
    auto_abs = effective - AUTOCOMPACT_BUFFER
    auto = max(auto_prop, auto_abs)

    warn_prop = (DEFAULT_PCT - WARN_PCT_OFFSET) * window
    warn_abs = auto - WARN_BUFFER
    warn = max(warn_prop, warn_abs)

    hard_abs = effective - HARD_BUFFER
    hard = max(hard_abs, auto)

    return CompactionThresholds(
        window=window,
        warn=float(warn),
        auto=float(auto),
        hard=float(hard),
        effective_window=effective,
        # Ties go to "proportional": where both branches are equal the max() is continuous.
        warn_source="proportional" if warn_prop >= warn_abs else "absolute",
        auto_source="proportional" if auto_prop >= auto_abs else "absolute",
        hard_source="absolute" if hard_abs > auto else "collapsed",
    )


def tier_of(tokens: float, thresholds: CompactionThresholds) -> Tier:
    """The tier of a token count: hard first, so a collapsed window reports hard, never auto.

    Raises:
        ConfigError: ``tokens`` is no finite count of 0 or more (NaN would read as safe), or
            ``thresholds`` is no :class:`CompactionThresholds`.
    """
    if type(tokens) is not int or tokens < 0:
        check_tokens(tokens)
    if type(thresholds) is not CompactionThresholds:
        check_thresholds(thresholds)
    if tokens >= thresholds.hard:
        return Tier.HARD
    if tokens >= thresholds.auto:
        return Tier.AUTO
    if tokens >= thresholds.warn:
        return Tier.WARN
    return Tier.SAFE


def check_tokens(value: object, name: str = "tokens") -> float:
    """A token count: a finite number, 0 or more (an int or a real number; not a bool, not NaN).

    Raises:
        ConfigError: anything else; the message names ``name`` and the value.
    """
    number = finite_number(value)
    if number is not None and number >= 0:
        return number
    raise ConfigError(
        f"{name} must be a finite token count, 0 or more, got {type(value).__name__} {value!r:.60}",
        key=name,
    )


def check_thresholds(value: object, name: str = "thresholds") -> CompactionThresholds:
    """``value`` if it is a :class:`CompactionThresholds` (made by :func:`compute_thresholds`).

    Raises:
        ConfigError: anything else, naming ``name``.
    """
    if not isinstance(value, CompactionThresholds):
        raise ConfigError(
            f"{name} must be a CompactionThresholds (from compute_thresholds(window)), got "
            f"{type(value).__name__} {value!r:.60}",
            key=name,
        )
    return value


def finite_number(value: object) -> float | None:
    """``value`` as a float when it is a finite real number (not a bool), else ``None`` (an int
    past any float too)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None

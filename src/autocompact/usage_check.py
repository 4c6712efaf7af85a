"""Whether a provider's reported usage is believable (issue 27: believing absurd numbers).

A reported prompt count steers everything after it: the next request's size, the calibration
of the estimate, the tier. One absurd report (``prompt_tokens=10**12`` on a 32K window, a
streamed model reporting ``input_tokens=50`` on every response) must not be learned from: a
count too large makes the engine trim almost every later request to a sliver of the window, a
count too small makes it send requests over the window.

The rule (docs/design.md, decision 92): a count is believed when it is within
:data:`PLAUSIBLE_FACTOR` (10×) of the local estimate of what was sent, either way, with
:data:`PLAUSIBLE_SLACK` (2,048) tokens of slack for what a provider adds that is never sent as
content (its own system prompt, tool-use scaffolding, an image's real size) — so a tiny
request's count is never judged by its ratio alone. The estimate is within 2× of every
tokenizer seen (CJK, code, JSON); 10× is a count that cannot be of this request. A count outside
is logged (``autocompact`` logger, warning) and not learned from: the next send takes the
estimate (the cold path), as when no usage was reported.
"""

from __future__ import annotations

import logging

from autocompact.errors import ContentError

__all__ = ["PLAUSIBLE_FACTOR", "PLAUSIBLE_SLACK", "check_count", "plausible_prompt_count"]

PLAUSIBLE_FACTOR = 10.0
"""How far (either way) a reported prompt count may be from the local estimate."""
PLAUSIBLE_SLACK = 2_048
"""Tokens a provider may add to (or cache away from) a request beyond the factor."""

logger = logging.getLogger("autocompact")


def plausible_prompt_count(reported: int, estimate: int, *, log: bool = True) -> bool:
    """Whether a reported prompt count could be of a request estimated at ``estimate`` tokens.

    Believed when ``estimate / 10 - 2048 <= reported <= estimate * 10 + 2048``. A count of 0
    (not reported) is not judged here: the callers treat it as no count.
    """
    high = estimate * PLAUSIBLE_FACTOR + PLAUSIBLE_SLACK
    low = estimate / PLAUSIBLE_FACTOR - PLAUSIBLE_SLACK
    if low <= reported <= high:
        return True
    if log:
        logger.warning(
            "autocompact: ignoring a reported prompt count of %s tokens for a request estimated "
            "at %s tokens (more than %g× away); the estimate is used instead",
            reported,
            estimate,
            PLAUSIBLE_FACTOR,
        )
    return False


def check_count(value: object, name: str) -> None:
    """Refuse a token count that is not a non-negative ``int``, naming the field.

    Raises:
        ContentError: e.g. ``Usage.prompt_tokens must be a whole number of tokens >= 0, got
            str '12'``.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ContentError(
            f"{name} must be a whole number of tokens >= 0, got {type(value).__name__} "
            f"{value!r:.40}; convert the provider's count (int(...)) before building a Usage"
        )

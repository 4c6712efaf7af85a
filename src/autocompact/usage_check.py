"""Whether a provider's reported usage is believable (issue 27: believing absurd numbers).

A reported prompt count steers everything after it: the next request's size, the calibration
of the estimate, the tier. One absurd report (``prompt_tokens=10**12`` on a 32K window, a
streamed model reporting ``input_tokens=50`` on every response) must not be learned from: a
count too large makes the engine trim almost every later request to a sliver of the window, a
count too small makes it send requests over the window.

The rule (docs/design.md, "Issue 27 — absurd usage counts"): a count is believed when it is within
:data:`PLAUSIBLE_FACTOR` (10×) of the local estimate of what was sent, either way, with
:data:`PLAUSIBLE_SLACK` (2,048) tokens of slack above for what a provider adds that is never sent as
content (its own system prompt, tool-use scaffolding, an image's real size) — so a tiny
request's count is never judged by its ratio alone; a count above that but within the context
window is believed too (only a count over the window is of no request the provider took). 10×
leaves room for a tokenizer far from the estimate (CJK text, dense JSON). A count outside
is logged (``autocompact`` logger, warning) and not learned from: the next send takes the
estimate (the cold path), as when no usage was reported.
"""

from __future__ import annotations

from autocompact.errors import ContentError

__all__ = [
    "PLAUSIBLE_FACTOR",
    "PLAUSIBLE_SLACK",
    "check_count",
    "plausible_prompt_count",
    "reported_count",
]

PLAUSIBLE_FACTOR = 10.0
"""How far (either way) a reported prompt count may be from the local estimate."""
PLAUSIBLE_SLACK = 2_048
"""Tokens a provider may add to (or cache away from) a request beyond the factor."""


def plausible_prompt_count(
    reported: int, estimate: int, *, window: int | None = None, log: bool = True
) -> bool:
    """Whether a reported prompt count could be of a request estimated at ``estimate`` tokens.

    Too low: ``reported < estimate / 10``. Too high: ``reported > estimate * 10 + 2048``
    and, when the ``window`` is known, also over the window (a count within the window may hold
    a prompt the provider adds and nothing is lost by believing it: compaction comes earlier;
    a count over the window is of no request the provider could have taken). A count of 0 (not
    reported) is not judged here: the callers treat it as no count.
    """
    high = estimate * PLAUSIBLE_FACTOR + PLAUSIBLE_SLACK
    if window is not None:
        high = max(high, window)
    low = estimate / PLAUSIBLE_FACTOR  # no slack below: a count under a tenth is of no request
    if low <= reported <= high:
        return True
    if log:
        import logging  # imported when a count is refused (rarely): not on every start

        logging.getLogger("autocompact").warning(
            "autocompact: ignoring a reported prompt count of %s tokens for a request estimated "
            "at %s tokens (more than %g× away); the estimate is used instead",
            reported,
            estimate,
            PLAUSIBLE_FACTOR,
        )
    return False


def reported_count(value: object) -> int:
    """A token count as a provider reported it in JSON: a whole number of 0 or more (an int, or
    a float without a fraction, below 2**53); anything else (missing, a string, a list, NaN,
    ``1e999``, a negative number) reads as not reported, 0."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, float):
        if not value.is_integer():  # (NaN and the infinities are not whole numbers either)
            return 0
        value = int(value)
    if isinstance(value, int) and 0 <= value < 2**53:
        return value
    return 0


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

"""The extractive summarizer: a ``<state_snapshot>`` built from the history itself, no model.

Split by concern (STYLE.md): :mod:`.gather` decides what to keep, :mod:`.rank` what fits,
:mod:`.render` how it reads; :mod:`.sentences` splits a message into sentences and
:mod:`.terms` holds the key-term helpers.

:func:`extractive_summary` is what the offline demo and replay use, and what the engine uses
when no model is available for the side query; its signature fits
``CompressionService(summarizer=...)``, which passes the summary's cap as ``max_tokens``.

Guarantees: the output is at most ``max_tokens × 4`` characters and smaller than its input
(by the shared character counter); it keeps first what constrains the work, the latest value of
each fact, the goal and its changes, the next step, errors with the line that says what failed,
and the files touched relative to the project root with the last action on each; it leaves out
harness lines, duplicates and empty sections; it cuts on word boundaries with a one-character
marker; an earlier snapshot at the start is merged section by section, never nested; and it
runs in O(n log n) of its input (a few sorts over the gathered items). Deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence

from autocompact.compaction.extractive.gather import gather
from autocompact.compaction.extractive.rank import select
from autocompact.compaction.extractive.render import FRAME, render
from autocompact.compaction.extractive.terms import key_terms, shorten_middle
from autocompact.content import Message
from autocompact.errors import ConfigError
from autocompact.estimation import BYTES_PER_TOKEN, estimate_content_chars
from autocompact.thresholds import COMPACT_MAX_OUTPUT_TOKENS

__all__ = ["MIN_SUMMARY_TOKENS", "extractive_summary", "key_terms", "shorten_middle"]

MIN_SUMMARY_TOKENS = 16
"""The smallest ``max_tokens`` accepted: room for the frame and one short line."""


def extractive_summary(
    messages: Sequence[Message], *, max_tokens: int = COMPACT_MAX_OUTPUT_TOKENS
) -> str:
    """A deterministic ``<state_snapshot>`` of ``messages``, written without a model.

    Args:
        messages: the part of the history to summarize; it is not modified.
        max_tokens: the most estimated tokens the summary may take (text at 4 characters a
            token).

    Returns:
        The snapshot text: at most ``max_tokens × 4`` characters, and shorter than the input.

    Raises:
        ConfigError: ``max_tokens`` is below :data:`MIN_SUMMARY_TOKENS`.
    """
    if max_tokens < MIN_SUMMARY_TOKENS:
        raise ConfigError(
            f"max_tokens must be at least {MIN_SUMMARY_TOKENS} for an extractive summary, got "
            f"{max_tokens}: pass a larger cap",
            key="max_tokens",
        )
    limit = max_tokens * BYTES_PER_TOKEN
    if messages:
        limit = min(limit, estimate_content_chars(messages) - 1)
    budget = max(0, limit - FRAME - 1)
    text = render(select(gather(messages), budget))
    return text if len(text) <= max(limit, FRAME) else "<state_snapshot>\n</state_snapshot>"

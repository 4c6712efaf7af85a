"""The extractive summarizer: a ``<state_snapshot>`` built from the history itself, no model.

It is the state ledger (:mod:`autocompact.compaction.ledger`) written within the cap: the goal
as stated and as changed, the user's constraints and preferences, the latest value of each fact
(an earlier value is never carried), the next step, task status, the latest test / build / lint
results, errors marked open or fixed, decisions, files relative to the project root with their
last action, and, room permitting, the most specific remaining sentences. Under a binding cap
the constraints and latest facts go first and are shortened (labels and filler words dropped)
before anything is left out; nothing is cut mid-word. An earlier snapshot at the start is read
back and updated, never nested (SPEC §10.5). Linear in its input; deterministic.

:func:`extractive_summary` is what the offline demo and replay use, and what the engine uses
when no model is available for the side query; its signature fits
``CompressionService(summarizer=...)``, which passes the summary's cap as ``max_tokens``.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING

from autocompact._lazy import lazy_names
from autocompact.compaction.ledger import Ledger, build_ledger, render_ledger
from autocompact.compaction.ledger.render import FRAME
from autocompact.compaction.ledger.tokens import least_token_share, token_share
from autocompact.content import Message, json_form
from autocompact.errors import ConfigError
from autocompact.estimation import BYTES_PER_TOKEN, estimate_content_chars
from autocompact.thresholds import COMPACT_MAX_OUTPUT_TOKENS
from autocompact.validation import check_history

if TYPE_CHECKING:
    from autocompact.compaction.extractive.terms import key_terms, shorten_middle

__all__ = ["MIN_SUMMARY_TOKENS", "extractive_summary", "key_terms", "shorten_middle"]


# key_terms and shorten_middle are offered here and used nowhere in the package: their module
# (and its patterns) is imported when one is first asked for, not by every summary.
__getattr__ = lazy_names(
    __name__, "autocompact.compaction.extractive.terms", ("key_terms", "shorten_middle")
)


MIN_SUMMARY_TOKENS = 16
"""The smallest ``max_tokens`` accepted: room for the frame and one short line."""
_EMPTY = "<state_snapshot>\n</state_snapshot>"
_SPARE = 0.95
# The ledger the compaction flow built of the messages it hands the summarizer, while it waits
# for the summary (:func:`known_ledger`): a summary of those same messages reads it instead of
# building it again.
_KNOWN: ContextVar[tuple[Sequence[Message], Ledger] | None] = ContextVar(
    "autocompact_known_ledger", default=None
)


def known_ledger(
    messages: Sequence[Message], ledger: Ledger
) -> Token[tuple[Sequence[Message], Ledger] | None]:
    """Let an extractive summary of ``messages`` (the same message objects, in order) use
    ``ledger``, which must be ``build_ledger(messages)``, until the returned token is reset."""
    return _KNOWN.set((messages, ledger))


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
        ConfigError: ``max_tokens`` is no whole number of :data:`MIN_SUMMARY_TOKENS` or more.
    """
    if (
        isinstance(max_tokens, bool)
        or not isinstance(max_tokens, int)
        or max_tokens < MIN_SUMMARY_TOKENS
    ):
        raise ConfigError(
            f"max_tokens must be a whole number of at least {MIN_SUMMARY_TOKENS} for an "
            f"extractive summary, got {max_tokens!r:.60}: pass a larger cap",
            key="max_tokens",
        )
    check_history(messages, name="messages", tool_pairs=False)
    limit = max_tokens * BYTES_PER_TOKEN
    if messages:
        limit = min(limit, estimate_content_chars(messages) - 1)
    if limit < FRAME:
        return _EMPTY
    # The cap is in plain estimated tokens (characters / 4) of a part whose text may be cheaper
    # in real tokens: the summary takes the same share of it by both measures, counted
    # conservatively (identifiers cost more than characters / 4 says), with 5 % to spare.
    texts = _texts(messages)
    known = _KNOWN.get()
    if known is not None and _same_messages(known[0], messages):
        ledger = known[1]
    else:
        ledger = build_ledger(messages)
    # Counting that share reads a long sample: it is skipped when the snapshot written without
    # the token cap is the one the cap gives. Every line the snapshot keeps costs its
    # characters and newline of the character budget (len(text) − FRAME in all), and at most as
    # many tokens (conservative_tokens never counts more than the characters; the frame takes
    # at most FRAME + 1). So when len(text) + 1 is within the fewest tokens the cap can be, each
    # line kept without the cap fits the token room at its turn too, and the lines are the same.
    text = render_ledger(ledger, limit)
    if len(text) + 1 > int(max_tokens * min(1.0, least_token_share(texts)) * _SPARE):
        tokens = int(max_tokens * min(1.0, token_share(texts)) * _SPARE)
        text = render_ledger(ledger, limit, tokens=tokens)
    return text if len(text) <= limit else _EMPTY


def _same_messages(known: Sequence[Message], messages: Sequence[Message]) -> bool:
    """Whether ``messages`` are the very message objects of ``known``, in order (the flow's
    local summarizer gets them in a new list: ``portable_history`` keeps the objects)."""
    return len(known) == len(messages) and all(map(operator.is_, known, messages))


def _texts(messages: Sequence[Message]) -> list[str]:
    out = []
    for message in messages:
        out.append(message.text)
        out.extend(json_form(c.arguments) for c in message.function_calls)
        out.extend(str(r.response) for r in message.function_responses)
    return out

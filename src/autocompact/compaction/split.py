"""Where to cut a history for compaction, without ever separating a call from its response. Pure.

SPEC §10.1: any complete call/response boundary is a candidate cut. A cut before message ``i``
is valid when no function call in ``history[:i]`` is answered in ``history[i:]``, the kept tail
does not begin with a function response, and (for a cut at the very end) the last message leaves
no call waiting for its response. So a kept tail may begin with a model message or a plain user
message, and a single long agent turn (one typed request, hundreds of tool calls) can be cut
anywhere between its steps.

The target is to keep the newest ``preserve_fraction`` of the history by estimated tokens: the
cut is the first valid boundary at or past ``(1 − preserve_fraction)`` of the tokens. When no
valid boundary lies there, the latest valid boundary is taken (keep only what must be kept: the
latest exchange). A call never answered anywhere in the history, other than in its last message,
does not block a cut (recorded agent sessions contain interrupted calls). Linear time.
"""

from __future__ import annotations

from collections.abc import Sequence

from autocompact.content import CharStats, Message
from autocompact.errors import ContentError
from autocompact.estimation import BYTES_PER_TOKEN, BYTES_PER_TOKEN_JSON
from autocompact.thresholds import DEFAULT_IMAGE_TOKEN_ESTIMATE
from autocompact.validation import explain_bad_items

__all__ = [
    "COMPRESSION_PRESERVE_THRESHOLD",
    "MIN_COMPRESSION_FRACTION",
    "exact_tokens",
    "find_split_point",
    "valid_cuts",
    "validate_history",
]

COMPRESSION_PRESERVE_THRESHOLD = 0.3
MIN_COMPRESSION_FRACTION = 0.05


def validate_history(history: Sequence[Message]) -> None:
    """Reject a history the engine cannot compact safely.

    Raises:
        ContentError: the history starts with a function response (its call is missing).
    """
    if history and history[0].function_responses:
        raise ContentError(
            "the history starts with a function response whose call is missing: "
            "start the history with a user message, or include the model message with the call",
            index=0,
        )


def exact_tokens(
    stats: CharStats, image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE
) -> float:
    """The estimate of SPEC §4 before rounding (sums of these do not drift)."""
    return (
        stats.text_chars / BYTES_PER_TOKEN
        + stats.json_chars / BYTES_PER_TOKEN_JSON
        + stats.media_parts * image_token_estimate
    )


def valid_cuts(history: Sequence[Message]) -> list[bool]:
    """``cuts[i]`` says whether a cut before message ``i`` is valid (``0 ≤ i ≤ len``).

    A cut at 0 compresses nothing and is always valid.
    """
    answered_at: dict[str, int] = {}
    responses = [message.function_responses for message in history]  # (read once)
    for index, answers in enumerate(responses):
        for response in answers:
            answered_at.setdefault(response.id, index)
    cuts = [True] * (len(history) + 1)
    waiting = 0  # calls before the boundary whose response lies after it
    pending: dict[int, int] = {}  # message index -> calls answered there
    for index, message in enumerate(history):
        if pending:
            waiting -= pending.pop(index, 0)
        cuts[index] = index == 0 or (waiting == 0 and not responses[index])
        for call in message.function_calls:
            answer = answered_at.get(call.id)
            if answer is not None and answer > index:
                waiting += 1
                pending[answer] = pending.get(answer, 0) + 1
    waiting -= pending.pop(len(history), 0)
    last = history[-1] if history else None
    open_at_end = last is not None and any(c.id not in answered_at for c in last.function_calls)
    cuts[len(history)] = waiting == 0 and not open_at_end
    return cuts


def find_split_point(
    history: Sequence[Message],
    preserve_fraction: float = COMPRESSION_PRESERVE_THRESHOLD,
    *,
    image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE,
) -> int:
    """The index of the first message to keep; ``history[:index]`` is compressed.

    Args:
        history: the conversation.
        preserve_fraction: the share of estimated tokens to keep verbatim, ``0 ≤ f < 1``
            (0: summarize everything that can be).
        image_token_estimate: tokens counted for an image or document.

    Raises:
        ValueError: ``preserve_fraction`` is not in ``[0, 1)``.
    """
    if (
        isinstance(preserve_fraction, bool)
        or not isinstance(preserve_fraction, int | float)
        or not 0 <= preserve_fraction < 1
    ):
        raise ValueError(f"preserve_fraction must be in [0, 1), got {preserve_fraction!r:.60}")
    try:
        if len(history) == 0:  # (None is no empty history)
            return 0
        tokens = [exact_tokens(m.stats, image_token_estimate) for m in history]
        cuts = valid_cuts(history)
    except (AttributeError, TypeError) as exc:
        explain_bad_items(history, "history", exc)
    target = sum(tokens) * (1 - preserve_fraction)
    best = 0
    cumulative = 0.0
    for index in range(1, len(history) + 1):
        cumulative += tokens[index - 1]
        if not cuts[index]:
            continue
        best = index
        if cumulative >= target:
            return index
    return best

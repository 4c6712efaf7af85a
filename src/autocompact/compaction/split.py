"""Where to cut a history for compaction, without ever separating a call from its response. Pure.

The newest ~30 % of the history (by the shared character counter) is kept; the cut is the first
user message past 70 % of the characters that carries no function response and leaves no call
waiting for its response. If no such message exists, everything is compressed when the last
message is a model message without a pending call; otherwise the cut falls at the last valid
point before the target (possibly 0: nothing to compress).
"""

from __future__ import annotations

from collections.abc import Sequence

from autocompact.content import FunctionResponsePart, Message
from autocompact.errors import ContentError
from autocompact.estimation import stats_chars
from autocompact.thresholds import DEFAULT_IMAGE_TOKEN_ESTIMATE

__all__ = [
    "COMPRESSION_PRESERVE_THRESHOLD",
    "MIN_COMPRESSION_FRACTION",
    "find_split_point",
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


def find_split_point(
    history: Sequence[Message],
    preserve_fraction: float = COMPRESSION_PRESERVE_THRESHOLD,
    *,
    image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE,
) -> int:
    """The index of the first message to keep; ``history[:index]`` is compressed.

    Args:
        history: the conversation.
        preserve_fraction: the share of characters to keep, strictly between 0 and 1.
        image_token_estimate: tokens counted for an image (via the shared counter).

    Raises:
        ValueError: ``preserve_fraction`` is not strictly between 0 and 1.
    """
    if not 0 < preserve_fraction < 1:
        raise ValueError(f"preserve_fraction must be between 0 and 1, got {preserve_fraction}")
    counts = [stats_chars(m.stats, image_token_estimate) for m in history]
    target = sum(counts) * (1 - preserve_fraction)
    last_split = 0
    cumulative = 0
    open_calls: set[str] = set()
    for index, message in enumerate(history):
        if _is_clean_user_turn(message) and not open_calls:
            if cumulative >= target:
                return index
            last_split = index
        for part in message.parts:
            if isinstance(part, FunctionResponsePart):
                open_calls.discard(part.id)
        open_calls.update(call.id for call in message.function_calls)
        cumulative += counts[index]
    if history and history[-1].role == "model" and not history[-1].function_calls:
        return len(history)
    return last_split


def _is_clean_user_turn(message: Message) -> bool:
    return message.role == "user" and not message.function_responses

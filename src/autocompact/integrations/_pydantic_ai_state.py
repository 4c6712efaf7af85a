"""The state the pydantic-ai capability carries in the history: the guard's state and what the
last tagged request sent, in that request's ``metadata`` (under :data:`STATE_KEY`), read back on
the next request with the provider's count of it."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from autocompact.content import CharStats
from autocompact.errors import MissingDependencyError
from autocompact.estimation import estimate_content_tokens, estimate_stats_tokens
from autocompact.guard import GuardResult, GuardState, learn_from_usage
from autocompact.integrations._pydantic_ai_convert import to_autocompact
from autocompact.usage_check import plausible_prompt_count

try:
    from pydantic_ai import messages as pm
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    raise MissingDependencyError("pydantic-ai-slim", "pydantic-ai") from exc

__all__ = ["STATE_KEY", "restore", "tag"]

logger = logging.getLogger("autocompact")

STATE_KEY = "autocompact"
"""The key of autocompact's state in a ``ModelRequest``'s ``metadata``."""

# -- state carried in the history ---------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _Restored:
    state: GuardState
    last_prompt_token_count: int


def _count(value: object) -> int | None:
    """A count read from the history: a whole number ≥ 0 (a float that is one, as a JSON store
    may give, too), else ``None`` (unreadable: infinite, NaN, negative, not a number)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def restore(history: Sequence[pm.ModelMessage], image_token_estimate: int) -> _Restored:
    """The state stored on the latest tagged request, what the response after it taught, and
    the provider's count of everything before the pending request."""
    tagged = None
    for index in range(len(history) - 2, -1, -1):
        message = history[index]
        if isinstance(message, pm.ModelRequest) and STATE_KEY in (message.metadata or {}):
            tagged = index
            break
    if tagged is None:
        return _Restored(state=GuardState(), last_prompt_token_count=0)
    record = (history[tagged].metadata or {})[STATE_KEY]
    if not isinstance(record, dict):
        logger.info(
            "ignoring message %d's metadata[%r]: not an object (%s)",
            tagged,
            STATE_KEY,
            type(record).__name__,
        )
        return _Restored(state=GuardState(), last_prompt_token_count=0)
    state = GuardState.from_dict(record.get("state"))
    response = history[tagged + 1] if tagged + 1 < len(history) - 1 else None
    if not isinstance(response, pm.ModelResponse):
        return _Restored(state=state, last_prompt_token_count=0)
    input_tokens = _count(response.usage.input_tokens)
    if not input_tokens:
        return _Restored(state=state, last_prompt_token_count=0)
    sent = record.get("sent")
    if isinstance(sent, dict):
        counts = [_count(sent.get(key, 0)) for key in ("text_chars", "json_chars", "media_parts")]
        if None in counts:
            logger.info(
                "ignoring message %d's metadata[%r]['sent']: its counts are not whole numbers "
                "≥ 0 (%r); the next request is sized from the estimate",
                tagged,
                STATE_KEY,
                sent,
            )
            return _Restored(state=state, last_prompt_token_count=0)
        stats = CharStats(
            text_chars=counts[0] or 0, json_chars=counts[1] or 0, media_parts=counts[2] or 0
        )
        estimate = estimate_stats_tokens(stats, image_token_estimate)
        if not plausible_prompt_count(input_tokens, estimate, log=False):
            logger.warning(
                "ignoring the model's prompt count of %d tokens: the request is about %d by "
                "the local estimate (more than 10x apart)",
                input_tokens,
                estimate,
            )
            return _Restored(state=state, last_prompt_token_count=0)
        state = learn_from_usage(
            state, stats, input_tokens, image_token_estimate=image_token_estimate
        )
    # What came after the counted request besides the pending one: the reply (and nothing else
    # in a normal run); estimated, at least the reported output.
    since = to_autocompact(history[tagged + 1 : -1]).messages
    since_tokens = max(_count(response.usage.output_tokens) or 0, estimate_content_tokens(since))
    # A trimmed request was counted without what the guarantee left out: add that back.
    left_out = record.get("left_out", 0)
    left_out = left_out if isinstance(left_out, int) and left_out > 0 else 0
    return _Restored(
        state=state,
        last_prompt_token_count=input_tokens + left_out + since_tokens,
    )


def tag(request: pm.ModelMessage, result: GuardResult, sent: dict[str, int]) -> pm.ModelMessage:
    metadata = dict(request.metadata or {})
    metadata[STATE_KEY] = {
        "state": result.state.to_dict(),
        "sent": sent,
        "left_out": result.left_out_tokens,
    }
    return dataclasses.replace(request, metadata=metadata)

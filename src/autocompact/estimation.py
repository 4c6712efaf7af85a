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
from typing import Any

from autocompact.content import CharStats, Message, Part, as_message, json_form
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
    stats = content_stats(contents)
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

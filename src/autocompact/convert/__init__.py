"""Conversions between the content model and plain provider-style message dicts. Pure.

Two wire shapes are understood, as plain ``dict`` objects (no SDK involved):

* **OpenAI chat completions**: ``system``/``developer``, ``user``, ``assistant`` (with
  ``tool_calls`` whose ``arguments`` are JSON strings, and the ``reasoning_content`` field that
  DeepSeek, Qwen and vLLM use for visible reasoning) and ``tool`` messages. Tool messages become
  :class:`FunctionResponsePart` objects in a ``user`` message; a user message that directly
  follows tool messages joins that same message, so a user turn of the content model round-trips.
* **Anthropic Messages**: ``content`` as a string or a list of blocks: ``text``, ``thinking``,
  ``redacted_thinking``, ``tool_use``, ``tool_result`` (string or block content, ``is_error``),
  ``image`` and ``document`` with a ``base64`` or ``url`` source.

Within a model turn the OpenAI form has a fixed order (reasoning, text, tool calls) and within a
user turn tool results come first; the Anthropic form keeps the order of the blocks.

Anything that cannot be expressed raises :class:`ContentError` naming the message index and the
type; nothing is dropped silently. Two documented exceptions: an Anthropic tool result's
``name`` is recovered from the matching ``tool_use`` (``"unknown"`` when there is none), and
OpenAI has no ``is_error`` flag for tool messages (it is not sent there).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autocompact._lazy import lazy_names
from autocompact.convert._common import (
    UNKNOWN_TOOL_NAME,
    ThinkingMode,
    data_url,
    media_url,
    parse_data_url,
    response_text,
)
from autocompact.convert.anthropic_messages import (
    from_anthropic_message,
    from_anthropic_messages,
    to_anthropic_message,
    to_anthropic_messages,
)

if TYPE_CHECKING:
    from autocompact.convert.openai_chat import from_openai_messages, to_openai_messages

__all__ = [
    "UNKNOWN_TOOL_NAME",
    "ThinkingMode",
    "data_url",
    "from_anthropic_message",
    "from_anthropic_messages",
    "from_openai_messages",
    "media_url",
    "parse_data_url",
    "response_text",
    "to_anthropic_message",
    "to_anthropic_messages",
    "to_openai_messages",
]


# The OpenAI conversion is imported when first asked for: reading a Claude Code transcript (the
# Anthropic form) needs none of it.
__getattr__ = lazy_names(
    __name__, "autocompact.convert.openai_chat", ("from_openai_messages", "to_openai_messages")
)

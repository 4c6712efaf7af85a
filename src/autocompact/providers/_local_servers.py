"""What the OpenAI adapter needs to know about local servers that stray from OpenAI's API.

Pure helpers (no SDK, no I/O): the tokenize endpoints a server may offer when its streams carry
no usage (``llama_cpp.server`` ignores ``stream_options``), how to read their replies, and the
text of a request to count with them.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Mapping
from typing import Any

__all__ = [
    "MESSAGE_OVERHEAD_TOKENS",
    "REPLY_OPENING_TOKENS",
    "TOKENIZE_ENDPOINTS",
    "prompt_text",
    "server_root",
    "token_count",
]

TOKENIZE_ENDPOINTS: tuple[tuple[str, str], ...] = (
    ("/extras/tokenize/count", "input"),  # llama_cpp.server: {"count": n}
    ("/tokenize", "content"),  # llama.cpp's llama-server: {"tokens": [...]}
)
"""Tokenize endpoints (path from the server's root, the body's text field), tried in order."""

MESSAGE_OVERHEAD_TOKENS = 5
"""Tokens a chat template adds around each message (role markers, turn separators): counting
the messages' text alone would always err low, and a low count is the unsafe side. Gemma's
``<start_of_turn>user\n … <end_of_turn>\n`` is 5 (measured on llama_cpp.server), as are
ChatML's and Llama 3's headers."""

REPLY_OPENING_TOKENS = 3
"""Tokens of the open model turn a template ends the prompt with (``<start_of_turn>model\n``)."""


def server_root(base_url: str) -> str:
    """``http://host:port`` of a base URL such as ``http://host:port/v1/``."""
    parts = urllib.parse.urlsplit(base_url)
    return f"{parts.scheme}://{parts.netloc}"


def token_count(reply: object) -> int | None:
    """The count in a tokenize endpoint's reply (``{"count": n}`` or ``{"tokens": [...]}``)."""
    if not isinstance(reply, Mapping):
        return None
    count = reply.get("count")
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        return count
    tokens = reply.get("tokens")
    if isinstance(tokens, list):
        return len(tokens)
    return None


def prompt_text(body: Mapping[str, Any]) -> tuple[str, int]:
    """The text of a chat-completions body to count, and how many messages it holds.

    Message text, tool calls and tool declarations are written out as they would be read by
    the model's template (JSON where the API carries JSON).
    """
    pieces: list[str] = []
    messages = body.get("messages") or []
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        if isinstance(content, str):
            pieces.append(content)
        elif isinstance(content, list):
            for block in content:
                if isinstance(block, Mapping) and isinstance(block.get("text"), str):
                    pieces.append(block["text"])
                else:
                    pieces.append(json.dumps(block, ensure_ascii=False))
        for field in ("tool_calls", "reasoning_content"):
            if message.get(field):
                value = message[field]
                pieces.append(value if isinstance(value, str) else json.dumps(value))
    if body.get("tools"):
        pieces.append(json.dumps(body["tools"], ensure_ascii=False))
    return "\n".join(pieces), len(messages)

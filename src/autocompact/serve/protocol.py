"""What the proxy needs from one wire protocol, and the pieces the protocols share. Pure.

Each protocol module (:mod:`.openai_chat`, :mod:`.anthropic_messages`, :mod:`.responses`)
provides one :class:`WireProtocol`: how its body names the messages, how they convert to the
content model and back, where the pending message starts, how a client's own compaction
request looks, and its error shapes (a JSON error body and an in-stream error event).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from autocompact.content import Message
from autocompact.jsonsafe import loads
from autocompact.providers.base import ChatRequest, Completion, ToolSpec

__all__ = [
    "CLIENT_SUMMARY_PROMPTS",
    "Converted",
    "WireProtocol",
    "looks_like_overflow",
    "reported_prompt_tokens",
    "response_prompt_tokens",
    "stated_window",
    "tool_spec",
]

CLIENT_SUMMARY_PROMPTS = re.compile(
    r"create a detailed summary of the conversation"  # Claude Code's /compact
    r"|context checkpoint compaction"  # Codex's compaction prompt
    r"|briefly summarize this partial conversation"  # aider's history summarizer
    r"|summarize the conversation so far"
    r"|summary of the conversation so far",
    re.IGNORECASE,
)
"""The openings of the summary requests known agents send themselves: such a request is the
client's own compaction and goes to the upstream untouched (README: docs/serve.md)."""

_OVERFLOW = re.compile(
    r"context[_ ]length[_ ]exceeded|maximum context length|prompt is too long"
    r"|exceeds? the (?:available )?context|context window|too many tokens"
    r"|exceed_context_size|input is too long|request too large|reduce the length",
    re.IGNORECASE,
)


def looks_like_overflow(status: int, body: bytes) -> bool:
    """Whether an upstream error says the request was too long (HTTP 413, or a 400/422 whose
    body names the context length)."""
    if status == 413:
        return True
    if status not in (400, 422):
        return False
    return bool(_OVERFLOW.search(body[:4096].decode("utf-8", "replace")))


# How servers state their window in an overflow error: OpenAI's "maximum context length is
# N tokens", llama-server's "the available context size (N tokens)" (and its n_ctx field),
# Anthropic's "N tokens > M maximum".
_STATED_WINDOW = re.compile(
    r"maximum context length is (\d[\d,]{0,14})|available context size \((\d[\d,]{0,14}) tokens"
    r"|tokens > (\d[\d,]{0,14}) maximum",
    re.IGNORECASE,
)


def stated_window(body: bytes) -> int | None:
    """The window an overflow error states (llama-server's ``n_ctx`` field, or in its
    message), ``None`` when it states none."""
    try:
        error = loads(body[:65536])
    except ValueError:
        error = None
    if isinstance(error, dict):
        inner = error.get("error", error)
        n_ctx = inner.get("n_ctx") if isinstance(inner, dict) else None
        if isinstance(n_ctx, int) and not isinstance(n_ctx, bool) and n_ctx > 0:
            return n_ctx
    match = _STATED_WINDOW.search(body[:4096].decode("utf-8", "replace"))
    if match is None:
        return None
    return int(next(g for g in match.groups() if g).replace(",", ""))


# A count has at most 15 digits: a longer number is no count (and past 4,300 digits int()
# refuses it).
_COUNT = rb"\s*:\s*(\d{1,15})(?!\d)"
_PROMPT_TOKENS = re.compile(rb'"prompt_tokens"' + _COUNT)
_INPUT_TOKENS = re.compile(
    rb'"(input_tokens|cache_creation_input_tokens|cache_read_input_tokens)"' + _COUNT
)


def reported_prompt_tokens(data: bytes) -> int | None:
    """The prompt size an upstream reported in a response or stream (``None``: not found).

    OpenAI chat: ``prompt_tokens``; Responses: ``input_tokens``; Anthropic: ``input_tokens``
    plus the cache creation and cache read tokens (the first of each: a stream's
    ``message_start``). A number of more than 15 digits is not read as a count.
    """
    match = _PROMPT_TOKENS.search(data)
    if match is not None:
        return int(match.group(1))
    seen: dict[bytes, int] = {}
    for found in _INPUT_TOKENS.finditer(data):
        seen.setdefault(found.group(1), int(found.group(2)))
    return sum(seen.values()) if seen else None


def response_prompt_tokens(content: bytes) -> int | None:
    """The prompt size a whole (not streamed) response reported: read in its own ``usage``, as
    :func:`reported_prompt_tokens` reads it (a tool call's input before it, an object in an
    Anthropic reply, may hold keys of the same names); a body that is no JSON object is read
    as a stream. A number too long to read (thousands of digits) reads as none."""
    try:
        body = loads(content, long_integers_as_none=True)
    except ValueError:
        return reported_prompt_tokens(content)
    if not isinstance(body, dict):
        return reported_prompt_tokens(content)
    usage = body.get("usage")
    return reported_prompt_tokens(json.dumps(usage).encode()) if isinstance(usage, dict) else None


@dataclass(frozen=True, kw_only=True)
class Converted:
    """A request's conversation in the content model.

    Attributes:
        system: the system prompt (counted, never replaced).
        messages: the conversation; the last is the pending user message or tool results.
        tools: the tool declarations (counted).
        pending_start: the index in the wire messages where the pending message starts.
        prefill: how many of the last ``messages`` are a prefill: model messages after the
            pending message, which the model continues (Anthropic); they are sent as they
            are, after it.
    """

    system: str | None
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    pending_start: int
    prefill: int = 0

    @property
    def guarded(self) -> tuple[Message, ...]:
        """The messages the engine reads: all but a prefill (they end with the pending one)."""
        return self.messages[: len(self.messages) - self.prefill]

    @property
    def counted_system(self) -> str | None:
        """The system prompt as the engine counts it: with a prefill's text, which is sent
        unchanged as the system prompt is."""
        if not self.prefill:
            return self.system
        return "\n".join([self.system or "", *(m.text for m in self.messages[-self.prefill :])])


def tool_spec(name: object, description: object, parameters: object) -> ToolSpec:
    """A tool declaration as the estimate counts it (unknown shapes counted as they are)."""
    params: Mapping[str, Any]
    params = parameters if isinstance(parameters, Mapping) else {"type": "object"}
    return ToolSpec(
        name=name if isinstance(name, str) else "tool",
        description=description if isinstance(description, str) else "",
        parameters=params,
    )


class WireProtocol(Protocol):
    """One wire protocol (see the module docstring)."""

    name: str
    upstream: str  # which --upstream serves it: "openai" or "anthropic"
    messages_key: str

    def lead(self, messages: Sequence[Any]) -> int:
        """How many leading messages are the system prompt (kept as sent, never replaced)."""
        ...

    def convert(self, body: Mapping[str, Any], messages: Sequence[Any]) -> Converted:
        """The request in the content model (raises ``ContentError`` when it cannot)."""
        ...

    def to_wire(self, messages: Sequence[Message], source: Sequence[Any]) -> list[Any]:
        """Messages in this protocol's form; ``source``: the wire messages they came from
        (signed blocks not found there unchanged are dropped)."""
        ...

    def client_compaction(
        self, body: Mapping[str, Any], messages: Sequence[Any], *, read: bool = False
    ) -> bool:
        """Whether the request is the client's own compaction (forwarded untouched).

        ``read``: the fast reading (:mod:`autocompact.serve.fastpath`) read every message, so
        none holds a block or item it does not know (a compaction block is one): the messages
        are not searched for one again, only the rest is checked."""
        ...

    def error(self, status: int, kind: str, message: str) -> dict[str, Any]:
        """A JSON error body in this protocol's shape."""
        ...

    def stream_error(self, message: str) -> bytes:
        """An error event to end a stream that broke mid-way."""
        ...

    def stream_ended(self, tail: bytes) -> bool:
        """Whether a stream's last bytes hold its closing event (the upstream said all it had
        to say; what may follow is the connection's end)."""
        ...

    def side_query_body(self, model: str, request: ChatRequest) -> dict[str, Any]:
        """The body of a summary request to the same upstream."""
        ...

    def side_query_reply(self, reply: Any) -> Completion:
        """The summary reply in the content model (raises ``MalformedResponseError``)."""
        ...


def last_user_text(messages: Sequence[Any]) -> str:
    """The text of the last wire message when it is a user message (string or text blocks)."""
    if not messages or not isinstance(messages[-1], Mapping):
        return ""
    last = messages[-1]
    if last.get("role") != "user":
        return ""
    content = last.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(block.get("text", ""))
            for block in content
            if isinstance(block, Mapping) and isinstance(block.get("text"), str)
        )
    return ""

"""Anthropic Messages (``/v1/messages``) for the proxy. Pure.

The conversation is ``messages``; ``system`` (a string or text blocks) is the system prompt.
The pending message is the last user message (text or tool results); assistant messages after
it are a prefill, which the model continues: sent after it unchanged, and counted.

Signed blocks: Anthropic checks a ``thinking`` block's signature and a ``redacted_thinking``
block's data; a replacement written by the proxy keeps such a block only when the very same
block (text and signature, or data) was in what the client sent, and drops it otherwise. An
assistant turn left empty by that gets a short text in its place. A request that carries an
Anthropic ``compaction`` block or asks for compaction in ``context_management`` is the client's
own compaction and goes untouched.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from autocompact.content import Message, TextPart, Usage
from autocompact.convert import from_anthropic_messages, to_anthropic_messages
from autocompact.errors import MalformedResponseError
from autocompact.providers.base import ChatRequest, Completion, FinishReason, ToolSpec
from autocompact.serve.protocol import (
    CLIENT_SUMMARY_PROMPTS,
    Converted,
    last_user_text,
    tool_spec,
)
from autocompact.usage_check import reported_count

__all__ = ["ANTHROPIC_MESSAGES", "AnthropicMessages", "anthropic_tools", "signed_blocks"]

THINKING_OMITTED = "(reasoning omitted)"
# A stream's closing event as a whole SSE line (a JSON string holds no raw line break, so no
# text in the stream can look like one); servers that send data lines only are read by type.
_CLOSED = re.compile(
    rb'^(?:event: ?(?:message_stop|error)\r?$|data: ?\{"type": ?"(?:message_stop|error)")', re.M
)
_FINISH = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "max_tokens": FinishReason.LENGTH,
    "tool_use": FinishReason.TOOL_CALL,
    "refusal": FinishReason.CONTENT_FILTER,
}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    504: "timeout_error",
}


def _blocks(messages: Sequence[Any]) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list):
            out.extend(b for b in content if isinstance(b, Mapping))
    return out


def _has_compaction_block(messages: Sequence[Any]) -> bool:
    """Whether a message holds a ``compaction`` block (one pass, no list built: this runs on
    every request, over the whole history)."""
    for message in messages:
        if type(message) is not dict and not isinstance(message, Mapping):
            continue
        content = message.get("content")
        if type(content) is list:
            for block in content:
                if (type(block) is dict or isinstance(block, Mapping)) and block.get(
                    "type"
                ) == "compaction":
                    return True
    return False


def signed_blocks(messages: Sequence[Any]) -> set[tuple[str, str, str]]:
    """``(type, thinking, signature-or-data)`` of every signed block in wire messages."""
    found = set()
    for block in _blocks(messages):
        if block.get("type") == "thinking":
            found.add(("thinking", str(block.get("thinking")), str(block.get("signature"))))
        elif block.get("type") == "redacted_thinking":
            found.add(("redacted_thinking", "", str(block.get("data"))))
    return found


def _key(block: Mapping[str, Any]) -> tuple[str, str, str] | None:
    if block.get("type") == "thinking":
        return ("thinking", str(block.get("thinking")), str(block.get("signature")))
    if block.get("type") == "redacted_thinking":
        return ("redacted_thinking", "", str(block.get("data")))
    return None


def _is_assistant(message: Mapping[str, Any]) -> bool:
    return message.get("role") == "assistant"


def anthropic_tools(body: Mapping[str, Any]) -> tuple[ToolSpec, ...]:
    """The request's tool declarations as the estimate counts them."""
    tools = body.get("tools")
    if not isinstance(tools, list):
        return ()
    return tuple(
        tool_spec(t.get("name"), t.get("description"), t.get("input_schema") or t)
        for t in tools
        if isinstance(t, Mapping)
    )


class AnthropicMessages:
    """The Messages protocol (see the module docstring)."""

    name = "anthropic_messages"
    upstream = "anthropic"
    messages_key = "messages"

    def lead(self, messages: Sequence[Any]) -> int:
        """No message is a system message here (``system`` is its own field)."""
        return 0

    def convert(self, body: Mapping[str, Any], messages: Sequence[Any]) -> Converted:
        """The request in the content model (``ContentError`` when it cannot be)."""
        system, history = from_anthropic_messages(messages, body.get("system"))
        # Assistant messages after the last user message are a prefill: the model continues
        # them. The pending message is that user message; the prefill goes out after it.
        end = len(messages)
        while end and isinstance(messages[end - 1], Mapping) and _is_assistant(messages[end - 1]):
            end -= 1
        prefill = 0
        if 0 < end < len(messages):
            while prefill < len(history) and history[-1 - prefill].role == "model":
                prefill += 1
        return Converted(
            system=system,
            messages=tuple(history),
            tools=anthropic_tools(body),
            pending_start=end - 1 if prefill else max(len(messages) - 1, 0),
            prefill=prefill,
        )

    def to_wire(self, messages: Sequence[Message], source: Sequence[Any]) -> list[Any]:
        """Messages as blocks; signed blocks not in ``source`` unchanged are dropped."""
        allowed = signed_blocks(source)
        out: list[Any] = []
        for message in to_anthropic_messages(messages):
            kept = []
            for block in message["content"]:
                key = _key(block)
                if key is None or key in allowed:
                    kept.append(block)
            if not kept:
                kept = [{"type": "text", "text": THINKING_OMITTED}]
            out.append({**message, "content": kept})
        return out

    def client_compaction(
        self, body: Mapping[str, Any], messages: Sequence[Any], *, read: bool = False
    ) -> bool:
        """A compaction block (not searched for when ``read``: the fast reading read every
        block), a compaction request in ``context_management``, or a summary request of the
        agent's own."""
        if not read and _has_compaction_block(messages):
            return True
        management = body.get("context_management")
        if isinstance(management, Mapping) and "compact" in json.dumps(management):
            return True
        return bool(CLIENT_SUMMARY_PROMPTS.search(last_user_text(messages)[:2000]))

    def error(self, status: int, kind: str, message: str) -> dict[str, Any]:
        """Anthropic's error shape."""
        kind = _ERROR_TYPES.get(status, "api_error") if kind == "auto" else kind
        return {"type": "error", "error": {"type": kind, "message": message}}

    def stream_error(self, message: str) -> bytes:
        """An SSE ``error`` event (what Anthropic sends when a stream fails)."""
        payload = json.dumps(self.error(502, "api_error", message))
        return f"event: error\ndata: {payload}\n\n".encode()

    def stream_ended(self, tail: bytes) -> bool:
        """Whether ``tail`` holds ``message_stop`` (or an ``error`` event) as an SSE line."""
        return _CLOSED.search(tail) is not None

    def side_query_body(self, model: str, request: ChatRequest) -> dict[str, Any]:
        """A plain Messages request: the summary prompt, the output cap, no tools, no stream."""
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": request.max_output_tokens or 8192,
            "messages": to_anthropic_messages(request.messages),
        }
        if request.system_instruction:
            body["system"] = request.system_instruction
        return body

    def side_query_reply(self, reply: Any) -> Completion:
        """The reply's text blocks, usage and stop reason."""
        try:
            content = reply["content"]
            text = "".join(
                b.get("text", "")
                for b in content
                if isinstance(b, Mapping) and b.get("type") == "text"
            )
        except (KeyError, TypeError) as exc:
            raise MalformedResponseError(
                f"the upstream's summary reply has no content blocks ({exc})"
            ) from exc
        usage = reply.get("usage")
        parsed = None
        if isinstance(usage, Mapping):
            prompt = sum(
                reported_count(usage.get(k))
                for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
            )
            parsed = Usage(
                prompt_tokens=prompt,
                output_tokens=reported_count(usage.get("output_tokens")),
                cached_tokens=reported_count(usage.get("cache_read_input_tokens")),
            )
        stop = reply.get("stop_reason")
        return Completion(
            message=Message(role="model", parts=(TextPart(text=text),)),
            usage=parsed,
            finish_reason=_FINISH.get(str(stop), FinishReason.OTHER) if stop else None,
            raw_finish_reason=str(stop) if stop else None,
            model=str(reply.get("model")) if reply.get("model") else None,
        )


ANTHROPIC_MESSAGES = AnthropicMessages()

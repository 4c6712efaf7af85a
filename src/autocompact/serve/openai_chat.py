"""OpenAI Chat Completions (``/v1/chat/completions``) for the proxy. Pure.

The conversation is ``messages``; leading ``system``/``developer`` messages are the system
prompt (counted, never replaced). The pending message is the trailing user message together
with the tool results it follows (the content model joins them into one user turn).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from autocompact.content import Message, TextPart, Usage
from autocompact.convert import from_openai_messages, to_openai_messages
from autocompact.errors import MalformedResponseError
from autocompact.providers.base import ChatRequest, Completion, FinishReason, ToolSpec
from autocompact.serve.protocol import (
    CLIENT_SUMMARY_PROMPTS,
    Converted,
    last_user_text,
    tool_spec,
)
from autocompact.usage_check import reported_count

__all__ = ["OPENAI_CHAT", "OpenAIChat", "openai_tools"]

# The stream's last line (a JSON string holds no raw line break: no text can look like it).
_CLOSED = re.compile(rb"^data: ?\[DONE\]\r?$", re.M)
_FINISH = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "tool_calls": FinishReason.TOOL_CALL,
    "function_call": FinishReason.TOOL_CALL,
    "content_filter": FinishReason.CONTENT_FILTER,
}


def _role(message: Any) -> object:
    return message.get("role") if isinstance(message, Mapping) else None


def pending_start(messages: Sequence[Any]) -> int:
    """Where the pending turn starts: the last user message and the tool results before it."""
    start = len(messages)
    if start and _role(messages[start - 1]) == "user":
        start -= 1
        if start and _role(messages[start - 1]) != "tool":
            return start
    while start and _role(messages[start - 1]) == "tool":
        start -= 1
    return start


def openai_tools(body: Mapping[str, Any]) -> tuple[ToolSpec, ...]:
    """The request's tool declarations as the estimate counts them."""
    tools = body.get("tools")
    if not isinstance(tools, list):
        return ()
    out = []
    for tool in tools:
        if not isinstance(tool, Mapping):
            continue
        function = tool.get("function")
        if isinstance(function, Mapping):
            out.append(
                tool_spec(
                    function.get("name"), function.get("description"), function.get("parameters")
                )
            )
        else:
            out.append(tool_spec(tool.get("type"), "", tool))
    return tuple(out)


class OpenAIChat:
    """The Chat Completions protocol (see the module docstring)."""

    name = "openai_chat"
    upstream = "openai"
    messages_key = "messages"

    def lead(self, messages: Sequence[Any]) -> int:
        """How many leading ``system``/``developer`` messages there are (never replaced)."""
        n = 0
        while n < len(messages) and _role(messages[n]) in ("system", "developer"):
            n += 1
        return n

    def convert(self, body: Mapping[str, Any], messages: Sequence[Any]) -> Converted:
        """The request in the content model (``ContentError`` when it cannot be)."""
        system, history = from_openai_messages(messages)
        return Converted(
            system=system,
            messages=tuple(history),
            tools=openai_tools(body),
            pending_start=pending_start(messages),
        )

    def to_wire(self, messages: Sequence[Message], source: Sequence[Any]) -> list[Any]:
        """Chat messages (reasoning is carried as ``reasoning_content`` when it was sent so; a
        content of text only as one string: ``llama_cpp.server`` refuses an assistant content
        that is a list of text parts and drops a user one unread, and OpenAI reads both)."""
        sent_reasoning = any(isinstance(m, Mapping) and m.get("reasoning_content") for m in source)
        return list(
            to_openai_messages(
                messages,
                thinking="reasoning_content" if sent_reasoning else "drop",
                text_as_string=True,
            )
        )

    def client_compaction(
        self, body: Mapping[str, Any], messages: Sequence[Any], *, read: bool = False
    ) -> bool:
        """A summary request of the agent's own (its known summary prompts)."""
        return bool(CLIENT_SUMMARY_PROMPTS.search(last_user_text(messages)[:2000]))

    def error(self, status: int, kind: str, message: str) -> dict[str, Any]:
        """OpenAI's error shape."""
        return {"error": {"message": message, "type": kind, "param": None, "code": kind}}

    def stream_error(self, message: str) -> bytes:
        """An SSE ``data:`` line with an error object (what OpenAI sends on a failed stream)."""
        payload = json.dumps(self.error(502, "upstream_stream_error", message))
        return f"data: {payload}\n\n".encode()

    def stream_ended(self, tail: bytes) -> bool:
        """Whether ``tail`` holds the ``data: [DONE]`` line."""
        return _CLOSED.search(tail) is not None

    def side_query_body(self, model: str, request: ChatRequest) -> dict[str, Any]:
        """A plain chat request: the summary prompt, the output cap, no tools, no stream."""
        body: dict[str, Any] = {
            "model": model,
            "messages": to_openai_messages(
                request.messages, request.system_instruction, thinking="drop", text_as_string=True
            ),
            "stream": False,
        }
        if request.max_output_tokens is not None:
            body["max_tokens"] = request.max_output_tokens
        return body

    def side_query_reply(self, reply: Any) -> Completion:
        """The first choice's text, usage and finish reason."""
        try:
            choice = reply["choices"][0]
            content = choice["message"].get("content") or ""
            raw_finish = choice.get("finish_reason")
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise MalformedResponseError(
                f"the upstream's summary reply has no choices[0].message ({exc})"
            ) from exc
        usage = reply.get("usage") if isinstance(reply, Mapping) else None
        parsed = None
        if isinstance(usage, Mapping):
            parsed = Usage(
                prompt_tokens=reported_count(usage.get("prompt_tokens")),
                output_tokens=reported_count(usage.get("completion_tokens")),
            )
        return Completion(
            message=Message(role="model", parts=(TextPart(text=str(content)),)),
            usage=parsed,
            finish_reason=_FINISH.get(str(raw_finish), FinishReason.OTHER) if raw_finish else None,
            raw_finish_reason=str(raw_finish) if raw_finish else None,
            model=str(reply.get("model")) if isinstance(reply, Mapping) else None,
        )


OPENAI_CHAT = OpenAIChat()

"""OpenAI Responses (``/v1/responses``) for the proxy. Pure.

A request with ``previous_response_id`` keeps its history on the server: it is forwarded
untouched (the app never plans it). A stateless request carries the whole conversation in
``input``; it is read here into the content model (the library's
:mod:`autocompact.convert.openai_responses` only writes input items) and compacted like the other
protocols. Leading ``system``/``developer`` messages and ``instructions`` are the system prompt;
a later one (Codex resumed after its own compaction sends one) is read as user-side text (it
goes out as a user message where the proxy writes that part anew).

Items read: messages (``input_text``/``output_text``/``refusal``/``input_image`` content, or a
string), ``function_call``, ``function_call_output`` and ``reasoning`` (the item as sent rides
in the thinking part's signature with its id and ``encrypted_content``, so a replacement or a
summary request writes the very same item back; the part's text, which the estimate counts, is
all the item sends: its summary and content texts and its encrypted content). Any other item
type (hosted tool calls, custom tools) makes the request one the proxy does not read: it is
forwarded as sent. ``compaction`` items (and ``/v1/responses/compact``) are the client's own
compaction. A text ``input`` is the one user message it stands for (:func:`text_input_as_item`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from autocompact.content import (
    FunctionCallPart,
    FunctionResponsePart,
    ImagePart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    Usage,
)
from autocompact.convert import UNKNOWN_TOOL_NAME, parse_data_url
from autocompact.convert.openai_responses import (
    REASONING_SIGNATURE_PREFIX,
    reasoning_ref,
    to_responses_input,
)
from autocompact.errors import ContentError, MalformedResponseError
from autocompact.jsonsafe import is_array, loads
from autocompact.providers.base import ChatRequest, Completion, FinishReason, ToolSpec
from autocompact.serve.protocol import CLIENT_SUMMARY_PROMPTS, Converted, tool_spec
from autocompact.usage_check import reported_count

__all__ = ["RESPONSES", "Responses", "from_responses_input", "text_input_as_item"]

# A stream's closing event as a whole SSE line (a JSON string holds no raw line break, so no
# text in the stream can look like one); servers that send data lines only are read by type.
_CLOSED = re.compile(
    rb"^(?:event: ?(?:response\.(?:completed|incomplete|failed)|error)\r?$"
    rb'|data: ?\{"type": ?"(?:response\.(?:completed|incomplete|failed)|error)"|data: ?\[DONE\])',
    re.M,
)
_SYSTEM_ROLES = ("system", "developer")
_USER_SIDE = ("user", "function_call_output")


def _kind(item: Any) -> str:
    """``user``, ``assistant``, ``system``, ``developer`` or the item's type."""
    if not isinstance(item, Mapping):
        return "?"
    kind = item.get("type")
    if kind in (None, "message"):
        return str(item.get("role"))
    return str(kind)


def _text_parts(content: Any, index: int) -> list[Part]:
    if isinstance(content, str):
        return [TextPart(text=content)]
    if not isinstance(content, list):
        raise ContentError(f"input item {index}: content must be a string or a list", index=index)
    parts: list[Part] = []
    for block in content:
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind in ("input_text", "output_text", "text"):
            parts.append(TextPart(text=str(block.get("text", ""))))
        elif kind == "refusal":
            parts.append(TextPart(text=str(block.get("refusal", ""))))
        elif kind == "input_image" and isinstance(block.get("image_url"), str):
            url = block["image_url"]
            parsed = parse_data_url(url)
            if parsed is None:
                parts.append(ImagePart(url=url))
            else:
                parts.append(ImagePart(media_type=parsed[0], data=parsed[1]))
        else:
            raise ContentError(
                f"input item {index}: content of type {kind!r} is not read by the proxy",
                index=index,
            )
    return parts


def _reasoning_text(item: Mapping[str, Any], index: int) -> str:
    """The text of a reasoning item, as the estimate counts it: the item goes back as sent
    (:func:`_written`), so all it sends is counted: its summary and content texts (llama-server
    writes a reasoning model's thinking as ``content`` of ``reasoning_text``) and its encrypted
    content. The summary alone was counted: a conversation of llama-server's reasoning was
    sized far below what it sent and rejected as too long."""
    texts: list[str] = []
    for key in ("summary", "content"):
        blocks = item.get(key) or []
        if not isinstance(blocks, list):
            raise ContentError(
                f"input item {index}: {key} must be a list, got {type(blocks).__name__}",
                index=index,
            )
        texts.extend(str(b.get("text", "")) for b in blocks if isinstance(b, Mapping))
    encrypted = item.get("encrypted_content")
    if isinstance(encrypted, str) and encrypted:
        texts.append(encrypted)
    return " ".join(texts)


def text_input_as_item(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with a text ``input`` as the one user message the Responses API reads it as, so
    that it is planned (measured, its tier said) like the same message as a list of items (it
    was passed through unread, with no ``X-Autocompact-Tier``); any other ``body`` as it is.
    The client's bytes still go out as sent unless the request is rewritten."""
    text = body.get("input")
    if isinstance(text, str):
        return {**body, "input": [{"role": "user", "content": text}]}
    return body


def from_responses_input(items: Sequence[Any]) -> tuple[str | None, list[Message]]:
    """``(system, history)`` of a Responses ``input`` list (see the module docstring).

    Raises:
        ContentError: an item the proxy does not read (naming its index and type).
    """
    systems: list[str] = []
    history: list[Message] = []
    names: dict[str, str] = {}
    role: str | None = None
    parts: list[Part] = []

    def flush() -> None:
        if role is not None and parts:
            history.append(Message(role="user" if role == "user" else "model", parts=tuple(parts)))
        parts.clear()

    if not is_array(items):
        raise ContentError(f"input must be a string or a list of items, got {type(items).__name__}")
    for index, item in enumerate(items):
        kind = _kind(item)
        if kind in _SYSTEM_ROLES and not history and role is None:
            systems.append(" ".join(p.text for p in _text_parts(item.get("content"), index)
                                    if isinstance(p, TextPart)))  # fmt: skip
            continue
        # A system/developer message after the first turn (Codex resumed after its own
        # compaction sends one) is read as the user side's text: sent as is within the client's
        # unchanged tail, as user text where the part before it is written anew.
        side = "user" if kind in (*_USER_SIDE, *_SYSTEM_ROLES) else "model"
        if kind not in (*_USER_SIDE, *_SYSTEM_ROLES, "assistant", "function_call", "reasoning"):
            raise ContentError(
                f"input item {index}: items of type {kind!r} are not read by the proxy",
                index=index,
            )
        if side != role:
            flush()
            role = side
        if kind in ("user", "assistant", *_SYSTEM_ROLES):
            parts.extend(_text_parts(item.get("content"), index))
        elif kind == "function_call":
            raw = item.get("arguments") or "{}"
            if not isinstance(raw, str):
                raise ContentError(
                    f"input item {index}: arguments must be a JSON string, got "
                    f"{type(raw).__name__}",
                    index=index,
                )
            try:
                arguments = loads(raw)
            except ValueError as exc:
                raise ContentError(
                    f"input item {index}: arguments are not JSON", index=index
                ) from exc
            if not isinstance(arguments, dict):
                raise ContentError(f"input item {index}: arguments must be an object", index=index)
            call_id = str(item.get("call_id"))
            names[call_id] = str(item.get("name"))
            parts.append(FunctionCallPart(id=call_id, name=names[call_id], arguments=arguments))
        elif kind == "function_call_output":
            call_id = str(item.get("call_id"))
            output = item.get("output")
            parts.append(
                FunctionResponsePart(
                    id=call_id,
                    name=names.get(call_id, UNKNOWN_TOOL_NAME),
                    response=output if isinstance(output, str) else json.dumps(output),
                )
            )
        else:  # reasoning: id and encrypted content travel in the signature, unaltered
            ref: dict[str, Any] = {"id": item.get("id")}
            if isinstance(item.get("encrypted_content"), str):
                ref["encrypted_content"] = item["encrypted_content"]
            ref["item"] = item  # written back as sent (_written)
            signature = REASONING_SIGNATURE_PREFIX + json.dumps(ref)
            parts.append(ThinkingPart(text=_reasoning_text(item, index), signature=signature))
    flush()
    return ("\n\n".join(systems) if systems else None), history


def _tools(body: Mapping[str, Any]) -> tuple[ToolSpec, ...]:
    tools = body.get("tools")
    if not isinstance(tools, list):
        return ()
    return tuple(
        tool_spec(t.get("name") or t.get("type"), t.get("description"), t.get("parameters") or t)
        for t in tools
        if isinstance(t, Mapping)
    )


def _written(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """``messages`` as input items, in forms llama-server reads as well as OpenAI.

    Each message carries ``"type": "message"``: OpenAI reads one without it, llama-server's
    ``/v1/responses`` refuses an assistant message without it ("Cannot determine type of
    'item'"). A reasoning item goes back as the client sent it (kept in its thinking part's
    signature by :func:`from_responses_input`): llama-server writes a reasoning model's
    thinking as a ``content`` list and refuses the item without it, and the library's writer
    knows only the id, the summary and the encrypted content.
    """
    sent: dict[tuple[Any, Any], Any] = {}
    for message in messages:
        for part in message.parts:
            ref = reasoning_ref(part) if isinstance(part, ThinkingPart) else None
            if ref is not None and isinstance(ref.get("item"), Mapping):
                sent[ref.get("id"), ref.get("encrypted_content")] = ref["item"]
    out: list[dict[str, Any]] = []
    for item in to_responses_input(messages, family=None):
        if item.get("type") == "reasoning":
            item = sent.get((item.get("id"), item.get("encrypted_content")), item)
        elif "role" in item and "type" not in item:
            item = {"type": "message", **item}
        out.append(item)
    return out


class Responses:
    """The Responses protocol, stateless use (see the module docstring)."""

    name = "openai_responses"
    upstream = "openai"
    messages_key = "input"

    def lead(self, messages: Sequence[Any]) -> int:
        """How many leading ``system``/``developer`` messages there are (never replaced)."""
        n = 0
        while n < len(messages) and _kind(messages[n]) in _SYSTEM_ROLES:
            n += 1
        return n

    def convert(self, body: Mapping[str, Any], messages: Sequence[Any]) -> Converted:
        """The request in the content model (``ContentError`` when it cannot be)."""
        system, history = from_responses_input(messages)
        instructions = body.get("instructions")
        if isinstance(instructions, str) and instructions:
            system = instructions if system is None else f"{instructions}\n\n{system}"
        # The pending turn: the items the last (user-side) message was read from, a system or
        # developer message after the first turn among them (read as the user side's text).
        start, lead = len(messages), self.lead(messages)
        while start > lead and _kind(messages[start - 1]) in (*_USER_SIDE, *_SYSTEM_ROLES):
            start -= 1
        return Converted(
            system=system, messages=tuple(history), tools=_tools(body), pending_start=start
        )

    def to_wire(self, messages: Sequence[Message], source: Sequence[Any]) -> list[Any]:
        """Input items (reasoning items as the client sent them, see :func:`_written`)."""
        return _written(messages)

    def client_compaction(
        self, body: Mapping[str, Any], messages: Sequence[Any], *, read: bool = False
    ) -> bool:
        """A ``compaction`` item (not searched for when ``read``), or a summary request of the
        agent's own."""
        if not read and any(_kind(item).startswith("compaction") for item in messages):
            return True
        last = messages[-1] if messages else None
        if not isinstance(last, Mapping) or _kind(last) != "user":
            return False
        try:
            text = " ".join(
                p.text for p in _text_parts(last.get("content"), 0) if isinstance(p, TextPart)
            )
        except ContentError:
            return False
        return bool(CLIENT_SUMMARY_PROMPTS.search(text[:2000]))

    def error(self, status: int, kind: str, message: str) -> dict[str, Any]:
        """OpenAI's error shape."""
        return {"error": {"message": message, "type": kind, "param": None, "code": kind}}

    def stream_error(self, message: str) -> bytes:
        """A Responses ``error`` event."""
        payload = json.dumps({"type": "error", "code": "upstream_stream_error", "message": message})
        return f"event: error\ndata: {payload}\n\n".encode()

    def stream_ended(self, tail: bytes) -> bool:
        """Whether ``tail`` holds a closing event (``response.completed``, ``.incomplete``,
        ``.failed``, ``error``) as an SSE line."""
        return _CLOSED.search(tail) is not None

    def side_query_body(self, model: str, request: ChatRequest) -> dict[str, Any]:
        """A plain, unstored Responses request: the summary prompt and the output cap."""
        body: dict[str, Any] = {
            "model": model,
            "input": _written(request.messages),
            "store": False,
        }
        if request.system_instruction:
            body["instructions"] = request.system_instruction
        if request.max_output_tokens is not None:
            body["max_output_tokens"] = request.max_output_tokens
        return body

    def side_query_reply(self, reply: Any) -> Completion:
        """The output's text, usage and status."""
        try:
            output = reply["output"]
            text = "".join(
                str(block.get("text", ""))
                for item in output
                if isinstance(item, Mapping) and item.get("type") == "message"
                for block in item.get("content") or []
                if isinstance(block, Mapping) and block.get("type") == "output_text"
            )
        except (KeyError, TypeError) as exc:
            raise MalformedResponseError(
                f"the upstream's summary reply has no output ({exc})"
            ) from exc
        usage = reply.get("usage")
        parsed = None
        if isinstance(usage, Mapping):
            parsed = Usage(
                prompt_tokens=reported_count(usage.get("input_tokens")),
                output_tokens=reported_count(usage.get("output_tokens")),
            )
        status = reply.get("status")
        details = reply.get("incomplete_details")
        incomplete = details.get("reason") if isinstance(details, Mapping) else None
        finish = FinishReason.STOP
        if incomplete == "max_output_tokens":
            finish = FinishReason.LENGTH
        elif incomplete == "content_filter":
            finish = FinishReason.CONTENT_FILTER
        return Completion(
            message=Message(role="model", parts=(TextPart(text=text),)),
            usage=parsed,
            finish_reason=finish,
            raw_finish_reason=str(incomplete or status or "completed"),
            model=str(reply.get("model")) if reply.get("model") else None,
        )


RESPONSES = Responses()

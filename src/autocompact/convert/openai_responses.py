"""OpenAI Responses API input and output items <-> the content model. Pure.

History → ``input`` items: user text, images and documents become ``input_text`` /
``input_image`` / ``input_file`` content; function responses ``function_call_output`` items
(the images and documents a tool returned as ``input_image`` / ``input_file`` items of it);
model text assistant messages; tool calls ``function_call`` items (``call_id``); thinking parts
whose signature carries a Responses reasoning item (:data:`REASONING_SIGNATURE_PREFIX`) go back
as that ``reasoning`` item, other thinking is left out (this API cannot verify it). Opaque parts
made by ``openai-responses`` for the given model family go back as their raw items; any other
opaque part as its summary text.

Output items → one model message: ``message`` (``output_text``, ``refusal``), ``reasoning`` and
``function_call``; any other item type raises :class:`ContentError`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from autocompact.content import (
    DocumentPart,
    FunctionCallPart,
    FunctionResponsePart,
    ImagePart,
    Message,
    OpaquePart,
    Part,
    TextPart,
    ThinkingPart,
    Usage,
    json_form,
)
from autocompact.convert._common import data_url, media_url, response_text
from autocompact.errors import ContentError
from autocompact.toolmedia import is_media_block, media_blocks
from autocompact.usage_check import reported_count

__all__ = [
    "PROVIDER_NAME",
    "REASONING_SIGNATURE_PREFIX",
    "dict_usage",
    "output_message",
    "reasoning_item",
    "reasoning_ref",
    "reasoning_signature",
    "response_usage",
    "to_responses_input",
]

PROVIDER_NAME = "openai-responses"
REASONING_SIGNATURE_PREFIX = "openai-responses:reasoning:"
"""Marks a thinking part's signature as a Responses API reasoning item (id + encrypted)."""


# -- history -> input items --------------------------------------------------------------------


def to_responses_input(history: Sequence[Message], *, family: str | None) -> list[dict[str, Any]]:
    """Write a history as Responses API input items (unset fields omitted).

    Opaque parts made by this provider for ``family`` go back as their raw items; any other
    opaque part goes as its summary text. Thinking parts are sent only when they carry one of
    our reasoning items.

    Raises:
        ContentError: a part the role cannot carry (naming the index).
    """
    items: list[dict[str, Any]] = []
    for index, message in enumerate(history):
        if message.role == "user":
            items.extend(_user_items(message.parts, index, family))
        else:
            items.extend(_model_items(message.parts, index, family))
    return items


def _opaque_items(part: OpaquePart, role: str, family: str | None) -> list[dict[str, Any]]:
    if family is not None and part.readable_by(PROVIDER_NAME, family):
        raw = part.payload.get("items")
        if isinstance(raw, list):
            return [json.loads(json.dumps(item)) for item in raw]  # a copy, byte-identical
    stand_in = part.as_text()  # (another provider's block: its text; none: nothing to read)
    if stand_in is None:
        return []
    text = stand_in.text
    kind = "input_text" if role == "user" else "output_text"
    if role == "user":
        return [{"role": "user", "content": [{"type": kind, "text": text}]}]
    return [{"role": "assistant", "content": text}]


def _user_items(parts: Sequence[Part], index: int, family: str | None) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    content: list[dict[str, Any]] = []

    def flush() -> None:
        if content:
            items.append({"role": "user", "content": list(content)})
            content.clear()

    for part in parts:
        match part:
            case TextPart():
                content.append({"type": "input_text", "text": part.text})
            case ImagePart():
                url = part.url if part.data is None else data_url(part.media_type, part.data)
                if url is None:
                    raise ContentError(f"message {index}: an image has neither data nor url")
                content.append({"type": "input_image", "image_url": url, "detail": "auto"})
            case DocumentPart():
                file: dict[str, Any] = {"type": "input_file"}
                if part.data is not None:
                    file["file_data"] = data_url(part.media_type, part.data)
                    file["filename"] = part.title or "document"
                elif part.url is not None:
                    file["file_url"] = part.url
                else:
                    raise ContentError(f"message {index}: a document has neither data nor url")
                content.append(file)
            case FunctionResponsePart():
                flush()
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": part.id,
                        "output": _tool_output(part, index),
                    }
                )
            case OpaquePart():
                flush()
                items.extend(_opaque_items(part, "user", family))
            case ThinkingPart() | FunctionCallPart():
                raise ContentError(
                    f"message {index}: a {part.kind} part cannot be in a user message", index=index
                )
    flush()
    if not items:
        items.append({"role": "user", "content": ""})
    return items


def _tool_output(part: FunctionResponsePart, index: int) -> str | list[dict[str, Any]]:
    """A function call's output: its text, or, when the tool returned images or documents
    (:mod:`autocompact.toolmedia`), a list of ``input_text`` / ``input_image`` /
    ``input_file`` items, which the Responses API reads as the pictures they are."""
    if not media_blocks(part.response):
        return response_text(part.response)
    where = f"message {index}: the result of tool call {part.id!r} ({part.name})"
    return [_output_item(block, where, index) for block in part.response]


def _output_item(block: Any, where: str, index: int) -> dict[str, Any]:
    """One block of a tool's list response as an item of a function call's output."""
    if type(block) is not dict:
        return {"type": "input_text", "text": json_form(block)}
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return {"type": "input_text", "text": block["text"]}
    if kind in ("input_text", "input_image", "input_file"):
        return dict(block)  # already in this API's form
    if not is_media_block(block):
        return {"type": "input_text", "text": json_form(block)}
    url = media_url(block)
    if url is not None and kind in ("image", "image_url"):
        return {"type": "input_image", "image_url": url, "detail": "auto"}
    if url is not None and kind in ("document", "file"):
        if url.startswith("data:"):
            name = block.get("title") or block.get("filename") or "document"
            return {"type": "input_file", "file_data": url, "filename": str(name)}
        return {"type": "input_file", "file_url": url}
    raise ContentError(
        f"{where} holds a {kind!r} block this adapter cannot send in a function call's output "
        "(an image or document by base64 data or URL can)",
        index=index,
    )


def _model_items(parts: Sequence[Part], index: int, family: str | None) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for part in parts:
        match part:
            case TextPart():
                items.append({"role": "assistant", "content": part.text})
            case ThinkingPart():
                reasoning = reasoning_item(part)
                if reasoning is not None:
                    items.append(reasoning)
            case FunctionCallPart():
                items.append(
                    {
                        "type": "function_call",
                        "call_id": part.id,
                        "name": part.name,
                        "arguments": json.dumps(dict(part.arguments), ensure_ascii=False),
                    }
                )
            case OpaquePart():
                items.extend(_opaque_items(part, "model", family))
            case ImagePart() | DocumentPart() | FunctionResponsePart():
                raise ContentError(
                    f"message {index}: a {part.kind} part cannot be in an assistant message",
                    index=index,
                )
    return items


def reasoning_signature(item_id: str | None, encrypted_content: str | None) -> str:
    """A thinking part's signature that carries a Responses reasoning item (its id and its
    encrypted content; an item sent without its id has ``None``), read back by
    :func:`reasoning_ref` (and :func:`reasoning_item` when it has an id)."""
    ref = {"id": item_id, "encrypted_content": encrypted_content}
    return REASONING_SIGNATURE_PREFIX + json.dumps(ref, separators=(",", ":"))


def reasoning_ref(part: ThinkingPart) -> dict[str, Any] | None:
    """What a thinking part's signature holds of the Responses reasoning item it carries (its
    ``id``, ``encrypted_content``, and whatever else its writer kept), or ``None``: another
    provider's thinking, which this API cannot verify."""
    signature = part.signature or ""
    if not signature.startswith(REASONING_SIGNATURE_PREFIX):
        return None
    try:
        ref = json.loads(signature[len(REASONING_SIGNATURE_PREFIX) :])
    except ValueError:
        return None
    return ref if isinstance(ref, dict) else None


def reasoning_item(part: ThinkingPart) -> dict[str, Any] | None:
    """The Responses reasoning item a thinking part carries in its signature, or ``None``
    (another provider's thinking, which this API cannot verify)."""
    ref = reasoning_ref(part)
    if ref is None or not isinstance(ref.get("id"), str):
        return None
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": ref["id"],
        "summary": [{"type": "summary_text", "text": part.text}] if part.text else [],
    }
    if isinstance(ref.get("encrypted_content"), str):
        item["encrypted_content"] = ref["encrypted_content"]
    return item


# -- output items -> a model message ---------------------------------------------------------


def output_message(output: Sequence[Any]) -> tuple[Message, bool]:
    """The reply as a model message, and whether it was a refusal."""
    parts: list[Part] = []
    refused = False
    for item in output:
        kind = getattr(item, "type", None)
        if kind == "message":
            for block in item.content:
                if block.type == "output_text":
                    parts.append(TextPart(text=block.text))
                elif block.type == "refusal":
                    refused = True
                    parts.append(TextPart(text=block.refusal))
        elif kind == "reasoning":
            text = "".join(s.text for s in item.summary or ())
            signature = reasoning_signature(item.id, item.encrypted_content)
            parts.append(ThinkingPart(text=text, signature=signature))
        elif kind == "function_call":
            try:
                arguments = json.loads(item.arguments or "{}")
            except ValueError as exc:
                raise ContentError(
                    f"tool call {item.name!r} has arguments that are not JSON"
                ) from exc
            if not isinstance(arguments, dict):
                raise ContentError(f"tool call {item.name!r} has arguments that are not an object")
            parts.append(FunctionCallPart(id=item.call_id, name=item.name, arguments=arguments))
        else:
            raise ContentError(f"the reply has an output item this adapter cannot read: {kind!r}")
    return Message(role="model", parts=tuple(parts)), refused


def response_usage(usage: Any) -> Usage | None:
    if usage is None:
        return None
    inputs = getattr(usage, "input_tokens_details", None)
    outputs = getattr(usage, "output_tokens_details", None)
    return Usage(
        prompt_tokens=reported_count(getattr(usage, "input_tokens", 0)),
        output_tokens=reported_count(getattr(usage, "output_tokens", 0)),
        cached_tokens=reported_count(getattr(inputs, "cached_tokens", 0)),
        thinking_tokens=reported_count(getattr(outputs, "reasoning_tokens", 0)),
    )


def dict_usage(usage: Any) -> Usage | None:
    """The usage of a Responses API answer read as JSON (``None``: none reported; a count that
    is not one reads as 0: :func:`~autocompact.usage_check.reported_count`)."""
    if not isinstance(usage, Mapping):
        return None
    inputs = usage.get("input_tokens_details")
    outputs = usage.get("output_tokens_details")
    inputs = inputs if isinstance(inputs, Mapping) else {}
    outputs = outputs if isinstance(outputs, Mapping) else {}
    return Usage(
        prompt_tokens=reported_count(usage.get("input_tokens")),
        output_tokens=reported_count(usage.get("output_tokens")),
        cached_tokens=reported_count(inputs.get("cached_tokens")),
        thinking_tokens=reported_count(outputs.get("reasoning_tokens")),
    )

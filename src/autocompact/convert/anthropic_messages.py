"""Anthropic Messages API message dicts <-> the content model. Pure.

See :mod:`autocompact.convert` for the rules both directions follow.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from autocompact.codec import decoded_message, decoded_response, decoded_text
from autocompact.content import (
    OPAQUE_SUMMARY_PREFIX,
    DocumentPart,
    FunctionCallPart,
    FunctionResponsePart,
    ImagePart,
    Message,
    OpaquePart,
    Part,
    TextPart,
    ThinkingPart,
    measured_call,
    portable_history,
)
from autocompact.convert._common import (
    UNKNOWN_TOOL_NAME,
    JsonDict,
    media_url,
    parse_data_url,
    require_array,
    require_mapping,
    require_str,
)
from autocompact.errors import ContentError
from autocompact.jsonsize import json_form
from autocompact.toolmedia import is_media_block, media_blocks

__all__ = [
    "from_anthropic_message",
    "from_anthropic_messages",
    "to_anthropic_message",
    "to_anthropic_messages",
]


# -- Anthropic ---------------------------------------------------------------------------------


def from_anthropic_messages(
    msgs: Iterable[Mapping[str, Any]],
    system: str | Sequence[Mapping[str, Any]] | None = None,
) -> tuple[str | None, list[Message]]:
    """Read Anthropic Messages API messages.

    Args:
        msgs: the ``messages`` array (plain dicts with ``role`` and ``content``).
        system: the request's ``system``: a string or a list of text blocks.

    Returns:
        ``(system, history)``: the system prompt as one string (``None`` when absent) and the
        conversation as content-model messages, one per input message.

    Raises:
        ContentError: an unknown role or block type, or a malformed block (naming the index).
    """
    tool_names: dict[str, str] = {}
    history = [
        from_anthropic_message(msg, index=index, tool_names=tool_names)
        for index, msg in enumerate(require_array(msgs, "messages"))
    ]
    return _anthropic_system(system), history


def _anthropic_system(system: str | Sequence[Mapping[str, Any]] | None) -> str | None:
    if system is None or isinstance(system, str):
        return system
    if not isinstance(system, list):
        raise ContentError(
            f"system must be a string or a list of text blocks, got {type(system).__name__}"
        )
    texts = []
    for block in system:
        if not isinstance(block, Mapping) or block.get("type") != "text":
            kind = block.get("type") if isinstance(block, Mapping) else type(block).__name__
            raise ContentError(f"system: unknown system block type {kind!r} (only 'text')")
        texts.append(str(block.get("text", "")))
    return "\n\n".join(texts)


def from_anthropic_message(
    msg: Mapping[str, Any], *, index: int = 0, tool_names: dict[str, str] | None = None
) -> Message:
    """Read one Anthropic message.

    Args:
        msg: a dict with ``role`` (``user`` or ``assistant``) and ``content``.
        index: its position, used in error messages.
        tool_names: ``tool_use`` id → name, read to name tool results and updated with this
            message's tool calls (pass the same dict for every message of a conversation).

    Raises:
        ContentError: an unknown role or block type, or a malformed block.
    """
    msg = msg if type(msg) is dict else require_mapping(msg, index, "an Anthropic message")
    names = tool_names if tool_names is not None else {}
    role = msg.get("role")
    if role not in ("user", "assistant"):
        raise ContentError(
            f"message {index}: unknown Anthropic message role {role!r}: expected user or "
            "assistant (pass the system prompt separately)",
            index=index,
        )
    content = msg.get("content")
    if isinstance(content, str):
        parts: tuple[Part, ...] = (decoded_text(content),)
    elif isinstance(content, list):
        parts = tuple([_anthropic_block(block, index, names) for block in content])
    else:
        raise ContentError(
            f"message {index}: content must be a string or a list of blocks, "
            f"got {type(content).__name__}",
            index=index,
        )
    # The role and every part were checked above, as Message's constructor would check them.
    return decoded_message("user" if role == "user" else "model", parts)


def _anthropic_block(raw: Any, index: int, names: dict[str, str]) -> Part:
    # The parts are built from fields checked here as their constructors check them (a JSON
    # object parsed from text is a dict: the Mapping check is for other callers).
    block = raw if type(raw) is dict else require_mapping(raw, index, "a content block")
    kind = block.get("type")
    if kind == "text":
        return decoded_text(require_str(block, "text", index, "a text block"))
    if kind == "thinking":
        signature = block.get("signature")
        return ThinkingPart(
            text=require_str(block, "thinking", index, "a thinking block"),
            signature=signature if isinstance(signature, str) and signature else None,
        )
    if kind == "redacted_thinking":
        return ThinkingPart(
            text="",
            signature=require_str(block, "data", index, "a redacted_thinking block"),
            redacted=True,
        )
    if kind == "tool_use":
        call_id = require_str(block, "id", index, "a tool_use block")
        name = require_str(block, "name", index, "a tool_use block")
        arguments = require_mapping(block.get("input", {}), index, "tool_use input")
        names[call_id] = name
        return measured_call(call_id, name, dict(arguments))  # measured now, as constructed
    if kind == "tool_result":
        call_id = require_str(block, "tool_use_id", index, "a tool_result block")
        name = names.get(call_id, UNKNOWN_TOOL_NAME)
        response = _anthropic_tool_result_content(block.get("content"), index)
        is_error = bool(block.get("is_error", False))
        if isinstance(response, str) and isinstance(name, str):  # measured when first asked
            return decoded_response(call_id, name, response, is_error)
        return FunctionResponsePart(id=call_id, name=name, response=response, is_error=is_error)
    if kind in ("image", "document"):
        return _anthropic_media(block, kind, index)
    raise ContentError(
        f"message {index}: unknown Anthropic content block type {kind!r} (expected text, "
        "thinking, redacted_thinking, tool_use, tool_result, image or document)",
        index=index,
    )


def _anthropic_tool_result_content(content: Any, index: int) -> Any:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        blocks: list[JsonDict] = []
        for item in content:
            block = require_mapping(item, index, "a tool_result content block")
            kind = block.get("type")
            if kind == "text":
                text = require_str(block, "text", index, "a text block")
                blocks.append({"type": "text", "text": text})
            elif kind in ("image", "document"):
                # Kept as the provider's own JSON: the content model has no nested parts.
                _anthropic_media(block, kind, index)  # validates the source
                blocks.append({k: v for k, v in block.items() if k != "cache_control"})
            else:
                raise ContentError(
                    f"message {index}: unknown tool_result content block type {kind!r} "
                    "(expected text, image or document)",
                    index=index,
                )
        return blocks
    raise ContentError(
        f"message {index}: tool_result content must be a string or a list of blocks", index=index
    )


def _anthropic_media(block: Mapping[str, Any], kind: str, index: int) -> Part:
    source = require_mapping(block.get("source"), index, f"an {kind} block's source")
    source_type = source.get("type")
    title = block.get("title")
    title = title if isinstance(title, str) else None
    if source_type == "base64":
        media_type = require_str(source, "media_type", index, f"a base64 {kind} source")
        data = require_str(source, "data", index, f"a base64 {kind} source")
        if kind == "image":
            return ImagePart(media_type=media_type, data=data)
        return DocumentPart(media_type=media_type, data=data, title=title)
    if source_type == "url":
        url = require_str(source, "url", index, f"a url {kind} source")
        if kind == "image":
            return ImagePart(url=url)
        return DocumentPart(url=url, title=title)
    raise ContentError(
        f"message {index}: unknown {kind} source type {source_type!r} (expected base64 or url)",
        index=index,
    )


def to_anthropic_messages(
    history: Sequence[Message], *, opaque_family: str | None = None
) -> list[JsonDict]:
    """Write a history as Anthropic Messages API messages (content always a list of blocks).

    Args:
        history: the conversation.
        opaque_family: the model family whose Anthropic ``compaction`` blocks (opaque parts)
            are sent back as received; every other opaque part becomes its summary as text.

    Raises:
        ContentError: a part the role cannot carry (naming the index).
    """
    portable = portable_history(history, provider="anthropic", family=opaque_family)
    return [to_anthropic_message(message, index=index) for index, message in enumerate(portable)]


def to_anthropic_message(message: Message, *, index: int = 0) -> JsonDict:
    """Write one message as an Anthropic message dict.

    Raises:
        ContentError: an image, document or tool result in a model message, or a thinking part
            or tool call in a user message.
    """
    blocks = [_anthropic_out_block(part, message, index) for part in message.parts]
    return {"role": "user" if message.role == "user" else "assistant", "content": blocks}


def _anthropic_out_block(part: Part, message: Message, index: int) -> JsonDict:
    user = message.role == "user"
    match part:
        case TextPart():
            return {"type": "text", "text": part.text}
        case ThinkingPart() if not user:
            if part.redacted:
                return {"type": "redacted_thinking", "data": part.signature or ""}
            block: JsonDict = {"type": "thinking", "thinking": part.text}
            if part.signature is not None:
                block["signature"] = part.signature
            return block
        case FunctionCallPart() if not user:
            return {
                "type": "tool_use",
                "id": part.id,
                "name": part.name,
                "input": dict(part.arguments),
            }
        case FunctionResponsePart() if user:
            result: JsonDict = {"type": "tool_result", "tool_use_id": part.id}
            result["content"] = _tool_result_content(part, index)
            if part.is_error:
                result["is_error"] = True
            return result
        case ImagePart() | DocumentPart() if user:
            return _anthropic_media_block(part, index)
        case OpaquePart() if part.provider == "anthropic":
            # Sent back exactly as the API returned it (a copy: the part stays immutable).
            return copy.deepcopy(dict(part.payload))
        case OpaquePart():
            return {"type": "text", "text": OPAQUE_SUMMARY_PREFIX + part.summary}
        case _:
            where = "a user" if user else "an assistant"
            raise ContentError(
                f"message {index}: a {part.kind} part cannot be in {where} message", index=index
            )


def _tool_result_content(part: FunctionResponsePart, index: int) -> str | list[JsonDict]:
    """A tool result's ``content``: a string as it is; a list holding images or documents (in
    any shape :mod:`autocompact.toolmedia` reads) as blocks, each image or document in this
    API's form (the estimate counts each as one image); a list of this API's text, image and
    document blocks as it is; anything else as its JSON."""
    response = part.response
    if isinstance(response, str):
        return response
    if type(response) is list and media_blocks(response):
        return [_tool_result_block(block, part, index) for block in response]
    if isinstance(response, list) and all(
        isinstance(b, dict) and b.get("type") in ("text", "image", "document") for b in response
    ):
        return [dict(b) for b in response]
    return json.dumps(response, ensure_ascii=False)


_IMAGE_KINDS = ("image", "image_url", "input_image")
_DOCUMENT_KINDS = ("document", "file", "input_file")


def _tool_result_block(block: Any, part: FunctionResponsePart, index: int) -> JsonDict:
    """One member of a tool's list result holding media, as a ``tool_result`` content block."""
    if not is_media_block(block):
        if type(block) is dict and block.get("type") == "text" and type(block.get("text")) is str:
            return dict(block)
        return {"type": "text", "text": json_form(block)}
    kind = block["type"]
    source = block.get("source")
    if kind in ("image", "document") and type(source) is dict:
        return dict(block)  # already this API's form
    url = media_url(block) if kind in _IMAGE_KINDS or kind in _DOCUMENT_KINDS else None
    if url is None:
        raise ContentError(
            f"message {index}: the result of tool call {part.id!r} ({part.name}) holds a "
            f"{kind!r} block the Anthropic API cannot carry in a tool result (an image or "
            "document by base64 data or URL can)",
            index=index,
        )
    parsed = parse_data_url(url)
    shown: JsonDict = (
        {"type": "base64", "media_type": parsed[0], "data": parsed[1]}
        if parsed is not None
        else {"type": "url", "url": url}
    )
    return {"type": "image" if kind in _IMAGE_KINDS else "document", "source": shown}


def _anthropic_media_block(part: ImagePart | DocumentPart, index: int) -> JsonDict:
    if part.data is not None:
        source: JsonDict = {"type": "base64", "media_type": part.media_type, "data": part.data}
    elif part.url is not None:
        source = {"type": "url", "url": part.url}
    else:
        raise ContentError(f"message {index}: a {part.kind} has neither data nor url", index=index)
    block: JsonDict = {"type": part.kind, "source": source}
    if isinstance(part, DocumentPart) and part.title is not None:
        block["title"] = part.title
    return block

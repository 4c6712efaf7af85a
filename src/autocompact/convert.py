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

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, TypeAlias

from autocompact.content import (
    DocumentPart,
    FunctionCallPart,
    FunctionResponsePart,
    ImagePart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
)
from autocompact.errors import ContentError

__all__ = [
    "ThinkingMode",
    "data_url",
    "from_anthropic_message",
    "from_anthropic_messages",
    "from_openai_messages",
    "parse_data_url",
    "response_text",
    "to_anthropic_message",
    "to_anthropic_messages",
    "to_openai_messages",
]

ThinkingMode: TypeAlias = Literal["reasoning_content", "drop", "error"]
"""How :func:`to_openai_messages` sends thinking parts (OpenAI itself takes none back)."""

UNKNOWN_TOOL_NAME = "unknown"

_DATA_URL = re.compile(r"^data:(?P<type>[^;,]+)?(?P<params>(;[^;,]*)*?);base64,(?P<data>.*)$", re.S)

JsonDict: TypeAlias = dict[str, Any]


# -- small shared helpers ----------------------------------------------------------------------


def parse_data_url(url: str) -> tuple[str, str] | None:
    """``(media_type, base64 data)`` of a ``data:...;base64,...`` URL, or ``None``."""
    match = _DATA_URL.match(url)
    if match is None:
        return None
    return match.group("type") or "application/octet-stream", match.group("data")


def data_url(media_type: str, data: str) -> str:
    """A ``data:`` URL for base64 ``data``."""
    return f"data:{media_type};base64,{data}"


def response_text(response: Any) -> str:
    """A function response as one string: strings as they are, text blocks joined, else JSON."""
    if isinstance(response, str):
        return response
    if _is_text_block_list(response):
        return "".join(block["text"] for block in response)
    return json.dumps(response, ensure_ascii=False)


def _is_text_block_list(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
            for b in value
        )
    )


def _require_mapping(value: Any, index: int, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ContentError(
            f"message {index}: {what} must be a JSON object, got {type(value).__name__}",
            index=index,
        )
    return value


def _require_str(block: Mapping[str, Any], key: str, index: int, what: str) -> str:
    value = block.get(key)
    if not isinstance(value, str):
        raise ContentError(
            f"message {index}: {what} needs a string '{key}', got {type(value).__name__}",
            index=index,
        )
    return value


# -- OpenAI ------------------------------------------------------------------------------------


def from_openai_messages(
    msgs: Iterable[Mapping[str, Any]],
) -> tuple[str | None, list[Message]]:
    """Read OpenAI chat-completions messages.

    Args:
        msgs: the ``messages`` array of a request (plain dicts).

    Returns:
        ``(system, history)``: the leading system/developer messages joined by a blank line
        (``None`` when there are none) and the conversation as content-model messages.

    Raises:
        ContentError: an unknown role or content part type, a system message after the
            conversation started, malformed tool-call arguments; the message names the index.
    """
    systems: list[str] = []
    history: list[Message] = []
    tool_names: dict[str, str] = {}
    pending_user: list[Part] | None = None  # an open user turn made of tool results
    started = False

    def flush() -> None:
        nonlocal pending_user
        if pending_user is not None:
            history.append(Message(role="user", parts=tuple(pending_user)))
            pending_user = None

    for index, raw in enumerate(msgs):
        msg = _require_mapping(raw, index, "an OpenAI message")
        role = msg.get("role")
        if role in ("system", "developer"):
            if started:
                raise ContentError(
                    f"message {index}: a {role} message after the conversation started cannot be "
                    "expressed; move it to the start or make it a user message",
                    index=index,
                )
            systems.append(_openai_text_content(msg.get("content"), index, role))
            continue
        started = True
        if role == "tool":
            call_id = _require_str(msg, "tool_call_id", index, "a tool message")
            part = FunctionResponsePart(
                id=call_id,
                name=tool_names.get(call_id, UNKNOWN_TOOL_NAME),
                response=_openai_tool_content(msg.get("content"), index),
            )
            if pending_user is None:
                pending_user = []
            pending_user.append(part)
        elif role == "user":
            parts = _openai_user_parts(msg.get("content"), index)
            if pending_user is not None:
                pending_user.extend(parts)
                flush()
            else:
                history.append(Message(role="user", parts=parts))
        elif role == "assistant":
            flush()
            message = _openai_assistant(msg, index)
            tool_names.update((c.id, c.name) for c in message.function_calls)
            history.append(message)
        else:
            raise ContentError(
                f"message {index}: unknown OpenAI message role {role!r}: "
                "expected system, developer, user, assistant or tool",
                index=index,
            )
    flush()
    return ("\n\n".join(systems) if systems else None), history


def _openai_text_content(content: Any, index: int, role: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for item in content:
            block = _require_mapping(item, index, f"a {role} content part")
            if block.get("type") != "text":
                raise ContentError(
                    f"message {index}: content part type {block.get('type')!r} is not allowed "
                    f"in a {role} message (only 'text')",
                    index=index,
                )
            texts.append(_require_str(block, "text", index, "a text part"))
        return "".join(texts)
    raise ContentError(
        f"message {index}: {role} content must be a string or a list of text parts", index=index
    )


def _openai_tool_content(content: Any, index: int) -> Any:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        blocks: list[JsonDict] = []
        for item in content:
            block = _require_mapping(item, index, "a tool content part")
            if block.get("type") != "text":
                raise ContentError(
                    f"message {index}: unknown tool content part type {block.get('type')!r} "
                    "(only 'text')",
                    index=index,
                )
            blocks.append({"type": "text", "text": _require_str(block, "text", index, "a part")})
        return blocks
    raise ContentError(
        f"message {index}: tool content must be a string or a list of text parts", index=index
    )


def _openai_user_parts(content: Any, index: int) -> tuple[Part, ...]:
    if isinstance(content, str):
        return (TextPart(text=content),)
    if not isinstance(content, list):
        raise ContentError(
            f"message {index}: user content must be a string or a list of parts, "
            f"got {type(content).__name__}",
            index=index,
        )
    parts: list[Part] = []
    for item in content:
        block = _require_mapping(item, index, "a user content part")
        kind = block.get("type")
        if kind == "text":
            parts.append(TextPart(text=_require_str(block, "text", index, "a text part")))
        elif kind == "image_url":
            image = _require_mapping(block.get("image_url"), index, "image_url")
            url = _require_str(image, "url", index, "an image_url part")
            decoded = parse_data_url(url)
            if decoded is not None:
                parts.append(ImagePart(media_type=decoded[0], data=decoded[1]))
            else:
                parts.append(ImagePart(url=url))
        elif kind == "file":
            file = _require_mapping(block.get("file"), index, "file")
            file_data = file.get("file_data")
            decoded = parse_data_url(file_data) if isinstance(file_data, str) else None
            if decoded is None:
                raise ContentError(
                    f"message {index}: a 'file' part needs 'file_data' as a base64 data URL "
                    "(uploaded file ids cannot be represented)",
                    index=index,
                )
            title = file.get("filename")
            parts.append(
                DocumentPart(
                    media_type=decoded[0],
                    data=decoded[1],
                    title=title if isinstance(title, str) else None,
                )
            )
        else:
            raise ContentError(
                f"message {index}: unknown OpenAI user content part type {kind!r} "
                "(expected text, image_url or file)",
                index=index,
            )
    return tuple(parts)


def _openai_assistant(msg: Mapping[str, Any], index: int) -> Message:
    parts: list[Part] = []
    reasoning = msg.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        parts.append(ThinkingPart(text=reasoning))
    content = msg.get("content")
    if isinstance(content, str):
        if content or not (parts or msg.get("tool_calls")):
            parts.append(TextPart(text=content))
    elif isinstance(content, list):
        for item in content:
            block = _require_mapping(item, index, "an assistant content part")
            kind = block.get("type")
            if kind == "text":
                parts.append(TextPart(text=_require_str(block, "text", index, "a text part")))
            elif kind == "refusal":
                parts.append(TextPart(text=_require_str(block, "refusal", index, "a refusal")))
            else:
                raise ContentError(
                    f"message {index}: unknown OpenAI assistant content part type {kind!r} "
                    "(expected text or refusal)",
                    index=index,
                )
    elif content is not None:
        raise ContentError(
            f"message {index}: assistant content must be a string, a list or null", index=index
        )
    refusal = msg.get("refusal")
    if isinstance(refusal, str) and refusal and content is None:
        parts.append(TextPart(text=refusal))
    for call in msg.get("tool_calls") or ():
        parts.append(_openai_tool_call(call, index))
    return Message(role="model", parts=tuple(parts))


def _openai_tool_call(raw: Any, index: int) -> FunctionCallPart:
    call = _require_mapping(raw, index, "a tool call")
    kind = call.get("type", "function")
    if kind != "function":
        raise ContentError(
            f"message {index}: unknown tool call type {kind!r} (only 'function')", index=index
        )
    function = _require_mapping(call.get("function"), index, "tool_calls[].function")
    name = _require_str(function, "name", index, "a tool call function")
    arguments_text = function.get("arguments") or "{}"
    try:
        arguments = (
            json.loads(arguments_text) if isinstance(arguments_text, str) else arguments_text
        )
    except json.JSONDecodeError as exc:
        raise ContentError(
            f"message {index}: tool call {name!r} has arguments that are not valid JSON: {exc}",
            index=index,
        ) from exc
    if not isinstance(arguments, dict):
        raise ContentError(
            f"message {index}: tool call {name!r} arguments must be a JSON object", index=index
        )
    return FunctionCallPart(
        id=_require_str(call, "id", index, "a tool call"), name=name, arguments=arguments
    )


def to_openai_messages(
    history: Sequence[Message],
    system: str | None = None,
    *,
    thinking: ThinkingMode = "reasoning_content",
) -> list[JsonDict]:
    """Write a history as OpenAI chat-completions messages.

    Args:
        history: the conversation.
        system: the system instruction, sent first as a ``system`` message when given.
        thinking: ``"reasoning_content"`` sends visible thinking in that field (DeepSeek, Qwen,
            vLLM read it; redacted thinking cannot be expressed and raises), ``"drop"`` leaves
            thinking out (what OpenAI itself needs), ``"error"`` raises on any thinking part.

    Returns:
        Plain dicts. Function responses become ``tool`` messages placed before the rest of
        their user turn; unset fields are omitted.

    Raises:
        ContentError: a part the role cannot carry in OpenAI's format (naming the index).
    """
    out: list[JsonDict] = []
    if system is not None:
        out.append({"role": "system", "content": system})
    for index, message in enumerate(history):
        if message.role == "user":
            out.extend(_openai_user_messages(message, index))
        else:
            out.append(_openai_assistant_message(message, index, thinking))
    return out


def _openai_user_messages(message: Message, index: int) -> list[JsonDict]:
    tools: list[JsonDict] = []
    content: list[JsonDict] = []
    for part in message.parts:
        match part:
            case FunctionResponsePart():
                tool_content: Any = (
                    [dict(b) for b in part.response]
                    if _is_text_block_list(part.response)
                    else response_text(part.response)
                )
                tools.append({"role": "tool", "tool_call_id": part.id, "content": tool_content})
            case TextPart():
                content.append({"type": "text", "text": part.text})
            case ImagePart():
                url = part.url if part.data is None else data_url(part.media_type, part.data)
                if url is None:
                    raise ContentError(
                        f"message {index}: an image has neither data nor url", index=index
                    )
                content.append({"type": "image_url", "image_url": {"url": url}})
            case DocumentPart():
                if part.data is None:
                    raise ContentError(
                        f"message {index}: OpenAI file parts need inline data; "
                        "a document by url cannot be expressed",
                        index=index,
                    )
                file: JsonDict = {"file_data": data_url(part.media_type, part.data)}
                if part.title is not None:
                    file["filename"] = part.title
                content.append({"type": "file", "file": file})
            case ThinkingPart() | FunctionCallPart():
                raise ContentError(
                    f"message {index}: a {part.kind} part cannot be in a user message", index=index
                )
    out = tools
    if content:
        if len(content) == 1 and content[0]["type"] == "text":
            out.append({"role": "user", "content": content[0]["text"]})
        else:
            out.append({"role": "user", "content": content})
    elif not tools:
        out.append({"role": "user", "content": ""})
    return out


def _openai_assistant_message(message: Message, index: int, thinking: ThinkingMode) -> JsonDict:
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[JsonDict] = []
    for part in message.parts:
        match part:
            case TextPart():
                texts.append(part.text)
            case ThinkingPart():
                if thinking == "drop":
                    continue
                if thinking == "error" or part.redacted:
                    what = "redacted thinking" if part.redacted else "a thinking part"
                    raise ContentError(
                        f"message {index}: {what} cannot be sent in OpenAI's format; "
                        "convert with thinking='drop' to leave it out",
                        index=index,
                    )
                reasoning.append(part.text)
            case FunctionCallPart():
                calls.append(
                    {
                        "id": part.id,
                        "type": "function",
                        "function": {
                            "name": part.name,
                            "arguments": json.dumps(dict(part.arguments), ensure_ascii=False),
                        },
                    }
                )
            case ImagePart() | DocumentPart() | FunctionResponsePart():
                raise ContentError(
                    f"message {index}: a {part.kind} part cannot be in an assistant message",
                    index=index,
                )
    out: JsonDict = {"role": "assistant"}
    if len(texts) == 1:
        out["content"] = texts[0]
    elif texts:
        out["content"] = [{"type": "text", "text": t} for t in texts]
    elif not calls and not reasoning:
        out["content"] = ""
    if reasoning:
        out["reasoning_content"] = "".join(reasoning)
    if calls:
        out["tool_calls"] = calls
    return out


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
        for index, msg in enumerate(msgs)
    ]
    return _anthropic_system(system), history


def _anthropic_system(system: str | Sequence[Mapping[str, Any]] | None) -> str | None:
    if system is None or isinstance(system, str):
        return system
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
    msg = _require_mapping(msg, index, "an Anthropic message")
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
        parts: tuple[Part, ...] = (TextPart(text=content),)
    elif isinstance(content, list):
        parts = tuple(_anthropic_block(block, index, names) for block in content)
    else:
        raise ContentError(
            f"message {index}: content must be a string or a list of blocks, "
            f"got {type(content).__name__}",
            index=index,
        )
    return Message(role="user" if role == "user" else "model", parts=parts)


def _anthropic_block(raw: Any, index: int, names: dict[str, str]) -> Part:
    block = _require_mapping(raw, index, "a content block")
    kind = block.get("type")
    if kind == "text":
        return TextPart(text=_require_str(block, "text", index, "a text block"))
    if kind == "thinking":
        signature = block.get("signature")
        return ThinkingPart(
            text=_require_str(block, "thinking", index, "a thinking block"),
            signature=signature if isinstance(signature, str) and signature else None,
        )
    if kind == "redacted_thinking":
        return ThinkingPart(
            text="",
            signature=_require_str(block, "data", index, "a redacted_thinking block"),
            redacted=True,
        )
    if kind == "tool_use":
        call_id = _require_str(block, "id", index, "a tool_use block")
        name = _require_str(block, "name", index, "a tool_use block")
        arguments = _require_mapping(block.get("input", {}), index, "tool_use input")
        names[call_id] = name
        return FunctionCallPart(id=call_id, name=name, arguments=dict(arguments))
    if kind == "tool_result":
        call_id = _require_str(block, "tool_use_id", index, "a tool_result block")
        return FunctionResponsePart(
            id=call_id,
            name=names.get(call_id, UNKNOWN_TOOL_NAME),
            response=_anthropic_tool_result_content(block.get("content"), index),
            is_error=bool(block.get("is_error", False)),
        )
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
            block = _require_mapping(item, index, "a tool_result content block")
            kind = block.get("type")
            if kind == "text":
                text = _require_str(block, "text", index, "a text block")
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
    source = _require_mapping(block.get("source"), index, f"an {kind} block's source")
    source_type = source.get("type")
    title = block.get("title")
    title = title if isinstance(title, str) else None
    if source_type == "base64":
        media_type = _require_str(source, "media_type", index, f"a base64 {kind} source")
        data = _require_str(source, "data", index, f"a base64 {kind} source")
        if kind == "image":
            return ImagePart(media_type=media_type, data=data)
        return DocumentPart(media_type=media_type, data=data, title=title)
    if source_type == "url":
        url = _require_str(source, "url", index, f"a url {kind} source")
        if kind == "image":
            return ImagePart(url=url)
        return DocumentPart(url=url, title=title)
    raise ContentError(
        f"message {index}: unknown {kind} source type {source_type!r} (expected base64 or url)",
        index=index,
    )


def to_anthropic_messages(history: Sequence[Message]) -> list[JsonDict]:
    """Write a history as Anthropic Messages API messages (content always a list of blocks).

    Raises:
        ContentError: a part the role cannot carry (naming the index).
    """
    return [to_anthropic_message(message, index=index) for index, message in enumerate(history)]


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
            response = part.response
            if isinstance(response, str):
                result["content"] = response
            elif isinstance(response, list) and all(
                isinstance(b, dict) and b.get("type") in ("text", "image", "document")
                for b in response
            ):
                result["content"] = [dict(b) for b in response]
            else:
                result["content"] = json.dumps(response, ensure_ascii=False)
            if part.is_error:
                result["is_error"] = True
            return result
        case ImagePart() | DocumentPart() if user:
            return _anthropic_media_block(part, index)
        case _:
            where = "a user" if user else "an assistant"
            raise ContentError(
                f"message {index}: a {part.kind} part cannot be in {where} message", index=index
            )


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

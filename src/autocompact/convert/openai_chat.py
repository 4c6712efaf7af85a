"""OpenAI chat-completions message dicts <-> the content model. Pure.

See :mod:`autocompact.convert` for the rules both directions follow.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
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
    portable_history,
)
from autocompact.convert._common import (
    UNKNOWN_TOOL_NAME,
    JsonDict,
    ThinkingMode,
    data_url,
    is_text_block_list,
    parse_data_url,
    require_array,
    require_mapping,
    require_str,
    response_text,
)
from autocompact.errors import ContentError
from autocompact.jsonsafe import loads
from autocompact.toolmedia import no_tool_media

__all__ = ["from_openai_messages", "to_openai_messages"]


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

    for index, raw in enumerate(require_array(msgs, "messages")):
        msg = require_mapping(raw, index, "an OpenAI message")
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
            call_id = require_str(msg, "tool_call_id", index, "a tool message")
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
            block = require_mapping(item, index, f"a {role} content part")
            if block.get("type") != "text":
                raise ContentError(
                    f"message {index}: content part type {block.get('type')!r} is not allowed "
                    f"in a {role} message (only 'text')",
                    index=index,
                )
            texts.append(require_str(block, "text", index, "a text part"))
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
            block = require_mapping(item, index, "a tool content part")
            if block.get("type") != "text":
                raise ContentError(
                    f"message {index}: unknown tool content part type {block.get('type')!r} "
                    "(only 'text')",
                    index=index,
                )
            blocks.append({"type": "text", "text": require_str(block, "text", index, "a part")})
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
        block = require_mapping(item, index, "a user content part")
        kind = block.get("type")
        if kind == "text":
            parts.append(TextPart(text=require_str(block, "text", index, "a text part")))
        elif kind == "image_url":
            image = require_mapping(block.get("image_url"), index, "image_url")
            url = require_str(image, "url", index, "an image_url part")
            decoded = parse_data_url(url)
            if decoded is not None:
                parts.append(ImagePart(media_type=decoded[0], data=decoded[1]))
            else:
                parts.append(ImagePart(url=url))
        elif kind == "file":
            file = require_mapping(block.get("file"), index, "file")
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
            block = require_mapping(item, index, "an assistant content part")
            kind = block.get("type")
            if kind == "text":
                parts.append(TextPart(text=require_str(block, "text", index, "a text part")))
            elif kind == "refusal":
                parts.append(TextPart(text=require_str(block, "refusal", index, "a refusal")))
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
    calls = msg.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        raise ContentError(
            f"message {index}: tool_calls must be a list, got {type(calls).__name__}", index=index
        )
    for call in calls or ():
        parts.append(_openai_tool_call(call, index))
    return Message(role="model", parts=tuple(parts))


def _openai_tool_call(raw: Any, index: int) -> FunctionCallPart:
    call = require_mapping(raw, index, "a tool call")
    kind = call.get("type", "function")
    if kind != "function":
        raise ContentError(
            f"message {index}: unknown tool call type {kind!r} (only 'function')", index=index
        )
    function = require_mapping(call.get("function"), index, "tool_calls[].function")
    name = require_str(function, "name", index, "a tool call function")
    arguments_text = function.get("arguments") or "{}"
    try:
        arguments = loads(arguments_text) if isinstance(arguments_text, str) else arguments_text
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
        id=require_str(call, "id", index, "a tool call"), name=name, arguments=arguments
    )


def to_openai_messages(
    history: Sequence[Message],
    system: str | None = None,
    *,
    thinking: ThinkingMode = "reasoning_content",
    text_as_string: bool = False,
) -> list[JsonDict]:
    """Write a history as OpenAI chat-completions messages.

    Args:
        history: the conversation.
        system: the system instruction, sent first as a ``system`` message when given.
        thinking: ``"reasoning_content"`` sends visible thinking in that field (DeepSeek, Qwen,
            vLLM read it; redacted thinking cannot be expressed and raises), ``"drop"`` leaves
            thinking out (what OpenAI itself needs), ``"error"`` raises on any thinking part.
        text_as_string: a message whose content is only text goes as one string, its parts
            joined by a blank line (some compatible servers accept no list of text parts).

    Returns:
        Plain dicts. Function responses become ``tool`` messages placed before the rest of
        their user turn; unset fields are omitted.

    Raises:
        ContentError: a part the role cannot carry in OpenAI's format (naming the index).
    """
    out: list[JsonDict] = []
    if system is not None:
        out.append({"role": "system", "content": system})
    # Chat completions carry no opaque item: every native compaction goes as its summary.
    for index, message in enumerate(portable_history(history)):
        if message.role == "user":
            converted = _openai_user_messages(message, index)
        else:
            converted = [_openai_assistant_message(message, index, thinking)]
        if text_as_string:
            converted = [_joined(m) for m in converted]
        out.extend(converted)
    return out


def _joined(message: JsonDict) -> JsonDict:
    """``message`` with a content made only of text parts written as one string."""
    content = message.get("content")
    if (
        isinstance(content, list)
        and content
        and all(isinstance(b, dict) and b.get("type") == "text" for b in content)
    ):
        return {**message, "content": "\n\n".join(str(b.get("text", "")) for b in content)}
    return message


def _openai_user_messages(message: Message, index: int) -> list[JsonDict]:
    tools: list[JsonDict] = []
    content: list[JsonDict] = []
    for part in message.parts:
        match part:
            case FunctionResponsePart():
                no_tool_media(part, index, "Chat Completions")
                tool_content: Any = (
                    [dict(b) for b in part.response]
                    if is_text_block_list(part.response)
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
            case ThinkingPart() | FunctionCallPart() | OpaquePart():
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
            case ImagePart() | DocumentPart() | FunctionResponsePart() | OpaquePart():
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

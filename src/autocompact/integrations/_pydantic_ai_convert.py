"""Conversion between pydantic-ai messages and autocompact messages (lossless).

Messages and parts the engine did not change come back as the very objects that went in; new
ones (the summary, cleared tool output, the guarantee's marker) are built from the engine's parts.
Parts the engine cannot express raise :class:`~autocompact.errors.ContentError` naming the part.
Public through :mod:`autocompact.integrations.pydantic_ai`.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, assert_never

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
)
from autocompact.errors import ContentError, MissingDependencyError
from autocompact.providers.base import ToolSpec
from autocompact.toolmedia import is_media_block, media_blocks

try:
    from pydantic_ai import messages as pm
    from pydantic_ai.tools import ToolDefinition
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    raise MissingDependencyError("pydantic-ai-slim", "pydantic-ai") from exc

__all__ = [
    "Converted",
    "from_autocompact",
    "response_part",
    "system_text",
    "to_autocompact",
    "tool_specs",
]


# -- conversion ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Converted:
    """A pydantic-ai history as autocompact messages, with what is needed to convert back.

    Attributes:
        messages: one message per pydantic-ai message that carries conversation content
            (a request holding only system prompts has none).
        system_parts: the system prompt parts, in order (counted as the system instruction and
            put back at the front of the first request when a compaction summarized them).
        system_instruction: their text, joined.
    """

    messages: tuple[Message, ...]
    system_parts: tuple[pm.SystemPromptPart, ...]
    system_instruction: str | None
    _originals: dict[int, Any] = field(default_factory=dict, repr=False, compare=False)
    _layout: _Layout | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class _Layout:
    """Where each engine message and part came from, to rebuild a changed request from its
    original and to put requests without conversation content back in place."""

    history: tuple[pm.ModelMessage, ...]
    index: dict[int, int]  # id(engine message) -> its history index
    homes: dict[int, tuple[int, int]]  # id(engine part) -> (history index, part index)
    parts_of: dict[tuple[int, int], tuple[Part, ...]]  # (history index, part index) -> parts
    returns: dict[tuple[str, str], tuple[int, int] | None]  # (call id, name) -> home, if one
    skipped: dict[int | None, list[pm.ModelMessage]]  # next converted index (None: the end)


def _json_value(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


UNKNOWN_IMAGE = "image/*"
"""The media type of an ``ImageUrl`` that neither declares one nor tells it by its URL."""
UNKNOWN_DOCUMENT = "application/octet-stream"
"""The same for a ``DocumentUrl``."""


def _url_media_type(item: pm.ImageUrl | pm.DocumentUrl, unknown: str) -> str:
    """The URL's media type: declared, else told by the URL's extension, else ``unknown``
    (pydantic-ai raises ``ValueError`` for a URL such as ``https://picsum.photos/200``, which
    it sends all the same)."""
    try:
        return item.media_type
    except ValueError:
        return unknown


def _user_content(item: Any, where: str, what: str = "user content") -> Part:
    if isinstance(item, str):
        return TextPart(text=item)
    if isinstance(item, pm.ImageUrl):
        return ImagePart(url=item.url, media_type=_url_media_type(item, UNKNOWN_IMAGE))
    if isinstance(item, pm.DocumentUrl):
        return DocumentPart(url=item.url, media_type=_url_media_type(item, UNKNOWN_DOCUMENT))
    if isinstance(item, pm.BinaryContent) and (item.is_image or item.is_document):
        data = base64.b64encode(item.data).decode("ascii")
        if item.is_image:
            return ImagePart(data=data, media_type=item.media_type)
        return DocumentPart(data=data, media_type=item.media_type)
    raise ContentError(
        f"{where}: {what} of kind {getattr(item, 'kind', type(item).__name__)!r} cannot be "
        "expressed by autocompact (text, images and documents can); remove it from the history "
        "or leave compaction off for this agent"
    )


def _tool_response(part: pm.ToolReturnPart, where: str) -> Any:
    """A tool return's content as the engine counts it.

    Its images and documents (``BinaryContent``, ``ImageUrl``, ``DocumentUrl``, alone or in a
    list) are what pydantic-ai's models send as files (an image block of Anthropic's
    ``tool_result``; a file after the tool message where a tool message holds only text), so
    the response is a list of blocks the core counts as one image each (``toolmedia``):
    ``{"type": "image" | "document", "base64" | "url": ..., "mime_type": ...}``, the text next
    to them as ``{"type": "text", "text": ...}``. Without files: its JSON value, else the text
    pydantic-ai sends for it. A list holding the tool's own dicts shaped like an image block
    (``{"type": "image", "base64": ...}``) is text too: pydantic-ai sends them as their JSON,
    which no model reads as an image, so they must not count as one.
    """
    if part.files:
        where = f"{where}: the result of tool call {part.tool_call_id!r} ({part.tool_name})"
        texts = part.content_items(mode="str", wrap_if_error=False)
        return [
            _tool_block(item, text, where)
            for item, text in zip(part.content_items(), texts, strict=True)
        ]
    if _json_value(part.content) and not media_blocks(part.content):
        return part.content
    return part.model_response_str()


def _is_text_block(item: Any) -> bool:
    return type(item) is dict and item.keys() == {"type", "text"} and item["type"] == "text"


def _tool_block(item: Any, text: object, where: str) -> Any:
    """One item of a tool return that holds files, as a block of its engine response."""
    if pm.is_multi_modal_content(item):
        media = _user_content(item, where, "a file")  # audio, video, uploaded files: raise
        assert isinstance(media, ImagePart | DocumentPart)
        kind = "image" if isinstance(media, ImagePart) else "document"
        shown = {"url": media.url} if media.url is not None else {"base64": media.data}
        return {"type": kind, **shown, "mime_type": media.media_type}
    if isinstance(item, str):
        return {"type": "text", "text": item}
    if _json_value(item) and not (is_media_block(item) or _is_text_block(item)):
        return item  # JSON the tool returned, given back as it is
    # Not JSON, or a dict that would read back as a file or a text: the text pydantic-ai sends.
    return {"type": "text", "text": text}


def _tool_content(response: Any) -> Any:
    """A tool return's content from its engine response (:func:`_tool_response` reversed):
    media blocks become the files pydantic-ai sends (``BinaryContent``, ``ImageUrl``,
    ``DocumentUrl``), text blocks next to them text. A list of one file is that file (a tool
    that returned ``[image]`` gets the image back; pydantic-ai sends both alike).

    Raises:
        ContentError: a media block in a shape pydantic-ai cannot send (not written here).
    """
    if not media_blocks(response):
        return response
    items = [_tool_item(block) for block in response]
    return items[0] if len(items) == 1 else items


def _tool_item(block: Any) -> Any:
    if _is_text_block(block):
        return block["text"]
    if not is_media_block(block):
        return block
    mime_type = block.get("mime_type")
    shown = {k: block[k] for k in ("url", "base64") if isinstance(block.get(k), str)}
    if block["type"] in ("image", "document", "file") and isinstance(mime_type, str) and shown:
        cls = ImagePart if block["type"] == "image" else DocumentPart
        return _media_back(
            cls(url=shown.get("url"), data=shown.get("base64"), media_type=mime_type)
        )
    raise ContentError(
        f"a tool result holds a {block['type']!r} block pydantic-ai cannot send (an image or "
        "document with a url or base64 and a mime_type can)"
    )


def _request_parts(part: Any, where: str) -> list[Part]:
    if isinstance(part, pm.UserPromptPart):
        content = part.content
        if isinstance(content, str):
            return [TextPart(text=content)]
        return [_user_content(item, where) for item in content]
    if isinstance(part, pm.ToolReturnPart):
        return [
            FunctionResponsePart(
                id=part.tool_call_id,
                name=part.tool_name,
                response=_tool_response(part, where),
                is_error=part.outcome != "success",
            )
        ]
    if isinstance(part, pm.RetryFeedbackPart):
        return [TextPart(text=part.model_response())]
    if isinstance(part, pm.RetryPromptPart):  # deprecated in pydantic-ai 2, still accepted
        if part.tool_name is None:
            return [TextPart(text=part.model_response())]
        return [
            FunctionResponsePart(
                id=part.tool_call_id,
                name=part.tool_name,
                response=part.model_response(),
                is_error=True,
            )
        ]
    raise ContentError(
        f"{where}: request part {getattr(part, 'part_kind', type(part).__name__)!r} cannot be "
        "expressed by autocompact (user prompts, tool returns and retry prompts can)"
    )


def response_part(part: Any, where: str) -> Part:
    if isinstance(part, pm.TextPart):
        return TextPart(text=part.content)
    if isinstance(part, pm.ThinkingPart):
        return ThinkingPart(text=part.content, signature=part.signature)
    if isinstance(part, pm.ToolCallPart):
        return FunctionCallPart(
            id=part.tool_call_id, name=part.tool_name, arguments=part.args_as_dict()
        )
    raise ContentError(
        f"{where}: response part {getattr(part, 'part_kind', type(part).__name__)!r} cannot be "
        "expressed by autocompact (text, thinking and tool calls can)"
    )


def system_text(parts: Sequence[pm.SystemPromptPart], where: str = "history") -> str | None:
    """The system prompt parts' text, joined (``None`` for none).

    Raises:
        ContentError: a part's content is not text.
    """
    for part in parts:
        if not isinstance(part.content, str):
            raise ContentError(
                f"{where}: a SystemPromptPart's content must be text, got "
                f"{type(part.content).__name__} ({part.content!r:.60})"
            )
    return "\n\n".join(p.content for p in parts) or None


def to_autocompact(history: Sequence[pm.ModelMessage]) -> Converted:
    """Convert a pydantic-ai history.

    Raises:
        ContentError: a part cannot be expressed; the message names the message index and kind.
    """
    messages: list[Message] = []
    system: list[pm.SystemPromptPart] = []
    originals: dict[int, Any] = {}
    layout = _Layout(tuple(history), {}, {}, {}, {}, {})
    waiting: list[pm.ModelMessage] = []  # requests without conversation content, not yet placed
    for index, model_message in enumerate(history):
        where = f"message {index}"
        parts: list[Part] = []
        if isinstance(model_message, pm.ModelRequest):
            for p_index, part in enumerate(model_message.parts):
                if isinstance(part, pm.SystemPromptPart):
                    system_text([part], where)
                    system.append(part)
                    continue
                converted = _request_parts(part, where)
                layout.parts_of[index, p_index] = tuple(converted)
                for item in converted:
                    layout.homes[id(item)] = (index, p_index)
                    if isinstance(item, FunctionResponsePart):  # a repeated id: none
                        key = (item.id, item.name)
                        layout.returns[key] = None if key in layout.returns else (index, p_index)
                parts.extend(converted)
            role: Literal["user", "model"] = "user"
        elif isinstance(model_message, pm.ModelResponse):
            for model_part in model_message.parts:
                converted_part = response_part(model_part, where)
                originals[id(converted_part)] = model_part
                parts.append(converted_part)
            role = "model"
        else:
            raise ContentError(f"{where}: not a pydantic-ai ModelRequest or ModelResponse")
        if not parts and role == "user":
            waiting.append(model_message)  # only system prompts, or nothing: kept in place
            continue
        if waiting:
            layout.skipped[index], waiting = waiting, []
        message = Message(role=role, parts=tuple(parts))
        originals[id(message)] = model_message
        layout.index[id(message)] = index
        messages.append(message)
    if waiting:
        layout.skipped[None] = waiting
    return Converted(
        messages=tuple(messages),
        system_parts=tuple(system),
        system_instruction=system_text(system),
        _originals=originals,
        _layout=layout,
    )


def _home(part: Part, layout: _Layout) -> tuple[int, int] | None:
    """The request part ``part`` came from: the same object, or a tool result's new output."""
    home = layout.homes.get(id(part))
    if home is None and isinstance(part, FunctionResponsePart):
        home = layout.returns.get((part.id, part.name))
    return home


def _original_part(
    home: tuple[int, int], parts: Sequence[Part], layout: _Layout
) -> pm.ModelRequestPart | None:
    """The original request part for ``parts`` (all from ``home``), its output replaced when
    the engine cleared a tool result; ``None`` when they are not what it became."""
    request = layout.history[home[0]]
    assert isinstance(request, pm.ModelRequest)
    original = request.parts[home[1]]
    if tuple(map(id, parts)) == tuple(map(id, layout.parts_of[home])):
        return original
    new = parts[0]
    if (
        len(parts) == 1
        and isinstance(new, FunctionResponsePart)
        and isinstance(original, pm.ToolReturnPart)
        and new.is_error == (original.outcome != "success")
    ):
        return dataclasses.replace(original, content=_tool_content(new.response))
    return None


def _groups(parts: Sequence[Part], layout: _Layout | None) -> list[tuple[Any, list[Part]]]:
    """Consecutive parts with the same home, grouped (a part without one alone)."""
    groups: list[tuple[Any, list[Part]]] = []
    for part in parts:
        home = _home(part, layout) if layout is not None else None
        if groups and home is not None and groups[-1][0] == home:
            groups[-1][1].append(part)
        else:
            groups.append((home, [part]))
    return groups


def _rebuilt_request(
    message: Message, layout: _Layout | None
) -> tuple[pm.ModelRequest, int | None]:
    """A request the engine changed, and its history index when it is one original request
    with parts replaced (rebuilt from the original: its other fields and parts kept)."""
    groups = _groups(message.parts, layout)
    if layout is not None and groups and all(home is not None for home, _ in groups):
        index = groups[0][0][0]
        original = layout.history[index]
        assert isinstance(original, pm.ModelRequest)
        by_part = {home[1]: parts for home, parts in groups if home[0] == index}
        wanted = [i for i, p in enumerate(original.parts) if not isinstance(p, pm.SystemPromptPart)]
        if len(by_part) == len(groups) and [home[1] for home, _ in groups] == wanted:
            new_parts: list[pm.ModelRequestPart] = []
            for p_index, part in enumerate(original.parts):
                if p_index not in by_part:  # a system prompt: kept in place
                    new_parts.append(part)
                    continue
                replaced = _original_part((index, p_index), by_part[p_index], layout)
                if replaced is None:
                    break
                new_parts.append(replaced)
            else:
                return dataclasses.replace(original, parts=new_parts), index
    return pm.ModelRequest(parts=_new_request_parts(groups, layout)), None


def _new_request_parts(
    groups: Sequence[tuple[Any, list[Part]]], layout: _Layout | None
) -> list[Any]:
    out: list[Any] = []
    for home, parts in groups:
        if home is not None and layout is not None:
            original = _original_part(home, parts, layout)
            if original is not None:
                out.append(original)
                continue
        out.extend(_new_request_part(part) for part in parts)
    return out


def _new_request_part(part: Part) -> Any:
    match part:
        case TextPart():
            return pm.UserPromptPart(content=part.text)
        case ImagePart() | DocumentPart():
            return pm.UserPromptPart(content=[_media_back(part)])
        case FunctionResponsePart():
            return pm.ToolReturnPart(
                tool_name=part.name,
                content=_tool_content(part.response),
                tool_call_id=part.id,
                outcome="failed" if part.is_error else "success",
            )
        case OpaquePart():
            # A native compaction result reaches another framework as its summary text.
            return pm.UserPromptPart(content=part.summary)
        case FunctionCallPart() | ThinkingPart():
            raise ContentError(f"a user message cannot hold a {part.kind} part")
        case _:
            assert_never(part)


def _media_back(part: ImagePart | DocumentPart) -> Any:
    if part.url is not None:
        if isinstance(part, ImagePart):
            image_type = None if part.media_type == UNKNOWN_IMAGE else part.media_type
            return pm.ImageUrl(url=part.url, media_type=image_type)
        document_type = None if part.media_type == UNKNOWN_DOCUMENT else part.media_type
        return pm.DocumentUrl(url=part.url, media_type=document_type)
    data = base64.b64decode(part.data or "")
    return pm.BinaryContent(data=data, media_type=part.media_type)


def _new_response_parts(parts: Sequence[Part], originals: dict[int, Any]) -> list[Any]:
    out: list[Any] = []
    for part in parts:
        original = originals.get(id(part))
        if original is not None:
            out.append(original)
            continue
        match part:
            case TextPart():
                out.append(pm.TextPart(content=part.text))
            case ThinkingPart():
                out.append(pm.ThinkingPart(content=part.text, signature=part.signature))
            case FunctionCallPart():
                out.append(
                    pm.ToolCallPart(
                        tool_name=part.name, args=dict(part.arguments), tool_call_id=part.id
                    )
                )
            case OpaquePart():
                out.append(pm.TextPart(content=part.summary))
            case FunctionResponsePart() | ImagePart() | DocumentPart():
                raise ContentError(f"a model message cannot hold a {part.kind} part")
            case _:
                assert_never(part)
    return out


def from_autocompact(
    messages: Sequence[Message], converted: Converted | None = None
) -> list[pm.ModelMessage]:
    """Convert back; what ``converted`` produced comes back as the original objects.

    A request the engine changed (a tool result cleared) is the original request with that
    part's output replaced. A request holding only system prompts (or nothing) comes back in
    its place, before the message that followed it, while that message is kept. System prompt
    parts that no longer appear (a compaction summarized their request) are put back at the
    front of the first request.
    """
    originals = converted._originals if converted is not None else {}
    layout = converted._layout if converted is not None else None
    out: list[pm.ModelMessage] = []
    placed: set[int | None] = set()
    home: int | None = None
    for message in messages:
        original = originals.get(id(message))
        home = None
        if original is not None:
            rebuilt = original
            home = layout.index.get(id(message)) if layout is not None else None
        elif message.role == "user":
            rebuilt, home = _rebuilt_request(message, layout)
        else:
            rebuilt = pm.ModelResponse(parts=_new_response_parts(message.parts, originals))
        if layout is not None and home is not None and home not in placed:
            placed.add(home)
            out.extend(layout.skipped.get(home, ()))
        out.append(rebuilt)
    # What followed the last message, when that one is kept (or there was none).
    if (
        layout is not None
        and None in layout.skipped
        and (not layout.index or home == max(layout.index.values()))
    ):
        out.extend(layout.skipped[None])
    if converted is not None and converted.system_parts:
        present = {
            id(part)
            for m in out
            if isinstance(m, pm.ModelRequest)
            for part in m.parts
            if isinstance(part, pm.SystemPromptPart)
        }
        missing = [p for p in converted.system_parts if id(p) not in present]
        if missing:
            first = next((i for i, m in enumerate(out) if isinstance(m, pm.ModelRequest)), None)
            if first is None:
                out.insert(0, pm.ModelRequest(parts=list(missing)))
            else:
                head = out[first]
                assert isinstance(head, pm.ModelRequest)
                out[first] = dataclasses.replace(head, parts=[*missing, *head.parts])
    return out


def tool_specs(definitions: Sequence[ToolDefinition]) -> tuple[ToolSpec, ...]:
    """The tool definitions as autocompact declarations (what the estimate measures)."""
    return tuple(
        ToolSpec(name=d.name, description=d.description or "", parameters=d.parameters_json_schema)
        for d in definitions
    )

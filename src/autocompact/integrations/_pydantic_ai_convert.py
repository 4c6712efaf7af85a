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


def _user_content(item: Any, where: str) -> Part:
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
        f"{where}: user content of kind {getattr(item, 'kind', type(item).__name__)!r} cannot be "
        "expressed by autocompact (text, images and documents can); remove it from the history "
        "or leave compaction off for this agent"
    )


def _request_parts(part: Any, where: str) -> list[Part]:
    if isinstance(part, pm.UserPromptPart):
        content = part.content
        if isinstance(content, str):
            return [TextPart(text=content)]
        return [_user_content(item, where) for item in content]
    if isinstance(part, pm.ToolReturnPart):
        response = part.content if _json_value(part.content) else part.model_response_str()
        return [
            FunctionResponsePart(
                id=part.tool_call_id,
                name=part.tool_name,
                response=response,
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
    for index, model_message in enumerate(history):
        where = f"message {index}"
        parts: list[Part] = []
        if isinstance(model_message, pm.ModelRequest):
            for part in model_message.parts:
                if isinstance(part, pm.SystemPromptPart):
                    system_text([part], where)
                    system.append(part)
                    continue
                converted = _request_parts(part, where)
                if len(converted) == 1 and not isinstance(part, pm.UserPromptPart):
                    originals[id(converted[0])] = part
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
            continue  # a request holding only system prompts
        message = Message(role=role, parts=tuple(parts))
        originals[id(message)] = model_message
        messages.append(message)
    return Converted(
        messages=tuple(messages),
        system_parts=tuple(system),
        system_instruction=system_text(system),
        _originals=originals,
    )


def _new_request_parts(parts: Sequence[Part], originals: dict[int, Any]) -> list[Any]:
    out: list[Any] = []
    for part in parts:
        original = originals.get(id(part))
        if original is not None:
            out.append(original)
            continue
        match part:
            case TextPart():
                out.append(pm.UserPromptPart(content=part.text))
            case ImagePart() | DocumentPart():
                out.append(pm.UserPromptPart(content=[_media_back(part)]))
            case FunctionResponsePart():
                out.append(
                    pm.ToolReturnPart(
                        tool_name=part.name,
                        content=part.response,
                        tool_call_id=part.id,
                        outcome="failed" if part.is_error else "success",
                    )
                )
            case OpaquePart():
                # A native compaction result reaches another framework as its summary text.
                out.append(pm.UserPromptPart(content=part.summary))
            case FunctionCallPart() | ThinkingPart():
                raise ContentError(f"a user message cannot hold a {part.kind} part")
            case _:
                assert_never(part)
    return out


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

    When the system prompt parts no longer appear (a compaction summarized their request), they
    are put back at the front of the first request.
    """
    originals = converted._originals if converted is not None else {}
    out: list[pm.ModelMessage] = []
    for message in messages:
        original = originals.get(id(message))
        if original is not None:
            out.append(original)
            continue
        if message.role == "user":
            out.append(pm.ModelRequest(parts=_new_request_parts(message.parts, originals)))
        else:
            out.append(pm.ModelResponse(parts=_new_response_parts(message.parts, originals)))
    if converted is not None and converted.system_parts:
        present = any(
            isinstance(part, pm.SystemPromptPart)
            for m in out
            if isinstance(m, pm.ModelRequest)
            for part in m.parts
        )
        if not present:
            first = next((i for i, m in enumerate(out) if isinstance(m, pm.ModelRequest)), None)
            if first is None:
                out.insert(0, pm.ModelRequest(parts=list(converted.system_parts)))
            else:
                head = out[first]
                assert isinstance(head, pm.ModelRequest)
                out[first] = dataclasses.replace(head, parts=[*converted.system_parts, *head.parts])
    return out


def tool_specs(definitions: Sequence[ToolDefinition]) -> tuple[ToolSpec, ...]:
    """The tool definitions as autocompact declarations (what the estimate measures)."""
    return tuple(
        ToolSpec(name=d.name, description=d.description or "", parameters=d.parameters_json_schema)
        for d in definitions
    )

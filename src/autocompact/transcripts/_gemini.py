"""Gemini-style ``Content`` parts (plain dicts) to the content model, for the gemini-cli and
qwen-code readers. Pure.

A part is ``{"text": ..., "thought": true?}``, ``{"functionCall": {"id"?, "name", "args"}}``,
``{"functionResponse": {"id"?, "name", "response"}}``, ``{"inlineData": {"mimeType", "data"}}``
or ``{"fileData": {"mimeType", "fileUri"}}``; a bare string is a text part. Calls recorded
without an id get a positional one, and their responses are matched to them by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autocompact.content import (
    DocumentPart,
    FunctionCallPart,
    FunctionResponsePart,
    ImagePart,
    Part,
    TextPart,
    ThinkingPart,
)
from autocompact.errors import ContentError

__all__ = ["gemini_part", "gemini_parts"]


def gemini_parts(value: Any, where: str) -> tuple[Part, ...]:
    """Parts from a ``PartListUnion``: a string, one part, or a list of strings and parts.

    Raises:
        ContentError: a part of a kind the content model cannot hold (``where`` names it).
    """
    if value is None:
        return ()
    if isinstance(value, str):
        return (TextPart(text=value),) if value else ()
    if isinstance(value, Mapping):
        return (gemini_part(value, where),)
    if isinstance(value, list):
        out: list[Part] = []
        for item in value:
            out.extend(gemini_parts(item, where))
        return tuple(out)
    raise ContentError(f"{where}: expected text or parts, got {type(value).__name__}")


def gemini_part(raw: Mapping[str, Any], where: str) -> Part:
    """One Gemini part as a content-model part.

    Raises:
        ContentError: an unknown part kind or a malformed one.
    """
    if "text" in raw:
        text = raw["text"]
        if not isinstance(text, str):
            raise ContentError(f"{where}: a text part whose text is not a string")
        if raw.get("thought"):
            signature = raw.get("thoughtSignature")
            return ThinkingPart(
                text=text, signature=signature if isinstance(signature, str) else None
            )
        return TextPart(text=text)
    if "functionCall" in raw:
        call = _mapping(raw["functionCall"], where, "functionCall")
        name = _name(call, where, "functionCall")
        args = call.get("args") or {}
        if not isinstance(args, Mapping):
            raise ContentError(f"{where}: functionCall {name!r} has non-object args")
        call_id = call.get("id")
        return FunctionCallPart(
            id=call_id if isinstance(call_id, str) and call_id else f"call-{name}",
            name=name,
            arguments=dict(args),
        )
    if "functionResponse" in raw:
        response = _mapping(raw["functionResponse"], where, "functionResponse")
        name = _name(response, where, "functionResponse")
        response_id = response.get("id")
        return FunctionResponsePart(
            id=response_id if isinstance(response_id, str) and response_id else f"call-{name}",
            name=name,
            response=response.get("response"),
        )
    if "inlineData" in raw:
        blob = _mapping(raw["inlineData"], where, "inlineData")
        mime = str(blob.get("mimeType", "application/octet-stream"))
        data = blob.get("data")
        data = data if isinstance(data, str) else None
        if mime.startswith("image/"):
            return ImagePart(media_type=mime, data=data)
        return DocumentPart(media_type=mime, data=data)
    if "fileData" in raw:
        ref = _mapping(raw["fileData"], where, "fileData")
        mime = str(ref.get("mimeType", "application/octet-stream"))
        uri = ref.get("fileUri")
        uri = uri if isinstance(uri, str) else None
        if mime.startswith("image/"):
            return ImagePart(media_type=mime, url=uri)
        return DocumentPart(media_type=mime, url=uri)
    keys = ", ".join(sorted(raw)) or "none"
    raise ContentError(
        f"{where}: unknown part (keys: {keys}); expected text, functionCall, functionResponse, "
        "inlineData or fileData"
    )


def _mapping(value: Any, where: str, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ContentError(f"{where}: {what} must be an object")
    return value


def _name(value: Mapping[str, Any], where: str, what: str) -> str:
    name = value.get("name")
    if not isinstance(name, str) or not name:
        raise ContentError(f"{where}: {what} without a name")
    return name

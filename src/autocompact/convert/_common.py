"""Helpers shared by the OpenAI and Anthropic conversions. Pure."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

from autocompact.errors import ContentError
from autocompact.jsonsafe import is_array

ThinkingMode: TypeAlias = Literal["reasoning_content", "drop", "error"]
"""How :func:`to_openai_messages` sends thinking parts (OpenAI itself takes none back)."""

UNKNOWN_TOOL_NAME = "unknown"

# Compiled at the first data URL (re keeps it): most conversions never meet one.
_DATA_URL = r"^data:(?P<type>[^;,]+)?(?P<params>(;[^;,]*)*?);base64,(?P<data>.*)$"

JsonDict: TypeAlias = dict[str, Any]


# -- small shared helpers ----------------------------------------------------------------------


def parse_data_url(url: str) -> tuple[str, str] | None:
    """``(media_type, base64 data)`` of a ``data:...;base64,...`` URL, or ``None``."""
    match = re.match(_DATA_URL, url, re.S)
    if match is None:
        return None
    return match.group("type") or "application/octet-stream", match.group("data")


def data_url(media_type: str, data: str) -> str:
    """A ``data:`` URL for base64 ``data``."""
    return f"data:{media_type};base64,{data}"


def media_url(block: Mapping[str, Any]) -> str | None:
    """The URL (a ``data:`` URL for base64) of an image or document block in Anthropic's,
    LangChain's, OpenAI's or MCP's form, or ``None``."""
    source = block.get("source")
    if isinstance(source, dict):  # Anthropic
        if source.get("type") == "base64":
            media, data = source.get("media_type"), source.get("data")
            return (
                data_url(media, data) if isinstance(media, str) and isinstance(data, str) else None
            )
        return source.get("url") if isinstance(source.get("url"), str) else None
    image_url = block.get("image_url")  # OpenAI chat
    if isinstance(image_url, dict):
        image_url = image_url.get("url")
    if isinstance(image_url, str):
        return image_url
    media = block.get("mime_type") or block.get("mimeType")
    data = block.get("base64") or block.get("data")  # LangChain, MCP
    if isinstance(media, str) and isinstance(data, str):
        return data_url(media, data)
    url = block.get("url")
    return url if isinstance(url, str) else None


def response_text(response: Any) -> str:
    """A function response as one string: strings as they are, text blocks joined, else JSON."""
    if isinstance(response, str):
        return response
    if is_text_block_list(response):
        return "".join(block["text"] for block in response)
    return json.dumps(response, ensure_ascii=False)


def is_text_block_list(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
            for b in value
        )
    )


def require_array(value: Any, what: str) -> Any:
    """``value`` when it is a list or another sequence of items (not text, bytes or an object);
    else a :class:`ContentError` that names ``what`` and the type it got."""
    if not is_array(value):
        raise ContentError(f"{what} must be a list (a JSON array), got {type(value).__name__}")
    return value


def require_mapping(value: Any, index: int, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ContentError(
            f"message {index}: {what} must be a JSON object, got {type(value).__name__}",
            index=index,
        )
    return value


def require_str(block: Mapping[str, Any], key: str, index: int, what: str) -> str:
    value = block.get(key)
    if not isinstance(value, str):
        raise ContentError(
            f"message {index}: {what} needs a string '{key}', got {type(value).__name__}",
            index=index,
        )
    return value

"""Images and documents inside a tool result: told apart from its JSON. Pure, standard library.

A tool may return an image (a screenshot, a chart, a page read as a picture) next to its text.
A function response holds it as a content block in the list it returns, in the shape of the
framework or API it came from: Anthropic's ``{"type": "image", "source": {...}}``, LangChain's
``{"type": "image", "base64": ..., "mime_type": ...}``, OpenAI's ``image_url``, ``input_image``
and ``input_file``, MCP's ``{"type": "image", "data": ..., "mimeType": ...}``. The provider
reads such a block as an image, not as text: it costs what an image in a user message costs, not
its base64 at two characters a token (a 300 KB screenshot would count as about 200K tokens).

A block is media when its ``type`` names an image, a document, a file or audio *and* it holds
something to show (a source, base64 data, a URL or a file id): a directory listing's
``{"type": "file", "name": ...}`` is JSON like any other. Only the blocks of a list response
count (where every API and framework above puts them).
"""

from __future__ import annotations

from typing import Any, Protocol

from autocompact.errors import ContentError
from autocompact.jsonsize import json_length

__all__ = ["is_media_block", "media_blocks", "no_tool_media", "response_measure", "without_media"]

MEDIA_TYPES = frozenset(
    {"image", "image_url", "input_image", "document", "file", "input_file", "audio", "input_audio"}
)
"""The ``type`` values of a media block."""

PAYLOAD_KEYS = frozenset(
    {
        "source",
        "base64",
        "data",
        "url",
        "image_url",
        "file",
        "file_data",
        "file_id",
        "file_url",
        "input_audio",
    }
)
"""The keys one of which a media block holds (what it shows)."""


def is_media_block(block: object) -> bool:
    """Whether ``block`` (a member of a list a tool returned) is an image, document, file or
    audio block (module docstring)."""
    return (
        type(block) is dict
        and block.get("type") in MEDIA_TYPES
        and not PAYLOAD_KEYS.isdisjoint(block)
    )


def media_blocks(response: Any) -> int:
    """How many media blocks a function response holds (0 unless it is a list)."""
    if type(response) is not list:
        return 0
    return sum(map(is_media_block, response))


def without_media(response: list[Any]) -> list[Any]:
    """A list response without its media blocks."""
    return [block for block in response if not is_media_block(block)]


def response_measure(response: Any) -> tuple[int, int]:
    """A function response's JSON length without its media blocks, and how many it holds (a
    response with none: its whole JSON length, 0)."""
    media = media_blocks(response)
    return json_length(without_media(response) if media else response), media


class ToolResult(Protocol):
    """What :func:`no_tool_media` reads of a function response (content imports this module)."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def response(self) -> Any: ...


def no_tool_media(part: ToolResult, index: int, api: str) -> None:
    """Refuse a tool result holding a media block on an API that carries only text in a tool
    result: sent as its JSON, the picture would reach the model as base64 text, at many times
    the tokens it was estimated at."""
    if media_blocks(part.response):
        raise ContentError(
            f"message {index}: the result of tool call {part.id!r} ({part.name}) holds an "
            f"image or document block, which {api} cannot carry in a tool result (it would be "
            "sent as base64 text): use the Anthropic provider, or send the image in a user "
            "message (an ImagePart)",
            index=index,
        )

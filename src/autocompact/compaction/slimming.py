"""Input slimming: shrink what the side query must read before it is sent. Pure.

Oversized function responses in the part to be summarized are cut to their head and tail with a
marker, images and documents (in a message or returned by a tool) are replaced by a short text
placeholder, and a framework's content block the engine does not read (``CONTENT_BLOCK``) by
the text that tells what it holds (left out when it has none: it only adds to a readable part
beside it), so no summarizer is sent a block it may not read. Sizes come from the
same character counter as the estimate (SPEC §4), so what is slimmed is what is counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from autocompact.content import (
    CONTENT_BLOCK,
    DocumentPart,
    FunctionResponsePart,
    ImagePart,
    Message,
    OpaquePart,
    Part,
    TextPart,
    json_form,
)
from autocompact.toolmedia import is_media_block

__all__ = ["MAX_FUNCTION_RESPONSE_CHARS", "SLIM_HEAD_CHARS", "SLIM_TAIL_CHARS", "slim_for_summary"]

MAX_FUNCTION_RESPONSE_CHARS = 8_000
"""A function response larger than this (by the shared counter) is cut before the side query."""
SLIM_HEAD_CHARS = 3_000
SLIM_TAIL_CHARS = 1_000


def slim_for_summary(
    messages: Sequence[Message], *, max_response_chars: int = MAX_FUNCTION_RESPONSE_CHARS
) -> tuple[Message, ...]:
    """The messages with oversized tool output cut and media replaced by placeholders.

    Messages without anything to slim are returned as the same objects (their cached sizes stay).
    """
    return tuple(_slim_message(m, max_response_chars) for m in messages)


def _slim_message(message: Message, limit: int) -> Message:
    for part in message.parts:  # most messages have nothing to slim: told without a copy
        if isinstance(part, _SLIMMED) and (
            not isinstance(part, FunctionResponsePart | OpaquePart)
            or (isinstance(part, OpaquePart) and part.family == CONTENT_BLOCK)
            or part.stats.json_chars > limit
            or part.stats.media_parts
        ):
            break
    else:
        return message
    new_parts = tuple(_slim_part(p, limit) for p in message.parts)
    if all(new is old for new, old in zip(new_parts, message.parts, strict=True)):
        return message
    return Message(role=message.role, parts=tuple(p for p in new_parts if p is not None))


_SLIMMED = (FunctionResponsePart, ImagePart, DocumentPart, OpaquePart)  # the kinds slimmed


def _slim_part(part: Part, limit: int) -> Part | None:
    if isinstance(part, OpaquePart) and part.family == CONTENT_BLOCK:
        return part.as_text()
    if isinstance(part, FunctionResponsePart) and part.stats.media_parts:
        part = replace(part, response=[_placeholder(b) for b in part.response])
    if isinstance(part, FunctionResponsePart) and part.stats.json_chars > limit:
        body = part.response if isinstance(part.response, str) else json_form(part.response)
        cut = len(body) - SLIM_HEAD_CHARS - SLIM_TAIL_CHARS
        slimmed = (
            f"{body[:SLIM_HEAD_CHARS]}\n[... {cut:,} characters of tool output omitted "
            f"before summarizing ...]\n{body[-SLIM_TAIL_CHARS:]}"
        )
        return replace(part, response=slimmed)
    if isinstance(part, ImagePart):
        return TextPart(text=f"[image ({part.media_type}) omitted before summarizing]")
    if isinstance(part, DocumentPart):
        title = f" '{part.title}'" if part.title else ""
        return TextPart(text=f"[document{title} ({part.media_type}) omitted before summarizing]")
    return part


def _placeholder(block: Any) -> Any:
    """A block of a tool's list response, an image or document in it as a text placeholder."""
    if not is_media_block(block):
        return block
    return {
        "type": "text",
        "text": f"[{block['type']} returned by the tool omitted before summarizing]",
    }

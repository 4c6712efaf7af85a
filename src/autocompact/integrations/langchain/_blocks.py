"""Content blocks the engine does not read, carried through it unchanged (design decision 94).

A LangChain message may hold blocks no autocompact part expresses: a provider's built-in tool
calls and results (OpenAI's ``web_search_call``, LangChain's ``server_tool_call`` /
``server_tool_result``, Anthropic's ``server_tool_use`` and ``*_tool_result``), OpenAI reasoning
items (encrypted or with an id), refusals, and text blocks with more than their text
(``annotations``, ``citations``, ``cache_control``, an item ``id``). Each is carried as an
:class:`~autocompact.content.OpaquePart` (provider ``"langchain"``, family
:data:`~autocompact.content.CONTENT_BLOCK`) whose payload is a JSON copy of the block, whose
summary is what it holds in plain words (the text a summary or the offline ledger reads), and
whose tokens are its JSON at 2 characters a token:

- any other block: carried whole, after the parts before it;
- a text block with more than its text: a ``TextPart`` (the engine reads the text) then the
  carried block, sized without the text, its summary the sources it cites;
- a block that mirrors one of the message's tool calls with more than the call (the Responses
  API's ``function_call`` item with its id and status, a ``tool_call`` with ``extras``): the
  call stays a function call part; the block is carried where it was, sized without the
  arguments, its summary empty (the call already reads);
- an image with more than its image (OpenAI's generated image: the Responses API's
  ``image_generation_call`` with its id, status and revised prompt, or the standard ``image``
  block LangChain makes of it, with its id and ``extras``): an ``ImagePart`` (the estimate
  counts one image, as the provider does, not its base64) then the carried block, sized
  without the image data, its summary what else it holds (the prompt the image was drawn to).

:func:`restore` gives each back byte-exact in its place. A block JSON cannot hold is refused.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any, TypeGuard

from autocompact.content import CONTENT_BLOCK, DocumentPart, ImagePart, OpaquePart, Part, TextPart
from autocompact.errors import ContentError
from autocompact.jsonsize import json_form, json_length
from autocompact.sendcheck import json_problem

__all__ = [
    "PROVIDER",
    "carried",
    "carried_call",
    "carried_image",
    "carried_text",
    "is_carried",
    "restore",
]

PROVIDER = "langchain"
_CALL_FIELDS = frozenset({"name", "args", "input", "arguments"})  # counted by the call part
# Keys that hold no words a summary could use (ids, signatures, encrypted or binary data).
_UNREADABLE = frozenset(
    {"id", "index", "signature", "encrypted_content", "encrypted_index", "data", "base64"}
)
# The blocks that hold an image carried beside its ``ImagePart`` (see :func:`carried_image`).
IMAGE_BLOCKS = frozenset({"image", "image_generation_call", "image_url", "file", "document"})
_SUMMARY_CHARS = 2_000  # a block's summary is cut here (it stands in for the block in text)


def is_carried(part: Part) -> TypeGuard[OpaquePart]:
    """Whether ``part`` is a content block this integration carries."""
    return (
        isinstance(part, OpaquePart) and part.provider == PROVIDER and part.family == CONTENT_BLOCK
    )


def _copy(block: Mapping[str, Any], refuse: Callable[[str], ContentError]) -> dict[str, Any]:
    """A JSON copy of the block (what the store writes, key order kept), or a refusal naming
    what JSON cannot hold."""
    problem = json_problem(block)
    if problem is not None:
        raise refuse(f"it holds a value JSON cannot carry, at {problem}")
    copy: dict[str, Any] = json.loads(json.dumps(block, ensure_ascii=False))
    return copy


def _part(payload: dict[str, Any], summary: str, measured: object) -> OpaquePart:
    tokens = max(1, math.ceil(json_length(measured) / 2))
    summary = f"\n{summary}\n" if summary else ""  # a line of its own in the message's text
    return OpaquePart(
        provider=PROVIDER, family=CONTENT_BLOCK, payload=payload, summary=summary, tokens=tokens
    )


def carried(block: Mapping[str, Any], refuse: Callable[[str], ContentError]) -> OpaquePart:
    """A whole block, carried (its summary: what it holds)."""
    payload = _copy(block, refuse)
    return _part(payload, readable(payload), payload)


def carried_text(block: Mapping[str, Any], refuse: Callable[[str], ContentError]) -> OpaquePart:
    """A text block's keys besides its text (it follows the block's ``TextPart``)."""
    payload = _copy(block, refuse)
    rest = {k: v for k, v in payload.items() if k != "text"}
    return _part(payload, _sources(payload), rest)


def carried_call(block: Mapping[str, Any], refuse: Callable[[str], ContentError]) -> OpaquePart:
    """A block that mirrors a tool call, with more than the call holds."""
    payload = _copy(block, refuse)
    rest = {k: v for k, v in payload.items() if k not in _CALL_FIELDS}
    return _part(payload, "", rest)


def carried_image(
    block: Mapping[str, Any], image: str, refuse: Callable[[str], ContentError]
) -> OpaquePart:
    """An image block's keys besides its image data (key ``image``); it follows the block's
    ``ImagePart``."""
    payload = _copy(block, refuse)
    rest = {k: v for k, v in payload.items() if k != image}
    return _part(payload, readable(rest), rest)


def restore(part: OpaquePart, blocks: list[str | dict[str, Any]], previous: Part | None) -> None:
    """Put a carried block back into ``blocks``: a text block in place of the plain text block
    just made from its ``TextPart`` (``previous``; the engine's reading of the text wins), an
    image block in place of the one made from its ``ImagePart``, any other block after the
    blocks before it."""
    block: dict[str, Any] = json.loads(json.dumps(dict(part.payload), ensure_ascii=False))
    kind = block.get("type")
    if kind == "text" and isinstance(previous, TextPart) and blocks:
        if block.get("text") != previous.text:
            block["text"] = previous.text
        blocks[-1] = block
        return
    if kind in IMAGE_BLOCKS and isinstance(previous, ImagePart | DocumentPart) and blocks:
        blocks[-1] = block
        return
    blocks.append(block)


def _sources(block: Mapping[str, Any]) -> str:
    """The sources a text block cites (OpenAI ``annotations``, Anthropic ``citations``, the
    standard ``citation``), as one line; empty when it cites none."""
    names: list[str] = []
    for key in ("annotations", "citations"):
        items = block.get(key)
        for item in items if isinstance(items, list) else ():
            if not isinstance(item, Mapping):
                continue
            title = item.get("title") or item.get("document_title") or item.get("filename")
            url = item.get("url")
            label = " ".join(
                s for s in (str(title or ""), f"<{url}>" if isinstance(url, str) else "") if s
            )
            if label and label not in names:
                names.append(label)
    return _cut(f"[sources: {'; '.join(names)}]") if names else ""


def readable(block: Mapping[str, Any]) -> str:
    """What a block holds, in plain words, for a summary to read (never its encrypted parts)."""
    kind = block.get("type")
    if kind == "non_standard" and isinstance(block.get("value"), Mapping):
        return readable(block["value"])
    if kind == "reasoning":
        summary = block.get("summary")
        items = [block.get("reasoning"), *(summary if isinstance(summary, list) else ())]
        texts = [t for t in (i.get("text") if isinstance(i, Mapping) else i for i in items) if t]
        texts = [t for t in texts if isinstance(t, str)]
        return _cut(f"[reasoning: {' '.join(texts)}]") if texts else "[reasoning (encrypted)]"
    if kind == "refusal" and isinstance(block.get("refusal"), str):
        return _cut(f"[refusal: {block['refusal']}]")
    body = _visible({k: v for k, v in block.items() if k != "type"})
    return _cut(f"[{kind}: {json_form(body)}]" if body else f"[{kind}]")


def _visible(value: Any) -> Any:
    """``value`` without the keys that hold no words (ids, signatures, encrypted data)."""
    if isinstance(value, Mapping):
        kept = {
            k: _visible(v)
            for k, v in value.items()
            if k not in _UNREADABLE and not k.endswith("_id") and v not in (None, [], {})
        }
        return {k: v for k, v in kept.items() if v not in (None, [], {})}
    if isinstance(value, list):
        return [_visible(v) for v in value]
    return value


def _cut(text: str) -> str:
    return text if len(text) <= _SUMMARY_CHARS else text[: _SUMMARY_CHARS - 2] + "…]"

"""Reader for a plain JSON list of OpenAI chat-completions messages. Pure.

The file is a JSON array of messages (``system``/``developer``, ``user``, ``assistant``,
``tool``), or an object whose ``messages`` is one. An assistant message may carry the ``usage``
the API returned for it (``prompt_tokens``, ``completion_tokens``): each such message is one
recorded call, preceded by everything before it. Conversion is
:func:`autocompact.convert.from_openai_messages` (tool messages join the following user turn).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from autocompact.convert import from_openai_messages
from autocompact.errors import ContentError, TranscriptFormatError
from autocompact.transcripts._base import RecordedCall, Transcript, load_json, usage_field

__all__ = ["FORMAT", "looks_like", "read"]

FORMAT = "openai-json"
# A tuple, compared with ==: a role that is a list or an object is no role (a set cannot hash it).
_ROLES = ("system", "developer", "user", "assistant", "tool")


def _message_list(document: Any) -> list[Any] | None:
    if isinstance(document, Mapping) and isinstance(document.get("messages"), list):
        document = document["messages"]
    return document if isinstance(document, list) else None


def looks_like(document: Any) -> bool:
    """Whether a parsed JSON document is a list of OpenAI-style messages."""
    items = _message_list(document)
    if not items:
        return False
    first = items[0]
    return isinstance(first, Mapping) and first.get("role") in _ROLES and "type" not in first


def read(path: Path, document: Any | None = None) -> Transcript:
    """Read a JSON list of OpenAI-style messages (``document`` when already parsed).

    Raises:
        TranscriptFormatError: not a list of messages, or a message cannot be read (the
            error names the file and the message's 1-based position as the line).
    """
    if document is None:
        document = load_json(path)
    items = _message_list(document)
    if items is None:
        raise TranscriptFormatError(
            "expected a JSON list of OpenAI-style messages (or an object with 'messages')",
            path=str(path),
        )
    for position, item in enumerate(items, start=1):
        if not isinstance(item, Mapping):
            raise TranscriptFormatError(
                f"message {position} is not an object", path=str(path), line=position
            )
    try:
        system, history = from_openai_messages(items)
    except ContentError as exc:
        line = exc.index + 1 if exc.index is not None else None
        raise TranscriptFormatError(str(exc), path=str(path), line=line) from exc

    model_positions = [i for i, m in enumerate(history) if m.role == "model"]
    calls: list[RecordedCall] = []
    assistant_number = 0
    for position, item in enumerate(items, start=1):
        if item.get("role") != "assistant":
            continue
        usage = item.get("usage")
        preceding = model_positions[assistant_number]
        assistant_number += 1
        if usage is None:
            continue
        if not isinstance(usage, Mapping):
            raise TranscriptFormatError(
                "'usage' must be an object with prompt_tokens", path=str(path), line=position
            )
        model = item.get("model")
        calls.append(
            RecordedCall(
                index=len(calls),
                preceding=preceding,
                context_start=0,
                prompt_tokens=usage_field(usage, "prompt_tokens", path, position),
                output_tokens=usage_field(usage, "completion_tokens", path, position),
                model=model if isinstance(model, str) else None,
                line=position,
            )
        )
    return Transcript(
        path=str(path),
        format=FORMAT,
        messages=tuple(history),
        calls=tuple(calls),
        system_instruction=system,
    )

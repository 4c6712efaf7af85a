"""Reader for qwen-code chat recordings (``~/.qwen/projects/*/chats/<session>.jsonl``). Pure.

Verified against qwen-code's ``packages/core/src/services/chatRecordingService.ts``
(``ChatRecord``): one JSON record a line with ``uuid``, ``parentUuid``, ``sessionId``,
``timestamp`` and ``type`` (``user``, ``assistant``, ``tool_result`` or ``system``). Conversation
records carry ``message``, a Gemini ``Content`` (``role`` ``user``/``model`` and ``parts``).
Assistant records carry ``usageMetadata`` (Gemini ``GenerateContentResponseUsageMetadata``:
``promptTokenCount``, ``candidatesTokenCount``, ``cachedContentTokenCount``,
``thoughtsTokenCount``, ``totalTokenCount``) and ``model``. A ``system`` record with
``subtype: "chat_compression"`` holds ``systemPayload.info`` (``originalTokenCount``,
``newTokenCount``) and ``systemPayload.compressedHistory``, the history the model saw from then
on. Other system records are UI state and are skipped.

An assistant record with usage is one API call; its prompt size is ``promptTokenCount`` (which
includes cached tokens), or ``totalTokenCount`` minus the output when only that is recorded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from autocompact.content import Message
from autocompact.errors import ContentError, TranscriptFormatError
from autocompact.transcripts._base import (
    CompactionMarker,
    RecordedCall,
    Transcript,
    int_field,
    iter_json_lines,
    usage_field,
)
from autocompact.transcripts._gemini import gemini_parts

__all__ = ["FORMAT", "looks_like", "read"]

FORMAT = "qwen-code"
# A tuple, compared with ==: a type that is a list or an object is no type (a set cannot hash it).
_RECORD_TYPES = ("user", "assistant", "tool_result", "system")


def looks_like(head: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the first JSON lines of a JSONL file are a qwen-code chat recording."""
    for obj in head:
        if obj.get("type") not in _RECORD_TYPES:
            return False
        message = obj.get("message")
        if isinstance(message, Mapping):
            return "parts" in message
        if obj.get("subtype") == "chat_compression":
            return True
    return False


def read(path: Path, data: bytes | None = None) -> Transcript:
    """Read a qwen-code chat recording (``data``: the file's content, when already read).

    Raises:
        TranscriptFormatError: a line is not JSON, or a record's message cannot be read
            (naming the file and line).
    """
    messages: list[Message] = []
    calls: list[RecordedCall] = []
    compactions: list[CompactionMarker] = []
    summaries: set[int] = set()
    context_start = 0
    for number, obj in iter_json_lines(path, data):
        kind = obj.get("type")
        if kind == "system":
            if obj.get("subtype") != "chat_compression":
                continue
            payload = obj.get("systemPayload")
            if not isinstance(payload, Mapping):
                raise TranscriptFormatError(
                    "a chat_compression record without 'systemPayload'", path=str(path), line=number
                )
            info = payload.get("info")
            info = info if isinstance(info, Mapping) else {}
            history = payload.get("compressedHistory")
            if not isinstance(history, list):
                raise TranscriptFormatError(
                    "a chat_compression record without a 'compressedHistory' list",
                    path=str(path),
                    line=number,
                )
            context_start = len(messages)
            compactions.append(
                CompactionMarker(
                    position=context_start,
                    trigger=str(info.get("trigger", "auto")),
                    pre_tokens=int_field(info.get("originalTokenCount")) or None,
                    post_tokens=int_field(info.get("newTokenCount")) or None,
                    line=number,
                )
            )
            for content in history:
                summaries.add(len(messages))
                messages.append(_message(content, path, number))
            continue
        if kind not in ("user", "assistant", "tool_result"):
            continue
        raw = obj.get("message")
        if raw is None:
            continue  # a UI-only record (e.g. a slash command's echo) carries no message
        message = _message(raw, path, number)
        if kind == "assistant":
            usage = obj.get("usageMetadata")
            if isinstance(usage, Mapping):
                output = usage_field(usage, "candidatesTokenCount", path, number)
                prompt = usage_field(usage, "promptTokenCount", path, number)
                if not prompt:
                    prompt = max(
                        0,
                        usage_field(usage, "totalTokenCount", path, number)
                        - output
                        - usage_field(usage, "thoughtsTokenCount", path, number),
                    )
                model = obj.get("model")
                calls.append(
                    RecordedCall(
                        index=len(calls),
                        preceding=len(messages),
                        context_start=context_start,
                        prompt_tokens=prompt,
                        output_tokens=output,
                        model=model if isinstance(model, str) else None,
                        line=number,
                    )
                )
        if message.parts:
            messages.append(message)
    return Transcript(
        path=str(path),
        format=FORMAT,
        messages=tuple(messages),
        calls=tuple(calls),
        compactions=tuple(compactions),
        summary_positions=frozenset(summaries),
    )


def _message(raw: Any, path: Path, line: int) -> Message:
    if not isinstance(raw, Mapping):
        raise TranscriptFormatError("'message' must be an object", path=str(path), line=line)
    role = raw.get("role")
    if role not in ("user", "model"):
        raise TranscriptFormatError(
            f"message role must be 'user' or 'model', got {role!r}", path=str(path), line=line
        )
    try:
        parts = gemini_parts(raw.get("parts"), "message")
    except ContentError as exc:
        raise TranscriptFormatError(str(exc), path=str(path), line=line) from exc
    return Message(role=role, parts=parts)

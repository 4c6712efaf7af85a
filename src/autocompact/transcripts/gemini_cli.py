"""Reader for gemini-cli chat recordings (``~/.gemini/tmp/<project>/chats/session-*.json``). Pure.

Verified against gemini-cli's ``chatRecordingService`` (``ConversationRecord``): one JSON
document ``{"sessionId", "projectHash", "startTime", "lastUpdated", "messages": [...]}``. Each
message record has ``id``, ``timestamp``, ``type`` and ``content`` (a string in older versions,
a ``PartListUnion`` in newer ones). ``type`` is ``user``, ``gemini``, ``info``, ``error`` or
``warning``; only ``user`` and ``gemini`` are conversation. A ``gemini`` record is one model
response: ``toolCalls`` (``id``, ``name``, ``args``, ``result`` as a ``PartListUnion`` of
function responses), ``thoughts`` (summaries the model is not sent back, so not read),
``model`` and ``tokens`` ``{input, output, cached, thoughts, tool, total}`` where ``input`` is
the prompt size (``promptTokenCount``, cached tokens included).

A ``gemini`` record with ``tokens`` is one API call. Its tool calls are the model message's
function calls; their results become the user message that follows it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from autocompact.content import FunctionCallPart, FunctionResponsePart, Message, Part
from autocompact.errors import ContentError, TranscriptFormatError
from autocompact.transcripts._base import RecordedCall, Transcript, int_field, load_json
from autocompact.transcripts._gemini import gemini_parts

__all__ = ["FORMAT", "looks_like", "read"]

FORMAT = "gemini-cli"


def looks_like(document: Any) -> bool:
    """Whether a parsed JSON document is a gemini-cli conversation record."""
    if not isinstance(document, Mapping) or not isinstance(document.get("messages"), list):
        return False
    if "sessionId" in document or "projectHash" in document:
        return True
    first = next(iter(document["messages"]), None)
    return isinstance(first, Mapping) and first.get("type") in ("user", "gemini", "info")


def read(path: Path, document: Any | None = None) -> Transcript:
    """Read a gemini-cli conversation record (``document`` when already parsed).

    Raises:
        TranscriptFormatError: the file is not such a record, or a message cannot be read
            (naming the file and the message's position as the line).
    """
    if document is None:
        document = load_json(path)
    if not looks_like(document):
        raise TranscriptFormatError(
            "not a gemini-cli conversation record (expected an object with 'messages')",
            path=str(path),
        )
    messages: list[Message] = []
    calls: list[RecordedCall] = []
    for position, record in enumerate(document["messages"], start=1):
        if not isinstance(record, Mapping):
            raise TranscriptFormatError(
                "a message record must be an object", path=str(path), line=position
            )
        kind = record.get("type")
        try:
            if kind == "user":
                parts = gemini_parts(record.get("content"), f"message {position}")
                if parts:
                    messages.append(Message(role="user", parts=parts))
            elif kind == "gemini":
                tokens = record.get("tokens")
                if isinstance(tokens, Mapping):
                    model = record.get("model")
                    calls.append(
                        RecordedCall(
                            index=len(calls),
                            preceding=len(messages),
                            context_start=0,
                            prompt_tokens=int_field(tokens.get("input")),
                            output_tokens=int_field(tokens.get("output")),
                            model=model if isinstance(model, str) else None,
                            line=position,
                        )
                    )
                messages.extend(_gemini_turn(record, position))
        except ContentError as exc:
            raise TranscriptFormatError(str(exc), path=str(path), line=position) from exc
    return Transcript(path=str(path), format=FORMAT, messages=tuple(messages), calls=tuple(calls))


def _gemini_turn(record: Mapping[str, Any], position: int) -> list[Message]:
    where = f"message {position}"
    parts: list[Part] = list(gemini_parts(record.get("content"), where))
    responses: list[Part] = []
    tool_calls = record.get("toolCalls") or []
    if not isinstance(tool_calls, list):
        raise ContentError(f"{where}: toolCalls must be a list")
    for raw in tool_calls:
        if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
            raise ContentError(f"{where}: a tool call without a name")
        name = raw["name"]
        raw_id = raw.get("id")
        call_id = raw_id if isinstance(raw_id, str) and raw_id else f"call-{name}"
        args = raw.get("args") or {}
        if not isinstance(args, Mapping):
            raise ContentError(f"{where}: tool call {name!r} has non-object args")
        parts.append(FunctionCallPart(id=call_id, name=name, arguments=dict(args)))
        result = raw.get("result")
        result_parts = gemini_parts(result, where)
        if any(isinstance(p, FunctionResponsePart) for p in result_parts):
            # The recorded response is the one the model was sent; its id is the call's.
            responses.extend(
                FunctionResponsePart(id=call_id, name=p.name, response=p.response)
                if isinstance(p, FunctionResponsePart)
                else p
                for p in result_parts
            )
        else:
            display = raw.get("resultDisplay")
            responses.append(
                FunctionResponsePart(
                    id=call_id, name=name, response=display if isinstance(display, str) else ""
                )
            )
    out = [Message(role="model", parts=tuple(parts))] if parts else []
    if responses:
        out.append(Message(role="user", parts=tuple(responses)))
    return out

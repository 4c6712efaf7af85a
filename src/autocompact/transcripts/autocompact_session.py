"""Reader for autocompact's own saved sessions (:mod:`autocompact.sessions`). Pure.

A saved session is JSONL: a ``header`` line (``schema``, ``model``, ``system_instruction``, ...)
then ``message``, ``state``, ``compaction`` and ``clear`` records (see
:mod:`autocompact.sessions`). A ``state`` record whose ``last_prompt_token_count`` is positive
and new is the usage of the call that produced the latest model message: that is one recorded
call, preceded by every message before that model message. A successful ``compaction`` (one that
carries ``history``) starts a new context made of that history; ``clear`` starts an empty one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from autocompact.codec import history_from_dicts, message_from_dict
from autocompact.content import Message
from autocompact.errors import ContentError, TranscriptFormatError
from autocompact.transcripts._base import (
    CompactionMarker,
    RecordedCall,
    Transcript,
    int_field,
    iter_json_lines,
)

__all__ = ["FORMAT", "looks_like", "read"]

FORMAT = "autocompact-session"


def looks_like(head: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the first JSON lines of a JSONL file are an autocompact session."""
    return bool(head) and head[0].get("type") == "header" and "schema" in head[0]


def read(path: Path, data: bytes | None = None) -> Transcript:
    """Read a saved autocompact session (``data``: the file's content, when already read).

    Raises:
        TranscriptFormatError: not a session, a schema newer than this build, or a damaged
            record (naming the file and line).
    """
    # Here, not at the top: the sessions package (its store, hashing, dates) is needed only to
    # read a saved session, and ``autocompact replay`` on other formats starts faster without it.
    from autocompact.sessions import SCHEMA_VERSION

    records = iter(iter_json_lines(path, data))
    first = next(records, None)
    if first is None or first[1].get("type") != "header":
        raise TranscriptFormatError(
            "not an autocompact session (the first line is not a header)", path=str(path), line=1
        )
    number, header = first
    schema = header.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool) or not 1 <= schema <= SCHEMA_VERSION:
        raise TranscriptFormatError(
            f"session schema {schema!r} is not one this build reads (1 to {SCHEMA_VERSION})",
            path=str(path),
            line=number,
        )
    system = header.get("system_instruction")
    model = header.get("model")
    messages: list[Message] = []
    calls: list[RecordedCall] = []
    compactions: list[CompactionMarker] = []
    summaries: set[int] = set()
    context_start = 0
    last_reported = 0
    for number, record in records:
        kind = record.get("type")
        try:
            if kind == "message":
                messages.append(message_from_dict(record.get("message")))
            elif kind == "state":
                reported = int_field(record.get("last_prompt_token_count"))
                if reported > 0 and reported != last_reported:
                    calls.append(
                        RecordedCall(
                            index=len(calls),
                            preceding=_before_last_reply(messages, context_start),
                            context_start=context_start,
                            prompt_tokens=reported,
                            model=model if isinstance(model, str) else None,
                            line=number,
                        )
                    )
                last_reported = reported
            elif kind == "compaction" and "history" in record:
                items = record["history"]
                if not isinstance(items, list):
                    raise ContentError("'history' must be a list")
                info = record.get("info")
                info = info if isinstance(info, Mapping) else {}
                context_start = len(messages)
                compactions.append(
                    CompactionMarker(
                        position=context_start,
                        trigger=str(info.get("trigger", "auto")),
                        pre_tokens=int_field(info.get("original_token_count")) or None,
                        post_tokens=int_field(info.get("new_token_count")) or None,
                        line=number,
                    )
                )
                for message in history_from_dicts(items):
                    summaries.add(len(messages))
                    messages.append(message)
                last_reported = 0
            elif kind == "clear":
                context_start = len(messages)
                last_reported = 0
        except ContentError as exc:
            raise TranscriptFormatError(
                f"a {kind} record is malformed: {exc}", path=str(path), line=number
            ) from exc
    return Transcript(
        path=str(path),
        format=FORMAT,
        messages=tuple(messages),
        calls=tuple(calls),
        compactions=tuple(compactions),
        system_instruction=system if isinstance(system, str) else None,
        summary_positions=frozenset(summaries),
    )


def _before_last_reply(messages: Sequence[Message], context_start: int) -> int:
    """The number of messages before the latest model message (the reply the usage is for)."""
    for index in range(len(messages) - 1, context_start - 1, -1):
        if messages[index].role == "model":
            return index
    return len(messages)

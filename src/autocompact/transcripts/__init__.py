"""Readers for recorded agent transcripts, one module per format, auto-detected. Pure.

:func:`read_transcript` turns a recorded session into a :class:`Transcript`: the conversation
in the engine's content model plus, for every API call, the prompt size the provider reported
and the messages that preceded it. Formats (:data:`FORMATS`):

* ``claude-code``: Claude Code session JSONL (:mod:`.claude_code`);
* ``qwen-code``: qwen-code chat recordings, JSONL (:mod:`.qwen_code`);
* ``gemini-cli``: gemini-cli chat recordings, one JSON document (:mod:`.gemini_cli`);
* ``openai-json``: a JSON list of OpenAI-style messages with optional per-assistant
  ``usage`` (:mod:`.openai_json`);
* ``autocompact-session``: autocompact's own saved sessions (:mod:`.autocompact_session`).

Files may be gzip'd (detected by content, not by name). Anything unreadable raises
:class:`~autocompact.errors.TranscriptFormatError` naming the file and, where one is to
blame, the line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from autocompact import jsonsafe
from autocompact.errors import TranscriptFormatError
from autocompact.transcripts import (
    autocompact_session,
    claude_code,
    gemini_cli,
    openai_json,
    qwen_code,
)
from autocompact.transcripts._base import (
    CompactionMarker,
    RecordedCall,
    Transcript,
    load_json,
    read_first_lines,
)

__all__ = [
    "FORMATS",
    "CompactionMarker",
    "RecordedCall",
    "Transcript",
    "detect_format",
    "read_transcript",
]

FORMATS = (
    claude_code.FORMAT,
    qwen_code.FORMAT,
    gemini_cli.FORMAT,
    openai_json.FORMAT,
    autocompact_session.FORMAT,
)
_HEAD_LINES = 20


def detect_format(path: str | Path) -> str:
    """The format of a transcript file, from its content.

    Raises:
        TranscriptFormatError: the file cannot be read or is none of :data:`FORMATS`.
    """
    path = Path(path)
    head = [line for line in read_first_lines(path, _HEAD_LINES) if line.strip()]
    if not head:
        raise TranscriptFormatError("the file is empty: not a transcript", path=str(path))
    lines = _head_objects(head)
    if not lines:  # a JSON document (a list, or an object spread over several lines)
        return _detect_document(path)
    if autocompact_session.looks_like(lines):
        return autocompact_session.FORMAT
    if qwen_code.looks_like(lines):
        return qwen_code.FORMAT
    if claude_code.looks_like(lines):
        return claude_code.FORMAT
    if len(head) == 1:  # one JSON object on one line: a whole document
        return _detect_document(path)
    raise _unknown(path)


def read_transcript(path: str | Path, format: str | None = None) -> Transcript:
    """Read a recorded transcript.

    Args:
        path: the file (plain or gzip'd).
        format: one of :data:`FORMATS`; detected from the content when omitted.

    Raises:
        TranscriptFormatError: the file cannot be read, is of no known format, or a line
            of it is malformed (the error names the file and line).
    """
    path = Path(path)
    fmt = format or detect_format(path)
    if fmt == claude_code.FORMAT:
        return claude_code.read(path)
    if fmt == qwen_code.FORMAT:
        return qwen_code.read(path)
    if fmt == autocompact_session.FORMAT:
        return autocompact_session.read(path)
    if fmt == gemini_cli.FORMAT:
        return gemini_cli.read(path)
    if fmt == openai_json.FORMAT:
        return openai_json.read(path)
    raise TranscriptFormatError(
        f"unknown transcript format {fmt!r}; expected one of {', '.join(FORMATS)}",
        path=str(path),
    )


def _head_objects(head: list[str]) -> list[dict[str, Any]]:
    """The first lines as JSON objects (empty when the first is not one: a JSON document)."""
    out: list[dict[str, Any]] = []
    for line in head:
        try:
            value = jsonsafe.loads(line)
        except json.JSONDecodeError:
            break
        if not isinstance(value, dict):
            break
        out.append(value)
    return out


def _detect_document(path: Path) -> str:
    document = load_json(path)
    if gemini_cli.looks_like(document):
        return gemini_cli.FORMAT
    if openai_json.looks_like(document):
        return openai_json.FORMAT
    raise _unknown(path)


def _unknown(path: Path) -> TranscriptFormatError:
    return TranscriptFormatError(
        "not a transcript autocompact reads: expected Claude Code or qwen-code JSONL, a "
        "gemini-cli chat recording, a JSON list of OpenAI-style messages, or an autocompact "
        "session",
        path=str(path),
    )

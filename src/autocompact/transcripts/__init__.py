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
from collections.abc import Sequence
from pathlib import Path
from typing import Any, overload

from autocompact import jsonsafe
from autocompact.errors import TranscriptFormatError
from autocompact.transcripts import (
    autocompact_session,
    claude_code,
    qwen_code,
)
from autocompact.transcripts._base import (
    CompactionMarker,
    RecordedCall,
    Transcript,
    first_lines,
    load_json,
    read_bytes,
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

# The readers of the two JSON-document formats are imported when a document is read: a JSONL
# log (most of what is replayed) does not need them. tests/test_transcripts.py checks these
# names against the modules' FORMAT.
_GEMINI_CLI = "gemini-cli"
_OPENAI_JSON = "openai-json"
FORMATS = (
    claude_code.FORMAT,
    qwen_code.FORMAT,
    _GEMINI_CLI,
    _OPENAI_JSON,
    autocompact_session.FORMAT,
)
_HEAD_LINES = 20


def detect_format(path: str | Path) -> str:
    """The format of a transcript file, from its content.

    Raises:
        TranscriptFormatError: the file cannot be read or is none of :data:`FORMATS`.
    """
    path = Path(path)
    return _detect(path, read_first_lines(path, _HEAD_LINES), None)[0]


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
    data: bytes | None = None
    document: Any = None  # the parsed JSON document, when detection parsed one
    fmt = format
    if fmt is None:
        # The file is read once for detection and reader alike: the head is cut from the
        # content as read_first_lines reads it from the file. A file that cannot be read whole
        # is detected from its head first, as it always was, so it fails the same way.
        try:
            data = read_bytes(path)
        except TranscriptFormatError:
            fmt = detect_format(path)
        else:
            fmt, document = _detect(path, first_lines(data, _HEAD_LINES), data)
    if fmt == claude_code.FORMAT:
        return claude_code.read(path, data)
    if fmt == qwen_code.FORMAT:
        return qwen_code.read(path, data)
    if fmt == autocompact_session.FORMAT:
        return autocompact_session.read(path, data)
    if fmt == _GEMINI_CLI:
        from autocompact.transcripts import gemini_cli

        return gemini_cli.read(path, document)
    if fmt == _OPENAI_JSON:
        from autocompact.transcripts import openai_json

        return openai_json.read(path, document)
    raise TranscriptFormatError(
        f"unknown transcript format {fmt!r}; expected one of {', '.join(FORMATS)}",
        path=str(path),
    )


def _detect(path: Path, lines: list[str], data: bytes | None) -> tuple[str, Any]:
    """The format from the file's first lines, and the parsed document when detecting it took
    one (``data``: the file's content, when already read)."""
    # A line may hold more: the reader cuts lines as str.splitlines does, so lines ended by a
    # carriage return alone are lines too (a raw CR is never inside valid JSON).
    head = [piece for line in lines for piece in line.split("\r") if piece.strip()]
    if not head:
        raise TranscriptFormatError("the file is empty: not a transcript", path=str(path))
    objects = _HeadObjects(head)
    if not objects:  # a JSON document (a list, or an object spread over several lines)
        return _detect_document(path, data)
    if autocompact_session.looks_like(objects):
        return autocompact_session.FORMAT, None
    if qwen_code.looks_like(objects):
        return qwen_code.FORMAT, None
    if claude_code.looks_like(objects):
        return claude_code.FORMAT, None
    if len(head) == 1:  # one JSON object on one line: a whole document
        return _detect_document(path, data)
    raise _unknown(path)


class _HeadObjects(Sequence[dict[str, Any]]):
    """The first lines as JSON objects, up to the first that is not one (none: a JSON
    document), each parsed when a detector first reads it: they decide on the first line or
    two, and the reader parses every line again."""

    def __init__(self, lines: list[str]) -> None:
        self._lines = lines
        self._objects: list[dict[str, Any]] = []
        self._ended = False  # a line was not an object, or every line is parsed

    def _parse(self, count: int) -> None:
        objects = self._objects
        while not self._ended and len(objects) < count:
            if len(objects) == len(self._lines):
                self._ended = True
                break
            try:
                value = jsonsafe.loads(self._lines[len(objects)])
            except json.JSONDecodeError:
                value = None
            if not isinstance(value, dict):
                self._ended = True
                break
            objects.append(value)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[dict[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> dict[str, Any] | Sequence[dict[str, Any]]:
        if isinstance(index, int) and index >= 0:
            self._parse(index + 1)
        else:
            self._parse(len(self._lines))
        return self._objects[index]

    def __len__(self) -> int:
        self._parse(len(self._lines))
        return len(self._objects)

    def __bool__(self) -> bool:
        self._parse(1)
        return bool(self._objects)


def _detect_document(path: Path, data: bytes | None) -> tuple[str, Any]:
    from autocompact.transcripts import gemini_cli, openai_json

    document = load_json(path, data)
    if gemini_cli.looks_like(document):
        return _GEMINI_CLI, document
    if openai_json.looks_like(document):
        return _OPENAI_JSON, document
    raise _unknown(path)


def _unknown(path: Path) -> TranscriptFormatError:
    return TranscriptFormatError(
        "not a transcript autocompact reads: expected Claude Code or qwen-code JSONL, a "
        "gemini-cli chat recording, a JSON list of OpenAI-style messages, or an autocompact "
        "session",
        path=str(path),
    )

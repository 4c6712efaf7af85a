"""The transcript record types and the file plumbing every reader shares. Pure (reads files).

A :class:`Transcript` is what a recorded agent session says, in the engine's content model:
the messages in the order the model saw them, one :class:`RecordedCall` per API call (the prompt
size the provider reported and how many messages preceded it) and the compactions the agent made
(:class:`CompactionMarker`). Readers open plain or gzip'd files alike (by the gzip magic bytes,
not the file name) and raise :class:`TranscriptFormatError` naming the file and line.
"""

from __future__ import annotations

import gzip
import json
import math
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autocompact import jsonsafe
from autocompact.content import Message
from autocompact.errors import TranscriptFormatError

__all__ = [
    "CompactionMarker",
    "RecordedCall",
    "Transcript",
    "first_lines",
    "int_field",
    "iter_json_lines",
    "load_json",
    "read_bytes",
    "read_first_lines",
    "read_text",
    "usage_field",
]

_BOM = b"\xef\xbb\xbf"  # UTF-8's byte order mark
_GZIP_MAGIC = b"\x1f\x8b"
# What str.splitlines ends a line at besides "\n": these ASCII bytes, and "\x85", U+2028 and
# U+2029 (looked for in the lines that are not ASCII only: a search of the UTF-8 bytes is slower).
_OTHER_ASCII_LINE_ENDS = (b"\r", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e")


@dataclass(frozen=True, kw_only=True)
class RecordedCall:
    """One API call of a recorded session.

    Attributes:
        index: the call's position among the transcript's calls (0-based).
        preceding: how many of the transcript's messages preceded the call
            (``messages[context_start:preceding]`` is what the model was sent).
        context_start: the first message of the live context: 0, or the position of the latest
            compaction's summary when the agent had compacted before this call.
        prompt_tokens: the prompt size the provider reported, cached parts included.
        output_tokens: the output tokens the provider reported (0 when unknown).
        model: the model that answered, when recorded.
        line: the 1-based line (JSONL) or message position (JSON) the call was read from.
    """

    index: int
    preceding: int
    context_start: int
    prompt_tokens: int
    output_tokens: int = 0
    model: str | None = None
    line: int | None = None


@dataclass(frozen=True, kw_only=True)
class CompactionMarker:
    """A compaction the recorded agent made.

    Attributes:
        position: index into the transcript's messages where the compacted context starts
            (its first message is the summary, when the transcript holds one).
        trigger: ``"auto"``, ``"manual"`` or whatever the agent recorded.
        pre_tokens: the prompt size the agent reported just before compacting, when recorded.
        post_tokens: the size it reported after, when recorded.
        line: the 1-based line (or record position) of the marker.
    """

    position: int
    trigger: str
    pre_tokens: int | None = None
    post_tokens: int | None = None
    line: int | None = None


@dataclass(frozen=True, kw_only=True)
class Transcript:
    """A recorded session in the engine's content model.

    Attributes:
        path: the file it was read from.
        format: the reader's name (``"claude-code"``, ``"qwen-code"``, ``"gemini-cli"``,
            ``"openai-json"``, ``"autocompact-session"``).
        messages: every message the model saw, in order; after a compaction the summary
            message and what followed it (the pre-compaction messages stay, before it).
        calls: the recorded API calls, in order.
        compactions: the recorded compactions, in order.
        system_instruction: the system prompt, when the format records it.
        summary_positions: indices of messages that are compaction summaries (not
            conversation: a replay that simulates its own compactions skips them).
    """

    path: str
    format: str
    messages: tuple[Message, ...]
    calls: tuple[RecordedCall, ...]
    compactions: tuple[CompactionMarker, ...] = ()
    system_instruction: str | None = None
    summary_positions: frozenset[int] = frozenset()

    def context_before(self, call: RecordedCall) -> tuple[Message, ...]:
        """The messages the model was sent for a call (its live context)."""
        return self.messages[call.context_start : call.preceding]


def read_first_lines(path: Path, count: int) -> list[str]:
    """The first ``count`` lines of a file's content (decompressed when gzip'd), whole.

    Raises:
        TranscriptFormatError: the file cannot be opened or is a damaged gzip file.
    """
    lines: list[str] = []
    try:
        with path.open("rb") as raw:
            magic = raw.read(2)
        opener = gzip.open if magic == _GZIP_MAGIC else open
        with opener(path, "rb") as handle:
            for raw_line in handle:
                if not lines and raw_line.startswith(_BOM):  # (as read_bytes leaves it out)
                    raw_line = raw_line[len(_BOM) :]
                lines.append(raw_line.decode("utf-8", errors="replace"))
                if len(lines) >= count:
                    break
    except (OSError, EOFError, zlib.error) as exc:
        raise TranscriptFormatError(f"cannot read the file: {exc}", path=str(path)) from exc
    return lines


def first_lines(data: bytes, count: int) -> list[str]:
    """The first ``count`` lines of content already read, as :func:`read_first_lines` reads
    them from its file: cut after each ``"\\n"`` (kept), decoded with ``errors="replace"``."""
    lines: list[str] = []
    find = data.find
    size = len(data)
    pos = 0
    while pos < size and len(lines) < count:
        end = find(b"\n", pos)
        end = size if end < 0 else end + 1
        lines.append(data[pos:end].decode("utf-8", errors="replace"))
        pos = end
    return lines


def read_bytes(path: Path) -> bytes:
    """The whole file's content, decompressed when gzip'd.

    Raises:
        TranscriptFormatError: the file cannot be read or is a damaged gzip file.
    """
    try:
        with path.open("rb") as raw:
            magic = raw.read(2)
        data = _gunzip(path) if magic == _GZIP_MAGIC else path.read_bytes()
        # A byte order mark (which some editors write at the start of UTF-8) is no content.
        return data[len(_BOM) :] if data.startswith(_BOM) else data
    except (OSError, EOFError, zlib.error) as exc:
        raise TranscriptFormatError(f"cannot read the file: {exc}", path=str(path)) from exc


def _gunzip(path: Path) -> bytes:
    """A gzip'd file's content: decompressed in one piece (``gzip.decompress``, the same bytes
    as reading a ``GzipFile`` through: every member, zero padding between them skipped), or, when
    that fails, read through a ``GzipFile`` again, so a damaged file fails as it always did."""
    try:
        return gzip.decompress(path.read_bytes())
    except Exception:  # read again below: that raises what reading always raised
        with gzip.open(path, "rb") as handle:
            return handle.read()


def read_text(path: Path, data: bytes | None = None) -> str:
    """The whole file as UTF-8 text (gzip'd or not; ``data``: its content, when already read).

    Raises:
        TranscriptFormatError: the file cannot be read, or is not UTF-8 text.
    """
    return _decoded(read_bytes(path) if data is None else data, path)


def _decoded(data: bytes, path: Path) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise TranscriptFormatError(
            "not UTF-8 text: is this a transcript?", path=str(path), line=line
        ) from exc


def iter_json_lines(path: Path, data: bytes | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line of a JSONL file (``data``: the
    file's content, when already read).

    Raises:
        TranscriptFormatError: the file is not UTF-8 text, or a line is not JSON or not a JSON
            object (names the line).
    """
    # A line that begins with "{" is read by the parser json.loads uses, without the three
    # calls json.loads makes around it, and taken when the object read ends exactly at the end
    # of the line: then json.loads of the line reads the same characters to the same object. Any
    # other line (blank, spaces around the object, a damaged line) is read by json.loads, below.
    # The parser runs four frames below this one (_deeper three times, _scanned), as it does
    # under json.loads (jsonsafe.loads, json.loads, decode, raw_decode): it runs out of stack on
    # deep nesting at the same depth either way.
    for number, line in _deeper(_deeper(_deeper(_scanned(_text_lines(path, data))))):
        if isinstance(line, dict):
            yield number, line
            continue
        if not line.strip():
            continue
        try:
            value = jsonsafe.loads(line)
        except json.JSONDecodeError as exc:
            raise TranscriptFormatError(
                f"not valid JSON ({_at_column(exc)})", path=str(path), line=number
            ) from None
        if not isinstance(value, dict):
            raise TranscriptFormatError(
                f"expected a JSON object, got {type(value).__name__}", path=str(path), line=number
            )
        yield number, value


# The parser json.loads runs (through JSONDecoder.raw_decode): no hooks, strict.
_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _scanned(lines: list[str]) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """``(line number, object)`` for each line the parser reads whole to an object, ``(line
    number, line)`` for the others (see :func:`iter_json_lines`)."""
    for number, line in enumerate(lines, start=1):
        if line.startswith("{"):
            try:
                value, stop = _SCAN(line, 0)
            except Exception:  # json.loads reads the line below: that names the error
                pass
            else:
                if stop == len(line):
                    yield number, value
                    continue
        yield number, line


def _deeper(inner: Iterator[tuple[int, Any]]) -> Iterator[tuple[int, Any]]:
    """``inner``'s items, one generator frame deeper (see :func:`iter_json_lines`)."""
    yield from inner


def _text_lines(path: Path, data: bytes | None = None) -> list[str]:
    """The file's lines exactly as ``str.splitlines`` cuts its UTF-8 text (checked whole).

    Cut as bytes at ``\\n`` and decoded line by line, which is faster than decoding a long
    UTF-8 text whole and cutting it, unless the content holds another character
    ``str.splitlines`` ends a line at: then the text is decoded whole and cut as before.
    """
    if data is None:
        data = read_bytes(path)
    if any(mark in data for mark in _OTHER_ASCII_LINE_ENDS):
        return _decoded(data, path).splitlines()
    # The pieces between "\n"s (found by bytes.find, faster on long lines than bytes.split),
    # without the empty one after a final "\n": "a\n" is one line to str.splitlines.
    lines = []
    find = data.find
    size = len(data)
    pos = 0
    try:
        while pos < size:
            end = find(b"\n", pos)
            if end < 0:
                end = size
            lines.append(data[pos:end].decode("utf-8"))
            pos = end + 1
    except UnicodeDecodeError:
        _decoded(data, path)  # raises the error naming the line
        raise  # pragma: no cover - a line is not UTF-8 only if the whole is not
    for line in lines:
        if not line.isascii() and ("\x85" in line or "\u2028" in line or "\u2029" in line):
            return _decoded(data, path).splitlines()
    return lines


def load_json(path: Path, data: bytes | None = None) -> Any:
    """The whole file parsed as one JSON document (``data``: its content, when already read).

    Raises:
        TranscriptFormatError: the file is not valid JSON (names the line).
    """
    text = read_text(path, data)
    try:
        return jsonsafe.loads(text)
    except json.JSONDecodeError as exc:
        raise TranscriptFormatError(
            f"not valid JSON ({_at_column(exc)})", path=str(path), line=exc.lineno
        ) from None


def _at_column(exc: json.JSONDecodeError) -> str:
    """The parser's complaint and its column: "Expecting value at column 1"; json's messages
    that end in "at" ("Unterminated string starting at") get no second one."""
    return f"{exc.msg.removesuffix(' at')} at column {exc.colno}"


MAX_TOKENS = 2**53
"""Above any real count (a float still holds it exactly): a larger one is damage."""


def int_field(value: object) -> int:
    """A non-negative token count from a JSON value (missing or malformed → 0: not a number,
    not finite, or :data:`MAX_TOKENS` or more)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if isinstance(value, float) and not math.isfinite(value):
        return 0
    return max(0, int(value)) if value < MAX_TOKENS else 0


def usage_field(usage: Mapping[str, Any], key: str, path: Path, line: int | None) -> int:
    """A recorded token count: missing (or ``null``) is 0; anything but a count ≥ 0 is an error.

    Raises:
        TranscriptFormatError: a string, a negative or fractional number, a bool (names the
            field, the file and the line), so a damaged recording never replays as zeros.
    """
    value = usage.get(key)
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < MAX_TOKENS:
        raise TranscriptFormatError(
            f"usage field {key!r} must be a whole number of tokens from 0 below 2**53, got "
            f"{type(value).__name__} {value!r:.40}",
            path=str(path),
            line=line,
        )
    return value

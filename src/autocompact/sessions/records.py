"""The session file format: header, records, replay, migrations and export. Stdlib only.

See :mod:`autocompact.sessions` for the layout of a file. Reading never changes a file.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Any, Literal, TypeAlias
from urllib.parse import urlsplit, urlunsplit

from autocompact import jsonsafe
from autocompact.codec import (
    history_from_dicts,
    history_to_dicts,
    message_from_dict,
    message_to_dict,
)
from autocompact.content import CharStats, Message, seed_stats
from autocompact.errors import ConfigError, ContentError, SessionFileError
from autocompact.textsafe import dumps, replace_surrogates

__all__ = [
    "REDACTED",
    "SCHEMA_VERSION",
    "SUFFIX",
    "ExportFormat",
    "JsonDict",
    "ReplayState",
    "SavedSession",
    "SessionHeader",
    "SessionSummary",
    "encode_record",
    "export_session",
    "info_succeeded",
    "info_to_dict",
    "load_session",
    "now_iso",
    "redact_credentials",
    "replay_records",
    "sanitize_url",
    "secrets_to_redact",
]

SCHEMA_VERSION = 1
"""The version of the session file format this build reads and writes."""

SUFFIX = ".jsonl"
REDACTED = "[redacted]"
_MIN_SECRET_LEN = 8

JsonDict: TypeAlias = dict[str, Any]
ExportFormat: TypeAlias = Literal["openai", "jsonl"]

# Ordered migrations: _MIGRATIONS[n] upgrades the records of a version-n file to version n + 1.
# Version 1 is the first; the table is where the next format change goes.
_MIGRATIONS: dict[int, Callable[[list[JsonDict]], list[JsonDict]]] = {}


@dataclass(frozen=True, kw_only=True)
class SessionHeader:
    """The first line of a session file: what the session is, never a credential.

    Attributes:
        id: the session id (the file is ``<id>.jsonl``).
        created: when it was created, ISO 8601 in UTC.
        cwd: the working directory it was started in (``--continue`` matches on it).
        provider: the provider's name (``"openai"``, ``"fake"``, ...).
        model: the model name.
        context_window: the window the session ran with.
        window_source: where that window came from (known, configured, server, assumed).
        system_instruction: the system prompt, if any.
        base_url: the provider's base URL with any user info and query removed.
        schema: the file format version.
    """

    id: str
    created: str
    cwd: str
    provider: str
    model: str
    context_window: int
    window_source: str | None = None
    system_instruction: str | None = None
    base_url: str | None = None
    schema: int = SCHEMA_VERSION

    def to_dict(self) -> JsonDict:
        """The header line's JSON object (unset optional fields omitted)."""
        data: JsonDict = {"type": "header", "schema": self.schema}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name != "schema" and value is not None:
                data[f.name] = value
        return data


@dataclass(frozen=True, kw_only=True)
class SavedSession:
    """A session read back from disk: the state to resume from.

    Attributes:
        header: the header.
        path: the file.
        history: the conversation, rebuilt from the records.
        last_prompt_token_count: the provider's last reported prompt size.
        consecutive_failures: the breaker's counter.
        calibration: the estimation calibration, as saved (any JSON value, or ``None``).
        compactions: every compaction attempt's info, oldest first.
        warnings: what was wrong with the file and what was done about it.
        damaged: whether a damaged tail was dropped (the file needs a repair before appending).
        good_lines: how many leading lines were readable (the header included).
        hold_until: the breaker's hold (SPEC §10.2), when a store recorded one.
        growth: the growth log's JSON form (design decision 69), when a store recorded one.
        turn_ids: the turn ids a store recorded with its turns (``{turn id: message number}``).
        clears: how many times the conversation was cleared.
    """

    header: SessionHeader
    path: Path
    history: tuple[Message, ...] = ()
    last_prompt_token_count: int = 0
    consecutive_failures: int = 0
    calibration: Any = None
    compactions: tuple[JsonDict, ...] = ()
    warnings: tuple[str, ...] = ()
    damaged: bool = False
    good_lines: int = 1
    hold_until: int | None = None
    turn_ids: Mapping[str, int] = field(default_factory=dict)
    clears: int = 0
    growth: JsonDict | None = None

    @property
    def id(self) -> str:
        """The session id."""
        return self.header.id


@dataclass(frozen=True, kw_only=True)
class SessionSummary:
    """One line of ``sessions list``.

    Attributes:
        header: the session's header.
        path: the file.
        updated: when the file last changed, ISO 8601 in UTC.
        messages: how many messages its history holds.
        compactions: how many compactions succeeded.
        preview: the start of the first user message's text.
        warnings: damage found while reading it.
    """

    header: SessionHeader
    path: Path
    updated: str
    messages: int
    compactions: int
    preview: str
    warnings: tuple[str, ...] = ()


def sanitize_url(url: str | None) -> str | None:
    """A URL without user info, query or fragment (where credentials hide), or ``None``."""
    if not url:
        return None
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def info_to_dict(info: object) -> JsonDict:
    """A compaction info record as JSON: a dataclass (CompressionInfo) or a mapping."""
    if dataclasses.is_dataclass(info) and not isinstance(info, type):
        raw = {f.name: getattr(info, f.name) for f in dataclasses.fields(info)}
    elif isinstance(info, Mapping):
        raw = dict(info)
    else:
        raise TypeError(f"a compaction info must be a dataclass or a mapping, not {info!r:.60}")
    # StrEnum values (status, trigger) become their plain string value.
    return {k: (str(v) if isinstance(v, Enum) else v) for k, v in raw.items()}


def info_succeeded(info: Mapping[str, Any]) -> bool:
    return str(info.get("status", "")) == "compressed"


def secrets_to_redact(redact: Iterable[str]) -> tuple[str, ...]:
    """The strings to redact, longest first (so a key containing another is caught whole)."""
    return tuple(sorted({s for s in redact if len(s) >= _MIN_SECRET_LEN}, key=len, reverse=True))


# Well-known credential shapes, redacted even when they are not in the environment (a key
# pasted into a message). Each must be specific enough never to match ordinary text; the
# bearer pattern keeps the word and redacts the token. See docs/sessions.md (what is redacted).
_CREDENTIAL_SHAPES = re.compile(
    r"(?<![A-Za-z0-9_-])(?:"
    r"sk-ant-[a-z]+\d*-[A-Za-z0-9_-]{20,}"  # Anthropic (sk-ant-api03-…, sk-ant-admin01-…)
    r"|sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"  # OpenAI and compatible
    r"|gh[pousr]_[A-Za-z0-9]{30,}"  # GitHub tokens
    r"|github_pat_[A-Za-z0-9_]{22,}"  # GitHub fine-grained tokens
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key ids
    r"|AIza[0-9A-Za-z_-]{35}"  # Google API keys
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"  # Slack tokens
    r"|glpat-[A-Za-z0-9_-]{20,}"  # GitLab tokens
    r")"
)
# A token, not a word: 16+ characters with at least one digit or punctuation among them.
_BEARER = re.compile(r"(?i)(\bbearer\s+)(?=[A-Za-z]*[0-9._~+/-])[A-Za-z0-9._~+/-]{16,}=*")


def redact_credentials(text: str) -> str:
    """``text`` with well-known credential shapes replaced by ``[redacted]``."""
    if "sk-" not in text and not _MAY_HOLD.search(text):
        return text
    text = _CREDENTIAL_SHAPES.sub(REDACTED, text)
    return _BEARER.sub(lambda m: m.group(1) + REDACTED, text)


_MAY_HOLD = re.compile(r"gh[pousr]_|github_pat_|AKIA|ASIA|AIza|xox[abposr]-|glpat-|(?i:bearer)")


def encode_record(record: JsonDict, redact: Sequence[str]) -> str:
    """One record as one JSON line, with every secret and credential-shaped string replaced."""
    line = redact_credentials(dumps(record, default=str))  # textsafe: surrogates → U+FFFD
    for secret in redact:
        line = line.replace(secret, REDACTED)
        # A secret may appear JSON-escaped (quotes, backslashes, non-ASCII are escaped).
        escaped = json.dumps(secret, ensure_ascii=False)[1:-1]
        if escaped != secret:
            line = line.replace(escaped, REDACTED)
    return line + "\n"


def load_session(path: Path | str) -> SavedSession:
    """Read one session file.

    Raises:
        SessionFileError: the file cannot be read, is not a session, or has a schema version
            this build does not read.
    """
    try:
        raw = (path := Path(path)).read_bytes()  # (a path given as a str is read too)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        reason = exc.strerror if isinstance(exc, OSError) else None
        raise SessionFileError(f"cannot read: {reason or exc}", path=str(path)) from exc
    lines = raw.split(b"\n")
    # A file written by us ends with a newline, so the last element is b"" unless truncated.
    tail_unterminated = lines[-1] != b""
    if not tail_unterminated:
        lines.pop()
    if not lines or not lines[0].strip():
        raise SessionFileError("empty file: not an autocompact session", path=str(path))
    header_data = _parse_line(lines[0], path, 1)
    if not isinstance(header_data, dict) or header_data.get("type") != "header":
        raise SessionFileError(
            "not an autocompact session (the first line is not a session header)",
            path=str(path),
            line=1,
        )
    schema = header_data.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
        raise SessionFileError(
            f"the header has no valid schema version ({schema!r})", path=str(path), line=1
        )
    if schema > SCHEMA_VERSION:
        raise SessionFileError(
            f"session schema version {schema} is newer than this build reads (version "
            f"{SCHEMA_VERSION}); upgrade autocompact to open it",
            path=str(path),
            line=1,
        )
    header = _header_from_dict(header_data, path)

    records: list[JsonDict] = []
    warnings: list[str] = []
    good = 1
    damaged = False
    parse = _line_parser(path)
    for number, line in enumerate(lines[1:], start=2):
        is_last = number == len(lines)
        if not line.strip():
            good += 1
            continue
        data = parse(line, number)
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            damaged = True
            if is_last:
                warnings.append(
                    f"line {number} is incomplete (an interrupted write); it was dropped and "
                    "every complete turn before it kept"
                )
            else:
                warnings.append(
                    f"line {number} is unreadable; the {number - 2} records before it were "
                    f"kept and the {len(lines) - number} after it ignored"
                )
            break
        records.append(data)
        good += 1
    if tail_unterminated and not damaged:
        damaged = True  # complete JSON but no newline: appends need a clean line first

    for version in range(schema, SCHEMA_VERSION):
        records = _MIGRATIONS[version](records)
    state = _replay(records, path, warnings)
    if state.model:  # a /model switch: the session continues on the newer model
        header = _header_from_dict({**header_data, **state.model}, path)
    history = state.history
    if (
        damaged
        and records
        and records[-1]["type"] == "message"
        and history
        and history[-1].role == "user"
        and not history[-1].function_responses
    ):
        # The crash hit the turn in progress: its question was saved, its answer was not.
        # Dropping its line too means a repair leaves no dangling question behind.
        history = history[:-1]
        good -= 1
        warnings.append("the last, unanswered user message was dropped (an interrupted turn)")
    return SavedSession(
        header=header,
        path=path,
        history=tuple(history),
        last_prompt_token_count=state.last_prompt_token_count,
        consecutive_failures=state.consecutive_failures,
        calibration=state.calibration,
        compactions=tuple(state.compactions),
        warnings=tuple(warnings),
        damaged=damaged,
        good_lines=good,
        hold_until=state.hold_until,
        growth=state.growth,
        turn_ids=state.turn_ids,
        clears=state.clears,
    )


_JSON_SPACE = " \t\n\r"
# The C scanner json.loads runs, without its per-call wrapper.
_scan_once: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _line_parser(path: Path) -> Callable[[bytes, int], object]:
    """``_parse_line`` with ``json.loads``'s own rules (JSON whitespace around the value, nothing
    after it) but the C scanner called directly: no decoder wrapper per line (issue 25).

    Each line is decoded on its own: one non-BMP character would make a whole-file string
    four bytes a character, and scanning it slower than the lines.
    """

    def parse(line: bytes, number: int) -> object:
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            return None
        index, size = 0, len(text)
        while index < size and text[index] in _JSON_SPACE:
            index += 1
        try:
            value, end = _scan_once(text, index)
        except (StopIteration, json.JSONDecodeError):
            return None
        except (RecursionError, ValueError):  # too deep, or an integer past the digit limit
            return _parse_line(line, path, number)  # the same error, with its message
        while end < size and text[end] in _JSON_SPACE:
            end += 1
        return value if end == size else None

    return parse


def _parse_line(line: bytes, path: Path, number: int) -> object:
    try:
        return json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    except RecursionError:
        # Not an interrupted write (which the caller repairs) but a record nobody can read:
        # say so, and leave the file as it is.
        raise SessionFileError(
            f"a record is nested more than {jsonsafe.MAX_JSON_DEPTH} levels deep; this build "
            "cannot read it (the file was left unchanged)",
            path=str(path),
            line=number,
        ) from None
    except ValueError:
        # An integer longer than Python reads (json.loads's one plain ValueError): no
        # interrupted write either.
        raise SessionFileError(
            f"a record holds a number of more than {sys.get_int_max_str_digits():,} digits; "
            "this build cannot read it (the file was left unchanged)",
            path=str(path),
            line=number,
        ) from None


def _header_from_dict(data: Mapping[str, Any], path: Path) -> SessionHeader:
    def need(key: str, kind: type) -> Any:
        value = data.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise SessionFileError(
                f"the header field {key!r} is missing or not a {kind.__name__}",
                path=str(path),
                line=1,
            )
        return value

    def maybe(key: str, kind: type) -> Any:
        value = data.get(key)
        return value if isinstance(value, kind) else None

    return SessionHeader(
        id=need("id", str),
        created=need("created", str),
        cwd=need("cwd", str),
        provider=need("provider", str),
        model=need("model", str),
        context_window=need("context_window", int),
        window_source=maybe("window_source", str),
        system_instruction=maybe("system_instruction", str),
        base_url=maybe("base_url", str),
        schema=SCHEMA_VERSION,
    )


def message_record(message: Message) -> JsonDict:
    """The session record of one message, with its character statistics ``[text, json,
    media]`` so a restore need not measure it again (issue 11; files without them load too)."""
    return {"type": "message", "message": message_to_dict(message), "stats": stats_list(message)}


def stats_list(message: Message) -> list[int]:
    """A message's character statistics as saved: ``[text, json, media]``."""
    stats = message.stats
    return [stats.text_chars, stats.json_chars, stats.media_parts]


def _saved_stats(value: object) -> CharStats | None:
    """Saved statistics, or None when absent or not three counts (then they are measured)."""
    if type(value) is list and len(value) == 3:
        text, json_chars, media = value
        if (
            type(text) is int
            and type(json_chars) is int
            and type(media) is int
            and text >= 0
            and json_chars >= 0
            and media >= 0
        ):
            return CharStats(text_chars=text, json_chars=json_chars, media_parts=media)
    return None


@dataclass
class _ReplayState:
    history: list[Message] = field(default_factory=list)
    last_prompt_token_count: int = 0
    consecutive_failures: int = 0
    calibration: Any = None
    compactions: list[JsonDict] = field(default_factory=list)
    model: dict[str, Any] = field(default_factory=dict)
    hold_until: int | None = None
    turn_ids: dict[str, int] = field(default_factory=dict)
    clears: int = 0
    growth: JsonDict | None = None


ReplayState = _ReplayState
"""What replaying a file's records rebuilt (a reader that follows a file keeps one)."""


def replay_records(
    records: Sequence[JsonDict], path: Path, state: _ReplayState, *, first_line: int
) -> list[str]:
    """Apply more records (read from line ``first_line`` on) to ``state``, as
    :func:`load_session` applies a whole file's; returns the warnings."""
    warnings: list[str] = []
    _replay(records, path, warnings, state, first_line)
    return warnings


def _replay(
    records: Sequence[JsonDict],
    path: Path,
    warnings: list[str],
    state: _ReplayState | None = None,
    first_line: int = 2,
) -> _ReplayState:
    state = _ReplayState() if state is None else state
    for number, record in enumerate(records, start=first_line):
        kind = record["type"]
        try:
            if kind == "message":
                message = message_from_dict(record.get("message"), decoded=True)
                saved = _saved_stats(record.get("stats"))
                if saved is not None:
                    seed_stats(message, saved)
                state.history.append(message)
                turn_id = record.get("turn_id")  # written by the JSONL session store
                if isinstance(turn_id, str):
                    state.turn_ids.setdefault(turn_id, len(state.history))
            elif kind == "state":
                state.last_prompt_token_count = _int(record, "last_prompt_token_count")
                state.consecutive_failures = _int(record, "consecutive_failures")
                state.calibration = record.get("calibration")
                hold = record.get("hold_until")
                state.hold_until = hold if isinstance(hold, int) and hold >= 0 else None
                growth = record.get("growth")
                state.growth = dict(growth) if isinstance(growth, Mapping) else None
            elif kind == "compaction":
                info = record.get("info")
                state.compactions.append(dict(info) if isinstance(info, Mapping) else {})
                if "history" in record:
                    items = record["history"]
                    if not isinstance(items, list):
                        raise ContentError("'history' must be a list")
                    state.history = history_from_dicts(items, decoded=True)
                    saved_list = record.get("history_stats")
                    if isinstance(saved_list, list) and len(saved_list) == len(items):
                        for message, value in zip(state.history, saved_list, strict=True):
                            saved = _saved_stats(value)
                            if saved is not None:
                                seed_stats(message, saved)
            elif kind == "model":
                state.model = {
                    key: record[key]
                    for key in ("provider", "model", "context_window", "window_source")
                    if key in record
                }
                for key, value in state.model.items():  # checked here: the header says line 1
                    wanted = int if key == "context_window" else str
                    if key != "window_source" and (
                        not isinstance(value, wanted) or isinstance(value, bool)
                    ):
                        raise ContentError(
                            f"{key!r} must be a {wanted.__name__}, got {value!r:.40}"
                        )
            elif kind == "clear":
                state.history = []
                state.last_prompt_token_count = 0
                state.consecutive_failures = 0
                state.hold_until = None
                state.growth = None
                state.clears += 1
            else:
                warnings.append(f"record type {kind!r} is unknown to this build; skipped")
        except ContentError as exc:
            raise SessionFileError(
                f"a {kind} record is malformed: {exc}", path=str(path), line=number
            ) from exc
    return state


def _int(record: Mapping[str, Any], key: str) -> int:
    value = record.get(key, 0)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ContentError(f"{key!r} must be a whole number ≥ 0, got {value!r}")
    return value


def export_session(saved: SavedSession, fmt: ExportFormat) -> str:
    """A saved session's history as text in an interchange format.

    Args:
        saved: the session.
        fmt: ``"openai"`` — a JSON array of OpenAI chat-completions messages (the system
            instruction first); ``"jsonl"`` — one neutral message object per line
            (``autocompact.codec`` form).

    Raises:
        ContentError, ConfigError: a part the OpenAI format cannot carry; an unknown ``fmt``.
    """
    if fmt == "jsonl":
        return "".join(
            dumps(m) + "\n"  # textsafe: surrogates → U+FFFD
            for m in history_to_dicts(saved.history)
        )
    if fmt == "openai":
        from autocompact.convert import to_openai_messages

        messages = to_openai_messages(saved.history, saved.header.system_instruction)
        return replace_surrogates(json.dumps(messages, ensure_ascii=False, indent=2)) + "\n"
    raise ConfigError(f"unknown export format {fmt!r:.60}: use 'openai' or 'jsonl'", key="fmt")

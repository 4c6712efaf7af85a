"""Writing sessions: the append-only writer, the store directory, repairs. Stdlib only.

Each append is one ``os.write`` of whole lines followed by ``fsync``; files are created 0600 in
a 0700 directory; a damaged file is copied to ``.bak`` before it is rewritten.
"""

from __future__ import annotations

import builtins
import os
import re
import secrets
import shutil
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from autocompact.codec import history_to_dicts
from autocompact.content import Message
from autocompact.errors import SessionFileError
from autocompact.sessions.records import (
    SUFFIX,
    JsonDict,
    SavedSession,
    SessionHeader,
    SessionSummary,
    encode_record,
    info_succeeded,
    info_to_dict,
    load_session,
    now_iso,
    sanitize_url,
    secrets_to_redact,
)

__all__ = ["SessionStore", "SessionWriter"]

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class SessionWriter:
    """Appends records to one session file; each append is one write, flushed and fsynced.

    Get one from :meth:`SessionStore.create` or :meth:`SessionStore.open_for_append`. The writer
    remembers what it has persisted, so :meth:`sync` can be called after every turn with the
    chat's current state and writes only what changed.

    Args:
        path: the session file (already holding its header).
        header: its header.
        redact: strings (API keys, tokens) replaced by ``[redacted]`` before any line is written.
        history: the history already in the file.
        state: the ``(last_prompt_token_count, consecutive_failures, calibration)`` already in
            the file.
    """

    def __init__(
        self,
        path: Path,
        header: SessionHeader,
        *,
        redact: Iterable[str] = (),
        history: Sequence[Message] = (),
        state: tuple[int, int, Any] | None = None,
    ) -> None:
        self.path = path
        self.header = header
        self._redact = secrets_to_redact(redact)
        self._history: tuple[Message, ...] = tuple(history)
        self._state = state
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    @property
    def id(self) -> str:
        """The session id."""
        return self.header.id

    @property
    def history(self) -> tuple[Message, ...]:
        """The history as persisted so far."""
        return self._history

    # -- records -----------------------------------------------------------------------------

    def append_messages(self, messages: Sequence[Message]) -> None:
        """Append messages (one turn) in a single write."""
        if not messages:
            return
        self._write([{"type": "message", "message": m} for m in history_to_dicts(messages)])
        self._history = self._history + tuple(messages)

    def record_state(
        self, *, last_prompt_token_count: int, consecutive_failures: int, calibration: Any = None
    ) -> None:
        """Record the counters needed to resume (written only when they changed)."""
        state = (last_prompt_token_count, consecutive_failures, calibration)
        if state == self._state:
            return
        self._write(
            [
                {
                    "type": "state",
                    "last_prompt_token_count": last_prompt_token_count,
                    "consecutive_failures": consecutive_failures,
                    "calibration": calibration,
                }
            ]
        )
        self._state = state

    def record_compaction(self, info: object, history: Sequence[Message] | None = None) -> None:
        """Record a compaction attempt; ``history`` is the new history after a success."""
        record: JsonDict = {"type": "compaction", "info": info_to_dict(info)}
        if history is not None:
            record["history"] = history_to_dicts(history)
        self._write([record])
        if history is not None:
            self._history = tuple(history)

    def record_model(
        self, *, provider: str, model: str, context_window: int, window_source: str | None
    ) -> None:
        """Record that the chat moved to another model (a reader's header shows the newest)."""
        record: JsonDict = {
            "type": "model",
            "provider": provider,
            "model": model,
            "context_window": context_window,
        }
        if window_source is not None:
            record["window_source"] = window_source
        self._write([record])

    def record_clear(self) -> None:
        """Record that the history was cleared."""
        self._write([{"type": "clear"}])
        self._history = ()
        self._state = None

    def sync(
        self,
        history: Sequence[Message],
        *,
        new_compactions: Sequence[object] = (),
        last_prompt_token_count: int = 0,
        consecutive_failures: int = 0,
        calibration: Any = None,
    ) -> None:
        """Persist whatever changed since the last call, in one write.

        Args:
            history: the chat's current history.
            new_compactions: the compaction attempts made since the last call, oldest first:
                each a ``CompressionInfo`` (or mapping), or an ``(info, history)`` pair whose
                history is the one that compaction left (what the CLI captures from the
                ``CompactionSucceeded`` event), so the turn sent after it is recorded as
                ordinary messages.
            last_prompt_token_count: the chat's current value.
            consecutive_failures: the chat's current value.
            calibration: the current estimation calibration, if any.
        """
        history = tuple(history)
        records: list[JsonDict] = []
        persisted = self._history
        for item in new_compactions:
            info, left = item if isinstance(item, tuple) else (item, None)
            record: JsonDict = {"type": "compaction", "info": info_to_dict(info)}
            if info_succeeded(record["info"]):
                # Without the history it left, the current one stands in (a turn sent after
                # the compaction is then part of it): replay rebuilds the same history.
                persisted = tuple(left) if left is not None else history
                record["history"] = history_to_dicts(persisted)
            records.append(record)
        if _extends(history, persisted):
            new = history[len(persisted) :]
        else:  # the history changed without a compaction: a clear, then what is there now
            records.append({"type": "clear"})
            self._state = None  # a clear resets the counters on replay: write them again
            new = history
        records.extend({"type": "message", "message": m} for m in history_to_dicts(new))
        state = (last_prompt_token_count, consecutive_failures, calibration)
        if state != self._state:
            records.append(
                {
                    "type": "state",
                    "last_prompt_token_count": last_prompt_token_count,
                    "consecutive_failures": consecutive_failures,
                    "calibration": calibration,
                }
            )
        if records:
            self._write(records)
        self._history = history
        self._state = state

    def close(self) -> None:
        """Close the file (further appends raise)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> SessionWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------------

    def _write(self, records: Sequence[JsonDict]) -> None:
        if self._fd is None:
            raise SessionFileError("the session file is closed", path=str(self.path))
        data = "".join(encode_record(r, self._redact) for r in records).encode("utf-8")
        _write_all(self._fd, data, self.path)


def _extends(history: Sequence[Message], prefix: Sequence[Message]) -> bool:
    """Whether ``history`` starts with ``prefix``."""
    return len(history) >= len(prefix) and all(
        a is b or a == b for a, b in zip(prefix, history, strict=False)
    )


def _write_all(fd: int, data: bytes, path: Path) -> None:
    """One ``write`` (looping only on a short write), then ``fsync``."""
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    except OSError as exc:
        raise SessionFileError(f"cannot write: {exc.strerror or exc}", path=str(path)) from exc


class SessionStore:
    """The directory of saved sessions.

    Args:
        root: the directory (created with mode 0700 when first written to).
        redact: secrets to keep out of every file this store writes.
    """

    def __init__(self, root: Path, *, redact: Iterable[str] = ()) -> None:
        self.root = Path(root)
        self.redact = tuple(redact)

    # -- writing -----------------------------------------------------------------------------

    def create(
        self,
        *,
        provider: str,
        model: str,
        context_window: int,
        cwd: str | os.PathLike[str] | None = None,
        window_source: str | None = None,
        system_instruction: str | None = None,
        base_url: str | None = None,
        session_id: str | None = None,
        created: str | None = None,
    ) -> SessionWriter:
        """Create a new session file (header written and fsynced) and return its writer."""
        self._ensure_root()
        sid = session_id or _new_id()
        _check_id(sid, self.root)
        header = SessionHeader(
            id=sid,
            created=created or now_iso(),
            cwd=str(Path(cwd) if cwd is not None else Path.cwd()),
            provider=provider,
            model=model,
            context_window=context_window,
            window_source=window_source,
            system_instruction=system_instruction,
            base_url=sanitize_url(base_url),
        )
        path = self.path_of(sid)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise SessionFileError(
                "a session with this id already exists; choose another id", path=str(path)
            ) from None
        try:
            line = encode_record(header.to_dict(), secrets_to_redact(self.redact))
            _write_all(fd, line.encode("utf-8"), path)
        finally:
            os.close(fd)
        return SessionWriter(path, header, redact=self.redact)

    def open_for_append(self, session_id: str) -> tuple[SavedSession, SessionWriter]:
        """Load a session and get a writer that appends to it.

        A damaged file (a truncated last line, an unreadable record) is first copied to
        ``<id>.jsonl.bak`` and then rewritten with its readable lines only, through a temporary
        file and ``os.replace``, so appends start on a clean line.
        """
        saved = self.open(session_id)
        if saved.damaged:
            _repair(saved.path, saved.good_lines)
        writer = SessionWriter(
            saved.path,
            saved.header,
            redact=self.redact,
            history=saved.history,
            state=(
                saved.last_prompt_token_count,
                saved.consecutive_failures,
                saved.calibration,
            ),
        )
        return saved, writer

    # -- reading -----------------------------------------------------------------------------

    def path_of(self, session_id: str) -> Path:
        """The file of a session id."""
        return self.root / f"{session_id}{SUFFIX}"

    def resolve(self, session_id: str) -> str:
        """The full id of a session given by its id or a unique prefix of it.

        Raises:
            SessionFileError: no session, or several, match.
        """
        _check_id(session_id, self.root)
        if self.path_of(session_id).is_file():
            return session_id
        matches = sorted(p.stem for p in self._files() if p.stem.startswith(session_id))
        if len(matches) == 1:
            return matches[0]
        where = str(self.path_of(session_id))
        if not matches:
            raise SessionFileError(
                f"no saved session with id {session_id!r} in {self.root}", path=where
            )
        raise SessionFileError(
            f"{session_id!r} matches {len(matches)} sessions ({', '.join(matches[:5])}); "
            "give more of the id",
            path=where,
        )

    def open(self, session_id: str) -> SavedSession:
        """Read a session (by id or unique prefix) without changing its file."""
        return load_session(self.path_of(self.resolve(session_id)))

    def list(self) -> builtins.list[SessionSummary]:
        """Every readable session, most recently updated first (unreadable files are skipped)."""
        out: builtins.list[tuple[int, SessionSummary]] = []
        for path in self._files():
            try:
                saved = load_session(path)
                mtime = path.stat().st_mtime_ns
            except (SessionFileError, OSError):
                continue
            preview = next((m.text for m in saved.history if m.role == "user" and m.text), "")
            out.append(
                (
                    mtime,
                    SessionSummary(
                        header=saved.header,
                        path=path,
                        updated=datetime.fromtimestamp(mtime / 1e9, UTC).isoformat(
                            timespec="seconds"
                        ),
                        messages=len(saved.history),
                        compactions=sum(1 for c in saved.compactions if info_succeeded(c)),
                        preview=" ".join(preview.split())[:60],
                        warnings=saved.warnings,
                    ),
                )
            )
        out.sort(key=lambda item: (item[0], item[1].header.created, item[1].header.id))
        return [summary for _, summary in reversed(out)]

    def latest(self, cwd: str | os.PathLike[str] | None = None) -> SessionSummary | None:
        """The most recently updated session started in ``cwd`` (default: the current one)."""
        where = str(Path(cwd) if cwd is not None else Path.cwd())
        return next((s for s in self.list() if s.header.cwd == where), None)

    # -- internals ---------------------------------------------------------------------------

    def _files(self) -> builtins.list[Path]:
        if not self.root.is_dir():
            return []
        return [p for p in self.root.iterdir() if p.suffix == SUFFIX and p.is_file()]

    def _ensure_root(self) -> None:
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise SessionFileError(
                f"cannot create the sessions directory: {exc.strerror or exc}",
                path=str(self.root),
            ) from exc


def _new_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)


def _check_id(session_id: str, root: Path) -> None:
    if not _ID_RE.match(session_id):
        raise SessionFileError(
            f"{session_id!r} is not a session id (letters, digits, '-', '_' and '.' only)",
            path=str(root),
        )


def _repair(path: Path, good_lines: int) -> None:
    """Keep a ``.bak`` copy of a damaged file, then rewrite it with its readable lines only."""
    backup = path.with_name(path.name + ".bak")
    n = 1
    while backup.exists():
        backup = path.with_name(f"{path.name}.bak{n}")
        n += 1
    try:
        shutil.copy2(path, backup)
        os.chmod(backup, 0o600)
        with path.open("rb") as src:
            kept = b"".join(line for _, line in zip(range(good_lines), src, strict=False))
        if not kept.endswith(b"\n"):
            kept += b"\n"
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            _write_all(fd, kept, tmp)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        raise SessionFileError(
            f"cannot repair the damaged file: {exc.strerror or exc}", path=str(path)
        ) from exc

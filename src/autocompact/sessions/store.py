"""Writing sessions: the append-only writer, the store directory, repairs. Stdlib only.

Each append is one ``os.write`` of whole lines followed by ``fsync``; files are created 0600 in
a 0700 directory; a damaged file is copied to ``.bak`` before it is rewritten.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import re
import secrets
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from autocompact.codec import history_to_dicts
from autocompact.content import Message
from autocompact.errors import SessionFileError
from autocompact.sessions.durable import repair, replace_file, write_all
from autocompact.sessions.locking import header_cwd, lock_session, open_append, unlock
from autocompact.sessions.records import (
    SUFFIX,
    JsonDict,
    ReplayState,
    SavedSession,
    SessionHeader,
    SessionSummary,
    encode_record,
    info_succeeded,
    info_to_dict,
    load_session,
    message_record,
    now_iso,
    sanitize_url,
    secrets_to_redact,
    stats_list,
)

__all__ = ["SessionStore", "SessionWriter", "lock_session"]

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
        lock_fd: the session's lock, when the caller took it already (see :func:`lock_session`).
        hold_until: the breaker's hold already in the file.
        growth: the growth log already in the file.

    A writer holds the session's lock (``<id>.jsonl.lock``, ``fcntl.flock``) until
    :meth:`close`: a second writer on the same session gets a :class:`SessionFileError` saying
    it is in use, so two chats never interleave their turns in one file. When the file is
    deleted while the writer is open, the next write recreates it with the conversation as
    persisted so far (and says so in :attr:`notices`), instead of writing into the void.
    """

    def __init__(
        self,
        path: Path,
        header: SessionHeader,
        *,
        redact: Iterable[str] = (),
        history: Sequence[Message] = (),
        state: tuple[int, int, Any] | None = None,
        lock_fd: int | None = None,
        hold_until: int | None = None,
        growth: JsonDict | None = None,
    ) -> None:
        self.path = path
        self.header = header
        self._redact = secrets_to_redact(redact)
        self._history: tuple[Message, ...] = tuple(history)
        self._state = state
        self._hold_until = hold_until
        self._growth = growth
        self.notices: list[str] = []
        self._batch: list[JsonDict] | None = None
        self._lock_fd: int | None = lock_fd if lock_fd is not None else lock_session(path)
        try:
            self._fd: int | None = open_append(path)
            self._inode = os.fstat(self._fd).st_ino
        except BaseException:
            if lock_fd is None:  # taken here: released here (a caller's lock is the caller's)
                unlock(self._lock_fd)
            self._lock_fd = None
            raise

    @property
    def id(self) -> str:
        """The session id."""
        return self.header.id

    @property
    def history(self) -> tuple[Message, ...]:
        """The history as persisted so far."""
        return self._history

    # -- records -----------------------------------------------------------------------------

    def append_messages(self, messages: Sequence[Message], *, turn_id: str | None = None) -> None:
        """Append messages (one turn) in a single write (``turn_id``: kept on each record, so
        a session store recognizes a retried turn from any process)."""
        if not messages:
            return
        records = [message_record(m) for m in messages]
        if turn_id is not None:
            for record in records:
                record["turn_id"] = turn_id
        self._write(records)
        self._history = self._history + tuple(messages)

    def record_state(
        self,
        *,
        last_prompt_token_count: int,
        consecutive_failures: int,
        calibration: Any = None,
        hold_until: int | None = None,
        growth: JsonDict | None = None,
    ) -> None:
        """Record the counters needed to resume (written only when they changed; ``hold_until``
        and ``growth``: the breaker's hold and the growth log, which a session store keeps)."""
        state = (last_prompt_token_count, consecutive_failures, calibration)
        record = self._state_record(state, hold_until, growth)
        if record is None:
            return
        self._write([record])
        self._state, self._hold_until, self._growth = state, hold_until, growth

    def _state_record(
        self, state: tuple[int, int, Any], hold_until: int | None, growth: JsonDict | None
    ) -> JsonDict | None:
        """The ``state`` record to write, or ``None`` when nothing changed since the last one."""
        if state == self._state and (hold_until, growth) == (self._hold_until, self._growth):
            return None
        last_prompt_token_count, consecutive_failures, calibration = state
        record: JsonDict = {
            "type": "state",
            "last_prompt_token_count": last_prompt_token_count,
            "consecutive_failures": consecutive_failures,
            "calibration": calibration,
        }
        if hold_until is not None:
            record["hold_until"] = hold_until
        if growth is not None:
            record["growth"] = growth
        return record

    def record_compaction(self, info: object, history: Sequence[Message] | None = None) -> None:
        """Record a compaction attempt; ``history`` is the new history after a success."""
        self._write([_compaction_record(info_to_dict(info), history)])
        if history is not None:
            self._history = tuple(history)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Gather the records written inside into one write (one ``fsync``): a reader, or a
        crash, sees all of them or none."""
        self._batch = []
        try:
            yield
            records, self._batch = self._batch, None
            if records:
                self._write(records)
        finally:
            self._batch = None

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
        hold_until: int | None = None,
        growth: JsonDict | None = None,
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
            hold_until: the breaker's hold, if one is on (SPEC §10.2).
            growth: the growth log's JSON form (design decision 63), if the chat keeps one.
        """
        history = tuple(history)
        records: list[JsonDict] = []
        persisted = self._history
        for item in new_compactions:
            info, left = item if isinstance(item, tuple) else (item, None)
            record = info_to_dict(info)
            if info_succeeded(record):
                # Without the history it left, the current one stands in (a turn sent after
                # the compaction is then part of it): replay rebuilds the same history.
                persisted = tuple(left) if left is not None else history
            records.append(
                _compaction_record(record, persisted if info_succeeded(record) else None)
            )
        if _extends(history, persisted):
            new = history[len(persisted) :]
        else:  # the history changed without a compaction: a clear, then what is there now
            records.append({"type": "clear"})
            self._state = None  # a clear resets the counters on replay: write them again
            new = history
        records.extend(message_record(m) for m in new)
        state = (last_prompt_token_count, consecutive_failures, calibration)
        state_record = self._state_record(state, hold_until, growth)
        if state_record is not None:
            records.append(state_record)
        if records:
            self._write(records)
        self._history = history
        self._state = state
        self._hold_until, self._growth = hold_until, growth

    def close(self) -> None:
        """Close the file and release the session (further appends raise)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._lock_fd is not None:
            unlock(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> SessionWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------------

    def _write(self, records: Sequence[JsonDict]) -> None:
        if self._batch is not None:
            self._batch.extend(records)
            return
        if self._fd is None:
            raise SessionFileError("the session file is closed", path=str(self.path))
        self._check_file()
        data = "".join(encode_record(r, self._redact) for r in records).encode("utf-8")
        write_all(self._fd, data, self.path)

    def _check_file(self) -> None:
        """Recreate the file when it was deleted or replaced since it was opened."""
        try:
            same = os.stat(self.path).st_ino == self._inode
        except FileNotFoundError:
            same = False
        except OSError as exc:
            raise SessionFileError(
                f"cannot write: {exc.strerror or exc}", path=str(self.path)
            ) from exc
        if same:
            return
        assert self._fd is not None
        records: list[JsonDict] = [self.header.to_dict()]
        records.extend(message_record(m) for m in self._history)
        if self._state is not None:
            keys = ("last_prompt_token_count", "consecutive_failures", "calibration")
            records.append({"type": "state", **dict(zip(keys, self._state, strict=True))})
        data = "".join(encode_record(r, self._redact) for r in records).encode("utf-8")
        try:
            replace_file(self.path, data)
            new_fd = open_append(self.path)
        except OSError as exc:
            raise SessionFileError(
                f"the session file disappeared and cannot be recreated: {exc.strerror or exc}",
                path=str(self.path),
            ) from exc
        os.close(self._fd)
        self._fd, self._inode = new_fd, os.fstat(new_fd).st_ino
        self.notices.append(
            f"{self.path} was deleted or replaced while the chat ran; it was recreated with the "
            f"{len(self._history)} messages saved so far"
        )


def _compaction_record(info: JsonDict, history: Sequence[Message] | None) -> JsonDict:
    """A ``compaction`` record; ``history``: the one a success left."""
    record: JsonDict = {"type": "compaction", "info": info}
    if history is not None:
        record["history"] = history_to_dicts(history)
        record["history_stats"] = [stats_list(m) for m in history]
    return record


def _extends(history: Sequence[Message], prefix: Sequence[Message]) -> bool:
    """Whether ``history`` starts with ``prefix``."""
    return len(history) >= len(prefix) and all(
        a is b or a == b for a, b in zip(prefix, history, strict=False)
    )


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
        except OSError as exc:
            raise SessionFileError(f"cannot create: {exc.strerror or exc}", path=str(path)) from exc
        try:
            line = encode_record(header.to_dict(), secrets_to_redact(self.redact))
            write_all(fd, line.encode("utf-8"), path)
        finally:
            os.close(fd)
        return SessionWriter(path, header, redact=self.redact)

    def open_for_append(
        self, session_id: str, *, wait: float = 0.0
    ) -> tuple[SavedSession, SessionWriter]:
        """Load a session and get a writer that appends to it (holding the session's lock;
        ``wait``: seconds to wait for it, see :func:`lock_session`).

        A damaged file (a truncated last line, an unreadable record) is first copied to
        ``<id>.jsonl.bak`` and then rewritten with its readable lines only, through a temporary
        file and ``os.replace``, so appends start on a clean line.
        """
        path = self.path_of(self.resolve(session_id))
        # Locked before it is read: what this writer appends follows what it read.
        lock_fd = lock_session(path, wait=wait)
        try:
            saved = load_session(path)
            if saved.damaged:
                repair(saved.path, saved.good_lines)
            writer = self.writer_after(saved.path, saved.header, saved, lock_fd)
        except BaseException:
            unlock(lock_fd)
            raise
        return saved, writer

    def writer_after(
        self, path: Path, header: SessionHeader, read: SavedSession | ReplayState, lock_fd: int
    ) -> SessionWriter:
        """A writer that appends after what was ``read`` of the file, under ``lock_fd`` (its
        :meth:`SessionWriter.close` releases it)."""
        state = (read.last_prompt_token_count, read.consecutive_failures, read.calibration)
        return SessionWriter(
            path,
            header,
            redact=self.redact,
            history=read.history,
            state=state,
            lock_fd=lock_fd,
            hold_until=read.hold_until,
            growth=read.growth,
        )

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

    def list(
        self, *, problems: builtins.list[SessionFileError] | None = None
    ) -> builtins.list[SessionSummary]:
        """Every readable session, most recently updated first.

        Args:
            problems: where to put one error per file that could not be read (naming the file
                and why); without it such files are skipped silently.
        """
        out: builtins.list[tuple[int, SessionSummary]] = []
        for path in self._files():
            try:
                saved = load_session(path)
                mtime = path.stat().st_mtime_ns
            except SessionFileError as exc:
                if problems is not None:
                    problems.append(exc)
                continue
            except OSError as exc:
                if problems is not None:
                    problems.append(
                        SessionFileError(f"cannot read: {exc.strerror or exc}", path=str(path))
                    )
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

    def latest(
        self, cwd: str | os.PathLike[str] | None = None, *, strict: bool = False
    ) -> SessionSummary | None:
        """The most recently updated session started in ``cwd`` (default: the current one).

        Args:
            cwd: the directory.
            strict: raise instead of skipping when a newer file that is (or may be) this
                directory's latest session cannot be read (``--continue`` uses it, so a
                damaged or newer-schema latest session is named, not passed over).

        Raises:
            SessionFileError: with ``strict``, the latest session cannot be read (names the
                file and what is wrong with it).
        """
        where = str(Path(cwd) if cwd is not None else Path.cwd())
        best = next((s for s in self.list() if s.header.cwd == where), None)
        if strict:
            self._check_newer(where, best)
        return best

    def _check_newer(self, where: str, best: SessionSummary | None) -> None:
        floor = -1
        if best is not None:
            with contextlib.suppress(OSError):
                floor = best.path.stat().st_mtime_ns
        newer = []
        for path in self._files():
            try:
                mtime = path.stat().st_mtime_ns
            except OSError:
                continue
            if mtime > floor and (best is None or path != best.path):
                newer.append((mtime, path))
        for _, path in sorted(newer, reverse=True):
            try:
                load_session(path)
            except SessionFileError as exc:
                owner = header_cwd(path)
                if owner is None or owner == where:
                    maybe = (
                        ""
                        if owner == where
                        else " (it may be this directory's: its header is unreadable)"
                    )
                    raise SessionFileError(
                        f"the latest session{maybe} cannot be read: {exc.detail}. Fix or move "
                        "the file, resume another session with --resume ID (autocompact "
                        "sessions list), or start a new chat",
                        path=exc.path,
                        line=exc.line,
                    ) from exc

    # -- internals ---------------------------------------------------------------------------

    def _files(self) -> builtins.list[Path]:
        if not self.root.is_dir():
            return []
        return [p for p in self.root.iterdir() if p.suffix == SUFFIX and p.is_file()]

    def _ensure_root(self) -> None:
        # Every directory created here is private (0700), the data directory above the
        # sessions included; directories that already exist keep their mode.
        missing = [p for p in (self.root, *self.root.parents) if not p.exists()]
        try:
            for directory in reversed(missing):
                directory.mkdir(mode=0o700, exist_ok=True)
                os.chmod(directory, 0o700)  # mkdir's mode is masked by the umask
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

"""The JSONL backend: the session files (one user, one machine) behind the store protocol.

It wraps :class:`autocompact.sessions.store.SessionStore` (the file format, its crash safety
and its repairs stay there). Every call holds the session's lock file (``<id>.jsonl.lock``,
``fcntl.flock``) for its duration, so several processes of one machine sharing the directory
keep the store semantics: the file is read under the lock, a turn's id is written with its
messages (a retried turn is recognized by any process), the compaction lease is kept in
``<id>.jsonl.lease`` beside it, and the compare-and-swap compares the number of compactions and
clears in the file. ``flock`` locks are local to one machine (not reliable over NFS): for
workers on several machines, use PostgreSQL (``autocompact sessions import`` moves these files
there).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from autocompact.codec import message_from_dict
from autocompact.content import Message
from autocompact.errors import SessionFileError, SessionStoreError
from autocompact.sessions.records import SavedSession, info_succeeded
from autocompact.sessions.store import SessionStore as JsonlDirectory
from autocompact.sessions.store import SessionWriter
from autocompact.sessions.stores.base import (
    DEFAULT_LEASE_SECONDS,
    DEFAULT_MAX_TURN_BYTES,
    AppendResult,
    Attempt,
    BreakerEffect,
    CommitResult,
    Entry,
    JsonDict,
    Lease,
    SessionListing,
    Snapshot,
    check_session_id,
    check_turn_size,
)

__all__ = ["JsonlStore"]

LOCK_WAIT_SECONDS = 30.0
"""How long a call waits for another process's write on the same session before giving up."""


class JsonlStore:
    """Sessions as ``<id>.jsonl`` files in one directory.

    Args:
        root: the directory.
        lease_seconds: how long a lease lasts.
        max_turn_bytes: the largest turn accepted (JSON bytes).
        clock: seconds, for lease expiry (every process sharing the directory must agree).
        lock_wait: seconds a call waits for the session's lock (another process's write, or a
            chat that holds the session) before it fails with a :class:`SessionStoreError`.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        max_turn_bytes: int = DEFAULT_MAX_TURN_BYTES,
        clock: Callable[[], float] = time.time,
        lock_wait: float = LOCK_WAIT_SECONDS,
        **_ignored: Any,
    ) -> None:
        self.root = Path(root)
        self.max_turn_bytes = max_turn_bytes
        self._dir = JsonlDirectory(self.root)
        self.lease_seconds = lease_seconds
        self.lock_wait = lock_wait
        self._clock = clock
        self._lock = threading.RLock()

    @property
    def address(self) -> str:
        """``jsonl://<directory>``."""
        return f"jsonl://{self.root}"

    # -- helpers -----------------------------------------------------------------------------

    def _fail(self, exc: SessionFileError, session_id: str | None = None) -> SessionStoreError:
        return SessionStoreError(str(exc), store=self.address, session_id=session_id)

    def _open(self, session_id: str) -> SavedSession:
        check_session_id(session_id, self.address)
        try:
            return self._dir.open(session_id)
        except SessionFileError as exc:
            raise self._fail(exc, session_id) from None

    @contextlib.contextmanager
    def _locked(self, session_id: str) -> Iterator[tuple[SavedSession, SessionWriter]]:
        """The session as read under its lock and a writer; the lock is held until the end."""
        check_session_id(session_id, self.address)
        with self._lock:
            try:
                saved, writer = self._dir.open_for_append(session_id, wait=self.lock_wait)
            except SessionFileError as exc:
                raise self._fail(exc, session_id) from None
            try:
                yield saved, writer
            except SessionFileError as exc:
                raise self._fail(exc, session_id) from None
            finally:
                writer.close()  # releases the lock

    def _lease_path(self, saved: SavedSession) -> Path:
        return saved.path.with_name(saved.path.name + ".lease")

    def _held_lease(self, saved: SavedSession) -> Lease | None:
        """The lease recorded beside the file (read under the session's lock)."""
        try:
            data = json.loads(self._lease_path(saved).read_text(encoding="utf-8"))
            return Lease(
                session_id=saved.id,
                owner=str(data["owner"]),
                token=str(data["token"]),
                expires=float(data["expires"]),
            )
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            return None  # unreadable: as good as lapsed (it is rewritten on the next take)

    def _write_lease(self, saved: SavedSession, lease: Lease | None) -> None:
        path = self._lease_path(saved)
        try:
            if lease is None:
                path.unlink(missing_ok=True)
                return
            tmp = path.with_name(path.name + ".tmp")
            data = {"owner": lease.owner, "token": lease.token, "expires": lease.expires}
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, json.dumps(data).encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except OSError as exc:
            raise SessionStoreError(
                f"cannot write the compaction lease {path}: {exc.strerror or exc}; check the "
                "directory's permissions",
                store=self.address,
                session_id=saved.id,
            ) from None

    def _release_in(self, saved: SavedSession, lease: Lease) -> None:
        held = self._held_lease(saved)
        if held is not None and held.token == lease.token:
            self._write_lease(saved, None)

    # -- the protocol ------------------------------------------------------------------------

    def ensure(self, session_id: str, meta: JsonDict) -> None:
        """Create the file when missing (two processes creating it at once make one)."""
        with self._lock:
            if self.exists(session_id):
                return
            try:
                writer = self._dir.create(
                    provider=str(meta.get("provider", "unknown")),
                    model=str(meta.get("model", "unknown")),
                    context_window=int(meta.get("context_window", 0) or 1),
                    cwd=meta.get("cwd"),
                    system_instruction=meta.get("system_instruction"),
                    session_id=session_id,
                )
            except SessionFileError as exc:
                if self.exists(session_id):  # another process created it first
                    return
                raise self._fail(exc, session_id) from None
            writer.close()

    def exists(self, session_id: str) -> bool:
        """Whether ``<id>.jsonl`` exists."""
        check_session_id(session_id, self.address)
        try:
            return self._dir.path_of(session_id).is_file()
        except SessionFileError:
            return False

    def load(self, session_id: str, *, after: Snapshot | None = None) -> Snapshot:
        """The file's history, one entry per message (read whole: ``after`` is not used).

        Read without the lock: a write is one ``write`` of whole lines, and a line still being
        written reads as an incomplete tail, which is left out (the turn is not there yet).
        """
        return _snapshot(self._open(session_id))

    def append_turn(
        self,
        session_id: str,
        turn_id: str,
        messages: Sequence[Message],
        *,
        usage: JsonDict | None = None,
        calibration: JsonDict | None = None,
        owner: str | None = None,
        growth: JsonDict | None = None,
    ) -> AppendResult:
        """Append the turn's messages with its id, once per id (checked under the lock)."""
        check_session_id(session_id, self.address)
        check_turn_size(messages, self.max_turn_bytes, self.address, session_id)
        with self._locked(session_id) as (saved, writer):
            if turn_id in saved.turn_ids:
                return AppendResult(seq=saved.turn_ids[turn_id], duplicate=True)
            writer.append_messages(messages, turn_id=turn_id)
            # The file keeps one count: the provider's plus the tokens added after it (the
            # reply), so a worker reading it back estimates what the writer would have.
            counted = (usage or {}).get("prompt_tokens", 0) or 0
            since = (usage or {}).get("since", 0) or 0 if counted else 0
            writer.record_state(
                last_prompt_token_count=int(counted) + int(since),
                consecutive_failures=saved.consecutive_failures,
                calibration=calibration if calibration is not None else saved.calibration,
                hold_until=saved.hold_until,
                growth=growth if growth is not None else saved.growth,
            )
            return AppendResult(seq=len(saved.history) + 1, duplicate=False)

    def get_turn(self, session_id: str, turn_id: str) -> Entry | None:
        """The messages stored under ``turn_id`` (live or compacted away), if any."""
        saved = self._open(session_id)
        if turn_id not in saved.turn_ids:
            return None
        messages = tuple(
            message_from_dict(record["message"])
            for record in self._records(saved)
            if record.get("type") == "message" and record.get("turn_id") == turn_id
        )
        seq = saved.turn_ids[turn_id]
        return Entry(seq=seq, pos=seq, kind="turn", turn_id=turn_id, messages=messages)

    def acquire_lease(self, session_id: str, owner: str, ttl: float | None = None) -> Lease | None:
        """Take the lease (``<id>.jsonl.lease``) when it is free, lapsed or ``owner``'s."""
        with self._locked(session_id) as (saved, _):
            now = self._clock()
            held = self._held_lease(saved)
            if held is not None and held.owner != owner and held.expires > now:
                return None
            lease = Lease(
                session_id=session_id,
                owner=owner,
                token=secrets.token_hex(8),
                expires=now + (self.lease_seconds if ttl is None else ttl),
            )
            self._write_lease(saved, lease)
            return lease

    def release_lease(self, lease: Lease) -> None:
        """Drop the lease if it is still this one."""
        with self._locked(lease.session_id) as (saved, _):
            self._release_in(saved, lease)

    def commit_compaction(
        self,
        base: Snapshot,
        history: Sequence[Message],
        info: JsonDict,
        *,
        lease: Lease | None = None,
        owner: str | None = None,
        breaker: BreakerEffect = "reset",
        hold_until: int | None = None,
    ) -> CommitResult:
        """Record the compaction with the history it left plus the turns appended since."""
        with self._locked(base.session_id) as (saved, writer):
            current = _snapshot(saved)
            if current.epoch != base.epoch:
                writer.record_compaction({**info, "status": "superseded"})
                result = CommitResult(
                    committed=False,
                    seq=current.last_seq,
                    consecutive_failures=current.consecutive_failures,
                )
            else:
                later = current.history[len(base.history) :]
                failures = current.consecutive_failures
                after = {"reset": 0, "add": failures + 1, "keep": failures}[breaker]
                writer.record_compaction(info, (*history, *later))
                writer.record_state(
                    last_prompt_token_count=int(info.get("new_token_count", 0) or 0),
                    consecutive_failures=after,
                    calibration=current.calibration,
                    hold_until=hold_until,
                    growth=current.growth,
                )
                result = CommitResult(
                    committed=True, seq=current.last_seq + 1, consecutive_failures=after
                )
            if lease is not None:
                self._release_in(saved, lease)
            return result

    def record_attempt(
        self,
        session_id: str,
        info: JsonDict,
        *,
        counted: bool,
        epoch: int,
        lease: Lease | None = None,
        owner: str | None = None,
        hold_until: int | None = None,
    ) -> int:
        """Record a failed or no-op attempt, the breaker's new count and its hold."""
        with self._locked(session_id) as (saved, writer):
            failures = saved.consecutive_failures + (1 if counted else 0)
            writer.record_compaction(info)
            writer.record_state(
                last_prompt_token_count=saved.last_prompt_token_count,
                consecutive_failures=failures,
                calibration=saved.calibration,
                hold_until=hold_until,
                growth=saved.growth,
            )
            if lease is not None:
                self._release_in(saved, lease)
            return failures

    def record_outgrown(
        self,
        session_id: str,
        info: JsonDict,
        *,
        epoch: int,
        hold_until: int,
        owner: str | None = None,
    ) -> bool:
        """Record an ``outgrown`` attempt, one more failure and the hold, once per epoch."""
        with self._locked(session_id) as (saved, writer):
            if any(
                c.get("status") == "outgrown" and c.get("epoch") == epoch for c in saved.compactions
            ):
                return False
            writer.record_compaction({**info, "status": "outgrown", "epoch": epoch})
            writer.record_state(
                last_prompt_token_count=saved.last_prompt_token_count,
                consecutive_failures=saved.consecutive_failures + 1,
                calibration=saved.calibration,
                hold_until=hold_until,
                growth=saved.growth,
            )
            return True

    def clear(self, session_id: str, *, owner: str | None = None) -> None:
        """Record a clear."""
        with self._locked(session_id) as (_, writer):
            writer.record_clear()

    def _records(self, saved: SavedSession) -> list[JsonDict]:
        """The file's readable records after its header."""
        try:
            lines = saved.path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise SessionStoreError(
                f"cannot read {saved.path}: {exc.strerror or exc}", store=self.address
            ) from None
        return [json.loads(line) for line in lines[1 : saved.good_lines] if line.strip()]

    def entries(self, session_id: str) -> tuple[Entry, ...]:
        """Every message record and every successful compaction's history, in file order."""
        saved = self._open(session_id)
        out: list[Entry] = []
        for record in self._records(saved):
            seq = len(out) + 1
            if record.get("type") == "message":
                message = message_from_dict(record["message"])
                turn_id = record.get("turn_id")
                out.append(
                    Entry(
                        seq=seq,
                        pos=seq,
                        kind="turn",
                        turn_id=turn_id if isinstance(turn_id, str) else None,
                        messages=(message,),
                    )
                )
            elif record.get("type") == "compaction" and "history" in record:
                history = tuple(message_from_dict(m) for m in record["history"])
                out.append(Entry(seq=seq, pos=seq, kind="summary", turn_id=None, messages=history))
            elif record.get("type") == "clear":
                out.append(Entry(seq=seq, pos=seq, kind="clear", turn_id=None, messages=()))
        return tuple(out)

    def attempts(self, session_id: str) -> tuple[Attempt, ...]:
        """Every recorded compaction attempt."""
        saved = self._open(session_id)
        failures = 0
        out: list[Attempt] = []
        for i, info in enumerate(saved.compactions):
            status = str(info.get("status", ""))
            counted = status == "outgrown" or (
                status.startswith("compression_failed")
                and info.get("trigger") in ("auto", "reactive")
            )
            failures = 0 if status == "compressed" else failures + (1 if counted else 0)
            out.append(
                Attempt(
                    seq=i + 1,
                    owner=None,
                    trigger=str(info.get("trigger", "")),
                    status=status,
                    counted=counted,
                    failures_after=failures,
                    epoch=0,
                    summary_seq=None,
                    info=dict(info),
                )
            )
        return tuple(out)

    def list_sessions(self) -> list[SessionListing]:
        """Every readable session file, newest first."""
        return [
            SessionListing(
                session_id=s.header.id,
                meta={
                    "provider": s.header.provider,
                    "model": s.header.model,
                    "context_window": s.header.context_window,
                    "cwd": s.header.cwd,
                },
                created=s.header.created,
                updated=s.updated,
                turns=s.messages,
                compactions=s.compactions,
            )
            for s in self._dir.list()
        ]

    def close(self) -> None:
        """Nothing to release: every call opens and closes the files it needs."""


def _snapshot(saved: SavedSession) -> Snapshot:
    """A session file as a store snapshot: one entry per message; the epoch counts the
    successful compactions and the clears (what the compare-and-swap compares)."""
    entries = tuple(
        Entry(seq=i + 1, pos=i + 1, kind="turn", turn_id=None, messages=(m,))
        for i, m in enumerate(saved.history)
    )
    if entries and saved.last_prompt_token_count > 0:
        entries = (
            *entries[:-1],
            Entry(
                seq=len(entries),
                pos=len(entries),
                kind="turn",
                turn_id=None,
                messages=entries[-1].messages,
                usage={"prompt_tokens": saved.last_prompt_token_count, "since": 0},
            ),
        )
    return Snapshot(
        session_id=saved.id,
        meta=_meta(saved),
        entries=entries,
        epoch=sum(1 for c in saved.compactions if info_succeeded(c)) + saved.clears,
        last_seq=len(entries),
        consecutive_failures=saved.consecutive_failures,
        calibration=saved.calibration,
        hold_until=saved.hold_until,
        growth=saved.growth,
        created=saved.header.created,
    )


def _meta(saved: SavedSession) -> JsonDict:
    h = saved.header
    return {
        key: value
        for key, value in (
            ("provider", h.provider),
            ("model", h.model),
            ("context_window", h.context_window),
            ("system_instruction", h.system_instruction),
            ("cwd", h.cwd),
        )
        if value is not None
    }

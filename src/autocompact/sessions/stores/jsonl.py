"""The JSONL backend: the existing session files (one user, one machine) behind the store protocol.

It wraps :class:`autocompact.sessions.store.SessionStore` (the file format, its crash safety
and its repairs stay there) and keeps the store semantics within one process: turn ids are
remembered for the life of the store object, the lease is held in memory, and the
compare-and-swap compares the number of compactions and clears this process has seen. For
several processes or machines, use SQLite or PostgreSQL (``autocompact sessions import`` moves
these files there).
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from collections.abc import Callable, Sequence
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


class JsonlStore:
    """Sessions as ``<id>.jsonl`` files in one directory.

    Args:
        root: the directory.
        lease_seconds: how long an in-process lease lasts.
        clock: seconds, for lease expiry.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        max_turn_bytes: int = DEFAULT_MAX_TURN_BYTES,
        clock: Callable[[], float] = time.time,
        **_ignored: Any,
    ) -> None:
        self.root = Path(root)
        self.max_turn_bytes = max_turn_bytes
        self._dir = JsonlDirectory(self.root)
        self.lease_seconds = lease_seconds
        self._clock = clock
        self._lock = threading.RLock()
        self._writers: dict[str, SessionWriter] = {}
        self._turn_ids: dict[str, dict[str, int]] = {}
        self._leases: dict[str, Lease] = {}

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

    def _writer(self, session_id: str) -> SessionWriter:
        writer = self._writers.get(session_id)
        if writer is None:
            try:
                _, writer = self._dir.open_for_append(session_id)
            except SessionFileError as exc:
                raise self._fail(exc, session_id) from None
            self._writers[session_id] = writer
        return writer

    # -- the protocol ------------------------------------------------------------------------

    def ensure(self, session_id: str, meta: JsonDict) -> None:
        """Create the file when missing."""
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
                raise self._fail(exc, session_id) from None
            self._writers[session_id] = writer

    def exists(self, session_id: str) -> bool:
        """Whether ``<id>.jsonl`` exists."""
        check_session_id(session_id, self.address)
        try:
            return self._dir.path_of(session_id).is_file()
        except SessionFileError:
            return False

    def load(self, session_id: str, *, after: Snapshot | None = None) -> Snapshot:
        """The file's history, one entry per message (read whole: ``after`` is not used)."""
        with self._lock:
            saved = self._open(session_id)
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
                epoch=sum(1 for c in saved.compactions if info_succeeded(c)),
                last_seq=len(entries),
                consecutive_failures=saved.consecutive_failures,
                calibration=saved.calibration,
                created=saved.header.created,
            )

    def append_turn(
        self,
        session_id: str,
        turn_id: str,
        messages: Sequence[Message],
        *,
        usage: JsonDict | None = None,
        calibration: JsonDict | None = None,
        owner: str | None = None,
    ) -> AppendResult:
        """Append the turn's messages (once per turn id within this process)."""
        with self._lock:
            seen = self._turn_ids.setdefault(session_id, {})
            if turn_id in seen:
                return AppendResult(seq=seen[turn_id], duplicate=True)
            check_turn_size(messages, self.max_turn_bytes, self.address, session_id)
            writer = self._writer(session_id)
            saved = self._open(session_id)
            try:
                writer.append_messages(messages)
                writer.record_state(
                    last_prompt_token_count=int((usage or {}).get("prompt_tokens", 0)),
                    consecutive_failures=saved.consecutive_failures,
                    calibration=calibration if calibration is not None else saved.calibration,
                )
            except SessionFileError as exc:
                raise self._fail(exc, session_id) from None
            seen[turn_id] = len(saved.history) + len(messages)
            return AppendResult(seq=seen[turn_id], duplicate=False)

    def get_turn(self, session_id: str, turn_id: str) -> Entry | None:
        """Not kept in the files: a retried turn is recognized by :meth:`append_turn` only."""
        return None

    def acquire_lease(self, session_id: str, owner: str, ttl: float | None = None) -> Lease | None:
        """An in-process lease."""
        with self._lock:
            now = self._clock()
            held = self._leases.get(session_id)
            if held is not None and held.owner != owner and held.expires > now:
                return None
            lease = Lease(
                session_id=session_id,
                owner=owner,
                token=secrets.token_hex(8),
                expires=now + (self.lease_seconds if ttl is None else ttl),
            )
            self._leases[session_id] = lease
            return lease

    def release_lease(self, lease: Lease) -> None:
        """Drop the lease if it is still this one."""
        with self._lock:
            if self._leases.get(lease.session_id) == lease:
                del self._leases[lease.session_id]

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
        with self._lock:
            current = self.load(base.session_id)
            writer = self._writer(base.session_id)
            try:
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
                    )
                    result = CommitResult(
                        committed=True, seq=current.last_seq + 1, consecutive_failures=after
                    )
            except SessionFileError as exc:
                raise self._fail(exc, base.session_id) from None
            if lease is not None:
                self.release_lease(lease)
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
        """Record a failed or no-op attempt and the breaker's new count."""
        with self._lock:
            saved = self._open(session_id)
            failures = saved.consecutive_failures + (1 if counted else 0)
            writer = self._writer(session_id)
            try:
                writer.record_compaction(info)
                writer.record_state(
                    last_prompt_token_count=saved.last_prompt_token_count,
                    consecutive_failures=failures,
                    calibration=saved.calibration,
                )
            except SessionFileError as exc:
                raise self._fail(exc, session_id) from None
            if lease is not None:
                self.release_lease(lease)
            return failures

    def clear(self, session_id: str, *, owner: str | None = None) -> None:
        """Record a clear."""
        with self._lock:
            try:
                self._writer(session_id).record_clear()
            except SessionFileError as exc:
                raise self._fail(exc, session_id) from None

    def entries(self, session_id: str) -> tuple[Entry, ...]:
        """Every message record and every successful compaction's history, in file order."""
        saved = self._open(session_id)
        out: list[Entry] = []
        try:
            lines = saved.path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise SessionStoreError(
                f"cannot read {saved.path}: {exc.strerror or exc}", store=self.address
            ) from None
        for line in lines[1 : saved.good_lines]:
            record = json.loads(line)
            seq = len(out) + 1
            if record.get("type") == "message":
                message = message_from_dict(record["message"])
                out.append(Entry(seq=seq, pos=seq, kind="turn", turn_id=None, messages=(message,)))
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
            counted = status.startswith("compression_failed") and info.get("trigger") in (
                "auto",
                "reactive",
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
        """Close the open files."""
        with self._lock:
            for writer in self._writers.values():
                writer.close()
            self._writers.clear()


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

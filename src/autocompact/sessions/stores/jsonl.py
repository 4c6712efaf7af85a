"""The JSONL backend: the session files (one user, one machine) behind the store protocol.

It wraps :class:`autocompact.sessions.store.SessionStore` (the file format, its crash safety
and its repairs stay there). Every write holds the session's lock file (``<id>.jsonl.lock``,
``fcntl.flock``) for its duration, so several processes of one machine sharing the directory
keep the store semantics: the file is read under the lock, a turn's id is written with its
messages (a retried turn is recognized by any process), the compaction lease is kept in
``<id>.jsonl.lease`` beside it, and the compare-and-swap compares the number of compactions and
clears in the file.

A turn's cost does not grow with the file: the store follows each session file it has read
(:class:`Tail`: its inode, how many bytes it has replayed, the state they left) and reads only
the lines appended since, which it replays onto that state; an append writes its lines without
reading the file back. A file that was replaced (a repair, a recreation) or whose new lines are
not the plain records a store writes is read whole again.

``flock`` locks are local to one machine (not reliable over NFS): for workers on several
machines, use PostgreSQL (``autocompact sessions import`` moves these files
there).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from autocompact.codec import message_from_dict
from autocompact.content import Message
from autocompact.errors import SessionFileError, SessionStoreError
from autocompact.sessions.durable import replace_file
from autocompact.sessions.locking import lock_session, unlock
from autocompact.sessions.records import secrets_to_redact
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
from autocompact.sessions.stores.follow import Tail, read_on, snapshot_of, tail_of
from autocompact.sessions.stores.front import Call, StoreFront

__all__ = ["JsonlStore"]

_T = TypeVar("_T")

_MAX_NAME_BYTES = 255  # a file name's limit on Linux, macOS and Windows file systems
_LONGEST_SUFFIX = ".jsonl.lease.tmp"  # the longest name the store gives a session's files

LOCK_WAIT_SECONDS = 30.0
"""How long a call waits for another process's write on the same session before giving up."""


class JsonlStore(StoreFront):
    """Sessions as ``<id>.jsonl`` files in one directory.

    Args:
        root: the directory.
        lease_seconds: how long a lease lasts.
        max_turn_bytes: the largest turn accepted (JSON bytes).
        clock: seconds, for lease expiry (every process sharing the directory must agree).
        lock_wait: seconds a call waits for the session's lock (another process's write, or a
            chat that holds the session) before it fails with a :class:`SessionStoreError`.
        redact: secrets (API keys) kept out of the files, besides the well-known credential
            shapes (every store's policy: :func:`~.base.redact_text`).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        max_turn_bytes: int = DEFAULT_MAX_TURN_BYTES,
        clock: Callable[[], float] = time.time,
        lock_wait: float = LOCK_WAIT_SECONDS,
        redact: Iterable[str] = (),
        **_ignored: Any,
    ) -> None:
        self.root = Path(root)
        self.max_turn_bytes = max_turn_bytes
        self._dir = JsonlDirectory(self.root, redact=redact)
        self._redact = secrets_to_redact(self._dir.redact)
        self.lease_seconds = lease_seconds
        self.lock_wait = lock_wait
        self._clock = clock
        self._lock = threading.RLock()
        self._tails: dict[str, Tail] = {}

    @property
    def address(self) -> str:
        """``jsonl://<directory>``."""
        return f"jsonl://{self.root}"

    def _check(self, session_id: str) -> None:
        """The store's id rules, and the file system's: ``<id>.jsonl.lease.tmp`` must be a
        file name (at most 255 bytes)."""
        check_session_id(session_id, self.address)
        size = len(session_id.encode("utf-8", "surrogatepass"))
        if size > _MAX_NAME_BYTES - len(_LONGEST_SUFFIX):
            raise SessionStoreError(
                f"the session id is {size} bytes long; the JSONL store keeps a session in files "
                f"named after it (<id>{_LONGEST_SUFFIX}: at most {_MAX_NAME_BYTES} bytes), so "
                f"use at most {_MAX_NAME_BYTES - len(_LONGEST_SUFFIX)} (a hash of a longer key "
                "works), or a SQL store",
                store=self.address,
                session_id=session_id[:40] + "…",
            )

    def _run(self, call: Call[_T]) -> _T:
        result: _T = getattr(self, f"_{call.name}")(**call.kwargs)
        return result

    # -- following the files -----------------------------------------------------------------

    def _fail(self, exc: SessionFileError, session_id: str | None = None) -> SessionStoreError:
        return SessionStoreError(str(exc), store=self.address, session_id=session_id)

    def _follow(self, session_id: str) -> Tail:
        """The session as the file is now: only the lines appended since the last read are
        read and replayed (the whole file when it is new to this store, was replaced, or its
        new lines are not plain store records).

        Read without the session's lock: a write is one ``write`` of whole lines, and a line
        still being written reads as an incomplete tail, which is left out (read whole, the
        turn it belongs to is not there yet).
        """
        self._check(session_id)
        with self._lock:
            tail = self._tails.get(session_id)
            if tail is not None and read_on(tail):
                return tail
            tail = self._read_whole(session_id)
            self._tails[session_id] = tail
            return tail

    def _read_whole(self, session_id: str) -> Tail:
        try:
            saved = self._dir.open(session_id)
            with saved.path.open("rb") as f:
                inode, data = os.fstat(f.fileno()).st_ino, f.read()
        except SessionFileError as exc:
            raise self._fail(exc, session_id) from None
        except OSError as exc:
            raise SessionStoreError(
                f"cannot read {self._dir.path_of(session_id)}: {exc.strerror or exc}",
                store=self.address,
                session_id=session_id,
            ) from None
        return tail_of(saved, inode, data)

    @contextlib.contextmanager
    def _writing(self, session_id: str) -> Iterator[tuple[Tail, SessionWriter]]:
        """The session as it is under its lock, and a writer; the lock is held until the end.

        A damaged file (an interrupted write) is first repaired by the session files' own
        repair (a ``.bak`` copy, then the readable lines only).
        """
        self._check(session_id)
        with self._lock:
            for attempt in range(2):
                tail = self._follow(session_id)
                try:
                    lock_fd = lock_session(tail.path, wait=self.lock_wait)
                except SessionFileError as exc:
                    raise self._fail(exc, session_id) from None
                tail = self._follow(session_id)  # now nobody writes: read to the end
                if tail.clean or attempt:
                    break
                unlock(lock_fd)
                try:
                    self._dir.open_for_append(session_id, wait=self.lock_wait)[1].close()
                except SessionFileError as exc:
                    raise self._fail(exc, session_id) from None
                self._tails.pop(session_id, None)
            try:
                writer = self._dir.writer_after(tail.path, tail.header, tail.state, lock_fd)
            except BaseException:
                unlock(lock_fd)
                raise
            try:
                yield tail, writer
            except SessionFileError as exc:
                raise self._fail(exc, session_id) from None
            finally:
                writer.close()  # releases the lock

    def _lease_path(self, tail: Tail) -> Path:
        return tail.path.with_name(tail.path.name + ".lease")

    def _held_lease(self, tail: Tail) -> Lease | None:
        """The lease recorded beside the file (read under the session's lock)."""
        try:
            data = json.loads(self._lease_path(tail).read_text(encoding="utf-8"))
            return Lease(
                session_id=tail.header.id,
                owner=str(data["owner"]),
                token=str(data["token"]),
                expires=float(data["expires"]),
            )
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            return None  # unreadable: as good as lapsed (it is rewritten on the next take)

    def _write_lease(self, tail: Tail, lease: Lease | None) -> None:
        path = self._lease_path(tail)
        try:
            if lease is None:
                path.unlink(missing_ok=True)
                return
            data = {"owner": lease.owner, "token": lease.token, "expires": lease.expires}
            replace_file(path, json.dumps(data).encode("utf-8"))
        except OSError as exc:
            raise SessionStoreError(
                f"cannot write the compaction lease {path}: {exc.strerror or exc}; check the "
                "directory's permissions",
                store=self.address,
                session_id=tail.header.id,
            ) from None

    def _release_in(self, tail: Tail, lease: Lease) -> None:
        held = self._held_lease(tail)
        if held is not None and held.token == lease.token:
            self._write_lease(tail, None)

    # -- the protocol (see :class:`~autocompact.sessions.stores.base.SessionStore`) ----------

    def _ensure(self, session_id: str, meta: JsonDict) -> None:
        """Create the file when missing (two processes creating it at once make one)."""
        with self._lock:
            if self._exists(session_id):
                return
            try:
                writer = self._dir.create(
                    provider=str(meta.get("provider", "unknown")),
                    model=str(meta.get("model", "unknown")),
                    context_window=int(meta.get("context_window", 0) or 1),
                    cwd=meta.get("cwd"),
                    window_source=meta.get("window_source"),
                    system_instruction=meta.get("system_instruction"),
                    base_url=meta.get("base_url"),
                    session_id=session_id,
                )
            except SessionFileError as exc:
                if self._exists(session_id):  # another process created it first
                    return
                raise self._fail(exc, session_id) from None
            writer.close()

    def _exists(self, session_id: str) -> bool:
        self._check(session_id)
        try:
            return self._dir.path_of(session_id).is_file()
        except SessionFileError:
            return False

    def _load(self, session_id: str, after: Snapshot | None) -> Snapshot:
        """The file's history, one entry per message (``after``: not needed, the store follows
        the file itself)."""
        with self._lock:
            tail = self._follow(session_id)
            if tail.snapshot is None:
                tail.snapshot = snapshot_of(tail)
            return tail.snapshot

    def _append_turn(
        self,
        session_id: str,
        turn_id: str,
        messages: Sequence[Message],
        usage: JsonDict | None,
        calibration: JsonDict | None,
        owner: str | None,
        growth: JsonDict | None,
    ) -> AppendResult:
        """Append the turn's messages with its id, once per id (checked under the lock)."""
        self._check(session_id)
        check_turn_size(messages, self.max_turn_bytes, self.address, session_id)
        with self._writing(session_id) as (tail, writer):
            state = tail.state
            if turn_id in state.turn_ids:
                return AppendResult(seq=state.turn_ids[turn_id], duplicate=True)
            seq = len(state.history) + 1
            # The file keeps one count: the provider's plus the tokens added after it (the
            # reply), so a worker reading it back estimates what the writer would have.
            counted = (usage or {}).get("prompt_tokens", 0) or 0
            since = (usage or {}).get("since", 0) or 0 if counted else 0
            with writer.batch():  # the turn and the state after it: one write, one fsync
                writer.append_messages(messages, turn_id=turn_id)
                writer.record_state(
                    last_prompt_token_count=int(counted) + int(since),
                    consecutive_failures=state.consecutive_failures,
                    calibration=calibration if calibration is not None else state.calibration,
                    hold_until=state.hold_until,
                    growth=growth if growth is not None else state.growth,
                )
            return AppendResult(seq=seq, duplicate=False)

    def _get_turn(self, session_id: str, turn_id: str) -> Entry | None:
        """The messages stored under ``turn_id`` (live or compacted away), if any."""
        tail = self._follow(session_id)
        if turn_id not in tail.state.turn_ids:
            return None
        messages = tuple(
            message_from_dict(record["message"])
            for record in self._records(tail)
            if record.get("type") == "message" and record.get("turn_id") == turn_id
        )
        seq = tail.state.turn_ids[turn_id]
        return Entry(seq=seq, pos=seq, kind="turn", turn_id=turn_id, messages=messages)

    def _acquire_lease(self, session_id: str, owner: str, ttl: float | None) -> Lease | None:
        """Take the lease (``<id>.jsonl.lease``) when it is free, lapsed or ``owner``'s."""
        with self._writing(session_id) as (tail, _):
            now = self._clock()
            held = self._held_lease(tail)
            if held is not None and held.owner != owner and held.expires > now:
                return None
            lease = Lease(
                session_id=session_id,
                owner=owner,
                token=secrets.token_hex(8),
                expires=now + (self.lease_seconds if ttl is None else ttl),
            )
            self._write_lease(tail, lease)
            return lease

    def _release_lease(self, lease: Lease) -> None:
        with self._writing(lease.session_id) as (tail, _):
            self._release_in(tail, lease)

    def _commit_compaction(
        self,
        base: Snapshot,
        history: Sequence[Message],
        info: JsonDict,
        lease: Lease | None,
        owner: str | None,
        breaker: BreakerEffect,
        hold_until: int | None,
    ) -> CommitResult:
        """Record the compaction with the history it left plus the turns appended since."""
        with self._writing(base.session_id) as (tail, writer):
            current = snapshot_of(tail)
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
                self._release_in(tail, lease)
            return result

    def _record_attempt(
        self,
        session_id: str,
        info: JsonDict,
        counted: bool,
        epoch: int,
        lease: Lease | None,
        owner: str | None,
        hold_until: int | None,
    ) -> int:
        """Record a failed or no-op attempt, the breaker's new count and its hold."""
        with self._writing(session_id) as (tail, writer):
            state = tail.state
            failures = state.consecutive_failures + (1 if counted else 0)
            writer.record_compaction(info)
            writer.record_state(
                last_prompt_token_count=state.last_prompt_token_count,
                consecutive_failures=failures,
                calibration=state.calibration,
                hold_until=hold_until,
                growth=state.growth,
            )
            if lease is not None:
                self._release_in(tail, lease)
            return failures

    def _record_outgrown(
        self, session_id: str, info: JsonDict, epoch: int, hold_until: int, owner: str | None
    ) -> bool:
        """Record an ``outgrown`` attempt, one more failure and the hold, once per epoch."""
        with self._writing(session_id) as (tail, writer):
            state = tail.state
            if any(
                c.get("status") == "outgrown" and c.get("epoch") == epoch for c in state.compactions
            ):
                return False
            writer.record_compaction({**info, "status": "outgrown", "epoch": epoch})
            writer.record_state(
                last_prompt_token_count=state.last_prompt_token_count,
                consecutive_failures=state.consecutive_failures + 1,
                calibration=state.calibration,
                hold_until=hold_until,
                growth=state.growth,
            )
            return True

    def _record_model(
        self,
        session_id: str,
        provider: str,
        model: str,
        context_window: int,
        window_source: str | None,
    ) -> None:
        """Write the file's ``model`` record (what a chat's ``/model`` writes without a store)."""
        with self._writing(session_id) as (_, writer):
            writer.record_model(
                provider=provider,
                model=model,
                context_window=context_window,
                window_source=window_source,
            )

    def _clear(self, session_id: str, owner: str | None) -> None:
        with self._writing(session_id) as (_, writer):
            writer.record_clear()

    def _records(self, tail: Tail) -> list[JsonDict]:
        """The file's readable records after its header."""
        try:
            lines = tail.path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise SessionStoreError(
                f"cannot read {tail.path}: {exc.strerror or exc}", store=self.address
            ) from None
        return [json.loads(line) for line in lines[1 : tail.lines] if line.strip()]

    def _entries(self, session_id: str) -> tuple[Entry, ...]:
        """Every message record and every successful compaction's history, in file order."""
        out: list[Entry] = []
        for record in self._records(self._follow(session_id)):
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

    def _attempts(self, session_id: str) -> tuple[Attempt, ...]:
        """Every recorded compaction attempt."""
        failures = 0
        out: list[Attempt] = []
        for i, info in enumerate(self._follow(session_id).state.compactions):
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

    def _list_sessions(self) -> list[SessionListing]:
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
        """Forget the files followed (every call opens and closes the files it needs)."""
        with self._lock:
            self._tails.clear()

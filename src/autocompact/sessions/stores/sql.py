"""The store rules, written once for every SQL backend: schema, appends, lease, compare-and-swap.

A backend (:mod:`.sqlite`, :mod:`.postgres`) only says how to open a transaction, how to lock a
session's row for the rest of it, and how to turn its driver's errors into
:class:`~autocompact.errors.SessionStoreError`. Everything else is here:

- **schema**: ``autocompact_schema`` holds the version; :data:`MIGRATIONS` upgrades version
  ``n`` to ``n + 1`` in order, inside one transaction, on first use. A database written by a
  newer autocompact is refused (never written to).
- **append**: one transaction locks the session row, returns the existing seq when the turn id is
  already there (idempotent), else inserts the entry at ``last_seq + 1``.
- **lease**: a row lock, then the lease is granted when free, expired, or already ours.
- **commit**: compare-and-swap on the session's ``epoch``: when it is still the snapshot's,
  every live entry up to the snapshot's ``last_seq`` is marked replaced by the new summary
  entry (placed at that ``last_seq``, so later turns follow it), the epoch moves on and the
  breaker resets; otherwise the attempt is recorded as ``superseded`` and the count is left alone.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from autocompact.content import Message
from autocompact.errors import SessionStoreError
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
    StepHook,
    check_session_id,
    check_turn_size,
    decode_messages,
    encode_messages,
)

__all__ = ["LATEST_SCHEMA", "MIGRATIONS", "Cursor", "SqlStore"]

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # version 0 -> 1: sessions, their entries and their compaction attempts.
    (
        """CREATE TABLE ac_sessions (
            id TEXT PRIMARY KEY,
            meta TEXT NOT NULL,
            created TEXT NOT NULL,
            updated TEXT NOT NULL,
            epoch BIGINT NOT NULL DEFAULT 0,
            last_seq BIGINT NOT NULL DEFAULT 0,
            failures BIGINT NOT NULL DEFAULT 0,
            calibration TEXT,
            usage TEXT,
            lease_owner TEXT,
            lease_token TEXT,
            lease_expires DOUBLE PRECISION
        )""",
        """CREATE TABLE ac_entries (
            session_id TEXT NOT NULL REFERENCES ac_sessions (id),
            seq BIGINT NOT NULL,
            pos BIGINT NOT NULL,
            kind TEXT NOT NULL,
            turn_id TEXT,
            owner TEXT,
            messages TEXT NOT NULL,
            usage TEXT,
            replaced_by BIGINT,
            created TEXT NOT NULL,
            PRIMARY KEY (session_id, seq)
        )""",
        "CREATE UNIQUE INDEX ac_entries_turn ON ac_entries (session_id, turn_id)",
        "CREATE INDEX ac_entries_live ON ac_entries (session_id, replaced_by, pos)",
        """CREATE TABLE ac_attempts (
            session_id TEXT NOT NULL REFERENCES ac_sessions (id),
            seq BIGINT NOT NULL,
            owner TEXT,
            trigger TEXT NOT NULL,
            status TEXT NOT NULL,
            counted INTEGER NOT NULL,
            failures_after BIGINT NOT NULL,
            epoch BIGINT NOT NULL,
            summary_seq BIGINT,
            info TEXT NOT NULL,
            created TEXT NOT NULL,
            PRIMARY KEY (session_id, seq)
        )""",
    ),
    # version 1 -> 2: the breaker's hold (SPEC §10.2) lives with the session too.
    ("ALTER TABLE ac_sessions ADD COLUMN hold_until BIGINT",),
)
"""``MIGRATIONS[n]``: the statements that upgrade a version-``n`` database to ``n + 1``."""

LATEST_SCHEMA = len(MIGRATIONS)

_EFFECT_CODES = {"add": 1, "keep": 0, "reset": -1}
_ENTRY_COLUMNS = "seq, pos, kind, turn_id, owner, messages, usage, replaced_by, created"


class Cursor(Protocol):
    """The part of a DB-API cursor the rules use (``?`` placeholders in every statement)."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> Any: ...


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _dump(value: JsonDict | None) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"), default=str)


def _load(text: str | None) -> Any:
    return None if text is None else json.loads(text)


class SqlStore(ABC):
    """The rules above; subclasses provide the transactions.

    Args:
        address: the redacted address (errors and listings show it).
        lease_seconds: how long a lease lasts.
        max_turn_bytes: the largest turn accepted (JSON bytes).
        clock: seconds, for lease expiry (every worker sharing a store must agree on it;
            ``time.time`` does across machines with synchronized clocks).
        on_step: called inside each write before it commits (tracing, fault injection).
    """

    def __init__(
        self,
        address: str,
        *,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        max_turn_bytes: int = DEFAULT_MAX_TURN_BYTES,
        clock: Callable[[], float] = time.time,
        on_step: StepHook | None = None,
    ) -> None:
        self._address = address
        self.lease_seconds = lease_seconds
        self.max_turn_bytes = max_turn_bytes
        self._clock = clock
        self._on_step = on_step
        self._schema_checked = False

    # -- what a backend provides -------------------------------------------------------------

    @abstractmethod
    def _transaction(self, *, write: bool) -> contextlib.AbstractContextManager[Cursor]:
        """A transaction (committed on success, rolled back on error); driver errors become
        :class:`SessionStoreError`."""

    @abstractmethod
    def _lock_schema(self, cur: Cursor) -> None:
        """Serialize migrations between processes (inside the write transaction)."""

    @abstractmethod
    def _table_exists(self, cur: Cursor, name: str) -> bool:
        """Whether a table exists."""

    lock_suffix = ""
    """Appended to the session-row SELECT of a write (``" FOR UPDATE"`` where rows lock)."""

    @property
    def address(self) -> str:
        """The store's address, password replaced by ``***``."""
        return self._address

    @abstractmethod
    def close(self) -> None:
        """Release connections."""

    def __enter__(self) -> SqlStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- schema ------------------------------------------------------------------------------

    def _ensure_schema(self) -> None:
        if self._schema_checked:
            return
        with self._transaction(write=False) as cur:
            version = self._version(cur)
        if version < LATEST_SCHEMA:
            with self._transaction(write=True) as cur:
                self._lock_schema(cur)
                cur.execute(
                    "CREATE TABLE IF NOT EXISTS autocompact_schema "
                    "(id INTEGER PRIMARY KEY, version INTEGER NOT NULL)"
                )
                version = self._version(cur)
                self._check_not_newer(version)
                for statements in MIGRATIONS[version:]:
                    for statement in statements:
                        cur.execute(statement)
                if version == 0:
                    cur.execute(
                        "INSERT INTO autocompact_schema (id, version) VALUES (1, ?)",
                        (LATEST_SCHEMA,),
                    )
                elif version < LATEST_SCHEMA:
                    cur.execute(
                        "UPDATE autocompact_schema SET version = ? WHERE id = 1", (LATEST_SCHEMA,)
                    )
        self._check_not_newer(version)
        self._schema_checked = True

    def _version(self, cur: Cursor) -> int:
        if not self._table_exists(cur, "autocompact_schema"):
            return 0
        cur.execute("SELECT version FROM autocompact_schema WHERE id = 1")
        row = cur.fetchone()
        return 0 if row is None else int(row[0])

    def _check_not_newer(self, version: int) -> None:
        if version > LATEST_SCHEMA:
            raise SessionStoreError(
                f"the store was written by a newer autocompact (schema version {version}; this "
                f"one reads up to {LATEST_SCHEMA}); upgrade autocompact "
                "(pip install -U autocompact) to use it",
                store=self._address,
            )

    @contextlib.contextmanager
    def _write(self, session_id: str) -> Iterator[tuple[Cursor, tuple[Any, ...]]]:
        """A write transaction with the session's row locked: yields the cursor and the row
        ``(epoch, last_seq, failures, lease_owner, lease_token, lease_expires)``."""
        self._ensure_schema()
        with self._transaction(write=True) as cur:
            cur.execute(
                "SELECT epoch, last_seq, failures, lease_owner, lease_token, lease_expires "
                "FROM ac_sessions WHERE id = ?" + self.lock_suffix,
                (session_id,),
            )
            row = cur.fetchone()
            if row is None:
                raise self._missing(session_id)
            yield cur, tuple(row)

    def _missing(self, session_id: str) -> SessionStoreError:
        return SessionStoreError(
            f"no session {session_id!r:.80} in {self._address}; "
            "`autocompact sessions list --store ...` shows the ids",
            store=self._address,
            session_id=session_id,
        )

    def _step(self, name: str) -> None:
        if self._on_step is not None:
            self._on_step(name)

    # -- sessions ----------------------------------------------------------------------------

    def ensure(self, session_id: str, meta: JsonDict) -> None:
        """Create the session if it does not exist (``meta`` is kept from the first call)."""
        check_session_id(session_id, self._address)
        self._ensure_schema()
        now = _now_iso()
        with self._transaction(write=True) as cur:
            cur.execute(
                "INSERT INTO ac_sessions (id, meta, created, updated) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (id) DO NOTHING",
                (session_id, _dump(meta), now, now),
            )

    def exists(self, session_id: str) -> bool:
        """Whether the session exists."""
        check_session_id(session_id, self._address)
        self._ensure_schema()
        with self._transaction(write=False) as cur:
            cur.execute("SELECT 1 FROM ac_sessions WHERE id = ?", (session_id,))
            return cur.fetchone() is not None

    def load(self, session_id: str, *, after: Snapshot | None = None) -> Snapshot:
        """The live history and shared state, read by one statement (one consistent view).

        With ``after`` (an earlier snapshot of this session) and no summary or clear since,
        only the entries written after it are read and decoded.
        """
        check_session_id(session_id, self._address)
        self._ensure_schema()
        snapshot = self._read(session_id, after)
        if snapshot is None:  # the epoch moved on since ``after``: read everything
            snapshot = self._read(session_id, None)
        assert snapshot is not None
        return snapshot

    def _read(self, session_id: str, after: Snapshot | None) -> Snapshot | None:
        since, epoch = (after.last_seq, after.epoch) if after is not None else (-1, -1)
        columns = ", ".join(f"e.{c.strip()}" for c in _ENTRY_COLUMNS.split(","))
        with self._transaction(write=False) as cur:
            cur.execute(
                "SELECT s.meta, s.created, s.updated, s.epoch, s.last_seq, s.failures, "
                f"s.calibration, s.usage, s.hold_until, {columns} FROM ac_sessions s "
                "LEFT JOIN ac_entries e ON e.session_id = s.id AND e.replaced_by IS NULL "
                "AND e.seq > ? AND (? < 0 OR s.epoch = ?) "
                "WHERE s.id = ? ORDER BY e.pos, e.seq",
                (since, epoch, epoch, session_id),
            )
            rows = cur.fetchall()
        if not rows:
            raise self._missing(session_id)
        head = rows[0][:9]
        meta, created, updated, epoch_now, last_seq, failures, calibration, usage, hold = head
        if after is not None and int(epoch_now) != after.epoch:
            return None
        new = tuple(_entry(r[9:]) for r in rows if r[9] is not None)
        return Snapshot(
            session_id=session_id,
            meta=after.meta if after is not None else _load(meta) or {},
            entries=(*after.entries, *new) if after is not None else new,
            epoch=int(epoch_now),
            last_seq=int(last_seq),
            consecutive_failures=int(failures),
            calibration=_load(calibration),
            usage=_load(usage),
            hold_until=None if hold is None else int(hold),
            created=created,
            updated=updated,
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
        """Append one turn once (see the module docstring); durable when this returns."""
        check_session_id(session_id, self._address)
        if not isinstance(turn_id, str) or not turn_id or len(turn_id) > 256:
            raise SessionStoreError(
                f"a turn id must be a string of 1–256 characters, not {turn_id!r:.40}",
                store=self._address,
                session_id=session_id,
            )
        payload = check_turn_size(messages, self.max_turn_bytes, self._address, session_id)
        with self._write(session_id) as (cur, row):
            cur.execute(
                "SELECT seq FROM ac_entries WHERE session_id = ? AND turn_id = ?",
                (session_id, turn_id),
            )
            found = cur.fetchone()
            if found is not None:
                return AppendResult(seq=int(found[0]), duplicate=True)
            seq = int(row[1]) + 1
            now = _now_iso()
            cur.execute(
                f"INSERT INTO ac_entries ({_ENTRY_COLUMNS}, session_id) "
                "VALUES (?, ?, 'turn', ?, ?, ?, ?, NULL, ?, ?)",
                (seq, seq, turn_id, owner, payload, _dump(usage), now, session_id),
            )
            cur.execute(
                "UPDATE ac_sessions SET last_seq = ?, updated = ?, usage = ?, "
                "calibration = COALESCE(?, calibration) WHERE id = ?",
                (seq, now, _dump(usage), _dump(calibration), session_id),
            )
            self._step("append:written")
        return AppendResult(seq=seq, duplicate=False)

    def get_turn(self, session_id: str, turn_id: str) -> Entry | None:
        """The turn stored under ``turn_id`` (live or replaced), if any."""
        check_session_id(session_id, self._address)
        self._ensure_schema()
        with self._transaction(write=False) as cur:
            cur.execute(
                f"SELECT {_ENTRY_COLUMNS} FROM ac_entries WHERE session_id = ? AND turn_id = ?",
                (session_id, turn_id),
            )
            row = cur.fetchone()
        return None if row is None else _entry(row)

    # -- the compaction lease ----------------------------------------------------------------

    def acquire_lease(self, session_id: str, owner: str, ttl: float | None = None) -> Lease | None:
        """Take the compaction lease when it is free, expired or already ``owner``'s."""
        check_session_id(session_id, self._address)
        now = self._clock()
        with self._write(session_id) as (cur, row):
            holder, expires = row[3], row[5]
            if holder is not None and holder != owner and expires is not None and expires > now:
                return None
            lease = Lease(
                session_id=session_id,
                owner=owner,
                token=secrets.token_hex(8),
                expires=now + (self.lease_seconds if ttl is None else ttl),
            )
            cur.execute(
                "UPDATE ac_sessions SET lease_owner = ?, lease_token = ?, lease_expires = ? "
                "WHERE id = ?",
                (owner, lease.token, lease.expires, session_id),
            )
            self._step("lease:written")
        return lease

    def release_lease(self, lease: Lease) -> None:
        """Give the lease back (nothing happens when it lapsed and someone else holds it)."""
        self._ensure_schema()
        with self._transaction(write=True) as cur:
            _release(cur, lease)

    # -- compare-and-swap commit -------------------------------------------------------------

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
        """Replace ``base``'s live entries by ``history`` when the epoch is still ``base``'s.

        ``breaker``: what the committed attempt does to the breaker's count (an effective
        summary resets it; an ineffective one adds one); ``hold_until``: the session's hold after
        it. A superseded attempt changes neither.
        """
        payload = encode_messages(history)
        trigger = str(info.get("trigger", ""))
        with self._write(base.session_id) as (cur, row):
            epoch, last_seq, failures = int(row[0]), int(row[1]), int(row[2])
            now = _now_iso()
            if epoch != base.epoch:
                seq = last_seq + 1
                cur.execute(
                    "INSERT INTO ac_attempts (session_id, seq, owner, trigger, status, counted, "
                    "failures_after, epoch, summary_seq, info, created) "
                    "VALUES (?, ?, ?, ?, 'superseded', 0, ?, ?, NULL, ?, ?)",
                    (base.session_id, seq, owner, trigger, failures, base.epoch, _dump(info), now),
                )
                cur.execute(
                    "UPDATE ac_sessions SET last_seq = ?, updated = ? WHERE id = ?",
                    (seq, now, base.session_id),
                )
                if lease is not None:
                    _release(cur, lease)
                self._step("commit:superseded")
                return CommitResult(committed=False, seq=seq, consecutive_failures=failures)
            summary_seq = last_seq + 1
            after = {"reset": 0, "add": failures + 1, "keep": failures}[breaker]
            usage = {"prompt_tokens": int(info.get("new_token_count", 0) or 0), "since": 0}
            cur.execute(
                f"INSERT INTO ac_entries ({_ENTRY_COLUMNS}, session_id) "
                "VALUES (?, ?, 'summary', NULL, ?, ?, ?, NULL, ?, ?)",
                (
                    summary_seq,
                    base.last_seq,
                    owner,
                    payload,
                    _dump(usage),
                    now,
                    base.session_id,
                ),
            )
            cur.execute(
                "UPDATE ac_entries SET replaced_by = ? WHERE session_id = ? "
                "AND replaced_by IS NULL AND seq <= ?",
                (summary_seq, base.session_id, base.last_seq),
            )
            cur.execute(
                "INSERT INTO ac_attempts (session_id, seq, owner, trigger, status, counted, "
                "failures_after, epoch, summary_seq, info, created) "
                "VALUES (?, ?, ?, ?, 'compressed', ?, ?, ?, ?, ?, ?)",
                (
                    base.session_id,
                    summary_seq + 1,
                    owner,
                    trigger,
                    _EFFECT_CODES[breaker],
                    after,
                    base.epoch,
                    summary_seq,
                    _dump(info),
                    now,
                ),
            )
            cur.execute(
                "UPDATE ac_sessions SET epoch = epoch + 1, last_seq = ?, failures = ?, "
                "hold_until = ?, updated = ? WHERE id = ?",
                (summary_seq + 1, after, hold_until, now, base.session_id),
            )
            if lease is not None:
                _release(cur, lease)
            self._step("commit:written")
        return CommitResult(committed=True, seq=summary_seq, consecutive_failures=after)

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
        """Record an attempt that did not commit; a counted one adds one to the breaker.

        ``hold_until``: the session's hold after it (see ``compaction.accounting``).
        """
        with self._write(session_id) as (cur, row):
            last_seq, failures = int(row[1]), int(row[2]) + (1 if counted else 0)
            seq, now = last_seq + 1, _now_iso()
            cur.execute(
                "INSERT INTO ac_attempts (session_id, seq, owner, trigger, status, counted, "
                "failures_after, epoch, summary_seq, info, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)",
                (
                    session_id,
                    seq,
                    owner,
                    str(info.get("trigger", "")),
                    str(info.get("status", "")),
                    1 if counted else 0,
                    failures,
                    epoch,
                    _dump(info),
                    now,
                ),
            )
            cur.execute(
                "UPDATE ac_sessions SET last_seq = ?, failures = ?, hold_until = ?, updated = ? "
                "WHERE id = ?",
                (seq, failures, hold_until, now, session_id),
            )
            if lease is not None:
                _release(cur, lease)
            self._step("attempt:written")
        return failures

    def clear(self, session_id: str, *, owner: str | None = None) -> None:
        """Replace the live history by an empty one; the breaker and usage start over."""
        with self._write(session_id) as (cur, row):
            seq, now = int(row[1]) + 1, _now_iso()
            cur.execute(
                f"INSERT INTO ac_entries ({_ENTRY_COLUMNS}, session_id) "
                "VALUES (?, ?, 'clear', NULL, ?, '[]', NULL, NULL, ?, ?)",
                (seq, seq - 1, owner, now, session_id),
            )
            cur.execute(
                "UPDATE ac_entries SET replaced_by = ? WHERE session_id = ? "
                "AND replaced_by IS NULL AND seq < ?",
                (seq, session_id, seq),
            )
            cur.execute(
                "UPDATE ac_sessions SET epoch = epoch + 1, last_seq = ?, failures = 0, "
                "hold_until = NULL, usage = NULL, updated = ? WHERE id = ?",
                (seq, now, session_id),
            )

    # -- reading everything ------------------------------------------------------------------

    def entries(self, session_id: str) -> tuple[Entry, ...]:
        """Every entry in write order (replaced ones included)."""
        check_session_id(session_id, self._address)
        self._ensure_schema()
        with self._transaction(write=False) as cur:
            cur.execute(
                f"SELECT {_ENTRY_COLUMNS} FROM ac_entries WHERE session_id = ? ORDER BY seq",
                (session_id,),
            )
            return tuple(_entry(r) for r in cur.fetchall())

    def attempts(self, session_id: str) -> tuple[Attempt, ...]:
        """Every compaction attempt in write order."""
        check_session_id(session_id, self._address)
        self._ensure_schema()
        with self._transaction(write=False) as cur:
            cur.execute(
                "SELECT seq, owner, trigger, status, counted, failures_after, epoch, "
                "summary_seq, info, created FROM ac_attempts WHERE session_id = ? ORDER BY seq",
                (session_id,),
            )
            return tuple(
                Attempt(
                    seq=int(r[0]),
                    owner=r[1],
                    trigger=r[2],
                    status=r[3],
                    counted=int(r[4]) > 0,
                    reset=int(r[4]) < 0,
                    failures_after=int(r[5]),
                    epoch=int(r[6]),
                    summary_seq=None if r[7] is None else int(r[7]),
                    info=_load(r[8]) or {},
                    created=r[9],
                )
                for r in cur.fetchall()
            )

    def list_sessions(self) -> list[SessionListing]:
        """Every session, most recently updated first."""
        self._ensure_schema()
        with self._transaction(write=False) as cur:
            cur.execute(
                "SELECT s.id, s.meta, s.created, s.updated, "
                "(SELECT COUNT(*) FROM ac_entries e WHERE e.session_id = s.id "
                "AND e.kind = 'turn'), "
                "(SELECT COUNT(*) FROM ac_entries e WHERE e.session_id = s.id "
                "AND e.kind = 'summary') "
                "FROM ac_sessions s ORDER BY s.updated DESC, s.id"
            )
            return [
                SessionListing(
                    session_id=r[0],
                    meta=_load(r[1]) or {},
                    created=r[2],
                    updated=r[3],
                    turns=int(r[4]),
                    compactions=int(r[5]),
                )
                for r in cur.fetchall()
            ]


def _release(cur: Cursor, lease: Lease) -> None:
    cur.execute(
        "UPDATE ac_sessions SET lease_owner = NULL, lease_token = NULL, lease_expires = NULL "
        "WHERE id = ? AND lease_token = ?",
        (lease.session_id, lease.token),
    )


def _entry(row: Sequence[Any]) -> Entry:
    seq, pos, kind, turn_id, owner, messages, usage, replaced_by, created = row
    return Entry(
        seq=int(seq),
        pos=int(pos),
        kind=kind,
        turn_id=turn_id,
        messages=decode_messages(messages),
        usage=_load(usage),
        replaced_by=None if replaced_by is None else int(replaced_by),
        owner=owner,
        created=created,
    )

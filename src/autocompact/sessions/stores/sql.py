"""The store rules, written once for every SQL backend: schema, appends, lease, compare-and-swap.

The rules are sans-I/O: each operation is a **plan**, a generator that yields the
:class:`Query` objects it needs run (SQL with ``?`` placeholders, and whether to fetch one row,
all rows or none) and receives their results. :class:`SqlStore` runs plans on a DB-API cursor,
:class:`AsyncSqlStore` awaits them on an async cursor, so the synchronous and the asyncio stores
send the very same statements in the very same order. A backend (:mod:`.sqlite`,
:mod:`.postgres`) only says how to open a transaction, the SQL that tells whether a table exists
and that serializes migrations, how a session's row is locked for the rest of a transaction, and
how its driver's errors become :class:`~autocompact.errors.SessionStoreError`. The rules:

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
- **outgrown**: an ``outgrown`` attempt adds one and sets the hold, once per epoch.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Any, Generic, Protocol, TypeAlias, TypeVar

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
from autocompact.textsafe import dumps

__all__ = [
    "LATEST_SCHEMA",
    "MIGRATIONS",
    "AsyncCursor",
    "AsyncSqlStore",
    "Cursor",
    "Fetch",
    "Op",
    "Plan",
    "Query",
    "SqlRules",
    "SqlStore",
    "arun_plan",
    "run_plan",
]

_T = TypeVar("_T")

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


class AsyncCursor(Protocol):
    """The same, awaited (a psycopg ``AsyncCursor`` behind a ``?`` to ``%s`` wrapper)."""

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> Any: ...

    async def fetchone(self) -> Any: ...

    async def fetchall(self) -> Any: ...


class Fetch(Enum):
    """What a plan wants back from a statement."""

    NONE = "none"
    ONE = "one"
    ALL = "all"


@dataclass(frozen=True, slots=True)
class Query:
    """One statement a plan asks its runner to execute (``?`` placeholders)."""

    sql: str
    params: tuple[Any, ...] = ()
    fetch: Fetch = Fetch.NONE


Plan: TypeAlias = Generator[Query, Any, _T]
"""An operation's rules: yields statements, receives their rows, returns the result."""


@dataclass(frozen=True, slots=True)
class Op(Generic[_T]):
    """A plan and the kind of transaction it runs in (``write``: the session row is locked)."""

    plan: Plan[_T]
    write: bool


def run_plan(plan: Plan[_T], cur: Cursor) -> _T:
    """Run a plan's statements on a cursor, inside the caller's transaction."""
    result: Any = None
    try:
        while True:
            query = plan.send(result)
            cur.execute(query.sql, query.params)
            if query.fetch is Fetch.ONE:
                result = cur.fetchone()
            elif query.fetch is Fetch.ALL:
                result = cur.fetchall()
            else:
                result = None
    except StopIteration as stop:
        value: _T = stop.value
        return value
    finally:
        plan.close()


async def arun_plan(plan: Plan[_T], cur: AsyncCursor) -> _T:
    """:func:`run_plan`, each statement awaited (the event loop runs on meanwhile)."""
    result: Any = None
    try:
        while True:
            query = plan.send(result)
            await cur.execute(query.sql, query.params)
            if query.fetch is Fetch.ONE:
                result = await cur.fetchone()
            elif query.fetch is Fetch.ALL:
                result = await cur.fetchall()
            else:
                result = None
    except StopIteration as stop:
        value: _T = stop.value
        return value
    finally:
        plan.close()


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _dump(value: JsonDict | None) -> str | None:
    return None if value is None else dumps(value, default=str)  # textsafe: U+FFFD rule


def _load(text: str | None) -> Any:
    return None if text is None else json.loads(text)


class SqlRules:
    """The rules above as plans; :class:`SqlStore` and :class:`AsyncSqlStore` run them.

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

    table_exists_sql = ""
    """A statement with one ``?`` (the table's name) that returns a row when the table exists."""

    schema_lock_sql: str | None = None
    """A statement that serializes migrations between processes inside the write transaction
    (``None``: the write transaction already does)."""

    lock_suffix = ""
    """Appended to the session-row SELECT of a write (``" FOR UPDATE"`` where rows lock)."""

    @property
    def address(self) -> str:
        """The store's address, password replaced by ``***``."""
        return self._address

    # -- schema ------------------------------------------------------------------------------

    def _version_plan(self) -> Plan[int]:
        found = yield Query(self.table_exists_sql, ("autocompact_schema",), Fetch.ONE)
        if found is None:
            return 0
        row = yield Query("SELECT version FROM autocompact_schema WHERE id = 1", (), Fetch.ONE)
        return 0 if row is None else int(row[0])

    def _migrate_plan(self) -> Plan[int]:
        """Upgrade to :data:`LATEST_SCHEMA` (in a write transaction); returns the version found."""
        if self.schema_lock_sql is not None:
            yield Query(self.schema_lock_sql)
        yield Query(
            "CREATE TABLE IF NOT EXISTS autocompact_schema "
            "(id INTEGER PRIMARY KEY, version INTEGER NOT NULL)"
        )
        version = yield from self._version_plan()
        self._check_not_newer(version)
        for statements in MIGRATIONS[version:]:
            for statement in statements:
                yield Query(statement)
        if version == 0:
            yield Query(
                "INSERT INTO autocompact_schema (id, version) VALUES (1, ?)", (LATEST_SCHEMA,)
            )
        elif version < LATEST_SCHEMA:
            yield Query("UPDATE autocompact_schema SET version = ? WHERE id = 1", (LATEST_SCHEMA,))
        return version

    def _check_not_newer(self, version: int) -> None:
        if version > LATEST_SCHEMA:
            raise SessionStoreError(
                f"the store was written by a newer autocompact (schema version {version}; this "
                f"one reads up to {LATEST_SCHEMA}); upgrade autocompact "
                "(pip install -U autocompact) to use it",
                store=self._address,
            )

    def _lock_row(self, session_id: str) -> Plan[tuple[Any, ...]]:
        """Lock the session's row for the rest of the write; returns
        ``(epoch, last_seq, failures, lease_owner, lease_token, lease_expires)``."""
        row = yield Query(
            "SELECT epoch, last_seq, failures, lease_owner, lease_token, lease_expires "
            "FROM ac_sessions WHERE id = ?" + self.lock_suffix,
            (session_id,),
            Fetch.ONE,
        )
        if row is None:
            raise self._missing(session_id)
        return tuple(row)

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

    def _ensure_op(self, session_id: str, meta: JsonDict) -> Op[None]:
        check_session_id(session_id, self._address)
        return Op(self._ensure_plan(session_id, meta), write=True)

    def _ensure_plan(self, session_id: str, meta: JsonDict) -> Plan[None]:
        now = _now_iso()
        yield Query(
            "INSERT INTO ac_sessions (id, meta, created, updated) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (id) DO NOTHING",
            (session_id, _dump(meta), now, now),
        )

    def _exists_op(self, session_id: str) -> Op[bool]:
        check_session_id(session_id, self._address)
        return Op(self._exists_plan(session_id), write=False)

    def _exists_plan(self, session_id: str) -> Plan[bool]:
        row = yield Query("SELECT 1 FROM ac_sessions WHERE id = ?", (session_id,), Fetch.ONE)
        return row is not None

    def _load_op(self, session_id: str, after: Snapshot | None) -> Op[Snapshot]:
        check_session_id(session_id, self._address)
        return Op(self._load_plan(session_id, after), write=False)

    def _load_plan(self, session_id: str, after: Snapshot | None) -> Plan[Snapshot]:
        snapshot = yield from self._read_plan(session_id, after)
        if snapshot is None:  # the epoch moved on since ``after``: read everything
            snapshot = yield from self._read_plan(session_id, None)
        assert snapshot is not None
        return snapshot

    def _read_plan(self, session_id: str, after: Snapshot | None) -> Plan[Snapshot | None]:
        since, epoch = (after.last_seq, after.epoch) if after is not None else (-1, -1)
        columns = ", ".join(f"e.{c.strip()}" for c in _ENTRY_COLUMNS.split(","))
        rows = yield Query(
            "SELECT s.meta, s.created, s.updated, s.epoch, s.last_seq, s.failures, "
            f"s.calibration, s.usage, s.hold_until, {columns} FROM ac_sessions s "
            "LEFT JOIN ac_entries e ON e.session_id = s.id AND e.replaced_by IS NULL "
            "AND e.seq > ? AND (? < 0 OR s.epoch = ?) "
            "WHERE s.id = ? ORDER BY e.pos, e.seq",
            (since, epoch, epoch, session_id),
            Fetch.ALL,
        )
        if not rows:
            raise self._missing(session_id)
        head = rows[0][:9]
        meta, created, updated, epoch_now, last_seq, failures, calibration, usage, hold = head
        if after is not None and int(epoch_now) != after.epoch:
            return None
        new = tuple(_entry(r[9:]) for r in rows if r[9] is not None)
        # The session row's usage also carries the growth log (no column: older builds still
        # read the schema; design decision 69).
        usage = _load(usage)
        growth = usage.pop("growth", None) if isinstance(usage, dict) else None
        return Snapshot(
            session_id=session_id,
            meta=after.meta if after is not None else _load(meta) or {},
            entries=(*after.entries, *new) if after is not None else new,
            epoch=int(epoch_now),
            last_seq=int(last_seq),
            consecutive_failures=int(failures),
            calibration=_load(calibration),
            usage=usage or None,
            hold_until=None if hold is None else int(hold),
            growth=growth if isinstance(growth, dict) else None,
            created=created,
            updated=updated,
        )

    def _append_op(
        self,
        session_id: str,
        turn_id: str,
        messages: Sequence[Message],
        usage: JsonDict | None,
        calibration: JsonDict | None,
        owner: str | None,
        growth: JsonDict | None = None,
    ) -> Op[AppendResult]:
        check_session_id(session_id, self._address)
        if not isinstance(turn_id, str) or not turn_id or len(turn_id) > 256:
            raise SessionStoreError(
                f"a turn id must be a string of 1–256 characters, not {turn_id!r:.40}",
                store=self._address,
                session_id=session_id,
            )
        payload = check_turn_size(messages, self.max_turn_bytes, self._address, session_id)
        plan = self._append_plan(session_id, turn_id, payload, usage, calibration, owner, growth)
        return Op(plan, write=True)

    def _append_plan(
        self,
        session_id: str,
        turn_id: str,
        payload: str,
        usage: JsonDict | None,
        calibration: JsonDict | None,
        owner: str | None,
        growth: JsonDict | None,
    ) -> Plan[AppendResult]:
        row = yield from self._lock_row(session_id)
        found = yield Query(
            "SELECT seq FROM ac_entries WHERE session_id = ? AND turn_id = ?",
            (session_id, turn_id),
            Fetch.ONE,
        )
        if found is not None:
            return AppendResult(seq=int(found[0]), duplicate=True)
        seq = int(row[1]) + 1
        now = _now_iso()
        yield Query(
            f"INSERT INTO ac_entries ({_ENTRY_COLUMNS}, session_id) "
            "VALUES (?, ?, 'turn', ?, ?, ?, ?, NULL, ?, ?)",
            (seq, seq, turn_id, owner, payload, _dump(usage), now, session_id),
        )
        yield Query(
            "UPDATE ac_sessions SET last_seq = ?, updated = ?, usage = ?, "
            "calibration = COALESCE(?, calibration) WHERE id = ?",
            (seq, now, _dump(_with_growth(usage, growth)), _dump(calibration), session_id),
        )
        self._step("append:written")
        return AppendResult(seq=seq, duplicate=False)

    def _get_turn_op(self, session_id: str, turn_id: str) -> Op[Entry | None]:
        check_session_id(session_id, self._address)
        return Op(self._get_turn_plan(session_id, turn_id), write=False)

    def _get_turn_plan(self, session_id: str, turn_id: str) -> Plan[Entry | None]:
        row = yield Query(
            f"SELECT {_ENTRY_COLUMNS} FROM ac_entries WHERE session_id = ? AND turn_id = ?",
            (session_id, turn_id),
            Fetch.ONE,
        )
        return None if row is None else _entry(row)

    # -- the compaction lease ----------------------------------------------------------------

    def _acquire_op(self, session_id: str, owner: str, ttl: float | None) -> Op[Lease | None]:
        check_session_id(session_id, self._address)
        return Op(self._acquire_plan(session_id, owner, ttl), write=True)

    def _acquire_plan(self, session_id: str, owner: str, ttl: float | None) -> Plan[Lease | None]:
        row = yield from self._lock_row(session_id)
        now = self._clock()
        holder, expires = row[3], row[5]
        if holder is not None and holder != owner and expires is not None and expires > now:
            return None
        lease = Lease(
            session_id=session_id,
            owner=owner,
            token=secrets.token_hex(8),
            expires=now + (self.lease_seconds if ttl is None else ttl),
        )
        yield Query(
            "UPDATE ac_sessions SET lease_owner = ?, lease_token = ?, lease_expires = ? "
            "WHERE id = ?",
            (owner, lease.token, lease.expires, session_id),
        )
        self._step("lease:written")
        return lease

    def _release_op(self, lease: Lease) -> Op[None]:
        return Op(self._release_plan(lease), write=True)

    def _release_plan(self, lease: Lease) -> Plan[None]:
        yield _release(lease)

    # -- compare-and-swap commit -------------------------------------------------------------

    def _commit_op(
        self,
        base: Snapshot,
        history: Sequence[Message],
        info: JsonDict,
        lease: Lease | None,
        owner: str | None,
        breaker: BreakerEffect,
        hold_until: int | None,
    ) -> Op[CommitResult]:
        payload = encode_messages(history)
        plan = self._commit_plan(base, payload, info, lease, owner, breaker, hold_until)
        return Op(plan, write=True)

    def _commit_plan(
        self,
        base: Snapshot,
        payload: str,
        info: JsonDict,
        lease: Lease | None,
        owner: str | None,
        breaker: BreakerEffect,
        hold_until: int | None,
    ) -> Plan[CommitResult]:
        trigger = str(info.get("trigger", ""))
        row = yield from self._lock_row(base.session_id)
        epoch, last_seq, failures = int(row[0]), int(row[1]), int(row[2])
        now = _now_iso()
        if epoch != base.epoch:
            seq = last_seq + 1
            yield Query(
                "INSERT INTO ac_attempts (session_id, seq, owner, trigger, status, counted, "
                "failures_after, epoch, summary_seq, info, created) "
                "VALUES (?, ?, ?, ?, 'superseded', 0, ?, ?, NULL, ?, ?)",
                (base.session_id, seq, owner, trigger, failures, base.epoch, _dump(info), now),
            )
            yield Query(
                "UPDATE ac_sessions SET last_seq = ?, updated = ? WHERE id = ?",
                (seq, now, base.session_id),
            )
            if lease is not None:
                yield _release(lease)
            self._step("commit:superseded")
            return CommitResult(committed=False, seq=seq, consecutive_failures=failures)
        summary_seq = last_seq + 1
        after = {"reset": 0, "add": failures + 1, "keep": failures}[breaker]
        usage = {"prompt_tokens": int(info.get("new_token_count", 0) or 0), "since": 0}
        yield Query(
            f"INSERT INTO ac_entries ({_ENTRY_COLUMNS}, session_id) "
            "VALUES (?, ?, 'summary', NULL, ?, ?, ?, NULL, ?, ?)",
            (summary_seq, base.last_seq, owner, payload, _dump(usage), now, base.session_id),
        )
        yield Query(
            "UPDATE ac_entries SET replaced_by = ? WHERE session_id = ? "
            "AND replaced_by IS NULL AND seq <= ?",
            (summary_seq, base.session_id, base.last_seq),
        )
        yield Query(
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
        yield Query(
            "UPDATE ac_sessions SET epoch = epoch + 1, last_seq = ?, failures = ?, "
            "hold_until = ?, updated = ? WHERE id = ?",
            (summary_seq + 1, after, hold_until, now, base.session_id),
        )
        if lease is not None:
            yield _release(lease)
        self._step("commit:written")
        return CommitResult(committed=True, seq=summary_seq, consecutive_failures=after)

    def _attempt_op(
        self,
        session_id: str,
        info: JsonDict,
        counted: bool,
        epoch: int,
        lease: Lease | None,
        owner: str | None,
        hold_until: int | None,
    ) -> Op[int]:
        plan = self._attempt_plan(session_id, info, counted, epoch, lease, owner, hold_until)
        return Op(plan, write=True)

    def _attempt_plan(
        self,
        session_id: str,
        info: JsonDict,
        counted: bool,
        epoch: int,
        lease: Lease | None,
        owner: str | None,
        hold_until: int | None,
    ) -> Plan[int]:
        row = yield from self._lock_row(session_id)
        last_seq, failures = int(row[1]), int(row[2]) + (1 if counted else 0)
        seq, now = last_seq + 1, _now_iso()
        yield Query(
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
        yield Query(
            "UPDATE ac_sessions SET last_seq = ?, failures = ?, hold_until = ?, updated = ? "
            "WHERE id = ?",
            (seq, failures, hold_until, now, session_id),
        )
        if lease is not None:
            yield _release(lease)
        self._step("attempt:written")
        return failures

    def _outgrown_op(
        self, session_id: str, info: JsonDict, epoch: int, hold_until: int, owner: str | None
    ) -> Op[bool]:
        check_session_id(session_id, self._address)
        return Op(self._outgrown_plan(session_id, info, epoch, hold_until, owner), write=True)

    def _outgrown_plan(
        self, session_id: str, info: JsonDict, epoch: int, hold_until: int, owner: str | None
    ) -> Plan[bool]:
        """An ``outgrown`` attempt (counted, with its hold), once per epoch (design decision 69)."""
        yield from self._lock_row(session_id)
        done = yield Query(
            "SELECT 1 FROM ac_attempts WHERE session_id = ? AND status = 'outgrown' AND epoch = ?",
            (session_id, epoch),
            Fetch.ONE,
        )
        if done is not None:
            return False
        record = {**info, "status": "outgrown"}
        yield from self._attempt_plan(session_id, record, True, epoch, None, owner, hold_until)
        return True

    def _clear_op(self, session_id: str, owner: str | None) -> Op[None]:
        return Op(self._clear_plan(session_id, owner), write=True)

    def _clear_plan(self, session_id: str, owner: str | None) -> Plan[None]:
        row = yield from self._lock_row(session_id)
        seq, now = int(row[1]) + 1, _now_iso()
        yield Query(
            f"INSERT INTO ac_entries ({_ENTRY_COLUMNS}, session_id) "
            "VALUES (?, ?, 'clear', NULL, ?, '[]', NULL, NULL, ?, ?)",
            (seq, seq - 1, owner, now, session_id),
        )
        yield Query(
            "UPDATE ac_entries SET replaced_by = ? WHERE session_id = ? "
            "AND replaced_by IS NULL AND seq < ?",
            (seq, session_id, seq),
        )
        yield Query(
            "UPDATE ac_sessions SET epoch = epoch + 1, last_seq = ?, failures = 0, "
            "hold_until = NULL, usage = NULL, updated = ? WHERE id = ?",
            (seq, now, session_id),
        )

    # -- reading everything ------------------------------------------------------------------

    def _entries_op(self, session_id: str) -> Op[tuple[Entry, ...]]:
        check_session_id(session_id, self._address)
        return Op(self._entries_plan(session_id), write=False)

    def _entries_plan(self, session_id: str) -> Plan[tuple[Entry, ...]]:
        rows = yield Query(
            f"SELECT {_ENTRY_COLUMNS} FROM ac_entries WHERE session_id = ? ORDER BY seq",
            (session_id,),
            Fetch.ALL,
        )
        return tuple(_entry(r) for r in rows)

    def _attempts_op(self, session_id: str) -> Op[tuple[Attempt, ...]]:
        check_session_id(session_id, self._address)
        return Op(self._attempts_plan(session_id), write=False)

    def _attempts_plan(self, session_id: str) -> Plan[tuple[Attempt, ...]]:
        rows = yield Query(
            "SELECT seq, owner, trigger, status, counted, failures_after, epoch, "
            "summary_seq, info, created FROM ac_attempts WHERE session_id = ? ORDER BY seq",
            (session_id,),
            Fetch.ALL,
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
            for r in rows
        )

    def _list_op(self) -> Op[list[SessionListing]]:
        return Op(self._list_plan(), write=False)

    def _list_plan(self) -> Plan[list[SessionListing]]:
        rows = yield Query(
            "SELECT s.id, s.meta, s.created, s.updated, "
            "(SELECT COUNT(*) FROM ac_entries e WHERE e.session_id = s.id "
            "AND e.kind = 'turn'), "
            "(SELECT COUNT(*) FROM ac_entries e WHERE e.session_id = s.id "
            "AND e.kind = 'summary') "
            "FROM ac_sessions s ORDER BY s.updated DESC, s.id",
            (),
            Fetch.ALL,
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
            for r in rows
        ]


class SqlStore(SqlRules, ABC):
    """The rules run on a DB-API connection (see :class:`SessionStore` for each method)."""

    @abstractmethod
    def _transaction(self, *, write: bool) -> contextlib.AbstractContextManager[Cursor]:
        """A transaction (committed on success, rolled back on error); driver errors become
        :class:`SessionStoreError`."""

    @abstractmethod
    def close(self) -> None:
        """Release connections."""

    def __enter__(self) -> SqlStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ensure_schema(self) -> None:
        if self._schema_checked:
            return
        with self._transaction(write=False) as cur:
            version = run_plan(self._version_plan(), cur)
        if version < LATEST_SCHEMA:
            with self._transaction(write=True) as cur:
                version = run_plan(self._migrate_plan(), cur)
        self._check_not_newer(version)
        self._schema_checked = True

    def _run(self, op: Op[_T]) -> _T:
        self._ensure_schema()
        with self._transaction(write=op.write) as cur:
            return run_plan(op.plan, cur)

    def ensure(self, session_id: str, meta: JsonDict) -> None:
        """Create the session if it does not exist (``meta`` is kept from the first call)."""
        self._run(self._ensure_op(session_id, meta))

    def exists(self, session_id: str) -> bool:
        """Whether the session exists."""
        return self._run(self._exists_op(session_id))

    def load(self, session_id: str, *, after: Snapshot | None = None) -> Snapshot:
        """The live history and shared state, read in one transaction (one consistent view).

        With ``after`` (an earlier snapshot of this session) and no summary or clear since,
        only the entries written after it are read and decoded.
        """
        return self._run(self._load_op(session_id, after))

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
        """Append one turn once (see the module docstring); durable when this returns."""
        op = self._append_op(session_id, turn_id, messages, usage, calibration, owner, growth)
        return self._run(op)

    def get_turn(self, session_id: str, turn_id: str) -> Entry | None:
        """The turn stored under ``turn_id`` (live or replaced), if any."""
        return self._run(self._get_turn_op(session_id, turn_id))

    def acquire_lease(self, session_id: str, owner: str, ttl: float | None = None) -> Lease | None:
        """Take the compaction lease when it is free, expired or already ``owner``'s."""
        return self._run(self._acquire_op(session_id, owner, ttl))

    def release_lease(self, lease: Lease) -> None:
        """Give the lease back (nothing happens when it lapsed and someone else holds it)."""
        self._run(self._release_op(lease))

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
        op = self._commit_op(base, history, info, lease, owner, breaker, hold_until)
        return self._run(op)

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
        op = self._attempt_op(session_id, info, counted, epoch, lease, owner, hold_until)
        return self._run(op)

    def record_outgrown(
        self,
        session_id: str,
        info: JsonDict,
        *,
        epoch: int,
        hold_until: int,
        owner: str | None = None,
    ) -> bool:
        """Count the compaction before ``epoch`` outgrown and hold; ``False``: already done."""
        return self._run(self._outgrown_op(session_id, info, epoch, hold_until, owner))

    def clear(self, session_id: str, *, owner: str | None = None) -> None:
        """Replace the live history by an empty one; the breaker and usage start over."""
        self._run(self._clear_op(session_id, owner))

    def entries(self, session_id: str) -> tuple[Entry, ...]:
        """Every entry in write order (replaced ones included)."""
        return self._run(self._entries_op(session_id))

    def attempts(self, session_id: str) -> tuple[Attempt, ...]:
        """Every compaction attempt in write order."""
        return self._run(self._attempts_op(session_id))

    def list_sessions(self) -> list[SessionListing]:
        """Every session, most recently updated first."""
        return self._run(self._list_op())


class AsyncSqlStore(SqlRules, ABC):
    """The same rules awaited on an async driver (see :class:`SessionStore` for each method).

    Every statement is awaited, so the event loop runs other tasks while one waits for the
    server (a row lock held by another worker included).
    """

    @abstractmethod
    def _transaction(self, *, write: bool) -> contextlib.AbstractAsyncContextManager[AsyncCursor]:
        """An async transaction (committed on success, rolled back on error); driver errors
        become :class:`SessionStoreError`."""

    @abstractmethod
    async def close(self) -> None:
        """Release connections."""

    async def __aenter__(self) -> AsyncSqlStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _ensure_schema(self) -> None:
        if self._schema_checked:
            return
        async with self._transaction(write=False) as cur:
            version = await arun_plan(self._version_plan(), cur)
        if version < LATEST_SCHEMA:
            async with self._transaction(write=True) as cur:
                version = await arun_plan(self._migrate_plan(), cur)
        self._check_not_newer(version)
        self._schema_checked = True

    async def _run(self, op: Op[_T]) -> _T:
        await self._ensure_schema()
        async with self._transaction(write=op.write) as cur:
            return await arun_plan(op.plan, cur)

    async def ensure(self, session_id: str, meta: JsonDict) -> None:
        """See :meth:`SqlStore.ensure`."""
        await self._run(self._ensure_op(session_id, meta))

    async def exists(self, session_id: str) -> bool:
        """See :meth:`SqlStore.exists`."""
        return await self._run(self._exists_op(session_id))

    async def load(self, session_id: str, *, after: Snapshot | None = None) -> Snapshot:
        """See :meth:`SqlStore.load`."""
        return await self._run(self._load_op(session_id, after))

    async def append_turn(
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
        """See :meth:`SqlStore.append_turn`."""
        op = self._append_op(session_id, turn_id, messages, usage, calibration, owner, growth)
        return await self._run(op)

    async def get_turn(self, session_id: str, turn_id: str) -> Entry | None:
        """See :meth:`SqlStore.get_turn`."""
        return await self._run(self._get_turn_op(session_id, turn_id))

    async def acquire_lease(
        self, session_id: str, owner: str, ttl: float | None = None
    ) -> Lease | None:
        """See :meth:`SqlStore.acquire_lease`."""
        return await self._run(self._acquire_op(session_id, owner, ttl))

    async def release_lease(self, lease: Lease) -> None:
        """See :meth:`SqlStore.release_lease`."""
        await self._run(self._release_op(lease))

    async def commit_compaction(
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
        """See :meth:`SqlStore.commit_compaction`."""
        op = self._commit_op(base, history, info, lease, owner, breaker, hold_until)
        return await self._run(op)

    async def record_attempt(
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
        """See :meth:`SqlStore.record_attempt`."""
        op = self._attempt_op(session_id, info, counted, epoch, lease, owner, hold_until)
        return await self._run(op)

    async def record_outgrown(
        self,
        session_id: str,
        info: JsonDict,
        *,
        epoch: int,
        hold_until: int,
        owner: str | None = None,
    ) -> bool:
        """See :meth:`SqlStore.record_outgrown`."""
        return await self._run(self._outgrown_op(session_id, info, epoch, hold_until, owner))

    async def clear(self, session_id: str, *, owner: str | None = None) -> None:
        """See :meth:`SqlStore.clear`."""
        await self._run(self._clear_op(session_id, owner))

    async def entries(self, session_id: str) -> tuple[Entry, ...]:
        """See :meth:`SqlStore.entries`."""
        return await self._run(self._entries_op(session_id))

    async def attempts(self, session_id: str) -> tuple[Attempt, ...]:
        """See :meth:`SqlStore.attempts`."""
        return await self._run(self._attempts_op(session_id))

    async def list_sessions(self) -> list[SessionListing]:
        """See :meth:`SqlStore.list_sessions`."""
        return await self._run(self._list_op())


def _release(lease: Lease) -> Query:
    return Query(
        "UPDATE ac_sessions SET lease_owner = NULL, lease_token = NULL, lease_expires = NULL "
        "WHERE id = ? AND lease_token = ?",
        (lease.session_id, lease.token),
    )


def _with_growth(usage: JsonDict | None, growth: JsonDict | None) -> JsonDict | None:
    """The session row's usage, with the growth log in it when there is one."""
    if growth is None:
        return usage
    return {**(usage or {}), "growth": growth}


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

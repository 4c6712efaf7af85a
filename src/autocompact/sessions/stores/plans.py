"""The store rules as sans-I/O plans, written once for SQLite and PostgreSQL.

Each operation is a **plan**: a generator that yields the :class:`Query` objects it needs run
(SQL with ``?`` placeholders, and whether to fetch one row, all rows or none) and receives their
results. :mod:`autocompact.sessions.stores.sql` runs plans on a DB-API cursor or awaits them on
an async one, so the synchronous and the asyncio stores send the very same statements in the
very same order. What the two databases say differently is one :class:`Dialect` each
(:data:`SQLITE`, :data:`POSTGRES`). The rules:

- **schema** (its plans are :mod:`~autocompact.sessions.stores.schema`'s): ``autocompact_schema``
  holds the version; :data:`MIGRATIONS` upgrades version ``n`` to ``n + 1`` in order, inside one
  transaction, on first use. A database written by a newer autocompact is refused (never
  written to).
- **model**: a model switch replaces the model fields of the session's meta under the row lock
  (the rest of the meta is kept; ``ensure`` never changes it).
- **append**: one transaction locks the session row, returns the existing seq when the turn id is
  already there (idempotent), else inserts the entry at ``last_seq + 1``.
- **lease**: a row lock, then the lease is granted when free, expired, or already ours.
- **commit**: compare-and-swap on the session's ``epoch``: when it is still the snapshot's,
  every live entry up to the snapshot's ``last_seq`` is marked replaced by the new summary
  entry (placed at that ``last_seq``, so later turns follow it), the epoch moves on and the
  breaker resets; otherwise the attempt is recorded as ``superseded`` and the count is left alone.
- **outgrown**: an ``outgrown`` attempt adds one and sets the hold, once per epoch.
- **load**: with an earlier snapshot and the same epoch, only the entries after its
  ``last_seq`` are read.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from autocompact.content import Message
from autocompact.errors import SessionStoreError
from autocompact.sessions.records import secrets_to_redact
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
    encode_messages,
    redact_text,
)
from autocompact.sessions.stores.front import Call
from autocompact.sessions.stores.schema import (
    EFFECT_CODES,
    ENTRY_COLUMNS,
    Dialect,
    Fetch,
    Op,
    Plan,
    Query,
    RowPlace,
    attempt_from_row,
    check_turn_id,
    dump_json,
    entry_from_row,
    json_object,
    listing_from_row,
    load_json,
    locked_row,
    now_iso,
    optional_int,
    release_query,
    with_growth,
)

__all__ = ["SqlRules"]

_T = TypeVar("_T")


class SqlRules:
    """The rules above as plans; :class:`SqlStore` and :class:`AsyncSqlStore` run them.

    Args:
        address: the redacted address (errors and listings show it).
        lease_seconds: how long a lease lasts.
        max_turn_bytes: the largest turn accepted (JSON bytes).
        clock: seconds, for lease expiry (every worker sharing a store must agree on it;
            ``time.time`` does across machines with synchronized clocks).
        on_step: called inside each write before it commits (tracing, fault injection).
        redact: secrets (API keys) kept out of the database, besides the well-known credential
            shapes: the session files' policy, applied at the one write path (messages, meta,
            attempt records).
    """

    def __init__(
        self,
        address: str,
        *,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        max_turn_bytes: int = DEFAULT_MAX_TURN_BYTES,
        clock: Callable[[], float] = time.time,
        on_step: StepHook | None = None,
        redact: Iterable[str] = (),
    ) -> None:
        self._address = address
        self._redact = secrets_to_redact(redact)
        self.lease_seconds = lease_seconds
        self.max_turn_bytes = max_turn_bytes
        self._clock = clock
        self._on_step = on_step
        self._schema_checked = False

    dialect: Dialect
    """What the backend's SQL says differently (set by each backend class)."""

    def _clean(self, text: str | None) -> str | None:
        """Text as it is stored: the session files' redaction (credential shapes and the
        secrets given as ``redact``), applied to everything a plan writes that a user typed."""
        return None if text is None else redact_text(text, self._redact)

    def _op(self, call: Call[_T]) -> Op[_T]:
        """The plan of a protocol call (see :mod:`autocompact.sessions.stores.front`)."""
        op: Op[_T] = getattr(self, f"_{call.name}_op")(**call.kwargs)
        return op

    @property
    def address(self) -> str:
        """The store's address, password replaced by ``***``."""
        return self._address

    def _lock_row(self, session_id: str) -> Plan[tuple[Any, ...]]:
        """Lock the session's row for the rest of the write; returns
        ``(epoch, last_seq, failures, lease_owner, lease_token, lease_expires)``."""
        row = yield Query(
            "SELECT epoch, last_seq, failures, lease_owner, lease_token, lease_expires "
            "FROM ac_sessions WHERE id = ?" + self.dialect.lock_suffix,
            (session_id,),
            Fetch.ONE,
        )
        if row is None:
            raise self._missing(session_id)
        return locked_row(row, self._place(session_id))

    def _place(self, session_id: str) -> RowPlace:
        return RowPlace(store=self._address, session_id=session_id, row="its ac_sessions row")

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
        now = now_iso()
        yield Query(
            "INSERT INTO ac_sessions (id, meta, created, updated) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (id) DO NOTHING",
            (session_id, self._clean(dump_json(meta)), now, now),
        )

    def _exists_op(self, session_id: str) -> Op[bool]:
        check_session_id(session_id, self._address)
        return Op(self._exists_plan(session_id), write=False)

    def _exists_plan(self, session_id: str) -> Plan[bool]:
        row = yield Query("SELECT 1 FROM ac_sessions WHERE id = ?", (session_id,), Fetch.ONE)
        return row is not None

    def _record_model_op(self, session_id: str, **model: Any) -> Op[None]:
        check_session_id(session_id, self._address)
        return Op(self._model_plan(session_id, model), write=True)

    def _model_plan(self, session_id: str, model: JsonDict) -> Plan[None]:
        """A model switch: the meta's model fields replaced, the rest kept (under the lock)."""
        yield from self._lock_row(session_id)
        row = yield Query("SELECT meta FROM ac_sessions WHERE id = ?", (session_id,), Fetch.ONE)
        meta = self._place(session_id).field("meta", row[0], json_object) or {}
        meta = {**meta, **{key: value for key, value in model.items() if value is not None}}
        yield Query(
            "UPDATE ac_sessions SET meta = ?, updated = ? WHERE id = ?",
            (self._clean(dump_json(meta)), now_iso(), session_id),
        )

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
        columns = ", ".join(f"e.{c.strip()}" for c in ENTRY_COLUMNS.split(","))
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
        meta, created, updated, epoch_now, last_seq, failures, calibration, usage, hold = rows[0][
            :9
        ]
        here = self._place(session_id)
        epoch_now = here.field("epoch", epoch_now, int)
        if after is not None and epoch_now != after.epoch:
            return None
        new = tuple(entry_from_row(r[9:], here) for r in rows if r[9] is not None)
        # The session row's usage also carries the growth log (no column: older builds still
        # read the schema; design decision 69).
        usage = here.field("usage", usage, load_json)
        growth = usage.pop("growth", None) if isinstance(usage, dict) else None
        return Snapshot(
            session_id=session_id,
            meta=after.meta if after is not None else here.field("meta", meta, json_object) or {},
            entries=(*after.entries, *new) if after is not None else new,
            epoch=epoch_now,
            last_seq=here.field("last_seq", last_seq, int),
            consecutive_failures=here.field("failures", failures, int),
            calibration=here.field("calibration", calibration, json_object),
            usage=usage or None,
            hold_until=here.field("hold_until", hold, optional_int),
            growth=growth if isinstance(growth, dict) else None,
            created=created,
            updated=updated,
        )

    def _append_turn_op(
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
        check_turn_id(turn_id, self._address, session_id)
        payload = check_turn_size(messages, self.max_turn_bytes, self._address, session_id)
        payload = redact_text(payload, self._redact)
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
        now = now_iso()
        yield Query(
            f"INSERT INTO ac_entries ({ENTRY_COLUMNS}, session_id) "
            "VALUES (?, ?, 'turn', ?, ?, ?, ?, NULL, ?, ?)",
            (seq, seq, turn_id, owner, payload, dump_json(usage), now, session_id),
        )
        yield Query(
            "UPDATE ac_sessions SET last_seq = ?, updated = ?, usage = ?, "
            "calibration = COALESCE(?, calibration) WHERE id = ?",
            (seq, now, dump_json(with_growth(usage, growth)), dump_json(calibration), session_id),
        )
        self._step("append:written")
        return AppendResult(seq=seq, duplicate=False)

    def _get_turn_op(self, session_id: str, turn_id: str) -> Op[Entry | None]:
        check_session_id(session_id, self._address)
        return Op(self._get_turn_plan(session_id, turn_id), write=False)

    def _get_turn_plan(self, session_id: str, turn_id: str) -> Plan[Entry | None]:
        row = yield Query(
            f"SELECT {ENTRY_COLUMNS} FROM ac_entries WHERE session_id = ? AND turn_id = ?",
            (session_id, turn_id),
            Fetch.ONE,
        )
        return None if row is None else entry_from_row(row, self._place(session_id))

    # -- the compaction lease ----------------------------------------------------------------

    def _acquire_lease_op(self, session_id: str, owner: str, ttl: float | None) -> Op[Lease | None]:
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

    def _release_lease_op(self, lease: Lease) -> Op[None]:
        return Op(self._release_plan(lease), write=True)

    def _release_plan(self, lease: Lease) -> Plan[None]:
        yield release_query(lease)

    # -- compare-and-swap commit -------------------------------------------------------------

    def _commit_compaction_op(
        self,
        base: Snapshot,
        history: Sequence[Message],
        info: JsonDict,
        lease: Lease | None,
        owner: str | None,
        breaker: BreakerEffect,
        hold_until: int | None,
    ) -> Op[CommitResult]:
        payload = redact_text(encode_messages(history), self._redact)
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
        now = now_iso()
        if epoch != base.epoch:
            seq = last_seq + 1
            yield Query(
                "INSERT INTO ac_attempts (session_id, seq, owner, trigger, status, counted, "
                "failures_after, epoch, summary_seq, info, created) "
                "VALUES (?, ?, ?, ?, 'superseded', 0, ?, ?, NULL, ?, ?)",
                (
                    base.session_id,
                    seq,
                    owner,
                    trigger,
                    failures,
                    base.epoch,
                    self._clean(dump_json(info)),
                    now,
                ),
            )
            yield Query(
                "UPDATE ac_sessions SET last_seq = ?, updated = ? WHERE id = ?",
                (seq, now, base.session_id),
            )
            if lease is not None:
                yield release_query(lease)
            self._step("commit:superseded")
            return CommitResult(committed=False, seq=seq, consecutive_failures=failures)
        summary_seq = last_seq + 1
        after = {"reset": 0, "add": failures + 1, "keep": failures}[breaker]
        usage = {"prompt_tokens": int(info.get("new_token_count", 0) or 0), "since": 0}
        yield Query(
            f"INSERT INTO ac_entries ({ENTRY_COLUMNS}, session_id) "
            "VALUES (?, ?, 'summary', NULL, ?, ?, ?, NULL, ?, ?)",
            (summary_seq, base.last_seq, owner, payload, dump_json(usage), now, base.session_id),
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
                EFFECT_CODES[breaker],
                after,
                base.epoch,
                summary_seq,
                self._clean(dump_json(info)),
                now,
            ),
        )
        yield Query(
            "UPDATE ac_sessions SET epoch = epoch + 1, last_seq = ?, failures = ?, "
            "hold_until = ?, updated = ? WHERE id = ?",
            (summary_seq + 1, after, hold_until, now, base.session_id),
        )
        if lease is not None:
            yield release_query(lease)
        self._step("commit:written")
        return CommitResult(committed=True, seq=summary_seq, consecutive_failures=after)

    def _record_attempt_op(
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
        seq, now = last_seq + 1, now_iso()
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
                self._clean(dump_json(info)),
                now,
            ),
        )
        yield Query(
            "UPDATE ac_sessions SET last_seq = ?, failures = ?, hold_until = ?, updated = ? "
            "WHERE id = ?",
            (seq, failures, hold_until, now, session_id),
        )
        if lease is not None:
            yield release_query(lease)
        self._step("attempt:written")
        return failures

    def _record_outgrown_op(
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
        seq, now = int(row[1]) + 1, now_iso()
        yield Query(
            f"INSERT INTO ac_entries ({ENTRY_COLUMNS}, session_id) "
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
            f"SELECT {ENTRY_COLUMNS} FROM ac_entries WHERE session_id = ? ORDER BY seq",
            (session_id,),
            Fetch.ALL,
        )
        return tuple(entry_from_row(r, self._place(session_id)) for r in rows)

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
        return tuple(attempt_from_row(r, self._place(session_id)) for r in rows)

    def _list_sessions_op(self) -> Op[list[SessionListing]]:
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
        return [listing_from_row(r, self._address) for r in rows]

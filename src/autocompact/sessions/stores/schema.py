"""The SQL stores' vocabulary: the schema and its migrations, the dialects, plans and queries.

A **plan** (:data:`Plan`) is a generator that yields :class:`Query` objects (SQL with ``?``
placeholders, and what to fetch) and receives their results; :class:`Op` pairs it with the kind
of transaction it needs. :class:`Dialect` is all that SQLite and PostgreSQL say differently.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Any, Generic, TypeAlias, TypeVar, get_args

from autocompact.errors import AutocompactError, SessionStoreError
from autocompact.sessions.stores.base import (
    Attempt,
    Entry,
    EntryKind,
    JsonDict,
    Lease,
    SessionListing,
    decode_messages,
)
from autocompact.textsafe import dumps

__all__ = [
    "EFFECT_CODES",
    "ENTRY_COLUMNS",
    "LATEST_SCHEMA",
    "MIGRATIONS",
    "POSTGRES",
    "SQLITE",
    "Dialect",
    "Fetch",
    "Op",
    "Plan",
    "Query",
    "RowPlace",
    "attempt_from_row",
    "check_not_newer",
    "check_turn_id",
    "dump_json",
    "entry_from_row",
    "json_object",
    "listing_from_row",
    "load_json",
    "locked_row",
    "migrate_plan",
    "now_iso",
    "optional_int",
    "release_query",
    "schema_version",
    "version_plan",
    "with_growth",
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

EFFECT_CODES: dict[str, int] = {"add": 1, "keep": 0, "reset": -1}
ENTRY_COLUMNS = "seq, pos, kind, turn_id, owner, messages, usage, replaced_by, created"


@dataclass(frozen=True, kw_only=True)
class Dialect:
    """What one database's SQL says differently; the plans are written in SQLite's.

    Attributes:
        name: the database.
        table_exists_sql: a statement with one ``?`` (a table's name) that returns a row when
            the table exists.
        schema_lock_sql: serializes migrations between processes inside the write transaction
            (``None``: the write transaction already does).
        lock_suffix: appended to the session-row SELECT of a write (``" FOR UPDATE"`` where
            rows lock).
        placeholder: the driver's parameter marker (the plans write ``?``; no statement holds
            a literal ``?``).
    """

    name: str
    table_exists_sql: str
    schema_lock_sql: str | None = None
    lock_suffix: str = ""
    placeholder: str = "?"

    def sql(self, text: str) -> str:
        """A plan's statement in this dialect."""
        return text if self.placeholder == "?" else _placeholders(text, self.placeholder)


@functools.lru_cache(maxsize=256)
def _placeholders(text: str, marker: str) -> str:
    return text.replace("?", marker)


SQLITE = Dialect(
    name="SQLite",
    table_exists_sql="SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
    schema_lock_sql=None,  # ``BEGIN IMMEDIATE`` already holds the database's write lock
)
_SCHEMA_LOCK_KEY = 7_215_020_114  # any constant: the advisory lock migrations take
POSTGRES = Dialect(
    name="PostgreSQL",
    table_exists_sql=(
        "SELECT 1 FROM information_schema.tables "
        "WHERE table_schema = current_schema() AND table_name = ?"
    ),
    schema_lock_sql=f"SELECT pg_advisory_xact_lock({_SCHEMA_LOCK_KEY})",
    lock_suffix=" FOR UPDATE",
    placeholder="%s",
)


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


def now_iso() -> str:
    """Now, ISO 8601 UTC to the millisecond (what the rows keep)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def dump_json(value: JsonDict | None) -> str | None:
    """A JSON column's text (``None`` stays NULL)."""
    return None if value is None else dumps(value, default=str)  # the U+FFFD text rule


def load_json(text: str | None) -> Any:
    """A JSON column's value."""
    return None if text is None else json.loads(text)


def release_query(lease: Lease) -> Query:
    """The statement that drops ``lease`` if it is still the session's."""
    return Query(
        "UPDATE ac_sessions SET lease_owner = NULL, lease_token = NULL, lease_expires = NULL "
        "WHERE id = ? AND lease_token = ?",
        (lease.session_id, lease.token),
    )


def with_growth(usage: JsonDict | None, growth: JsonDict | None) -> JsonDict | None:
    """The session row's usage, with the growth log in it when there is one."""
    if growth is None:
        return usage
    return {**(usage or {}), "growth": growth}


@dataclass(frozen=True, kw_only=True)
class RowPlace:
    """Where a row came from, for the error that says it cannot be read.

    Attributes:
        store: the store's address (password hidden).
        session_id: the row's session (``None``: the schema table).
        row: the row, as a user finds it (``"ac_entries seq 3"``).
    """

    store: str
    session_id: str | None
    row: str

    def at(self, row: str) -> RowPlace:
        """The same session, another row."""
        return RowPlace(store=self.store, session_id=self.session_id, row=row)

    def field(self, name: str, value: Any, convert: Callable[[Any], _T]) -> _T:
        """``convert(value)``; a value it cannot take is a :class:`SessionStoreError` naming
        the session, the row, the field and the value (rows changed outside autocompact)."""
        try:
            return convert(value)
        except SessionStoreError:
            raise
        except (ValueError, TypeError, KeyError, AttributeError, AutocompactError) as exc:
            raise self.corrupt(name, value, exc) from None

    def corrupt(self, name: str, value: Any, why: object) -> SessionStoreError:
        """The error for a stored value that cannot be read."""
        owner = f"session {self.session_id!r:.80}" if self.session_id is not None else "the store"
        reason = " ".join(str(why).split())[:160] or type(why).__name__
        return SessionStoreError(
            f"{owner} in {self.store} cannot be read: {self.row} has a corrupt {name} "
            f"({_shown(value)}: {reason}); it was changed outside autocompact: restore the "
            "database from a backup, or fix or delete that row",
            store=self.store,
            session_id=self.session_id,
        )


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_KINDS: frozenset[str] = frozenset(get_args(EntryKind))


def _kind(value: Any) -> EntryKind:
    if value not in _KINDS:
        raise ValueError(f"not one of {', '.join(sorted(_KINDS))}")
    kind: EntryKind = value
    return kind


def json_object(text: Any) -> Any:
    """A JSON column that holds an object (or NULL)."""
    value = load_json(text)
    if value is not None and not isinstance(value, dict):
        raise ValueError(f"a JSON {type(value).__name__}, not an object")
    return value


def optional_int(value: Any) -> int | None:
    """An integer column that may be NULL."""
    return None if value is None else int(value)


def check_not_newer(version: int, store: str) -> None:
    """Refuse a database a newer autocompact wrote (it is never written to)."""
    if version > LATEST_SCHEMA:
        raise SessionStoreError(
            f"the store was written by a newer autocompact (schema version {version}; this "
            f"one reads up to {LATEST_SCHEMA}); upgrade autocompact "
            "(pip install -U autocompact) to use it",
            store=store,
        )


def check_turn_id(turn_id: object, store: str, session_id: str) -> None:
    """A turn id is a string of 1–256 characters."""
    if not isinstance(turn_id, str) or not turn_id or len(turn_id) > 256:
        raise SessionStoreError(
            f"a turn id must be a string of 1–256 characters, not {turn_id!r:.40}",
            store=store,
            session_id=session_id,
        )


def schema_version(row: Sequence[Any], store: str) -> int:
    """The version the ``autocompact_schema`` row holds."""
    place = RowPlace(store=store, session_id=None, row="the autocompact_schema row")
    return place.field("schema version", row[0], int)


def locked_row(row: Sequence[Any], place: RowPlace) -> tuple[Any, ...]:
    """The session row a write locks: ``(epoch, last_seq, failures, lease_owner, lease_token,
    lease_expires)``, the counters as integers."""
    counters = (place.field(n, v, int) for n, v in zip(_COUNTERS, row[:3], strict=True))
    return (*counters, *row[3:])


_COUNTERS = ("epoch", "last_seq", "failures")


def entry_from_row(row: Sequence[Any], place: RowPlace) -> Entry:
    """An ``ac_entries`` row (``ENTRY_COLUMNS`` order) as an :class:`Entry`; ``place``: the
    session's (the row's seq is added to it), for the error a corrupted value raises."""
    seq, pos, kind, turn_id, owner, messages, usage, replaced_by, created = row
    here = place.at(f"ac_entries seq {seq}")
    return Entry(
        seq=here.field("seq", seq, int),
        pos=here.field("pos", pos, int),
        kind=here.field("kind", kind, _kind),
        turn_id=turn_id,
        messages=here.field("messages", messages, decode_messages),
        usage=here.field("usage", usage, json_object),
        replaced_by=here.field("replaced_by", replaced_by, optional_int),
        owner=owner,
        created=created,
    )


def attempt_from_row(r: Sequence[Any], place: RowPlace) -> Attempt:
    """An ``ac_attempts`` row (as the attempts plan selects it) as an :class:`Attempt`."""
    here = place.at(f"ac_attempts seq {r[0]}")
    counted = here.field("counted", r[4], int)
    return Attempt(
        seq=here.field("seq", r[0], int),
        owner=r[1],
        trigger=r[2],
        status=r[3],
        counted=counted > 0,
        reset=counted < 0,
        failures_after=here.field("failures_after", r[5], int),
        epoch=here.field("epoch", r[6], int),
        summary_seq=here.field("summary_seq", r[7], optional_int),
        info=here.field("info", r[8], json_object) or {},
        created=r[9],
    )


def listing_from_row(r: Sequence[Any], store: str) -> SessionListing:
    """A row of the listing plan (id, meta, created, updated, turns, summaries)."""
    here = RowPlace(store=store, session_id=r[0], row="its ac_sessions row")
    return SessionListing(
        session_id=r[0],
        meta=here.field("meta", r[1], json_object) or {},
        created=r[2],
        updated=r[3],
        turns=int(r[4]),
        compactions=int(r[5]),
    )


def version_plan(dialect: Dialect, store: str) -> Plan[int]:
    """The schema version the database holds (0: none yet)."""
    found = yield Query(dialect.table_exists_sql, ("autocompact_schema",), Fetch.ONE)
    if found is None:
        return 0
    row = yield Query("SELECT version FROM autocompact_schema WHERE id = 1", (), Fetch.ONE)
    return 0 if row is None else schema_version(row, store)


def migrate_plan(dialect: Dialect, store: str) -> Plan[int]:
    """Upgrade to :data:`LATEST_SCHEMA` (in a write transaction); returns the version found."""
    if dialect.schema_lock_sql is not None:
        yield Query(dialect.schema_lock_sql)
    yield Query(
        "CREATE TABLE IF NOT EXISTS autocompact_schema "
        "(id INTEGER PRIMARY KEY, version INTEGER NOT NULL)"
    )
    version = yield from version_plan(dialect, store)
    check_not_newer(version, store)
    for statements in MIGRATIONS[version:]:
        for statement in statements:
            yield Query(statement)
    if version == 0:
        yield Query("INSERT INTO autocompact_schema (id, version) VALUES (1, ?)", (LATEST_SCHEMA,))
    elif version < LATEST_SCHEMA:
        yield Query("UPDATE autocompact_schema SET version = ? WHERE id = 1", (LATEST_SCHEMA,))
    return version

"""The SQL stores' vocabulary: the schema and its migrations, the dialects, plans and queries.

A **plan** (:data:`Plan`) is a generator that yields :class:`Query` objects (SQL with ``?``
placeholders, and what to fetch) and receives their results; :class:`Op` pairs it with the kind
of transaction it needs. :class:`Dialect` is all that SQLite and PostgreSQL say differently.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Any, Generic, TypeAlias, TypeVar

from autocompact.sessions.stores.base import (
    Attempt,
    Entry,
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
    "attempt_from_row",
    "dump_json",
    "entry_from_row",
    "listing_from_row",
    "load_json",
    "now_iso",
    "release_query",
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


def entry_from_row(row: Sequence[Any]) -> Entry:
    """An ``ac_entries`` row (``ENTRY_COLUMNS`` order) as an :class:`Entry`."""
    seq, pos, kind, turn_id, owner, messages, usage, replaced_by, created = row
    return Entry(
        seq=int(seq),
        pos=int(pos),
        kind=kind,
        turn_id=turn_id,
        messages=decode_messages(messages),
        usage=load_json(usage),
        replaced_by=None if replaced_by is None else int(replaced_by),
        owner=owner,
        created=created,
    )


def attempt_from_row(r: Sequence[Any]) -> Attempt:
    """An ``ac_attempts`` row (as the attempts plan selects it) as an :class:`Attempt`."""
    return Attempt(
        seq=int(r[0]),
        owner=r[1],
        trigger=r[2],
        status=r[3],
        counted=int(r[4]) > 0,
        reset=int(r[4]) < 0,
        failures_after=int(r[5]),
        epoch=int(r[6]),
        summary_seq=None if r[7] is None else int(r[7]),
        info=load_json(r[8]) or {},
        created=r[9],
    )


def listing_from_row(r: Sequence[Any]) -> SessionListing:
    """A row of the listing plan (id, meta, created, updated, turns, summaries)."""
    meta = load_json(r[1]) or {}
    return SessionListing(
        session_id=r[0],
        meta=meta,
        created=r[2],
        updated=r[3],
        turns=int(r[4]),
        compactions=int(r[5]),
    )

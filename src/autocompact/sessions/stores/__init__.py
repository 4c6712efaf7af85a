"""Session stores shared by many workers: JSONL files, SQLite, PostgreSQL.

One protocol (:class:`SessionStore`), one module per backend; the rules (idempotent appends,
the compaction lease, the compare-and-swap commit) are written once in
:mod:`autocompact.sessions.stores.sql`. :func:`open_store` picks the backend from an address:

- ``sqlite:///path/to/sessions.db`` (``?mode=ro`` to open read-only),
- ``postgresql://user:password@host:5432/dbname`` (``pip install "autocompact[postgres]"``),
  or a libpq keyword string (``host=… dbname=… user=… password=…``),
- ``jsonl:///path/to/dir`` or a plain directory path: the one-user session files.

:func:`open_async_store` gives the asyncio form of the same store: a real async driver for
PostgreSQL, the synchronous store in a worker thread for SQLite and JSONL (see
:mod:`autocompact.sessions.stores.aio`). See ``docs/sessions.md`` for the semantics.
"""

from __future__ import annotations

from typing import Any

from autocompact.errors import SessionStoreError
from autocompact.sessions.stores.aio import AsyncSessionStore, AsyncStore
from autocompact.sessions.stores.base import (
    AppendResult,
    Attempt,
    CommitResult,
    Entry,
    Lease,
    SessionListing,
    SessionStore,
    Snapshot,
    is_keyword_dsn,
    redact_address,
)
from autocompact.sessions.stores.jsonl import JsonlStore
from autocompact.sessions.stores.sql import LATEST_SCHEMA
from autocompact.sessions.stores.sqlite import SqliteStore

__all__ = [
    "LATEST_SCHEMA",
    "AppendResult",
    "AsyncSessionStore",
    "AsyncStore",
    "Attempt",
    "CommitResult",
    "Entry",
    "JsonlStore",
    "Lease",
    "SessionListing",
    "SessionStore",
    "Snapshot",
    "SqliteStore",
    "open_async_store",
    "open_store",
    "redact_address",
]


def open_store(address: str, **options: Any) -> SessionStore:
    """The store at ``address`` (see the module docstring); nothing is opened until first use.

    Args:
        address: where the sessions live.
        **options: ``lease_seconds``, ``max_turn_bytes``, ``clock``, ``on_step``; PostgreSQL
            also ``pool_size`` and ``connect_timeout``.

    Raises:
        SessionStoreError: the address names no known kind of store.
    """
    shown, _ = redact_address(address)
    scheme, sep, rest = address.partition("://")
    scheme = scheme.lower() if sep else ""
    if scheme in ("postgresql", "postgres") or is_keyword_dsn(address):
        from autocompact.sessions.stores.postgres import PostgresStore

        return PostgresStore(address, **options)
    if scheme == "sqlite":
        path, _, query = rest.partition("?")
        if not path:
            raise SessionStoreError(
                "a SQLite address needs a file: sqlite:///path/to/sessions.db", store=shown
            )
        if path.startswith("//"):  # sqlite:////abs/path (and sqlite:///$HOME/… with HOME=/…)
            path = "/" + path.lstrip("/")
        read_only = "mode=ro" in query.split("&")
        return SqliteStore(path, read_only=read_only, **options)
    if scheme == "jsonl":
        return JsonlStore(rest, **options)
    if not sep:
        return JsonlStore(address, **options)
    raise SessionStoreError(
        f"unknown store {shown!r}: use sqlite:///path, postgresql://user@host/db, or a directory "
        "of JSONL session files",
        store=shown,
    )


def open_async_store(address: str, **options: Any) -> AsyncSessionStore:
    """The asyncio form of :func:`open_store`'s store at ``address`` (same addresses, options).

    PostgreSQL gets :class:`~autocompact.sessions.stores.postgres.AsyncPostgresStore` (psycopg's
    async pool: every statement awaited); SQLite and JSONL, whose drivers only block, get the
    synchronous store wrapped in :class:`AsyncStore` (each call in a worker thread).

    Raises:
        SessionStoreError: the address names no known kind of store.
    """
    scheme, sep, _ = address.partition("://")
    if (sep and scheme.lower() in ("postgresql", "postgres")) or is_keyword_dsn(address):
        from autocompact.sessions.stores.postgres import AsyncPostgresStore

        return AsyncPostgresStore(address, **options)
    return AsyncStore(open_store(address, **options))

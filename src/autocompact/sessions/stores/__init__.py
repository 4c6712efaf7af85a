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

from autocompact.sessions.stores.address import StoreAddress, parse_store_address
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
            also ``pool_size`` and ``connect_timeout``; ``create=False``: a SQLite file or
            JSONL directory that does not exist is an error (read-only use creates nothing).

    Raises:
        SessionStoreError: the address names no known kind of store.
    """
    shown, _ = redact_address(address) if isinstance(address, str) else (repr(address), ())
    create = options.pop("create", True)
    if isinstance(address, str) and is_keyword_dsn(address):
        parsed = StoreAddress(kind="postgresql", location=address)
    else:
        # the parsing (and create=False for read-only use) is in stores/address.py
        parsed = parse_store_address(address, shown=shown, create=create)
    if parsed.kind == "postgresql":
        from autocompact.sessions.stores.postgres import PostgresStore

        return PostgresStore(address, **options)
    if parsed.kind == "sqlite":
        return SqliteStore(parsed.location, read_only=parsed.read_only, **options)
    return JsonlStore(parsed.location, **options)


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

        options.pop("create", None)
        return AsyncPostgresStore(address, **options)
    return AsyncStore(open_store(address, **options))

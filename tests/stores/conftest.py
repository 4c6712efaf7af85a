"""Store fixtures: a fresh SQLite file, a fresh schema on the PostgreSQL server .ci/run starts.

``sql_store`` runs every semantics test on SQLite, on :class:`PostgresStore` and on
:class:`AsyncPostgresStore` (the asyncio store, driven from a loop in a background thread by
:class:`BlockingAsync`, so the same synchronous test body checks both drivers).

PostgreSQL tests read ``AUTOCOMPACT_TEST_POSTGRES_DSN`` (``.ci/postgres.sh start`` prints it).
Without it they are skipped with a message saying how to get one; under ``CI=true`` they fail
instead, so CI never passes without having run them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from autocompact.sessions.stores import SessionStore, SqliteStore, open_store

DSN_ENV = "AUTOCOMPACT_TEST_POSTGRES_DSN"
NO_SERVER = (
    f"no PostgreSQL server: set {DSN_ENV} "
    '(eval "$(.ci/postgres.sh start)" starts one; .ci/run does this)'
)


def postgres_dsn() -> str:
    """The test server's DSN, or skip (fail under CI=true) when there is none."""
    dsn = os.environ.get(DSN_ENV, "")
    if dsn:
        return dsn
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {NO_SERVER}")
    pytest.skip(NO_SERVER)


def fresh_postgres_schema() -> str:
    """A DSN whose search_path is a new, empty schema (each test gets its own tables)."""
    import psycopg

    dsn = postgres_dsn()
    schema = "t_" + secrets.token_hex(6)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in dsn else "?"
    return f"{dsn}{sep}options=-csearch_path%3D{schema}"


class BlockingAsync:
    """An :class:`AsyncPostgresStore` called like a synchronous store (a test double).

    Each call is a coroutine run on this object's own event loop, in a background thread, so
    the synchronous semantics tests (and a ``ChatSession``) exercise the async driver; raw SQL
    checks (``_transaction``) go through a synchronous store on the same database.
    """

    def __init__(self, dsn: str, **options: Any) -> None:
        from autocompact.sessions.stores.postgres import AsyncPostgresStore, PostgresStore

        self._dsn = dsn
        self.inner = AsyncPostgresStore(dsn, **options)
        self._raw = PostgresStore(dsn)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return self.inner.address

    def _transaction(self, *, write: bool) -> contextlib.AbstractContextManager[Any]:
        return self._raw._transaction(write=write)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.inner, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            coro = method(*args, **kwargs)
            return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

        return call

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.inner.close(), self._loop).result()
        self._raw.close()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


def make_store(kind: str, tmp_path: Path, **options: Any) -> SessionStore:
    """A store of ``kind`` (sqlite, postgres, postgres-async, jsonl) with nothing in it."""
    if kind == "sqlite":
        return SqliteStore(tmp_path / "sessions.db", **options)
    if kind == "postgres":
        return open_store(fresh_postgres_schema(), **options)
    if kind == "postgres-async":
        store: Any = BlockingAsync(fresh_postgres_schema(), **options)
        return store  # type: ignore[no-any-return]
    return open_store(str(tmp_path / "jsonl"), **options)


@pytest.fixture(params=["sqlite", "postgres", "postgres-async"])
def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    """A fresh SQL store (SQLite file, PostgreSQL schema through the sync and async drivers)."""
    store = make_store(request.param, tmp_path)
    yield store
    store.close()


@pytest.fixture(params=["sqlite", "postgres", "jsonl"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    """A fresh store of every kind."""
    store = make_store(request.param, tmp_path)
    yield store
    store.close()

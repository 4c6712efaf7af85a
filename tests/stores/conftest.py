"""Store fixtures: a fresh SQLite file, a fresh schema on the PostgreSQL server .ci/run starts.

PostgreSQL tests read ``AUTOCOMPACT_TEST_POSTGRES_DSN`` (``.ci/postgres.sh start`` prints it).
Without it they are skipped with a message saying how to get one; under ``CI=true`` they fail
instead, so CI never passes without having run them.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
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


def make_store(kind: str, tmp_path: Path, **options: Any) -> SessionStore:
    """A store of ``kind`` (sqlite, postgres, jsonl) with nothing in it."""
    if kind == "sqlite":
        return SqliteStore(tmp_path / "sessions.db", **options)
    if kind == "postgres":
        return open_store(fresh_postgres_schema(), **options)
    return open_store(str(tmp_path / "jsonl"), **options)


@pytest.fixture(params=["sqlite", "postgres"])
def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    """A fresh SQL store (SQLite file, PostgreSQL schema)."""
    store = make_store(request.param, tmp_path)
    yield store
    store.close()


@pytest.fixture(params=["sqlite", "postgres", "jsonl"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    """A fresh store of every kind."""
    store = make_store(request.param, tmp_path)
    yield store
    store.close()

"""Two "workers" on one store: two independent store objects (own connections) on one database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from autocompact.sessions.stores import SessionStore, SqliteStore, open_store
from stores.conftest import fresh_postgres_schema


@pytest.fixture(params=["sqlite", "postgres"])
def two_stores(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[SessionStore, SessionStore]]:
    """Two store objects opened separately on one fresh SQLite file or PostgreSQL schema."""
    if request.param == "sqlite":
        stores = (SqliteStore(tmp_path / "shared.db"), SqliteStore(tmp_path / "shared.db"))
    else:
        dsn = fresh_postgres_schema()
        stores = (open_store(dsn), open_store(dsn))
    yield stores
    for store in stores:
        store.close()


def turn_entries(store: SessionStore, session_id: str) -> int:
    """How many turns the store holds for the session (live or replaced)."""
    return sum(1 for e in store.entries(session_id) if e.kind == "turn")

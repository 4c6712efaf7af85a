"""The asyncio stores: AsyncPostgresStore on a real server, AsyncStore over SQLite in a thread.

The semantics tests run on the async PostgreSQL store too (``sql_store`` in conftest); these
check what only an async store can get wrong: that waiting for the database never stops the
event loop, that concurrent tasks on one store keep the rules, and that it sends the same
statements as the synchronous store.
"""

from __future__ import annotations

import asyncio
import socket
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from autocompact.content import Message
from autocompact.errors import SessionStoreError
from autocompact.sessions.stores import (
    AsyncSessionStore,
    AsyncStore,
    SqliteStore,
    open_async_store,
    open_store,
)
from autocompact.sessions.stores.postgres import AsyncPostgresStore, PostgresStore
from autocompact.sessions.stores.sql import LATEST_SCHEMA, Query

from .conftest import fresh_postgres_schema, postgres_dsn

META = {"provider": "fake", "model": "m", "context_window": 10_000}
PAIR = (Message.user("q"), Message.model("a"))
COMPRESSED = {"status": "compressed", "trigger": "auto", "new_token_count": 3}


@pytest.fixture
async def apg() -> AsyncIterator[AsyncPostgresStore]:
    """An async PostgreSQL store on a fresh schema."""
    store = AsyncPostgresStore(fresh_postgres_schema())
    yield store
    await store.close()


class Ticker:
    """A task that counts event-loop turns: it only advances while the loop is free."""

    def __init__(self) -> None:
        self.ticks = 0
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            self.ticks += 1
            await asyncio.sleep(0.002)

    async def advances(self) -> bool:
        """Whether the counter moves on while the caller waits a little."""
        before = self.ticks
        for _ in range(500):
            await asyncio.sleep(0.01)
            if self.ticks > before + 3:
                return True
        return False

    def stop(self) -> None:
        self._task.cancel()


async def wait_until(predicate: Any, what: str) -> None:
    """Poll an async predicate until it holds (fails after ~30 s, never on a tight bound)."""
    for _ in range(3000):
        if await predicate():
            return
        await asyncio.sleep(0.01)
    pytest.fail(f"timed out waiting until {what}")


async def test_open_async_store_picks_the_async_driver_for_postgres(tmp_path: Path) -> None:
    """PostgreSQL gets the async driver; SQLite and JSONL the sync store in a worker thread."""
    pg = open_async_store("postgresql://u:secret@127.0.0.1:1/db")
    assert isinstance(pg, AsyncPostgresStore)
    assert pg.address == "postgresql://u:***@127.0.0.1:1/db"
    lite = open_async_store(f"sqlite:///{tmp_path / 's.db'}")
    files = open_async_store(str(tmp_path / "jsonl"))
    assert isinstance(lite, AsyncStore)
    assert isinstance(lite.store, SqliteStore)
    assert isinstance(files, AsyncStore)
    for store in (pg, lite, files):
        assert isinstance(store, AsyncSessionStore)
    await lite.close()
    await files.close()


async def test_an_append_waiting_on_a_row_lock_leaves_the_loop_running(
    apg: AsyncPostgresStore,
) -> None:
    """Another connection holds the session's row lock: the append waits on the server while
    a concurrent task keeps running; the append completes once the lock is released."""
    import psycopg

    await apg.ensure("s", META)
    holder = await psycopg.AsyncConnection.connect(apg._dsn)
    monitor = await psycopg.AsyncConnection.connect(apg._dsn, autocommit=True)
    ticker = Ticker()
    try:
        await holder.execute("SELECT 1 FROM ac_sessions WHERE id = 's' FOR UPDATE")
        append = asyncio.create_task(apg.append_turn("s", "t1", PAIR))

        async def waiting_on_the_lock() -> bool:
            cur = await monitor.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE wait_event_type = 'Lock' AND datname = current_database()"
            )
            row = await cur.fetchone()
            return row is not None and row[0] >= 1

        await wait_until(waiting_on_the_lock, "the append waits on the row lock")
        assert not append.done()
        assert await ticker.advances(), "the event loop stopped while the append waited"
        assert not append.done()  # still behind the lock: the loop ran meanwhile
        await holder.commit()
        result = await append
        assert not result.duplicate
        assert [e.turn_id for e in (await apg.load("s")).entries] == ["t1"]
    finally:
        ticker.stop()
        await holder.close()
        await monitor.close()


async def test_an_sqlite_write_waiting_on_the_lock_runs_in_a_thread(tmp_path: Path) -> None:
    """SQLite has no async driver: AsyncStore waits for the write lock in a worker thread."""
    path = tmp_path / "s.db"
    store = AsyncStore(SqliteStore(path))
    await store.ensure("s", META)
    holder = sqlite3.connect(path, isolation_level=None)
    ticker = Ticker()
    try:
        holder.execute("BEGIN IMMEDIATE")  # the database's write lock
        append = asyncio.create_task(store.append_turn("s", "t1", PAIR))
        assert await ticker.advances(), "the event loop stopped while the append waited"
        assert not append.done()
        holder.execute("COMMIT")
        assert not (await append).duplicate
    finally:
        ticker.stop()
        holder.close()
        await store.close()


async def test_concurrent_tasks_keep_the_rules(apg: AsyncPostgresStore) -> None:
    """Twenty tasks on one async store: one append per turn id, one lease, one commit."""
    await apg.ensure("s", META)
    appends = await asyncio.gather(*(apg.append_turn("s", f"t{i % 5}", PAIR) for i in range(20)))
    assert sum(not a.duplicate for a in appends) == 5
    leases = await asyncio.gather(*(apg.acquire_lease("s", f"w{i}") for i in range(20)))
    assert sum(lease is not None for lease in leases) == 1
    base = await apg.load("s")
    commits = await asyncio.gather(
        *(apg.commit_compaction(base, (Message.user(f"S{i}"),), COMPRESSED) for i in range(8))
    )
    assert sum(c.committed for c in commits) == 1
    attempts = await apg.attempts("s")
    assert sorted(a.status for a in attempts) == ["compressed"] + ["superseded"] * 7
    assert len((await apg.load("s")).entries) == 1


async def test_sync_and_async_stores_share_one_database(apg: AsyncPostgresStore) -> None:
    """A synchronous worker and an asyncio worker on one session see each other's writes."""
    sync = open_store(apg._dsn)
    try:
        await apg.ensure("s", META)
        await apg.append_turn("s", "t1", PAIR)
        assert sync.append_turn("s", "t1", PAIR).duplicate
        sync.append_turn("s", "t2", PAIR)
        lease = sync.acquire_lease("s", "sync-worker")
        assert lease is not None
        assert await apg.acquire_lease("s", "async-worker") is None
        sync.release_lease(lease)
        snap = await apg.load("s")
        assert [e.turn_id for e in snap.entries] == ["t1", "t2"]
        assert (await apg.commit_compaction(snap, (Message.user("S"),), COMPRESSED)).committed
        assert [m.text for m in sync.load("s").history] == ["S"]
        assert sync.entries("s") == await apg.entries("s")
        assert sync.attempts("s") == await apg.attempts("s")
    finally:
        sync.close()


class _Recorder:
    """A cursor that records statements and answers like an empty database."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, tuple[Any, ...]]] = []

    def execute(self, sql: str, params: Any = ()) -> None:
        self.sent.append((sql, tuple(params)))

    def fetchone(self) -> Any:
        return (0, 0, 0, None, None, None)

    def fetchall(self) -> Any:
        return []


class _AsyncRecorder(_Recorder):
    async def execute(self, sql: str, params: Any = ()) -> None:  # type: ignore[override]
        super().execute(sql, params)

    async def fetchone(self) -> Any:  # type: ignore[override]
        return super().fetchone()

    async def fetchall(self) -> Any:  # type: ignore[override]
        return super().fetchall()


async def test_both_drivers_send_the_same_statements(monkeypatch: pytest.MonkeyPatch) -> None:
    """One plan per operation: the sync and async runners send identical SQL and parameters."""
    from autocompact.sessions.stores import plans
    from autocompact.sessions.stores.sql import arun_plan, run_plan

    # The plans stamp the time in milliseconds: one clock for both, or a tick between the two
    # runs makes the parameters differ (seen once under load).
    monkeypatch.setattr(plans, "now_iso", lambda: "2026-01-01T00:00:00.000+00:00")

    sync = PostgresStore("postgresql://u@127.0.0.1:1/db")
    aio = AsyncPostgresStore("postgresql://u@127.0.0.1:1/db")
    lease_args = ("s", "owner", 30.0)
    for name, args in (
        ("_append_turn_op", ("s", "t1", PAIR, {"prompt_tokens": 1}, None, "o")),
        ("_acquire_lease_op", lease_args),
        ("_clear_op", ("s", "o")),
        ("_list_sessions_op", ()),
    ):
        a, b = _Recorder(), _AsyncRecorder()
        ops = getattr(sync, name)(*args), getattr(aio, name)(*args)
        with_sync = run_plan(ops[0].plan, a)
        with_async = await arun_plan(ops[1].plan, b)
        assert a.sent, name
        assert [q for q, _ in a.sent] == [q for q, _ in b.sent], name
        if name != "_acquire_lease_op":  # a lease token is random
            assert a.sent == b.sent, name
            assert with_sync == with_async, name
    assert isinstance(Query("x").params, tuple)


async def test_a_server_that_is_down_is_a_clear_error_without_the_password() -> None:
    """Nothing listens: a SessionStoreError naming the address, the password never shown."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = AsyncPostgresStore(
        f"postgresql://me:hunter2-secret@127.0.0.1:{port}/db", connect_timeout=2
    )
    with pytest.raises(SessionStoreError, match="cannot reach the PostgreSQL server") as err:
        await store.ensure("s", META)
    assert "hunter2-secret" not in str(err.value)
    assert "postgresql://me:***@127.0.0.1" in str(err.value)
    await store.close()


async def test_a_wrong_password_is_not_echoed() -> None:
    """A bad password: the error says so without repeating it."""
    from urllib.parse import urlsplit

    parts = urlsplit(postgres_dsn())
    dsn = postgres_dsn().replace(f":{parts.password}@", ":wrong-pw-123@")
    store = AsyncPostgresStore(dsn, connect_timeout=5)
    with pytest.raises(SessionStoreError) as err:
        await store.exists("s")
    assert "wrong-pw-123" not in str(err.value)
    await store.close()


async def test_a_newer_schema_is_refused_and_left_alone(apg: AsyncPostgresStore) -> None:
    """A database written by a newer autocompact: refused with the upgrade hint, not written."""
    await apg.ensure("s", META)
    raw = open_store(apg._dsn)
    with raw._transaction(write=True) as cur:  # type: ignore[attr-defined]
        cur.execute("UPDATE autocompact_schema SET version = ?", (LATEST_SCHEMA + 1,))
    newcomer = AsyncPostgresStore(apg._dsn)
    try:
        with pytest.raises(SessionStoreError, match=r"newer autocompact.*pip install -U"):
            await newcomer.append_turn("s", "t1", PAIR)
        with raw._transaction(write=False) as cur:  # type: ignore[attr-defined]
            cur.execute("SELECT count(*) FROM ac_entries")
            assert cur.fetchone()[0] == 0
    finally:
        await newcomer.close()
        raw.close()


async def test_a_read_only_database_says_so(apg: AsyncPostgresStore) -> None:
    """default_transaction_read_only: reads work, a write names the setting to change."""
    await apg.ensure("s", META)
    ro = AsyncPostgresStore(
        apg._dsn.replace("options=", "options=-cdefault_transaction_read_only%3Don%20")
    )
    try:
        assert await ro.exists("s")
        with pytest.raises(SessionStoreError, match=r"read-only.*default_transaction_read_only"):
            await ro.append_turn("s", "t1", PAIR)
    finally:
        await ro.close()


async def test_a_missing_session_and_a_huge_turn_are_clear_errors(
    apg: AsyncPostgresStore,
) -> None:
    """No such session: the error names it; a 50 MB turn: refused whole before any I/O."""
    with pytest.raises(SessionStoreError, match="no session 'nope'"):
        await apg.append_turn("nope", "t1", PAIR)
    await apg.ensure("s", META)
    huge = (Message.user("x" * 50_000_000), Message.model("a"))
    with pytest.raises(SessionStoreError, match=r"50\.0 MB, over"):
        await apg.append_turn("s", "t1", huge)
    assert (await apg.load("s")).entries == ()


# -- AsyncChatSession on an asyncio store --------------------------------------------------


def _session(store: Any, sid: str = "c", **options: Any) -> Any:
    from autocompact.chat import AsyncChatSession
    from autocompact.testing import FakeProvider

    provider = options.pop("provider", None) or FakeProvider()
    return AsyncChatSession(
        provider, context_window=100_000, store=store, session_id=sid, **options
    )


async def test_an_async_session_on_the_async_store_appends_resumes_and_retries(
    apg: AsyncPostgresStore,
) -> None:
    """Turns go through the async driver; a retried turn id is answered from the store; a
    second session (another worker) resumes the history; aclear replaces it."""
    from autocompact.testing import FakeProvider

    fake = FakeProvider()
    a = _session(apg, provider=fake)
    await a.send("hi", turn_id="t1")
    calls = len(fake.requests)
    again = await a.send("hi", turn_id="t1")
    assert len(fake.requests) == calls  # answered from the store, no model call
    assert again.message.text == "OK."
    b = _session(apg)
    assert b.history == ()  # an asyncio store is read on the first send, not in __init__
    await b.send("more", turn_id="t2")
    assert [m.text for m in b.history] == ["hi", "OK.", "more", "OK."]
    assert [e.turn_id for e in (await apg.load("c")).entries] == ["t1", "t2"]
    await b.aclear()
    assert b.history == ()
    assert (await apg.load("c")).history == ()
    assert [e.kind for e in await apg.entries("c")] == ["turn", "turn", "clear"]


async def test_an_async_session_send_waiting_on_a_row_lock_leaves_the_loop_running(
    apg: AsyncPostgresStore,
) -> None:
    """AsyncChatSession.send with the session's row lock held elsewhere: the loop runs on."""
    import psycopg

    session = _session(apg)
    await session.send("first", turn_id="t1")
    holder = await psycopg.AsyncConnection.connect(apg._dsn)
    ticker = Ticker()
    try:
        await holder.execute("SELECT 1 FROM ac_sessions WHERE id = 'c' FOR UPDATE")
        send = asyncio.create_task(session.send("second", turn_id="t2"))
        assert await ticker.advances(), "the event loop stopped while the send waited"
        assert not send.done()  # its append waits behind the lock
        await holder.commit()
        await send
        assert [e.turn_id for e in (await apg.load("c")).entries] == ["t1", "t2"]
    finally:
        ticker.stop()
        await holder.close()


async def test_a_failed_async_append_leaves_the_session_as_it_was() -> None:
    """The append fails inside its transaction: raised from send, history unchanged."""

    def boom(step: str) -> None:
        if step == "append:written":
            raise SessionStoreError("disk gone", store="test")

    store = AsyncPostgresStore(fresh_postgres_schema(), on_step=boom)
    try:
        session = _session(store)
        with pytest.raises(SessionStoreError, match="disk gone"):
            await session.send("lost")
        assert session.history == ()
        assert (await store.load("c")).entries == ()
    finally:
        await store.close()


async def test_an_async_session_compacts_through_the_async_store(
    apg: AsyncPostgresStore,
) -> None:
    """An automatic compaction takes the lease and commits the summary through the driver."""
    from autocompact.compaction import CompressionStatus

    await apg.ensure("c", {"provider": "fake", "model": "fake-model", "context_window": 100_000})
    for i in range(18):  # about 72,000 estimated tokens: over the 70,000 auto threshold
        pair = (Message.user(chr(97 + i % 26) * 8_000), Message.model("m" * 8_000))
        await apg.append_turn("c", f"old-{i}", pair)
    session = _session(apg)
    await session.send("next", turn_id="t-next")
    assert session.compactions[0].status is CompressionStatus.COMPRESSED
    assert [a.status for a in await apg.attempts("c")] == ["compressed"]
    assert (await apg.load("c")).history == session.history


async def test_a_sync_session_refuses_an_async_store(apg: AsyncPostgresStore) -> None:
    """ChatSession cannot await: a clear ConfigError at construction, nothing written."""
    from autocompact.chat import ChatSession
    from autocompact.errors import ConfigError
    from autocompact.testing import FakeProvider

    with pytest.raises(ConfigError, match="AsyncChatSession"):
        ChatSession(FakeProvider(), context_window=100_000, store=apg, session_id="c")
    assert await apg.list_sessions() == []


async def test_an_async_session_over_sqlite_uses_the_thread_store(tmp_path: Path) -> None:
    """AsyncStore(SqliteStore) is an asyncio store too: the same session code runs on it."""
    store = AsyncStore(SqliteStore(tmp_path / "s.db"))
    session = _session(store)
    await session.send("hi", turn_id="t1")
    await session.send("hi", turn_id="t1")
    assert [e.turn_id for e in (await store.load("c")).entries] == ["t1"]
    await store.close()

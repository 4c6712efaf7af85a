"""The store semantics of docs/sessions.md, on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from autocompact.content import Message
from autocompact.errors import SessionStoreError
from autocompact.sessions.stores import LATEST_SCHEMA, SessionStore, SqliteStore, open_store
from autocompact.sessions.stores.postgres import PostgresStore

from .conftest import make_store

META = {"provider": "fake", "model": "fake-model", "context_window": 10_000}


def turn(i: int) -> tuple[Message, Message]:
    """The two messages of turn ``i``."""
    return Message.user(f"question {i}"), Message.model(f"answer {i}")


def reopen(store: SessionStore, **options: Any) -> SessionStore:
    """Another connection to the same database (another worker)."""
    if isinstance(store, SqliteStore):
        return SqliteStore(store.path, **options)
    assert isinstance(store, PostgresStore) or hasattr(store, "inner")  # conftest.BlockingAsync
    return open_store(store._dsn, **options)  # type: ignore[attr-defined]


def fill(store: SessionStore, sid: str, n: int) -> None:
    """Create ``sid`` with turns 0..n-1."""
    store.ensure(sid, META)
    for i in range(n):
        store.append_turn(sid, f"t{i}", turn(i))


def test_schema_is_created_on_first_use_at_the_latest_version(sql_store: SessionStore) -> None:
    """The first call creates the tables; the version row says the latest schema."""
    sql_store.ensure("s", META)
    assert sql_store.load("s").entries == ()
    with sql_store._transaction(write=False) as cur:  # type: ignore[attr-defined]
        cur.execute("SELECT version FROM autocompact_schema")
        assert cur.fetchone()[0] == LATEST_SCHEMA


def test_a_retried_append_is_not_duplicated(sql_store: SessionStore) -> None:
    """The same turn id twice: one entry, the second call says duplicate and writes nothing."""
    sql_store.ensure("s", META)
    first = sql_store.append_turn("s", "turn-1", turn(1))
    again = sql_store.append_turn("s", "turn-1", turn(99))
    assert (first.duplicate, again.duplicate, again.seq) == (False, True, first.seq)
    snap = sql_store.load("s")
    assert [m.text for m in snap.history] == ["question 1", "answer 1"]


def test_an_append_is_durable_when_it_returns(sql_store: SessionStore) -> None:
    """A new connection (another worker) sees the turn as soon as append_turn returned."""
    fill(sql_store, "s", 3)
    other = reopen(sql_store)
    try:
        assert [e.turn_id for e in other.load("s").entries] == ["t0", "t1", "t2"]
    finally:
        other.close()


def test_the_lease_is_single_flight_and_lapses(sql_store: SessionStore) -> None:
    """One holder at a time; an expired lease can be taken; a lost lease's release is a no-op."""
    now = [1000.0]
    a = reopen(sql_store, clock=lambda: now[0], lease_seconds=30)
    b = reopen(sql_store, clock=lambda: now[0], lease_seconds=30)
    try:
        fill(a, "s", 1)
        lease_a = a.acquire_lease("s", "worker-a")
        assert lease_a is not None
        assert b.acquire_lease("s", "worker-b") is None
        now[0] += 31  # worker-a died: its lease lapses
        lease_b = b.acquire_lease("s", "worker-b")
        assert lease_b is not None
        a.release_lease(lease_a)  # too late: does not free worker-b's lease
        assert a.acquire_lease("s", "worker-c") is None
        b.release_lease(lease_b)
        assert a.acquire_lease("s", "worker-c") is not None
    finally:
        a.close()
        b.close()


def test_commit_keeps_turns_appended_after_the_summarized_range(sql_store: SessionStore) -> None:
    """Turns appended while the side query ran follow the summary; the range is marked replaced."""
    fill(sql_store, "s", 4)
    base = sql_store.load("s")
    sql_store.append_turn("s", "late", turn(4))
    summary = (Message.user("summary of 0-3"), Message.model("ok"))
    result = sql_store.commit_compaction(
        base, summary, {"status": "compressed", "trigger": "auto", "new_token_count": 7}
    )
    assert result.committed
    snap = sql_store.load("s")
    assert [m.text for m in snap.history] == ["summary of 0-3", "ok", "question 4", "answer 4"]
    assert snap.epoch == base.epoch + 1
    replaced = [e.turn_id for e in sql_store.entries("s") if e.replaced_by == result.seq]
    assert replaced == ["t0", "t1", "t2", "t3"]


def test_a_changed_range_supersedes_the_summary(sql_store: SessionStore) -> None:
    """Two summaries of one range: the second is discarded, recorded, and not counted."""
    fill(sql_store, "s", 3)
    sql_store.record_attempt(
        "s", {"status": "compression_failed_provider_error"}, counted=True, epoch=0
    )
    base = sql_store.load("s")
    info = {"status": "compressed", "trigger": "auto", "new_token_count": 5}
    first = sql_store.commit_compaction(base, (Message.user("A"),), info, owner="w1")
    second = sql_store.commit_compaction(base, (Message.user("B"),), info, owner="w2")
    assert first.committed
    assert not second.committed
    snap = sql_store.load("s")
    assert [m.text for m in snap.history] == ["A"]
    statuses = [(a.status, a.counted, a.owner) for a in sql_store.attempts("s")]
    assert statuses == [
        ("compression_failed_provider_error", True, None),
        ("compressed", False, "w1"),
        ("superseded", False, "w2"),
    ]
    assert snap.consecutive_failures == 0


def test_nothing_is_deleted_and_the_original_is_exportable(sql_store: SessionStore) -> None:
    """After two compactions and a clear every original turn is still there, in order."""
    fill(sql_store, "s", 3)
    info = {"status": "compressed", "trigger": "auto", "new_token_count": 5}
    sql_store.commit_compaction(sql_store.load("s"), (Message.user("S1"),), info)
    sql_store.append_turn("s", "t3", turn(3))
    sql_store.commit_compaction(sql_store.load("s"), (Message.user("S2"),), info)
    sql_store.clear("s")
    entries = sql_store.entries("s")
    originals = [m.text for e in entries if e.kind == "turn" for m in e.messages]
    assert originals == [t for i in range(4) for t in (f"question {i}", f"answer {i}")]
    assert [e.kind for e in entries if e.replaced_by is None] == ["clear"]
    assert sql_store.load("s").history == ()


def test_breaker_count_lives_with_the_session(sql_store: SessionStore) -> None:
    """Counted failures add up across workers; uncounted ones do not; a success resets."""
    fill(sql_store, "s", 1)
    other = reopen(sql_store)
    try:
        failed = {"status": "compression_failed_provider_error", "trigger": "auto"}
        assert sql_store.record_attempt("s", failed, counted=True, epoch=0) == 1
        assert other.record_attempt("s", failed, counted=True, epoch=0) == 2
        assert other.record_attempt("s", {**failed, "trigger": "hard"}, counted=False, epoch=0) == 2
        assert sql_store.load("s").consecutive_failures == 2
        info = {"status": "compressed", "trigger": "auto", "new_token_count": 5}
        other.commit_compaction(other.load("s"), (Message.user("S"),), info)
        assert sql_store.load("s").consecutive_failures == 0
        assert [a.failures_after for a in sql_store.attempts("s")] == [1, 2, 2, 0]
    finally:
        other.close()


def test_calibration_and_last_usage_are_shared(sql_store: SessionStore) -> None:
    """What one worker learned (calibration, last reported usage) the next worker reads."""
    sql_store.ensure("s", META)
    sql_store.append_turn(
        "s",
        "t0",
        turn(0),
        usage={"prompt_tokens": 1234, "since": 5},
        calibration={"factor": 1.3, "samples": 2},
    )
    other = reopen(sql_store)
    try:
        snap = other.load("s")
        assert snap.count_base == (1234, 5)
        assert snap.calibration == {"factor": 1.3, "samples": 2}
        assert snap.usage == {"prompt_tokens": 1234, "since": 5}
    finally:
        other.close()


def test_list_sessions_counts_turns_and_compactions(any_store: SessionStore) -> None:
    """Every backend lists its sessions with their sizes."""
    any_store.ensure("one", META)
    any_store.append_turn("one", "t0", turn(0))
    any_store.ensure("two", META)
    listing = {s.session_id: s for s in any_store.list_sessions()}
    assert set(listing) == {"one", "two"}
    assert listing["one"].turns >= 1
    assert listing["two"].meta["model"] == "fake-model"


@pytest.mark.parametrize("sid", ['it\'s "quoted"', "a/b/../c", "'; DROP TABLE ac_sessions; --"])
def test_session_ids_with_quotes_and_slashes_are_data(sql_store: SessionStore, sid: str) -> None:
    """Quotes, slashes and SQL in an id round-trip as plain data."""
    fill(sql_store, sid, 2)
    assert sql_store.load(sid).entries[1].turn_id == "t1"
    assert sid in {s.session_id for s in sql_store.list_sessions()}


def test_an_incremental_load_equals_a_full_one(sql_store: SessionStore) -> None:
    """load(after=…) gives the same snapshot as a full read, across appends and a commit."""
    fill(sql_store, "s", 2)
    first = sql_store.load("s")
    sql_store.append_turn("s", "t2", turn(2), usage={"prompt_tokens": 9, "since": 1})
    assert sql_store.load("s", after=first) == sql_store.load("s")
    info = {"status": "compressed", "trigger": "auto", "new_token_count": 5}
    sql_store.commit_compaction(sql_store.load("s"), (Message.user("S"),), info)
    sql_store.append_turn("s", "t3", turn(3))
    assert sql_store.load("s", after=first) == sql_store.load("s")
    assert sql_store.load("s", after=first).history[0].text == "S"


@pytest.mark.parametrize("version", [1, 2])
def test_an_older_schema_is_migrated_in_order_and_keeps_its_data(
    sql_store: SessionStore, version: int
) -> None:
    """A version-1 database (no hold column) is brought to the latest version on first use, its
    data as it was; a version-2 one written before design decision 69 (no growth log in the
    session's usage) reads as it was and takes the growth log from the next append."""
    from autocompact.sessions.stores.sql import MIGRATIONS

    with sql_store._transaction(write=True) as cur:  # type: ignore[attr-defined]
        cur.execute("CREATE TABLE autocompact_schema (id INTEGER PRIMARY KEY, version INTEGER)")
        for statements in MIGRATIONS[:version]:
            for statement in statements:
                cur.execute(statement)
        cur.execute("INSERT INTO autocompact_schema (id, version) VALUES (1, ?)", (version,))
        cur.execute(
            "INSERT INTO ac_sessions (id, meta, created, updated, failures) "
            "VALUES ('old', '{}', 'x', 'x', 2)"
        )
        if version >= 2:
            cur.execute("UPDATE ac_sessions SET hold_until = 40000 WHERE id = 'old'")
    store = reopen(sql_store)
    try:
        old = store.load("old")
        assert old.growth is None
        assert (old.consecutive_failures, old.hold_until) == (2, 40_000 if version >= 2 else None)
        store.append_turn("old", "t0", turn(0))
        assert [e.turn_id for e in store.load("old").entries] == ["t0"]
        growth = {"recent": [5], "last_count": 9, "since_compaction": None, "compacted_to": 0}
        store.append_turn("old", "t1", turn(1), growth=growth)
        assert store.load("old").growth == growth
        assert "growth" not in (store.load("old").usage or {})  # kept apart from the usage
        with store._transaction(write=False) as cur:  # type: ignore[attr-defined]
            cur.execute("SELECT version FROM autocompact_schema")
            assert cur.fetchone()[0] == LATEST_SCHEMA == 2
    finally:
        store.close()


def test_an_ineffective_summary_commits_but_counts(sql_store: SessionStore) -> None:
    """breaker='add' (an ineffective compaction): the history is replaced and the count grows."""
    fill(sql_store, "s", 2)
    sql_store.record_attempt(
        "s", {"status": "compression_failed_empty_summary"}, counted=True, epoch=0
    )
    info = {"status": "compressed", "trigger": "auto", "new_token_count": 5}
    result = sql_store.commit_compaction(
        sql_store.load("s"), (Message.user("S"),), info, breaker="add", hold_until=1234
    )
    snap = sql_store.load("s")
    assert (result.committed, result.consecutive_failures) == (True, 2)
    assert (snap.consecutive_failures, snap.hold_until) == (2, 1234)
    assert [(a.counted, a.reset) for a in sql_store.attempts("s")] == [(True, False), (True, False)]


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "postgres-async", "jsonl"])
def test_a_model_switch_replaces_the_model_fields_of_the_meta(kind: str, tmp_path: Path) -> None:
    """record_model (a chat's /model) replaces the provider, model, window and window source of
    the stored meta and keeps the rest; ensure still keeps the first meta; a missing session is
    a SessionStoreError (there was no way to record a switch: a resumed chat took the old
    model)."""
    store = make_store(kind, tmp_path)
    try:
        first = {**META, "window_source": "configured", "system_instruction": "be brief"}
        store.ensure("s", {**first, "cwd": "/work"})
        store.append_turn("s", "t0", turn(0))
        store.record_model(
            "s", provider="fake", model="fake-2", context_window=8_000, window_source="server"
        )
        store.ensure("s", META)  # another worker starting on the old model changes nothing
        meta = store.load("s").meta
        assert {k: meta.get(k) for k in ("model", "context_window", "window_source")} == {
            "model": "fake-2",
            "context_window": 8_000,
            "window_source": "server",
        }
        assert (meta["provider"], meta["system_instruction"], meta["cwd"]) == (
            "fake",
            "be brief",
            "/work",
        )
        assert [m.text for m in store.load("s").history] == ["question 0", "answer 0"]
        (listed,) = store.list_sessions()
        assert listed.meta["model"] == "fake-2"
        with pytest.raises(SessionStoreError, match=r"no (saved )?session"):
            store.record_model("missing", provider="fake", model="m", context_window=1_000)
    finally:
        store.close()

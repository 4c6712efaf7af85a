"""ChatSession / AsyncChatSession with store=…, session_id=…: workers sharing one conversation."""

from __future__ import annotations

from pathlib import Path

import pytest

from autocompact import Message
from autocompact.chat import AsyncChatSession, ChatSession
from autocompact.compaction import CompressionStatus
from autocompact.errors import SessionStoreError
from autocompact.sessions.stores import SessionStore, SqliteStore
from autocompact.testing import FakeProvider, FakeReply

WINDOW = 100_000  # auto 70,000 · hard 77,000


def big_history(store: SessionStore, sid: str, tokens: int = 72_000, per: int = 2_000) -> None:
    """Store ``sid`` with a user/model history of about ``tokens`` estimated tokens."""
    store.ensure(sid, {"provider": "fake", "model": "fake-model", "context_window": WINDOW})
    for i in range(tokens // per // 2):
        pair = (Message.user(chr(97 + i % 26) * per * 4), Message.model("m" * per * 4))
        store.append_turn(sid, f"old-{i}", pair)


def worker(store: SessionStore, sid: str, fake: FakeProvider, name: str) -> ChatSession:
    """A ChatSession as one worker of a server would open it."""
    return ChatSession(fake, context_window=WINDOW, store=store, session_id=sid, store_owner=name)


def test_consecutive_turns_on_different_workers_share_one_history(sql_store: SessionStore) -> None:
    """Turn 1 on worker A, turn 2 on worker B: B sends turn 1 and the store holds both."""
    fake_a, fake_b = FakeProvider(), FakeProvider()
    a, b = worker(sql_store, "c", fake_a, "A"), worker(sql_store, "c", fake_b, "B")
    a.send("first")
    b.send("second")
    assert [m.text for m in fake_b.requests[-1].messages] == ["first", "OK.", "second"]
    assert [m.text for m in sql_store.load("c").history] == ["first", "OK.", "second", "OK."]
    assert [e.owner for e in sql_store.entries("c")] == ["A", "B"]


def test_a_retried_turn_is_answered_from_the_store(sql_store: SessionStore) -> None:
    """The same turn id again (a client retry after a lost reply): no model call, no duplicate."""
    fake = FakeProvider()
    a = worker(sql_store, "c", fake, "A")
    first = a.send("hello", turn_id="turn-1")
    again = worker(sql_store, "c", fake, "B").send("hello", turn_id="turn-1")
    assert again.text == first.text
    assert len(fake.requests) == 1
    assert len(sql_store.load("c").history) == 2


def test_auto_compaction_commits_the_summary_for_every_worker(sql_store: SessionStore) -> None:
    """A compaction on worker A replaces the range; worker B's next request starts with it."""
    big_history(sql_store, "c")
    fake = FakeProvider()
    a = worker(sql_store, "c", fake, "A")
    a.send("next")
    assert [r.purpose for r in fake.requests] == ["side_query", "chat"]
    assert a.compactions[-1].status is CompressionStatus.COMPRESSED
    attempts = sql_store.attempts("c")
    assert [(x.status, x.owner) for x in attempts] == [("compressed", "A")]
    fake_b = FakeProvider()
    worker(sql_store, "c", fake_b, "B").send("after")
    sent = fake_b.requests[-1].messages
    assert sent[0].text.startswith("This session continues")
    assert sent[-1].text == "after"
    assert len(sent) < 36 + 2
    assert sum(1 for e in sql_store.entries("c") if e.kind == "turn") == 20


def test_while_another_worker_holds_the_lease_no_side_query_is_sent(
    sql_store: SessionStore,
) -> None:
    """Worker B skips the compaction worker A is making, and still sends and stores its turn."""
    big_history(sql_store, "c")
    assert sql_store.acquire_lease("c", "A") is not None
    fake_b = FakeProvider()
    b = worker(sql_store, "c", fake_b, "B")
    b.send("meanwhile")
    assert [r.purpose for r in fake_b.requests] == ["chat"]
    assert b.compactions == []
    assert b.consecutive_failures == 0
    assert sql_store.load("c").history[-2].text == "meanwhile"
    assert sql_store.attempts("c") == ()


def test_the_breaker_count_is_shared(sql_store: SessionStore) -> None:
    """A failed summary on worker A counts for worker B too."""
    big_history(sql_store, "c")
    empty = FakeProvider(
        responder=lambda r: FakeReply(text="" if r.purpose == "side_query" else "OK.")
    )
    worker(sql_store, "c", empty, "A").send("one")
    b = worker(sql_store, "c", FakeProvider(), "B")
    assert b.consecutive_failures == 1
    assert [(x.counted, x.failures_after) for x in sql_store.attempts("c")] == [(True, 1)]


def test_a_failed_store_write_leaves_the_session_as_it_was(tmp_path: Path) -> None:
    """The append fails (inside its transaction): no half-written turn, history unchanged."""

    def boom(step: str) -> None:
        if step == "append:written":
            raise SessionStoreError("disk gone", store="test")

    store = SqliteStore(tmp_path / "s.db", on_step=boom)
    session = worker(store, "c", FakeProvider(), "A")
    with pytest.raises(SessionStoreError, match="disk gone"):
        session.send("lost")
    assert session.history == ()
    assert SqliteStore(tmp_path / "s.db").load("c").entries == ()


async def test_the_async_session_uses_the_store_too(tmp_path: Path) -> None:
    """AsyncChatSession appends and resumes through the same store."""
    store = SqliteStore(tmp_path / "s.db")
    a = AsyncChatSession(FakeProvider(), context_window=WINDOW, store=store, session_id="c")
    await a.send("hi", turn_id="t1")
    await a.send("hi", turn_id="t1")
    b = AsyncChatSession(FakeProvider(), context_window=WINDOW, store=store, session_id="c")
    assert [m.text for m in b.history] == ["hi", "OK."]


async def test_the_async_store_protocol_awaits_every_call(sql_store: SessionStore) -> None:
    """AsyncStore: append, load, lease and commit from async code, same semantics."""
    from autocompact.sessions.stores import AsyncStore

    store = AsyncStore(sql_store)
    await store.ensure("c", {"provider": "fake"})
    pair = (Message.user("q"), Message.model("a"))
    first = await store.append_turn("c", "t1", pair)
    again = await store.append_turn("c", "t1", pair)
    assert (first.duplicate, again.duplicate) == (False, True)
    base = await store.load("c")
    assert await store.acquire_lease("c", "A") is not None
    assert await store.acquire_lease("c", "B") is None
    info = {"status": "compressed", "trigger": "auto", "new_token_count": 1}
    assert (await store.commit_compaction(base, (Message.user("S"),), info)).committed
    assert not (await store.commit_compaction(base, (Message.user("T"),), info)).committed
    assert [m.text for m in (await store.load("c")).history] == ["S"]
    assert [s.session_id for s in await store.list_sessions()] == ["c"]

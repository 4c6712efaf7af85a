"""Design decision 69: a stored session keeps the outgrown judgement (SPEC §10.2, decision 63).

A compaction needed again fewer than 5 calls after an effective one is judged outgrown: one
more on the breaker's count and a hold. With a store, both are written there in one write, so
the compaction step that follows (which reads the stored counters back), another worker bound
to the same session and a session reopened from the store all see them — on every backend.
The growth log the judgement is made on is the session's too: stored with each turn, read at
the start of the next by whichever worker sends it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autocompact.chat import AsyncChatSession, ChatSession
from autocompact.compaction import CompressionService
from autocompact.compaction.accounting import HOLD_GROWTH_SHARE
from autocompact.errors import SessionStoreError
from autocompact.events import CompactionOutgrown, CompactionStarted
from autocompact.providers.base import ChatRequest
from autocompact.sessions.stores import SessionStore, open_async_store
from autocompact.sessions.stores.base import JsonDict
from autocompact.testing import FakeProvider, FakeReply

from .conftest import fresh_postgres_schema, make_store

WINDOW = 64_000
SYSTEM = "s" * 104_000  # 26K tokens, as in the recorded Claude Code sessions
STEADY = "p" * 4 * 2_000
BURST = "b" * 4 * 11_000


def _first_summary_only() -> FakeProvider:
    """The first side query writes a summary; every later one comes back empty (a failure)."""
    calls = {"side": 0}

    def responder(request: ChatRequest) -> FakeReply:
        if request.purpose != "side_query":
            return FakeReply(text="OK.")
        calls["side"] += 1
        if calls["side"] == 1:
            return FakeReply(text="<state_snapshot>continue</state_snapshot>")
        return FakeReply(text="")

    return FakeProvider(responder=responder)


def _session(store: Any, session_id: str | None, events: list[object]) -> ChatSession:
    session = ChatSession(
        _first_summary_only(),
        context_window=WINDOW,
        system_instruction=SYSTEM,
        clear_tool_outputs=False,
        store=store,
        session_id=session_id,
    )
    session.add_hook(events.append)
    return session


def _compact_then_one_more(session: ChatSession) -> None:
    """Steady sends until a compaction succeeds, then one more call."""
    for _ in range(30):
        session.send(STEADY)
        if session.compactions:
            break
    assert session.compactions, "no compaction within 30 sends"
    session.send(STEADY)


def _drive(session: ChatSession, events: list[object]) -> CompactionOutgrown:
    """Steady sends until a compaction succeeds, one more call, then a burst that brings the
    count back to auto 2 calls later: that compaction is judged outgrown, and the summary that
    follows fails (counted too)."""
    _compact_then_one_more(session)
    session.send(BURST)
    judged = [e for e in events if isinstance(e, CompactionOutgrown)]
    assert len(judged) == 1
    return judged[0]


def _probe(session: ChatSession) -> list[tuple[int, int | None]]:
    """The counters each compaction of ``session`` starts with (after its step read the
    stored ones back)."""
    probes: list[tuple[int, int | None]] = []

    def hook(event: object) -> None:
        if isinstance(event, CompactionStarted):
            probes.append((session.consecutive_failures, session.hold_until))

    session.add_hook(hook)
    return probes


@pytest.fixture(params=["sqlite", "jsonl", "postgres", "postgres-async"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    """A fresh store of each kind (PostgreSQL through the sync and the asyncio driver)."""
    made = make_store(request.param, tmp_path)
    yield made
    made.close()


def test_the_judgement_survives_the_step_a_reopen_and_reaches_a_second_worker(
    store: SessionStore,
) -> None:
    # The same sends without a store: what the judgement and the failed summary leave.
    plain_events: list[object] = []
    plain = _session(None, None, plain_events)
    plain_judged = _drive(plain, plain_events)
    assert plain.consecutive_failures == 2  # outgrown + the failed summary after it

    events: list[object] = []
    session = _session(store, "shared", events)
    other_events: list[object] = []
    other = _session(store, "shared", other_events)  # a second worker, bound from the start
    probes = _probe(session)
    judged = _drive(session, events)
    assert judged == plain_judged
    assert judged.hold_until == round(judged.compacted_to + HOLD_GROWTH_SHARE * WINDOW)

    # The compaction step after the judgement read the stored counters: the judgement is there.
    assert probes[-1] == (1, judged.hold_until)
    # The failed summary counted on top of it, as without a store.
    assert (session.consecutive_failures, session.hold_until) == (
        plain.consecutive_failures,
        plain.hold_until,
    )
    stored = store.load("shared")
    assert (stored.consecutive_failures, stored.hold_until) == (2, plain.hold_until)
    outgrown = [a for a in store.attempts("shared") if a.status == "outgrown"]
    assert len(outgrown) == 1
    assert outgrown[0].counted
    assert outgrown[0].info["hold_until"] == judged.hold_until

    # Reopened from the store (a restart): the same count and hold.
    reopened = _session(store, "shared", [])
    assert (reopened.consecutive_failures, reopened.hold_until) == (2, plain.hold_until)

    # The second worker reads them on its next send: its compaction starts from them (its
    # summary works and resets them, as it would have on the first worker). The send grows the
    # count past the hold, which begins at the count the failed summary was attempted at.
    other_probes = _probe(other)
    assert plain.estimate_tokens("p" * 400) < plain.hold_until  # a small send is held
    other.send("p" * 4 * 7_000)
    assert other_probes == [(2, plain.hold_until)]
    assert not any(isinstance(e, CompactionOutgrown) for e in other_events)


def test_the_judgement_is_recorded_once_per_epoch(store: SessionStore) -> None:
    """Two workers judging the same compaction count it once: the second write changes nothing."""
    store.ensure("s", {"provider": "fake", "model": "m", "context_window": WINDOW})
    epoch = store.load("s").epoch
    info: JsonDict = {"trigger": "auto", "original_token_count": 45_000, "new_token_count": 30_000}
    assert store.record_outgrown("s", info, epoch=epoch, hold_until=36_400, owner="a") is True
    assert store.record_outgrown("s", info, epoch=epoch, hold_until=99_999, owner="b") is False
    stored = store.load("s")
    assert (stored.consecutive_failures, stored.hold_until) == (1, 36_400)
    attempts = [a for a in store.attempts("s") if a.status == "outgrown"]
    assert len(attempts) == 1
    assert attempts[0].failures_after == 1
    # A later epoch (after another compaction or a clear) is judged again.
    store.clear("s")
    epoch = store.load("s").epoch
    assert store.record_outgrown("s", info, epoch=epoch, hold_until=7_000) is True
    stored = store.load("s")
    assert (stored.consecutive_failures, stored.hold_until) == (1, 7_000)


def test_the_judgement_holds_while_another_worker_has_the_lease(tmp_path: Path) -> None:
    """The side query after the judgement is skipped (another worker compacts): the stored
    count and hold are the judgement's all the same, and the next send keeps them."""
    store = make_store("sqlite", tmp_path)
    events: list[object] = []
    session = _session(store, "leased", events)
    _compact_then_one_more(session)
    assert store.acquire_lease("leased", "another-worker") is not None
    session.send(BURST)
    (judged,) = [e for e in events if isinstance(e, CompactionOutgrown)]
    stored = store.load("leased")
    assert (stored.consecutive_failures, stored.hold_until) == (1, judged.hold_until)
    session.send("p" * 400)  # reads the store again before the send
    assert (session.consecutive_failures, session.hold_until) == (1, judged.hold_until)
    store.close()


class _OlderStore:
    """A store written before ``record_outgrown`` and ``append_turn(growth=)``: everything
    else is the SQLite store's."""

    def __init__(self, inner: SessionStore) -> None:
        self._inner = inner

    def append_turn(
        self,
        session_id: str,
        turn_id: str,
        messages: Any,
        *,
        usage: JsonDict | None = None,
        calibration: JsonDict | None = None,
        owner: str | None = None,
    ) -> Any:
        return self._inner.append_turn(
            session_id, turn_id, messages, usage=usage, calibration=calibration, owner=owner
        )

    def __getattr__(self, name: str) -> Any:
        if name == "record_outgrown":
            raise AttributeError(name)
        return getattr(self._inner, name)


def test_a_store_without_record_outgrown_gets_a_counted_attempt(tmp_path: Path) -> None:
    """An older store's session keeps its growth log in memory (as before) and still judges."""
    inner = make_store("sqlite", tmp_path)
    events: list[object] = []
    session = _session(_OlderStore(inner), "older", events)
    judged = _drive(session, events)
    stored = inner.load("older")
    assert stored.growth is None
    assert stored.consecutive_failures == 2
    assert [a.status for a in inner.attempts("older")].count("outgrown") == 1
    assert session.consecutive_failures == 2
    assert judged.hold_until > 0
    inner.close()


@pytest.mark.parametrize("kind", ["sqlite", "jsonl", "postgres"])
def test_async_sessions_record_the_judgement(kind: str, tmp_path: Path) -> None:
    """``AsyncChatSession`` on an asyncio store (SQLite and JSONL in a thread, psycopg's async
    driver for PostgreSQL) records and reads back the same judgement."""
    if kind == "postgres":
        address = fresh_postgres_schema()
    elif kind == "sqlite":
        address = f"sqlite:///{tmp_path / 'sessions.db'}"
    else:
        address = str(tmp_path / "jsonl")

    async def main() -> tuple[CompactionOutgrown, int, int | None, int, int | None]:
        store = open_async_store(address)
        events: list[object] = []
        session = AsyncChatSession(
            _first_summary_only(),
            context_window=WINDOW,
            system_instruction=SYSTEM,
            clear_tool_outputs=False,
            store=store,
            session_id="async",
        )
        session.add_hook(events.append)
        try:
            for _ in range(30):
                await session.send(STEADY)
                if session.compactions:
                    break
            await session.send(STEADY)
            await session.send(BURST)
            (judged,) = [e for e in events if isinstance(e, CompactionOutgrown)]
            stored = await store.load("async")
            assert stored.growth is not None  # the log went with each awaited append
            assert stored.growth["since_compaction"] is None  # judged
            return (
                judged,
                session.consecutive_failures,
                session.hold_until,
                stored.consecutive_failures,
                stored.hold_until,
            )
        finally:
            await store.close()

    judged, failures, hold, stored_failures, stored_hold = asyncio.run(main())
    assert failures == stored_failures == 2
    assert hold == stored_hold
    assert hold is not None
    assert judged.hold_until > 0


class _FailingJudgement:
    """The SQLite store, whose ``record_outgrown`` fails (once) after writing nothing."""

    def __init__(self, inner: SessionStore) -> None:
        self._inner = inner
        self.fail = True

    def record_outgrown(self, *args: Any, **kwargs: Any) -> bool:
        if self.fail:
            self.fail = False
            raise SessionStoreError("the database is gone", store="sqlite:///x")
        return self._inner.record_outgrown(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_a_failed_judgement_write_leaves_the_session_as_it_was(tmp_path: Path) -> None:
    """The send raises before its request goes out; history and counters are unchanged, and
    the next send judges the compaction again (recorded once)."""
    inner = make_store("sqlite", tmp_path)
    store = _FailingJudgement(inner)
    events: list[object] = []
    session = _session(store, "failing", events)
    _compact_then_one_more(session)
    history, sent = session.history, len(session.provider.requests)  # type: ignore[attr-defined]
    with pytest.raises(SessionStoreError, match="the database is gone"):
        session.send(BURST)
    assert session.history == history
    assert len(session.provider.requests) == sent  # type: ignore[attr-defined]
    assert (session.consecutive_failures, session.hold_until) == (0, None)
    assert inner.load("failing").history == history
    assert not any(isinstance(e, CompactionOutgrown) for e in events)
    session.send(BURST)
    assert sum(isinstance(e, CompactionOutgrown) for e in events) == 1
    assert [a.status for a in inner.attempts("failing")].count("outgrown") == 1
    inner.close()


# -- the growth log is the session's (design decision 69) ------------------------------------


def test_a_restart_between_a_compaction_and_the_burst_still_judges_it(
    store: SessionStore,
) -> None:
    """The growth log is stored with each turn: a session reopened from the store knows the
    compaction two calls back and the pace, and judges the burst as the first process would."""
    first = _session(store, "restart", [])
    _compact_then_one_more(first)
    kept = store.load("restart").growth
    assert kept is not None
    assert kept["since_compaction"] == 1
    assert kept["recent"]
    events: list[object] = []
    reopened = _session(store, "restart", events)  # a new process: nothing in memory
    reopened.send(BURST)
    judged = [e for e in events if isinstance(e, CompactionOutgrown)]
    assert len(judged) == 1
    assert judged[0].calls == 2
    assert judged[0].compacted_to == kept["compacted_to"]


def test_the_burst_on_another_worker_judges_the_compaction_once(store: SessionStore) -> None:
    """Worker A compacts; worker B's burst two calls later judges it (the session's calls: B
    made none before); B's summary fails, so no new compaction starts a clock, and A's next
    send, over auto too, reads the judged log and does not judge it again."""
    a_events: list[object] = []
    a = _session(store, "pair", a_events)
    b_events: list[object] = []
    b = _session(store, "pair", b_events)
    b.provider = FakeProvider(
        responder=lambda r: FakeReply(text="" if r.purpose == "side_query" else "OK.")
    )
    b.compression = CompressionService(b.provider)
    _compact_then_one_more(a)
    b.send(BURST)
    assert sum(isinstance(e, CompactionOutgrown) for e in b_events) == 1
    assert store.load("pair").consecutive_failures == 2  # outgrown + B's failed summary
    a.send(STEADY)
    assert not any(isinstance(e, CompactionOutgrown) for e in a_events)
    assert [x.status for x in store.attempts("pair")].count("outgrown") == 1


def test_workers_taking_turns_measure_the_sessions_pace(store: SessionStore) -> None:
    """Two workers alternating 2K sends: the stored growth per call is 2K (each worker alone
    would see 4K between its own calls), so the room a compaction leaves is the session's."""
    workers = [_session(store, "turns", []), _session(store, "turns", [])]
    for n in range(6):
        workers[n % 2].send(STEADY)
    growth = store.load("turns").growth
    assert growth is not None
    assert len(growth["recent"]) == 5
    assert all(2_000 <= g <= 2_100 for g in growth["recent"])


def test_a_clear_starts_the_stored_growth_log_over(store: SessionStore) -> None:
    session = _session(store, "cleared", [])
    _compact_then_one_more(session)
    assert store.load("cleared").growth is not None
    session.clear()
    assert store.load("cleared").growth is None
    events: list[object] = []
    other = _session(store, "cleared", events)
    other.send(BURST)  # nothing to judge: the clear ended the compaction's clock
    assert not any(isinstance(e, CompactionOutgrown) for e in events)


def test_a_malformed_stored_growth_log_is_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A growth log the store holds but this build cannot read never fails a turn: the
    worker keeps its own log and says which session's field it skipped."""
    store = make_store("sqlite", tmp_path)
    session = _session(store, "bad", [])
    session.send(STEADY)
    with store._transaction(write=True) as cur:  # type: ignore[attr-defined]
        cur.execute(
            "UPDATE ac_sessions SET usage = ? WHERE id = 'bad'", ('{"growth": {"recent": [-1]}}',)
        )
    with caplog.at_level("WARNING", logger="autocompact"):
        session.send(STEADY)
    assert "growth.recent" in caplog.text
    assert "bad" in caplog.text
    assert len(store.load("bad").history) == 4
    store.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "jsonl"])
def test_workers_judging_at_once_count_it_once(kind: str, tmp_path: Path) -> None:
    """Eight workers (each its own store object, as separate processes would have) record the
    same judgement at the same moment: one write wins, the count goes up by one."""
    import threading

    from autocompact.sessions.stores import open_store

    if kind == "postgres":
        address = fresh_postgres_schema()
    elif kind == "sqlite":
        address = f"sqlite:///{tmp_path / 'sessions.db'}"
    else:
        address = str(tmp_path / "jsonl")
    stores = [open_store(address) for _ in range(8)]
    stores[0].ensure("race", {"provider": "fake", "model": "m", "context_window": WINDOW})
    epoch = stores[0].load("race").epoch
    barrier = threading.Barrier(len(stores))
    results: list[bool] = []

    def judge(store: SessionStore, n: int) -> None:
        barrier.wait()
        info: JsonDict = {"trigger": "auto", "original_token_count": 45_000}
        results.append(store.record_outgrown("race", info, epoch=epoch, hold_until=36_400 + n))

    threads = [threading.Thread(target=judge, args=(s, n)) for n, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert sorted(results) == [False] * 7 + [True]
        stored = stores[0].load("race")
        assert stored.consecutive_failures == 1
        assert [a.status for a in stores[0].attempts("race")].count("outgrown") == 1
    finally:
        for store in stores:
            store.close()

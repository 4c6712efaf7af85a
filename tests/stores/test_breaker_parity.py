"""A stored session counts exactly as an in-memory one (compaction/accounting.record_attempt).

The same script drives a ``ChatSession`` with ``store=`` and one without: an ineffective
compaction and the hold it starts, failed rescues on a small window where *hard* equals *auto*,
a manual compaction that ends the hold. After every step the breaker's count, the hold, the
history and the side queries sent must be the same. A summary superseded by another worker's
commit leaves the stored count and hold where they were, as a no-op does in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from autocompact import Message
from autocompact.chat import ChatSession
from autocompact.compaction import CompressionStatus
from autocompact.providers.base import ChatRequest
from autocompact.sessions.stores import SessionStore
from autocompact.testing import FakeProvider, FakeReply
from autocompact.thresholds import compute_thresholds

from .conftest import make_store

KINDS = ["sqlite", "postgres", "postgres-async", "jsonl"]
SUMMARY = "<state_snapshot>\n<overall_goal>continue</overall_goal>\n</state_snapshot>"


def text_history(tokens: int, per: int = 2_000) -> list[Message]:
    """A user/model history of about ``tokens`` estimated tokens, ending on a model reply."""
    n = max(2, tokens // per)
    n -= n % 2
    return [
        Message.user(chr(97 + i % 26) * per * 4) if i % 2 == 0 else Message.model("m" * per * 4)
        for i in range(n)
    ]


def empty_summaries(request: ChatRequest) -> FakeReply:
    """Every side query comes back empty (a failed summary); chat turns answer OK."""
    return FakeReply(text="" if request.purpose == "side_query" else "OK.")


def twins(
    store: SessionStore,
    responder: Callable[[ChatRequest], FakeReply] | None,
    window: int,
    history: list[Message],
    system: str | None = None,
) -> tuple[ChatSession, ChatSession, FakeProvider, FakeProvider]:
    """The same session in memory and in ``store`` (its history stored as turns)."""
    store.ensure("s", {"provider": "fake", "model": "fake-model", "context_window": window})
    for i in range(0, len(history), 2):
        store.append_turn("s", f"old-{i}", history[i : i + 2])
    mem_fake, st_fake = FakeProvider(responder=responder), FakeProvider(responder=responder)
    options = {"system_instruction": system, "clear_tool_outputs": False}
    memory = ChatSession(mem_fake, context_window=window, history=history, **options)  # type: ignore[arg-type]
    stored = ChatSession(st_fake, context_window=window, store=store, session_id="s", **options)  # type: ignore[arg-type]
    return memory, stored, mem_fake, st_fake


def state(session: ChatSession, fake: FakeProvider) -> tuple[object, ...]:
    """What must agree: the breaker, the hold, the history, the side queries sent."""
    side = sum(1 for r in fake.requests if r.purpose == "side_query")
    statuses = [c.status for c in session.compactions]
    return (
        session.consecutive_failures,
        session.hold_until,
        session.breaker_open,
        [m.text for m in session.history],
        side,
        statuses,
    )


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    made = make_store(request.param, tmp_path)
    yield made
    made.close()


def test_an_ineffective_compaction_and_its_hold_count_the_same(store: SessionStore) -> None:
    """200K window, a 163K system prompt: every compaction is ineffective (counted, held)."""
    memory, stored, mem_fake, st_fake = twins(
        store, None, 200_000, text_history(20_000), system="s" * 652_000
    )
    script: list[Callable[[ChatSession], object]] = [
        lambda s: s.send("x" * 4),  # ineffective: +1, hold starts
        lambda s: s.send("y" * 40),  # held: no side query
        lambda s: s.send("y" * 40),
        lambda s: s.send("g" * 4 * 21_000),  # past the hold: another ineffective attempt
        lambda s: s.send("y" * 40),
        lambda s: s.compress(),  # manual: never held, ends the hold
        lambda s: s.send("z" * 40),
    ]
    seen = []
    for step in script:
        step(memory)
        step(stored)
        assert state(stored, st_fake) == state(memory, mem_fake)
        seen.append((memory.consecutive_failures, memory.hold_until is not None))
    assert (1, True) in seen  # the script did reach an ineffective, held state
    assert memory.compactions[0].ineffective
    assert stored.compactions[0].ineffective


def test_small_window_failed_rescues_count_the_same(store: SessionStore) -> None:
    """32K window (hard == auto): failed rescues count, hold, and open the breaker alike."""
    assert compute_thresholds(32_000).hard == compute_thresholds(32_000).auto
    memory, stored, mem_fake, st_fake = twins(store, empty_summaries, 32_000, text_history(26_000))
    script: list[Callable[[ChatSession], object]] = [
        lambda s: s.send("z" * 40),  # the hard rescue fails: +1 and a hold
        lambda s: s.send("z" * 40),  # held
        lambda s: s.send("g" * 4 * 3_400),  # grown past the hold: fails again, +1
        lambda s: s.send("g" * 4 * 3_400),  # and again: the breaker opens
        lambda s: s.send("z" * 40),
        lambda s: s.compress(),  # manual failure: counts nothing, ends the hold
        lambda s: s.send("z" * 40),
    ]
    counts = []
    for step in script:
        step(memory)
        step(stored)
        assert state(stored, st_fake) == state(memory, mem_fake)
        counts.append(memory.consecutive_failures)
    assert counts[0] == 1
    assert max(counts) >= 2


def test_a_rescue_failed_on_a_large_message_holds_the_same(store: SessionStore) -> None:
    """The hold begins at the pre-send count, the message being sent included, in a store as
    in memory: the next small send is held (it ran another side query when the hold left the
    message out)."""
    memory, stored, mem_fake, st_fake = twins(store, empty_summaries, 32_000, text_history(26_000))
    for session in (memory, stored):
        at = session.estimate_tokens("g" * 4 * 3_500)
        session.send("g" * 4 * 3_500)  # more than a tenth of the window; the rescue fails
        assert session.hold_until is not None
        assert session.hold_until >= at + 3_200
        session.send("z" * 40)  # held
    assert state(stored, st_fake) == state(memory, mem_fake)
    assert sum(1 for r in st_fake.requests if r.purpose == "side_query") == 1


def test_a_superseded_summary_leaves_the_count_and_hold_alone(store: SessionStore) -> None:
    """Another worker commits while this one summarizes: the summary is superseded (a no-op),
    and the breaker's count and hold stay what they were, as after a no-op in memory."""
    other: list[SessionStore] = [store]
    race = {"armed": False, "committed": False}

    def responder(request: ChatRequest) -> FakeReply:
        if request.purpose == "side_query" and race["armed"]:
            if race["committed"]:
                return FakeReply(text=SUMMARY)
            race["committed"] = True
            snap = other[0].load("s")  # another worker commits first (its count unchanged)
            info = {"status": "compressed", "trigger": "manual", "new_token_count": 10}
            other[0].commit_compaction(
                snap, snap.history[-2:], info, breaker="keep", hold_until=snap.hold_until
            )
            return FakeReply(text=SUMMARY)  # this worker's summary is good, but too late
        if request.purpose == "side_query":
            return FakeReply(text="")  # the automatic summaries fail
        return FakeReply(text="OK.")

    memory, stored, mem_fake, st_fake = twins(store, responder, 32_000, text_history(26_000))
    for s in (memory, stored):
        s.send("z" * 40)  # a failed hard rescue: count 1 and a hold, in both
    assert state(stored, st_fake) == state(memory, mem_fake)
    before = (stored.consecutive_failures, stored.hold_until)
    assert before[0] == 1
    assert before[1] is not None
    race["armed"] = True
    info = stored.compress()  # this summary is superseded by the other worker's commit
    assert info.status is CompressionStatus.NOOP
    assert info.error is not None
    assert "superseded" in info.error
    assert [a.status for a in store.attempts("s")][-1] == "superseded"
    assert (stored.consecutive_failures, stored.hold_until) == before
    assert (memory.consecutive_failures, memory.hold_until) == before  # memory did nothing


async def test_an_async_session_on_the_async_store_counts_the_same(tmp_path: Path) -> None:
    """AsyncChatSession on AsyncPostgresStore (every store call awaited) against an in-memory
    AsyncChatSession: the small-window script, step by step."""
    from autocompact.chat import AsyncChatSession
    from autocompact.sessions.stores.postgres import AsyncPostgresStore

    from .conftest import fresh_postgres_schema

    store = AsyncPostgresStore(fresh_postgres_schema())
    try:
        history = text_history(26_000)
        await store.ensure("s", {"provider": "fake", "model": "fake-model"})
        for i in range(0, len(history), 2):
            await store.append_turn("s", f"old-{i}", history[i : i + 2])
        mem_fake, st_fake = (
            FakeProvider(responder=empty_summaries),
            FakeProvider(responder=empty_summaries),
        )
        memory = AsyncChatSession(mem_fake, context_window=32_000, history=history)
        stored = AsyncChatSession(st_fake, context_window=32_000, store=store, session_id="s")
        for text in ["z" * 40, "z" * 40, "g" * 4 * 3_400, "g" * 4 * 3_400, "z" * 40]:
            await memory.send(text)
            await stored.send(text)
            assert state(stored, st_fake) == state(memory, mem_fake)  # type: ignore[arg-type]
        await memory.compress()
        await stored.compress()
        assert state(stored, st_fake) == state(memory, mem_fake)  # type: ignore[arg-type]
        assert memory.consecutive_failures >= 2
    finally:
        await store.close()

"""``StoreSession``: Agents SDK runs on two workers sharing one SQLite / PostgreSQL store."""

from __future__ import annotations

import json
from typing import Any

from agents import Agent, RunConfig, Runner, set_tracing_disabled

from autocompact.compaction import CompressionStatus
from autocompact.integrations.openai_agents import StoreSession
from autocompact.sessions.stores import SessionStore

from .agents_script import ScriptedModel
from .store_workers import turn_entries, two_stores
from .test_openai_agents import WINDOW, orphans, read, scripted

__all__ = ["two_stores"]

set_tracing_disabled(True)


async def run(model: ScriptedModel, session: StoreSession, text: str) -> None:
    """One request of the agent on ``session`` (the input filter installed)."""
    agent = Agent(name="coder", instructions="be brief", model=model, tools=[read])
    config = RunConfig(call_model_input_filter=session.call_model_input_filter)
    await Runner.run(agent, text, session=session, run_config=config)


def worker(store: SessionStore, request: str, **options: Any) -> StoreSession:
    """The session a worker builds for one request."""
    return StoreSession(store, "conv", context_window=WINDOW, turn_id=request, **options)


def prompts(items: list[Any]) -> list[str]:
    """The user prompts among items."""
    return [i["content"] for i in items if i.get("role") == "user"]


async def test_two_workers_continue_one_conversation(
    two_stores: tuple[SessionStore, SessionStore],
) -> None:
    """A request on worker B sends what worker A stored; the store holds both in order."""
    a, b = two_stores
    model = ScriptedModel(scripted())
    await run(model, worker(a, "r0"), "task 0")
    await run(model, worker(b, "r1"), "task 1")
    sent = model.requests[-2]["items"]  # B's first model call: A's turn, then its own prompt
    assert prompts(sent) == ["task 0", "task 1"]
    assert not orphans(sent)
    assert prompts(await worker(a, "x").get_items()) == ["task 0", "task 1"]


async def test_a_compaction_by_one_worker_is_what_the_other_sends(
    two_stores: tuple[SessionStore, SessionStore],
) -> None:
    """Turns alternate between workers; a summary committed by one replaces the range for both:
    the other's next request carries it and none of the summarized prompts; every request stays
    under the window."""
    a, b = two_stores
    model = ScriptedModel(scripted())
    sessions: list[StoreSession] = []
    for turn in range(8):
        session = worker((a, b)[turn % 2], f"r{turn}", summarizer=model, clear_tool_outputs=False)
        sessions.append(session)
        await run(model, session, f"task {turn}")
    committed = [
        (i, c)
        for i, s in enumerate(sessions)
        for c in s.compactions
        if c.status is CompressionStatus.COMPRESSED
    ]
    assert committed, "no compaction in 8 turns"
    index, _ = committed[0]
    chat = [r for r in model.requests if r["max_tokens"] != 20_000]
    assert max(r["tokens"] for r in chat) < WINDOW
    assert all(not orphans(r["items"]) for r in chat)
    snapshot = (b if index % 2 == 0 else a).load("conv")  # read by the *other* worker's store
    assert snapshot.epoch >= 1
    assert "state_snapshot" in json.dumps(await worker(b, "x").get_items())
    # The other worker's next request is the stored (compacted) history: task 0 is gone.
    other = worker((a, b)[(index + 1) % 2], "next", summarizer=model, clear_tool_outputs=False)
    await run(model, other, "after")
    last = [r for r in model.requests if r["max_tokens"] != 20_000][-2]["items"]
    assert "task 0" not in prompts(last)
    assert "state_snapshot" in json.dumps(last)
    summaries = [e for e in a.entries("conv") if e.kind == "summary"]
    assert len(summaries) == a.load("conv").epoch


async def test_a_retried_request_is_not_stored_twice(
    two_stores: tuple[SessionStore, SessionStore],
) -> None:
    """The same request (same turn id) run again on the other worker stores nothing new."""
    a, b = two_stores
    model = ScriptedModel(scripted())
    await run(model, worker(a, "r0"), "task 0")
    before = turn_entries(a, "conv")
    retry = worker(b, "r0")
    await run(model, retry, "task 0")
    assert turn_entries(b, "conv") == before
    assert retry.duplicates == before
    assert prompts(await worker(a, "x").get_items()) == ["task 0"]


async def test_lease_held_elsewhere_means_no_compaction_here(
    two_stores: tuple[SessionStore, SessionStore],
) -> None:
    """While worker A holds the compaction lease, B's forced compaction makes no side query and
    changes nothing."""
    a, b = two_stores
    model = ScriptedModel(scripted())
    for turn in range(2):
        await run(model, worker(a, f"r{turn}"), f"task {turn}")
    lease = a.acquire_lease("conv", "worker-a")
    assert lease is not None
    before = b.load("conv")
    session = worker(b, "x", summarizer=model)
    calls = len(model.requests)
    await session.run_compaction({"force": True})
    assert len(model.requests) == calls
    after = b.load("conv")
    assert (after.epoch, after.history) == (before.epoch, before.history)
    a.release_lease(lease)
    await session.run_compaction({"force": True})
    assert b.load("conv").epoch == before.epoch + 1


async def test_failed_summaries_count_in_the_store_for_every_worker(
    two_stores: tuple[SessionStore, SessionStore],
) -> None:
    """An automatic summary that fails on A adds one to the stored breaker count, which B
    reads; the stored turns stay as they were."""
    a, b = two_stores
    model = ScriptedModel(scripted(summary=""))
    for turn in range(6):
        session = worker((a, b)[turn % 2], f"r{turn}", summarizer=model, clear_tool_outputs=False)
        await run(model, session, f"task {turn}")
    failed = [
        c for c in a.attempts("conv") if c.counted and c.status != CompressionStatus.COMPRESSED
    ]
    assert failed
    assert b.load("conv").consecutive_failures == failed[-1].failures_after > 0
    assert prompts(await worker(b, "x").get_items()) == [f"task {t}" for t in range(6)]

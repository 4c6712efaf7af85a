"""``StoreSession``: Agents SDK runs on two workers sharing one SQLite / PostgreSQL store."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_output_text import AnnotationURLCitation
from openai.types.responses.response_reasoning_item import Summary

from autocompact.compaction import CompressionStatus
from autocompact.content import TextPart
from autocompact.integrations import _openai_agents_store
from autocompact.integrations.openai_agents import StoreSession, to_autocompact
from autocompact.sessions.stores import SessionStore, SqliteStore

from .agents_script import Script, ScriptedModel
from .store_workers import turn_entries, two_stores
from .test_openai_agents import WINDOW, big_history, orphans, read, scripted

__all__ = ["two_stores"]

set_tracing_disabled(True)


async def run(model: ScriptedModel, session: StoreSession, text: str, *, tool: Any = read) -> None:
    """One request of the agent on ``session`` (the input filter installed)."""
    agent = Agent(name="coder", instructions="be brief", model=model, tools=[tool])
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


# -- the items the model produced, sent back as it produced them ----------------------------------


@function_tool
def read_page(path: str) -> str:
    """Read a page of a file."""
    return f"{path}: " + "y" * 4_000


def rich(outputs: list[list[Any]]) -> Script:
    """A script whose items hold what the store's form does not (a call's id and status, a
    message's id, status and annotations) and what it does (a reasoning item's id and
    encrypted content, carried in its thinking part's signature). Each
    reply is recorded in ``outputs`` as the runner sends it back (its input form)."""
    ids = itertools.count()

    def script(system: str | None, items: list[Any], options: dict[str, Any]) -> list[Any]:
        k = next(ids)
        thought = ResponseReasoningItem(
            type="reasoning",
            id=f"rs_{k}",
            summary=[Summary(type="summary_text", text=f"think {k}")],
            encrypted_content=f"ENC-{k}",
        )
        reply: list[Any]
        if items[-1].get("role") == "user":
            call = ResponseFunctionToolCall(
                type="function_call",
                id=f"fc_{k}",
                call_id=f"call_{k}",
                name="read_page",
                arguments=json.dumps({"path": "a.py"}),
                status="completed",
            )
            reply = [thought, call]
        else:
            cite = AnnotationURLCitation(
                type="url_citation", url="https://a.example", title="a", start_index=0, end_index=4
            )
            text = ResponseOutputText(type="output_text", text=f"done {k}", annotations=[cite])
            message = ResponseOutputMessage(
                id=f"msg_{k}", type="message", role="assistant", status="completed", content=[text]
            )
            reply = [thought, message]
        outputs.append([o.model_dump(exclude_unset=True) for o in reply])
        return reply

    return script


def produced(items: list[Any]) -> list[Any]:
    """The items among ``items`` that a model produces (reasoning, calls, assistant messages)."""
    return [
        i
        for i in items
        if i.get("type") in ("reasoning", "function_call") or i.get("role") == "assistant"
    ]


async def test_later_requests_send_the_items_the_model_produced(tmp_path: Path) -> None:
    """On one worker (a session object per request), every request holds the earlier items as
    the model produced them (ids, encrypted reasoning, annotations), not as rebuilt from the
    store's form, and get_items gives them back."""
    store = SqliteStore(tmp_path / "one.db")
    outputs: list[list[Any]] = []
    model = ScriptedModel(rich(outputs))
    for turn in range(3):
        await run(model, worker(store, f"r{turn}"), f"task {turn}", tool=read_page)
    assert len(model.requests) == 6
    for k in range(1, 6):  # each request: the one before, its reply, then what came next
        sent = [*model.requests[k - 1]["items"], *outputs[k - 1]]
        assert model.requests[k]["items"][: len(sent)] == sent
    everything = [o for reply in outputs for o in reply]
    assert produced(model.requests[-1]["items"]) == everything[:-2]
    assert await worker(store, "x").get_items() == [*model.requests[-1]["items"], *outputs[-1]]


async def test_another_worker_builds_the_items_from_the_store(
    two_stores: tuple[SessionStore, SessionStore],
) -> None:
    """A session object on the same store object (this worker) gets the items as produced; one
    on another worker's store object gets the same conversation built from the store's form
    (no message ids, annotations or status; reasoning items whole); each worker's requests hold
    its own items as produced."""
    a, b = two_stores
    outputs: list[list[Any]] = []
    model = ScriptedModel(rich(outputs))
    await run(model, worker(a, "r0"), "task 0", tool=read_page)
    mine = await worker(a, "x").get_items()
    assert mine == [*model.requests[-1]["items"], *outputs[-1]]
    other = await worker(b, "y").get_items()
    assert [m.parts for m in to_autocompact(other).messages] == [
        m.parts for m in to_autocompact(mine).messages
    ]
    assert [i for i in other if i.get("role") == "assistant"] == [
        {"role": "assistant", "content": "done 1"}
    ]
    # A reasoning item's id and encrypted content are in the store's form: whole on any worker
    # (one without its id goes out with no id: see test_openai_agents_reasoning.py).
    whole = [(i["id"], i.get("encrypted_content")) for i in mine if i.get("type") == "reasoning"]
    assert len(whole) >= 2
    assert [
        (i["id"], i.get("encrypted_content")) for i in other if i.get("type") == "reasoning"
    ] == whole
    await run(model, worker(b, "r1"), "task 1", tool=read_page)
    theirs = outputs[-2:]
    await run(model, worker(a, "r2"), "task 2", tool=read_page)
    sent = model.requests[-2]["items"]  # A's first request after B's turn
    assert sent[: len(mine)] == mine
    # B's messages and calls reach A as built from the store's form, its reasoning items whole.
    assert not any(o in sent for reply in theirs for o in reply if o.get("type") != "reasoning")
    assert all(o in sent for reply in theirs for o in reply if o.get("type") == "reasoning")
    assert not orphans(sent)
    assert prompts(sent) == ["task 0", "task 1", "task 2"]


async def test_after_a_compaction_the_kept_items_are_those_produced(tmp_path: Path) -> None:
    """After a summary the summary item is new and every item it kept is as the model produced
    it, in get_items and in the next request."""
    store = SqliteStore(tmp_path / "one.db")
    outputs: list[list[Any]] = []
    model = ScriptedModel(rich(outputs))
    for turn in range(14):
        session = worker(store, f"r{turn}", summarizer="offline", clear_tool_outputs=False)
        await run(model, session, f"task {turn}", tool=read_page)
        if any(c.status is CompressionStatus.COMPRESSED for c in session.compactions):
            break
    else:
        pytest.fail("no compaction in 14 turns")
    items = await worker(store, "x").get_items()
    assert "compacted" in items[0]["content"]
    everything = [o for reply in outputs for o in reply]
    kept = produced(items[1:])
    assert [i.get("type") for i in kept].count("reasoning") >= 2
    assert all(i in everything for i in kept)
    await run(model, worker(store, "next"), "after", tool=read_page)
    assert model.requests[-2]["items"][: len(items)] == items


async def test_a_cleared_output_keeps_its_item_fields(tmp_path: Path) -> None:
    """An output that clearing replaced is its stored item with the new output (its id and
    status kept), also on every later read."""
    items = big_history(12, pending=False, size=6_000)
    for item in items:
        if item.get("type") == "function_call_output":
            item.update(id=f"fco_{item['call_id']}", status="completed")
    store = SqliteStore(tmp_path / "one.db")
    session = StoreSession(store, "conv", context_window=16_000, summarizer="offline")
    await session.add_items(items)
    await session.run_compaction()
    assert session.compactions[-1].method == "clearing"
    for _ in range(2):  # a read remembers what it used, so the next one finds it again
        stored = await worker(store, "x").get_items()
        changed = [(old, new) for old, new in zip(items, stored, strict=True) if old != new]
        assert changed, "nothing was cleared"
        for old, new in changed:
            assert new["output"].startswith("[tool output cleared")
            assert {**new, "output": old["output"]} == old


async def test_the_items_of_the_conversations_used_last_are_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker remembers the items of a bounded number of conversations: the one used least
    recently is built from the store's form again."""
    store = SqliteStore(tmp_path / "one.db")
    message = {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed"}
    message["content"] = [{"type": "output_text", "text": "hi", "annotations": []}]
    first = StoreSession(store, "first", context_window=WINDOW)
    await first.add_items([{"role": "user", "content": "q"}, message])
    assert (await first.get_items())[1] == message
    monkeypatch.setattr(_openai_agents_store._ORIGINALS, "limit", 1)
    await StoreSession(store, "second", context_window=WINDOW).add_items([message])
    assert (await first.get_items())[1] == {"role": "assistant", "content": "hi"}


async def test_a_read_finds_each_remembered_item_without_a_pass_over_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers taking turns in one conversation (each stores every other turn): a worker's
    read compares each stored part with the remembered items that could be it, not with every
    remembered item after it (that pass made a read quadratic: 0.7 s for 2,000 items stored
    elsewhere between 2,000 of its own). Counted in comparisons of parts, not timed."""
    path = tmp_path / "one.db"
    mine, theirs = SqliteStore(path), SqliteStore(path)  # two workers: two store objects
    turns = 120
    for turn in range(turns):
        store = mine if turn % 2 == 0 else theirs
        reply = {"id": f"msg_{turn}", "type": "message", "role": "assistant"}
        reply |= {"status": "completed", "content": [{"type": "output_text", "text": f"a{turn}"}]}
        await worker(store, f"t{turn}").add_items([{"role": "user", "content": f"q{turn}"}, reply])
    compared = 0
    equal = TextPart.__eq__

    def counting(self: TextPart, other: object) -> bool:
        nonlocal compared
        compared += 1
        return equal(self, other)

    monkeypatch.setattr(TextPart, "__eq__", counting)
    items = await worker(mine, "read").get_items()
    monkeypatch.undo()
    assert len(items) == 2 * turns
    assert [i.get("id") for i in items[1::2]][:3] == ["msg_0", None, "msg_2"]  # its own: whole
    assert compared <= 4 * len(items)


async def test_another_worker_leaves_out_thinking_without_a_reasoning_item(
    tmp_path: Path,
) -> None:
    """A bare reasoning item (no id, no encrypted content) stored by one worker is left out of
    the items another worker builds from the store's form (as the Responses adapter leaves such
    thinking out), and the rest of the conversation is there."""
    a, b = SqliteStore(tmp_path / "w.db"), SqliteStore(tmp_path / "w.db")
    bare = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "why"}]}
    stored = [{"role": "user", "content": "q"}, bare, {"role": "assistant", "content": "a"}]
    await worker(a, "r0").add_items(stored)
    assert await worker(a, "x").get_items() == stored
    assert await worker(b, "y").get_items() == [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a"},
    ]
    a.close()
    b.close()

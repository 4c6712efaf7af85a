"""OpenAI Agents SDK integration through the real runner, sessions and a scripted Model."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool, set_tracing_disabled
from hypothesis import given, settings
from hypothesis import strategies as st

from autocompact import ContentError
from autocompact.compaction import CompressionStatus
from autocompact.guard import GuardState
from autocompact.integrations.openai_agents import (
    AutocompactSession,
    from_autocompact,
    to_autocompact,
)

from .agents_script import ScriptedModel, call_output, text_output

WINDOW = 32_000
SNAPSHOT = "<state_snapshot><overall_goal>read the files</overall_goal></state_snapshot>"

set_tracing_disabled(True)


def scripted(summary: str = SNAPSHOT) -> Any:
    """A script: a tool call per user message, 'done' after the output; summaries on request.
    Call ids are unique for the whole run, as the SDK requires of a model."""
    ids = itertools.count()

    def script(system: str | None, items: list[Any], options: dict[str, Any]) -> list[Any]:
        if options["max_tokens"] == 20_000:
            return [text_output(summary)]
        if items[-1].get("role") == "user":
            return [call_output(f"call_{next(ids)}", "read", {"path": "a.py"})]
        return [text_output("done")]

    return script


@function_tool
def read(path: str) -> str:
    """Read a file."""
    return f"{path}: " + "y" * 30_000


def orphans(items: list[Any]) -> list[str]:
    """Function outputs whose call is not earlier in the same request (read on the wire)."""
    calls: set[str] = set()
    bad: list[str] = []
    for item in items:
        if item.get("type") == "function_call":
            calls.add(item["call_id"])
        elif item.get("type") == "function_call_output" and item["call_id"] not in calls:
            bad.append(item["call_id"])
    return bad


async def run_turns(
    model: ScriptedModel, session: Any, turns: int, *, with_filter: bool = True
) -> None:
    """Run ``turns`` turns of the agent on ``session``."""
    agent = Agent(name="coder", instructions="be brief", model=model, tools=[read])
    config = (
        RunConfig(call_model_input_filter=session.call_model_input_filter)
        if with_filter
        else RunConfig()
    )
    for turn in range(turns):
        await Runner.run(agent, f"task {turn}", session=session, run_config=config)


async def test_long_run_stays_under_the_window_with_model_summaries() -> None:
    """Summaries by an Agents SDK model keep every request under the window by the model's own
    count; no request carries an orphaned output; the side query has the 20K cap."""
    model = ScriptedModel(scripted())
    session = AutocompactSession(
        SQLiteSession("s"), context_window=WINDOW, summarizer=model, clear_tool_outputs=False
    )
    await run_turns(model, session, 8)
    chat = [r for r in model.requests if r["max_tokens"] != 20_000]
    side = [r for r in model.requests if r["max_tokens"] == 20_000]
    assert side
    assert all(r["tools"] == 0 for r in side)
    assert max(r["tokens"] for r in chat) < WINDOW
    assert all(not orphans(r["items"]) for r in chat)
    assert any(c.status is CompressionStatus.COMPRESSED for c in session.compactions)
    items = await session.get_items()
    assert "state_snapshot" in json.dumps(items)


async def test_without_autocompact_the_same_run_goes_over_the_window() -> None:
    """The control: the plain SQLite session sends requests over the window."""
    model = ScriptedModel(scripted())
    await run_turns(model, SQLiteSession("plain"), 8, with_filter=False)
    assert max(r["tokens"] for r in model.requests) > WINDOW


async def test_filter_learns_instructions_and_tools() -> None:
    """The input filter records the system prompt and tools, which compaction then counts."""
    model = ScriptedModel(scripted())
    session = AutocompactSession(SQLiteSession("s"), context_window=WINDOW)
    await run_turns(model, session, 1)
    assert session.system_instruction == "be brief"
    assert [t.name for t in session.tools] == ["read"]


async def test_offline_summaries_make_no_model_call() -> None:
    """With the offline summarizer (and clearing) no side query reaches the model."""
    model = ScriptedModel(scripted())
    session = AutocompactSession(SQLiteSession("s"), context_window=WINDOW, summarizer="offline")
    await run_turns(model, session, 8)
    assert all(r["max_tokens"] != 20_000 for r in model.requests)
    assert max(r["tokens"] for r in model.requests) < WINDOW


async def test_failed_summaries_leave_the_items_and_trim_requests_only() -> None:
    """Failing summaries keep every stored item; the guarantee trims what is sent."""
    model = ScriptedModel(scripted(summary=""))
    session = AutocompactSession(
        SQLiteSession("s"), context_window=WINDOW, summarizer=model, clear_tool_outputs=False
    )
    await run_turns(model, session, 6)
    items = await session.get_items()
    prompts = [i["content"] for i in items if i.get("role") == "user"]
    assert prompts == [f"task {t}" for t in range(6)]
    assert session.trimmed_requests > 0
    chat = [r for r in model.requests if r["max_tokens"] != 20_000]
    assert max(r["tokens"] for r in chat) < WINDOW
    assert all(not orphans(r["items"]) for r in chat)


def big_history(calls: int, *, pending: bool, size: int = 40_000) -> list[Any]:
    """Stored items: user, call, output, reply per turn; optionally a call still waiting."""
    items: list[Any] = []
    for turn in range(calls):
        items += [
            {"role": "user", "content": f"task {turn}"},
            {"type": "function_call", "call_id": f"c{turn}", "name": "read", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"c{turn}", "output": "z" * size},
            {"role": "assistant", "content": f"done {turn}"},
        ]
    if pending:
        items.append(
            {"type": "function_call", "call_id": "waiting", "name": "read", "arguments": "{}"}
        )
    return items


async def test_compaction_never_cuts_a_pending_call() -> None:
    """A call whose output is not stored yet stays, with everything after it, as it was."""
    store = SQLiteSession("s")
    await store.add_items(big_history(6, pending=True))
    session = AutocompactSession(store, context_window=WINDOW, summarizer="offline")
    await session.run_compaction({"force": True})
    items = await session.get_items()
    assert session.compactions[-1].status is CompressionStatus.COMPRESSED
    assert items[-1]["call_id"] == "waiting"
    # The newest output alone is over warn, so no summary could buy room (design decision 70):
    # the clearing of the older outputs stands, and no side query was sent.
    assert session.compactions[-1].method == "clearing"
    outputs = [i["output"] for i in items if i.get("type") == "function_call_output"]
    assert outputs[-1] == "z" * 40_000
    assert all(len(o) < 1_000 for o in outputs[:-1])
    assert not orphans(items)


class BrokenStore(SQLiteSession):
    """A store whose next add_items fails once (a full disk, a lost connection)."""

    fail_next = False

    async def add_items(self, items: list[Any]) -> None:
        """Fail once when armed."""
        if self.fail_next:
            self.fail_next = False
            raise OSError("disk full")
        await super().add_items(items)


async def test_a_failed_write_restores_the_items() -> None:
    """When storing the compacted items fails the original items are put back."""
    store = BrokenStore("s")
    original = big_history(6, pending=False)
    await store.add_items(original)
    session = AutocompactSession(store, context_window=WINDOW, summarizer="offline")
    store.fail_next = True
    with pytest.raises(OSError, match="disk full"):
        await session.run_compaction({"force": True})
    assert await store.get_items() == original


async def test_failed_summary_keeps_items_and_counts() -> None:
    """A failed summary leaves the stored items exactly as they were and counts a failure."""
    model = ScriptedModel(scripted(summary=""))
    store = SQLiteSession("s")
    original = big_history(4, pending=False, size=44_000)  # auto 87K ≤ ~89K < hard 97K
    await store.add_items(original)
    session = AutocompactSession(
        store,
        context_window=120_000,
        summarizer=model,
        clear_tool_outputs=False,
        state=GuardState(consecutive_failures=1),
    )
    await session.run_compaction()
    assert session.compactions[-1].status is CompressionStatus.COMPRESSION_FAILED_EMPTY_SUMMARY
    assert await store.get_items() == original
    assert session.state.consecutive_failures == 2


async def test_below_the_ladder_nothing_changes() -> None:
    """A small session is left alone by run_compaction."""
    store = SQLiteSession("s")
    await store.add_items(big_history(1, pending=False))
    session = AutocompactSession(store, context_window=WINDOW, summarizer="offline")
    await session.run_compaction()
    assert session.compactions == []
    assert len(await session.get_items()) == 4


async def test_a_cleared_output_keeps_its_item_fields() -> None:
    """Clearing replaces only a function_call_output's output: its id and status are kept,
    and every other item is stored as it was."""
    items = big_history(12, pending=False, size=6_000)
    for item in items:
        if item.get("type") == "function_call_output":
            item.update(id=f"fco_{item['call_id']}", status="completed")
    store = SQLiteSession("s")
    await store.add_items(items)
    session = AutocompactSession(store, context_window=16_000, summarizer="offline")
    await session.run_compaction()
    stored = await store.get_items()
    changed = [(old, new) for old, new in zip(items, stored, strict=True) if old != new]
    assert changed, "nothing was cleared"
    for old, new in changed:
        assert new["output"].startswith("[tool output cleared")
        assert {**new, "output": old["output"]} == old


async def test_session_protocol_delegates() -> None:
    """get/add/pop/clear go to the underlying session."""
    store = SQLiteSession("s")
    session = AutocompactSession(store, context_window=WINDOW, summarizer="offline")
    await session.add_items([{"role": "user", "content": "hi"}])
    assert await session.get_items() == [{"role": "user", "content": "hi"}]
    assert await session.pop_item() == {"role": "user", "content": "hi"}
    await session.add_items([{"role": "user", "content": "again"}])
    await session.clear_session()
    assert await store.get_items() == []
    assert session.session_id == "s"


# -- conversion ----------------------------------------------------------------------------------

texts = st.text(max_size=30)


@st.composite
def item_lists(draw: st.DrawFn) -> list[Any]:
    """Items: messages (text, images), calls and outputs, reasoning, a developer message."""
    items: list[Any] = [{"role": "developer", "content": draw(texts)}]
    for turn in range(draw(st.integers(0, 5))):
        content: Any = draw(texts)
        if draw(st.booleans()):
            content = [
                {"type": "input_text", "text": draw(texts)},
                {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto"},
            ]
        items.append({"role": "user", "content": content})
        if draw(st.booleans()):
            items.append(
                {
                    "type": "reasoning",
                    "id": f"rs_{turn}",
                    "summary": [{"type": "summary_text", "text": draw(texts)}],
                }
            )
        args = json.dumps({"q": draw(texts)})
        items.append(
            {"type": "function_call", "call_id": f"c{turn}", "name": "t", "arguments": args}
        )
        items.append({"type": "function_call_output", "call_id": f"c{turn}", "output": draw(texts)})
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "id": f"m{turn}",
                "status": "completed",
                "content": [{"type": "output_text", "text": draw(texts), "annotations": []}],
            }
        )
    return items


@settings(max_examples=60, deadline=None)
@given(item_lists())
def test_round_trip_returns_the_same_items(items: list[Any]) -> None:
    """Converting and converting back gives the very same item objects, in order."""
    converted = to_autocompact(items)
    back = from_autocompact(converted.messages, converted)
    assert len(back) == len(items)
    assert all(a is b for a, b in zip(back, items, strict=True))


@settings(max_examples=60, deadline=None)
@given(item_lists())
def test_structural_round_trip_is_a_fixed_point(items: list[Any]) -> None:
    """Rebuilt without the originals, the items convert to the same engine messages."""
    converted = to_autocompact(items)
    rebuilt = from_autocompact(converted.messages)
    assert to_autocompact(rebuilt).messages == converted.messages


@pytest.mark.parametrize(
    "item",
    [
        {"type": "web_search_call", "id": "ws", "status": "completed"},
        {"type": "computer_call", "id": "cc", "call_id": "x", "action": {}},
        {"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]},
    ],
    ids=["web-search", "computer", "audio"],
)
def test_unexpressible_items_raise(item: Any) -> None:
    """An item the engine cannot express raises, naming the item."""
    with pytest.raises(ContentError, match="item 0"):
        to_autocompact([item])


def test_native_compaction_part_goes_back_as_its_summary() -> None:
    """An OpaquePart (another provider's native compaction) reaches the SDK as a text item."""
    from autocompact import Message
    from autocompact.content import OpaquePart

    part = OpaquePart(provider="anthropic", family="claude", payload={}, summary="the summary")
    assert from_autocompact([Message(role="user", parts=(part,))]) == [
        {"role": "user", "content": "the summary"}
    ]


def test_thinking_without_a_reasoning_item_is_left_out_as_the_responses_adapter_does() -> None:
    """A thinking part with neither an id nor a signature (another framework's thinking, or a
    bare reasoning item) goes out as no item, as the Responses adapter leaves it out: the API
    requires an input reasoning item's id and has nothing to verify in a summary alone. It went
    out as an id-less reasoning item carrying the summary text only."""
    from autocompact import Message, TextPart, ThinkingPart
    from autocompact.convert.openai_responses import to_responses_input

    bare = Message(role="model", parts=(ThinkingPart(text="why"), TextPart(text="answer")))
    assert from_autocompact([bare]) == [{"role": "assistant", "content": "answer"}]
    assert to_responses_input([bare], family=None) == [{"role": "assistant", "content": "answer"}]
    # A bare reasoning item the runner gave comes back as given (items are not rewritten).
    given = [{"type": "reasoning", "summary": [{"type": "summary_text", "text": "why"}]}]
    converted = to_autocompact(given)
    assert from_autocompact(converted.messages, converted) == given

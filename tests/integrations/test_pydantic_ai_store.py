"""The pydantic-ai capability with ``store=``: runs on two workers sharing one SQLite /
PostgreSQL store, through the real agent loop and its FunctionModel."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai import messages as pm
from pydantic_ai.models.function import AgentInfo, FunctionModel

from autocompact.compaction import CompressionStatus
from autocompact.integrations.pydantic_ai import Autocompact
from autocompact.sessions.stores import SessionStore, SqliteStore

from .store_workers import turn_entries, two_stores
from .test_pydantic_ai import SNAPSHOT, WINDOW, RecordingModel, Script, orphans

__all__ = ["two_stores"]


def worker(script: Script, store: SessionStore, **options: Any) -> Agent[None, str]:
    """A worker's agent: the capability over ``store``, one tool with a large output."""
    capability = Autocompact(
        context_window=WINDOW, store=store, clear_tool_outputs=False, **options
    )
    agent = Agent(RecordingModel(script), system_prompt="be brief", capabilities=[capability])

    @agent.tool_plain
    def read(path: str) -> str:
        return f"{path}: " + "x" * 24_000

    return agent


def prompts(messages: list[pm.ModelMessage]) -> list[str]:
    """The user prompts of a request."""
    return [
        str(p.content)
        for m in messages
        if isinstance(m, pm.ModelRequest)
        for p in m.parts
        if isinstance(p, pm.UserPromptPart)
    ]


def systems(messages: list[pm.ModelMessage]) -> list[str]:
    """The system prompt parts of a request."""
    return [
        p.content
        for m in messages
        if isinstance(m, pm.ModelRequest)
        for p in m.parts
        if isinstance(p, pm.SystemPromptPart)
    ]


def test_two_workers_continue_one_conversation(
    two_stores: tuple[SessionStore, SessionStore],
) -> None:
    """Worker B's run (no message_history) sends what A's run stored, system prompt first."""
    a, b = two_stores
    script = Script()
    worker(script, a).run_sync("task 0", conversation_id="conv", run_id="r0")
    result = worker(script, b).run_sync("task 1", conversation_id="conv", run_id="r1")
    first_of_b = script.requests[2]
    assert prompts(first_of_b) == ["task 0", "task 1"]
    assert systems(first_of_b) == ["be brief"]
    assert isinstance(first_of_b[0], pm.ModelRequest)
    assert isinstance(first_of_b[0].parts[0], pm.SystemPromptPart)
    assert not orphans(first_of_b)
    assert prompts(result.all_messages()) == ["task 0", "task 1"]
    assert [m.text for m in a.load("conv").history if m.role == "user" and m.text] == [
        "task 0",
        "task 1",
    ]
    assert turn_entries(a, "conv") == 4  # two model requests per run


def test_a_compaction_by_one_worker_is_what_the_other_sends(
    two_stores: tuple[SessionStore, SessionStore],
) -> None:
    """Runs alternate between workers; a summary committed by one is what the other sends
    next (no summarized prompt), every request stays under the window by the model's count."""
    a, b = two_stores
    script = Script()
    agents = [worker(script, a, summarizer="model"), worker(script, b, summarizer="model")]
    epochs = []
    for turn in range(8):
        agents[turn % 2].run_sync(f"task {turn}", conversation_id="conv", run_id=f"r{turn}")
        epochs.append(a.load("conv").epoch)
    assert script.side_queries, "no summary was requested"
    assert max(script.sent) < WINDOW
    assert all(not orphans(r) for r in script.requests)
    first = next(i for i, e in enumerate(epochs) if e > 0)
    committed = [x for x in a.attempts("conv") if x.status == "compressed"]
    assert committed
    assert committed[0].owner is not None
    # The run after the first commit, on the other worker, sends the summary, not task 0.
    other = agents[(first + 1) % 2]
    other.run_sync("after", conversation_id="conv", run_id="after")
    sent = script.requests[-2]
    assert "task 0" not in prompts(sent)
    assert SNAPSHOT in str(sent)
    assert b.load("conv").epoch == len([e for e in a.entries("conv") if e.kind == "summary"])


def test_a_retried_run_is_answered_from_the_store(
    two_stores: tuple[SessionStore, SessionStore],
) -> None:
    """The same run id again on the other worker makes no model call and stores nothing new."""
    a, b = two_stores
    script = Script()
    first = worker(script, a).run_sync("task 0", conversation_id="conv", run_id="r0")
    calls, before = len(script.requests), turn_entries(a, "conv")
    again = worker(script, b).run_sync("task 0", conversation_id="conv", run_id="r0")
    assert len(script.requests) == calls
    assert turn_entries(b, "conv") == before
    assert again.output == first.output == "done"


def test_a_retried_run_counts_its_steps_as_pydantic_ai_does_and_bills_nothing(
    tmp_path: Path,
) -> None:
    """A retried run of 4 steps answered from the store reports 4 requests, as the same run
    without a store does (pydantic-ai counts each response committed to the run, a wrapper's
    short-circuit included; ``request_limit`` bounds that count), with no model call and no
    tokens; its tools run again."""
    calls: list[int] = []

    def reply(messages: list[pm.ModelMessage], info: AgentInfo) -> pm.ModelResponse:
        calls.append(len(messages))
        steps = sum(isinstance(m, pm.ModelResponse) for m in messages)
        if steps < 3:
            return pm.ModelResponse(parts=[pm.ToolCallPart("read", {"path": f"f{steps}"})])
        return pm.ModelResponse(parts=[pm.TextPart("done")])

    def agent(store: SessionStore | None) -> Agent[None, str]:
        capabilities = [Autocompact(context_window=WINDOW, store=store)] if store else []
        built = Agent(FunctionModel(reply), capabilities=capabilities)

        @built.tool_plain
        def read(path: str) -> str:
            return path

        return built

    control = agent(None).run_sync("go").usage
    assert (control.requests, len(calls)) == (4, 4)
    first = agent(SqliteStore(tmp_path / "a.db")).run_sync("go", conversation_id="c", run_id="r")
    assert first.usage.requests == 4
    made = len(calls)
    again = agent(SqliteStore(tmp_path / "a.db")).run_sync("go", conversation_id="c", run_id="r")
    assert len(calls) == made  # answered from the store
    assert again.usage.requests == control.requests == 4
    assert again.usage.input_tokens == again.usage.output_tokens == 0
    assert again.usage.tool_calls == 3
    assert again.output == "done"


def test_usage_and_failures_live_in_the_store(
    two_stores: tuple[SessionStore, SessionStore],
) -> None:
    """Failing summaries add to the stored breaker count, which the other worker reads; the
    provider's count and the calibration are stored with each turn."""
    a, b = two_stores
    script = Script(summary="")
    agents = [worker(script, a, summarizer="model"), worker(script, b, summarizer="model")]
    for turn in range(6):
        agents[turn % 2].run_sync(f"task {turn}", conversation_id="conv", run_id=f"r{turn}")
    counted = [x for x in a.attempts("conv") if x.counted]
    assert counted
    assert all(x.status != CompressionStatus.COMPRESSED for x in counted)
    assert b.load("conv").consecutive_failures == counted[-1].failures_after > 0
    snapshot = b.load("conv")
    assert snapshot.calibration is not None
    assert snapshot.count_base[0] > 0
    assert max(script.sent) < WINDOW


def test_one_worker_sends_and_keeps_the_messages_of_the_run(tmp_path: Path) -> None:
    """With a store, each request and the run's messages hold the run's own messages (a
    thinking part's provider and id, a tool call's id and details, the response's usage),
    not copies rebuilt from the store's form."""
    seen: list[list[pm.ModelMessage]] = []

    def reply(messages: list[pm.ModelMessage], info: AgentInfo) -> pm.ModelResponse:
        seen.append(list(messages))
        if len(seen) > 1:
            return pm.ModelResponse(parts=[pm.TextPart("done", provider_details={"k": 1})])
        thought = pm.ThinkingPart("hm", signature="SIG", id="th-1", provider_name="anthropic")
        call = pm.ToolCallPart("read", {"path": "a"}, tool_call_id="c1", id="x-1")
        return pm.ModelResponse(parts=[thought, call], provider_response_id="resp-1")

    store = SqliteStore(tmp_path / "one.db")
    capability = Autocompact(context_window=WINDOW, store=store, summarizer="offline")
    agent = Agent(FunctionModel(reply), system_prompt="be brief", capabilities=[capability])

    @agent.tool_plain
    def read(path: str) -> str:
        return "body"

    first = agent.run_sync("hi", conversation_id="c", run_id="r1")
    agent.run_sync("again", conversation_id="c", run_id="r2", message_history=first.all_messages())
    history = first.all_messages()
    assert history[1].parts[0] == pm.ThinkingPart(
        "hm", signature="SIG", id="th-1", provider_name="anthropic"
    )
    assert isinstance(history[1], pm.ModelResponse)
    assert history[1].provider_response_id == "resp-1"
    assert seen[1][:-1] == history[:2]
    assert seen[2][:-1] == history


def test_stored_messages_are_matched_to_the_run_s_without_a_pass_over_all(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each stored message is compared with the run's messages that could equal it (same side,
    same first part), not with every run message after the last one found: with stored
    messages the run does not hold (cleared outputs, another worker's turns) between those it
    does, that pass made each request quadratic in the conversation. Counted, not timed."""
    from autocompact.content import FunctionCallPart, FunctionResponsePart, Message
    from autocompact.integrations import _pydantic_ai_store as store_module
    from autocompact.integrations._order import InOrder

    run: list[tuple[Message, pm.ModelMessage]] = []
    stored: list[Message] = []
    for i in range(150):
        call = Message(
            role="model", parts=(FunctionCallPart(id=f"c{i}", name="read", arguments={}),)
        )
        output = FunctionResponsePart(id=f"c{i}", name="read", response=f"page {i}")
        original = pm.ModelResponse(parts=[pm.ToolCallPart("read", {}, tool_call_id=f"c{i}")])
        run += [(call, original), (Message(role="user", parts=(output,)), pm.ModelRequest([]))]
        cleared = FunctionResponsePart(id=f"c{i}", name="read", response="[cleared]")
        stored += [call, Message(role="user", parts=(cleared,))]
    compared = 0
    equal = Message.__eq__

    def counting(self: Message, other: object) -> bool:
        nonlocal compared
        compared += 1
        return equal(self, other)

    monkeypatch.setattr(Message, "__eq__", counting)
    index = InOrder(store_module._key(message) for message, _ in run)
    found, after = [], 0
    for message in stored:
        original, after = store_module._same(run, index, message, after)
        found.append(original)
    monkeypatch.undo()
    assert found[::2] == [original for _, original in run[::2]]  # each call: the run's own
    assert found[1::2] == [None] * 150  # a cleared output: built from the store
    assert compared <= 3 * len(stored)

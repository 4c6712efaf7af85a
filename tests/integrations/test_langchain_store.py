"""AutocompactMiddleware with ``store=``: LangChain agents on two workers (each with its own
checkpointer) continue one conversation kept in a SQLite / PostgreSQL store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from autocompact.integrations.langchain import AutocompactMiddleware
from autocompact.sessions.stores import SessionStore, SqliteStore

from .lc_fakes import ScriptedModel, orphans, tool_call
from .store_workers import turn_entries, two_stores
from .test_langchain_agent import WINDOW, read_file, scripted

__all__ = ["two_stores"]


def worker(model: ScriptedModel, store: SessionStore, **options: Any) -> Any:
    """A worker's agent: the middleware over ``store`` and a checkpointer of its own."""
    middleware = AutocompactMiddleware(context_window=WINDOW, store=store, **options)
    return create_agent(
        model,
        [read_file],
        system_prompt="You are a careful coding agent.",
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )


def ask(agent: Any, text: str, request: str | None = None) -> Any:
    """One request on the shared conversation (thread ``conv``)."""
    message = HumanMessage(content=text, id=request) if request else HumanMessage(content=text)
    return agent.invoke({"messages": [message]}, {"configurable": {"thread_id": "conv"}})


def human(messages: list[BaseMessage]) -> list[str]:
    """The user messages' text."""
    return [str(m.content) for m in messages if isinstance(m, HumanMessage)]


def test_two_workers_continue_one_conversation(
    two_stores: tuple[SessionStore, SessionStore],
) -> None:
    """Worker B (its own, empty checkpointer) sends what worker A stored, and its final state
    holds the whole conversation."""
    a, b = two_stores
    model = ScriptedModel(messages=iter(scripted([2_000] * 2, per_turn=1)), window=WINDOW)
    ask(worker(model, a), "turn 0")
    out = ask(worker(model, b), "turn 1")
    first_of_b = model.requests[2]
    assert human(first_of_b) == ["turn 0", "turn 1"]
    assert orphans(first_of_b) == []
    assert human(out["messages"]) == ["turn 0", "turn 1"]
    stored = [m.text for m in a.load("conv").history if m.role == "user" and m.text]
    assert stored == ["turn 0", "turn 1"]
    assert turn_entries(a, "conv") == 4  # a tool call and an answer per request


def test_a_compaction_by_one_worker_is_what_the_other_sends(
    two_stores: tuple[SessionStore, SessionStore],
) -> None:
    """Requests alternate between workers; the summary one commits is what the other sends
    next; no request is over the window by the model's count."""
    a, b = two_stores
    sizes = [24_000] * 14
    model = ScriptedModel(messages=iter(scripted(sizes)), window=WINDOW)
    agents = [
        worker(model, a, clear_tool_outputs=False),
        worker(model, b, clear_tool_outputs=False),
    ]
    epochs = []
    for turn in range(7):
        ask(agents[turn % 2], f"turn {turn}")
        epochs.append(a.load("conv").epoch)
    assert model.summary_requests, "no summary was written"
    assert max(model.counts) < WINDOW
    assert all(orphans(r) == [] for r in model.requests)
    first = next(i for i, e in enumerate(epochs) if e > 0)
    assert first < 6
    committed = [x for x in b.attempts("conv") if x.status == "compressed"]
    assert committed
    # The other worker's next request starts from the summary, not from turn 0.
    after = next(r for r in model.requests if human(r)[-1:] == [f"turn {first + 1}"])
    assert "<state_snapshot>" in " ".join(str(m.content) for m in after)
    assert "turn 0" not in human(after)
    assert b.load("conv").epoch == len([e for e in a.entries("conv") if e.kind == "summary"])


def test_a_retried_request_is_answered_from_the_store(
    two_stores: tuple[SessionStore, SessionStore],
) -> None:
    """The same request (same message id) again on the other worker makes no model call and
    stores nothing new."""
    a, b = two_stores
    model = ScriptedModel(messages=iter(scripted([2_000] * 2, per_turn=1)), window=WINDOW)
    first = ask(worker(model, a), "turn 0", request="req-0")
    calls, before = len(model.requests), turn_entries(a, "conv")
    again = ask(worker(model, b), "turn 0", request="req-0")
    assert len(model.requests) == calls
    assert turn_entries(b, "conv") == before
    assert again["messages"][-1].content == first["messages"][-1].content
    assert human(again["messages"]) == ["turn 0"]


async def test_async_agents_share_the_store(
    two_stores: tuple[SessionStore, SessionStore],
) -> None:
    """The async hooks (ainvoke) keep the same rules: B continues A's turn; a retried message
    id makes no model call."""
    a, b = two_stores
    model = ScriptedModel(messages=iter(scripted([2_000] * 2, per_turn=1)), window=WINDOW)
    config = {"configurable": {"thread_id": "conv"}}
    await worker(model, a).ainvoke({"messages": [HumanMessage("turn 0", id="q0")]}, config)
    out = await worker(model, b).ainvoke({"messages": [HumanMessage("turn 1", id="q1")]}, config)
    assert human(out["messages"]) == ["turn 0", "turn 1"]
    calls, before = len(model.requests), turn_entries(a, "conv")
    await worker(model, a).ainvoke({"messages": [HumanMessage("turn 1", id="q1")]}, config)
    assert len(model.requests) == calls
    assert turn_entries(a, "conv") == before


def test_one_worker_sends_and_keeps_the_messages_langchain_gave(tmp_path: Path) -> None:
    """With a store and one worker, each request and the graph state hold the LangChain
    messages themselves (ids, metadata, an image_url block), not copies rebuilt from the
    store's form; the store's history is unchanged by it."""
    store = SqliteStore(tmp_path / "one.db")
    call = tool_call("read_file", {"path": "a.py", "size": 100}, "call-0")
    call.response_metadata = {"model_name": "m-1"}
    call.additional_kwargs = {"provider": {"trace": "t-1"}}
    thought = [{"type": "thinking", "thinking": "ok", "signature": "SIG"}, "read it"]
    answer = AIMessage(thought, response_metadata={"model_name": "m-1"})
    model = ScriptedModel(messages=iter([call, answer, "again"]), window=WINDOW)
    agent = worker(model, store)
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.jpg"}}
    first = HumanMessage(
        [{"type": "text", "text": "look"}, image], id="req-0", additional_kwargs={"via": "web"}
    )
    config: Any = {"configurable": {"thread_id": "conv"}}
    agent.invoke({"messages": [first]}, config)
    agent.invoke({"messages": [HumanMessage("turn 1", id="req-1")]}, config)
    state = agent.get_state(config).values["messages"]
    assert state[0] == first
    assert state[1].additional_kwargs == {"provider": {"trace": "t-1"}}
    assert state[1].response_metadata == {"model_name": "m-1"}
    assert not [m.id for m in state if str(m.id).startswith("autocompact-")]
    for request in model.requests[1:]:  # after the system prompt, what the state held
        assert [m.model_dump() for m in request[1:]] == [
            m.model_dump() for m in state[: len(request) - 1]
        ]
    assert [m.text for m in store.load("conv").history if m.role == "user" and m.text] == [
        "look",
        "turn 1",
    ]

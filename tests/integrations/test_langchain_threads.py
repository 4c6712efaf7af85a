"""A LangChain thread goes on after what a model call refused: an oversized tool result stays
in the checkpoint and the next user message is answered (the result is then old output, as in
``ChatSession`` and pydantic-ai); a tool call without its ``ToolMessage`` is refused in
LangChain's terms. One middleware shared by agents on different models sizes each call on its
own model's window, with its own system prompt, tools and summary model."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from autocompact.errors import ContentError, MessageTooLargeError
from autocompact.integrations.langchain import AutocompactMiddleware

from .lc_fakes import ScriptedModel, tool_call
from .test_langchain_agent import ask, config

WINDOW = 16_000
LOG = "line of log output\n" * 12_000  # about 120K tokens: over the whole window


@tool
def read_log(path: str) -> str:
    """Read a log file."""
    return LOG


def _agent(model: ScriptedModel, middleware: AutocompactMiddleware, **options: Any) -> Any:
    return create_agent(
        model, [read_log], middleware=[middleware], checkpointer=InMemorySaver(), **options
    )


def test_an_oversized_tool_result_leaves_the_thread_usable() -> None:
    """The turn whose tool result is over the window is refused, naming the tool and its call
    id and how to go on; the next user message is answered with the result compacted away
    (it was refused on every later turn: the result stayed part of the message being sent)."""
    model = ScriptedModel(
        messages=iter([tool_call("read_log", {"path": "x.log"}, "c1"), "hi", "still here"]),
        window=WINDOW,
    )
    middleware = AutocompactMiddleware(context_window=WINDOW, summarizer="offline")
    agent = _agent(model, middleware)
    with pytest.raises(MessageTooLargeError) as refused:
        agent.invoke(ask("read the log"), config())
    text = str(refused.value)
    assert "the result of tool 'read_log' (call id 'c1')" in text
    assert "the thread goes on with the next user message" in text
    assert "tool_call_id='c1'" in text
    assert len(model.requests) == 1  # only the call; nothing over the window was sent
    assert [m.type for m in agent.get_state(config()).values["messages"]] == [
        "human",
        "ai",
        "tool",
    ]

    for text, answer in (("forget the log, just say hi", "hi"), ("hello?", "still here")):
        out = agent.invoke(ask(text), config())
        assert out["messages"][-1].content == answer
    assert len(model.requests) == 3
    assert max(model.counts) <= WINDOW
    sent = [str(m.content) for request in model.requests[1:] for m in request]
    assert not any(LOG[:2_000] in content for content in sent)
    assert model.requests[1][-1].content == "forget the log, just say hi"


def test_the_refused_step_can_be_retried_with_a_shorter_result() -> None:
    """The recovery the error names: replace the ToolMessage, then invoke with no input."""
    model = ScriptedModel(
        messages=iter([tool_call("read_log", {"path": "x.log"}, "c1"), "done"]), window=WINDOW
    )
    agent = _agent(model, AutocompactMiddleware(context_window=WINDOW, summarizer="offline"))
    with pytest.raises(MessageTooLargeError):
        agent.invoke(ask("read the log"), config())
    result = agent.get_state(config()).values["messages"][-1]
    short = ToolMessage(content="(12,000 lines)", tool_call_id="c1", id=result.id)
    agent.update_state(config(), {"messages": [short]})
    out = agent.invoke(None, config())
    assert out["messages"][-1].content == "done"
    assert model.requests[-1][-1].content == "(12,000 lines)"


async def test_an_oversized_tool_result_leaves_the_thread_usable_async() -> None:
    """Async: the same refusal, and the next user message answered."""
    model = ScriptedModel(
        messages=iter([tool_call("read_log", {"path": "x.log"}, "c1"), "hi"]), window=WINDOW
    )
    agent = _agent(model, AutocompactMiddleware(context_window=WINDOW, summarizer="offline"))
    with pytest.raises(MessageTooLargeError, match="'read_log'"):
        await agent.ainvoke(ask("read the log"), config())
    out = await agent.ainvoke(ask("just say hi"), config())
    assert out["messages"][-1].content == "hi"


DANGLING = [
    HumanMessage("read a.py"),
    tool_call("read_log", {"path": "a.py"}, "c1"),
    HumanMessage("never mind, just say hi"),
]


def test_a_tool_call_without_its_result_is_refused_in_langchain_terms() -> None:
    """A tool call with no ToolMessage before the next user message is refused before any
    model call, naming the call and the ToolMessage to add (it asked for a
    FunctionResponsePart, autocompact's internal type)."""
    model = ScriptedModel(messages=iter(["hi"]), window=WINDOW)
    agent = create_agent(
        model, [read_log], middleware=[AutocompactMiddleware(context_window=WINDOW)]
    )
    with pytest.raises(ContentError) as refused:
        agent.invoke({"messages": DANGLING})
    text = str(refused.value)
    assert "message 1" in text
    assert "'c1' (read_log)" in text
    assert "ToolMessage" in text
    assert "FunctionResponsePart" not in text
    assert model.requests == []


def test_a_tool_call_without_its_result_is_refused_before_the_model_too() -> None:
    """The same refusal from before_model (a thread that has had a model call): a state edit
    left a call unanswered; the refusal names the ToolMessage to add."""
    model = ScriptedModel(messages=iter(["hello", "hi"]), window=WINDOW)
    agent = _agent(model, AutocompactMiddleware(context_window=WINDOW))
    agent.invoke(ask("hello"), config())
    agent.update_state(config(), {"messages": [tool_call("read_log", {"path": "a"}, "c9")]})
    with pytest.raises(ContentError, match=r"'c9' \(read_log\) have no ToolMessage"):
        agent.invoke(ask("never mind"), config())
    assert len(model.requests) == 1


def test_a_tool_message_answering_no_call_is_refused_in_langchain_terms() -> None:
    """A ToolMessage whose tool_call_id no AI message made is named by that id."""
    model = ScriptedModel(messages=iter(["hi"]), window=WINDOW)
    agent = create_agent(
        model, [read_log], middleware=[AutocompactMiddleware(context_window=WINDOW)]
    )
    history = [HumanMessage("hi"), ToolMessage(content="x", tool_call_id="zz"), HumanMessage("?")]
    with pytest.raises(ContentError, match="ToolMessage with tool_call_id 'zz' answers no"):
        agent.invoke({"messages": history})
    assert model.requests == []


def _profiled(window: int, replies: list[AIMessage | str]) -> ScriptedModel:
    return ScriptedModel(
        messages=iter(replies), window=window, profile={"max_input_tokens": window}
    )


def test_a_shared_middleware_sizes_each_call_on_its_own_models_window() -> None:
    """One middleware (no window given) in an agent on a 1M-token model and one on an 8K
    model: the 8K agent's ~9K-token message is refused on 8,000 (it was sent unchecked on the
    first model's window), and each thread's report uses its own model's window."""
    middleware = AutocompactMiddleware(summarizer="offline")
    big = _agent(_profiled(1_000_000, ["ok"]), middleware)
    small_model = _profiled(8_000, ["ok", "ok"])
    small = _agent(small_model, middleware)
    big.invoke(ask("hello"), config("big"))
    small.invoke(ask("hello"), config("small"))
    with pytest.raises(MessageTooLargeError, match="window of 8,000"):
        small.invoke(ask("log line " * 4_000), config("small"))
    assert len(small_model.requests) == 1
    assert middleware.context_report(big.get_state(config("big")).values).window == 1_000_000
    assert middleware.context_report(small.get_state(config("small")).values).window == 8_000


def test_a_shared_middleware_summarizes_with_the_threads_own_model() -> None:
    """Agents A and B share one middleware (summaries by the agent's model): B's thread is
    compacted before its model call by B's model, with B's system prompt counted — not by
    A's, whose request the middleware saw last (before_model used the last request seen)."""
    window = 32_000
    middleware = AutocompactMiddleware(context_window=window, clear_tool_outputs=False)
    a_model = ScriptedModel(messages=iter(["a"] * 10), window=window)
    b_model = ScriptedModel(messages=iter(["b"] * 10), window=window)
    a = _agent(a_model, middleware, system_prompt="You are agent A.")
    b = _agent(b_model, middleware, system_prompt="You are agent B. " * 200)
    for turn in range(6):
        b.invoke(ask(f"B turn {turn}: " + "notes " * 3_000), config("b"))
        a.invoke(ask(f"A turn {turn}"), config("a"))
    assert b_model.summary_requests, "B's thread was compacted"
    assert a_model.summary_requests == []
    assert max(b_model.counts) <= window

"""``AutocompactMiddleware.tip(state)`` after real agent runs (LangChain's own fake chat model):
past *hard* the critical tip says what the engine did and will do — paused by a hold, a forced
compaction already run before the last model call, or one to run before the next."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from autocompact.errors import ConfigError
from autocompact.integrations.langchain import AutocompactMiddleware

from .lc_fakes import ScriptedModel, tool_call
from .test_langchain_agent import LADDER, WINDOW, ask, config, read_file, scripted

PAUSED = "Automatic compaction is paused"
ALREADY = "A forced compaction already ran before this send"
NEXT = "A forced compaction runs before the next send"


def _run(steps: list[AIMessage | str], turns: int, **model: Any) -> tuple[Any, dict[str, Any]]:
    """The middleware and the thread's state after ``turns`` user turns of ``steps``."""
    middleware = AutocompactMiddleware(context_window=WINDOW, clear_tool_outputs=False)
    agent = create_agent(
        ScriptedModel(messages=iter(steps), window=WINDOW, **model),
        [read_file],
        system_prompt="You are a careful coding agent. " * 20,
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    for turn in range(turns):
        agent.invoke(ask(f"turn {turn}: read the next modules"), config())
    return middleware, agent.get_state(config()).values


def test_the_critical_tip_during_a_hold_says_compaction_is_paused() -> None:
    """Past hard after failed rescues (a hold stops the next one at this count), the tip says
    automatic compaction is paused, not that a forced one runs before the next send (it said
    so: the middleware passed the tip neither the hold nor the rescue)."""
    middleware, state = _run(
        scripted([24_000] * 14), 7, summaries=[RuntimeError("summary model down")] * 20
    )
    entry = state["autocompact"]
    assert entry["tokens"] >= LADDER.hard
    assert entry["hold_until"] is not None
    assert entry["tokens"] < entry["hold_until"]
    tip = middleware.tip(state)
    assert tip is not None
    assert tip.id == "context-critical"
    assert PAUSED in tip.message
    assert NEXT not in tip.message
    assert ALREADY not in tip.message


def test_the_critical_tip_after_a_rescue_says_it_already_ran() -> None:
    """A hard rescue ran before the last model call (in before_model) and its long answer went
    past hard again: the tip says a forced compaction already ran, and another runs before the
    next send (it said one runs before the next send, as if none had run: the model call's
    hook wrote over the rescue before_model recorded)."""
    big = tool_call("read_file", {"path": "big.py", "size": 90_000}, "call-big")
    steps = [*scripted([24_000] * 10), big, "answer " * 30_000]
    middleware, state = _run(steps, 6)
    entry = state["autocompact"]
    assert entry["tokens"] >= LADDER.hard
    assert entry["hold_until"] is None
    assert [c["trigger"] for c in entry["compactions"]] == ["hard"]
    tip = middleware.tip(state)
    assert tip is not None
    assert ALREADY in tip.message


def test_the_critical_tip_when_the_answer_crossed_hard_says_one_runs_next() -> None:
    """When the answer is what went past hard (no compaction ran before its model call), the
    tip says a forced compaction runs before the next send."""
    steps = [*scripted([24_000] * 10), "answer " * 100_000]
    middleware, state = _run(steps, 6)
    entry = state["autocompact"]
    assert entry["tokens"] >= LADDER.hard
    assert entry["compactions"] == []
    tip = middleware.tip(state)
    assert tip is not None
    assert NEXT in tip.message


def test_report_and_tip_take_the_state_snapshot() -> None:
    """``agent.get_state(config)`` (a StateSnapshot) is read as its ``.values``; anything else
    that is no thread state (None, a list of messages) is a ConfigError naming what to pass
    (each was an AttributeError: 'StateSnapshot' object has no attribute 'get')."""
    middleware = AutocompactMiddleware(context_window=WINDOW, summarizer="offline")
    agent = create_agent(
        ScriptedModel(messages=iter(["ok"]), window=WINDOW),
        [read_file],
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    agent.invoke(ask("hi " * 5_000), config())
    snapshot = agent.get_state(config())
    report = middleware.context_report(snapshot)
    assert report == middleware.context_report(snapshot.values)
    assert report.tokens > 3_000
    assert middleware.tip(snapshot) == middleware.tip(snapshot.values)
    for wrong in (None, snapshot.values["messages"], "state"):
        for read in (middleware.context_report, middleware.tip):
            with pytest.raises(ConfigError, match=r"agent.get_state\(config\) or its .values"):
                read(wrong)  # type: ignore[arg-type]

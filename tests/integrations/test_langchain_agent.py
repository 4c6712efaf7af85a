"""AutocompactMiddleware in real LangChain agents: create_agent on a scripted fake chat model,
a real tool loop, LangGraph's InMemorySaver and resumes."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from autocompact.compaction.plan import CompressionTrigger
from autocompact.events import (
    BreakerOpened,
    CompactionFailed,
    CompactionStarted,
    CompactionSucceeded,
    Event,
    RequestTrimmed,
    ThresholdCrossed,
)
from autocompact.integrations.langchain import AutocompactMiddleware
from autocompact.thresholds import MAX_CONSECUTIVE_FAILURES, Tier, compute_thresholds

from .lc_fakes import ScriptedModel, orphans, tool_call

WINDOW = 128_000
LADDER = compute_thresholds(WINDOW)


@tool
def read_file(path: str, size: int) -> str:
    """Read ``size`` characters of a file."""
    return (f"{path}: " + "def handler(request): return request.body  # ok\n" * size)[:size]


def scripted(sizes: Sequence[int], *, per_turn: int = 2) -> list[AIMessage | str]:
    """Replies for :func:`run`: ``per_turn`` read_file calls (one per size), then an answer."""
    steps: list[AIMessage | str] = []
    for i, n in enumerate(sizes):
        steps.append(tool_call("read_file", {"path": f"src/m{i}.py", "size": n}, f"call-{i}"))
        if i % per_turn == per_turn - 1 or i == len(sizes) - 1:
            steps.append(f"read up to m{i}.py")
    return steps


def turns(sizes: Sequence[int], per_turn: int = 2) -> int:
    """How many user turns :func:`run` needs for ``sizes``."""
    return -(-len(sizes) // per_turn)


def run(agent: Any, sizes: Sequence[int], thread: str = "t", per_turn: int = 2) -> Any:
    """Drive a multi-turn conversation: one user message per ``per_turn`` tool calls."""
    out = None
    for turn in range(turns(sizes, per_turn)):
        out = agent.invoke(ask(f"turn {turn}: read the next modules"), config(thread))
    return out


async def arun(agent: Any, sizes: Sequence[int], thread: str = "t") -> Any:
    """Async :func:`run`."""
    out = None
    for turn in range(turns(sizes)):
        out = await agent.ainvoke(ask(f"turn {turn}: read the next modules"), config(thread))
    return out


def build(
    model: ScriptedModel,
    *,
    saver: InMemorySaver | None = None,
    events: list[Event] | None = None,
    **options: Any,
) -> Any:
    """An agent with the middleware, a system prompt and the read_file tool."""
    options.setdefault("context_window", WINDOW)
    hooks = [events.append] if events is not None else []
    middleware = AutocompactMiddleware(hooks=hooks, **options)
    return create_agent(
        model,
        [read_file],
        system_prompt="You are a careful coding agent. " * 20,
        middleware=[middleware],
        checkpointer=saver or InMemorySaver(),
    )


def config(thread: str = "t") -> Any:
    """A thread's run config."""
    return {"configurable": {"thread_id": thread}}


def ask(text: str) -> dict[str, list[BaseMessage]]:
    """An agent input with one user message."""
    return {"messages": [HumanMessage(content=text)]}


def crossings(events: Sequence[Event]) -> list[tuple[Tier, Tier]]:
    """The tier changes the hooks saw, in order."""
    return [(e.previous, e.current) for e in events if isinstance(e, ThresholdCrossed)]


def all_requests(model: ScriptedModel) -> list[list[BaseMessage]]:
    """Every request the model received (turns and summaries)."""
    return [*model.requests, *model.summary_requests]


def test_warn_and_auto_crossings_then_summary_keeps_requests_under_window() -> None:
    """Growing tool output crosses warn then auto; the summary runs before the send, persists
    into the checkpoint, and no request is ever over the window."""
    model = ScriptedModel(messages=iter(scripted([24_000] * 14)), window=WINDOW)
    events: list[Event] = []
    saver = InMemorySaver()
    agent = build(model, saver=saver, events=events, clear_tool_outputs=False)
    out = run(agent, [24_000] * 14)
    assert out["messages"][-1].content == "read up to m13.py"
    seen = crossings(events)
    assert (Tier.SAFE, Tier.WARN) in seen
    assert (Tier.WARN, Tier.AUTO) in seen
    assert seen.index((Tier.SAFE, Tier.WARN)) < seen.index((Tier.WARN, Tier.AUTO))
    started = [e for e in events if isinstance(e, CompactionStarted)]
    assert started
    assert started[0].trigger is CompressionTrigger.AUTO
    assert any(isinstance(e, CompactionSucceeded) for e in events)
    assert model.summary_requests, "the agent's own model wrote the summary"
    assert max(model.counts) < WINDOW
    # The compacted history is what the checkpoint holds: it starts with the summary.
    saved = agent.get_state(config()).values["messages"]
    assert "<state_snapshot>" in str(saved[0].content)
    assert len(saved) < 2 * 14 + 2
    for request in all_requests(model):
        assert orphans(request) == []


def test_hard_crossing_forces_the_rescue() -> None:
    """A tool result that jumps the count from below auto to past hard forces a hard rescue."""
    sizes = [20_000] * 10 + [80_000]
    model = ScriptedModel(messages=iter(scripted(sizes)), window=WINDOW)
    events: list[Event] = []
    agent = build(model, events=events, clear_tool_outputs=False)
    run(agent, sizes)
    jumps = crossings(events)
    assert any(
        current is Tier.HARD and previous in (Tier.SAFE, Tier.WARN) for previous, current in jumps
    )
    started = [e for e in events if isinstance(e, CompactionStarted)]
    assert next(e.trigger for e in started) is CompressionTrigger.HARD
    assert max(model.counts) < WINDOW


def test_clearing_alone_when_it_is_enough() -> None:
    """With clearing on, old tool output is cleared first and no summary is requested."""
    model = ScriptedModel(messages=iter(scripted([24_000] * 14)), window=WINDOW)
    events: list[Event] = []
    agent = build(model, events=events)
    run(agent, [24_000] * 14)
    methods = [e.info.method for e in events if isinstance(e, CompactionSucceeded)]
    assert methods
    assert set(methods) == {"clearing"}
    assert model.summary_requests == []
    saved = agent.get_state(config()).values["messages"]
    assert any("cleared" in str(m.content).lower() for m in saved if isinstance(m, ToolMessage))


def _fill(
    model_sizes: Sequence[int], summaries: list[Any], **options: Any
) -> tuple[Any, ScriptedModel, list[Event], InMemorySaver]:
    model = ScriptedModel(messages=iter(scripted(model_sizes)), window=WINDOW, summaries=summaries)
    events: list[Event] = []
    saver = InMemorySaver()
    agent = build(model, saver=saver, events=events, clear_tool_outputs=False, **options)
    return agent, model, events, saver


def test_failed_summary_leaves_the_state_exactly_as_it_was() -> None:
    """A summary that fails leaves every message in the state as it was; the failure counts."""
    sizes = [24_000] * 12
    agent, model, events, _ = _fill(sizes, [RuntimeError("summary model down")] * 10)
    snapshots: list[list[BaseMessage]] = []
    original = model._generate

    def spy(messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        if "Write the <state_snapshot>" in str(messages[-1].content):
            snapshots.append(copy.deepcopy(agent.get_state(config()).values["messages"]))
        return original(messages, *args, **kwargs)

    object.__setattr__(model, "_generate", spy)
    run(agent, sizes)
    failed = [e for e in events if isinstance(e, CompactionFailed)]
    assert failed
    assert model.summary_requests
    assert not any(isinstance(e, CompactionSucceeded) for e in events)
    final = agent.get_state(config()).values["messages"]
    # Every message from before the first failed summary is still there, unchanged and in order.
    before = snapshots[0]
    assert [m.model_dump() for m in final[: len(before)]] == [m.model_dump() for m in before]
    entry = agent.get_state(config()).values["autocompact"]
    assert entry["consecutive_failures"] >= 1


def test_breaker_opens_and_survives_a_resume_per_thread() -> None:
    """Three failed summaries open the breaker; a new agent resuming the thread from the
    checkpointer does not try again, while another thread starts closed."""
    sizes = [24_000] * 14
    agent, _model, events, saver = _fill(sizes, [RuntimeError("down")] * 10)
    run(agent, sizes, "a")
    assert any(isinstance(e, BreakerOpened) for e in events)
    entry = agent.get_state(config("a")).values["autocompact"]
    assert entry["consecutive_failures"] == MAX_CONSECUTIVE_FAILURES

    resumed_model = ScriptedModel(
        messages=iter(scripted([2_000], per_turn=1)),
        window=WINDOW,
        summaries=[RuntimeError("still down")] * 5,
    )
    resumed_events: list[Event] = []
    resumed = build(resumed_model, saver=saver, events=resumed_events, clear_tool_outputs=False)
    resumed.invoke(ask("one more"), config("a"))
    triggers = [e.trigger for e in resumed_events if isinstance(e, CompactionStarted)]
    # The open breaker came back from the checkpoint: no automatic attempt; only a hard rescue
    # (which bypasses the breaker, SPEC §5) may run, and its failure adds nothing.
    assert CompressionTrigger.AUTO not in triggers
    entry = resumed.get_state(config("a")).values["autocompact"]
    assert entry["consecutive_failures"] == MAX_CONSECUTIVE_FAILURES
    assert max(resumed_model.counts) < WINDOW
    # Another thread on the same middleware starts closed.
    fresh = ScriptedModel(messages=iter(scripted([2_000], per_turn=1)), window=WINDOW)
    build(fresh, saver=saver).invoke(ask("hello"), config("b"))
    assert resumed.get_state(config("b")).values["autocompact"]["consecutive_failures"] == 0


def test_trim_only_the_outgoing_request_when_the_breaker_is_open() -> None:
    """Past hard with the summary failing, the guarantee trims the request, never the state,
    and keeps every tool pair whole."""
    sizes = [24_000] * 18
    agent, model, events, _ = _fill(sizes, [RuntimeError("down")] * 40)
    run(agent, sizes)
    trimmed = [e for e in events if isinstance(e, RequestTrimmed)]
    assert trimmed
    assert max(model.counts) < WINDOW
    saved = agent.get_state(config()).values["messages"]
    assert len(saved) == 9 * 2 + 18 * 2  # nothing left the state: 9 turns, 18 tool pairs
    for request in all_requests(model):
        assert orphans(request) == []


def test_restored_long_thread_compacts_before_the_first_send() -> None:
    """A long thread written without autocompact, resumed with it, is compacted (cold estimate
    over the whole state with the system prompt and tools) before its first request."""
    saver = InMemorySaver()
    plain_model = ScriptedModel(messages=iter(scripted([24_000] * 12)), window=10**7)
    plain = create_agent(plain_model, [read_file], system_prompt="x", checkpointer=saver)
    run(plain, [24_000] * 12)
    long_count = plain_model.counts[-1]
    assert long_count > LADDER.auto * 0.75

    model = ScriptedModel(messages=iter(["resumed"]), window=WINDOW)
    events: list[Event] = []
    agent = build(model, saver=saver, events=events, clear_tool_outputs=False)
    agent.invoke(ask("continue"), config())
    assert isinstance(events[0], ThresholdCrossed | CompactionStarted)
    assert any(isinstance(e, CompactionSucceeded) for e in events)
    assert model.summary_requests
    assert model.counts[0] < LADDER.auto
    for request in all_requests(model):
        assert orphans(request) == []


def test_overflow_from_the_model_compacts_and_retries_once() -> None:
    """When the model rejects a request as too long (LangChain's ContextOverflowError), the
    middleware compacts reactively and retries; the reply arrives."""
    sizes = [24_000] * 8
    model = ScriptedModel(messages=iter(scripted(sizes)), window=45_000)
    events: list[Event] = []
    agent = build(model, events=events, clear_tool_outputs=False)
    out = run(agent, sizes)
    assert out["messages"][-1].content == "read up to m7.py"
    triggers = [e.trigger for e in events if isinstance(e, CompactionStarted)]
    assert CompressionTrigger.REACTIVE in triggers


def test_overflow_that_compaction_cannot_fix_raises_langchains_error() -> None:
    """If the reactive compaction fails, LangChain's own overflow error reaches the caller."""
    sizes = [24_000] * 8
    model = ScriptedModel(
        messages=iter(scripted(sizes)), window=45_000, summaries=[RuntimeError("x")] * 5
    )
    agent = build(model, clear_tool_outputs=False)
    with pytest.raises(ContextOverflowError):
        run(agent, sizes)


def test_extractive_summarizer_makes_no_model_call() -> None:
    """summarizer='extractive' compacts offline: the model only sees turns."""
    model = ScriptedModel(messages=iter(scripted([24_000] * 14)), window=WINDOW)
    events: list[Event] = []
    agent = build(model, events=events, clear_tool_outputs=False, summarizer="offline")
    run(agent, [24_000] * 14)
    assert any(isinstance(e, CompactionSucceeded) for e in events)
    assert model.summary_requests == []


class CappedModel(ScriptedModel):
    """A scripted model that exposes an output cap and a thinking switch, as real ones do."""

    max_tokens: int | None = 64_000
    thinking: dict[str, Any] | None = Field(
        default_factory=lambda: {"type": "enabled", "budget_tokens": 8_000}
    )
    seen: list[tuple[int | None, Any]] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        if "Write the <state_snapshot>" in str(messages[-1].content):
            self.seen.append((self.max_tokens, self.thinking))
        return super()._generate(messages, *args, **kwargs)


def test_summary_by_the_agents_model_has_thinking_off_and_the_20k_cap() -> None:
    """The agent's own model writes the summary with max_tokens=20K and thinking disabled; the
    agent's turns keep the model's own settings."""
    model = CappedModel(messages=iter(scripted([24_000] * 14)), window=WINDOW)
    agent = build(model, clear_tool_outputs=False)
    run(agent, [24_000] * 14)
    assert model.seen
    assert all(seen == (20_000, {"type": "disabled"}) for seen in model.seen)
    assert model.max_tokens == 64_000
    assert model.thinking is not None


def test_context_report_and_tip_from_the_state() -> None:
    """The /context report and the tip are computed from a thread's saved state."""
    model = ScriptedModel(messages=iter(scripted([24_000] * 8)), window=WINDOW)
    middleware = AutocompactMiddleware(context_window=WINDOW)
    agent = create_agent(model, [read_file], middleware=[middleware], checkpointer=InMemorySaver())
    run(agent, [24_000] * 8)
    state = agent.get_state(config()).values
    report = middleware.context_report(state)
    assert report.tokens == state["autocompact"]["tokens"] > 0
    assert any("← current" in line for line in report.lines) or report.tier is Tier.SAFE
    tip = middleware.tip(state)
    expected_tier = LADDER.tier(report.tokens)
    assert (tip is None) == (expected_tier is Tier.SAFE)


async def test_async_agent_compacts_and_persists() -> None:
    """ainvoke runs abefore_model / awrap_model_call with the same behaviour."""
    model = ScriptedModel(messages=iter(scripted([24_000] * 14)), window=WINDOW)
    events: list[Event] = []
    agent = build(model, events=events, clear_tool_outputs=False)
    out = await arun(agent, [24_000] * 14)
    assert out["messages"][-1].content == "read up to m13.py"
    assert any(isinstance(e, CompactionSucceeded) for e in events)
    assert max(model.counts) < WINDOW
    saved = (await agent.aget_state(config())).values["messages"]
    assert "<state_snapshot>" in str(saved[0].content)
    for request in all_requests(model):
        assert orphans(request) == []


class FailingAfterCompaction(ScriptedModel):
    """Fails the first turn request after a compaction (a non-overflow model error)."""

    fail_next: bool = False

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        if self.fail_next and "Write the <state_snapshot>" not in str(messages[-1].content):
            self.fail_next = False
            raise RuntimeError("the model is down")
        return super()._generate(messages, *args, **kwargs)


def test_before_model_compaction_is_checkpointed_even_if_the_model_call_fails() -> None:
    """The compaction before_model makes is its own graph step: the checkpoint keeps it when the
    model call that follows fails, and the next run continues from it."""
    sizes = [24_000] * 14
    model = FailingAfterCompaction(messages=iter(scripted(sizes)), window=WINDOW)

    def arm(event: Event) -> None:
        if isinstance(event, CompactionSucceeded):
            model.fail_next = True

    middleware = AutocompactMiddleware(context_window=WINDOW, hooks=[arm], clear_tool_outputs=False)
    agent = create_agent(model, [read_file], middleware=[middleware], checkpointer=InMemorySaver())
    with pytest.raises(RuntimeError, match="the model is down"):
        run(agent, sizes)
    saved = agent.get_state(config()).values
    assert "<state_snapshot>" in str(saved["messages"][0].content)
    assert orphans(saved["messages"]) == []
    requests_before = len(model.requests)
    agent.invoke(None, config())  # resume the failed step from the checkpoint
    assert len(model.requests) == requests_before + 1
    assert model.counts[-1] < LADDER.auto


async def test_async_overflow_retry() -> None:
    """awrap_model_call compacts reactively and retries when the model rejects the prompt."""
    sizes = [24_000] * 8
    model = ScriptedModel(messages=iter(scripted(sizes)), window=45_000)
    events: list[Event] = []
    agent = build(model, events=events, clear_tool_outputs=False)
    out = await arun(agent, sizes)
    assert out["messages"][-1].content == "read up to m7.py"
    triggers = [e.trigger for e in events if isinstance(e, CompactionStarted)]
    assert CompressionTrigger.REACTIVE in triggers


@pytest.mark.parametrize(
    "chars_per_token",
    [
        pytest.param(4.0, id="tokenizer-0.5x"),
        pytest.param(2.0, id="tokenizer-1x"),
        pytest.param(1.0, id="tokenizer-2x"),
    ],
)
def test_no_request_over_the_window_whatever_the_tokenizer(chars_per_token: float) -> None:
    """With a model whose tokenizer counts 0.5x to 2x the engine's estimate (it rejects any
    request over its window), every turn is answered and no accepted request is over it."""
    sizes = [24_000] * 16
    model = ScriptedModel(
        messages=iter(scripted(sizes)), window=WINDOW, chars_per_token=chars_per_token
    )
    agent = build(model, clear_tool_outputs=False)
    out = run(agent, sizes)
    assert out["messages"][-1].content == "read up to m15.py"
    assert max(model.counts) <= WINDOW
    assert len(model.rejected) <= 1, "at most the one rejection the reactive retry answers"
    for request in all_requests(model):
        assert orphans(request) == []


def test_cold_estimate_counts_the_system_prompt_and_tool_schemas() -> None:
    """A restored thread whose messages alone are below warn, but whose system prompt makes the
    request pass auto, compacts before its first request (langchain issue #34664)."""
    from autocompact.estimation import estimate_text_tokens

    saver = InMemorySaver()
    system = "Follow the house rules for every change. " * 4_000  # ~40K tokens
    sizes = [14_000] * 8
    plain_model = ScriptedModel(messages=iter(scripted(sizes)), window=10**7)
    plain = create_agent(plain_model, [read_file], system_prompt=system, checkpointer=saver)
    run(plain, sizes)
    messages = plain.get_state(config()).values["messages"]
    from autocompact.estimation import estimate_content_tokens
    from autocompact.integrations.langchain import to_autocompact

    _, history = to_autocompact(messages)
    assert estimate_content_tokens(history) < LADDER.warn
    assert estimate_content_tokens(history) + estimate_text_tokens(system) >= LADDER.auto

    model = ScriptedModel(messages=iter(["resumed"]), window=WINDOW)
    events: list[Event] = []
    middleware = AutocompactMiddleware(context_window=WINDOW, hooks=[events.append])
    agent = create_agent(
        model, [read_file], system_prompt=system, middleware=[middleware], checkpointer=saver
    )
    agent.invoke(ask("continue"), config())
    started = [e for e in events if isinstance(e, CompactionStarted)]
    assert started
    assert started[0].tokens >= LADDER.auto
    assert any(isinstance(e, CompactionSucceeded) for e in events)


def test_clearing_one_result_keeps_the_other_tool_messages_of_its_run() -> None:
    """Clearing one ToolMessage of a run keeps the others as the very same objects, and the
    cleared one keeps its id, artifact and metadata (only its content is the placeholder)."""
    calls = [
        {"name": "read_file", "args": {"path": "a", "size": 1}, "id": "c1", "type": "tool_call"},
        {"name": "read_file", "args": {"path": "b", "size": 1}, "id": "c2", "type": "tool_call"},
    ]
    kept = ToolMessage(
        "small error",
        tool_call_id="c2",
        id="t2",
        status="error",
        artifact={"keep": "me"},
        additional_kwargs={"k": "v"},
        response_metadata={"r": 1},
    )
    cleared = ToolMessage("x" * 200_000, tool_call_id="c1", id="t1", artifact={"raw": 1})
    later = {"name": "read_file", "args": {"path": "c", "size": 1}, "id": "c3", "type": "tool_call"}
    history: list[BaseMessage] = [
        HumanMessage("hi", id="h1"),
        AIMessage("", tool_calls=calls, id="a1"),
        cleared,
        kept,
        AIMessage("ok", id="a2"),
        HumanMessage("next", id="h2"),
        AIMessage("", tool_calls=[later], id="a3"),
        ToolMessage("y" * 120_000, tool_call_id="c3", id="t3"),
        AIMessage("ok2", id="a4"),
        HumanMessage("go", id="h3"),
    ]
    events: list[Event] = []
    agent = build(
        ScriptedModel(messages=iter(["done"])),
        events=events,
        context_window=150_000,
        summarizer="offline",
    )
    out = agent.invoke({"messages": history}, config())
    assert [e.info.method for e in events if isinstance(e, CompactionSucceeded)] == ["clearing"]
    results = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    two = results["c2"]
    assert (two.id, two.content, two.status, two.name) == ("t2", "small error", "error", None)
    assert (two.artifact, two.additional_kwargs, two.response_metadata) == (
        {"keep": "me"},
        {"k": "v"},
        {"r": 1},
    )
    one = results["c1"]
    assert "cleared" in str(one.content).lower()
    assert (one.id, one.artifact, one.name) == ("t1", {"raw": 1}, None)

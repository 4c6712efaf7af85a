"""pydantic-ai integration through the real framework and its FunctionModel (no network)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_ai import Agent
from pydantic_ai import messages as pm
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.exceptions import ModelContextWindowExceededError
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from autocompact import ContentError
from autocompact.compaction import CompressionStatus
from autocompact.integrations.pydantic_ai import (
    STATE_KEY,
    Autocompact,
    async_history_processor,
    from_autocompact,
    history_processor,
    to_autocompact,
)

WINDOW = 32_000  # warn 19,200 · auto 22,400 · hard 22,400 (collapsed)
SNAPSHOT = "<state_snapshot><overall_goal>read the files</overall_goal></state_snapshot>"


def own_count(messages: list[pm.ModelMessage], info: AgentInfo) -> int:
    """The fake model's own tokenizer: 3 characters a token over every part's content, plus the
    instructions (the engine estimates 4 for text and 2 for JSON: the two disagree)."""
    chars = len(info.instructions or "")
    for message in messages:
        for part in message.parts:
            chars += len(str(getattr(part, "content", None) or getattr(part, "args", "") or ""))
    return chars // 3 + 20


class Script:
    """A FunctionModel script: a tool call per user prompt, then 'done'; summaries on request."""

    def __init__(self, *, summary: str = SNAPSHOT, overflow_over: int | None = None) -> None:
        self.summary = summary
        self.overflow_over = overflow_over
        self.sent: list[int] = []
        self.side_queries: list[dict[str, Any]] = []
        self.requests: list[list[pm.ModelMessage]] = []

    def __call__(self, messages: list[pm.ModelMessage], info: AgentInfo) -> pm.ModelResponse:
        """Answer one request."""
        tokens = own_count(messages, info)
        usage = RequestUsage(input_tokens=tokens, output_tokens=12)
        settings_ = dict(info.model_settings or {})
        if settings_.get("max_tokens") == 20_000:
            self.side_queries.append(settings_)
            return pm.ModelResponse(parts=[pm.TextPart(self.summary)], usage=usage)
        self.sent.append(tokens)
        self.requests.append(list(messages))
        if self.overflow_over is not None and tokens > self.overflow_over:
            raise ModelContextWindowExceededError("fn", "prompt is too long")
        last = messages[-1]
        if any(isinstance(p, pm.UserPromptPart) for p in last.parts):
            return pm.ModelResponse(parts=[pm.ToolCallPart("read", {"path": "a.py"})], usage=usage)
        return pm.ModelResponse(parts=[pm.TextPart("done")], usage=usage)


class RecordingModel(FunctionModel):
    """A FunctionModel that records the settings each request was made with (the function
    sees them after pydantic-ai dropped what the model does not support, such as thinking)."""

    def __init__(self, script: Script) -> None:
        super().__init__(script)
        self.recorded: list[dict[str, Any]] = []

    async def request(self, messages: Any, model_settings: Any, params: Any) -> Any:
        """Record, then answer as the FunctionModel does."""
        self.recorded.append(dict(model_settings or {}))
        return await super().request(messages, model_settings, params)


def make_agent(script: Script, capability: Any, output: int = 24_000) -> Agent[None, str]:
    """An agent with one tool whose output is ``output`` characters."""
    agent = Agent(RecordingModel(script), system_prompt="be brief", capabilities=[capability])

    @agent.tool_plain
    def read(path: str) -> str:
        return f"{path}: " + "x" * output

    return agent


def orphans(messages: list[pm.ModelMessage]) -> list[str]:
    """Tool returns whose call is not earlier in the same request (read from the wire format)."""
    calls: set[str] = set()
    bad: list[str] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, pm.ToolCallPart):
                calls.add(part.tool_call_id)
            elif isinstance(part, pm.ToolReturnPart) and part.tool_call_id not in calls:
                bad.append(part.tool_call_id)
    return bad


def run_turns(agent: Agent[None, str], turns: int) -> list[pm.ModelMessage]:
    """Run ``turns`` runs, each continuing the previous one's history."""
    history: list[pm.ModelMessage] | None = None
    for turn in range(turns):
        history = agent.run_sync(f"task {turn}", message_history=history).all_messages()
    assert history is not None
    return history


def test_long_tool_loop_stays_under_the_window_with_model_summaries() -> None:
    """Summaries by the agent's own model keep every request under the window by the model's
    own count, with no orphaned tool return, and the side query is capped with thinking off."""
    script = Script()
    agent = make_agent(script, Autocompact(context_window=WINDOW, clear_tool_outputs=False))
    history = run_turns(agent, 8)
    assert script.side_queries, "no summary was requested"
    model = agent.model
    assert isinstance(model, RecordingModel)
    side = [s for s in model.recorded if s.get("max_tokens") == 20_000]
    assert side
    assert all(s.get("thinking") is False for s in side)
    assert max(script.sent) < WINDOW
    assert all(not orphans(request) for request in script.requests)
    assert any(
        isinstance(p, pm.UserPromptPart) and "state_snapshot" in str(p.content)
        for m in history
        for p in m.parts
    )
    assert isinstance(history[0], pm.ModelRequest)
    assert isinstance(history[0].parts[0], pm.SystemPromptPart)


def test_without_autocompact_the_same_run_goes_over_the_window() -> None:
    """The control: the same script without the capability sends requests over the window."""
    script = Script()
    agent = Agent(FunctionModel(script), system_prompt="be brief")

    @agent.tool_plain
    def read(path: str) -> str:
        return f"{path}: " + "x" * 24_000

    run_turns(agent, 8)
    assert max(script.sent) > WINDOW


def test_compaction_usage_is_added_to_the_run() -> None:
    """A run that summarized reports one more request than it made to the agent."""
    script = Script()
    agent = make_agent(script, Autocompact(context_window=WINDOW, clear_tool_outputs=False))
    history: list[pm.ModelMessage] | None = None
    for turn in range(8):
        before = len(script.side_queries)
        result = agent.run_sync(f"task {turn}", message_history=history)
        history = result.all_messages()
        summaries = len(script.side_queries) - before
        assert result.usage.requests == 2 + summaries
    assert script.side_queries


def test_offline_summarizer_and_clearing_need_no_model_call() -> None:
    """With the offline summarizer no side query reaches the model."""
    script = Script()
    agent = make_agent(script, Autocompact(context_window=WINDOW, summarizer="offline"))
    run_turns(agent, 8)
    assert script.side_queries == []
    assert max(script.sent) < WINDOW


def test_state_is_stored_and_restored_through_message_history() -> None:
    """Failed summaries open the breaker across runs: the count lives in the history, so each
    new run given ``message_history`` continues it (a fresh count would never reach 3)."""
    script = Script(summary="")
    capability = Autocompact(context_window=100_000, clear_tool_outputs=False)
    agent = make_agent(script, capability, output=6_000)
    history = run_turns(agent, 40)
    counts = [
        m.metadata[STATE_KEY]["state"]["consecutive_failures"]
        for m in history
        if isinstance(m, pm.ModelRequest) and m.metadata and STATE_KEY in m.metadata
    ]
    assert max(counts) == 3  # the breaker opened, after failures spread over several runs
    first_open = counts.index(3)
    assert counts[first_open - 2 : first_open + 1] == [1, 2, 3]
    last = [m for m in history if isinstance(m, pm.ModelRequest) and m.metadata][-1]
    assert last.metadata[STATE_KEY]["state"]["calibration"]["samples"] > 0  # type: ignore[index]


def test_failed_summary_leaves_the_history_unchanged() -> None:
    """Every message the model ever saw is still in the history after failed summaries."""
    script = Script(summary="")
    agent = make_agent(script, Autocompact(context_window=WINDOW, clear_tool_outputs=False))
    history = run_turns(agent, 4)
    prompts = [p.content for m in history for p in m.parts if isinstance(p, pm.UserPromptPart)]
    assert prompts == [f"task {i}" for i in range(4)]


def test_breaker_open_guarantee_trims_the_request_not_the_history() -> None:
    """With every summary failing the requests still fit; the history keeps every turn."""
    script = Script(summary="")
    agent = make_agent(script, Autocompact(context_window=WINDOW, clear_tool_outputs=False))
    history = run_turns(agent, 10)
    assert max(script.sent) < WINDOW
    assert len([m for m in history if isinstance(m, pm.ModelResponse)]) == 20
    assert all(not orphans(request) for request in script.requests)


def test_reactive_retry_after_context_window_error() -> None:
    """A ModelContextWindowExceededError forces a compaction and the attempt is retried."""
    script = Script(overflow_over=12_000)
    agent = make_agent(
        script, Autocompact(context_window=WINDOW, clear_tool_outputs=False), output=20_000
    )
    run_turns(agent, 3)
    rejected = [t for t in script.sent if t > 12_000]
    assert rejected, "the scripted model never rejected a request"
    assert script.side_queries


def test_reactive_failure_surfaces_the_original_error() -> None:
    """When the reactive compaction fails the model's own error propagates."""
    script = Script(summary="", overflow_over=12_000)
    agent = make_agent(
        script, Autocompact(context_window=WINDOW, clear_tool_outputs=False), output=20_000
    )
    with pytest.raises(ModelContextWindowExceededError):
        run_turns(agent, 3)


def test_sync_history_processor_with_offline_summaries() -> None:
    """ProcessHistory with the synchronous processor compacts with the extractive summarizer."""
    script = Script()
    events: list[Any] = []
    processor = history_processor(WINDOW, summarizer="offline", hooks=[events.append])
    run_turns(make_agent(script, ProcessHistory(processor)), 8)
    statuses = [e.info.status for e in events if e.kind == "compaction_succeeded"]
    assert CompressionStatus.COMPRESSED in statuses
    assert script.side_queries == []


async def test_async_history_processor_uses_the_agents_model() -> None:
    """The async processor summarizes through the agent's own model."""
    script = Script()
    processor = async_history_processor(WINDOW, clear_tool_outputs=False)
    agent = make_agent(script, ProcessHistory(processor))
    history: list[pm.ModelMessage] | None = None
    for turn in range(8):
        result = await agent.run(f"task {turn}", message_history=history)
        history = result.all_messages()
    assert script.side_queries


def test_sync_processor_refuses_the_async_model() -> None:
    """The synchronous processor cannot call the agent's model and says what to use."""
    from autocompact import ConfigError

    with pytest.raises(ConfigError, match="async_history_processor"):
        history_processor(WINDOW, summarizer="model")


# -- conversion ----------------------------------------------------------------------------------

texts = st.text(min_size=0, max_size=40)


@st.composite
def histories(draw: st.DrawFn) -> list[pm.ModelMessage]:
    """Histories with text, images, tool call/return pairs, retry prompts and thinking."""
    out: list[pm.ModelMessage] = [
        pm.ModelRequest(parts=[pm.SystemPromptPart(draw(texts)), pm.UserPromptPart(draw(texts))])
    ]
    for turn in range(draw(st.integers(0, 5))):
        call_id = f"call_{turn}"
        parts: list[Any] = []
        if draw(st.booleans()):
            parts.append(pm.ThinkingPart(draw(texts), signature=draw(st.none() | texts)))
        parts.append(pm.ToolCallPart("tool", {"q": draw(texts)}, tool_call_id=call_id))
        out.append(pm.ModelResponse(parts=parts))
        outcome = draw(st.sampled_from(["success", "failed", "retried"]))
        reply = pm.ToolReturnPart("tool", draw(texts), tool_call_id=call_id, outcome=outcome)
        out.append(pm.ModelRequest(parts=[reply]))
        out.append(pm.ModelResponse(parts=[pm.TextPart(draw(texts))]))
        content: list[Any] = [draw(texts)]
        if draw(st.booleans()):
            content.append(pm.ImageUrl(url="https://example.com/a.png"))
        if draw(st.booleans()):
            content.append(pm.BinaryContent(data=b"\x89PNG", media_type="image/png"))
        out.append(pm.ModelRequest(parts=[pm.UserPromptPart(content)]))
    return out


@settings(max_examples=60, deadline=None)
@given(histories())
def test_round_trip_returns_the_same_objects(history: list[pm.ModelMessage]) -> None:
    """Converting and converting back gives the very same messages, system prompt in place."""
    converted = to_autocompact(history)
    back = from_autocompact(converted.messages, converted)
    assert len(back) == len(history)
    assert all(a is b for a, b in zip(back, history, strict=True))


@settings(max_examples=60, deadline=None)
@given(histories())
def test_structural_round_trip_is_a_fixed_point(history: list[pm.ModelMessage]) -> None:
    """Rebuilt without the originals, the messages convert to the same engine messages."""
    converted = to_autocompact(history)
    rebuilt = from_autocompact(converted.messages)
    assert to_autocompact(rebuilt).messages == converted.messages


def test_retry_prompt_parts_convert() -> None:
    """Retry prompts (deprecated) and retry feedback convert to a tool error and to text."""
    with pytest.warns(match="RetryPromptPart"):
        retry = pm.RetryPromptPart("bad args", tool_name="tool", tool_call_id="c1")
    history: list[pm.ModelMessage] = [
        pm.ModelRequest(parts=[pm.UserPromptPart("go")]),
        pm.ModelResponse(parts=[pm.ToolCallPart("tool", {}, tool_call_id="c1")]),
        pm.ModelRequest(parts=[retry]),
    ]
    converted = to_autocompact(history)
    (response,) = converted.messages[2].function_responses
    assert response.is_error
    assert "bad args" in str(response.response)
    assert from_autocompact(converted.messages, converted)[2] is history[2]


@pytest.mark.parametrize(
    "message",
    [
        pm.ModelRequest(parts=[pm.UserPromptPart([pm.AudioUrl(url="https://example.com/a.mp3")])]),
        pm.ModelResponse(parts=[pm.FilePart(pm.BinaryContent(b"x", media_type="image/png"))]),
    ],
    ids=["audio", "generated-file"],
)
def test_unexpressible_parts_raise(message: pm.ModelMessage) -> None:
    """A part the engine cannot express raises, naming the message."""
    with pytest.raises(ContentError, match="message 0"):
        to_autocompact([message])


def test_native_compaction_part_goes_back_as_its_summary() -> None:
    """An OpaquePart (another provider's native compaction) reaches pydantic-ai as text."""
    from autocompact import Message
    from autocompact.content import OpaquePart

    part = OpaquePart(provider="anthropic", family="claude", payload={}, summary="the summary")
    back = from_autocompact([Message(role="user", parts=(part,)), Message.model("ok")])
    assert isinstance(back[0], pm.ModelRequest)
    assert back[0].parts[0].content == "the summary"  # type: ignore[union-attr]


def test_the_models_count_teaches_the_scale() -> None:
    """Each request carries the calibration the model's count of the previous one taught: about
    2/3 (the model counts 3 characters a token where the estimate counts 2 for the tool output
    that is most of a request)."""
    script = Script()
    history = run_turns(make_agent(script, Autocompact(context_window=100_000)), 2)
    tagged = [m for m in history if isinstance(m, pm.ModelRequest) and m.metadata]
    calibration = tagged[-1].metadata[STATE_KEY]["state"]["calibration"]  # type: ignore[index]
    assert calibration["samples"] == 2  # the first request is too small to teach
    assert calibration["factor"] == pytest.approx(2 / 3, rel=0.05)

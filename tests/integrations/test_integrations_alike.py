"""The integrations behave alike on one tool-heavy workload (16K window, two ~3K-token reads a
turn, a model that counts 3 characters a token): clearing without a wasted summary, side
queries counted in the framework's usage, honest counts in the hooks' records."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai import messages as pm
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.usage import RequestUsage

from autocompact.compaction import CompressionStatus
from autocompact.errors import ConfigError
from autocompact.guard import plausible_prompt_count
from autocompact.integrations.pydantic_ai import Autocompact, history_processor

WINDOW = 16_000
FILE_CHARS = 9_000


class Reader:
    """A FunctionModel script: two file reads per user prompt, then 'done'; it counts 3
    characters a token and records the side queries (sent without tools)."""

    def __init__(self, *, summary: str = "<state_snapshot>read</state_snapshot>") -> None:
        self.summary = summary
        self.side_queries = 0
        self.main = 0

    def __call__(self, messages: list[pm.ModelMessage], info: AgentInfo) -> pm.ModelResponse:
        """Answer one request."""
        chars = len(info.instructions or "")
        for message in messages:
            for part in message.parts:
                chars += len(str(getattr(part, "content", None) or getattr(part, "args", "")))
        usage = RequestUsage(input_tokens=chars // 3 + 20, output_tokens=12)
        if not info.function_tools:  # the side query goes out without tools
            self.side_queries += 1
            return pm.ModelResponse(parts=[pm.TextPart(self.summary)], usage=usage)
        self.main += 1
        if any(isinstance(p, pm.UserPromptPart) for p in messages[-1].parts):
            calls = [pm.ToolCallPart("read_file", {"path": p}) for p in ("a.py", "b.py")]
            return pm.ModelResponse(parts=list(calls), usage=usage)
        return pm.ModelResponse(parts=[pm.TextPart("done")], usage=usage)


def reader_agent(script: Reader, capability: Any, chars: int = FILE_CHARS) -> Agent[None, str]:
    """An agent with a ``read_file`` tool of ``chars`` characters (about 3K tokens)."""
    agent = Agent(FunctionModel(script), system_prompt="be brief", capabilities=[capability])

    @agent.tool_plain
    def read_file(path: str) -> str:
        return f"{path}: " + "x" * chars

    return agent


def test_pydantic_ai_clears_without_a_wasted_summary() -> None:
    """The default capability on the workload clears tool output and sends no summary side
    query (clearing bought what could be bought), and each clearing reports the count it left
    (not 0)."""
    script = Reader()
    events: list[Any] = []
    agent = reader_agent(script, Autocompact(context_window=WINDOW, hooks=[events.append]))
    history: list[pm.ModelMessage] | None = None
    for turn in range(5):
        history = agent.run_sync(f"task {turn}", message_history=history).all_messages()
    clearings = [
        e.info for e in events if e.kind == "compaction_succeeded" and e.info.method == "clearing"
    ]
    assert clearings
    assert script.side_queries == 0
    assert all(info.summary_failure is None for info in clearings)
    assert all(info.new_token_count > 0 for info in clearings)
    for info in clearings:
        assert info.new_token_count < info.original_token_count
    assert not [e for e in events if e.kind == "compaction_failed"]


def test_pydantic_ai_usage_counts_failed_side_queries() -> None:
    """A summary side query that fails (the model answers nothing) still counts as a request in
    the run's usage, as every main request does."""
    script = Reader(summary="")
    capability = Autocompact(context_window=WINDOW, clear_tool_outputs=False)
    agent = reader_agent(script, capability, chars=3_000)
    history: list[pm.ModelMessage] | None = None
    requests = 0
    for turn in range(8):
        result = agent.run_sync(f"task {turn}", message_history=history)
        history = result.all_messages()
        requests += result.usage.requests
    assert script.side_queries > 0
    assert requests == script.main + script.side_queries


def test_clearing_info_counts_on_the_providers_scale() -> None:
    """A clearing's new count is the provider's count less the saving on its scale: never 0
    while history remains (the hooks receive the real number)."""
    script = Reader()
    events: list[Any] = []
    agent = reader_agent(script, Autocompact(context_window=WINDOW, hooks=[events.append]))
    history: list[pm.ModelMessage] | None = None
    for turn in range(3):
        history = agent.run_sync(f"task {turn}", message_history=history).all_messages()
    infos = [e.info for e in events if e.kind == "compaction_succeeded"]
    assert infos
    assert all(i.status is CompressionStatus.COMPRESSED for i in infos)
    assert all(i.new_token_count >= i.breakdown.conversation for i in infos if i.breakdown)
    assert all(i.new_token_count > 0 for i in infos)


def test_pydantic_ai_distrusts_a_streamed_count_far_below_the_estimate() -> None:
    """A streamed FunctionModel reports ``input_tokens=50`` for every request: the count is not
    believed (it is far below the local estimate of the same request), so compaction still acts
    and no request goes out over the window by the estimate."""
    sent: list[int] = []

    async def stream(messages: list[pm.ModelMessage], info: AgentInfo) -> Any:
        chars = len(info.instructions or "")
        for message in messages:
            for part in message.parts:
                chars += len(str(getattr(part, "content", None) or getattr(part, "args", "")))
        sent.append(chars // 3)
        if any(isinstance(p, pm.UserPromptPart) for p in messages[-1].parts):
            yield {0: DeltaToolCall("read_file", '{"path": "a.py"}', tool_call_id="a")}
            yield {1: DeltaToolCall("read_file", '{"path": "b.py"}', tool_call_id="b")}
            return
        yield "done"

    def summarize(messages: list[pm.ModelMessage], info: AgentInfo) -> pm.ModelResponse:
        return pm.ModelResponse(parts=[pm.TextPart("<state_snapshot>read</state_snapshot>")])

    events: list[Any] = []
    model = FunctionModel(summarize, stream_function=stream)
    capability = Autocompact(context_window=WINDOW, hooks=[events.append])
    agent = Agent(model, system_prompt="be brief", capabilities=[capability])

    @agent.tool_plain
    def read_file(path: str) -> str:
        return f"{path}: " + "x" * 6_000

    async def ignore(ctx: Any, events_: Any) -> None:
        async for _ in events_:
            pass

    async def run() -> None:
        history: list[pm.ModelMessage] | None = None
        for turn in range(6):
            result = await agent.run(
                f"task {turn}", message_history=history, event_stream_handler=ignore
            )
            history = result.all_messages()
            assert all(
                m.usage.input_tokens <= 60 for m in history if isinstance(m, pm.ModelResponse)
            )

    asyncio.run(run())
    assert max(sent) < WINDOW, sent
    assert any(e.kind == "compaction_succeeded" for e in events)
    assert max(sent) < WINDOW


def test_plausible_prompt_count_rule() -> None:
    """A count is believed within 10x of the estimate either way, with 2,048 tokens of slack
    above; zero is never a count."""
    assert plausible_prompt_count(1_000, 10_000)
    assert not plausible_prompt_count(50, 16_000)
    assert plausible_prompt_count(2_058, 1)
    assert not plausible_prompt_count(102_049, 10_000)
    assert not plausible_prompt_count(0, 100)


def test_history_processor_never_sends_over_the_window() -> None:
    """``ProcessHistory(history_processor(...))`` under a 4K system prompt on the workload:
    every turn completes and no request is over the window by the model's own count (the
    guarantee's trimming reaches the request, with a marker in the history)."""
    sent: list[int] = []

    class Counting(Reader):
        def __call__(self, messages: list[pm.ModelMessage], info: AgentInfo) -> pm.ModelResponse:
            response = super().__call__(messages, info)
            if info.function_tools:
                sent.append(response.usage.input_tokens)
            return response

    processor = history_processor(WINDOW)
    agent = Agent(
        FunctionModel(Counting()),
        system_prompt="be brief. " + "Follow the house rules. " * 500,
        capabilities=[ProcessHistory(processor)],
    )

    @agent.tool_plain
    def read_file(path: str) -> str:
        return f"{path}: " + "x" * FILE_CHARS

    history: list[pm.ModelMessage] | None = None
    for turn in range(8):
        history = agent.run_sync(f"task {turn}", message_history=history).all_messages()
    assert len(sent) >= 16
    assert max(sent) < WINDOW


def test_pydantic_ai_window_from_the_model_profile() -> None:
    """``Autocompact()`` with no number takes the model profile's ``context_window`` (the run
    behaves as with the number given); a model without one gets a clear error."""
    script = Reader()
    events: list[Any] = []
    model = FunctionModel(script, profile={"context_window": WINDOW})
    agent = Agent(
        model, system_prompt="be brief", capabilities=[Autocompact(hooks=[events.append])]
    )

    @agent.tool_plain
    def read_file(path: str) -> str:
        return f"{path}: " + "x" * FILE_CHARS

    history: list[pm.ModelMessage] | None = None
    for turn in range(3):
        history = agent.run_sync(f"task {turn}", message_history=history).all_messages()
    assert any(e.kind == "compaction_succeeded" for e in events)

    bare = Agent(FunctionModel(Reader()), capabilities=[Autocompact()])
    with pytest.raises(ConfigError, match="context_window="):
        bare.run_sync("hello")

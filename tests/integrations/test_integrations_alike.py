"""The integrations behave alike on one tool-heavy workload (16K window, two ~3K-token reads a
turn, a model that counts 3 characters a token): clearing without a wasted summary, side
queries counted in the framework's usage, honest counts in the hooks' records."""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent
from pydantic_ai import messages as pm
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from autocompact.compaction import CompressionStatus
from autocompact.integrations.pydantic_ai import Autocompact

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

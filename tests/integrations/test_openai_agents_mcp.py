"""The tools an agent's MCP servers list are sent with every request: they are counted. Checked
through the real runner with an MCP server of the SDK's own interface (no process, no network)
and a model that counts the tool schemas it receives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession, set_tracing_disabled
from agents.mcp import MCPServer
from mcp.types import CallToolResult, GetPromptResult, ListPromptsResult, TextContent
from mcp.types import Tool as MCPTool

from autocompact.integrations.openai_agents import AutocompactSession

from .agents_script import (
    ScriptedModel,
    count_tokens,
    session_with_history,
    stored_history,
    text_output,
)

set_tracing_disabled(True)

WINDOW = 32_000  # hard threshold: 22,400 tokens by the estimate


class ListedTools(MCPServer):
    """An MCP server with ``count`` tools of long schemas; it counts how often it was listed."""

    def __init__(self, count: int) -> None:
        super().__init__()
        self.listed = 0
        self.tools = [
            MCPTool(
                name=f"lookup_{n}",
                description="Looks a record up in the archive. " * 20,
                inputSchema={
                    "type": "object",
                    "properties": {
                        f"field_{k}": {"type": "string", "description": "a filter " * 30}
                        for k in range(6)
                    },
                },
            )
            for n in range(count)
        ]

    @property
    def name(self) -> str:
        return "archive"

    async def connect(self) -> None:
        return None

    async def cleanup(self) -> None:
        return None

    async def list_tools(self, run_context: Any = None, agent: Any = None) -> list[MCPTool]:
        self.listed += 1
        return list(self.tools)

    async def call_tool(
        self, tool_name: str, arguments: dict[str, Any] | None, meta: Any = None
    ) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text="found")])

    async def list_prompts(self) -> ListPromptsResult:
        return ListPromptsResult(prompts=[])

    async def get_prompt(
        self, name: str, arguments: dict[str, str] | None = None
    ) -> GetPromptResult:
        raise KeyError(name)


async def session_for(kind: str, tmp_path: Path) -> Any:
    """A session of ``kind`` holding the stored history, stored without any compaction."""
    return await session_with_history(kind, tmp_path, WINDOW, "m")


@pytest.mark.parametrize("kind", ["wrapper", "store"])
async def test_mcp_tools_are_counted(kind: str, tmp_path: Path) -> None:
    """A request the items alone keep under the hard threshold, that the MCP server's tool
    declarations push over the window, is trimmed before it is sent (before, it went out at
    34,740 tokens by the model's count on a 32,000 window, and the model refused it)."""
    server = ListedTools(12)
    model = ScriptedModel(lambda system, items, options: [text_output("done")], window=WINDOW)
    agent = Agent(name="clerk", instructions="file it", model=model, mcp_servers=[server])
    session = await session_for(kind, tmp_path)
    listed = await agent.get_mcp_tools(_context())
    assert count_tokens("file it", stored_history(), listed) > WINDOW  # the premise
    result = await Runner.run(agent, "next", session=session, run_config=session.run_config())
    assert result.final_output == "done"
    assert model.requests[0]["tools"] == 12
    assert {spec.name for spec in session.tools} == {f"lookup_{n}" for n in range(12)}
    assert session.trimmed_requests == 1
    assert max(r["tokens"] for r in model.requests) <= WINDOW
    # The runner lists them for the request, the filter once more to count them.
    assert server.listed == 3  # the premise's listing included


async def test_an_agent_without_mcp_servers_is_filtered_at_once() -> None:
    """No MCP server: the filter answers synchronously (no awaitable), as before."""
    from agents.run_config import CallModelData, ModelInputData

    session = AutocompactSession(SQLiteSession("s"), context_window=WINDOW, summarizer="offline")
    agent = Agent(name="plain", instructions="hi")
    data = CallModelData(
        model_data=ModelInputData(input=[{"role": "user", "content": "hello"}], instructions="hi"),
        agent=agent,
        context=None,
    )
    out = session.call_model_input_filter(data)
    assert isinstance(out, ModelInputData)


def _context() -> Any:
    from agents.run_context import RunContextWrapper

    return RunContextWrapper(context=None)

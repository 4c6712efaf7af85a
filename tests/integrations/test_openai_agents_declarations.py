"""What the Agents SDK sends besides the items is counted: handoffs (function tool declarations)
and the output schema (``text.format``), checked against a model that counts the wire form; and
an agent used as a tool is not taken for the session's own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agents import (
    Agent,
    AgentOutputSchema,
    Runner,
    SQLiteSession,
    Usage,
    handoff,
    set_tracing_disabled,
)
from agents.items import ModelResponse
from pydantic import BaseModel, Field, create_model

from autocompact.integrations._openai_agents_convert import agent_tool_specs
from autocompact.integrations.openai_agents import AutocompactSession

from .agents_script import (
    ScriptedModel,
    call_output,
    count_tokens,
    declarations_tokens,
    session_with_history,
    stored_history,
    text_output,
)

set_tracing_disabled(True)

WINDOW = 32_000  # hard threshold: 22,400 tokens by the estimate
LONG = "Knows the regulations of the field in depth, with every exception and precedent. " * 70


def report_type() -> type[BaseModel]:
    """A large output type: 12 fields with long descriptions (a schema of about 8K chars)."""
    fields: dict[str, Any] = {
        f"field_{n}": (str, Field(description=f"part {n} of the report: " + "detail " * 90))
        for n in range(12)
    }
    built: type[BaseModel] = create_model("Report", **fields)
    return built


def report_json() -> str:
    """A final output the output type accepts."""
    return json.dumps({f"field_{n}": "ok" for n in range(12)})


def triage(model: ScriptedModel) -> Agent[Any]:
    """An agent with 3 handoffs to experts with long descriptions and a large output type."""
    experts = [Agent(name=f"expert_{n}", handoff_description=LONG, model=model) for n in range(3)]
    return Agent(
        name="triage",
        instructions="route the question",
        model=model,
        handoffs=list(experts),
        output_type=report_type(),
    )


async def session_for(kind: str, tmp_path: Path) -> Any:
    """A session of ``kind`` holding the stored history, stored without any compaction."""
    return await session_with_history(kind, tmp_path, WINDOW, "d")


@pytest.mark.parametrize("kind", ["wrapper", "store"])
async def test_handoffs_and_output_schema_are_counted(kind: str, tmp_path: Path) -> None:
    """A request the items alone keep under the hard threshold, but that the handoffs'
    declarations and the output schema push over the window, is trimmed before it is sent:
    the model (counting the wire form) never receives a request over its window."""
    model = ScriptedModel(lambda system, items, options: [text_output(report_json())])
    model.window = WINDOW
    agent = triage(model)
    session = await session_for(kind, tmp_path)
    experts = [handoff(expert) for expert in agent.handoffs if isinstance(expert, Agent)]
    wire = declarations_tokens(experts, AgentOutputSchema(agent.output_type))
    assert count_tokens("route the question", stored_history(), []) + wire > WINDOW  # the premise
    result = await Runner.run(
        agent, "next question", session=session, run_config=session.run_config()
    )
    assert result.final_output.field_0 == "ok"
    names = {tool.name for tool in session.tools}
    assert {"transfer_to_expert_0", "transfer_to_expert_1", "transfer_to_expert_2"} <= names
    assert "final_output" in names
    assert session.trimmed_requests == 1
    assert max(r["tokens"] for r in model.requests) <= WINDOW


def test_declarations_follow_what_the_runner_sends() -> None:
    """A disabled handoff and a plain-text output type declare nothing; a ``Handoff`` object
    and a handoff enabled by a callable are declared; a non-model output type is its schema."""
    expert = Agent(name="expert", handoff_description="knows")
    plain = Agent(
        name="plain",
        handoffs=[handoff(expert, is_enabled=False), handoff(expert, tool_name_override="ask")],
        output_type=str,
    )
    assert [spec.name for spec in agent_tool_specs(plain)] == ["ask"]
    gated = Agent(name="gated", handoffs=[handoff(expert, is_enabled=lambda ctx, agent: False)])
    assert [spec.name for spec in agent_tool_specs(gated)] == ["transfer_to_expert"]
    listed = Agent(name="listed", output_type=list[int])
    (schema,) = agent_tool_specs(listed)
    assert schema.name == "final_output"
    assert schema.parameters == AgentOutputSchema(list[int]).json_schema()


class HalfCounting(ScriptedModel):
    """A model on another provider: its tokenizer counts half as many tokens as the others'."""

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        """The scripted reply, its input tokens halved."""
        response = await super().get_response(*args, **kwargs)
        tokens = response.usage.input_tokens // 2
        usage = Usage(requests=1, input_tokens=tokens, output_tokens=10, total_tokens=tokens + 10)
        return ModelResponse(output=response.output, usage=usage, response_id=response.response_id)


def writer_script(system: str | None, items: list[Any], options: dict[str, Any]) -> list[Any]:
    """The outer agent's model: a large call to its nested agent, then 'done'."""
    if items[-1].get("role") == "user":
        return [call_output("t1", "translate", {"input": "z" * 16_000})]
    return [text_output("done")]


@pytest.mark.parametrize("kind", ["wrapper", "store"])
async def test_a_nested_agents_requests_teach_the_session_nothing(
    kind: str, tmp_path: Path
) -> None:
    """An agent used as a tool runs with the session's run config, so the input filter sees its
    requests too; its model's count is not taken for the session's scale, nor its instructions
    and tools for the session's. Its model counting half, the next request of the session's
    agent was sized at that scale and went out over the window (32,389 tokens by its model)."""
    main = ScriptedModel(writer_script, window=WINDOW)
    side = HalfCounting(lambda system, items, options: [text_output("bonjour")])
    translator = Agent(name="translator", instructions="translate", model=side)
    tool = translator.as_tool(tool_name="translate", tool_description="translates")
    agent = Agent(name="writer", instructions="write", model=main, tools=[tool])
    session = await session_for(kind, tmp_path)
    await Runner.run(agent, "go", session=session, run_config=session.run_config())
    assert len(side.requests) == 1  # the nested agent's request went through the filter
    assert len(main.requests) == 2
    assert max(r["tokens"] for r in main.requests) <= WINDOW
    assert session.system_instruction == "write"
    assert [spec.name for spec in session.tools] == ["translate"]


async def test_the_agent_handed_off_to_is_the_sessions_own() -> None:
    """After a handoff the session counts the agent handed off to (its requests carry the
    session's conversation), not the one that handed off."""

    def script(system: str | None, items: list[Any], options: dict[str, Any]) -> list[Any]:
        if system == "route":
            return [call_output("h1", "transfer_to_expert", {})]
        return [text_output("done")]

    model = ScriptedModel(script)
    expert = Agent(name="expert", instructions="answer", model=model)
    triage = Agent(name="triage", instructions="route", model=model, handoffs=[expert])
    session = AutocompactSession(SQLiteSession("h"), context_window=WINDOW, summarizer="offline")
    result = await Runner.run(triage, "q", session=session, run_config=session.run_config())
    assert result.last_agent is expert
    assert [r["system"] for r in model.requests] == ["route", "answer"]
    assert session.system_instruction == "answer"

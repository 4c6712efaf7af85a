"""The Agents SDK session defaults like the other integrations: summaries by the agent's own
model, the window from the model's name, and the side queries counted in the run's usage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession, function_tool

from autocompact.errors import ConfigError
from autocompact.integrations.openai_agents import AutocompactSession, StoreSession
from autocompact.sessions.stores import SqliteStore

from .agents_script import ScriptedModel
from .test_openai_agents import WINDOW, read, scripted


def chat(model: ScriptedModel) -> list[dict[str, Any]]:
    """The model's main requests (the side queries carry the 20K summary cap)."""
    return [r for r in model.requests if r["max_tokens"] != 20_000]


async def test_default_summarizer_is_the_agents_model() -> None:
    """With no summarizer given, summaries are written by the model the agent runs with (20K
    cap, no tools) and every main request stays under the window."""
    model = ScriptedModel(scripted())
    session = AutocompactSession(SQLiteSession("d"), context_window=WINDOW)
    agent = Agent(name="coder", instructions="be brief", model=model, tools=[read])
    for turn in range(8):
        await Runner.run(agent, f"task {turn}", session=session, run_config=session.run_config())
    side = [r for r in model.requests if r["max_tokens"] == 20_000]
    assert side
    assert all(r["tools"] == 0 for r in side)
    assert max(r["tokens"] for r in chat(model)) < WINDOW
    assert "state_snapshot" in str(await session.get_items())


async def test_run_usage_counts_the_side_queries() -> None:
    """``result.context_wrapper.usage`` counts every request the model answered in the run,
    the summary side queries included (requests, input and output tokens, by the model's own
    report), so the totals over the runs equal what the model saw."""
    model = ScriptedModel(scripted())
    session = AutocompactSession(SQLiteSession("u"), context_window=WINDOW)
    agent = Agent(name="coder", instructions="be brief", model=model, tools=[read])
    side_runs = 0
    for turn in range(8):
        before = len(model.requests)
        result = await Runner.run(
            agent, f"task {turn}", session=session, run_config=session.run_config()
        )
        seen = model.requests[before:]
        usage = result.context_wrapper.usage
        side_runs += any(r["max_tokens"] == 20_000 for r in seen)
        assert usage.requests == len(seen)
        assert usage.input_tokens == sum(r["tokens"] for r in seen)
        assert usage.output_tokens == 10 * len(seen)
    assert side_runs > 0


@function_tool(name_override="read")
def peek(path: str) -> str:
    """Read a short file."""
    return f"{path}: " + "z" * 4_000


async def test_window_from_the_models_name() -> None:
    """No context_window: the window of the agent's model by name (``gpt-4``: 8,192 tokens in
    the table of known models) keeps every request under it; the control goes over."""
    session_model = ScriptedModel(scripted())
    session_model.model = "gpt-4"  # type: ignore[attr-defined]
    session = AutocompactSession(SQLiteSession("w"))
    agent = Agent(name="coder", instructions="be brief", model=session_model, tools=[peek])
    for turn in range(8):
        await Runner.run(agent, f"task {turn}", session=session, run_config=session.run_config())
    assert max(r["tokens"] for r in chat(session_model)) < 8_192

    control = ScriptedModel(scripted())
    plain = Agent(name="coder", instructions="be brief", model=control, tools=[peek])
    bare = SQLiteSession("c")
    for turn in range(8):
        await Runner.run(plain, f"task {turn}", session=bare)
    assert max(r["tokens"] for r in control.requests) > 8_192


async def test_no_window_and_an_unknown_model_names_the_parameter() -> None:
    """No context_window and a model no table knows: a ConfigError naming
    ``context_window`` before the model is called."""
    model = ScriptedModel(scripted())
    session = AutocompactSession(SQLiteSession("x"))
    agent = Agent(name="coder", instructions="be brief", model=model, tools=[read])
    with pytest.raises(ConfigError, match="context_window=") as info:
        await Runner.run(agent, "task", session=session, run_config=session.run_config())
    assert info.value.key == "context_window"
    assert model.requests == []


async def test_default_model_summarizer_without_the_filter_says_what_to_do() -> None:
    """Without the input filter the session cannot know the agent's model: the between-turn
    compaction raises a ConfigError saying to use run_config() or name a summarizer."""
    session = AutocompactSession(SQLiteSession("n"), context_window=WINDOW)
    await session.add_items([{"role": "user", "content": "hi " * 30_000}])
    with pytest.raises(ConfigError, match=r"run_config=session.run_config\(\)"):
        await session.run_compaction()


async def test_model_named_by_string_resolves_through_the_runs_model_provider() -> None:
    """An agent whose model is a name: the summaries go to the model that the run's
    ``model_provider`` (given to ``session.run_config``) returns for that name."""
    from agents.models.interface import ModelProvider

    model = ScriptedModel(scripted())
    asked: list[str | None] = []

    class Provider(ModelProvider):
        def get_model(self, model_name: str | None) -> ScriptedModel:
            asked.append(model_name)
            return model

    session = AutocompactSession(SQLiteSession("p"), context_window=WINDOW)
    agent = Agent(name="coder", instructions="be brief", model="house-model", tools=[read])
    config = session.run_config(model_provider=Provider())
    for turn in range(8):
        await Runner.run(agent, f"task {turn}", session=session, run_config=config)
    assert set(asked) == {"house-model"}
    assert any(r["max_tokens"] == 20_000 for r in model.requests)
    assert max(r["tokens"] for r in chat(model)) < WINDOW


async def test_store_session_defaults_to_the_agents_model_and_counts_usage(
    tmp_path: Path,
) -> None:
    """``StoreSession`` too: summaries by the agent's own model (learned by the input filter),
    and each run's ``context_wrapper.usage`` counts every request the model answered in it."""
    store = SqliteStore(tmp_path / "s.db")
    model = ScriptedModel(scripted())
    agent = Agent(name="coder", instructions="be brief", model=model, tools=[read])
    try:
        for turn in range(8):
            session = StoreSession(
                store, "conv", context_window=WINDOW, turn_id=f"r{turn}", clear_tool_outputs=False
            )
            config = session.run_config()
            before = len(model.requests)
            result = await Runner.run(agent, f"task {turn}", session=session, run_config=config)
            seen = model.requests[before:]
            assert result.context_wrapper.usage.requests == len(seen)
            assert result.context_wrapper.usage.input_tokens == sum(r["tokens"] for r in seen)
    finally:
        store.close()
    assert any(r["max_tokens"] == 20_000 for r in model.requests)
    assert max(r["tokens"] for r in chat(model)) < WINDOW

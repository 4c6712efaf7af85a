"""The Agents SDK: one construct protects every request (``session.run_config()``), and a
session whose turns run without the input filter says so."""

from __future__ import annotations

import warnings

import pytest
from agents import Agent, RunConfig, Runner, SQLiteSession

from autocompact.errors import ConfigError
from autocompact.integrations.openai_agents import AutocompactSession

from .agents_script import ScriptedModel
from .test_openai_agents import WINDOW, read, scripted


async def test_run_config_installs_the_filter_and_protects_every_request() -> None:
    """``run_config=session.run_config()`` is all it takes: every request (the tool loop's
    too) stays under the window, and no warning is given."""
    model = ScriptedModel(scripted())
    session = AutocompactSession(SQLiteSession("one"), context_window=WINDOW)
    agent = Agent(name="coder", instructions="be brief", model=model, tools=[read])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for turn in range(8):
            await Runner.run(
                agent, f"task {turn}", session=session, run_config=session.run_config()
            )
    chat = [r for r in model.requests if r["max_tokens"] != 20_000]
    assert session.filtered_requests == len(chat)
    assert max(r["tokens"] for r in chat) < WINDOW


async def test_a_session_without_its_filter_warns_once() -> None:
    """Turns run with a plain RunConfig: the session warns (once) that only the between-turn
    compaction protects them."""
    model = ScriptedModel(scripted())
    session = AutocompactSession(SQLiteSession("bare"), context_window=WINDOW, summarizer="offline")
    agent = Agent(name="coder", instructions="be brief", model=model, tools=[read])
    with pytest.warns(RuntimeWarning, match="run_config=session.run_config"):
        await Runner.run(agent, "task 0", session=session, run_config=RunConfig())
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        await Runner.run(agent, "task 1", session=session, run_config=RunConfig())


def test_run_config_refuses_another_filter() -> None:
    """The session's own filter is the one installed; another one is a clear error."""
    session = AutocompactSession(SQLiteSession("x"), context_window=WINDOW)
    with pytest.raises(ConfigError, match="call_model_input_filter"):
        session.run_config(call_model_input_filter=lambda data: data.model_data)
    assert session.run_config(workflow_name="w").workflow_name == "w"

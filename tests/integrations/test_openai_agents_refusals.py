"""The Agents SDK sessions refuse what the other entry points refuse, as they refuse it: a
message or tool result larger than the window before anything is sent, a bad option at
construction, a missing window with the reason and what to pass."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession, function_tool

from autocompact import ChatSession, ConfigError, MessageTooLargeError, open_store
from autocompact.integrations.openai_agents import AutocompactSession, StoreSession
from autocompact.testing import FakeProvider

from .agents_script import ScriptedModel, call_output, text_output

BIG = "word " * 20_000  # about 25,000 tokens by the estimate
LOG = "line of log output\n" * 12_000  # about 120,000 tokens by the estimate


def answers(system: str | None, items: list[Any], options: dict[str, Any]) -> list[Any]:
    """A model that answers every request with a short text."""
    return [text_output("done")]


def reads() -> Any:
    """A model that calls ``read_log`` for each user message, then answers."""
    ids = itertools.count()

    def script(system: str | None, items: list[Any], options: dict[str, Any]) -> list[Any]:
        if items[-1].get("role") == "user":
            return [call_output(f"call_{next(ids)}", "read_log", {"path": "app.log"})]
        return [text_output("done")]

    return script


@function_tool
def read_log(path: str) -> str:
    """Read a log (larger than the whole window)."""
    return LOG


def chat_refusal(window: int) -> str:
    """What ChatSession says for the same message on the same window."""
    with pytest.raises(MessageTooLargeError) as info:
        ChatSession(FakeProvider(), context_window=window).send(BIG)
    return str(info.value)


@pytest.mark.parametrize("earlier", [0, 3], ids=["first-turn", "after-3-turns"])
async def test_a_user_message_over_the_window_is_refused_before_it_is_sent(earlier: int) -> None:
    """A ~25K-token message on a 4K window raises MessageTooLargeError in the input filter, as
    ChatSession raises it (same words), and never reaches the model (it was sent as it was)."""
    model = ScriptedModel(answers)
    agent = Agent(name="a", model=model)
    session = AutocompactSession(
        SQLiteSession(f"big-{earlier}"), context_window=4_000, summarizer="offline"
    )
    for turn in range(earlier):
        await Runner.run(agent, f"short {turn}", session=session, run_config=session.run_config())
    with pytest.raises(MessageTooLargeError) as info:
        await Runner.run(agent, BIG, session=session, run_config=session.run_config())
    assert str(info.value).split(" about ")[0] == chat_refusal(4_000).split(" about ")[0]
    assert "larger than the model's whole context window of 4,000" in str(info.value)
    assert len(model.requests) == earlier
    assert all(r["tokens"] < 4_000 for r in model.requests)
    assert all("word word" not in str(r["items"]) for r in model.requests)


async def test_a_tool_result_over_the_window_is_refused_before_it_is_sent() -> None:
    """A ~120K-token tool result on a 16K window raises MessageTooLargeError before the request
    that would carry it; the model only ever saw the request that asked for the tool."""
    model = ScriptedModel(reads())
    agent = Agent(name="a", model=model, tools=[read_log])
    session = AutocompactSession(SQLiteSession("log"), context_window=16_000, summarizer="offline")
    with pytest.raises(MessageTooLargeError, match=r"the message being sent.* is about"):
        await Runner.run(agent, "read the log", session=session, run_config=session.run_config())
    assert len(model.requests) == 1
    assert all(r["tokens"] < 16_000 for r in model.requests)
    assert all("line of log output" not in str(r["items"]) for r in model.requests)


async def test_store_session_refuses_a_message_over_the_window(tmp_path: Path) -> None:
    """StoreSession's filter refuses the same message the same way; the model is not called."""
    model = ScriptedModel(answers)
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    session = StoreSession(store, "conv", context_window=4_000, summarizer="offline")
    with pytest.raises(MessageTooLargeError, match=r"the message being sent.* is about"):
        await Runner.run(
            Agent(name="a", model=model), BIG, session=session, run_config=session.run_config()
        )
    assert model.requests == []


async def test_after_a_refused_message_the_conversation_goes_on() -> None:
    """The refused message is taken back out of the session the runner stored it in (as
    ChatSession keeps no refused message): the session is as it was, and the next run is sent
    without it (it failed with the same error on every later run)."""
    model = ScriptedModel(answers)
    agent = Agent(name="a", model=model)
    session = AutocompactSession(SQLiteSession("goes-on"), context_window=4_000)
    await Runner.run(agent, "hello", session=session, run_config=session.run_config())
    before = await session.get_items()
    with pytest.raises(MessageTooLargeError):
        await Runner.run(agent, BIG, session=session, run_config=session.run_config())
    assert await session.get_items() == before
    result = await Runner.run(agent, "next", session=session, run_config=session.run_config())
    assert result.final_output == "done"
    assert all("word word" not in str(r["items"]) for r in model.requests)
    assert len(await session.get_items()) == len(before) + 2


async def test_after_a_refused_tool_result_the_conversation_goes_on() -> None:
    """The refused step (the model's call and the tool's output, stored together) is taken
    back; the run's input stays, and the next run goes out with no call left unanswered."""
    model = ScriptedModel(reads())
    agent = Agent(name="a", model=model, tools=[read_log])
    session = AutocompactSession(SQLiteSession("log-on"), context_window=16_000)
    with pytest.raises(MessageTooLargeError):
        await Runner.run(agent, "read the log", session=session, run_config=session.run_config())
    assert await session.get_items() == [{"role": "user", "content": "read the log"}]
    model.script = answers
    result = await Runner.run(agent, "hi", session=session, run_config=session.run_config())
    assert result.final_output == "done"
    last = model.requests[-1]["items"]
    assert [i.get("type", i.get("role")) for i in last] == ["user", "user"]


async def test_another_writers_item_is_not_taken_back() -> None:
    """Taking back removes only the items expected at the session's end: an item that is not
    one of them is put back and nothing more is removed."""
    from autocompact.integrations._openai_agents_model import json_form, take_back

    plain = SQLiteSession("others")
    await plain.add_items([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    removed = await take_back(plain, [json_form({"role": "user", "content": "x"})])
    assert removed == 0
    assert await plain.get_items() == [
        {"role": "user", "content": "a"},
        {"role": "user", "content": "b"},
    ]
    assert await take_back(plain, [json_form({"role": "user", "content": "b"})]) == 1
    assert await plain.get_items() == [{"role": "user", "content": "a"}]


async def test_store_session_stores_nothing_it_refuses(tmp_path: Path) -> None:
    """A store keeps every turn, so StoreSession refuses a message or tool result over the
    window before storing it (same error): the stored conversation is as it was and the next
    request goes on (a stored one failed every later request)."""
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    model = ScriptedModel(reads())
    agent = Agent(name="a", model=model, tools=[read_log])

    def session(turn: str) -> StoreSession:
        return StoreSession(store, "conv", context_window=16_000, turn_id=turn)

    first = session("r1")
    with pytest.raises(MessageTooLargeError, match=r"the message being sent.* is about"):
        await Runner.run(agent, "read the log", session=first, run_config=first.run_config())
    assert [i.get("type") for i in await session("x").get_items()] == [None]
    first = session("r2")
    with pytest.raises(MessageTooLargeError, match=r"the message being sent.* is about"):
        await Runner.run(agent, BIG * 4, session=first, run_config=first.run_config())
    assert len(await session("x").get_items()) == 1
    model.script = answers
    second = session("r3")
    result = await Runner.run(agent, "hi", session=second, run_config=second.run_config())
    assert result.final_output == "done"
    assert all(r["tokens"] < 16_000 for r in model.requests)


async def test_a_custom_model_without_a_window_says_to_pass_context_window() -> None:
    """The filter saw the agent's model (a Model object with no name): the error says to pass
    context_window=, not to run with run_config=session.run_config() (which the run did)."""
    model = ScriptedModel(answers)
    session = AutocompactSession(SQLiteSession("w"), summarizer="offline")
    with pytest.raises(ConfigError, match="context_window=") as info:
        await Runner.run(
            Agent(name="a", model=model), "hi", session=session, run_config=session.run_config()
        )
    assert "run_config" not in str(info.value)
    assert "ScriptedModel" in str(info.value)
    assert session.filtered_requests == 1
    assert model.requests == []


async def test_before_the_filter_the_error_still_names_run_config() -> None:
    """Without the filter the model is not known: the error says how the session learns it."""
    session = AutocompactSession(SQLiteSession("n"), summarizer="offline")
    await session.add_items([{"role": "user", "content": "hi"}])
    with pytest.raises(ConfigError, match=r"run_config=session.run_config\(\)"):
        await session.run_compaction({"force": True})


def _store_session(tmp_path: Path, **options: Any) -> StoreSession:
    return StoreSession(open_store(f"sqlite:///{tmp_path / 's.db'}"), "conv", **options)


@pytest.mark.parametrize(
    "build",
    [
        lambda tmp_path, **o: AutocompactSession(SQLiteSession("h"), **o),
        lambda tmp_path, **o: _store_session(tmp_path, **o),
    ],
    ids=["AutocompactSession", "StoreSession"],
)
@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"hooks": print}, r"one hook: hooks=\[hook\]"),
        ({"context_window": "abc"}, "'abc' is not a number of tokens"),
        ({"context_window": 0}, "at least 1 token"),
        ({"clear_tool_outputs": "no"}, "clear_tool_outputs must be True or False"),
        ({"image_token_estimate": -1}, "image_token_estimate must be 0 or more"),
    ],
    ids=["one-hook", "window-abc", "window-0", "clearing-str", "image-negative"],
)
def test_bad_options_are_refused_at_construction(
    build: Any, options: dict[str, Any], words: str, tmp_path: Path
) -> None:
    """A bad option is the ConfigError ChatSession gives, when the session is built (it was
    accepted until a run emitted an event or sized a request)."""
    given = {"context_window": 8_000, **options}
    with pytest.raises(ConfigError, match=words):
        build(tmp_path, **given)


def test_a_window_as_text_is_read_as_chat_session_reads_it(tmp_path: Path) -> None:
    """``context_window="128k"`` is 128,000 tokens, as for ChatSession."""
    assert AutocompactSession(SQLiteSession("k"), context_window="128k").model.window() == 128_000  # type: ignore[arg-type]
    stored = _store_session(tmp_path, context_window="128k")
    assert stored.model.window() == 128_000


def test_store_session_without_a_window_says_what_to_pass_and_why(tmp_path: Path) -> None:
    """StoreSession needs the window (it cannot learn it from the model): left out or None,
    the ConfigError names context_window and says why, at construction."""
    for given in ({}, {"context_window": None}):
        with pytest.raises(ConfigError, match="StoreSession needs context_window=") as info:
            _store_session(tmp_path, **given)
        assert info.value.key == "context_window"
        assert "before the input filter sees the agent" in str(info.value)


async def test_an_agent_with_mcp_servers_is_refused_and_taken_back_too() -> None:
    """With MCP servers the filter is an awaitable (it lists their tools): a message over the
    window is refused there the same way, and taken back out of the session."""
    from .test_openai_agents_mcp import ListedTools

    model = ScriptedModel(answers)
    agent = Agent(name="a", model=model, mcp_servers=[ListedTools(2)])
    session = AutocompactSession(SQLiteSession("mcp"), context_window=4_000)
    with pytest.raises(MessageTooLargeError, match=r"the message being sent.* is about"):
        await Runner.run(agent, BIG, session=session, run_config=session.run_config())
    assert model.requests == []
    assert await session.get_items() == []
    result = await Runner.run(agent, "hi", session=session, run_config=session.run_config())
    assert result.final_output == "done"

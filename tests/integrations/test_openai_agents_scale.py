"""The Agents SDK sessions learn the provider's scale from the model's count of each request
their input filter lets out, so a trimmed request keeps what the model's count says fits."""

from __future__ import annotations

import itertools
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled

from autocompact import open_store
from autocompact.estimation import BYTES_PER_TOKEN, BYTES_PER_TOKEN_JSON
from autocompact.guard import request_stats
from autocompact.integrations.openai_agents import (
    AutocompactSession,
    StoreSession,
    to_autocompact,
)

from .agents_script import ScriptedModel, call_output, count_tokens, text_output

set_tracing_disabled(True)

WINDOW = 32_000  # auto = hard = 22,400 tokens
TASK = "task: read the 7 files"
FILES = 7


@function_tool
def read(path: str) -> str:
    """Read a file."""
    return f"{path}: " + "y" * 12_000  # about 6,000 tokens by the estimate, 4,000 by the model


def reader() -> Any:
    """A script: one read per response until all files are read, then 'done' (the model
    keeps its own count, so a request that lost earlier reads does not make it repeat)."""
    calls = itertools.count()

    def script(system: str | None, items: list[Any], options: dict[str, Any]) -> list[Any]:
        if options["max_tokens"] == 20_000:
            return [text_output("summary")]
        n = next(calls)
        if n < FILES:
            return [call_output(f"c{n}", "read", {"path": f"f{n}.py"})]
        return [text_output("done")]

    return script


def calls_sent(request: dict[str, Any]) -> list[str]:
    """The call ids a request carried (read on the wire)."""
    return [i["call_id"] for i in request["items"] if i.get("type") == "function_call"]


def implied_factor(request: dict[str, Any], tools: Any) -> float:
    """The model's count of a request over the plain estimate of what it was sent (the
    calibration's factor that count implies)."""
    stats = request_stats(
        to_autocompact(request["items"]).messages,
        system_instruction=request["system"],
        tools=tools,
    )
    plain = stats.text_chars / BYTES_PER_TOKEN + stats.json_chars / BYTES_PER_TOKEN_JSON
    return float(request["tokens"]) / plain


async def run_loop(session: Any) -> ScriptedModel:
    """One turn whose tool loop reads ``FILES`` large files."""
    model = ScriptedModel(reader(), window=WINDOW)
    agent = Agent(name="coder", instructions="be brief", model=model, tools=[read])
    await Runner.run(agent, TASK, session=session, run_config=session.run_config(), max_turns=20)
    return model


def assert_keeps_what_fits(model: ScriptedModel) -> None:
    """Each request carries the task and as many of the turn's reads as the model's count
    lets fit below the trim target: never only the latest once more fit."""
    chat = [r for r in model.requests if r["max_tokens"] != 20_000]
    assert len(chat) == FILES + 1
    pair = count_tokens(None, [*chat[1]["items"][1:]], [])  # one call and its output
    for n, request in enumerate(chat):
        assert any(i.get("content") == TASK for i in request["items"])
        assert request["tokens"] < 22_400
        kept = calls_sent(request)
        assert kept == [f"c{k}" for k in range(n - len(kept), n)]  # the newest, whole
        # Every pair the model's count says fits below the target, less one for the margin
        # the trim keeps over the learned scale, is kept.
        assert len(kept) >= min(n, (22_400 - chat[0]["tokens"]) // pair - 1)
    assert max(len(calls_sent(r)) for r in chat) >= 4


async def test_agents_session_trim_keeps_the_turns_earlier_reads_that_fit() -> None:
    """After the first counted response, a request that must be trimmed keeps the earlier
    call/result pairs of the turn the model's count says fit (not only the latest), and the
    calibration's factor is the one the model's count of the last request implies."""
    session = AutocompactSession(SQLiteSession("s"), context_window=WINDOW, summarizer="offline")
    model = await run_loop(session)
    assert session.trimmed_requests > 0
    assert_keeps_what_fits(model)
    assert session.state.calibration.samples >= FILES - 1
    assert session.state.calibration.factor == pytest.approx(
        implied_factor(model.requests[-1], session.tools), rel=1e-9
    )


async def test_store_session_trim_keeps_the_turns_earlier_reads_that_fit(tmp_path: Path) -> None:
    """The same with the conversation in a store: the learned calibration is the stored one."""
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    session = StoreSession(store, "c", context_window=WINDOW, summarizer="offline")
    model = await run_loop(session)
    assert session.trimmed_requests > 0
    assert_keeps_what_fits(model)
    stored = store.load("c").calibration
    assert stored is not None
    assert stored["samples"] >= FILES - 1
    assert stored["factor"] == pytest.approx(
        implied_factor(model.requests[-1], session.tools), rel=1e-9
    )
    store.close()


async def test_side_query_usage_is_never_taken_for_a_requests_count() -> None:
    """A compaction forced after a failed request adds its summary's usage to that run's
    usage: no later look pairs it with the request the model never answered."""
    session = AutocompactSession(
        SQLiteSession("f"),
        context_window=WINDOW,
        summarizer=ScriptedModel(reader()),
        clear_tool_outputs=False,
    )
    history: list[Any] = []
    for n in range(3):
        history += [
            {"role": "user", "content": f"task {n}"},
            {"type": "function_call", "call_id": f"h{n}", "name": "read", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"h{n}", "output": "z" * 6_000},
            {"role": "assistant", "content": "ok"},
        ]
    await session.underlying.add_items(history)
    failing = ScriptedModel(reader(), window=10)  # refuses every request
    agent = Agent(name="coder", instructions="be brief", model=failing, tools=[read])
    with pytest.raises(ValueError, match="over the window"):
        await Runner.run(agent, "task 3", session=session, run_config=session.run_config())
    await session.run_compaction({"force": True})
    assert session.compactions[-1].side_queries == 1
    await session.add_items([{"role": "user", "content": "task 4"}])
    assert session.state.calibration.samples == 0


def test_a_count_is_paired_only_with_the_one_request_it_counts() -> None:
    """Only the one request answered since the mark, with its tokens reported, teaches; a
    response without a count, or one standing for two requests, teaches nothing, and a later
    count is not taken for the request that had none."""
    from agents import Usage

    from autocompact.content import CharStats
    from autocompact.guard import GuardState
    from autocompact.integrations._openai_agents_model import RequestCounts

    def answered(requests: int, tokens: int) -> Usage:
        return Usage(requests=requests, input_tokens=tokens, total_tokens=tokens)

    wrapper = SimpleNamespace(usage=Usage())
    counts, state = RequestCounts(), GuardState()
    sent = CharStats(text_chars=8_000)  # 2,000 plain tokens
    counts.sent(wrapper, sent)
    assert counts.learn(state, 1_600) is None  # not answered yet: the mark stays
    wrapper.usage.add(answered(1, 3_000))
    learned = counts.learn(state, 1_600)
    assert learned is not None
    assert learned.calibration.factor == 1.5
    assert counts.learn(state, 1_600) is None  # taken once
    counts.sent(wrapper, sent)
    wrapper.usage.add(answered(1, 0))  # answered with no count
    assert counts.learn(state, 1_600) is None
    wrapper.usage.add(answered(1, 3_000))  # someone else's count
    assert counts.learn(state, 1_600) is None
    counts.sent(wrapper, sent)
    wrapper.usage.add(answered(2, 6_000))  # one response standing for two requests
    assert counts.learn(state, 1_600) is None

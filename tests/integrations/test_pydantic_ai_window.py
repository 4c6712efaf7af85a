"""pydantic-ai history processors need no number: the window comes from the model's profile,
else from the model's name in the table of known models; else a clear error."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai import messages as pm
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from autocompact.errors import ConfigError
from autocompact.integrations.pydantic_ai import (
    Autocompact,
    async_history_processor,
    history_processor,
)

WINDOW = 16_000


def reader(sent: list[int]) -> Any:
    """A FunctionModel script: two ~3K-token reads per prompt, then 'done'; counts 3 characters
    a token and records each main request's count."""

    def script(messages: list[pm.ModelMessage], info: AgentInfo) -> pm.ModelResponse:
        chars = len(info.instructions or "") + sum(
            len(str(getattr(p, "content", None) or getattr(p, "args", "")))
            for m in messages
            for p in m.parts
        )
        usage = RequestUsage(input_tokens=chars // 3 + 20, output_tokens=12)
        if not info.function_tools:
            return pm.ModelResponse(parts=[pm.TextPart("<state_snapshot/>")], usage=usage)
        sent.append(usage.input_tokens)
        if any(isinstance(p, pm.UserPromptPart) for p in messages[-1].parts):
            calls = [pm.ToolCallPart("read_file", {"path": p}) for p in ("a.py", "b.py")]
            return pm.ModelResponse(parts=list(calls), usage=usage)
        return pm.ModelResponse(parts=[pm.TextPart("done")], usage=usage)

    return script


def run(processor: Any, model: FunctionModel, turns: int = 6, chars: int = 9_000) -> None:
    """Run the workload with the processor installed."""
    agent = Agent(model, system_prompt="be brief", capabilities=[ProcessHistory(processor)])

    @agent.tool_plain
    def read_file(path: str) -> str:
        return f"{path}: " + "x" * chars

    history: list[pm.ModelMessage] | None = None
    for turn in range(turns):
        history = agent.run_sync(f"task {turn}", message_history=history).all_messages()


@pytest.mark.parametrize("make", [history_processor, async_history_processor])
def test_processor_reads_the_window_from_the_model_profile(make: Any) -> None:
    """``ProcessHistory(history_processor())`` with no number keeps every request within the
    profile's window (the history grows to several windows)."""
    sent: list[int] = []
    options = {} if make is history_processor else {"summarizer": "offline"}
    run(make(**options), FunctionModel(reader(sent), profile={"context_window": WINDOW}))
    assert len(sent) >= 12
    assert max(sent) < WINDOW


def test_processor_reads_the_window_from_the_known_model_name() -> None:
    """A model without a profile window whose name is in the table of known models gets that
    window: ``gpt-4`` (8,192 tokens) keeps a history of several windows within it."""
    sent: list[int] = []
    model = FunctionModel(reader(sent), model_name="gpt-4")
    run(history_processor(), model, turns=8, chars=3_000)
    assert sum(sent) > 3 * 8_192
    assert max(sent) < 8_192


@pytest.mark.parametrize("make", [history_processor, async_history_processor])
def test_processor_without_any_window_names_the_parameter(make: Any) -> None:
    """Neither a number, a profile window nor a known name: a ConfigError naming
    ``context_window``, before anything is sent."""
    sent: list[int] = []
    with pytest.raises(ConfigError, match="context_window=") as info:
        run(make(), FunctionModel(reader(sent)), turns=1)
    assert info.value.key == "context_window"
    assert make.__name__ in str(info.value)
    assert sent == []


def test_capability_reads_the_window_from_the_known_model_name() -> None:
    """``Autocompact()`` with no number and no profile window takes the window of the model's
    name in the table of known models (``gpt-4``: 8,192 tokens)."""
    from autocompact.integrations.pydantic_ai import Autocompact

    sent: list[int] = []
    agent = Agent(
        FunctionModel(reader(sent), model_name="gpt-4"),
        system_prompt="be brief",
        capabilities=[Autocompact(summarizer="offline")],
    )

    @agent.tool_plain
    def read_file(path: str) -> str:
        return f"{path}: " + "x" * 3_000

    history: list[pm.ModelMessage] | None = None
    for turn in range(8):
        history = agent.run_sync(f"task {turn}", message_history=history).all_messages()
    assert sum(sent) > 3 * 8_192
    assert max(sent) < 8_192


BAD_OPTIONS = [
    ({"hooks": print}, "one hook: hooks=\\[hook\\]"),
    ({"hooks": [print, "x"]}, "hooks\\[1\\] must be a callable"),
    ({"context_window": "abc"}, "context_window 'abc' is not a number of tokens"),
    ({"context_window": 0}, "context_window"),
    ({"context_window": True}, "context_window must be a number of tokens"),
    ({"summarizer": "bogus"}, "summarizer must be 'model', 'offline'"),
    ({"clear_tool_outputs": "yes"}, "clear_tool_outputs"),
    ({"image_token_estimate": -1}, "image_token_estimate"),
]


@pytest.mark.parametrize(("options", "said"), BAD_OPTIONS, ids=lambda v: str(v)[:30])
@pytest.mark.parametrize("make", [Autocompact, history_processor, async_history_processor])
def test_a_bad_option_is_refused_where_it_is_given(
    make: Any, options: dict[str, Any], said: str
) -> None:
    """The capability and both processors check their options when built, with the
    ConfigError ChatSession gives (it came at the first request, or as a bare TypeError)."""
    if make is history_processor and options.get("summarizer") is None:
        options = {"summarizer": "offline", **options}
    with pytest.raises(ConfigError, match=said):
        make(**options)


def test_good_options_are_kept_as_given() -> None:
    """A window written as text is read as tokens; the hooks become a tuple."""
    capability = Autocompact(context_window="128k", hooks=[print], summarizer="offline")
    assert capability.context_window == 128_000
    assert capability.hooks == (print,)
    assert Autocompact().context_window is None  # learned from the model at the first run

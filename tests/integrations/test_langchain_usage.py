"""LangChain: the summary side query's usage is reported the way LangChain reports usage (the
run's callbacks, e.g. ``get_usage_metadata_callback``), as for its own SummarizationMiddleware."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from langchain_core.callbacks import get_usage_metadata_callback
from langchain_core.messages import HumanMessage
from langchain_core.outputs import ChatResult

from .lc_fakes import ScriptedModel
from .test_langchain_agent import WINDOW, build, scripted

SIZES = [24_000] * 14


class NamedModel(ScriptedModel):
    """The scripted model with a ``model_name`` in its response metadata (LangChain's usage
    callback files usage under it, as real chat models report it)."""

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        result: ChatResult = super()._generate(messages, stop, run_manager, **kw)
        for generation in result.generations:
            generation.message.response_metadata["model_name"] = "scripted"
        return result


def expected(model: ScriptedModel) -> int:
    """Input tokens by the model's own count: main turns plus summaries."""
    return sum(model.counts) + sum(model.count(m) for m in model.summary_requests)


def test_usage_callback_counts_the_summary_side_query() -> None:
    """``get_usage_metadata_callback()`` around the run sees every request the model answered,
    the summary side query included (it inherits the run's callbacks)."""
    model = NamedModel(messages=iter(scripted(SIZES)), window=WINDOW)
    agent = build(model, clear_tool_outputs=False)
    with get_usage_metadata_callback() as usage:
        for turn in range(7):
            agent.invoke(
                {"messages": [HumanMessage(f"turn {turn}")]},
                {"configurable": {"thread_id": "t"}},
            )
    assert model.summary_requests
    reported = usage.usage_metadata["scripted"]["input_tokens"]
    assert reported == expected(model)
    assert reported > sum(model.counts)  # more than the main turns: the summary is in


async def test_async_usage_callback_counts_the_summary_side_query() -> None:
    """The same through ``ainvoke``."""
    model = NamedModel(messages=iter(scripted(SIZES)), window=WINDOW)
    agent = build(model, clear_tool_outputs=False)
    with get_usage_metadata_callback() as usage:
        for turn in range(7):
            await agent.ainvoke(
                {"messages": [HumanMessage(f"turn {turn}")]},
                {"configurable": {"thread_id": "a"}},
            )
    assert model.summary_requests
    assert usage.usage_metadata["scripted"]["input_tokens"] == expected(model)

"""LangChain under a 4K-token system prompt on a 16K window: a turn whose pending message is a
batch of large tool results is sent (older output cleared, turns left out of the request), not
refused as too large because of a factor learned on the text-heavy first request."""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from autocompact.errors import ConfigError
from autocompact.integrations.langchain import AutocompactMiddleware

from .lc_fakes import ScriptedModel

WINDOW = 16_000


def _wire(message: BaseMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.type, "content": message.content}
    if isinstance(message, AIMessage) and message.tool_calls:
        out["tool_calls"] = [{"id": c["id"], "args": c["args"]} for c in message.tool_calls]
    if isinstance(message, ToolMessage):
        out["tool_call_id"] = message.tool_call_id
    return out


class CountingModel(GenericFakeChatModel):
    """A scripted model counting 3 characters a token over everything it is sent; it rejects
    a request over the window as a provider would."""

    messages: Any = iter(())
    replies: deque[AIMessage] = Field(default_factory=deque)
    tools_json: str = ""
    sent: list[int] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        """Keep the tool schemas (they are counted)."""
        self.tools_json = json.dumps([convert_to_openai_tool(t) for t in tools])
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        chars = sum(len(json.dumps(_wire(m))) for m in messages) + len(self.tools_json)
        tokens = math.ceil(chars / 3)
        self.sent.append(tokens)
        if tokens > WINDOW:
            raise ContextOverflowError(f"prompt is too long: {tokens} > {WINDOW}")
        reply = self.replies.popleft() if self.replies else AIMessage(content="Done.")
        usage = {"input_tokens": tokens, "output_tokens": 10, "total_tokens": tokens + 10}
        message = reply.model_copy(update={"usage_metadata": usage, "id": None})
        return ChatResult(generations=[ChatGeneration(message=message)])


def read_file(path: str) -> str:
    """Read a file from the workspace."""
    return f"# {path}\n" + "".join(f"def f{i}(x): return x * {i}\n" for i in range(400))[:9_000]


def test_large_pending_tool_results_under_a_4k_system_prompt() -> None:
    """Every turn completes under the window; none dies with MessageTooLargeError."""
    model = CountingModel()
    agent = create_agent(
        model,
        [StructuredTool.from_function(read_file)],
        system_prompt=("You are a careful coding agent. " * 400)[:12_000],
        middleware=[AutocompactMiddleware(context_window=WINDOW, summarizer="offline")],
        checkpointer=InMemorySaver(),
    )
    settings: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 100}
    for turn in range(6):
        calls = [
            {"name": "read_file", "args": {"path": f"t{turn}_{i}.py"}, "id": f"c{turn}_{i}"}
            for i in range(2)
        ]
        model.replies.extend([AIMessage(content="", tool_calls=calls), AIMessage(content="ok")])
        agent.invoke({"messages": [HumanMessage(content=f"Task {turn}: read them.")]}, settings)
    assert len(model.sent) == 12
    assert max(model.sent) <= WINDOW


def test_extractive_is_a_deprecated_alias_of_offline() -> None:
    """LangChain's former name for the offline summarizer still works, with a warning; the
    canonical name is the one every integration uses."""
    with pytest.warns(DeprecationWarning, match="offline"):
        middleware = AutocompactMiddleware(context_window=WINDOW, summarizer="extractive")
    assert middleware.summarizer == "offline"
    assert AutocompactMiddleware(context_window=WINDOW, summarizer="offline").summarizer == (
        "offline"
    )


def test_summary_side_query_is_not_streamed_to_the_application() -> None:
    """``agent.stream(..., stream_mode="messages")`` carries the agent's replies but never the
    summary model's output (the side query is tagged as LangChain's own summarization tags it;
    the summary then enters the history as a user message, as LangChain's does)."""
    from .test_langchain_agent import WINDOW as BIG
    from .test_langchain_agent import ask, build, config, scripted, turns

    sizes = [24_000] * 14
    model = ScriptedModel(messages=iter(scripted(sizes)), window=BIG, disable_streaming=True)
    agent = build(model, clear_tool_outputs=False)
    streamed: list[str] = []
    for turn in range(turns(sizes)):
        for chunk, _meta in agent.stream(
            ask(f"turn {turn}: read the next modules"), config(), stream_mode="messages"
        ):
            if isinstance(chunk, AIMessage):  # a model's output (chunks included)
                streamed.append(str(chunk.content))
    assert model.summary_requests, "a summary was written"
    assert any("read up to" in text for text in streamed)
    assert not any("state_snapshot" in text for text in streamed)


def test_context_window_read_from_the_model_profile() -> None:
    """``AutocompactMiddleware()`` with no number takes the chat model's profile's
    ``max_input_tokens``; a model without one gets a clear error asking for the number."""
    model = CountingModel(profile={"max_input_tokens": WINDOW})
    middleware = AutocompactMiddleware(summarizer="offline")
    agent = create_agent(model, [StructuredTool.from_function(read_file)], middleware=[middleware])
    model.replies.extend([AIMessage(content="ok")])
    agent.invoke({"messages": [HumanMessage(content="hello")]})
    assert middleware.context_window == WINDOW
    assert middleware.thresholds.hard <= WINDOW

    bare = CountingModel()
    agent = create_agent(
        bare, [StructuredTool.from_function(read_file)], middleware=[AutocompactMiddleware()]
    )
    with pytest.raises(ConfigError, match="context_window="):
        agent.invoke({"messages": [HumanMessage(content="hello")]})


def test_the_models_count_teaches_the_scale() -> None:
    """The middleware learns the provider's scale from the model's count of what was sent:
    about 2/3 (the model counts 3 characters a token where the estimate counts 2 for the tool
    output that is most of the request)."""
    model = CountingModel()
    agent = create_agent(
        model,
        [StructuredTool.from_function(read_file)],
        system_prompt="be brief",
        middleware=[AutocompactMiddleware(context_window=WINDOW, summarizer="offline")],
        checkpointer=InMemorySaver(),
    )
    settings: Any = {"configurable": {"thread_id": "scale"}}
    call = {"name": "read_file", "args": {"path": "a.py"}, "id": "c0"}
    model.replies.extend([AIMessage(content="", tool_calls=[call]), AIMessage(content="ok")])
    agent.invoke({"messages": [HumanMessage(content="Task: read a.py")]}, settings)
    calibration = agent.get_state(settings).values["autocompact"]["calibration"]
    assert calibration["samples"] == 1  # the first request is too small to teach
    assert calibration["factor"] == pytest.approx(2 / 3, rel=0.05)

"""A screenshot a tool returns, through the integrations: counted as one image, not as its
base64 (a 300 KB screenshot counted about 200K tokens and every turn of a 128K agent failed)."""

from __future__ import annotations

import base64
import random
from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from autocompact.estimation import DEFAULT_IMAGE_TOKEN_ESTIMATE, estimate_prompt_tokens
from autocompact.integrations.langchain import AutocompactMiddleware
from autocompact.integrations.langchain import to_autocompact as from_langchain

from .lc_fakes import ScriptedModel, tool_call

DATA = base64.b64encode(random.Random(11).randbytes(300_000)).decode()


@tool
def screenshot(page: str) -> list[dict[str, Any]]:
    """Take a screenshot of ``page``."""
    return [
        {"type": "text", "text": f"Screenshot of {page}."},
        {"type": "image", "base64": DATA, "mime_type": "image/png"},
    ]


def test_langchain_counts_a_tool_screenshot_as_an_image() -> None:
    """A ToolMessage holding an image block is estimated at about one image."""
    messages = [
        HumanMessage("Check the login page."),
        AIMessage("", tool_calls=[{"name": "screenshot", "args": {}, "id": "c1"}]),
        ToolMessage(
            content=[{"type": "image", "base64": DATA, "mime_type": "image/png"}],
            tool_call_id="c1",
        ),
    ]
    _, history = from_langchain(messages)
    tokens = estimate_prompt_tokens(history, None, 0)
    assert DEFAULT_IMAGE_TOKEN_ESTIMATE < tokens < DEFAULT_IMAGE_TOKEN_ESTIMATE + 200


def test_a_langchain_agent_with_a_screenshot_tool_runs_on_a_128k_window() -> None:
    """The agent takes the screenshot and answers; the image reaches the model unchanged."""
    model = ScriptedModel(
        messages=iter([tool_call("screenshot", {"page": "/login"}, "c1"), "The form renders."]),
        window=1_000_000,  # (this fake counts the image's base64: its window is not the test)
    )
    agent = create_agent(
        model,
        [screenshot],
        middleware=[AutocompactMiddleware(context_window=128_000)],
        checkpointer=InMemorySaver(),
    )
    out = agent.invoke(
        {"messages": [HumanMessage("Check the login page.")]},
        {"configurable": {"thread_id": "t"}},
    )
    assert out["messages"][-1].content == "The form renders."
    sent = [m for m in model.requests[-1] if isinstance(m, ToolMessage)]
    assert sent[0].content[1] == {"type": "image", "base64": DATA, "mime_type": "image/png"}


def test_an_agents_sdk_output_with_an_image_counts_as_an_image() -> None:
    """A function_call_output whose output is a list with an input_image."""
    pytest.importorskip("agents")
    from autocompact.integrations.openai_agents import to_autocompact as from_items

    items: list[Any] = [
        {"role": "user", "content": "Check the login page."},
        {"type": "function_call", "call_id": "c1", "name": "screenshot", "arguments": "{}"},
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": [
                {"type": "input_text", "text": "Screenshot of /login."},
                {"type": "input_image", "image_url": f"data:image/png;base64,{DATA}"},
            ],
        },
    ]
    history = from_items(items).messages
    tokens = estimate_prompt_tokens(history, None, 0)
    assert DEFAULT_IMAGE_TOKEN_ESTIMATE < tokens < DEFAULT_IMAGE_TOKEN_ESTIMATE + 200

"""pydantic-ai: what a tool returns is counted as pydantic-ai sends it (each test failed on the
code before its fix)."""

from __future__ import annotations

import base64
import dataclasses
import json
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai import messages as pm
from pydantic_ai.models.function import AgentInfo, FunctionModel

from autocompact import ContentError
from autocompact.compaction.clearing import CLEARED_PREFIX
from autocompact.content import FunctionCallPart, FunctionResponsePart, Message
from autocompact.estimation import DEFAULT_IMAGE_TOKEN_ESTIMATE, estimate_prompt_tokens
from autocompact.integrations.pydantic_ai import Autocompact, from_autocompact, to_autocompact
from autocompact.sessions.stores import SqliteStore

DATA = random.Random(11).randbytes(300_000)  # a 300 KB screenshot
B64 = base64.b64encode(DATA).decode()
WHEN = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def tool_history(content: Any) -> list[pm.ModelMessage]:
    """A prompt, a call of ``screenshot`` and its return holding ``content``."""
    return [
        pm.ModelRequest(parts=[pm.UserPromptPart("Check the login page.")]),
        pm.ModelResponse(parts=[pm.ToolCallPart("screenshot", {}, tool_call_id="c1")]),
        pm.ModelRequest(parts=[pm.ToolReturnPart("screenshot", content, tool_call_id="c1")]),
    ]


def estimate(history: list[pm.ModelMessage]) -> int:
    return estimate_prompt_tokens(to_autocompact(history).messages, None, 0)


# -- a tool's own dicts shaped like an image block ---------------------------------------------


def test_a_tools_own_image_shaped_dicts_count_as_the_text_pydantic_ai_sends() -> None:
    """A tool returning plain dicts in LangChain's image shape: pydantic-ai sends them as their
    JSON text (no model reads them as an image), so they count as that text, not as one image."""
    block = {"type": "image", "base64": B64, "mime_type": "image/png"}
    part = pm.ToolReturnPart("screenshot", [block], tool_call_id="c1")
    (sent,) = part.content_items(mode="str")  # what pydantic-ai's models send: text
    assert isinstance(sent, str)
    assert B64 in sent
    assert estimate(tool_history([block])) > len(B64) // 3  # not about one image


# -- an image or document the tool returns -----------------------------------------------------


def screenshot(data: bytes = DATA) -> pm.BinaryContent:
    return pm.BinaryContent(data=data, media_type="image/png")


RETURNS = {
    "image": screenshot(),
    "text-and-image": ["Screenshot of /login.", screenshot(), {"status": 200}],
    "pdf": pm.BinaryContent(data=DATA, media_type="application/pdf"),
    "urls": [
        pm.ImageUrl(url="https://example.com/a.png"),
        "and the report",
        pm.DocumentUrl(url="https://example.com/r.pdf", media_type="application/pdf"),
        pm.ImageUrl(url="https://picsum.photos/200"),  # no media type pydantic-ai can tell
    ],
}


@pytest.mark.parametrize("content", RETURNS.values(), ids=RETURNS.keys())
def test_a_file_a_tool_returns_counts_as_one_image(content: Any) -> None:
    """A ``BinaryContent``, ``ImageUrl`` or ``DocumentUrl`` a tool returns (alone or in a list
    next to text) is one image each; it counted as the tool's text alone (about nothing)."""
    files = len(pm.ToolReturnPart("t", content).files)
    base = estimate(tool_history("Screenshot of /login."))
    tokens = estimate(tool_history(content))
    assert files * DEFAULT_IMAGE_TOKEN_ESTIMATE < tokens - base + 20
    assert tokens - base < files * DEFAULT_IMAGE_TOKEN_ESTIMATE + 100


def without_time(messages: list[pm.ModelMessage]) -> list[pm.ModelMessage]:
    """The messages with every timestamp set to one value (a rebuilt message is made now)."""

    def timed(item: Any) -> Any:
        return dataclasses.replace(item, timestamp=WHEN) if hasattr(item, "timestamp") else item

    return [timed(dataclasses.replace(m, parts=[timed(p) for p in m.parts])) for m in messages]


@pytest.mark.parametrize("content", RETURNS.values(), ids=RETURNS.keys())
def test_a_tool_returned_file_comes_back_from_the_engines_form(content: Any) -> None:
    """Rebuilt from the engine's form (a store read on another worker), the history is equal:
    files are ``BinaryContent`` / ``ImageUrl`` / ``DocumentUrl`` pydantic-ai sends as files,
    text is text (the file was lost: the return came back as the tool's text alone)."""
    history = tool_history(content)
    rebuilt = from_autocompact(to_autocompact(history).messages)
    assert without_time(rebuilt) == without_time(history)
    returned = rebuilt[2].parts[0]
    assert isinstance(returned, pm.ToolReturnPart)
    assert returned.files == pm.ToolReturnPart("t", content).files


def test_a_list_of_one_file_comes_back_as_that_file() -> None:
    """``[image]`` comes back as the image (pydantic-ai sends the two alike)."""
    rebuilt = from_autocompact(to_autocompact(tool_history([screenshot()])).messages)
    assert rebuilt[2].parts[0].content == screenshot()  # type: ignore[union-attr]


def test_a_tools_own_dicts_next_to_a_file_stay_what_pydantic_ai_sends() -> None:
    """Dicts of the tool's own next to an image: kept, but those that would read back as a text
    or an image block become the text pydantic-ai sends for them."""
    block = {"type": "image", "url": "https://example.com/a.png"}
    text_like = {"type": "text", "text": "hi"}
    content = [screenshot(b"png"), {"rows": [1, 2]}, block, text_like]
    (response,) = to_autocompact(tool_history(content)).messages[2].function_responses
    assert response.response[1:] == [
        {"rows": [1, 2]},
        {"type": "text", "text": json.dumps(block, separators=(",", ":"))},
        {"type": "text", "text": json.dumps(text_like, separators=(",", ":"))},
    ]
    rebuilt = from_autocompact(to_autocompact(tool_history(content)).messages)
    sent = rebuilt[2].parts[0].content_items(mode="str")  # type: ignore[union-attr]
    assert sent == pm.ToolReturnPart("t", content).content_items(mode="str")


@pytest.mark.parametrize(
    "item",
    [pm.BinaryContent(data=b"RIFF", media_type="audio/wav"), pm.AudioUrl(url="https://x/a.mp3")],
    ids=["audio", "audio-url"],
)
def test_a_file_the_engine_cannot_express_is_a_content_error(item: Any) -> None:
    """Audio (as in a user prompt) raises, naming the message and the call; it counted as
    nothing."""
    with pytest.raises(ContentError, match=r"message 2: the result of tool call 'c1'"):
        to_autocompact(tool_history(["listen", item]))


def engine_return(block: dict[str, Any]) -> list[Message]:
    """A tool call and an engine-form return holding ``block`` (as another writer stored it)."""
    call = FunctionCallPart(id="c1", name="screenshot", arguments={})
    result = FunctionResponsePart(id="c1", name="screenshot", response=["shot", block])
    return [Message(role="model", parts=(call,)), Message(role="user", parts=(result,))]


def test_a_langchain_file_block_comes_back_as_binary_content() -> None:
    """LangChain's ``{"type": "file", "base64": ..., "mime_type": ...}`` is a document."""
    block = {"type": "file", "base64": B64, "mime_type": "application/pdf"}
    rebuilt = from_autocompact(engine_return(block))
    assert rebuilt[1].parts[0].content == [  # type: ignore[union-attr]
        "shot",
        pm.BinaryContent(data=DATA, media_type="application/pdf"),
    ]


def test_a_media_block_pydantic_ai_cannot_send_is_a_content_error() -> None:
    """Anthropic's ``source`` shape is refused, not sent to the model as base64 text."""
    block = {"type": "image", "source": {"type": "base64", "data": B64}}
    with pytest.raises(ContentError, match="pydantic-ai cannot send"):
        from_autocompact(engine_return(block))


# -- through the capability -------------------------------------------------------------------

SNAPSHOT = "<state_snapshot><overall_goal>check the pages</overall_goal></state_snapshot>"


class Pages:
    """A FunctionModel function: a screenshot call per user prompt, then 'done'; it records
    each request and answers summary requests (sent without tools) with a snapshot."""

    def __init__(self) -> None:
        self.requests: list[list[pm.ModelMessage]] = []
        self.side_queries: list[list[pm.ModelMessage]] = []

    def __call__(self, messages: list[pm.ModelMessage], info: AgentInfo) -> pm.ModelResponse:
        """Answer one request."""
        if not info.function_tools:
            self.side_queries.append(list(messages))
            return pm.ModelResponse(parts=[pm.TextPart(SNAPSHOT)])
        self.requests.append(list(messages))
        if any(isinstance(p, pm.UserPromptPart) for p in messages[-1].parts):
            return pm.ModelResponse(parts=[pm.ToolCallPart("screenshot", {"page": "/login"})])
        return pm.ModelResponse(parts=[pm.TextPart("done")])


def screenshot_agent(pages: Pages, capability: Autocompact) -> Agent[None, str]:
    """An agent whose one tool returns a caption and a 300 KB screenshot."""
    agent = Agent(FunctionModel(pages), capabilities=[capability])

    @agent.tool_plain
    def screenshot(page: str) -> list[Any]:
        return [f"Screenshot of {page}.", pm.BinaryContent(data=DATA, media_type="image/png")]

    return agent


def tool_returns(messages: list[pm.ModelMessage]) -> list[pm.ToolReturnPart]:
    return [
        p
        for m in messages
        if isinstance(m, pm.ModelRequest)
        for p in m.parts
        if isinstance(p, pm.ToolReturnPart)
    ]


def test_old_screenshots_are_cleared_and_the_latest_is_sent() -> None:
    """Twelve screenshots (about 19K tokens) on a 24K window: the oldest are cleared, the
    newest goes out as the image; they counted nothing and were never cleared."""
    pages = Pages()
    agent = screenshot_agent(pages, Autocompact(context_window=24_000, summarizer="offline"))
    history: list[pm.ModelMessage] | None = None
    for turn in range(12):
        history = agent.run_sync(f"page {turn}", message_history=history).all_messages()
    returns = tool_returns(pages.requests[-1])
    cleared = [r for r in returns if isinstance(r.content, str)]
    assert cleared
    assert all(r.content.startswith(CLEARED_PREFIX) for r in cleared)
    assert returns[-1].files == [pm.BinaryContent(data=DATA, media_type="image/png")]


def test_a_summary_request_gets_a_placeholder_for_a_screenshot() -> None:
    """The summary's side query knows the tool returned an image and carries no image; it got
    the tool's caption alone."""
    pages = Pages()
    capability = Autocompact(context_window=24_000, clear_tool_outputs=False)
    agent = screenshot_agent(pages, capability)
    history: list[pm.ModelMessage] | None = None
    for turn in range(6):
        history = agent.run_sync(
            f"page {turn}: " + "y" * 12_000, message_history=history
        ).all_messages()
    assert pages.side_queries, "no summary was requested"
    side = pages.side_queries[0]
    assert not any(r.files for r in tool_returns(side))
    assert "[image returned by the tool omitted before summarizing]" in str(side)
    assert SNAPSHOT in str(pages.requests[-1])


def test_another_worker_sends_the_screenshot_read_back_from_the_store(tmp_path: Path) -> None:
    """Worker B, continuing what worker A stored, sends A's screenshot as the image (it sent
    the caption alone)."""
    pages = Pages()
    a, b = SqliteStore(tmp_path / "s.db"), SqliteStore(tmp_path / "s.db")
    for store, run in ((a, "r0"), (b, "r1")):
        agent = screenshot_agent(pages, Autocompact(context_window=128_000, store=store))
        agent.run_sync(f"check {run}", conversation_id="conv", run_id=run)
    first_of_b = pages.requests[2]
    (returned,) = tool_returns(first_of_b)
    assert returned.content == [
        "Screenshot of /login.",
        pm.BinaryContent(data=DATA, media_type="image/png"),
    ]
    a.close()
    b.close()

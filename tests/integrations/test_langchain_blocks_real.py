"""Built-in tool blocks through the real ChatOpenAI (Responses API) and ChatAnthropic, against a
local server on 127.0.0.1 that speaks each API's JSON: the shapes in ``lc_blocks`` are the ones
these packages build, a message rebuilt from the engine's form is sent exactly as the original,
and an agent with web search runs turn after turn through a compaction."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("langchain_anthropic")
pytest.importorskip("langchain_openai")

from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from autocompact.compaction.prompts import SUMMARY_FINAL_INSTRUCTION
from autocompact.events import CompactionSucceeded, Event
from autocompact.integrations.langchain import (
    AutocompactMiddleware,
    from_autocompact,
    to_autocompact,
)

from . import lc_blocks as lc
from .test_langchain_agent import read_file
from .test_langchain_wire import Server

Reply = Callable[[str, dict[str, Any]], dict[str, Any]]
_IDS = itertools.count()


@pytest.fixture
def server() -> Iterator[Server]:
    """The recording server of the wire tests, shut down after the test."""
    srv = Server()
    yield srv
    srv.close()


# -- what each API returns ------------------------------------------------------------------


def openai_items(i: int, size: int, *, calls: bool) -> list[dict[str, Any]]:
    """The Responses API output of a web search turn (the items ``lc_blocks`` mirrors)."""
    reasoning, search, text = lc.openai_search(i, size)
    message = {
        "type": "message",
        "id": f"msg_{i}",
        "role": "assistant",
        "status": "completed",
        "content": [
            {"type": "output_text", "text": text["text"], "annotations": text["annotations"]}
        ],
    }
    return [reasoning, search, lc.openai_function_call(i) if calls else message]


def openai_reply(output: list[dict[str, Any]], prompt: int = 1_000) -> dict[str, Any]:
    """A Responses API response (the message's id: LangChain's id of the AIMessage)."""
    return {
        "id": f"resp_{next(_IDS)}",
        "object": "response",
        "created_at": 0,
        "model": "gpt-5",
        "status": "completed",
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "output": output,
        "usage": {
            "input_tokens": prompt,
            "output_tokens": 20,
            "total_tokens": prompt + 20,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 5},
        },
    }


def anthropic_reply(content: list[dict[str, Any]], prompt: int = 1_000) -> dict[str, Any]:
    """A Messages API response."""
    calls = any(b["type"] == "tool_use" for b in content)
    return {
        "id": f"msg_{next(_IDS)}",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{k: v for k, v in b.items() if v is not None} for b in content],
        "stop_reason": "tool_use" if calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": prompt, "output_tokens": 20},
    }


def anthropic_content(i: int, size: int, *, calls: bool, code: bool = True) -> list[dict[str, Any]]:
    """The Messages API content of a web search turn (the answer with a code execution)."""
    search = lc.anthropic_search(i, size)
    if calls:
        return [*search[:3], lc.anthropic_tool_use(i)]
    return [*search, *(lc.anthropic_code_execution(i) if code else ())]


def openai(server: Server, version: str = "responses/v1") -> ChatOpenAI:
    """ChatOpenAI on the Responses API, against the local server."""
    return ChatOpenAI(
        model="gpt-5",
        base_url=server.url,
        api_key="k",  # type: ignore[arg-type]
        use_responses_api=True,
        output_version=version,
        max_retries=0,
    )


def anthropic(server: Server, version: str | None = None) -> ChatAnthropic:
    """ChatAnthropic against the local server."""
    extra: dict[str, Any] = {"output_version": version} if version else {}
    return ChatAnthropic(  # type: ignore[call-arg]
        model="claude-sonnet-4-5", base_url=server.url, api_key="k", max_retries=0, **extra
    )


# -- the shapes -----------------------------------------------------------------------------


@pytest.mark.parametrize("shape", lc.SHAPES)
def test_the_shapes_are_what_the_packages_build(server: Server, shape: str) -> None:
    """Each ``lc_blocks`` message is block for block what the chat model builds from the API's
    reply (the search with its tool call, then the cited answer), and converts back to it."""
    openai_shape = shape.startswith("openai")
    model: BaseChatModel
    if openai_shape:
        model = openai(server, "v1" if shape == "openai-v1" else "responses/v1")
    else:
        model = anthropic(server, "v1" if shape == "anthropic-v1" else None)
    for calls, expected in ((True, lc.searching_call(shape, 3)), (False, lc.answer(shape, 3))):
        if openai_shape:
            server.reply = lambda path, body, c=calls: openai_reply(openai_items(3, 100, calls=c))
        else:
            server.reply = lambda path, body, c=calls: anthropic_reply(
                anthropic_content(3, 100, calls=c, code=shape == "anthropic")
            )
        got = model.invoke("find release 3")
        assert isinstance(got, AIMessage)
        assert got.content == expected.content
        assert got.tool_calls == expected.tool_calls
        # What the package built converts, and comes back with the same content.
        (back,) = from_autocompact(to_autocompact([got])[1])
        mirrors = [b for b in got.content if isinstance(b, dict) and b.get("type") == "tool_use"]
        assert back.content == [b for b in got.content if b not in mirrors]


@pytest.mark.parametrize("shape", lc.SHAPES)
def test_a_rebuilt_conversation_is_sent_exactly_as_the_original(server: Server, shape: str) -> None:
    """The request body for messages rebuilt from the engine's form is the body for the
    messages LangChain gave, each identified item or block byte for byte (the engine's
    blocks are sent as they were)."""
    call = lc.searching_call(shape, 1, size=2_000)
    messages: list[BaseMessage] = [
        HumanMessage([lc.CACHED_TEXT, {"type": "text", "text": "find release 1"}]),
        call,
        ToolMessage("notes", tool_call_id=call.tool_calls[0]["id"], name="read_file"),
        lc.answer(shape, 1, size=2_000),
        HumanMessage("and release 2?"),
    ]
    system, history = to_autocompact(messages)
    rebuilt = from_autocompact(history, system=system)
    if shape.startswith("openai"):
        model: BaseChatModel = openai(server, "v1" if shape == "openai-v1" else "responses/v1")
        server.reply = lambda path, body: openai_reply(openai_items(2, 100, calls=False))
    else:
        model = anthropic(server, "v1" if shape == "anthropic-v1" else None)
        server.reply = lambda path, body: anthropic_reply(
            anthropic_content(2, 100, calls=False, code=shape == "anthropic")
        )
    # (the rebuilt AI messages lack only the provider's metadata, which is no content)
    for old, new in zip(messages, rebuilt, strict=True):
        new.response_metadata = old.response_metadata
    model.invoke(messages)
    model.invoke(rebuilt)
    original, again = [body for _, body in server.bodies]
    assert again == original  # (a plain text block may list "type" and "text" in another order)
    api = "openai" if shape.startswith("openai") else "anthropic"
    assert items_by_id(again, api) == items_by_id(original, api)  # each item byte for byte
    assert len(items_by_id(original, api)) >= 3
    assert "gAAAAB" in json.dumps(original)  # the encrypted content is sent back


# -- agents ---------------------------------------------------------------------------------

WINDOW = 32_000
SEARCH = 8_000


class Script:
    """The server's side of an agent run: a search with a read_file call, then the answer, for
    each turn; a summary for each summary request."""

    def __init__(self, api: str) -> None:
        self.api = api
        self.step = 0
        self.turn_bodies: list[dict[str, Any]] = []
        self.summary_bodies: list[dict[str, Any]] = []

    def __call__(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        prompt = len(json.dumps(body)) // 3
        summary = SUMMARY_FINAL_INSTRUCTION in json.dumps(body)
        if summary:
            self.summary_bodies.append(body)
            text = "<state_snapshot>goal: find the releases</state_snapshot>"
            if self.api == "openai":
                message = {
                    "type": "message",
                    "id": "msg_s",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
                return openai_reply([message], prompt)
            return anthropic_reply([{"type": "text", "text": text}], prompt)
        self.turn_bodies.append(body)
        i, calls = divmod(self.step, 2)
        self.step += 1
        if self.api == "openai":
            return openai_reply(
                openai_items(i, SEARCH if not calls else 100, calls=not calls), prompt
            )
        content = anthropic_content(i, SEARCH if not calls else 100, calls=not calls)
        return anthropic_reply(content, prompt)


def items_by_id(body: dict[str, Any], api: str) -> dict[str, str]:
    """Each identified item or block of a request, as the JSON sent."""
    if api == "openai":
        return {i["id"]: json.dumps(i) for i in body["input"] if "id" in i}
    blocks = [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]
    return {
        str(b.get("id") or b.get("tool_use_id")) + b["type"]: json.dumps(b)
        for b in blocks
        if b.get("id") or b.get("tool_use_id")
    }


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_an_agent_with_web_search_runs_through_a_compaction(server: Server, api: str) -> None:
    """Eight turns with the provider's web search and a read_file tool: every turn runs, a
    compaction summarizes the oldest, the summary request holds no provider block, and each
    item kept is sent after the compaction exactly as before it."""
    script = Script(api)
    server.reply = script
    model: BaseChatModel
    if api == "openai":
        model, search = openai(server), {"type": "web_search"}
    else:
        model, search = anthropic(server), {"type": "web_search_20250305", "name": "web_search"}
    events: list[Event] = []
    agent = create_agent(
        model,
        [read_file, search],
        system_prompt="You research releases.",
        middleware=[AutocompactMiddleware(context_window=WINDOW, hooks=[events.append])],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    for turn in range(8):
        out = agent.invoke({"messages": [HumanMessage(f"find release {turn}")]}, config)
    assert "Version 7 was released on day 7" in str(out["messages"][-1].content)
    assert any(isinstance(e, CompactionSucceeded) for e in events)
    (summary, *_) = script.summary_bodies
    sent = json.dumps(summary)
    assert "gAAAAB" not in sent
    assert "autocompact release 0" in sent
    assert not any(
        kind in sent
        for kind in ('"web_search_call"', '"server_tool_use"', '"web_search_tool_result"')
    )
    after = next(i for i, b in enumerate(script.turn_bodies) if "<state_snapshot>" in json.dumps(b))
    before = items_by_id(script.turn_bodies[after - 1], api)
    now = items_by_id(script.turn_bodies[after], api)
    kept = [k for k in now if k in before]
    assert kept
    assert all(now[k] == before[k] for k in kept)
    assert len(kept) < len(before)  # the oldest were summarized


def test_a_cached_image_is_sent_again_exactly_as_the_original(server: Server) -> None:
    """An image block with Anthropic prompt caching set on it (``cache_control``, which no image
    part holds) goes out through the real ChatAnthropic exactly as the original after a round
    trip through the engine's form, and counts as one image (it was refused)."""
    image = {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"}
    image["cache_control"] = {"type": "ephemeral"}
    messages: list[BaseMessage] = [HumanMessage([image, {"type": "text", "text": "what is it?"}])]
    system, history = to_autocompact(messages)
    assert [p.kind for p in history[0].parts] == ["image", "opaque", "text"]
    rebuilt = from_autocompact(history, system=system)
    server.reply = lambda path, body: anthropic_reply([{"type": "text", "text": "a cat"}])
    model = anthropic(server)
    model.invoke(messages)
    model.invoke(rebuilt)
    original, again = [body for _, body in server.bodies]
    assert again == original
    assert original["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}

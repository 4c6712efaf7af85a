"""pydantic-ai: what the integration gives back is the history it was given, but for what a
compaction changed (found by a fuzzer; each test failed on the code before its fix)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai import messages as pm
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import RunContext
from pydantic_ai.usage import RequestUsage

from autocompact import ContentError
from autocompact.compaction.clearing import CLEARED_PREFIX
from autocompact.content import DocumentPart, ImagePart
from autocompact.integrations.pydantic_ai import (
    Autocompact,
    history_processor,
    to_autocompact,
)

WHEN = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


class Seen:
    """A FunctionModel function that answers 'done' and records every request it is sent."""

    def __init__(self) -> None:
        self.requests: list[list[pm.ModelMessage]] = []

    def __call__(self, messages: list[pm.ModelMessage], info: AgentInfo) -> pm.ModelResponse:
        """Record, answer."""
        self.requests.append(list(messages))
        return pm.ModelResponse(parts=[pm.TextPart("done")])


def kinds(messages: list[pm.ModelMessage]) -> list[list[str]]:
    return [[type(p).__name__ for p in m.parts] for m in messages]


def capability(window: int = 128_000, events: list[Any] | None = None) -> Autocompact:
    hooks = [events.append] if events is not None else []
    return Autocompact(context_window=window, summarizer="offline", hooks=hooks)


# -- PAI-2: a request holding only system prompts ---------------------------------------------


def system_only_history() -> list[pm.ModelMessage]:
    return [
        pm.ModelRequest(parts=[pm.UserPromptPart("hi")]),
        pm.ModelResponse(parts=[pm.TextPart("yo")]),
        pm.ModelRequest(parts=[pm.SystemPromptPart("new rules")]),
        pm.ModelResponse(parts=[pm.TextPart("ok")]),
        pm.ModelRequest(parts=[]),
        pm.ModelResponse(parts=[pm.TextPart("fine")]),
    ]


def test_capability_without_compaction_keeps_a_system_only_request_in_place() -> None:
    """No compaction: the history comes back as the same objects, in the same order (a request
    holding only a system prompt, or nothing, was removed and its prompt moved to the front)."""
    history = system_only_history()
    control_seen = Seen()
    control = Agent(FunctionModel(control_seen)).run_sync("go", message_history=history)
    events: list[Any] = []
    seen = Seen()
    agent = Agent(FunctionModel(seen), capabilities=[capability(events=events)])
    messages = agent.run_sync("go", message_history=history).all_messages()
    assert not [e for e in events if e.kind == "compaction_succeeded"]
    assert kinds(messages) == kinds(control.all_messages())
    assert all(a is b for a, b in zip(messages[: len(history)], history, strict=True))
    assert kinds(seen.requests[0]) == kinds(control_seen.requests[0])


def test_processor_without_compaction_returns_the_history_unchanged() -> None:
    """The history processor, with nothing to compact, sends the history it was given."""
    history = system_only_history()
    process = history_processor(128_000)
    calls: list[tuple[list[pm.ModelMessage], list[pm.ModelMessage]]] = []

    def recorded(ctx: RunContext[Any], messages: list[pm.ModelMessage]) -> list[pm.ModelMessage]:
        out = process(ctx, messages)
        calls.append((messages, out))
        return out

    agent = Agent(FunctionModel(Seen()), capabilities=[ProcessHistory(recorded)])
    agent.run_sync("go", message_history=history)
    given, out = calls[0]
    assert len(out) == len(given) == len(history) + 1
    assert all(a is b for a, b in zip(out[:-1], given[:-1], strict=True))
    assert out[-1].parts == given[-1].parts  # the pending request: tagged with the state


def test_a_compaction_keeps_a_system_only_request_in_the_kept_part_in_place() -> None:
    """Clearing an old tool result keeps a later system-only request where it was."""
    rules = pm.ModelRequest(parts=[pm.SystemPromptPart("new rules")])
    history: list[pm.ModelMessage] = [
        pm.ModelRequest(parts=[pm.UserPromptPart("start")]),
        pm.ModelResponse(parts=[pm.ToolCallPart("read", {"p": "a"}, "c1")]),
        pm.ModelRequest(parts=[pm.ToolReturnPart("read", "x" * 150_000, "c1")]),
        pm.ModelResponse(parts=[pm.TextPart("ok")]),
        rules,
        pm.ModelResponse(parts=[pm.TextPart("noted")]),
        pm.ModelRequest(parts=[pm.UserPromptPart("again")]),
        pm.ModelResponse(parts=[pm.ToolCallPart("read", {"p": "b"}, "c2")]),
        pm.ModelRequest(parts=[pm.ToolReturnPart("read", "y" * 100_000, "c2")]),
        pm.ModelResponse(parts=[pm.TextPart("ok2")]),
    ]
    events: list[Any] = []
    agent = Agent(FunctionModel(Seen()), capabilities=[capability(120_000, events)])
    messages = agent.run_sync("go", message_history=history).all_messages()
    assert any(getattr(getattr(e, "info", None), "method", None) == "clearing" for e in events)
    assert messages[4] is rules
    assert [m is h for m, h in zip(messages, history, strict=False)] == [
        True, True, False, True, True, True, True, True, True, True,
    ]  # fmt: skip


# -- PAI-3: clearing one tool result ----------------------------------------------------------


def test_clearing_a_tool_result_keeps_the_rest_of_its_request() -> None:
    """Only the cleared ToolReturnPart's content changes: the request's instructions,
    metadata, run id and timestamp, the part's own fields and its sibling parts (a user
    prompt of text and an image, which was split in two) are kept."""
    prompt = pm.UserPromptPart(["look at", pm.ImageUrl(url="https://x/a.png")], timestamp=WHEN)
    result = pm.ToolReturnPart("read", "x" * 150_000, "c1", timestamp=WHEN, metadata={"m": 1})
    cleared_request = pm.ModelRequest(
        parts=[result, prompt],
        instructions="INSTR",
        metadata={"mine": 1},
        run_id="run-1",
        timestamp=WHEN,
    )
    history: list[pm.ModelMessage] = [
        pm.ModelRequest(parts=[pm.SystemPromptPart("sys"), pm.UserPromptPart("start")]),
        pm.ModelResponse(parts=[pm.ToolCallPart("read", {"p": "a"}, "c1")]),
        cleared_request,
        pm.ModelResponse(parts=[pm.TextPart("ok")]),
        pm.ModelRequest(parts=[pm.UserPromptPart("again")]),
        pm.ModelResponse(parts=[pm.ToolCallPart("read", {"p": "b"}, "c2")]),
        pm.ModelRequest(parts=[pm.ToolReturnPart("read", "y" * 100_000, "c2")]),
        pm.ModelResponse(parts=[pm.TextPart("ok2")]),
    ]
    agent = Agent(FunctionModel(Seen()), capabilities=[capability(120_000)])
    messages = agent.run_sync("go", message_history=history).all_messages()
    after = messages[2]
    assert isinstance(after, pm.ModelRequest)
    assert after is not cleared_request
    assert (after.instructions, after.metadata, after.run_id, after.timestamp) == (
        "INSTR",
        {"mine": 1},
        "run-1",
        WHEN,
    )
    assert len(after.parts) == 2
    assert after.parts[1] is prompt
    tool = after.parts[0]
    assert isinstance(tool, pm.ToolReturnPart)
    assert isinstance(tool.content, str)
    assert tool.content.startswith(CLEARED_PREFIX)
    assert (tool.tool_call_id, tool.timestamp, tool.metadata) == ("c1", WHEN, {"m": 1})
    assert messages[0] is history[0]


# -- PAI-1: a URL that tells no media type ----------------------------------------------------


def test_an_image_url_without_an_extension_is_sent_as_without_autocompact() -> None:
    """``ImageUrl("https://picsum.photos/200")``: pydantic-ai sends it; autocompact raised
    pydantic-ai's 'Could not infer media type' ValueError."""
    image = pm.ImageUrl(url="https://picsum.photos/200")
    history: list[pm.ModelMessage] = [
        pm.ModelRequest(parts=[pm.UserPromptPart(["what is this?", image])]),
        pm.ModelResponse(parts=[pm.TextPart("a photo")]),
    ]
    seen = Seen()
    agent = Agent(FunctionModel(seen), capabilities=[capability()])
    assert agent.run_sync("more", message_history=history).output == "done"
    assert seen.requests[0][0] is history[0]
    document = pm.DocumentUrl(url="https://example.com/download?id=7")
    converted = to_autocompact(
        [pm.ModelRequest(parts=[pm.UserPromptPart([image, document])])]
    ).messages[0]
    image_part, document_part = converted.parts
    assert isinstance(image_part, ImagePart)
    assert image_part.url == image.url
    assert image_part.media_type == "image/*"
    assert isinstance(document_part, DocumentPart)
    assert document_part.media_type == "application/octet-stream"
    declared = pm.ImageUrl(url="https://picsum.photos/200", media_type="image/jpeg")
    converted = to_autocompact([pm.ModelRequest(parts=[pm.UserPromptPart([declared])])])
    assert converted.messages[0].parts[0] == ImagePart(url=declared.url, media_type="image/jpeg")


# -- PAI-4: a malformed autocompact record in message_history ---------------------------------


@pytest.mark.parametrize(
    ("record", "input_tokens"),
    [
        ("garbage", 10),
        ({"state": {}, "sent": {"text_chars": "abc"}}, 10),
        ({"state": {}, "sent": {"text_chars": None}}, 10),
        ({"state": {}, "sent": {"text_chars": float("inf")}}, 10),
        ({"state": {}, "sent": {"json_chars": float("nan")}}, 10),
        ({"state": {}, "sent": {"media_parts": -1}}, 10),
        ({"state": {}, "sent": {"text_chars": 40}}, None),
    ],
)
def test_a_malformed_record_in_the_history_is_ignored(
    record: Any, input_tokens: int | None, caplog: pytest.LogCaptureFixture
) -> None:
    """A record the run cannot read (or a usage without input_tokens) does not break the run
    (AttributeError, ValueError, TypeError, OverflowError escaped)."""
    history: list[pm.ModelMessage] = [
        pm.ModelRequest(parts=[pm.UserPromptPart("x")], metadata={"autocompact": record}),
        pm.ModelResponse(
            parts=[pm.TextPart("y")],
            usage=RequestUsage(input_tokens=input_tokens, output_tokens=2),  # type: ignore[arg-type]
        ),
    ]
    agent = Agent(FunctionModel(Seen()), capabilities=[capability()])
    with caplog.at_level(logging.DEBUG, logger="autocompact"):
        assert agent.run_sync("z", message_history=history).output == "done"
    if input_tokens is not None:
        assert "ignoring message 0's metadata['autocompact']" in caplog.text


# -- PAI-5: a system prompt that is not text --------------------------------------------------


@pytest.mark.parametrize("content", [None, 5])
def test_a_system_prompt_that_is_not_text_is_a_content_error(content: Any) -> None:
    """``SystemPromptPart(None)``: a ContentError naming the message (a TypeError escaped)."""
    history = [pm.ModelRequest(parts=[pm.SystemPromptPart(content), pm.UserPromptPart("x")])]
    with pytest.raises(ContentError, match="message 0: a SystemPromptPart's content must be"):
        to_autocompact(history)
    agent = Agent(FunctionModel(Seen()), capabilities=[capability()])
    with pytest.raises(ContentError, match="SystemPromptPart"):
        agent.run_sync("z", message_history=[*history, pm.ModelResponse(parts=[])])

"""pydantic-ai: what the integration gives back is the history it was given, but for what a
compaction changed (found by a fuzzer; each test failed on the code before its fix)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai import messages as pm
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from autocompact import ContentError
from autocompact.content import DocumentPart, ImagePart
from autocompact.integrations.pydantic_ai import (
    Autocompact,
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

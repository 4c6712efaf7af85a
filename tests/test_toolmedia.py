"""An image or document a tool returns counts as media, not as its base64 JSON: the estimate,
the codec's fast path, clearing, slimming, and the adapters that cannot send one."""

from __future__ import annotations

import base64
import json
import random
from typing import Any

import pytest

from autocompact.codec import history_from_dicts, history_to_dicts
from autocompact.compaction.clearing import clear_tool_outputs
from autocompact.compaction.slimming import slim_for_summary
from autocompact.content import FunctionCallPart, FunctionResponsePart, ImagePart, Message
from autocompact.convert import to_anthropic_messages, to_openai_messages
from autocompact.convert.openai_responses import to_responses_input
from autocompact.errors import ContentError
from autocompact.estimation import (
    DEFAULT_IMAGE_TOKEN_ESTIMATE,
    content_stats,
    estimate_content_tokens,
    estimate_prompt_tokens,
)

DATA = base64.b64encode(random.Random(7).randbytes(300_000)).decode()  # a 300 KB screenshot
TEXT = {"type": "text", "text": "Took a screenshot of the login page."}
SHAPES = {
    "anthropic": {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": DATA},
    },
    "langchain": {"type": "image", "base64": DATA, "mime_type": "image/png"},
    "openai-chat": {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{DATA}"}},
    "responses": {"type": "input_image", "image_url": f"data:image/png;base64,{DATA}"},
    "mcp": {"type": "image", "data": DATA, "mimeType": "image/png"},
    "pdf": {"type": "document", "source": {"type": "base64", "media_type": "x", "data": DATA}},
}


def result(*blocks: Any, call: str = "c1") -> FunctionResponsePart:
    """A screenshot tool's result holding ``blocks``."""
    return FunctionResponsePart(id=call, name="screenshot", response=list(blocks))


def turn(*blocks: Any, call: str = "c1") -> list[Message]:
    """The call and its result."""
    return [
        Message(role="model", parts=(FunctionCallPart(id=call, name="screenshot"),)),
        Message(role="user", parts=(result(*blocks, call=call),)),
    ]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_an_image_a_tool_returns_counts_as_one_image(shape: str) -> None:
    """Each API's and framework's image block in a tool result is one media part; the rest is
    JSON as the encoder writes it (the oracle: json.dumps of the response without the image)."""
    part = result(TEXT, SHAPES[shape])
    rest = json.dumps(
        {"name": "screenshot", "response": [TEXT]}, ensure_ascii=False, separators=(",", ":")
    )
    assert part.stats.media_parts == 1
    assert part.stats.json_chars == len(rest)
    tokens = estimate_content_tokens([part])
    assert DEFAULT_IMAGE_TOKEN_ESTIMATE < tokens < DEFAULT_IMAGE_TOKEN_ESTIMATE + 100


def test_a_block_without_anything_to_show_is_json() -> None:
    """A directory listing's ``{"type": "file", "name": ...}`` entries are no media."""
    listing = [{"type": "file", "name": f"m{i}.py", "size": i} for i in range(50)]
    part = FunctionResponsePart(id="c1", name="ls", response=listing)
    whole = json.dumps(
        {"name": "ls", "response": listing}, ensure_ascii=False, separators=(",", ":")
    )
    assert part.stats.media_parts == 0
    assert part.stats.json_chars == len(whole)


def test_the_codec_builds_what_the_constructor_measures() -> None:
    """history_from_dicts (whose one-part messages take a fast path) gives the same statistics
    as the constructors, for a result with an image and one without."""
    messages = [*turn(TEXT, SHAPES["anthropic"]), *turn(TEXT, call="c2")]
    rebuilt = history_from_dicts(history_to_dicts(messages))
    assert [m.stats for m in rebuilt] == [m.stats for m in messages]
    assert rebuilt == messages
    assert estimate_prompt_tokens(rebuilt, None, 0) == estimate_prompt_tokens(messages, None, 0)


def test_clearing_a_result_takes_its_image_out_of_the_count() -> None:
    """The statistics clearing hands back equal the new history's own: a cleared result's image
    is gone from the count too."""
    history = [
        Message.user("check the login page"),
        *turn(TEXT, SHAPES["langchain"], call="c1"),
        Message(role="model", parts=()),
        Message.user("again"),
        *turn(TEXT, SHAPES["langchain"], call="c2"),
    ]
    cleared = clear_tool_outputs(history, protect_tokens=0)
    assert cleared.cleared == 1
    assert content_stats(cleared.history).media_parts == 1
    before = estimate_content_tokens(history)
    assert cleared.tokens_saved == before - estimate_content_tokens(cleared.history)
    assert cleared.tokens_saved > DEFAULT_IMAGE_TOKEN_ESTIMATE - 100  # (less its placeholder)


def test_slimming_puts_a_placeholder_where_the_image_was() -> None:
    """The side query never carries a tool's image: its block becomes a text placeholder."""
    (slim,) = slim_for_summary(turn(TEXT, SHAPES["mcp"])[1:])
    (part,) = slim.parts
    assert isinstance(part, FunctionResponsePart)
    assert part.response[0] == TEXT
    assert part.response[1]["type"] == "text"
    assert "image returned by the tool omitted" in part.response[1]["text"]
    assert DATA not in json.dumps(part.response)
    assert slim.stats.media_parts == 0


def test_anthropic_sends_the_image_block_as_it_is() -> None:
    """Anthropic carries images in a tool result: the block goes out unchanged."""
    messages = to_anthropic_messages(turn(TEXT, SHAPES["anthropic"]))
    (block,) = messages[1]["content"]
    assert block["content"] == [TEXT, SHAPES["anthropic"]]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_anthropic_gets_every_shape_as_its_own_image_block(shape: str) -> None:
    """Each shape the estimate counts as one image reaches the Anthropic API as an image (or
    document) block with the same picture: LangChain's and MCP's image blocks went out as they
    were (the API refuses them) and OpenAI's as base64 text, at a hundred times the estimate."""
    messages = to_anthropic_messages(turn(TEXT, SHAPES[shape]))
    (block,) = messages[1]["content"]
    text, media = block["content"]
    assert text == TEXT
    kind = "document" if shape == "pdf" else "image"
    media_type = "x" if shape == "pdf" else "image/png"
    assert media == {
        "type": kind,
        "source": {"type": "base64", "media_type": media_type, "data": DATA},
    }


def test_anthropic_gets_a_linked_image_and_the_rest_as_text_blocks() -> None:
    """An image by URL keeps its URL; a member that is no text block goes as its JSON text."""
    linked = {"type": "image_url", "image_url": {"url": "https://example.invalid/a.png"}}
    listing = {"type": "file", "name": "a.png"}
    messages = to_anthropic_messages(turn(linked, listing))
    (block,) = messages[1]["content"]
    assert block["content"] == [
        {"type": "image", "source": {"type": "url", "url": "https://example.invalid/a.png"}},
        {"type": "text", "text": '{"type":"file","name":"a.png"}'},
    ]


@pytest.mark.parametrize(
    "block",
    [
        {"type": "audio", "data": "AA", "mimeType": "audio/wav"},
        {"type": "input_file", "file_id": "file-1"},
    ],
    ids=["audio", "file-id"],
)
def test_anthropic_refuses_media_it_cannot_carry(block: dict[str, Any]) -> None:
    """Audio, or a file known only by another API's id: a ContentError names the call (it went
    out as base64 JSON text, counted as one image)."""
    with pytest.raises(ContentError, match=r"tool call 'c1' \(screenshot\).*Anthropic API"):
        to_anthropic_messages(turn(TEXT, block))


def test_chat_completions_refuses_an_image_in_a_tool_result() -> None:
    """A tool message carries only text: sent as JSON, the image would reach the model as base64
    text, at a hundred times its estimate. A ContentError names the call and what to do."""
    with pytest.raises(ContentError, match=r"tool call 'c1' \(screenshot\).*ImagePart"):
        to_openai_messages(turn(TEXT, SHAPES["responses"]))


@pytest.mark.parametrize("shape", sorted(set(SHAPES) - {"pdf"}))
def test_the_responses_api_gets_the_image_as_an_input_image(shape: str) -> None:
    """A function call's output may hold images: each shape becomes one ``input_image`` with
    the same picture, next to the text."""
    items = to_responses_input(turn(TEXT, SHAPES[shape]), family=None)
    output = items[-1]["output"]
    assert output[0] == {"type": "input_text", "text": TEXT["text"]}
    assert output[1]["type"] == "input_image"
    assert output[1]["image_url"] == f"data:image/png;base64,{DATA}"


def test_the_responses_api_gets_a_document_as_an_input_file() -> None:
    """An Anthropic document block becomes an ``input_file`` with its data."""
    items = to_responses_input(turn(SHAPES["pdf"]), family=None)
    (item,) = items[-1]["output"]
    assert item == {
        "type": "input_file",
        "file_data": f"data:x;base64,{DATA}",
        "filename": "document",
    }


def test_the_responses_api_refuses_audio_a_tool_returned() -> None:
    """A function call's output takes no audio: a ContentError names the call."""
    audio = {"type": "input_audio", "input_audio": {"data": "AA", "format": "wav"}}
    with pytest.raises(ContentError, match=r"tool call 'c1' \(screenshot\).*'input_audio'"):
        to_responses_input(turn(audio), family=None)


def test_the_same_image_in_a_user_message_counts_the_same() -> None:
    """An image is an image wherever it travels: in a tool result or in a user message."""
    in_result = estimate_content_tokens([result(SHAPES["anthropic"])])
    in_message = estimate_content_tokens([ImagePart(media_type="image/png", data=DATA)])
    assert abs(in_result - in_message) < 30


def test_the_ledger_reads_the_text_of_a_result_not_its_image() -> None:
    """The state ledger reads a tool's text; the image's base64 is no text to read."""
    from autocompact.compaction.ledger.tools import response_text

    assert response_text([TEXT, SHAPES["langchain"]]) == TEXT["text"]
    assert DATA not in response_text([SHAPES["anthropic"], {"rows": 3}])

"""Images an OpenAI model generates (the Responses API's built-in ``image_generation`` tool)
through the LangChain integration, with the real ChatOpenAI against a local server on 127.0.0.1:
the estimate counts each image as one image, as the provider does, not as its base64; the item
goes back to the API exactly as it came; summaries read what it was drawn to, never its data.

Both of ChatOpenAI's shapes: ``output_version="responses/v1"`` keeps the API's
``image_generation_call`` item; ``"v1"`` makes it LangChain's standard ``image`` block with the
item's id and its other fields in ``extras``.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langchain_openai")

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from autocompact.codec import history_from_dicts, history_to_dicts
from autocompact.compaction.extractive import extractive_summary
from autocompact.content import ImagePart, portable_history
from autocompact.estimation import estimate_content_tokens
from autocompact.events import Event
from autocompact.integrations.langchain import (
    AutocompactMiddleware,
    from_autocompact,
    to_autocompact,
)
from autocompact.thresholds import DEFAULT_IMAGE_TOKEN_ESTIMATE

from .test_langchain_blocks_real import openai as model
from .test_langchain_blocks_real import openai_reply
from .test_langchain_wire import Server

VERSIONS = ("responses/v1", "v1")
IMAGE_BYTES = 300_000  # a generated PNG's size (about 400,000 characters of base64)


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server()
    yield srv
    srv.close()


def picture(i: int) -> str:
    """A generated image's base64 (random bytes: every image differs)."""
    return base64.b64encode(random.Random(i).randbytes(IMAGE_BYTES)).decode()


def generated(i: int) -> dict[str, Any]:
    """The Responses API's output item for an image the model drew in turn ``i``."""
    return {
        "type": "image_generation_call",
        "id": f"ig_{i}",
        "status": "completed",
        "background": "opaque",
        "output_format": "png",
        "quality": "high",
        "size": "1024x1024",
        "revised_prompt": f"A lighthouse at dusk, painted in style number {i}",
        "result": picture(i),
    }


def reply(i: int) -> dict[str, Any]:
    """A Responses API response: the image, then a line about it."""
    message = {
        "type": "message",
        "id": f"msg_{i}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": f"Here is picture {i}.", "annotations": []}],
    }
    return openai_reply([generated(i), message])


def drawn(server: Server, version: str, i: int) -> AIMessage:
    """The AIMessage ChatOpenAI builds from a reply that holds a generated image."""
    server.reply = lambda path, body: reply(i)
    got = model(server, version).invoke(f"draw picture {i}")
    assert isinstance(got, AIMessage)
    return got


@pytest.mark.parametrize("version", VERSIONS)
def test_a_generated_image_counts_as_one_image(server: Server, version: str) -> None:
    """The message converts (no ContentError), holds the image as an image part, and its
    estimate is about one image plus the item's fields, not the 400,000 characters of base64
    (which at 2 characters a token would fill a 200K window alone)."""
    message = drawn(server, version, 1)
    _, history = to_autocompact([message])
    images = [p for p in history[0].parts if isinstance(p, ImagePart)]
    assert [p.data for p in images] == [picture(1)]
    tokens = estimate_content_tokens(history)
    assert DEFAULT_IMAGE_TOKEN_ESTIMATE < tokens < DEFAULT_IMAGE_TOKEN_ESTIMATE + 300
    # The setting for images applies to it, as to any image.
    assert estimate_content_tokens(history, 100) == tokens - DEFAULT_IMAGE_TOKEN_ESTIMATE + 100


@pytest.mark.parametrize("version", VERSIONS)
def test_the_image_comes_back_byte_exact_and_through_a_store(server: Server, version: str) -> None:
    """from_autocompact gives the blocks ChatOpenAI built back as they were, also after the
    session codec every store writes."""
    message = drawn(server, version, 2)
    _, history = to_autocompact([message])
    (back,) = from_autocompact(history)
    assert json.dumps(back.content) == json.dumps(message.content)
    loaded = history_from_dicts(json.loads(json.dumps(history_to_dicts(history))))
    assert tuple(loaded) == history
    (again,) = from_autocompact(loaded)
    assert json.dumps(again.content) == json.dumps(message.content)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_rebuilt_conversation_is_sent_exactly_as_the_original(
    server: Server, version: str
) -> None:
    """The request ChatOpenAI sends for the rebuilt messages is the request for the messages it
    built, the image's item included (LangChain sends it by its id, or whole when stateless)."""
    messages: list[BaseMessage] = [HumanMessage("draw picture 3"), drawn(server, version, 3)]
    messages.append(HumanMessage("now make it brighter"))
    system, history = to_autocompact(messages)
    rebuilt = from_autocompact(history, system=system)
    for old, new in zip(messages, rebuilt, strict=True):
        new.response_metadata = old.response_metadata  # (metadata, not content)
    server.bodies.clear()
    server.reply = lambda path, body: reply(4)
    for chat in (model(server, version), model(server, version).bind(store=False)):
        chat.invoke(messages)
        chat.invoke(rebuilt)
    first, second, stateless, stateless_again = [body for _, body in server.bodies]
    assert second == first
    assert stateless_again == stateless
    assert {"type": "image_generation_call", "id": "ig_3"} in first["input"]
    assert picture(3) in json.dumps(stateless)  # stateless: the image itself is sent back


@pytest.mark.parametrize("version", VERSIONS)
def test_a_summary_reads_the_prompt_never_the_data(server: Server, version: str) -> None:
    """The offline summary of a part with a generated image names what was drawn; no base64."""
    messages = [HumanMessage("draw a lighthouse"), drawn(server, version, 5)]
    _, history = to_autocompact(messages)
    summary = extractive_summary(portable_history(history))
    assert picture(5)[:40] not in summary
    assert "lighthouse at dusk" in summary


@pytest.mark.parametrize("version", VERSIONS)
def test_an_agent_that_draws_every_turn_keeps_its_images(server: Server, version: str) -> None:
    """Six turns that each draw a 400,000-character image, in a 64K window: six images are
    about 10K tokens, so nothing is compacted and every turn's request carries each image
    drawn before it (counted as base64, the second turn alone would be over the window)."""
    bodies: list[dict[str, Any]] = []
    turns = iter(range(100))

    def script(path: str, body: dict[str, Any]) -> dict[str, Any]:
        bodies.append(body)
        return reply(next(turns))

    server.reply = script
    events: list[Event] = []
    agent = create_agent(
        model(server, version),
        [],
        system_prompt="You draw pictures.",
        middleware=[AutocompactMiddleware(context_window=64_000, hooks=[events.append])],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    for turn in range(6):
        agent.invoke({"messages": [HumanMessage(f"draw picture {turn}")]}, config)
    assert len(bodies) == 6  # one request a turn: no summary request
    assert not [e for e in events if "Compaction" in type(e).__name__]
    for turn, body in enumerate(bodies):
        sent = [i for i in body["input"] if i.get("type") == "image_generation_call"]
        assert [i["id"] for i in sent] == [f"ig_{n}" for n in range(turn)]

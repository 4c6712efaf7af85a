"""The OpenAI Agents SDK converter sends back only OpenAI's own reasoning.

Another provider's reasoning signature (Anthropic's thinking signature, Gemini's thought
signature, one without autocompact's mark for OpenAI's, or what the SDK's Chat Completions and
LiteLLM models store under their placeholder id) is not an OpenAI encrypted blob: the Responses
API refuses it (400 ``invalid_encrypted_content``, "could not be verified"), so it goes out as no
item, as the Responses adapter leaves it out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
from agents import OpenAIResponsesModel
from openai import AsyncOpenAI

from autocompact import Message, TextPart, ThinkingPart
from autocompact.convert.openai_responses import reasoning_signature, to_responses_input
from autocompact.integrations.openai_agents import (
    AgentsModelProvider,
    from_autocompact,
    to_autocompact,
)
from autocompact.providers.base import ChatRequest
from autocompact.sessions.stores import SqliteStore

from .test_openai_agents_store import worker

ANTHROPIC = "EqQBCkgIBhABGAIiQL3kxQ0vRh8n0cZl1KjTz3bq0a8P4Hc2V5Pp6Jm0oA=="
GEMINI = "CiQBVKhc7p1VYrFfZ3Xb8qU0Yk3m1Qy6Y2dGm2A5j6a7dP0vKx8="
OPENAI = "gAAAAABpDq0Xk2f1-encrypted"
CLAUDE_VIA_LITELLM = {  # how the SDK's LiteLLM / Chat Completions models store Claude's thinking
    "type": "reasoning",
    "id": "__fake_id__",
    "summary": [{"type": "summary_text", "text": "why"}],
    "content": [{"type": "reasoning_text", "text": "why"}],
    "encrypted_content": ANTHROPIC,
    "provider_data": {"model": "claude-sonnet-4-5", "response_id": "chatcmpl-1"},
}


def thinking(signature: str | None) -> Message:
    """A model message: a thinking part signed ``signature``, then the answer."""
    return Message(
        role="model", parts=(ThinkingPart(text="why", signature=signature), TextPart(text="a"))
    )


ANSWER = {"role": "assistant", "content": "a"}
SUMMARY = [{"type": "summary_text", "text": "why"}]


@pytest.mark.parametrize(
    ("signature", "expected"),
    [
        (
            reasoning_signature("rs_1", OPENAI),
            [{"type": "reasoning", "id": "rs_1", "summary": SUMMARY, "encrypted_content": OPENAI}],
        ),
        (
            reasoning_signature(None, OPENAI),
            [{"type": "reasoning", "summary": SUMMARY, "encrypted_content": OPENAI}],
        ),
        (
            reasoning_signature("rs_1", None),
            [{"type": "reasoning", "id": "rs_1", "summary": SUMMARY}],
        ),
        (ANTHROPIC, []),
        (GEMINI, []),
        (OPENAI, []),  # an OpenAI-looking blob without the mark: nothing says whose it is
        (reasoning_signature("__fake_id__", ANTHROPIC), []),  # as stored by an earlier version
        (None, []),
    ],
    ids=[
        "openai",
        "openai-no-id",
        "openai-no-content",
        "anthropic",
        "gemini",
        "unmarked",
        "placeholder-id",
        "none",
    ],
)
def test_only_openai_reasoning_goes_out(signature: str | None, expected: list[Any]) -> None:
    """A thinking part goes out as a reasoning item only when its signature carries OpenAI's
    reasoning item; any other is left out, as the Responses adapter leaves it out (another
    provider's signature went out as ``encrypted_content``, which the API refuses)."""
    message = thinking(signature)
    assert from_autocompact([message]) == [*expected, ANSWER]
    if "__fake_id__" not in (signature or ""):  # (the SDK's placeholder: the converter's own)
        adapter = to_responses_input([message], family=None)
        assert [i for i in adapter if i.get("type") == "reasoning"] == [
            i for i in expected if "id" in i
        ]  # (the adapter sends only items with their id)


def test_reasoning_sent_without_its_id_comes_back_from_the_store_form() -> None:
    """A reasoning item the runner gave without its id (the SDK's "omit" id policy), rebuilt
    from the engine form (another worker), goes out with its encrypted content and no id."""
    given = [{"role": "user", "content": "q"}, {"type": "reasoning", "summary": SUMMARY}, ANSWER]
    given[1]["encrypted_content"] = OPENAI
    converted = to_autocompact(given)
    assert from_autocompact(converted.messages) == given
    assert to_autocompact(from_autocompact(converted.messages)).messages == converted.messages


def test_another_providers_reasoning_item_is_given_back_as_given_and_never_rebuilt() -> None:
    """Claude's thinking as the SDK's LiteLLM model stores it comes back as the very item the
    runner gave (the SDK's own Responses model filters it); rebuilt from the engine form it is
    no item (it went out under the placeholder id with Claude's signature as encrypted content).
    """
    given = [{"role": "user", "content": "q"}, CLAUDE_VIA_LITELLM, ANSWER]
    converted = to_autocompact(given)
    back = from_autocompact(converted.messages, converted)
    assert all(a is b for a, b in zip(back, given, strict=True))
    assert from_autocompact(converted.messages) == [given[0], ANSWER]


async def test_another_worker_rebuilds_another_providers_reasoning_as_no_item(
    tmp_path: Path,
) -> None:
    """A conversation whose stored turns hold another provider's reasoning (and one that holds
    nothing else) is rebuilt on another worker without it; the rest is there."""
    a, b = SqliteStore(tmp_path / "w.db"), SqliteStore(tmp_path / "w.db")
    await worker(a, "r0").add_items([{"role": "user", "content": "q"}])
    await worker(a, "r1").add_items([CLAUDE_VIA_LITELLM])
    assert await worker(b, "y").get_items() == [{"role": "user", "content": "q"}]
    await worker(a, "r2").add_items([ANSWER])
    assert await worker(b, "z").get_items() == [{"role": "user", "content": "q"}, ANSWER]
    only = SqliteStore(tmp_path / "only.db")
    await worker(only, "r0").add_items([CLAUDE_VIA_LITELLM])
    assert await worker(SqliteStore(tmp_path / "only.db"), "y").get_items() == []
    a.close()
    b.close()
    only.close()


RESPONSE = {
    "id": "resp_1",
    "object": "response",
    "created_at": 0,
    "model": "gpt-5-mini",
    "status": "completed",
    "parallel_tool_calls": False,
    "tool_choice": "auto",
    "tools": [],
    "output": [
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "the summary", "annotations": []}],
        }
    ],
    "usage": {
        "input_tokens": 10,
        "output_tokens": 2,
        "total_tokens": 12,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0},
    },
}


async def test_a_summary_through_the_agents_responses_model_sends_no_foreign_signature() -> None:
    """The summary request through the SDK's own Responses model (the ``"model"`` summarizer)
    carries OpenAI's reasoning and none of another provider's: the SDK's own clean-up keeps an
    item without ``provider_data``, so Claude's signature went out as encrypted content."""
    sent: list[dict[str, Any]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        sent.append(body)
        for item in body["input"]:
            if item.get("type") == "reasoning" and item.get("encrypted_content") != OPENAI:
                error = {"code": "invalid_encrypted_content", "message": "could not be verified"}
                return httpx2.Response(400, json={"error": {**error, "type": "invalid_request"}})
        return httpx2.Response(200, json=RESPONSE)

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    client = AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9/v1", http_client=http)
    provider = AgentsModelProvider(OpenAIResponsesModel("gpt-5-mini", openai_client=client))
    history = (
        Message.user("q"),
        thinking(reasoning_signature("rs_1", OPENAI)),
        Message.user("next"),
        thinking(ANTHROPIC),
        Message.user("and"),
        thinking(reasoning_signature("__fake_id__", ANTHROPIC)),
        Message.user("summarize"),
    )
    completion = await provider.acomplete(ChatRequest(messages=history, max_output_tokens=100))
    assert completion.message.text == "the summary"
    (body,) = sent
    reasoning = [i for i in body["input"] if i.get("type") == "reasoning"]
    assert [(i.get("id"), i["encrypted_content"]) for i in reasoning] == [("rs_1", OPENAI)]
    await http.aclose()

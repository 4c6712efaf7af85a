"""What the proxy writes anew is in a form every documented upstream reads (llama-server's
OpenAI-compatible endpoints are stricter than OpenAI's own)."""

from __future__ import annotations

import json
from typing import Any

import openai

from .conftest import Proxy
from .test_compaction import filler


def _read_turn(turn: int) -> list[dict[str, Any]]:
    """A user's request to read a file, the model's call and the tool's output (Responses)."""
    return [
        {"type": "message", "role": "user", "content": f"Turn {turn}: read f{turn}.txt"},
        {"type": "function_call", "call_id": f"call_{turn}", "name": "read",
         "arguments": json.dumps({"path": f"f{turn}.txt"})},
        {"type": "function_call_output", "call_id": f"call_{turn}", "output": filler(turn)},
    ]  # fmt: skip


def test_responses_compaction_writes_typed_messages(proxy: Proxy) -> None:
    """A compacted stateless Responses request (and its summary request) writes every message
    item with ``"type": "message"``: llama-server refuses an assistant message without it
    ("Cannot determine type of 'item'"), so every compacted request to it was rejected."""
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0)
    items: list[dict[str, Any]] = []
    actions = []
    for turn in range(24):
        items += _read_turn(turn)
        raw = client.responses.with_raw_response.create(model="scripted", input=items)  # type: ignore[arg-type]
        actions.append(raw.headers["x-autocompact-action"])
        text = raw.parse().output_text
        items.append(
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": text}]}
        )  # fmt: skip
    assert "compacted" in actions
    untyped = [
        item
        for body in map(json.loads, proxy.upstream.received)
        for item in body["input"]
        if "role" in item and item.get("type") != "message"
    ]
    assert untyped == []


def test_responses_reasoning_items_go_back_as_sent(proxy: Proxy) -> None:
    """A reasoning item the proxy writes anew (in a compacted request or its summary request)
    is the item the client sent: llama-server writes a reasoning model's thinking as a
    ``content`` list of ``reasoning_text`` (empty ``summary``, a ``status``) and refuses the
    item without it; the proxy wrote only the id, the summary and the encrypted content."""
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0)
    items: list[dict[str, Any]] = []
    sent: list[dict[str, Any]] = []
    actions = []
    for turn in range(24):
        reasoning = {
            "id": f"rs_{turn}", "summary": [], "type": "reasoning",
            "content": [{"text": f"I should read f{turn}.txt.", "type": "reasoning_text"}],
            "encrypted_content": "", "status": "completed",
        }  # fmt: skip
        sent.append(reasoning)
        user, call, output = _read_turn(turn)
        items += [user, reasoning, call, output]
        raw = client.responses.with_raw_response.create(model="scripted", input=items)  # type: ignore[arg-type]
        actions.append(raw.headers["x-autocompact-action"])
        items.append({"type": "message", "role": "assistant", "content": raw.parse().output_text})
    assert "compacted" in actions
    assert proxy.upstream.summaries > 0
    received = [
        item
        for body in map(json.loads, proxy.upstream.received)
        for item in body["input"]
        if item.get("type") == "reasoning"
    ]
    assert [item for item in received if item not in sent] == []


def test_chat_messages_written_anew_carry_text_as_one_string() -> None:
    """A Chat Completions message the proxy writes anew (the trimmed request's note of what
    was left out, a summary with the facts kept from the history) whose content is text only
    goes as one string: llama_cpp.server refuses an assistant content that is a list of text
    parts (HTTP 500) and drops a user one unread; the summary request is written so too."""
    from autocompact.content import Message, TextPart
    from autocompact.providers.base import ChatRequest
    from autocompact.serve.openai_chat import OPENAI_CHAT

    two = (TextPart(text="[20 earlier messages were left out]"), TextPart(text="ok"))
    messages = [Message(role="user", parts=two), Message(role="model", parts=two)]
    written = OPENAI_CHAT.to_wire(messages, [])
    assert [m["content"] for m in written] == ["[20 earlier messages were left out]\n\nok"] * 2
    body = OPENAI_CHAT.side_query_body("m", ChatRequest(messages=tuple(messages)))
    assert all(isinstance(m["content"], str) for m in body["messages"])

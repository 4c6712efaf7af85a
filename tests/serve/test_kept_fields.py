"""Messages a compaction keeps go out as the client sent them, every field of them, with only
the tool outputs the clearing replaced changed (official SDKs, scripted upstream)."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from .conftest import Proxy

CLEARED = "[tool output cleared"


def _main(proxy: Proxy) -> list[dict[str, Any]]:
    """The request bodies the upstream received, summary requests left out."""
    bodies = [json.loads(raw) for raw in proxy.upstream.received]
    return [b for b in bodies if "structured state snapshot" not in json.dumps(b)[:4000]]


def _chat_turn(turn: int) -> list[dict[str, Any]]:
    """One agent step in Chat Completions: an assistant call carrying ``refusal`` and a field
    no SDK knows, its output (text parts), and the user's next message."""
    call = {"id": f"c{turn}", "type": "function",
            "function": {"name": "read", "arguments": json.dumps({"p": turn})}}  # fmt: skip
    assistant = {"role": "assistant", "content": f"calling {turn}", "tool_calls": [call],
                 "refusal": None, "x_unknown": {"k": turn}}  # fmt: skip
    output = [{"type": "text", "text": f"out{turn} " + "z " * 300}]
    tool = {"role": "tool", "tool_call_id": f"c{turn}", "x_tool": turn, "content": output}
    return [assistant, tool, {"role": "user", "content": f"next {turn}"}]


def _kept_as_sent(sent: list[Any], client: list[Any]) -> None:
    """Every message ``sent`` holds of the client's is the client's, field for field; a tool
    output the clearing replaced is the only change."""
    by_call = {m.get("tool_call_id") or m.get("call_id"): m for m in client}
    for message in sent:
        if message in client:
            continue
        if "state_snapshot" in json.dumps(message) or "summary" in json.dumps(message):
            continue  # written by the compaction
        own = by_call.get(message.get("tool_call_id") or message.get("call_id"))
        assert own is not None, message
        field = "output" if "call_id" in message else "content"
        assert CLEARED in json.dumps(message[field]), message
        assert {k: v for k, v in message.items() if k != field} == {
            k: v for k, v in own.items() if k != field
        }


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_chat_messages_keep_every_field_through_clearing(proxy: Proxy, stream: bool) -> None:
    """A user message with ``name`` and text parts, assistant messages with ``refusal`` and
    unknown fields and tool messages with unknown fields go out as sent in the compacted
    request and in every substituted one after it; only cleared outputs change. The clearing
    rewrote every message before the last cleared output from the content model: ``name``,
    ``refusal`` and ``x_unknown`` were dropped and the user's parts became a string."""
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0)
    task = {"role": "user", "content": [{"type": "text", "text": "K1 TASK"}], "name": "bob"}
    messages: list[dict[str, Any]] = [{"role": "system", "content": "sys"}, task]
    tools = [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}]
    actions = []
    for turn in range(30):
        messages += _chat_turn(turn)
        if stream:
            with client.chat.completions.with_streaming_response.create(
                model="scripted", messages=messages, tools=tools, stream=True
            ) as response:
                response.read()
                actions.append(response.headers["x-autocompact-action"])
        else:
            raw = client.chat.completions.with_raw_response.create(
                model="scripted", messages=messages, tools=tools
            )
            actions.append(raw.headers["x-autocompact-action"])
        if actions.count("substituted") >= 3:
            break
    assert "compacted" in actions, actions
    first = actions.index("compacted")
    sent = _main(proxy)
    assert len(sent) == len(actions)
    for body, action in zip(sent[first:], actions[first:], strict=True):
        assert action in ("compacted", "substituted"), actions
        assert body["messages"][1] == task or "state_snapshot" in json.dumps(body["messages"])
        _kept_as_sent(body["messages"], messages)
    assert CLEARED in json.dumps(sent[first]["messages"])  # old outputs were cleared


def _anthropic_turn(turn: int) -> list[dict[str, Any]]:
    """One agent step in Anthropic Messages: a call in a turn whose blocks carry fields no
    converter writes, its result (a text block list, ``is_error`` false, ``cache_control``),
    and the user's next message as text blocks."""
    call = {"type": "tool_use", "id": f"toolu_{turn}", "name": "read", "input": {"p": turn}}
    text = {"type": "text", "text": f"calling {turn}", "citations": None}
    result = {"type": "tool_result", "tool_use_id": f"toolu_{turn}", "is_error": False,
              "content": [{"type": "text", "text": f"out{turn} " + "z " * 300}],
              "cache_control": {"type": "ephemeral"}}  # fmt: skip
    return [
        {"role": "assistant", "content": [text, call]},
        {"role": "user", "content": [result, {"type": "text", "text": f"next {turn}"}]},
    ]


def test_anthropic_messages_keep_every_field_through_clearing(proxy: Proxy) -> None:
    """Anthropic messages a compaction keeps, cleared results included, go out with every
    block's fields as the client sent them; only the cleared ``content`` changes."""
    client = anthropic.Anthropic(base_url=proxy.url, api_key="sk-test", max_retries=0)
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "KA TASK"}]}
    ]
    tools = [{"name": "read", "input_schema": {"type": "object"}}]
    actions = []
    for turn in range(30):
        messages += _anthropic_turn(turn)
        raw = client.messages.with_raw_response.create(
            model="scripted",
            max_tokens=50,
            messages=messages,  # type: ignore[arg-type]
            tools=tools,  # type: ignore[arg-type]
        )
        actions.append(raw.headers["x-autocompact-action"])
        if actions.count("substituted") >= 2:
            break
    first = actions.index("compacted")
    sent = _main(proxy)
    assert CLEARED in json.dumps(sent[first]["messages"])
    results = {
        b["tool_use_id"]: (m, b)
        for m in messages
        for b in (m["content"] if isinstance(m["content"], list) else [])
        if b["type"] == "tool_result"
    }
    for body in sent[first:]:
        for message in body["messages"]:
            if message in messages or "state_snapshot" in json.dumps(message):
                continue
            changed = [b for b in message["content"] if b.get("type") == "tool_result"]
            own, block = results[changed[0]["tool_use_id"]]
            assert CLEARED in json.dumps(changed[0]["content"])
            assert {**changed[0], "content": None} == {**block, "content": None}
            assert [b for b in message["content"] if b not in changed] == [
                b for b in own["content"] if b["type"] != "tool_result"
            ]


def test_responses_items_keep_every_field_through_clearing(proxy: Proxy) -> None:
    """Responses items a compaction keeps go out as the client sent them (ids, statuses,
    annotations), a cleared ``function_call_output`` with only its ``output`` changed."""
    proxy.upstream.bytes_per_token = 4
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0)
    items: list[dict[str, Any]] = [{"role": "user", "content": "KR TASK"}]
    actions = []
    for turn in range(40):
        items += [
            {"type": "function_call", "id": f"fc_{turn}", "call_id": f"call_{turn}",
             "name": "read", "arguments": json.dumps({"p": turn}), "status": "completed"},
            {"type": "function_call_output", "call_id": f"call_{turn}", "status": "completed",
             "output": f"out{turn} " + "z " * 300},
            {"type": "message", "id": f"msg_{turn}", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": f"read {turn}", "annotations": []}]},
            {"role": "user", "content": f"next {turn}"},
        ]  # fmt: skip
        raw = client.responses.with_raw_response.create(model="scripted", input=items)  # type: ignore[arg-type]
        actions.append(raw.headers["x-autocompact-action"])
        if actions.count("substituted") >= 2:
            break
    first = actions.index("compacted")
    sent = [json.loads(raw) for raw in proxy.upstream.received]
    sent = [b for b in sent if "structured state snapshot" not in str(b.get("instructions"))]
    assert CLEARED in json.dumps(sent[first]["input"])
    for body in sent[first:]:
        _kept_as_sent(body["input"], items)

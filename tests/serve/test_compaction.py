"""Compaction through the proxy with the official SDKs over the scripted upstream.

The upstream counts tokens as bytes/3 (not the engine's estimate) and rejects requests over
its 8,000-token window by that count; the proxy learns the window from its /v1/models.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import anthropic
import httpx
import openai
import pytest

from .conftest import Proxy

TOOLS_OPENAI = [
    {
        "type": "function",
        "function": {
            "name": "read",
            "description": "read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]
TOOLS_ANTHROPIC = [
    {
        "name": "read",
        "description": "read a file",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
]


def filler(turn: int, size: int = 1500) -> str:
    """A tool output of about ``size`` characters, different each turn."""
    words = [f"line{turn}_{i} value={i * turn}" for i in range(size // 20)]
    return " ".join(words)[:size]


def openai_tool_pairs_ok(messages: list[dict[str, Any]]) -> bool:
    """Every tool message answers a call of the assistant message before its run of results."""
    open_calls: set[str] = set()
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            open_calls = {c["id"] for c in message.get("tool_calls") or []}
        elif role == "tool":
            if message["tool_call_id"] not in open_calls:
                return False
        else:
            open_calls = set()
    return True


def anthropic_tool_pairs_ok(messages: list[dict[str, Any]]) -> bool:
    """Every tool_result answers a tool_use of the assistant message just before it."""
    previous: set[str] = set()
    for message in messages:
        content = message["content"] if isinstance(message["content"], list) else []
        if message["role"] == "user":
            for block in content:
                if block.get("type") == "tool_result" and block["tool_use_id"] not in previous:
                    return False
            previous = set()
        else:
            previous = {b["id"] for b in content if b.get("type") == "tool_use"}
    return True


def _chat_bodies(proxy: Proxy) -> list[dict[str, Any]]:
    bodies = [json.loads(b) for b in proxy.upstream.received]
    return [b for b in bodies if "structured state snapshot" not in json.dumps(b)[:3000]]


def _records(proxy: Proxy) -> list[bytes]:
    store = proxy.app.store
    out = []
    for listing in store.list_sessions():
        for entry in store.entries(listing.session_id):
            if entry.turn_id and entry.turn_id.startswith("sub:"):
                text = entry.messages[0].parts[0].text  # type: ignore[union-attr]
                out.append(json.loads(text)["replacement"].encode())
    return out


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_openai_sdk_long_tool_session(proxy: Proxy, stream: bool) -> None:
    """A 30-turn tool session through the OpenAI SDK: compacted once at auto, never rejected,
    the stored replacement sent byte-identical on every later request, tool pairs intact."""
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Read the files one by one."},
    ]
    actions = []
    for turn in range(30):
        raw = client.chat.completions.with_raw_response.create(
            model="scripted", messages=messages, tools=TOOLS_OPENAI, stream=stream
        )
        actions.append(raw.headers["x-autocompact-action"])
        if stream:
            calls: dict[int, dict[str, Any]] = {}
            text = ""
            for chunk in raw.parse():
                for choice in chunk.choices:
                    text += choice.delta.content or ""
                    for call in choice.delta.tool_calls or []:
                        calls[call.index] = {
                            "id": call.id,
                            "type": "function",
                            "function": {
                                "name": call.function.name,
                                "arguments": call.function.arguments,
                            },
                        }
            reply: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                reply["tool_calls"] = list(calls.values())
        else:
            reply = raw.parse().choices[0].message.model_dump(exclude_none=True)
        messages.append(reply)
        if reply.get("tool_calls"):
            for call in reply["tool_calls"]:
                messages.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": filler(turn)}
                )
        else:
            messages.append({"role": "user", "content": f"Go on with step {turn}."})
    assert proxy.upstream.rejected == 0
    assert "compacted" in actions
    assert actions.index("compacted") > 3  # nothing done while far below auto
    records = _records(proxy)
    assert len(records) >= proxy.upstream.summaries  # clearing alone also makes a record
    bodies = [json.dumps(b["messages"], separators=(",", ":"), ensure_ascii=False).encode()
              for b in _chat_bodies(proxy)]  # fmt: skip
    carrying = [sum(r[1:-1] in b for b in bodies) for r in records]
    assert max(carrying) >= 2  # the compacting request and later ones, byte for byte
    assert all(openai_tool_pairs_ok(b["messages"]) for b in _chat_bodies(proxy))


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_anthropic_sdk_long_tool_session(proxy: Proxy, stream: bool) -> None:
    """The same with the Anthropic SDK (streaming and not): compacted, never rejected, replayed
    byte-identical, tool_use/tool_result pairs intact."""
    client = anthropic.Anthropic(base_url=proxy.url, api_key="sk-ant-test", max_retries=0)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read the files one by one."}]
    actions = []
    for turn in range(30):
        kwargs: dict[str, Any] = {
            "model": "scripted",
            "max_tokens": 100,
            "system": "You are a coding agent.",
            "messages": messages,
            "tools": TOOLS_ANTHROPIC,
        }
        if stream:
            with client.messages.stream(**kwargs) as events:
                final = events.get_final_message()
                actions.append(events.response.headers["x-autocompact-action"])
        else:
            raw = client.messages.with_raw_response.create(**kwargs)
            actions.append(raw.headers["x-autocompact-action"])
            final = raw.parse()
        content = [block.model_dump(exclude_none=True) for block in final.content]
        messages.append({"role": "assistant", "content": content})
        uses = [b for b in content if b["type"] == "tool_use"]
        if uses:
            results = [
                {"type": "tool_result", "tool_use_id": u["id"], "content": filler(turn)}
                for u in uses
            ]
            messages.append({"role": "user", "content": results})
        else:
            messages.append({"role": "user", "content": f"Go on with step {turn}."})
    assert proxy.upstream.rejected == 0
    assert proxy.upstream.summaries >= 1
    assert "compacted" in actions
    assert "substituted" in actions[actions.index("compacted") :]
    bodies = _chat_bodies(proxy)
    assert all(anthropic_tool_pairs_ok(b["messages"]) for b in bodies)
    records = _records(proxy)
    dumped = [json.dumps(b["messages"], separators=(",", ":"), ensure_ascii=False).encode()
              for b in bodies]  # fmt: skip
    assert max(sum(r[1:-1] in d for d in dumped) for r in records) >= 2


def test_rejected_as_too_long_is_compacted(proxy: Proxy) -> None:
    """A request the upstream rejects as too long (the engine's estimate said below auto) is
    compacted reactively and sent again; the client sees one 200."""
    from dataclasses import replace

    proxy.app.config = replace(proxy.app.config, context_window=100_000)
    messages: list[dict[str, Any]] = []
    for turn in range(16):
        messages.append({"role": "user", "content": f"step {turn}: " + filler(turn)})
        messages.append({"role": "assistant", "content": f"done {turn}"})
    messages.append({"role": "user", "content": "and now?"})
    reply = httpx.post(
        f"{proxy.url}/v1/chat/completions",
        json={"model": "scripted", "messages": messages},
        timeout=30,
    )
    assert reply.status_code == 200
    assert proxy.upstream.rejected == 1
    assert proxy.upstream.summaries == int(reply.headers["x-autocompact-side-queries"])
    assert reply.headers["x-autocompact-action"] == "compacted"


def test_restart_finds_the_record_by_content(proxy: Proxy) -> None:
    """With no conversation signal, a fresh proxy on the same store finds the stored record by
    the prefix hash chain and substitutes it."""
    from autocompact.serve import ServeApp
    from autocompact.serve.threaded import serve_in_thread

    body = _long_anthropic(18)
    first = httpx.post(f"{proxy.url}/v1/messages", json=body, timeout=30)
    assert first.headers["x-autocompact-action"] == "compacted"
    body["messages"] += [
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
        {"role": "user", "content": "one more"},
    ]
    again = ServeApp(proxy.app.config)
    with serve_in_thread(again.asgi) as url:
        second = httpx.post(f"{url}/v1/messages", json=body, timeout=30)
    assert second.headers["x-autocompact-action"] == "substituted"
    assert proxy.upstream.summaries == int(first.headers["x-autocompact-side-queries"])
    (record,) = _records(proxy)
    assert record[1:-1] in proxy.upstream.received[-1]


def _long_anthropic(turns: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for turn in range(turns):
        messages.append({"role": "user", "content": f"step {turn}: " + filler(turn)})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"d{turn}"}]})
    messages.append({"role": "user", "content": "and now?"})
    return {"model": "scripted", "max_tokens": 50, "messages": messages}


def test_client_compaction_block_forwarded_untouched(proxy: Proxy) -> None:
    """A request carrying an Anthropic compaction block is forwarded byte-identical, even when
    oversized, and the proxy makes no side query."""
    body = _long_anthropic(18)
    body["messages"][1]["content"].insert(0, {"type": "compaction", "content": "earlier"})
    raw = json.dumps(body).encode()
    reply = httpx.post(f"{proxy.url}/v1/messages", content=raw, timeout=30)
    assert proxy.upstream.received[0] == raw
    assert reply.headers["x-autocompact-action"] == "client-compaction"
    assert proxy.upstream.summaries == 0


def test_client_compaction_block_found_after_a_fast_reading(proxy: Proxy) -> None:
    """The proxy searches the messages for a compaction block only when the fast reading did
    not read them all: a conversation read once, then resent with a compaction block added far
    back, or with one in its new turn, is the client's compaction each time."""
    body = _long_anthropic(3)
    headers = {"x-autocompact-conversation": "blocks"}
    first = httpx.post(f"{proxy.url}/v1/messages", json=body, headers=headers, timeout=30)
    assert first.headers["x-autocompact-action"] == "forward"
    block = {"type": "compaction", "content": "earlier"}
    back = json.loads(json.dumps(body))
    back["messages"][1]["content"].insert(0, block)
    new_turn = json.loads(json.dumps(body))
    new_turn["messages"][-1] = {"role": "user", "content": [{"type": "text", "text": "go"}]}
    new_turn["messages"].insert(-1, {"role": "assistant", "content": [block]})
    for changed in (back, new_turn, body):
        raw = json.dumps(changed).encode()
        reply = httpx.post(f"{proxy.url}/v1/messages", content=raw, headers=headers, timeout=30)
        assert proxy.upstream.received[-1] == raw
        expected = "forward" if changed is body else "client-compaction"
        assert reply.headers["x-autocompact-action"] == expected
    assert proxy.upstream.summaries == 0


def test_single_flight(proxy: Proxy) -> None:
    """Two requests of one conversation reaching auto at once make one side query; both are
    sent compacted with the same bytes."""
    proxy.upstream.summary_delay = 0.5
    body = _long_anthropic(18)
    headers = {"x-autocompact-conversation": "one"}
    replies: list[httpx.Response] = []

    def send() -> None:
        replies.append(httpx.post(f"{proxy.url}/v1/messages", json=body, headers=headers,
                                  timeout=30))  # fmt: skip

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.status_code for r in replies] == [200, 200]
    side = [int(r.headers.get("x-autocompact-side-queries", 0)) for r in replies]
    assert proxy.upstream.summaries == max(side) > 0
    assert min(side) == 0
    assert sorted(r.headers["x-autocompact-action"] for r in replies) == [
        "compacted",
        "substituted",
    ]
    sent = [b for b in proxy.upstream.received if b"structured state snapshot" not in b]
    assert sent[-1] == sent[-2]


def test_failed_request_stores_nothing(proxy: Proxy) -> None:
    """When the upstream fails the compacted request, the client gets its error and no record
    is stored; the next request compacts again and stores it."""
    body = _long_anthropic(18)
    proxy.upstream.fail_status = 500
    reply = httpx.post(f"{proxy.url}/v1/messages", json=body, timeout=30)
    assert reply.status_code == 500
    assert proxy.upstream.summaries > 0
    assert _records(proxy) == []
    proxy.upstream.fail_status = None
    reply = httpx.post(f"{proxy.url}/v1/messages", json=body, timeout=30)
    assert reply.status_code == 200
    assert reply.headers["x-autocompact-action"] == "compacted"
    assert len(_records(proxy)) == 1


def test_window_learned_from_models(tmp_path: Any, upstream: Any) -> None:
    """Without --context-window the window comes from the upstream's /v1/models max_model_len."""
    import anyio

    from autocompact.serve import ServeApp, ServeConfig

    script, url = upstream
    config = ServeConfig(upstreams={"openai": url + "/v1"}, store=f"sqlite:///{tmp_path}/s.db")
    app = ServeApp(config)
    assert anyio.run(app.windows.window, "openai", "scripted") == script.window
    assert anyio.run(app.windows.window, "openai", "gpt-4o") != script.window  # the table's


def test_credentials_never_stored_or_logged(proxy: Proxy, caplog: pytest.LogCaptureFixture) -> None:
    """After a compaction the client's key is in neither the store file nor the log; the log
    has one line per request naming the action."""
    import logging

    caplog.set_level(logging.INFO, logger="autocompact")
    key = "sk-ant-very-secret-key-123"
    body = _long_anthropic(18)
    reply = httpx.post(
        f"{proxy.url}/v1/messages", json=body, headers={"x-api-key": key}, timeout=30
    )
    assert reply.headers["x-autocompact-action"] == "compacted"
    assert proxy.upstream.headers[0]["x-api-key"] == key  # the side query used it too
    # The log line follows the response's end (with the learning from its usage): waited for.
    deadline = time.monotonic() + 10
    while not (lines := [r.getMessage() for r in caplog.records if "action=" in r.getMessage()]):
        assert time.monotonic() < deadline, "no log line"
        time.sleep(0.01)
    path = proxy.app.config.store.removeprefix("sqlite:///")
    proxy.app.store.close()
    from pathlib import Path

    for file in Path(path).parent.iterdir():
        assert key.encode() not in file.read_bytes()
    assert key not in caplog.text
    assert len(lines) == 1
    assert "action=compacted" in lines[0]


def test_shared_first_message_does_not_share_a_summary(proxy: Proxy) -> None:
    """Two conversations with the same first message (project instructions) and no other
    signal: the second is not given the first one's replacement."""
    first = _long_anthropic(18)
    httpx.post(f"{proxy.url}/v1/messages", json=first, timeout=30)
    second = _long_anthropic(18)
    second["messages"][2]["content"] = "a different second step " * 20
    reply = httpx.post(f"{proxy.url}/v1/messages", json=second, timeout=30)
    assert reply.headers["x-autocompact-action"] == "compacted"
    assert len(_records(proxy)) == 2


def test_openai_sdk_responses_stateless_session(proxy: Proxy) -> None:
    """A 30-turn stateless Responses session (full ``input``, reasoning items with encrypted
    content, function calls) through the OpenAI SDK: compacted, never rejected, replayed
    byte-identical, and every encrypted reasoning item sent is one the upstream produced,
    unaltered."""
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0)
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    tools = [{"type": "function", "name": "read", "description": "read", "parameters": schema}]
    items: list[dict[str, Any]] = [
        {"role": "developer", "content": "You are a coding agent."},
        {"role": "user", "content": "Read the files one by one."},
    ]
    produced: list[dict[str, Any]] = []
    actions = []
    for turn in range(30):
        raw = client.responses.with_raw_response.create(
            model="scripted",
            input=items,
            tools=tools,
            store=False,  # type: ignore[arg-type]
        )
        actions.append(raw.headers["x-autocompact-action"])
        output = [o.model_dump(exclude_none=True) for o in raw.parse().output]
        produced.extend(o for o in output if o["type"] == "reasoning")
        items.extend(output)
        calls = [o for o in output if o["type"] == "function_call"]
        for call in calls:
            items.append(
                {"type": "function_call_output", "call_id": call["call_id"], "output": filler(turn)}
            )
        if not calls:
            items.append({"role": "user", "content": f"Go on with step {turn}."})
    assert proxy.upstream.rejected == 0
    assert "compacted" in actions
    assert "substituted" in actions[actions.index("compacted") :]
    sent = [json.loads(b) for b in proxy.upstream.received]
    sent = [b for b in sent if "structured state snapshot" not in str(b.get("instructions"))]
    encrypted = {(r["id"], r["encrypted_content"]) for r in produced}
    for body in sent:
        for item in body["input"]:
            if item.get("type") == "reasoning":
                assert (item["id"], item["encrypted_content"]) in encrypted
    records = _records(proxy)
    dumped = [json.dumps(b["input"], separators=(",", ":"), ensure_ascii=False).encode()
              for b in sent]  # fmt: skip
    assert max(sum(r[1:-1] in d for d in dumped) for r in records) >= 2


def test_responses_previous_response_id_untouched(proxy: Proxy) -> None:
    """A Responses request with previous_response_id is forwarded byte-identical even when
    large, and is never compacted."""
    big = [{"role": "user", "content": filler(i)} for i in range(30)]
    raw = json.dumps({"model": "m", "previous_response_id": "resp_0", "input": big}).encode()
    reply = httpx.post(f"{proxy.url}/v1/responses", content=raw, timeout=30)
    assert proxy.upstream.received[-1] == raw
    assert reply.headers["x-autocompact-action"] == "passthrough"


def test_reported_usage_calibrates_the_estimate(proxy: Proxy, tmp_path: Any) -> None:
    """The upstream's reported prompt size teaches the conversation's calibration: a request
    the cold estimate puts below auto is compacted once the upstream's count (bytes/3, higher)
    was learned. Control: the same request on a fresh proxy is forwarded."""
    from autocompact.serve import ServeApp, ServeConfig
    from autocompact.serve.threaded import serve_in_thread

    headers = {"x-autocompact-conversation": "calibrated"}
    first = httpx.post(f"{proxy.url}/v1/messages", json=_long_anthropic(12), headers=headers)
    assert first.headers["x-autocompact-action"] == "forward"
    body = _long_anthropic(13)
    second = httpx.post(f"{proxy.url}/v1/messages", json=body, headers=headers, timeout=30)
    assert second.headers["x-autocompact-action"] == "compacted"
    assert proxy.upstream.rejected == 0
    config = ServeConfig(
        upstreams=proxy.app.config.upstreams,
        store=f"sqlite:///{tmp_path}/fresh.db",
        context_window=8000,
    )
    fresh = ServeApp(config)
    with serve_in_thread(fresh.asgi) as url:
        control = httpx.post(f"{url}/v1/messages", json=body, headers=headers, timeout=30)
    fresh.store.close()
    assert control.headers["x-autocompact-action"] == "forward"
    assert control.status_code == 200


PREFILL = {"role": "assistant", "content": [{"type": "text", "text": "Here is the plan:"}]}


def test_an_anthropic_prefill_is_compacted_before_and_sent_last(proxy: Proxy) -> None:
    """A request that ends with an assistant message (a prefill the model continues) is
    compacted like one ending with the user's message: the prefill and the user message before
    it go out unchanged, last. It was forwarded as it came (the engine read the prefill as the
    pending message and refused it), over the window: the upstream answered 400."""
    from .scripted import count_tokens

    body = _long_anthropic(18)
    body["messages"].append(PREFILL)
    client = anthropic.Anthropic(base_url=proxy.url, api_key="sk-ant-test", max_retries=0)
    raw = client.messages.with_raw_response.create(**body)
    assert raw.headers["x-autocompact-action"] == "compacted"
    assert raw.parse().content[0].type == "text"
    sent = json.loads(proxy.upstream.received[-1])
    assert sent["messages"][-2:] == [{"role": "user", "content": "and now?"}, PREFILL]
    assert len(sent["messages"]) < len(body["messages"])
    assert count_tokens(sent) <= proxy.upstream.window
    assert proxy.upstream.rejected == 0
    # The next turn (the prefill continued, then the user) finds the record.
    body["messages"][-1] = {"role": "assistant", "content": "Here is the plan: step one."}
    body["messages"].append({"role": "user", "content": "go on"})
    again = client.messages.with_raw_response.create(**body)
    assert again.headers["x-autocompact-action"] == "substituted"
    assert json.loads(proxy.upstream.received[-1])["messages"][-1]["content"] == "go on"


def test_a_prefill_is_counted(proxy: Proxy) -> None:
    """The prefill's size counts toward the tiers: a conversation below *auto* without it is
    compacted when a long prefill takes it past the window."""
    body = _long_anthropic(11)
    short = httpx.post(f"{proxy.url}/v1/messages", json=body, timeout=30)
    assert short.headers["x-autocompact-action"] == "forward"
    body["messages"].append({"role": "assistant", "content": "Draft: " + filler(99, 9000)})
    long = httpx.post(f"{proxy.url}/v1/messages", json=body, timeout=30)
    assert long.headers["x-autocompact-action"] in ("compacted", "trimmed")
    assert proxy.upstream.rejected == 0


def test_a_failed_compaction_is_logged_with_its_reason(
    proxy: Proxy, caplog: pytest.LogCaptureFixture
) -> None:
    """A compaction whose summary fails (an empty reply) is logged as a warning naming the
    conversation and why it failed; the request's own line said only how it went out."""
    import logging

    proxy.upstream.summary_reply = ""
    caplog.set_level(logging.INFO, logger="autocompact.serve")
    reply = httpx.post(f"{proxy.url}/v1/messages", json=_long_anthropic(22), timeout=30)
    assert reply.headers["x-autocompact-compacted"] == "false"
    assert proxy.upstream.summaries > 0
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        line.startswith("conversation=serve:anthropic_messages:")
        and "compaction failed" in line
        and "the summary was empty" in line
        for line in lines
    ), lines


def test_context_window_is_used_for_a_model_the_table_knows(proxy: Proxy) -> None:
    """--context-window is the window of every model, one the model table knows (200K for
    claude-sonnet-4-5) included: a request over the given 8,000 is compacted (the docs and
    the option's help said it applied only where the table and the server cannot say)."""
    body = {**_long_anthropic(22), "model": "claude-sonnet-4-5"}
    reply = httpx.post(f"{proxy.url}/v1/messages", json=body, timeout=30)
    assert reply.headers["x-autocompact-action"] == "compacted"
    assert proxy.upstream.rejected == 0


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_window_the_upstream_states_when_it_rejects_is_learned(
    proxy: Proxy, protocol: str
) -> None:
    """The proxy sized on a window larger than the upstream's (here --context-window 32,000 over
    an 8,000 server): the window the upstream states in its "too long" error is believed from
    then on. The rejected request and every later one go out planned on it (compacted, or
    trimmed under it), so the upstream rejects once; the proxy kept sizing on the larger window,
    and the upstream rejected the conversation again each time it outgrew the real one."""
    from dataclasses import replace

    proxy.app.config = replace(proxy.app.config, context_window=32_000)
    path = "/v1/chat/completions" if protocol == "openai" else "/v1/messages"
    actions = []
    for turns in range(14, 40, 2):
        body = _long_anthropic(turns)  # (plain string contents: both protocols read them)
        reply = httpx.post(f"{proxy.url}{path}", json=body, timeout=30)
        assert reply.status_code == 200, reply.text
        actions.append(reply.headers["x-autocompact-action"])
    assert proxy.upstream.rejected == 1, actions
    assert proxy.app.windows.stated("openai" if protocol == "openai" else "anthropic", "scripted")


def test_a_client_that_hangs_up_mid_stream_keeps_the_compaction(proxy: Proxy) -> None:
    """A compacted request whose stream the client leaves mid-way (an agent's user interrupting
    the reply), after the upstream accepted it: the compaction is stored, so the request sent
    again is substituted, with no second summary. It was dropped, and the conversation was
    summarized anew (another side query, another prefix for the prompt cache)."""
    proxy.upstream.stream_pause = 3.0
    body = {**_long_anthropic(22), "stream": True}
    with (
        httpx.Client(timeout=30) as client,
        client.stream("POST", f"{proxy.url}/v1/messages", json=body) as reply,
    ):
        assert reply.headers["x-autocompact-action"] == "compacted"
        for line in reply.iter_lines():
            if line.startswith("event: content_block_delta"):
                break  # hang up
    summaries = proxy.upstream.summaries
    deadline = time.monotonic() + 10
    while not _records(proxy) and time.monotonic() < deadline:
        time.sleep(0.05)
    proxy.upstream.stream_pause = 0.0
    again = httpx.post(f"{proxy.url}/v1/messages", json=body, timeout=30)
    assert again.headers["x-autocompact-action"] == "substituted"
    assert proxy.upstream.summaries == summaries

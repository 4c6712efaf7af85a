"""Requests the guarantee or a compaction must bring under the window, whatever shape their
last user turn has (official Anthropic SDK, scripted upstream)."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from typing import Any

import anthropic
import pytest

from .conftest import Proxy
from .scripted import count_tokens
from .test_compaction import filler


def _tool_loop(task: str, ending: str) -> dict[str, Any]:
    """An Anthropic request: a task, five read calls with results of about 2,000 characters
    each, then "now answer": a user message of its own after the last results
    (``consecutive``: two user messages end the history), or a text block in the results'
    message (``merged``)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"{task}: read five files"}]
    for turn in range(5):
        call = {"type": "tool_use", "id": f"toolu_{turn}", "name": "read", "input": {"p": turn}}
        messages.append({"role": "assistant", "content": [call]})
        result = {"type": "tool_result", "tool_use_id": f"toolu_{turn}",
                  "content": f"out{turn} " + "word " * 400}  # fmt: skip
        messages.append({"role": "user", "content": [result]})
    if ending == "merged":
        messages[-1]["content"].append({"type": "text", "text": "now answer"})
    else:
        messages.append({"role": "user", "content": "now answer"})
    tools = [{"name": "read", "input_schema": {"type": "object"}}]
    return {"model": "claude-x", "max_tokens": 100, "messages": messages, "tools": tools}


def _main(proxy: Proxy) -> list[dict[str, Any]]:
    """The request bodies the upstream received, summary requests left out."""
    bodies = [json.loads(raw) for raw in proxy.upstream.received]
    return [b for b in bodies if "structured state snapshot" not in str(b.get("system"))]


def _send(client: anthropic.Anthropic, body: dict[str, Any], stream: bool) -> str:
    """Send ``body``; the proxy's action (the reply must be the upstream's answer)."""
    if stream:
        with client.messages.stream(**body) as events:
            assert events.get_final_message().content[0].type == "text"
            return events.response.headers["x-autocompact-action"]
    raw = client.messages.with_raw_response.create(**body)
    assert raw.parse().content[0].type == "text"
    return raw.headers["x-autocompact-action"]


@pytest.mark.parametrize("ending", ["consecutive", "merged"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_tool_results_then_a_user_message_fit_a_learned_window(
    proxy: Proxy, ending: str, stream: bool
) -> None:
    """A tool loop whose last results are followed by a user message of its own, rejected as
    too long by an upstream stating a 1,500-token window, goes out again trimmed under it (as
    the same text inside the results' message does), and the next such request is sent under
    the learned window at once. The two user messages kept the previous call and its results
    as "the latest exchange": nothing under the window could be made, the client got the 400,
    and the next request went out over the window."""
    proxy.app.config = replace(proxy.app.config, context_window=100_000)
    proxy.upstream.window = 1_500
    client = anthropic.Anthropic(base_url=proxy.url, api_key="sk-test", max_retries=0)
    assert _send(client, _tool_loop("A3", ending), stream) in ("trimmed", "compacted")
    assert proxy.upstream.rejected == 1
    assert _send(client, _tool_loop("A5", ending), stream) in ("trimmed", "compacted")
    assert proxy.upstream.rejected == 1
    sent = _main(proxy)
    assert len(sent) == 3
    for body in sent[1:]:
        assert count_tokens(body) <= proxy.upstream.window
        texts = json.dumps(body["messages"])
        assert "read five files" in texts  # the task
        assert "now answer" in texts
        assert "toolu_4" in texts  # the newest call and its result


def test_a_request_the_guarantee_cannot_fit_is_compacted(
    proxy: Proxy, caplog: pytest.LogCaptureFixture
) -> None:
    """A request over the window even with every earlier turn left out (the newest exchange
    alone is larger than it) is compacted when a summary brings it under, not sent over the
    window. The proxy forwarded it as sent without trying ("cannot measure"), the upstream
    rejected it, and the retry gave up the same way."""
    caplog.set_level(logging.INFO, logger="autocompact.serve")
    proxy.app.config = replace(proxy.app.config, context_window=4_000)
    proxy.upstream.window = 4_000
    client = anthropic.Anthropic(base_url=proxy.url, api_key="sk-test", max_retries=0)
    calls = [
        {"type": "tool_use", "id": f"toolu_{n}", "name": "read", "input": {"p": n}} for n in (0, 1)
    ]
    results = [
        {"type": "tool_result", "tool_use_id": "toolu_0", "content": "small"},
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": filler(1, 20_000)},
    ]
    messages = [
        {"role": "user", "content": "TASK: read the log"},
        {"role": "assistant", "content": [calls[0]]},
        {"role": "user", "content": [results[0]]},
        {"role": "assistant", "content": [calls[1]]},
        {"role": "user", "content": [results[1]]},
        {"role": "assistant", "content": [{"type": "text", "text": "read it"}]},
        {"role": "user", "content": "now answer"},
    ]
    body = {"model": "claude-x", "max_tokens": 50, "messages": messages}
    assert _send(client, body, stream=False) == "compacted"
    assert proxy.upstream.rejected == 0
    (sent,) = _main(proxy)
    assert count_tokens(sent) <= proxy.upstream.window
    assert sent["messages"][-1] == messages[-1]
    assert not any("cannot measure" in r.getMessage() for r in caplog.records)

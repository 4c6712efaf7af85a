"""What the real agents run through the proxy showed (benchmarks/real_agents.py), kept as tests
with the official SDKs over the scripted upstream."""

from __future__ import annotations

import logging
from typing import Any

import anthropic
import httpx
import pytest

from .conftest import Proxy
from .test_compaction import filler


def _claude_code_like(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for turn in range(turns):
        messages.append({"role": "user", "content": f"step {turn}: " + filler(turn)})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"d{turn}"}]})
    messages.append({"role": "user", "content": "and now?"})
    return messages


def test_claude_code_beta_query_kept_through_compaction(proxy: Proxy) -> None:
    """Claude Code (the TypeScript SDK's beta client) posts to /v1/messages?beta=true with its
    session header: the query reaches the upstream on the compacted request and on the
    substituted one after it."""
    client = anthropic.Anthropic(
        base_url=proxy.url,
        api_key="sk-ant-test",
        max_retries=0,
        default_headers={"X-Claude-Code-Session-Id": "2b1f0c9e-session"},
    )
    messages = _claude_code_like(18)
    actions = []
    for extra in range(2):
        raw = client.beta.messages.with_raw_response.create(
            model="scripted", max_tokens=50, messages=messages, extra_query={"beta": "true"}
        )
        actions.append(raw.headers["x-autocompact-action"])
        reply = raw.parse()
        messages = [
            *messages,
            {"role": "assistant", "content": [{"type": "text", "text": reply.content[0].text}]},  # type: ignore[union-attr]
            {"role": "user", "content": f"more {extra}"},
        ]
    assert actions == ["compacted", "substituted"]
    agent = [q for q, p in zip(proxy.upstream.queries, proxy.upstream.paths, strict=True)
             if p == "/v1/messages"]  # fmt: skip
    assert agent
    assert all(q == "beta=true" for q in agent)
    assert proxy.upstream.rejected == 0


def test_unknown_endpoint_is_logged(proxy: Proxy, caplog: pytest.LogCaptureFixture) -> None:
    """A request to an endpoint the proxy lacks gets its log line (method, path, 404), so an
    agent calling one is seen in the log."""
    with caplog.at_level(logging.INFO, logger="autocompact.serve"):
        reply = httpx.post(f"{proxy.url}/v1/embeddings", json={"input": "x"})
    assert reply.status_code == 404
    lines = [r.getMessage() for r in caplog.records if r.name == "autocompact.serve"]
    assert "POST /v1/embeddings unknown endpoint status=404" in lines


def test_head_root_answers(proxy: Proxy) -> None:
    """Claude Code sends HEAD / to its base URL first: the proxy answers 200, not 404, and
    nothing reaches the upstream."""
    assert httpx.head(f"{proxy.url}/").status_code == 200
    assert httpx.get(f"{proxy.url}/").json()["service"] == "autocompact serve"
    assert proxy.upstream.received == []


def test_claude_code_sub_agent_id_names_its_own_conversation() -> None:
    """Claude Code 2.1 sends X-Claude-Code-Agent-Id on a sub-agent's requests: two sub-agents
    of one session given the same task are two conversations; the same agent id is one."""
    from autocompact.serve.identity import identify

    first = [{"role": "user", "content": "SUBTASK: read the files"}]
    session = {"x-claude-code-session-id": "4a9cedf4-session"}
    one = identify({**session, "x-claude-code-agent-id": "aa25"}, {}, first, "p")
    two = identify({**session, "x-claude-code-agent-id": "bb37"}, {}, first, "p")
    again = identify({**session, "x-claude-code-agent-id": "aa25"}, {}, first, "p")
    parent = identify(session, {}, first, "p")
    assert one.signal == two.signal == "claude-code"
    assert len({one.session_id, two.session_id, parent.session_id}) == 3
    assert one == again
    assert "aa25" not in one.session_id

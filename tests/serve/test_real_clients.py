"""What the real agents run through the proxy showed (benchmarks/real_agents.py), kept as tests
with the official SDKs over the scripted upstream."""

from __future__ import annotations

import json
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


def _bench(name: str) -> Any:
    import importlib.util
    import sys
    from pathlib import Path

    bench = Path(__file__).resolve().parents[2] / "benchmarks"
    sys.path.insert(0, str(bench))
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{name}", bench / f"{name}.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(bench))


def test_real_agents_replay_verdict_can_fail() -> None:
    """benchmarks/real_agents.py: a substituted request whose body lacks the stored bytes, or
    one carrying the summary without them, fails the run; the same bytes pass."""
    bench = _bench("real_agents")
    mark = bench.SNAPSHOT_MARK.encode()
    stored = b'{"role":"user","content":"' + mark + b'"}'

    def verdict(actions: list[str], bodies: list[bytes]) -> Any:
        outcome = bench.Outcome(client="x", ran=True)
        outcome.proxy_lines = [{"path": "/v1/messages", "action": a} for a in actions]
        bench.judge_replays(outcome, bodies, [stored])
        return outcome

    good = verdict(["compacted", "substituted"], [b"[" + stored + b"]", b"[" + stored + b",{}]"])
    assert (good.replay_ok, good.replays, good.failed()) == (True, 1, False)
    altered = stored.replace(b'","', b'", "')
    assert verdict(["compacted", "substituted"], [stored, altered]).failed()
    assert verdict(["compacted", "forward"], [stored, altered]).failed()
    assert verdict(["compacted"], [stored, stored]).failed()  # lines and requests do not match


def test_real_agents_server_rejects_over_window_and_altered_thinking() -> None:
    """The benchmark's scripted server rejects a request over its window and a thinking block
    it did not sign as written (the oracles the run relies on can fail)."""
    from autocompact.serve.threaded import serve_in_thread

    server = _bench("_agents_upstream").AgentUpstream(window=2000, turns=2)
    tools = [{"name": "Bash", "input_schema": {"type": "object"}}]
    with serve_in_thread(server.app()) as url:
        client = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0)
        ask: dict[str, Any] = {"model": "m", "max_tokens": 10, "tools": tools,
                               "thinking": {"type": "enabled", "budget_tokens": 5}}  # fmt: skip
        reply = client.messages.create(messages=[{"role": "user", "content": "go"}], **ask)
        thinking = reply.content[0].model_dump()
        assert thinking["type"] == "thinking"
        turn = [block.model_dump(exclude_none=True) for block in reply.content]
        result = {"type": "tool_result", "tool_use_id": turn[-1]["id"], "content": "x"}
        history = [{"role": "user", "content": "go"}, {"role": "assistant", "content": turn},
                   {"role": "user", "content": [result]}]  # fmt: skip
        client.messages.create(messages=history, **ask)  # signed as written: accepted
        turn[0] = {**turn[0], "thinking": turn[0]["thinking"] + " (edited)"}
        with pytest.raises(anthropic.BadRequestError, match="signature"):
            client.messages.create(messages=history, **ask)
        with pytest.raises(anthropic.BadRequestError, match="too long"):
            client.messages.create(messages=[{"role": "user", "content": "x" * 9000}], **ask)
    assert (server.forged, server.rejected) == (1, 1)


def test_real_agents_reports_missing_clients_as_skipped(tmp_path: Any) -> None:
    """benchmarks/real_agents.py with no client installed reports each as skipped and exits
    0 (nothing ran, nothing failed)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    missing = str(tmp_path / "none")
    done = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "real_agents.py"), "--bin", missing,
         "--aider", missing, "--keep", str(tmp_path / "logs")],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(root / "src")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("skipped:") == 5  # Claude Code; Codex and aider twice each


def test_codex_resumed_after_its_own_compaction_is_compacted(proxy: Proxy) -> None:
    """Codex resumed after its own compaction sends a developer message after user messages;
    the proxy used to forward such a request unread (passthrough, never compacted). It is now
    compacted under the window, the developer text kept."""
    text = {"type": "input_text", "text": "<permissions>none</permissions>"}
    developer = {"type": "message", "role": "developer", "content": [text]}  # after user ones
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "developer",
         "content": [{"type": "input_text", "text": "You are Codex."}]},
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "Another language model started ..."}]},
        developer,
    ]  # fmt: skip
    for turn in range(14):
        items.append({"type": "function_call", "call_id": f"c{turn}", "name": "read",
                      "arguments": "{}"})  # fmt: skip
        items.append({"type": "function_call_output", "call_id": f"c{turn}",
                      "output": filler(turn)})  # fmt: skip
    items.append({"type": "message", "role": "user",
                  "content": [{"type": "input_text", "text": "go on"}]})  # fmt: skip
    reply = httpx.post(
        f"{proxy.url}/v1/responses",
        json={"model": "scripted", "input": items, "store": False},
        headers={"session-id": "codex-session"},
        timeout=30,
    )
    assert reply.status_code == 200
    assert reply.headers["x-autocompact-action"] == "compacted"
    assert proxy.upstream.rejected == 0
    sent = json.loads(proxy.upstream.received[-1])["input"]
    assert len(json.dumps(sent)) < len(json.dumps(items))
    assert sent[-1] == items[-1]
    # Here only tool outputs were cleared: the developer message is kept as the client sent it.
    assert developer in sent

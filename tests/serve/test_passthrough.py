"""The proxy below auto: bytes forwarded unchanged both ways, headers, endpoints, errors."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from autocompact.serve import ServeApp, ServeConfig
from autocompact.serve.threaded import serve_in_thread

from .conftest import Proxy
from .scripted import ScriptedUpstream


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _chat_body(stream: bool = False) -> bytes:
    body = {
        "model": "scripted",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hi  there", "x_unknown": [1, 2.50, None]},
        ],
        "stream": stream,
        "x_client_field": {"keep": "me"},
    }
    # Odd spacing: re-serializing would change the bytes.
    return json.dumps(body, indent=1).encode()


def test_chat_body_and_response_bytes_unchanged(proxy: Proxy) -> None:
    """A small chat request reaches the upstream byte-identical; its response comes back so."""
    raw = _chat_body()
    direct = httpx.post(f"{proxy.upstream_url}/v1/chat/completions", content=raw)
    via = httpx.post(f"{proxy.url}/v1/chat/completions", content=raw)
    assert via.status_code == 200
    assert _sha(proxy.upstream.received[-1]) == _sha(raw)
    assert _sha(via.content) == _sha(direct.content)
    assert via.json()["x_unknown_field"] == {"kept": True}
    assert via.headers["x-autocompact-tier"] == "safe"
    assert via.headers["x-autocompact-compacted"] == "false"


def test_chat_stream_bytes_unchanged(proxy: Proxy) -> None:
    """An SSE stream (unknown fields, comment lines) is passed back byte for byte."""
    raw = _chat_body(stream=True)
    direct = httpx.post(f"{proxy.upstream_url}/v1/chat/completions", content=raw)
    via = httpx.post(f"{proxy.url}/v1/chat/completions", content=raw)
    assert _sha(proxy.upstream.received[-1]) == _sha(raw)
    assert _sha(via.content) == _sha(direct.content)
    assert b": a comment line" in via.content


def test_anthropic_stream_unknown_event_passed(proxy: Proxy) -> None:
    """An Anthropic stream with an unknown event type comes back unchanged."""
    body = {"model": "m", "max_tokens": 10, "stream": True}
    body["messages"] = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    raw = json.dumps(body).encode()
    direct = httpx.post(f"{proxy.upstream_url}/v1/messages", content=raw)
    via = httpx.post(f"{proxy.url}/v1/messages", content=raw)
    assert _sha(proxy.upstream.received[-1]) == _sha(raw)
    assert _sha(via.content) == _sha(direct.content)
    assert b"x_unknown_event" in via.content


def test_credentials_forwarded_proxy_headers_not(proxy: Proxy) -> None:
    """Client credentials and anthropic headers go upstream; X-Autocompact-* and hop-by-hop
    headers do not."""
    headers = {
        "x-api-key": "sk-secret",
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "x-beta",
        "authorization": "Bearer tok",
        "x-autocompact-conversation": "mine",
        "proxy-authorization": "Basic zzz",
    }
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    httpx.post(f"{proxy.url}/v1/messages", json=body, headers=headers)
    seen = proxy.upstream.headers[-1]
    assert seen["x-api-key"] == "sk-secret"
    assert seen["anthropic-version"] == "2023-06-01"
    assert seen["anthropic-beta"] == "x-beta"
    assert seen["authorization"] == "Bearer tok"
    assert "x-autocompact-conversation" not in seen
    assert "proxy-authorization" not in seen


def test_forwarded_endpoints(proxy: Proxy) -> None:
    """/v1/models, count_tokens and /v1/responses are forwarded as they are."""
    models = httpx.get(f"{proxy.url}/v1/models")
    assert models.json()["data"][0]["max_model_len"] == 8000
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    counted = httpx.post(f"{proxy.url}/v1/messages/count_tokens", json=body)
    assert counted.json()["input_tokens"] > 0
    raw = b'{"model": "m", "previous_response_id": "resp_0", "input": "more"}'
    response = httpx.post(f"{proxy.url}/v1/responses", content=raw)
    assert response.json()["input_sha"] == _sha(raw)


def test_healthz(proxy: Proxy) -> None:
    """/healthz answers 200 with the upstreams once the store answers."""
    reply = httpx.get(f"{proxy.url}/healthz")
    assert reply.status_code == 200
    assert reply.json()["upstreams"] == ["anthropic", "openai"]


def test_not_json_is_a_clear_error(proxy: Proxy) -> None:
    """A body that is not JSON gets a 400 in the protocol's error shape, nothing sent."""
    before = len(proxy.upstream.received)
    reply = httpx.post(f"{proxy.url}/v1/messages", content=b"{not json")
    assert reply.status_code == 400
    assert reply.json()["type"] == "error"
    assert "not JSON" in reply.json()["error"]["message"]
    reply = httpx.post(f"{proxy.url}/v1/chat/completions", content=b"[1]")
    assert reply.status_code == 400
    assert "JSON object" in reply.json()["error"]["message"]
    assert len(proxy.upstream.received) == before


def test_unknown_endpoint(proxy: Proxy) -> None:
    """An unknown endpoint is a 404 naming the endpoints served."""
    reply = httpx.post(f"{proxy.url}/v1/embeddings", json={})
    assert reply.status_code == 404
    assert "/v1/chat/completions" in reply.json()["error"]["message"]


def test_upstream_5xx_passed_back(proxy: Proxy) -> None:
    """An upstream 500 reaches the client as the upstream's own error."""
    proxy.upstream.fail_status = 503
    reply = httpx.post(f"{proxy.url}/v1/chat/completions", content=_chat_body())
    assert reply.status_code == 503
    assert reply.json()["error"]["message"] == "upstream broke"


def test_upstream_down_is_a_502(proxy: Proxy) -> None:
    """An upstream that cannot be reached gives a 502 in the protocol's shape."""
    proxy.app.config = type(proxy.app.config)(
        upstreams={"openai": "http://127.0.0.1:9/v1"}, store=proxy.app.config.store
    )
    reply = httpx.post(f"{proxy.url}/v1/chat/completions", content=_chat_body())
    assert reply.status_code == 502
    assert "could not be reached" in reply.json()["error"]["message"]


def test_errors_the_proxy_answers_are_logged_and_name_the_upstream(
    proxy: Proxy, caplog: pytest.LogCaptureFixture
) -> None:
    """An error the proxy answers itself (a body that is not JSON, an upstream it cannot reach)
    gets the request's log line with its status and reason (it got none); the 502 names the
    upstream's URL (without its password) and the option that sets it."""
    caplog.set_level(logging.INFO, logger="autocompact.serve")
    reply = httpx.post(f"{proxy.url}/v1/messages", content=b"{not json")
    assert reply.status_code == 400
    upstreams = {"openai": "http://user:secret@127.0.0.1:9/v1"}
    proxy.app.config = replace(proxy.app.config, upstreams=upstreams)
    reply = httpx.post(f"{proxy.url}/v1/chat/completions", content=_chat_body())
    assert reply.status_code == 502
    message = reply.json()["error"]["message"]
    assert "http://127.0.0.1:9/v1/chat/completions" in message
    assert "--upstream openai=URL" in message
    lines = [r.getMessage() for r in caplog.records if r.name == "autocompact.serve"]
    assert any(
        line.startswith("POST /v1/messages ") and "status=400" in line and "not JSON" in line
        for line in lines
    ), lines
    assert any(
        line.startswith("POST /v1/chat/completions ")
        and "action=error side_queries=0 status=502" in line
        and "127.0.0.1:9/v1/chat/completions" in line
        for line in lines
    ), lines
    assert "secret" not in caplog.text + message


def test_stream_dropped_midway_ends_with_error_event(proxy: Proxy) -> None:
    """A stream the upstream drops mid-way ends with an error event, not a traceback."""
    proxy.upstream.drop_stream_after = 1
    body = {"model": "m", "max_tokens": 5, "stream": True}
    body["messages"] = [{"role": "user", "content": "hi"}]
    reply = httpx.post(f"{proxy.url}/v1/messages", json=body)
    assert b"event: message_start" in reply.content
    assert b"event: error" in reply.content


def test_body_size_limit(proxy: Proxy) -> None:
    """A body over --max-body-bytes is refused with 413; the client's own summary request is
    exempt."""
    from dataclasses import replace

    proxy.app.config = replace(proxy.app.config, max_body_bytes=200)
    big = {"model": "m", "messages": [{"role": "user", "content": "x" * 500}]}
    reply = httpx.post(f"{proxy.url}/v1/chat/completions", json=big)
    assert reply.status_code == 413
    assert "--max-body-bytes" in reply.json()["error"]["message"]
    own = "Your task is to create a detailed summary of the conversation so far." + "x" * 500
    summary = {"model": "m", "messages": [{"role": "user", "content": own}]}
    reply = httpx.post(f"{proxy.url}/v1/chat/completions", json=summary)
    assert reply.status_code == 200
    assert reply.headers["x-autocompact-action"] == "client-compaction"


def test_slow_upstream_is_a_504(tmp_path: Path, upstream: tuple[ScriptedUpstream, str]) -> None:
    """An upstream slower than --timeout gives a 504 in the protocol's shape."""
    script, url = upstream
    script.delay = 2.0
    config = ServeConfig(
        upstreams={"anthropic": url}, store=f"sqlite:///{tmp_path / 's.db'}", timeout=0.5
    )
    app = ServeApp(config)
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    with serve_in_thread(app.asgi) as proxy_url:
        reply = httpx.post(f"{proxy_url}/v1/messages", json=body, timeout=10)
    app.store.close()
    assert reply.status_code == 504
    assert reply.json()["error"]["type"] == "timeout_error"


def test_store_down_forwards_uncompacted(proxy: Proxy) -> None:
    """When the store fails, a request at auto goes out as the client sent it (no 500)."""
    from autocompact.errors import SessionStoreError

    def broken(*args: object, **kwargs: object) -> None:
        raise SessionStoreError("the database is down", store="test")

    proxy.app.store.exists = broken  # type: ignore[method-assign]
    proxy.app.store.load = broken  # type: ignore[method-assign]
    messages = [{"role": "user", "content": "x " * 12000}]
    raw = json.dumps({"model": "m", "max_tokens": 5, "messages": messages}).encode()
    reply = httpx.post(f"{proxy.url}/v1/messages", content=raw, timeout=30)
    assert reply.headers["x-autocompact-action"] == "error-forwarded"
    assert proxy.upstream.received[-1] == raw


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_responses_text_input_says_its_tier_as_a_list_input_does(
    proxy: Proxy, stream: bool
) -> None:
    """A Responses request whose ``input`` is text (the openai SDK's ``input="…"``) is measured
    as the one user message it stands for: its response says the tier and the action, as for
    the same message as a list of items, and the text goes out as the client sent it (it was
    passed through unread: ``passthrough``, no ``X-Autocompact-Tier``)."""
    import openai

    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0)
    said = []
    big = "a fact worth keeping, " * 950  # (past warn on the 8,000-token window: 4,800)
    givens: list[Any] = []
    for text in ("hi there", big):
        givens += [text, [{"role": "user", "content": text}]]
    for number, given in enumerate(givens):  # (each a conversation: no calibration shared)
        raw = client.responses.with_raw_response.create(
            model="scripted",
            input=given,
            stream=stream,
            extra_headers={"x-autocompact-conversation": f"c{number}"},
        )
        raw.parse()
        said.append({k: v for k, v in raw.headers.items() if k.startswith("x-autocompact-")})
    expected = {"x-autocompact-action": "forward", "x-autocompact-compacted": "false"}
    assert said[0] == said[1] == {**expected, "x-autocompact-tier": "safe"}, said
    assert said[2] == said[3] == {**expected, "x-autocompact-tier": "warn"}, said
    sent = [json.loads(body)["input"] for body in proxy.upstream.received]
    assert sent == givens

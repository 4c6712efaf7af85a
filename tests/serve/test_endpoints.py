"""Which endpoint answers what (found probing the proxy, 2026-12-07): a path the proxy serves
asked with another method is a 405 naming the methods, not a 404 saying there is no endpoint;
a model list asked in Anthropic's dialect with no Anthropic upstream is the 404 /v1/messages
gives, not the OpenAI upstream's list."""

from __future__ import annotations

from dataclasses import replace

import anthropic
import httpx
import openai
import pytest

from .conftest import Proxy


@pytest.mark.parametrize(
    ("method", "path", "allow", "shape"),
    [
        ("GET", "/v1/chat/completions", "POST", "openai"),
        ("PUT", "/v1/messages", "POST", "anthropic"),
        ("GET", "/v1/messages/count_tokens", "POST", "anthropic"),
        ("POST", "/v1/models", "GET, HEAD", "openai"),
        ("PATCH", "/v1/responses/resp_1", "DELETE, GET, HEAD, POST", "openai"),
    ],
)
def test_a_served_path_asked_with_another_method_is_a_405(
    proxy: Proxy, method: str, path: str, allow: str, shape: str
) -> None:
    """A 405 with ``Allow`` and a message naming the methods, in the path's protocol's error
    shape, nothing sent upstream (GET /v1/chat/completions was a 404 'has no endpoint')."""
    before = len(proxy.upstream.received)
    reply = httpx.request(method, proxy.url + path)
    assert reply.status_code == 405
    assert reply.headers["allow"] == allow
    message = f"autocompact serve answers {allow} {path}, not {method}"
    if shape == "anthropic":
        assert reply.json() == {
            "type": "error", "error": {"type": "invalid_request_error", "message": message}
        }  # fmt: skip
    else:
        assert reply.json()["error"]["message"] == message
    assert len(proxy.upstream.received) == before


def test_the_sdks_read_the_405(proxy: Proxy) -> None:
    """The SDKs raise their own error for it, with the proxy's message."""
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="k", max_retries=0)
    with pytest.raises(openai.APIStatusError) as caught:
        client.get("/chat/completions", cast_to=object)
    assert caught.value.status_code == 405
    assert "answers POST /v1/chat/completions, not GET" in caught.value.message


def test_an_unknown_path_is_still_a_404(proxy: Proxy) -> None:
    """A path the proxy does not serve, whatever the method: 404 naming the endpoints."""
    for method in ("GET", "PATCH"):
        reply = httpx.request(method, f"{proxy.url}/v1/embeddings")
        assert reply.status_code == 404
        assert "/v1/chat/completions" in reply.json()["error"]["message"]


def test_an_anthropic_model_list_without_an_anthropic_upstream_is_a_404(proxy: Proxy) -> None:
    """``GET /v1/models`` with ``anthropic-version`` and only an OpenAI upstream: the 404
    /v1/messages gives ('no anthropic upstream is configured'), not the OpenAI list in a shape
    the client does not read; without the header the OpenAI list is forwarded."""
    upstreams = {"openai": proxy.app.config.upstreams["openai"]}
    proxy.app.config = replace(proxy.app.config, upstreams=upstreams)
    before = len(proxy.upstream.received)
    client = anthropic.Anthropic(base_url=proxy.url, api_key="k", max_retries=0)
    with pytest.raises(anthropic.NotFoundError) as caught:
        client.models.list()
    assert "no anthropic upstream is configured" in str(caught.value)
    with pytest.raises(anthropic.NotFoundError) as messages:
        client.messages.create(
            model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
        )
    assert str(messages.value) == str(caught.value).replace("/v1/models", "/v1/messages")
    assert len(proxy.upstream.received) == before
    assert httpx.get(f"{proxy.url}/v1/models").status_code == 200

"""The async paths convert errors in the same one place as the sync ones, for every adapter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from autocompact.content import Message
from autocompact.errors import AuthenticationError, ContextOverflowError, ProviderTimeoutError
from autocompact.providers.anthropic import AnthropicProvider
from autocompact.providers.base import ChatRequest, Provider
from autocompact.providers.gemini import GeminiProvider
from autocompact.providers.openai import OpenAIProvider

from . import test_anthropic as anth
from . import test_gemini as gem
from . import test_openai as oai
from .wire import Wire, json_response, timeout_error

CHAT = ChatRequest(messages=(Message.user("hello"),))

ADAPTERS: list[Any] = [
    pytest.param(
        lambda w: OpenAIProvider(
            "gpt-4.1", api_key=oai.KEY, async_http_client=w.async_client(), max_retries=0
        ),
        oai.KEY,
        json_response(oai.error_body(f"Incorrect API key provided: {oai.KEY}"), 401),
        json_response(oai.error_body("too long", "context_length_exceeded"), 400),
        id="openai",
    ),
    pytest.param(
        lambda w: AnthropicProvider(
            anth.MODEL, api_key=anth.KEY, async_http_client=w.async_client(), max_retries=0
        ),
        anth.KEY,
        anth.error("authentication_error", f"invalid key {anth.KEY}", 401),
        anth.error("invalid_request_error", "prompt is too long: 3 tokens > 2 maximum", 400),
        id="anthropic",
    ),
    pytest.param(
        lambda w: GeminiProvider(
            gem.MODEL, api_key=gem.KEY, async_http_client=w.async_client(), max_retries=0
        ),
        gem.KEY,
        gem.error(401, "UNAUTHENTICATED", f"bad key {gem.KEY}"),
        gem.error(400, "INVALID_ARGUMENT", "The input token count (9) exceeds the maximum"),
        id="gemini",
    ),
]


@pytest.mark.parametrize(("build", "key", "auth", "overflow"), ADAPTERS)
async def test_async_errors_are_converted(
    wire: Wire, build: Callable[[Wire], Provider], key: str, auth: Any, overflow: Any
) -> None:
    """acomplete/astream raise the project's errors (auth, overflow, timeout), key hidden."""
    provider = build(wire)
    wire.queue(auth, overflow, timeout_error)
    with pytest.raises(AuthenticationError) as info:
        await provider.acomplete(CHAT)
    assert key not in str(info.value)
    assert info.value.provider == provider.name
    with pytest.raises(ContextOverflowError):
        [event async for event in provider.astream(CHAT)]
    with pytest.raises(ProviderTimeoutError):
        await provider.acomplete(CHAT)

"""The OpenAI adapter against what llama.cpp's two servers really send (issue 17), on the wire.

Bodies are the ones recorded from ``llama-server`` and ``llama_cpp.server`` serving Gemma 3 270M
with an 8K context; the real-server suite (``tests/integration_llama``) drives the same paths
against the servers themselves.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from autocompact.chat import ChatSession
from autocompact.content import Message, TextPart
from autocompact.errors import (
    ContextOverflowError,
    MalformedResponseError,
    ProviderConnectionError,
)
from autocompact.events import Event, WindowLearned
from autocompact.providers._common import error_body, overflow_sizes
from autocompact.providers.base import ChatRequest, FinishReason, StreamDone, TextDelta
from autocompact.providers.openai import OpenAIProvider, compatible_profile
from autocompact.providers.registry import get_provider

from .wire import Wire, connect_error, json_response, sse

LLAMA_SERVER_OVERFLOW = {
    "error": {
        "code": 400,
        "message": "request (8371 tokens) exceeds the available context size (8192 tokens), "
        "try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 8371,
        "n_ctx": 8192,
    }
}
LLAMA_CPP_PYTHON_OVERFLOW = {
    "error": {
        "message": "This model's maximum context length is 8192 tokens. However, you requested "
        "8330 tokens (8230 in the messages, 100 in the completion). Please reduce the length "
        "of the messages or completion.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}


def completion(content: str = "ok", usage: dict[str, int] | None = None) -> dict[str, Any]:
    return {
        "id": "c",
        "object": "chat.completion",
        "created": 1,
        "model": "gemma",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": usage or {"prompt_tokens": 20, "completion_tokens": 2, "total_tokens": 22},
    }


def chunk(content: str | None, finish: str | None = None) -> dict[str, Any]:
    delta = {} if content is None else {"content": content}
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gemma",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def provider(wire: Wire, server: str = "llamacpp") -> OpenAIProvider:
    return OpenAIProvider(
        "gemma",
        profile=compatible_profile(server),
        http_client=wire.client(),
        async_http_client=wire.async_client(),
        max_retries=0,
    )


CHAT = ChatRequest(messages=(Message.user("hello"),))


# -- 1. overflow bodies --------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_llama_server_overflow_is_recognised_with_its_window(wire: Wire, stream: bool) -> None:
    """llama-server's 400 (type exceed_context_size_error, numeric code) is an overflow carrying
    n_ctx and the request's size, streamed or not."""
    wire.queue(json_response(LLAMA_SERVER_OVERFLOW, status=400))
    p = provider(wire)

    def send() -> object:
        return list(p.stream(CHAT)) if stream else p.complete(CHAT)

    with pytest.raises(ContextOverflowError) as caught:
        send()
    assert caught.value.context_window == 8192
    assert caught.value.prompt_tokens == 8371
    assert caught.value.provider == "llamacpp"


def test_llama_cpp_python_overflow_states_window_and_prompt(wire: Wire) -> None:
    """llama_cpp.server's overflow message gives the window and the messages' own size."""
    wire.queue(json_response(LLAMA_CPP_PYTHON_OVERFLOW, status=400))
    with pytest.raises(ContextOverflowError) as caught:
        provider(wire).complete(CHAT)
    assert (caught.value.context_window, caught.value.prompt_tokens) == (8192, 8230)


def test_error_body_puts_type_before_a_numeric_code() -> None:
    """The error's type is its kind; a numeric code (the HTTP status) is none."""
    body = error_body(LLAMA_SERVER_OVERFLOW, "fallback")
    assert body.code == "exceed_context_size_error"
    assert (body.n_ctx, body.n_prompt_tokens) == (8192, 8371)
    both = error_body(LLAMA_CPP_PYTHON_OVERFLOW, "fallback")
    assert both.code == "invalid_request_error context_length_exceeded"


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("Requested tokens (8230) exceed context window of 8192", (8192, 8230)),
        ("request (9558 tokens) exceeds the available context size (8192 tokens)", (8192, 9558)),
        ("something else went wrong", (None, None)),
    ],
    ids=["llama-cpp-python-raw", "llama-server", "unrelated"],
)
def test_overflow_sizes_read_from_messages(message: str, expected: tuple[Any, Any]) -> None:
    """The window and the request's size are read from the servers' own wording."""
    assert overflow_sizes(message) == expected


def test_session_learns_the_window_from_an_overflow(wire: Wire) -> None:
    """A session on an assumed 32K window learns 8,192 from the first overflow and compacts."""
    events: list[Event] = []
    wire.queue(
        json_response(LLAMA_SERVER_OVERFLOW, status=400),
        json_response(completion("<state_snapshot>the user greets</state_snapshot>")),
        json_response(completion("hi there")),
    )
    history = [Message.user("a " * 3000), Message.model("b " * 3000)]
    session = ChatSession(
        provider(wire), context_window=32_768, history=history, hooks=[events.append]
    )
    reply = session.send("hello")
    assert reply.text == "hi there"
    assert session.context_window == 8192
    assert WindowLearned(previous=32_768, context_window=8192) in events


# -- 2. empty streams ----------------------------------------------------------------------------


def test_empty_stream_is_probed_and_raises_the_real_overflow(wire: Wire) -> None:
    """An HTTP 200 stream with no content and no finish reason (llama_cpp.server on an oversize
    request) is asked again, not streamed and for 1 token; its overflow error is raised."""
    wire.queue(sse([], done=True), json_response(LLAMA_CPP_PYTHON_OVERFLOW, status=400))
    with pytest.raises(ContextOverflowError) as caught:
        list(provider(wire).stream(CHAT))
    assert caught.value.context_window == 8192
    probe = wire.sent[-1].json
    assert probe["max_tokens"] == 1
    assert "stream" not in probe


def test_empty_stream_is_an_error_when_the_probe_answers(wire: Wire) -> None:
    """When the probe gives no reason, the empty stream is a malformed response, not a reply."""
    wire.queue(sse([chunk(None)], done=True), json_response(completion("x")))
    with pytest.raises(MalformedResponseError, match="no reply and no finish reason"):
        list(provider(wire).stream(CHAT))


async def test_empty_async_stream_is_an_error(wire: Wire) -> None:
    """The async stream refuses an empty reply the same way."""
    wire.queue(sse([], done=True), json_response(completion("x")))
    with pytest.raises(MalformedResponseError):
        async for _ in provider(wire).astream(CHAT):
            pass


def test_a_stream_with_a_finish_reason_may_be_empty(wire: Wire) -> None:
    """An empty reply the server finished on purpose (finish_reason stop) stays a reply."""
    wire.queue(sse([chunk("", "stop")], done=True), json_response({"count": 5}))
    events = list(provider(wire).stream(CHAT))
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.completion.finish_reason is FinishReason.STOP


# -- 4. text as one string -----------------------------------------------------------------------


def test_text_parts_go_as_one_string_to_compatible_servers(wire: Wire) -> None:
    """A message of several text parts (trimming's marker merged in) is one string for local
    servers, both roles; OpenAI itself still gets the parts."""
    two = (TextPart(text="[marker]"), TextPart(text="the question"))
    request = ChatRequest(
        messages=(Message(role="user", parts=two), Message(role="model", parts=two))
    )
    wire.queue(json_response(completion()))
    provider(wire).complete(request)
    sent = wire.last.json["messages"]
    assert sent[0]["content"] == "[marker]\n\nthe question"
    assert sent[1]["content"] == "[marker]\n\nthe question"
    body = OpenAIProvider("gpt-4.1", api_key="k").build_body(request)
    assert isinstance(body["messages"][0]["content"], list)


# -- 8. streams without usage --------------------------------------------------------------------


def test_stream_without_usage_is_counted_by_the_tokenize_endpoint(
    wire: Wire, caplog: pytest.LogCaptureFixture
) -> None:
    """llama_cpp.server ignores stream_options: the prompt is counted with /extras/tokenize/count
    (template overhead added), said once, and the endpoint is remembered."""
    p = provider(wire)
    for _ in range(2):
        wire.queue(
            sse([chunk("hi"), chunk(None, "stop")], done=True),
            json_response({"count": 30}),
            json_response({"count": 1}),
        )
    with caplog.at_level(logging.WARNING, logger="autocompact"):
        first = list(p.stream(CHAT))[-1]
        second = list(p.stream(CHAT))[-1]
    assert isinstance(first, StreamDone)
    assert isinstance(second, StreamDone)
    assert first.completion.usage is not None
    assert first.completion.usage.prompt_tokens == 30 + 5 + 3  # text, 1 message, reply opening
    assert first.completion.usage.output_tokens == 1
    assert wire.sent[1].url.endswith("/extras/tokenize/count")
    assert wire.sent[1].json == {"input": "hello"}
    notices = p.take_notices()
    assert len(notices) == 1
    assert "no token usage" in notices[0]
    assert p.take_notices() == []


def test_llama_server_tokenize_is_the_second_choice(wire: Wire) -> None:
    """A server without /extras/tokenize/count is asked at /tokenize (llama-server's)."""
    wire.queue(
        sse([chunk("hi"), chunk(None, "stop")], done=True),
        json_response({"detail": "Not Found"}, status=404),
        json_response({"tokens": [1, 2, 3]}),
        json_response({"tokens": [9]}),
    )
    done = list(provider(wire).stream(CHAT))[-1]
    assert isinstance(done, StreamDone)
    assert done.completion.usage is not None
    assert done.completion.usage.prompt_tokens == 3 + 5 + 3
    assert wire.sent[2].url.endswith("/tokenize")
    assert wire.sent[2].json == {"content": "hello"}


def test_server_without_usage_or_tokenizer_gets_whole_requests(wire: Wire) -> None:
    """No usage and no tokenize endpoint: later turns are sent whole, so each is counted."""
    wire.queue(
        sse([chunk("hi"), chunk(None, "stop")], done=True),
        json_response({}, status=404),
        json_response({}, status=404),
        json_response(completion("whole", {"prompt_tokens": 40, "completion_tokens": 1})),
    )
    p = provider(wire)
    list(p.stream(CHAT))
    events = list(p.stream(CHAT))
    assert [type(e) for e in events] == [TextDelta, StreamDone]
    assert "stream" not in wire.last.json
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.completion.usage is not None
    assert done.completion.usage.prompt_tokens == 40
    assert "no longer streamed" in p.take_notices()[0]


async def test_async_stream_without_usage_is_counted(wire: Wire) -> None:
    """The async stream counts a usage-less reply the same way."""
    wire.queue(
        sse([chunk("hi"), chunk(None, "stop")], done=True),
        json_response({"count": 10}),
        json_response({"count": 1}),
    )
    events = [e async for e in provider(wire).astream(CHAT)]
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.completion.usage is not None
    assert done.completion.usage.prompt_tokens == 10 + 5 + 3


# -- 9. what a user sees -------------------------------------------------------------------------


def test_connection_error_names_the_url(wire: Wire) -> None:
    """'could not reach the server' says which URL it tried."""
    wire.queue(connect_error)
    with pytest.raises(ProviderConnectionError, match=r"127\.0\.0\.1:8080/v1/chat/completions"):
        provider(wire).complete(CHAT)


@pytest.mark.parametrize("name", ["llamacpp", "ollama", "vllm", "lmstudio"])
def test_errors_name_the_profile_the_user_chose(wire: Wire, name: str) -> None:
    """Errors name llamacpp/ollama/vllm/lmstudio, not 'openai-compatible'."""
    wire.queue(json_response({"error": {"message": "boom"}}, status=400))
    p = get_provider(f"{name}:m", http_client=wire.client(), max_retries=0)
    with pytest.raises(Exception, match=f"provider {name}"):
        p.complete(CHAT)


def test_overflow_body_is_valid_json_fixture() -> None:
    """The recorded bodies above are what the servers send (kept as JSON round-trips)."""
    assert json.loads(json.dumps(LLAMA_SERVER_OVERFLOW))["error"]["n_ctx"] == 8192

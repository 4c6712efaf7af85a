"""The OpenAI adapter and its four profiles, through the real ``openai`` SDK on a scripted wire."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from autocompact.content import (
    FunctionCallPart,
    FunctionResponsePart,
    Message,
    TextPart,
    ThinkingPart,
)
from autocompact.errors import (
    AuthenticationError,
    ContentError,
    ContextOverflowError,
    MalformedResponseError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
)
from autocompact.providers.base import (
    ChatRequest,
    FinishReason,
    StreamDone,
    TextDelta,
    ThinkingDelta,
    ToolSpec,
)
from autocompact.providers.openai import (
    OpenAIProvider,
    compatible_profile,
    lowest_reasoning_effort,
    openai_profile,
    qwen_profile,
)
from autocompact.thresholds import COMPACT_MAX_OUTPUT_TOKENS

from .wire import (
    Wire,
    connect_error,
    find_nulls,
    json_response,
    sse,
    timeout_error,
)

KEY = "sk-test-SECRETSECRETSECRET-0123456789"

SIDE_QUERY = ChatRequest(
    messages=(Message.user("summarize this"),),
    system_instruction="You summarize.",
    max_output_tokens=COMPACT_MAX_OUTPUT_TOKENS,
    thinking=False,
    purpose="side_query",
)
CHAT = ChatRequest(messages=(Message.user("hello"),))


def completion(
    content: str | None = "ok",
    *,
    finish: str | None = "stop",
    usage: dict[str, Any] | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content, **(extra or {})}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "served-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage or {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
    }


def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "served-model",
        "choices": choices,
        **extra,
    }


def make(wire: Wire, model: str = "gpt-4.1", **kwargs: Any) -> OpenAIProvider:
    return OpenAIProvider(
        model,
        api_key=KEY,
        http_client=wire.client(),
        async_http_client=wire.async_client(),
        max_retries=0,
        **kwargs,
    )


# -- the side query on the wire ----------------------------------------------------------------

PROFILES = [
    pytest.param(
        "gpt-5.1", None, "max_completion_tokens", {"reasoning_effort": "none"}, id="openai-gpt-5.1"
    ),
    pytest.param(
        "gpt-5-mini", None, "max_completion_tokens", {"reasoning_effort": "minimal"}, id="gpt-5"
    ),
    pytest.param("o4-mini", None, "max_completion_tokens", {"reasoning_effort": "low"}, id="o4"),
    # GPT-6 reasons at medium unless told: the summary's 20K went to reasoning first.
    pytest.param(
        "gpt-6-luna", None, "max_completion_tokens", {"reasoning_effort": "none"}, id="gpt-6"
    ),
    pytest.param(
        "gpt-5.1-codex", None, "max_completion_tokens", {"reasoning_effort": "low"}, id="codex"
    ),
    pytest.param("gpt-4.1", None, "max_completion_tokens", {}, id="openai-non-reasoning"),
    pytest.param("gpt-4o-mini", None, "max_completion_tokens", {}, id="gpt-4o"),
    pytest.param("qwen-plus", qwen_profile(), "max_tokens", {"enable_thinking": False}, id="qwen"),
    pytest.param(
        "qwen3-max",
        qwen_profile("cn", cap_field="max_completion_tokens"),
        "max_completion_tokens",
        {"enable_thinking": False},
        id="qwen-cn-cap-configured",
    ),
    pytest.param("Qwen/Qwen3-8B", compatible_profile("vllm"), "max_tokens", {}, id="vllm"),
    pytest.param("qwen3:8b", compatible_profile("ollama"), "max_tokens", {}, id="ollama"),
    pytest.param("local-model", compatible_profile("lmstudio"), "max_tokens", {}, id="lmstudio"),
    pytest.param("any", compatible_profile("llamacpp"), "max_tokens", {}, id="llamacpp"),
]


@pytest.mark.parametrize(("model", "profile", "cap_field", "thinking_fields"), PROFILES)
def test_side_query_body_carries_cap_and_thinking_off(
    wire: Wire, model: str, profile: Any, cap_field: str, thinking_fields: dict[str, Any]
) -> None:
    """The side query sends the 20K cap under the profile's field and thinking off its own way."""
    wire.queue(json_response(completion("summary")))
    provider = make(wire, model, profile=profile)
    provider.complete(SIDE_QUERY)
    body = wire.last.json
    assert body[cap_field] == COMPACT_MAX_OUTPUT_TOKENS
    other_cap = {"max_tokens", "max_completion_tokens"} - {cap_field}
    assert not other_cap & body.keys()
    reasoning_keys = {"reasoning_effort", "enable_thinking", "reasoning", "thinking"}
    assert {k: body[k] for k in reasoning_keys & body.keys()} == thinking_fields
    assert body["model"] == model
    assert body["messages"][0] == {"role": "system", "content": "You summarize."}
    assert find_nulls(body) == []
    assert "stream" not in body


@pytest.mark.parametrize(
    ("profile", "url"),
    [
        (qwen_profile("intl"), "https://dashscope-intl.aliyuncs.com/compatible-mode/v1/"),
        (qwen_profile("cn"), "https://dashscope.aliyuncs.com/compatible-mode/v1/"),
        (qwen_profile("us"), "https://dashscope-us.aliyuncs.com/compatible-mode/v1/"),
        (compatible_profile("ollama"), "http://127.0.0.1:11434/v1/"),
        (
            compatible_profile("vllm", base_url="http://10.0.0.5:9000/v1"),
            "http://10.0.0.5:9000/v1/",
        ),
        (openai_profile("gpt-4.1"), "https://api.openai.com/v1/"),
    ],
)
def test_profiles_send_to_their_base_url_with_bearer_key(
    wire: Wire, profile: Any, url: str
) -> None:
    """Each profile's request goes to its base URL with the key as a bearer token."""
    wire.queue(json_response(completion()))
    make(wire, profile=profile).complete(CHAT)
    assert wire.last.url == url + "chat/completions"
    assert wire.last.headers["authorization"] == f"Bearer {KEY}"


def test_chat_request_omits_everything_unset(wire: Wire) -> None:
    """A chat turn with no cap and thinking unset sends no cap or reasoning field and no nulls."""
    wire.queue(json_response(completion()))
    make(wire, "gpt-5.1").complete(CHAT)
    body = wire.last.json
    assert set(body) == {"model", "messages"}


def test_thinking_true_on_qwen_enables_it_and_tools_are_declared(wire: Wire) -> None:
    """Qwen gets enable_thinking true when asked; tools go out as function declarations."""
    wire.queue(json_response(completion()))
    tool = ToolSpec(name="read", description="Read a file", parameters={"type": "object"})
    request = ChatRequest(messages=(Message.user("x"),), thinking=True, tools=(tool,))
    make(wire, "qwen-plus", profile=qwen_profile()).complete(request)
    body = wire.last.json
    assert body["enable_thinking"] is True
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read",
                "description": "Read a file",
                "parameters": {"type": "object"},
            },
        }
    ]


def test_history_thinking_is_not_sent_back_to_openai(wire: Wire) -> None:
    """Thinking parts of the history are left out of OpenAI-family requests."""
    wire.queue(json_response(completion()))
    history = (
        Message.user("a"),
        Message.model(ThinkingPart(text="secret plan"), "b"),
        Message.user("c"),
    )
    make(wire).complete(ChatRequest(messages=history))
    assert "secret plan" not in json.dumps(wire.last.json)
    assert wire.last.json["messages"][1] == {"role": "assistant", "content": "b"}


def test_extras_are_merged_into_the_body(wire: Wire) -> None:
    """Provider-prefixed extras reach the body (e.g. vLLM's chat_template_kwargs)."""
    wire.queue(json_response(completion()))
    extra = {"openai": {"chat_template_kwargs": {"enable_thinking": False}}}
    make(wire, profile=compatible_profile("vllm")).complete(
        ChatRequest(messages=(Message.user("x"),), extra=extra)
    )
    assert wire.last.json["chat_template_kwargs"] == {"enable_thinking": False}


def test_lowest_reasoning_effort_table() -> None:
    """The effort floor follows the model family."""
    assert lowest_reasoning_effort("gpt-5.2") == "none"
    assert lowest_reasoning_effort("gpt-5-nano-2025-08-07") == "minimal"
    assert lowest_reasoning_effort("o3") == "low"
    assert lowest_reasoning_effort("o1-mini") is None
    assert lowest_reasoning_effort("gpt-5-chat-latest") is None
    assert lowest_reasoning_effort("gpt-5-pro") is None
    assert lowest_reasoning_effort("gpt-4o") is None
    assert lowest_reasoning_effort("gpt-6-sol") == "none"
    assert lowest_reasoning_effort("gpt-6.1-terra") == "none"
    # Astra, 6.1 Sol and 6.2 always reason and refuse `none`; a later family too, until known.
    assert lowest_reasoning_effort("gpt-6-astra") == "low"
    assert lowest_reasoning_effort("gpt-6.1-sol") == "low"
    assert lowest_reasoning_effort("gpt-6.2-astra") == "low"
    assert lowest_reasoning_effort("gpt-7") == "low"
    assert lowest_reasoning_effort("gpt-6-chat-latest") is None
    assert lowest_reasoning_effort("gpt-6.1-codex") == "low"


# -- replies -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("stop", FinishReason.STOP),
        ("length", FinishReason.LENGTH),
        ("tool_calls", FinishReason.TOOL_CALL),
        ("function_call", FinishReason.TOOL_CALL),
        ("content_filter", FinishReason.CONTENT_FILTER),
        ("something_new", FinishReason.OTHER),
    ],
)
def test_finish_reasons_map(wire: Wire, raw: str, expected: FinishReason) -> None:
    """Every OpenAI finish_reason maps to the normalized reason and the raw one is kept."""
    wire.queue(json_response(completion(finish=raw)))
    result = make(wire).complete(CHAT)
    assert result.finish_reason is expected
    assert result.raw_finish_reason == raw


def test_complete_parses_text_calls_reasoning_and_usage(wire: Wire) -> None:
    """Content, reasoning_content, tool calls and detailed usage are all read."""
    usage = {
        "prompt_tokens": 1000,
        "completion_tokens": 50,
        "total_tokens": 1050,
        "prompt_tokens_details": {"cached_tokens": 800},
        "completion_tokens_details": {"reasoning_tokens": 20},
    }
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    wire.queue(
        json_response(
            completion(
                "hi",
                finish="tool_calls",
                usage=usage,
                tool_calls=[call],
                extra={"reasoning_content": "think"},
            )
        )
    )
    result = make(wire).complete(CHAT)
    assert result.message.parts == (
        ThinkingPart(text="think"),
        TextPart(text="hi"),
        FunctionCallPart(id="c1", name="f", arguments={"a": 1}),
    )
    assert result.usage is not None
    assert (result.usage.prompt_tokens, result.usage.output_tokens) == (1000, 50)
    assert (result.usage.cached_tokens, result.usage.thinking_tokens) == (800, 20)
    assert result.model == "served-model"


def test_stream_yields_text_and_ends_with_usage(wire: Wire) -> None:
    """A streamed turn asks for usage in the stream, yields deltas and ends with usage."""
    wire.queue(
        sse(
            [
                chunk({"role": "assistant", "reasoning_content": "hm"}),
                chunk({"content": "Hel"}),
                chunk({"content": "lo"}, finish="stop"),
                chunk(
                    None, usage={"prompt_tokens": 42, "completion_tokens": 2, "total_tokens": 44}
                ),
            ],
            done=True,
        )
    )
    events = list(make(wire, "qwen-plus", profile=qwen_profile()).stream(CHAT))
    assert wire.last.json["stream"] is True
    assert wire.last.json["stream_options"] == {"include_usage": True}
    assert events[:3] == [ThinkingDelta(text="hm"), TextDelta(text="Hel"), TextDelta(text="lo")]
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.completion.text == "Hello"
    assert done.completion.usage is not None
    assert done.completion.usage.prompt_tokens == 42
    assert done.completion.finish_reason is FinishReason.STOP


def test_stream_assembles_tool_calls_from_fragments(wire: Wire) -> None:
    """Tool-call fragments spread over chunks are joined into one call."""
    first = {
        "index": 0,
        "id": "c9",
        "type": "function",
        "function": {"name": "grep", "arguments": '{"pat'},
    }
    rest = {"index": 0, "function": {"arguments": 'tern": "x"}'}}
    wire.queue(
        sse(
            [
                chunk({"role": "assistant", "tool_calls": [first]}),
                chunk({"tool_calls": [rest]}, finish="tool_calls"),
                chunk(None, usage={"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}),
            ],
            done=True,
        )
    )
    done = list(make(wire).stream(CHAT))[-1]
    assert isinstance(done, StreamDone)
    assert done.completion.message.function_calls == (
        FunctionCallPart(id="c9", name="grep", arguments={"pattern": "x"}),
    )
    assert done.completion.finish_reason is FinishReason.TOOL_CALL


async def test_async_complete_and_stream(wire: Wire) -> None:
    """The async methods send the same body and parse the same way."""
    wire.queue(json_response(completion("a", finish="length")))
    wire.queue(
        sse(
            [
                chunk({"content": "b"}, finish="stop"),
                chunk(None, usage={"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8}),
            ],
            done=True,
        )
    )
    provider = make(wire, "gpt-5.1")
    result = await provider.acomplete(SIDE_QUERY)
    assert result.finish_reason is FinishReason.LENGTH
    assert wire.sent[0].json["reasoning_effort"] == "none"
    events = [e async for e in provider.astream(CHAT)]
    assert events[0] == TextDelta(text="b")
    assert isinstance(events[-1], StreamDone)
    assert events[-1].completion.usage is not None
    assert events[-1].completion.usage.prompt_tokens == 7


# -- errors ------------------------------------------------------------------------------------


def error_body(
    message: str, code: str | None = None, kind: str = "invalid_request_error"
) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": code, "param": None}}


ERRORS = [
    pytest.param(
        json_response(error_body(f"Incorrect API key provided: {KEY}.", "invalid_api_key"), 401),
        AuthenticationError,
        401,
        id="401",
    ),
    pytest.param(
        json_response(error_body("Rate limit reached", "rate_limit_exceeded"), 429),
        RateLimitError,
        429,
        id="429",
    ),
    pytest.param(
        json_response(
            error_body(
                "This model's maximum context length is 128000 tokens. However, your messages "
                "resulted in 130000 tokens.",
                "context_length_exceeded",
            ),
            400,
        ),
        ContextOverflowError,
        400,
        id="overflow-openai",
    ),
    pytest.param(
        json_response(
            {
                "object": "error",
                "message": "This model's maximum context length is 32768 tokens.",
                "type": "BadRequestError",
                "code": 400,
            },
            400,
        ),
        ContextOverflowError,
        400,
        id="overflow-vllm",
    ),
    pytest.param(
        json_response(
            error_body("Range of input length should be [1, 129024]", "InvalidParameter"), 400
        ),
        ContextOverflowError,
        400,
        id="overflow-dashscope",
    ),
    pytest.param(
        json_response(error_body("boom", kind="server_error"), 500), ProviderError, 500, id="500"
    ),
    pytest.param(timeout_error, ProviderTimeoutError, None, id="timeout"),
    pytest.param(connect_error, ProviderConnectionError, None, id="connection"),
    pytest.param(
        json_response({"id": "x", "object": "chat.completion", "choices": []}),
        MalformedResponseError,
        200,
        id="no-choices",
    ),
    pytest.param(
        json_response(
            completion(
                None,
                tool_calls=[
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{oops"}}
                ],
            )
        ),
        MalformedResponseError,
        None,
        id="bad-tool-json",
    ),
]


@pytest.mark.parametrize(("reply", "error", "status"), ERRORS)
def test_errors_become_project_errors_without_the_key(
    wire: Wire,
    caplog: pytest.LogCaptureFixture,
    reply: Any,
    error: type[ProviderError],
    status: int | None,
) -> None:
    """SDK failures become project errors with provider/model/status and never show the key."""
    caplog.set_level(logging.DEBUG)
    wire.queue(reply)
    with pytest.raises(error) as info:
        make(wire, "gpt-5.1").complete(CHAT)
    err = info.value
    assert type(err) is error
    assert (err.provider, err.model, err.status) == ("openai", "gpt-5.1", status)
    assert KEY not in str(err)
    assert KEY not in repr(err)
    chain = err.__cause__
    while chain is not None:
        assert KEY not in str(chain)
        chain = chain.__cause__
    assert KEY not in caplog.text


def test_malformed_non_json_body(wire: Wire) -> None:
    """A 200 reply that is not JSON is a MalformedResponseError."""
    import httpx2

    wire.queue(
        httpx2.Response(
            200, content=b"<html>gateway</html>", headers={"content-type": "application/json"}
        )
    )
    with pytest.raises(MalformedResponseError) as info:
        make(wire).complete(CHAT)
    assert info.value.provider == "openai"


def test_rate_limit_is_retryable_and_auth_is_not(wire: Wire) -> None:
    """Retryability is set from the error kind."""
    wire.queue(
        json_response(error_body("slow down"), 429), json_response(error_body("bad key"), 401)
    )
    with pytest.raises(RateLimitError) as rate:
        make(wire).complete(CHAT)
    with pytest.raises(AuthenticationError) as auth:
        make(wire).complete(CHAT)
    assert rate.value.retryable
    assert not auth.value.retryable


# -- a real HTTP server on 127.0.0.1 -----------------------------------------------------------


class _ChatServer(BaseHTTPRequestHandler):
    bodies: list[dict[str, Any]] = []  # noqa: RUF012 - shared by the one test server

    def do_POST(self) -> None:
        length = int(self.headers["content-length"])
        body = json.loads(self.rfile.read(length))
        type(self).bodies.append(body)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        for item in (
            chunk({"role": "assistant", "content": "local "}),
            chunk({"content": "reply"}, finish="length"),
            chunk(None, usage={"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}),
        ):
            self.wfile.write(f"data: {json.dumps(item)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args: Any) -> None:
        """Silence the server log."""


@pytest.fixture
def chat_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ChatServer)
    _ChatServer.bodies = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_compatible_profile_against_a_local_server(chat_server: str) -> None:
    """Against a real local server: max_tokens sent, no reasoning field, stream ends in usage."""
    provider = OpenAIProvider(
        "Qwen/Qwen3-8B", profile=compatible_profile("vllm", base_url=chat_server), max_retries=0
    )
    events = list(provider.stream(SIDE_QUERY))
    body = _ChatServer.bodies[-1]
    assert body["max_tokens"] == COMPACT_MAX_OUTPUT_TOKENS
    assert "reasoning_effort" not in body
    assert "enable_thinking" not in body
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.completion.text == "local reply"
    assert done.completion.finish_reason is FinishReason.LENGTH
    assert done.completion.usage is not None
    assert done.completion.usage.prompt_tokens == 9


def test_stream_usage_can_be_turned_off_for_old_servers(wire: Wire) -> None:
    """stream_usage=False leaves stream_options out (for servers that reject it)."""
    wire.queue(sse([chunk({"content": "x"}, finish="stop")], done=True))
    provider = make(wire, profile=compatible_profile("llamacpp"), stream_usage=False)
    done = list(provider.stream(CHAT))[-1]
    assert "stream_options" not in wire.last.json
    assert isinstance(done, StreamDone)
    assert done.completion.usage is None


@pytest.mark.parametrize("streamed", [False, True])
def test_a_request_it_cannot_send_is_a_content_error_not_a_bad_reply(
    wire: Wire, streamed: bool
) -> None:
    """What the request cannot carry (here an image a tool returned) is the request's error,
    raised before anything is sent; it was reported as a reply that "cannot be read"."""
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}
    history = (
        Message(role="model", parts=(FunctionCallPart(id="c1", name="screenshot"),)),
        Message(
            role="user",
            parts=(FunctionResponsePart(id="c1", name="screenshot", response=[image]),),
        ),
    )
    provider = make(wire)
    send: Any = (lambda r: list(provider.stream(r))) if streamed else provider.complete
    with pytest.raises(ContentError, match=r"tool call 'c1' \(screenshot\)"):
        send(ChatRequest(messages=history))
    assert wire.sent == []


def test_the_default_model_is_current(wire: Wire) -> None:
    """`autocompact chat --provider openai` defaults to gpt-6-luna (gpt-4.1-mini is deprecated,
    with GPT-6 Luna as its replacement): its limits are in the table and its summary request
    turns reasoning off."""
    from autocompact.cli.provider_choice import DEFAULT_MODELS
    from autocompact.limits import known_limits

    default = DEFAULT_MODELS["openai"]
    assert not default.startswith(("gpt-3", "gpt-4"))
    limits = known_limits(default)
    assert limits is not None
    assert (limits.context_window, limits.max_output_tokens) == (1_050_000, 128_000)
    wire.queue(json_response(completion("summary")))
    make(wire, default).complete(SIDE_QUERY)
    assert wire.last.json["reasoning_effort"] == "none"
    assert wire.last.json["max_completion_tokens"] == COMPACT_MAX_OUTPUT_TOKENS

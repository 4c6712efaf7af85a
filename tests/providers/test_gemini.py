"""The Gemini adapter through the real ``google-genai`` SDK on a scripted wire."""

from __future__ import annotations

import base64
import logging
from typing import Any

import httpx2
import pytest

from autocompact.content import (
    FunctionCallPart,
    FunctionResponsePart,
    ImagePart,
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
from autocompact.providers.gemini import GeminiProvider, gemini_thinking
from autocompact.thresholds import COMPACT_MAX_OUTPUT_TOKENS

from .wire import Wire, connect_error, find_nulls, json_response, sse, timeout_error

KEY = "AIzaSyTEST-SECRETSECRETSECRET-0123456789"
MODEL = "gemini-2.5-flash"

SIDE_QUERY = ChatRequest(
    messages=(Message.user("summarize this"),),
    system_instruction="You summarize.",
    max_output_tokens=COMPACT_MAX_OUTPUT_TOKENS,
    thinking=False,
    purpose="side_query",
)
CHAT = ChatRequest(messages=(Message.user("hello"),))


def reply(
    parts: list[dict[str, Any]] | None = None,
    *,
    finish: str | None = "STOP",
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    candidate: dict[str, Any] = {
        "content": {"role": "model", "parts": parts if parts is not None else [{"text": "ok"}]},
        "index": 0,
    }
    if finish is not None:
        candidate["finishReason"] = finish
    out: dict[str, Any] = {"candidates": [candidate], "modelVersion": MODEL}
    if usage is not None:
        out["usageMetadata"] = usage
    return out


def make(wire: Wire, model: str = MODEL) -> GeminiProvider:
    return GeminiProvider(
        model,
        api_key=KEY,
        http_client=wire.client(),
        async_http_client=wire.async_client(),
        max_retries=0,
    )


# -- the side query on the wire ----------------------------------------------------------------

FAMILIES = [
    pytest.param("gemini-2.5-flash", {"thinking_budget": 0}, 20_000, id="2.5-flash-off"),
    pytest.param("gemini-2.5-flash-lite", {"thinking_budget": 0}, 20_000, id="2.5-flash-lite-off"),
    pytest.param("gemini-2.5-pro", {"thinking_budget": 128}, 20_128, id="2.5-pro-floor"),
    pytest.param("gemini-3-pro-preview", {"thinking_level": "LOW"}, 28_192, id="3-pro-low"),
    pytest.param("gemini-3-flash-preview", {"thinking_level": "MINIMAL"}, 22_048, id="3-flash"),
    pytest.param("gemini-3.6-flash", {"thinking_level": "MINIMAL"}, 22_048, id="3.6-flash"),
    pytest.param("gemini-3.5-flash-lite", {"thinking_level": "MINIMAL"}, 22_048, id="3.5-lite"),
    # From 3.7 on a Flash model takes LOW, MEDIUM and HIGH only: MINIMAL is refused with a 400.
    pytest.param("gemini-3.7-flash", {"thinking_level": "LOW"}, 28_192, id="3.7-flash-low"),
    pytest.param("gemini-3.8-flash", {"thinking_level": "LOW"}, 28_192, id="3.8-flash-low"),
    pytest.param("gemini-3.10-flash", {"thinking_level": "LOW"}, 28_192, id="3.10-flash-low"),
    pytest.param("gemini-flash-latest", {"thinking_level": "LOW"}, 28_192, id="flash-latest"),
    # Gemini 4 refuses MINIMAL too (Argon, Carbon, Hydrogen); LOW is in every model's levels.
    pytest.param("gemini-4-argon", {"thinking_level": "LOW"}, 28_192, id="4-argon-low"),
    pytest.param("gemini-2.0-flash", None, 20_000, id="2.0-no-thinking"),
]


@pytest.mark.parametrize(("model", "thinking", "cap"), FAMILIES)
def test_side_query_sends_cap_and_lowest_thinking(
    wire: Wire, model: str, thinking: dict[str, Any] | None, cap: int
) -> None:
    """maxOutputTokens carries the cap (raised by unavoidable thinking) and thinking is off."""
    wire.queue(json_response(reply([{"text": "summary"}])))
    make(wire, model).complete(SIDE_QUERY)
    sent = wire.last
    config = sent.json["generationConfig"]
    assert config["maxOutputTokens"] == cap
    if thinking is None:
        assert "thinkingConfig" not in config
    else:
        assert config["thinkingConfig"] == {"include_thoughts": False, **thinking}
    assert sent.json["systemInstruction"]["parts"] == [{"text": "You summarize."}]
    assert sent.json["contents"] == [{"role": "user", "parts": [{"text": "summarize this"}]}]
    assert find_nulls(sent.json) == []
    assert sent.url.endswith(f"models/{model}:generateContent")
    assert sent.headers["x-goog-api-key"] == KEY
    assert cap - COMPACT_MAX_OUTPUT_TOKENS == gemini_thinking(model).cap_extra


def test_chat_omits_unset_values(wire: Wire) -> None:
    """A chat turn with no cap and thinking unset sends neither."""
    wire.queue(json_response(reply()))
    make(wire).complete(CHAT)
    config = wire.last.json.get("generationConfig", {})
    assert "maxOutputTokens" not in config
    assert "thinkingConfig" not in config


def test_history_tools_and_media_are_sent_in_gemini_form(wire: Wire) -> None:
    """Calls, responses (wrapped as objects), inline images and tools go out as Gemini expects."""
    wire.queue(json_response(reply()))
    sig = base64.b64encode(b"sig").decode()
    history = (
        Message.user(
            "look", ImagePart(media_type="image/png", data=base64.b64encode(b"PNG").decode())
        ),
        Message.model(
            ThinkingPart(text="", signature=sig),
            FunctionCallPart(id="c1", name="ls", arguments={"d": "."}),
        ),
        Message.user(FunctionResponsePart(id="c1", name="ls", response="a.py")),
    )
    tool = ToolSpec(name="ls", description="list", parameters={"type": "object"})
    make(wire).complete(ChatRequest(messages=history, tools=(tool,)))
    body = wire.last.json
    inline = body["contents"][0]["parts"][1]["inlineData"]
    assert inline["data"] == base64.b64encode(b"PNG").decode()
    # The SDK writes the nested key in snake case; the API accepts both spellings.
    assert inline.get("mimeType", inline.get("mime_type")) == "image/png"
    call = body["contents"][1]["parts"][0]
    assert call["functionCall"] == {"id": "c1", "name": "ls", "args": {"d": "."}}
    assert call["thoughtSignature"] == sig
    assert body["contents"][2]["parts"][0]["functionResponse"] == {
        "id": "c1",
        "name": "ls",
        "response": {"output": "a.py"},
    }
    declaration = body["tools"][0]["functionDeclarations"][0]
    assert declaration["name"] == "ls"


# -- replies -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "parts", "expected"),
    [
        ("STOP", None, FinishReason.STOP),
        ("MAX_TOKENS", None, FinishReason.LENGTH),
        ("SAFETY", None, FinishReason.CONTENT_FILTER),
        ("RECITATION", None, FinishReason.CONTENT_FILTER),
        ("PROHIBITED_CONTENT", None, FinishReason.CONTENT_FILTER),
        ("MALFORMED_FUNCTION_CALL", None, FinishReason.OTHER),
        ("OTHER", None, FinishReason.OTHER),
        ("STOP", [{"functionCall": {"name": "ls", "args": {}}}], FinishReason.TOOL_CALL),
    ],
)
def test_finish_reasons_map(
    wire: Wire, raw: str, parts: list[dict[str, Any]] | None, expected: FinishReason
) -> None:
    """Every finishReason maps; STOP with a function call is a tool call."""
    wire.queue(json_response(reply(parts, finish=raw)))
    result = make(wire).complete(CHAT)
    assert result.finish_reason is expected
    assert result.raw_finish_reason == raw


def test_blocked_prompt_is_a_content_filter_with_an_empty_reply(wire: Wire) -> None:
    """A prompt blocked before any candidate reports content_filter and an empty message."""
    wire.queue(json_response({"promptFeedback": {"blockReason": "SAFETY"}}))
    result = make(wire).complete(CHAT)
    assert result.finish_reason is FinishReason.CONTENT_FILTER
    assert result.raw_finish_reason == "SAFETY"
    assert result.text == ""


@pytest.mark.parametrize(
    "body",
    [{"error": {"code": 500, "message": "boom", "status": "INTERNAL"}}, {}, {"candidates": []}],
    ids=["an-error-object", "empty", "no-candidates"],
)
def test_a_200_with_no_candidate_and_no_block_reason_is_malformed(
    wire: Wire, body: dict[str, Any]
) -> None:
    """A 200 that holds no candidate and says nothing was blocked is no reply (it read as an
    empty answer with no finish reason); whole and streamed alike, sync and async."""
    wire.queue(json_response(body))
    with pytest.raises(MalformedResponseError, match="no candidates") as caught:
        make(wire).complete(CHAT)
    assert caught.value.provider == "gemini"
    assert caught.value.status == 200
    wire.queue(sse([{"usageMetadata": {"promptTokenCount": 5}}, {"modelVersion": MODEL}]))
    with pytest.raises(MalformedResponseError, match="no candidates"):
        list(make(wire).stream(CHAT))


async def test_an_async_reply_with_no_candidate_is_malformed(wire: Wire) -> None:
    wire.queue(json_response({}), sse([{"modelVersion": MODEL}]))
    provider = make(wire)
    with pytest.raises(MalformedResponseError, match="no candidates"):
        await provider.acomplete(CHAT)
    with pytest.raises(MalformedResponseError, match="no candidates"):
        [e async for e in provider.astream(CHAT)]


def test_a_stream_whose_usage_comes_in_a_chunk_of_its_own_is_read(wire: Wire) -> None:
    """A chunk with no candidate (usage alone) is no fault when another chunk held one."""
    wire.queue(sse([reply([{"text": "hi"}]), {"usageMetadata": {"promptTokenCount": 7}}]))
    done = list(make(wire).stream(CHAT))[-1]
    assert isinstance(done, StreamDone)
    assert done.completion.text == "hi"
    assert done.completion.usage is not None
    assert done.completion.usage.prompt_tokens == 7


def test_usage_reads_prompt_token_count_and_adds_thoughts_to_output(wire: Wire) -> None:
    """Prompt size is promptTokenCount; output counts candidates and thoughts."""
    meta = {
        "promptTokenCount": 123456,
        "candidatesTokenCount": 900,
        "thoughtsTokenCount": 128,
        "cachedContentTokenCount": 100000,
    }
    wire.queue(json_response(reply(usage=meta)))
    result = make(wire).complete(CHAT)
    assert result.usage is not None
    assert result.usage.prompt_tokens == 123456
    assert result.usage.output_tokens == 1028
    assert result.usage.thinking_tokens == 128
    assert result.usage.cached_tokens == 100000


def test_stream_yields_thoughts_and_text_and_ends_with_usage(wire: Wire) -> None:
    """A streamed turn yields thought and text deltas and ends with the last chunk's usage."""
    wire.queue(
        sse(
            [
                reply([{"text": "pondering", "thought": True}], finish=None),
                reply([{"text": "Hel"}], finish=None),
                reply(
                    [{"text": "lo"}],
                    finish="MAX_TOKENS",
                    usage={"promptTokenCount": 50, "candidatesTokenCount": 2},
                ),
            ]
        )
    )
    out = list(make(wire).stream(CHAT))
    assert "streamGenerateContent" in wire.last.url
    assert out[:3] == [ThinkingDelta(text="pondering"), TextDelta(text="Hel"), TextDelta(text="lo")]
    done = out[-1]
    assert isinstance(done, StreamDone)
    assert done.completion.message.parts == (ThinkingPart(text="pondering"), TextPart(text="Hello"))
    assert done.completion.finish_reason is FinishReason.LENGTH
    assert done.completion.usage is not None
    assert done.completion.usage.prompt_tokens == 50


async def test_async_complete_and_stream(wire: Wire) -> None:
    """The async methods send the same config and parse the same way."""
    wire.queue(
        json_response(reply(finish="MAX_TOKENS")),
        sse([reply([{"text": "x"}], usage={"promptTokenCount": 9, "candidatesTokenCount": 1})]),
    )
    provider = make(wire, "gemini-2.5-pro")
    result = await provider.acomplete(SIDE_QUERY)
    assert result.finish_reason is FinishReason.LENGTH
    assert wire.sent[0].json["generationConfig"]["thinkingConfig"]["thinking_budget"] == 128
    out = [e async for e in provider.astream(CHAT)]
    assert out[0] == TextDelta(text="x")
    assert isinstance(out[-1], StreamDone)


# -- errors ------------------------------------------------------------------------------------


def error(status: int, state: str, message: str) -> Any:
    return json_response({"error": {"code": status, "message": message, "status": state}}, status)


ERRORS = [
    pytest.param(
        error(
            400,
            "INVALID_ARGUMENT",
            "The input token count (1200000) exceeds the maximum number of tokens allowed "
            "(1048576).",
        ),
        ContextOverflowError,
        400,
        id="overflow",
    ),
    pytest.param(
        error(400, "INVALID_ARGUMENT", f"API key not valid: {KEY}"),
        AuthenticationError,
        400,
        id="400-bad-key",
    ),
    pytest.param(
        error(401, "UNAUTHENTICATED", "bad credentials"), AuthenticationError, 401, id="401"
    ),
    pytest.param(
        error(403, "PERMISSION_DENIED", f"key {KEY} denied"), AuthenticationError, 403, id="403"
    ),
    pytest.param(error(429, "RESOURCE_EXHAUSTED", "quota"), RateLimitError, 429, id="429"),
    pytest.param(error(503, "UNAVAILABLE", "overloaded"), ProviderError, 503, id="503"),
    pytest.param(timeout_error, ProviderTimeoutError, None, id="timeout"),
    pytest.param(connect_error, ProviderConnectionError, None, id="connection"),
    pytest.param(
        json_response(reply([{"executableCode": {"language": "PYTHON", "code": "1"}}])),
        MalformedResponseError,
        None,
        id="unreadable-part",
    ),
]


@pytest.mark.parametrize(("reply_", "expected", "status"), ERRORS)
def test_errors_become_project_errors_without_the_key(
    wire: Wire,
    caplog: pytest.LogCaptureFixture,
    reply_: Any,
    expected: type[ProviderError],
    status: int | None,
) -> None:
    """SDK failures become project errors with provider/model/status, the key never shown."""
    caplog.set_level(logging.DEBUG)
    wire.queue(reply_)
    with pytest.raises(expected) as info:
        make(wire).complete(CHAT)
    err = info.value
    assert type(err) is expected
    assert (err.provider, err.model, err.status) == ("gemini", MODEL, status)
    assert KEY not in str(err)
    chain = err.__cause__
    while chain is not None:
        assert KEY not in str(chain)
        chain = chain.__cause__
    assert KEY not in caplog.text


def test_non_json_reply_is_malformed(wire: Wire) -> None:
    """A 200 reply that is not JSON becomes a MalformedResponseError."""
    wire.queue(httpx2.Response(200, content=b"<html>proxy</html>"))
    with pytest.raises(MalformedResponseError) as info:
        make(wire).complete(CHAT)
    assert info.value.provider == "gemini"


def test_an_image_a_tool_returned_is_refused_before_anything_is_sent(wire: Wire) -> None:
    """This adapter sends a tool result as JSON: an image in it would reach the model as base64
    text, so it is a ContentError naming the call, and no request goes out."""
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}}
    history = (
        Message(role="model", parts=(FunctionCallPart(id="c1", name="screenshot"),)),
        Message(
            role="user",
            parts=(FunctionResponsePart(id="c1", name="screenshot", response=[image]),),
        ),
    )
    with pytest.raises(ContentError, match=r"tool call 'c1' \(screenshot\)"):
        make(wire).complete(ChatRequest(messages=history))
    assert wire.sent == []


# -- images and documents a tool returns -------------------------------------------------------

_PNG = base64.b64encode(b"\x89PNG-screenshot").decode()
_SOURCE = {"type": "base64", "media_type": "image/png", "data": _PNG}
_TOOL_MEDIA = {
    "anthropic": {"type": "image", "source": _SOURCE},
    "langchain": {"type": "image", "base64": _PNG, "mime_type": "image/png"},
    "openai-chat": {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{_PNG}"}},
    "mcp": {"type": "image", "data": _PNG, "mimeType": "image/png"},
}  # fmt: skip


def _screenshot(*blocks: Any) -> tuple[Message, ...]:
    return (
        Message.user("check the page"),
        Message.model(FunctionCallPart(id="c1", name="screenshot", arguments={})),
        Message.user(
            FunctionResponsePart(
                id="c1", name="screenshot", response=[{"type": "text", "text": "done"}, *blocks]
            )
        ),
    )


@pytest.mark.parametrize("shape", sorted(_TOOL_MEDIA))
def test_gemini_3_gets_a_tool_s_image_in_the_function_response(wire: Wire, shape: str) -> None:
    """On Gemini 3 an image a tool returned goes in the function response's parts as inline
    data (multimodal function responses), the rest of the result in its response; a
    document by URL goes as file data with its media type."""
    wire.queue(json_response(reply()))
    document = {"type": "document", "source": {"type": "url", "url": "https://x.test/a.pdf"}}
    document["source"]["media_type"] = "application/pdf"
    make(wire, "gemini-3-flash-preview").complete(
        ChatRequest(messages=_screenshot(_TOOL_MEDIA[shape], document))
    )
    sent = wire.last.json["contents"][2]["parts"][0]["functionResponse"]
    assert sent["response"] == {"output": [{"type": "text", "text": "done"}]}
    inline, linked = sent["parts"]
    inline = inline.get("inlineData", inline.get("inline_data"))
    assert inline["data"] == _PNG
    assert inline.get("mimeType", inline.get("mime_type")) == "image/png"
    linked = linked.get("fileData", linked.get("file_data"))
    assert linked.get("fileUri", linked.get("file_uri")) == "https://x.test/a.pdf"
    assert linked.get("mimeType", linked.get("mime_type")) == "application/pdf"
    assert _PNG not in str(sent["response"])  # never as base64 text


@pytest.mark.parametrize(
    ("model", "block", "why"),
    [
        ("gemini-2.5-flash", _TOOL_MEDIA["langchain"], "before Gemini 3"),
        ("gemini-3-pro-preview", {"type": "input_audio", "input_audio": {"data": _PNG}}, "audio"),
        ("gemini-3-pro", {"type": "image", "source": {"type": "file", "file_id": "f"}}, "id"),
    ],
    ids=["2.5", "audio", "file-id"],
)  # fmt: skip
def test_a_tool_s_media_gemini_cannot_read_is_refused_by_name(
    wire: Wire, model: str, block: dict[str, Any], why: str
) -> None:
    """An earlier model reads no media in a function response, and audio or a file known by
    another API's id cannot be sent: a ContentError naming the call, before anything is sent."""
    with pytest.raises(ContentError, match=f"'c1' \\(screenshot\\).*{why}"):
        make(wire, model).complete(ChatRequest(messages=_screenshot(block)))
    assert wire.sent == []


def test_the_default_model_is_current_and_its_side_query_is_accepted(wire: Wire) -> None:
    """`autocompact chat --provider gemini` defaults to gemini-3.8-flash (gemini-2.5-flash was
    shut down on 17 June 2026 by Google's deprecation page); its summary request sends the
    thinking level that model accepts (LOW, not MINIMAL), and its limits are in the table."""
    from autocompact.cli.provider_choice import DEFAULT_MODELS
    from autocompact.limits import known_limits

    default = DEFAULT_MODELS["gemini"]
    assert DEFAULT_MODELS["google"] == default
    assert not default.startswith(("gemini-1.", "gemini-2."))
    limits = known_limits(default)
    assert limits is not None
    assert (limits.context_window, limits.max_output_tokens) == (1_048_576, 65_536)
    wire.queue(json_response(reply([{"text": "summary"}])))
    make(wire, default).complete(SIDE_QUERY)
    thinking = wire.last.json["generationConfig"]["thinkingConfig"]
    assert thinking == {"include_thoughts": False, "thinking_level": "LOW"}

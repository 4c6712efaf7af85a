"""LangChain messages with fields LangChain does not validate (set by assignment or
``model_construct``): the converter names them in a ContentError, never a raw exception, and
never changes content silently (cases found by a fuzzer; each failed on the code before)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain_core")

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from autocompact.content import Usage
from autocompact.errors import ConfigError, ContentError
from autocompact.estimation import DEFAULT_IMAGE_TOKEN_ESTIMATE, estimate_content_tokens
from autocompact.integrations.langchain import (
    AutocompactMiddleware,
    from_autocompact,
    to_autocompact,
)
from autocompact.integrations.langchain._convert import completion_usage


def assigned(message: BaseMessage, **fields: Any) -> BaseMessage:
    """``message`` with ``fields`` set by plain assignment (LangChain does not validate it)."""
    for name, value in fields.items():
        setattr(message, name, value)
    return message


CALL = {"name": "f", "args": {}, "id": "c1", "type": "tool_call"}


@pytest.mark.parametrize(
    ("messages", "needle"),
    [
        pytest.param([assigned(HumanMessage("x"), content=None)], "content", id="content-none"),
        pytest.param([assigned(HumanMessage("x"), content=5)], "content", id="content-int"),
        pytest.param([assigned(HumanMessage("x"), content=[None])], "block", id="block-none"),
        pytest.param([assigned(HumanMessage("x"), content=[["a"]])], "block", id="block-list"),
        pytest.param(
            [assigned(SystemMessage("x"), content=None), HumanMessage("hi")],
            "system",
            id="system-none",
        ),
        pytest.param(
            [HumanMessage("hi"), assigned(AIMessage(""), tool_calls=[{"args": {}, "id": "c1"}])],
            "name",
            id="call-without-name",
        ),
        pytest.param(
            [HumanMessage("hi"), assigned(AIMessage(""), tool_calls=[{**CALL, "args": [1, 2]}])],
            "args",
            id="args-list",
        ),
        pytest.param(
            [HumanMessage("hi"), assigned(AIMessage(""), tool_calls=[{**CALL, "args": "xyz"}])],
            "args",
            id="args-str",
        ),
        pytest.param(
            [HumanMessage("hi"), assigned(AIMessage(""), tool_calls=["c1"])],
            "tool call",
            id="call-str",
        ),
        pytest.param(
            [HumanMessage("hi"), assigned(AIMessage(""), tool_calls=None)],
            "tool_calls",
            id="calls-none",
        ),
    ],
)
def test_unvalidated_fields_raise_content_error(messages: list[BaseMessage], needle: str) -> None:
    """Each names the message and the field in a ContentError."""
    with pytest.raises(ContentError, match=needle) as raised:
        to_autocompact(messages)
    assert raised.value.index is not None
    assert f"message {raised.value.index}" in str(raised.value)


@pytest.mark.parametrize("content", [{1, 2}, b"x"], ids=["set", "bytes"])
def test_tool_content_json_cannot_hold_converts_back_as_text(content: Any) -> None:
    """A ToolMessage content JSON has no form for converts back to a str, not a TypeError."""
    result = assigned(ToolMessage("r", tool_call_id="c1"), content=content)
    _, history = to_autocompact([HumanMessage("hi"), AIMessage("", tool_calls=[CALL]), result])
    back = from_autocompact(history)[-1]
    assert isinstance(back, ToolMessage)
    assert back.content == f'"{content}"'


@pytest.mark.parametrize(
    "usage",
    [
        {"input_tokens": "abc", "output_tokens": 7, "total_tokens": 7},
        {"input_tokens": float("inf"), "output_tokens": 7, "total_tokens": 7},
        {"input_tokens": float("nan"), "output_tokens": 7, "total_tokens": 7},
        {"input_tokens": -3, "output_tokens": 7, "total_tokens": 7},
        {"input_tokens": 0, "output_tokens": 7, "total_tokens": 7, "input_token_details": [1]},
        {"input_tokens": 0, "output_tokens": 7, "total_tokens": 7, "output_token_details": "r"},
    ],
    ids=["str", "inf", "nan", "negative", "details-list", "details-str"],
)
def test_usage_that_is_no_count_reads_as_not_reported(usage: dict[str, Any]) -> None:
    """A usage value that is not a whole number of tokens reads as 0 (not reported), as the
    other readers of provider usage read it; the valid counts are kept."""
    reply = assigned(AIMessage("ok"), usage_metadata=usage)
    assert isinstance(reply, AIMessage)
    assert completion_usage(reply) == Usage(output_tokens=7)


@pytest.mark.parametrize(
    "block",
    [
        {"type": "text", "text": None},
        {"type": "text", "text": 5},
        {"type": "reasoning", "reasoning": None},
        {"type": "thinking", "thinking": 5, "signature": "s"},
    ],
    ids=[
        "text-none",
        "text-int",
        "reasoning-none",
        "thinking-int",
    ],
)
def test_a_block_that_would_change_raises(block: dict[str, Any]) -> None:
    """A block whose text is no str raises a ContentError naming it instead of coming back
    changed (documented as lossless)."""
    message = assigned(HumanMessage("x"), content=[block])
    with pytest.raises(ContentError, match=str(block["type"])):
        to_autocompact([message])


def test_default_detail_and_media_keys_that_are_carried_still_convert() -> None:
    """``detail: "auto"`` (the default) and the keys a part holds convert as before."""
    human = HumanMessage(
        content=[
            {"type": "image_url", "image_url": {"url": "https://x.test/a.png", "detail": "auto"}},
            {"type": "file", "base64": "QUJD", "mime_type": "application/pdf", "filename": "a"},
            {"type": "image", "source_type": "url", "url": "https://x.test/b.png"},
        ]
    )
    _, (message,) = to_autocompact([human])
    assert len(message.parts) == 3


@pytest.mark.parametrize(
    "block",
    [
        {"type": "image_url", "image_url": {"url": "https://x.test/a.png", "detail": "high"}},
        {"type": "image", "url": "https://x.test/a.png", "cache_control": {"type": "ephemeral"}},
        {"type": "image", "base64": "QUJD", "mime_type": "image/png", "filename": "a.png"},
        {"type": "image", "url": "https://x.test/a.png", "id": "ig_1", "extras": {"k": "v"}},
        {
            "type": "document",
            "source": {"type": "url", "url": "https://x.test/a.pdf"},
            "cache_control": {"type": "ephemeral"},
        },
    ],
    ids=["url-detail", "cache-control", "filename", "id-extras", "document-cache-control"],
)
def test_a_media_block_with_more_than_its_part_is_carried_beside_it(block: dict[str, Any]) -> None:
    """A media block with keys its part does not hold (a detail, prompt caching, a file name,
    an id and ``extras``) is the image or document part — one image in the estimate — with the
    block carried beside it, and comes back byte-exact; it was refused."""
    message = assigned(AIMessage("x"), content=[block])
    _, history = to_autocompact([message])
    assert [p.kind for p in history[0].parts][1:] == ["opaque"]
    assert history[0].parts[0].kind in ("image", "document")
    assert estimate_content_tokens(history) < DEFAULT_IMAGE_TOKEN_ESTIMATE + 100
    (back,) = from_autocompact(history)
    assert back.content == [block]


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        pytest.param({"hooks": print}, r"one hook: hooks=\[hook\]", id="one-hook"),
        pytest.param(
            {"hooks": [print, 3]}, r"hooks\[1\] must be a callable", id="hook-not-callable"
        ),
        pytest.param({"hooks": None}, "hooks must be a sequence", id="hooks-none"),
        pytest.param({"context_window": 0}, "at least 1 token, got 0", id="window-0"),
        pytest.param({"context_window": -1}, "at least 1 token, got -1", id="window-negative"),
        pytest.param({"image_token_estimate": -5}, "image_token_estimate", id="image-estimate"),
        pytest.param({"clear_tool_outputs": "no"}, "clear_tool_outputs", id="clear-flag"),
    ],
)
def test_the_middleware_checks_its_arguments_when_built(
    options: dict[str, Any], needle: str
) -> None:
    """A wrong argument is a ConfigError naming it when the middleware is built, as ChatSession
    checks them (hooks=print was a bare TypeError; context_window=0 was accepted, then refused at
    the first model call with another message than -1)."""
    with pytest.raises(ConfigError, match=needle):
        AutocompactMiddleware(**{"context_window": 16_000, **options})

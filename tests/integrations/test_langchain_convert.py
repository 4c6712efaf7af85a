"""Lossless conversion between LangChain messages and autocompact messages."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain_core")

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from pydantic import Field

from autocompact.content import FunctionResponsePart, ImagePart, ThinkingPart
from autocompact.errors import ContentError
from autocompact.integrations.langchain import (
    LangChainProvider,
    bounded_model,
    from_autocompact,
    to_autocompact,
)
from autocompact.integrations.langchain._provider import completion_of

text = st.text(min_size=1, max_size=40)
ident = st.text("abcdef0123456789", min_size=4, max_size=12)
b64 = st.text(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", min_size=4, max_size=40
)
mime = st.sampled_from(["image/png", "image/jpeg", "image/webp"])

text_block = text.map(lambda t: {"type": "text", "text": t})
image_block = st.one_of(
    st.builds(lambda d, m: {"type": "image", "base64": d, "mime_type": m}, b64, mime),
    st.builds(
        lambda u, m: {"type": "image", "url": f"https://example.test/{u}.png", "mime_type": m},
        ident,
        mime,
    ),
)
file_block = st.builds(
    lambda d, n: {"type": "file", "base64": d, "mime_type": "application/pdf", "filename": n},
    b64,
    ident,
)
reasoning_block = st.one_of(
    text.map(lambda t: {"type": "reasoning", "reasoning": t}),
    st.builds(lambda t, s: {"type": "thinking", "thinking": t, "signature": s}, text, ident),
    b64.map(lambda d: {"type": "redacted_thinking", "data": d}),
)
args = st.dictionaries(ident, st.one_of(st.integers(), text, st.booleans()), max_size=3)


def content(blocks: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[Any]:
    """A string, or a list of at least two blocks (one text block comes back as a string)."""
    return st.one_of(text, st.lists(blocks, min_size=2, max_size=4))


@st.composite
def conversations(draw: st.DrawFn) -> list[BaseMessage]:
    """A conversation with every kind of message and block the converter promises to keep."""
    out: list[BaseMessage] = []
    if draw(st.booleans()):
        out.append(SystemMessage(content=draw(text)))
    for turn in range(draw(st.integers(1, 4))):
        out.append(
            HumanMessage(content=draw(content(st.one_of(text_block, image_block, file_block))))
        )
        for step in range(draw(st.integers(0, 2))):
            ids = [f"c{turn}-{step}-{i}" for i in range(draw(st.integers(1, 3)))]
            body = draw(st.one_of(st.just(""), content(st.one_of(text_block, reasoning_block))))
            calls = [
                {"name": draw(ident), "args": draw(args), "id": i, "type": "tool_call"} for i in ids
            ]
            out.append(AIMessage(content=body, tool_calls=calls))
            for i, call in zip(ids, calls, strict=True):
                result = draw(st.one_of(text, st.lists(text_block, min_size=2, max_size=3)))
                status = draw(st.sampled_from(["success", "error"]))
                out.append(
                    ToolMessage(content=result, tool_call_id=i, name=call["name"], status=status)
                )
        out.append(AIMessage(content=draw(content(st.one_of(text_block, reasoning_block)))))
    return out


def essence(message: BaseMessage) -> tuple[Any, ...]:
    """What a round trip must keep: type, content, tool calls, tool result fields."""
    extra: tuple[Any, ...] = ()
    if isinstance(message, AIMessage):
        extra = tuple((c["id"], c["name"], c["args"]) for c in message.tool_calls)
    if isinstance(message, ToolMessage):
        extra = (message.tool_call_id, message.name, message.status)
    return (type(message).__name__, message.content, extra)


@settings(max_examples=150, deadline=None)
@given(conversations())
def test_round_trip_keeps_every_message(messages: list[BaseMessage]) -> None:
    """LangChain → autocompact → LangChain gives the same messages (content and tool pairs)."""
    system, history = to_autocompact(messages)
    back = from_autocompact(history, system=system)
    assert [essence(m) for m in back] == [essence(m) for m in messages]


@settings(max_examples=100, deadline=None)
@given(conversations())
def test_tool_runs_become_one_user_message(messages: list[BaseMessage]) -> None:
    """Each run of ToolMessages is one user message of function responses, in call order."""
    _, history = to_autocompact(messages)
    runs = sum(
        1
        for i, m in enumerate(messages)
        if isinstance(m, ToolMessage) and not isinstance(messages[i - 1], ToolMessage)
    )
    grouped = [m for m in history if m.function_responses]
    assert len(grouped) == runs
    assert all(isinstance(p, FunctionResponsePart) for m in grouped for p in m.parts)


def test_openai_and_anthropic_block_forms_are_read() -> None:
    """image_url data URLs and Anthropic source blocks become the same image parts."""
    human = HumanMessage(
        content=[
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,QUJD"}},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/gif", "data": "R0"},
            },
        ]
    )
    _, (message,) = to_autocompact([human])
    assert message.parts == (
        ImagePart(media_type="image/jpeg", data="QUJD"),
        ImagePart(media_type="image/gif", data="R0"),
    )


def test_anthropic_tool_use_blocks_are_the_tool_calls() -> None:
    """A tool_use block that mirrors a tool call is carried by the call, not duplicated."""
    ai = AIMessage(
        content=[
            {"type": "thinking", "thinking": "plan", "signature": "sig"},
            {"type": "tool_use", "id": "t1", "name": "ls", "input": {}},
        ],
        tool_calls=[{"name": "ls", "args": {}, "id": "t1", "type": "tool_call"}],
    )
    _, (message,) = to_autocompact([ai])
    assert isinstance(message.parts[0], ThinkingPart)
    assert message.parts[0].signature == "sig"
    assert [c.id for c in message.function_calls] == ["t1"]


@pytest.mark.parametrize(
    ("message", "needle"),
    [
        pytest.param(
            AIMessage(content=[{"type": "server_tool_call", "id": "x", "args": {"q": {1, 2}}}]),
            r"server_tool_call.*JSON cannot carry.*\['args'\]\['q'\]: a set",
            id="block-json-cannot-hold",
        ),
        pytest.param(
            HumanMessage(content=[{"type": "audio", "base64": "UklG", "mime_type": "audio/wav"}]),
            "'audio'.*cannot size it",
            id="audio",
        ),
        pytest.param(
            AIMessage(content=[{"type": "tool_use", "id": "t9", "name": "ls", "input": {}}]),
            "'tool_use'.*not in the message's tool_calls",
            id="call-block-without-its-call",
        ),
        pytest.param(
            AIMessage(content=[{"text": "no type"}]), "None.*needs a type", id="block-without-type"
        ),
        pytest.param(ChatMessage(role="critic", content="x"), "ChatMessage", id="chat-message"),
        pytest.param(
            AIMessage(content="", tool_calls=[{"name": "ls", "args": {}, "id": None}]),
            "no id",
            id="call-without-id",
        ),
    ],
)
def test_unexpressible_parts_raise(message: BaseMessage, needle: str) -> None:
    """A part the engine cannot hold raises a ContentError naming it; nothing is dropped."""
    with pytest.raises(ContentError, match=needle):
        to_autocompact([HumanMessage(content="hi"), message])


def test_system_message_after_the_start_raises() -> None:
    """Only a leading SystemMessage is the system prompt; a later one is refused."""
    with pytest.raises(ContentError, match="SystemMessage"):
        to_autocompact([HumanMessage(content="a"), SystemMessage(content="b")])


def test_completion_reads_usage_and_finish_reason() -> None:
    """usage_metadata and the provider's stop reason become autocompact usage and finish."""
    reply = AIMessage(
        content="ok",
        usage_metadata={
            "input_tokens": 120,
            "output_tokens": 7,
            "total_tokens": 127,
            "input_token_details": {"cache_read": 100},
        },
        response_metadata={"stop_reason": "max_tokens"},
    )
    completion = completion_of(reply)
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.cached_tokens) == (120, 100)
    assert completion.finish_reason is not None
    assert completion.finish_reason.value == "length"


def test_bounded_model_touches_only_declared_fields() -> None:
    """The cap and thinking-off are applied only to fields the chat model has."""
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel

    class Capped(FakeMessagesListChatModel):
        max_tokens: int | None = None
        thinking: dict[str, Any] | None = Field(
            default_factory=lambda: {"type": "enabled", "budget_tokens": 1024}
        )

    model = Capped(responses=[AIMessage(content="x")])
    bounded, applied = bounded_model(model, cap=20_000, thinking=False)
    assert applied == {"max_tokens": 20_000, "thinking": {"type": "disabled"}}
    assert model.max_tokens is None
    assert bounded.max_tokens == 20_000
    plain = FakeMessagesListChatModel(responses=[AIMessage(content="x")])
    assert bounded_model(plain, cap=20_000, thinking=False) == (plain, {})
    assert LangChainProvider(plain).model == "FakeMessagesListChatModel"


def test_the_integration_names_its_extra_when_langchain_is_missing() -> None:
    """Without langchain installed, importing the integration says which extra installs it."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "sys.modules['langchain'] = None\n"
        "sys.modules['langchain.agents'] = None\n"
        "try:\n"
        "    import autocompact.integrations.langchain\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out.startswith("MissingDependencyError")
    assert 'pip install "autocompact[langchain]"' in out

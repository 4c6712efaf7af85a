"""Tests of autocompact.convert: OpenAI and Anthropic message dicts <-> the content model."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autocompact.content import (
    DocumentPart,
    FunctionCallPart,
    FunctionResponsePart,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
)
from autocompact.convert import (
    from_anthropic_message,
    from_anthropic_messages,
    from_openai_messages,
    parse_data_url,
    response_text,
    to_anthropic_messages,
    to_openai_messages,
)
from autocompact.errors import ContentError

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "claude-code-sessions"

# -- OpenAI ------------------------------------------------------------------------------------


def test_openai_full_conversation_reads_every_role() -> None:
    """System, user, assistant with tool calls, tool results and a follow-up user turn are read."""
    msgs = [
        {"role": "system", "content": "be brief"},
        {"role": "developer", "content": [{"type": "text", "text": "no jokes"}]},
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "rain"},
        {"role": "user", "content": "and tomorrow?"},
        {"role": "assistant", "content": "sun", "reasoning_content": "check forecast"},
    ]
    system, history = from_openai_messages(msgs)
    assert system == "be brief\n\nno jokes"
    assert history == [
        Message.user("weather?"),
        Message.model(FunctionCallPart(id="c1", name="get_weather", arguments={"city": "Oslo"})),
        Message.user(
            FunctionResponsePart(id="c1", name="get_weather", response="rain"),
            TextPart(text="and tomorrow?"),
        ),
        Message.model(ThinkingPart(text="check forecast"), TextPart(text="sun")),
    ]


def test_openai_writes_tool_messages_before_user_content() -> None:
    """A user turn with a function response and text becomes a tool message then a user one."""
    history = [
        Message.model(FunctionCallPart(id="c1", name="f", arguments={"a": 1})),
        Message.user(FunctionResponsePart(id="c1", name="f", response={"ok": True}), "next"),
    ]
    out = to_openai_messages(history, system="sys")
    assert out == [
        {"role": "system", "content": "sys"},
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"ok": true}'},
        {"role": "user", "content": "next"},
    ]
    assert "content" not in out[1]  # unset, not null


def test_openai_images_and_files_round_trip() -> None:
    """image_url data URLs and plain URLs, and file parts, map to image and document parts."""
    msgs = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,QUJD"}},
                {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
                {
                    "type": "file",
                    "file": {"file_data": "data:application/pdf;base64,UERG", "filename": "a.pdf"},
                },
            ],
        }
    ]
    _, history = from_openai_messages(msgs)
    assert history[0].parts[1:] == (
        ImagePart(media_type="image/jpeg", data="QUJD"),
        ImagePart(url="https://x.test/a.png"),
        DocumentPart(media_type="application/pdf", data="UERG", title="a.pdf"),
    )
    assert to_openai_messages(history) == msgs


@pytest.mark.parametrize(
    ("msgs", "needle"),
    [
        pytest.param([{"role": "function", "content": "x"}], "'function'", id="role"),
        pytest.param(
            [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}],
            "'input_audio'",
            id="user-part",
        ),
        pytest.param(
            [{"role": "user", "content": "a"}, {"role": "system", "content": "late"}],
            "system message after",
            id="late-system",
        ),
        pytest.param(
            [
                {
                    "role": "assistant",
                    "tool_calls": [
                        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{"}}
                    ],
                }
            ],
            "not valid JSON",
            id="bad-arguments",
        ),
        pytest.param(
            [{"role": "user", "content": [{"type": "file", "file": {"file_id": "file-1"}}]}],
            "file_data",
            id="file-id",
        ),
    ],
)
def test_openai_unknown_or_malformed_input_raises_with_index(
    msgs: list[dict[str, Any]], needle: str
) -> None:
    """Unknown roles/part types and malformed calls raise ContentError naming index and type."""
    with pytest.raises(ContentError, match=needle) as info:
        from_openai_messages(msgs)
    assert info.value.index == len(msgs) - 1
    assert f"message {len(msgs) - 1}" in str(info.value)


def test_openai_thinking_modes() -> None:
    """Thinking goes to reasoning_content, is dropped on request, and redacted thinking raises."""
    history = [Message.model(ThinkingPart(text="hmm"), "hi")]
    assert to_openai_messages(history)[0]["reasoning_content"] == "hmm"
    assert "reasoning_content" not in to_openai_messages(history, thinking="drop")[0]
    with pytest.raises(ContentError, match="message 0"):
        to_openai_messages(history, thinking="error")
    redacted = [Message.model(ThinkingPart(text="", signature="x", redacted=True), "hi")]
    with pytest.raises(ContentError, match="redacted"):
        to_openai_messages(redacted)


def test_openai_rejects_parts_a_role_cannot_carry() -> None:
    """An image in an assistant message, or a call in a user message, raises instead of dropping."""
    with pytest.raises(ContentError, match="image"):
        to_openai_messages([Message.model(ImagePart(data="QQ=="))])
    with pytest.raises(ContentError, match="function_call"):
        to_openai_messages([Message.user(FunctionCallPart(id="c", name="f"))])


# -- Anthropic ---------------------------------------------------------------------------------


def test_anthropic_reads_every_block_type() -> None:
    """Text, thinking, redacted thinking, tool_use, tool_result, image and document are read."""
    msgs = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "plan", "signature": "sig"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "text", "text": "calling"},
                {"type": "tool_use", "id": "t1", "name": "Read", "input": {"path": "a"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "body", "is_error": True},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/gif", "data": "R0lG"},
                },
                {
                    "type": "document",
                    "source": {"type": "url", "url": "https://x.test/d.pdf"},
                    "title": "d",
                },
            ],
        },
    ]
    system, history = from_anthropic_messages(msgs, system=[{"type": "text", "text": "sys"}])
    assert system == "sys"
    assert history == [
        Message.user("hi"),
        Message.model(
            ThinkingPart(text="plan", signature="sig"),
            ThinkingPart(text="", signature="opaque", redacted=True),
            TextPart(text="calling"),
            FunctionCallPart(id="t1", name="Read", arguments={"path": "a"}),
        ),
        Message.user(
            FunctionResponsePart(id="t1", name="Read", response="body", is_error=True),
            ImagePart(media_type="image/gif", data="R0lG"),
            DocumentPart(url="https://x.test/d.pdf", title="d"),
        ),
    ]
    out = to_anthropic_messages(history)
    assert out[1]["content"] == msgs[1]["content"]
    assert out[2]["content"] == msgs[2]["content"]


def test_anthropic_tool_result_block_content_is_kept() -> None:
    """A tool_result with a list of blocks keeps them and writes them back unchanged."""
    blocks = [
        {"type": "text", "text": "a"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}},
    ]
    msg = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "x", "content": blocks}],
    }
    part = from_anthropic_message(msg).parts[0]
    assert isinstance(part, FunctionResponsePart)
    assert part.name == "unknown"
    assert part.response == blocks
    assert to_anthropic_messages([Message.user(part)])[0] == msg


@pytest.mark.parametrize(
    ("block", "needle"),
    [
        pytest.param({"type": "server_tool_use", "id": "s"}, "'server_tool_use'", id="block"),
        pytest.param(
            {"type": "image", "source": {"type": "file", "file_id": "f"}}, "'file'", id="source"
        ),
        pytest.param(
            {"type": "tool_result", "tool_use_id": "x", "content": [{"type": "search_result"}]},
            "'search_result'",
            id="tool-result-block",
        ),
        pytest.param({"type": "tool_use", "id": "t", "input": {}}, "'name'", id="missing-field"),
    ],
)
def test_anthropic_unknown_blocks_raise_with_index(block: dict[str, Any], needle: str) -> None:
    """Unknown block and source types raise ContentError naming the message index and the type."""
    msgs = [{"role": "user", "content": "a"}, {"role": "assistant", "content": [block]}]
    with pytest.raises(ContentError, match=needle) as info:
        from_anthropic_messages(msgs)
    assert info.value.index == 1
    assert "message 1" in str(info.value)


def test_anthropic_rejects_system_role_and_misplaced_parts() -> None:
    """A system role in messages raises; a thinking part in a user message cannot be written."""
    with pytest.raises(ContentError, match="'system'"):
        from_anthropic_messages([{"role": "system", "content": "x"}])
    with pytest.raises(ContentError, match="thinking"):
        to_anthropic_messages([Message.user(ThinkingPart(text="x"))])


def test_helpers() -> None:
    """Data URLs parse and function responses flatten to text."""
    assert parse_data_url("data:image/png;base64,AAA") == ("image/png", "AAA")
    assert parse_data_url("https://x") is None
    assert response_text([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]) == "ab"
    assert response_text({"k": 1}) == '{"k": 1}'


@pytest.mark.skipif(not DATA.is_dir(), reason="shared Claude Code sessions not present")
def test_real_claude_code_sessions_convert_and_round_trip() -> None:
    """Every conversation line of the real Claude Code sessions converts and writes back."""
    seen = 0
    for path in sorted(DATA.glob("*.jsonl.gz")):
        names: dict[str, str] = {}
        with gzip.open(path, "rt") as fh:
            for line in fh:
                entry = json.loads(line)
                if entry.get("type") not in ("user", "assistant"):
                    continue
                message = from_anthropic_message(entry["message"], index=seen, tool_names=names)
                back = to_anthropic_messages([message])[0]
                assert from_anthropic_message(back, tool_names=dict(names)) == message
                seen += 1
    assert seen > 100


# -- round-trip properties ---------------------------------------------------------------------

_text = st.text(min_size=1, max_size=20)
_ids = st.text(alphabet="abcdefgh0123456789", min_size=1, max_size=8)
_json_args = st.dictionaries(
    st.text(min_size=1, max_size=5), st.one_of(st.integers(), st.text(max_size=5), st.booleans())
)
_image = st.one_of(
    st.builds(ImagePart, media_type=st.sampled_from(["image/png", "image/jpeg"]), data=_ids),
    st.builds(ImagePart, url=st.just("https://x.test/i.png")),
)


@st.composite
def _conversation(draw: st.DrawFn, *, anthropic: bool) -> list[Message]:
    history: list[Message] = []
    pending: list[FunctionCallPart] = []
    for turn in range(draw(st.integers(1, 6))):
        if turn % 2 == 0:
            parts: list[Any] = [
                FunctionResponsePart(
                    id=c.id,
                    name=c.name,
                    response=draw(_text),
                    is_error=draw(st.booleans()) if anthropic else False,
                )
                for c in pending
            ]
            parts += draw(st.lists(st.one_of(st.builds(TextPart, text=_text), _image), max_size=3))
            if not parts:
                parts = [TextPart(text=draw(_text))]
            history.append(Message(role="user", parts=tuple(parts)))
        else:
            model_parts: list[Any] = []
            if draw(st.booleans()):
                sig = draw(st.one_of(st.none(), _ids)) if anthropic else None
                model_parts.append(ThinkingPart(text=draw(_text), signature=sig))
            model_parts += draw(
                st.lists(st.builds(TextPart, text=_text), max_size=2 if anthropic else 1)
            )
            pending = [
                FunctionCallPart(id=f"{turn}-{i}", name=draw(_ids), arguments=draw(_json_args))
                for i in range(draw(st.integers(0, 2)))
            ]
            model_parts += pending
            if not model_parts:
                model_parts = [TextPart(text=draw(_text))]
            history.append(Message(role="model", parts=tuple(model_parts)))
    return history


@settings(max_examples=60, deadline=None)
@given(_conversation(anthropic=False), st.one_of(st.none(), _text))
def test_openai_round_trip_property(history: list[Message], system: str | None) -> None:
    """from_openai(to_openai(h)) == h for conversations in OpenAI's canonical part order."""
    assert from_openai_messages(to_openai_messages(history, system)) == (system, history)


@settings(max_examples=60, deadline=None)
@given(_conversation(anthropic=True))
def test_anthropic_round_trip_property(history: list[Message]) -> None:
    """from_anthropic(to_anthropic(h)) == h for any alternating conversation."""
    assert from_anthropic_messages(to_anthropic_messages(history)) == (None, history)

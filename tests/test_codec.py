"""The neutral JSON codec: every part kind round-trips; bad input raises ContentError."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autocompact import (
    ContentError,
    DocumentPart,
    FunctionCallPart,
    FunctionResponsePart,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
)
from autocompact.codec import (
    history_from_dicts,
    history_to_dicts,
    message_from_dict,
    message_to_dict,
)

PARTS = {
    "text": TextPart(text="héllo\nworld"),
    "thinking": ThinkingPart(text="hmm", signature="sig==", redacted=True),
    "function_call": FunctionCallPart(id="c1", name="read", arguments={"path": "a.py", "n": [1]}),
    "function_response": FunctionResponsePart(
        id="c1", name="read", response={"lines": ["x"], "ok": True}, is_error=True
    ),
    "image": ImagePart(media_type="image/jpeg", data="QUJD"),
    "image_url": ImagePart(url="https://example.invalid/cat.png"),
    "document": DocumentPart(url="https://example.invalid/a.pdf", title="A"),
}


@pytest.mark.parametrize("name", list(PARTS), ids=list(PARTS))
def test_every_part_kind_round_trips(name: str) -> None:
    """Each part kind survives message_to_dict → JSON text → message_from_dict unchanged."""
    part = PARTS[name]
    role = "model" if isinstance(part, (FunctionCallPart, ThinkingPart)) else "user"
    msg = Message(role=role, parts=(part,))
    data = json.loads(json.dumps(message_to_dict(msg)))
    assert data["parts"][0]["kind"] == part.kind
    assert message_from_dict(data) == msg


def test_history_round_trips() -> None:
    """A whole history round-trips through history_to_dicts / history_from_dicts."""
    history = [
        Message.user("do it", PARTS["image"]),
        Message.model(PARTS["thinking"], PARTS["function_call"]),
        Message.user(PARTS["function_response"]),
        Message.model("done", PARTS["document"]),
    ]
    assert history_from_dicts(json.loads(json.dumps(history_to_dicts(history)))) == history


_texts = st.text(max_size=30)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | _texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_texts, inner, max_size=3),
    max_leaves=8,
)
_part = st.one_of(
    st.builds(TextPart, text=_texts),
    st.builds(ThinkingPart, text=_texts, signature=st.none() | _texts, redacted=st.booleans()),
    st.builds(
        FunctionCallPart,
        id=_texts,
        name=_texts,
        arguments=st.dictionaries(_texts, _json, max_size=3),
    ),
    st.builds(FunctionResponsePart, id=_texts, name=_texts, response=_json, is_error=st.booleans()),
    st.builds(ImagePart, media_type=_texts, data=st.none() | _texts, url=st.none() | _texts),
    st.builds(
        DocumentPart,
        media_type=_texts,
        data=st.none() | _texts,
        url=st.none() | _texts,
        title=st.none() | _texts,
    ),
)


@given(st.sampled_from(["user", "model"]), st.lists(_part, max_size=5))
def test_any_message_round_trips(role: str, parts: list[Any]) -> None:
    """Any message of any parts round-trips through its JSON text."""
    msg = Message(role=role, parts=tuple(parts))  # type: ignore[arg-type]
    assert message_from_dict(json.loads(json.dumps(message_to_dict(msg)))) == msg


@pytest.mark.parametrize("kind", ["video", "audio", None, 3])
def test_unknown_kind_raises_content_error_naming_index(kind: object) -> None:
    """A part of unknown kind raises ContentError naming the message, the part and the kind."""
    data = [
        {"role": "user", "parts": [{"kind": "text", "text": "ok"}]},
        {"role": "model", "parts": [{"kind": "text", "text": "ok"}, {"kind": kind}]},
    ]
    with pytest.raises(ContentError) as info:
        history_from_dicts(data)
    assert info.value.index == 1
    assert "message 1, part 1" in str(info.value)
    assert repr(kind) in str(info.value)


@pytest.mark.parametrize("role", ["system", "assistant", None])
def test_unknown_role_raises_content_error(role: object) -> None:
    """A message with a role other than user/model raises ContentError naming the role."""
    with pytest.raises(ContentError, match="role"):
        message_from_dict({"role": role, "parts": []}, index=4)


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ("not a dict", "must be a JSON object"),
        ({"role": "user"}, "'parts' must be a list"),
        ({"role": "user", "parts": ["x"]}, "a part must be a JSON object"),
        ({"role": "user", "parts": [{"kind": "text"}]}, "missing 'text'"),
        (
            {"role": "model", "parts": [{"kind": "function_call", "id": "1", "name": "f"}]},
            "arguments",
        ),
        ({"role": "user", "parts": [{"kind": "text", "text": 5}]}, "wrong type"),
        (
            {"role": "user", "parts": [{"kind": "thinking", "text": "", "redacted": "yes"}]},
            "'redacted'",
        ),
    ],
    ids=[
        "not-object",
        "no-parts",
        "part-not-object",
        "missing-text",
        "missing-args",
        "bad-type",
        "bad-bool",
    ],
)
def test_malformed_dicts_raise_content_error(data: object, needle: str) -> None:
    """Malformed message dicts raise ContentError with a message saying which field is wrong."""
    with pytest.raises(ContentError, match=needle):
        message_from_dict(data)


def test_optional_fields_default_when_absent() -> None:
    """Optional fields may be left out of the JSON form."""
    msg = message_from_dict({"role": "user", "parts": [{"kind": "image", "url": "u"}]})
    assert msg.parts == (ImagePart(url="u"),)

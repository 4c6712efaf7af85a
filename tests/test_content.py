"""The content model: parts, messages, validation of kinds, roles and history shape."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from autocompact import (
    ConfigError,
    ContentError,
    DocumentPart,
    FunctionCallPart,
    FunctionResponsePart,
    ImagePart,
    Message,
    OpaquePart,
    TextPart,
    ThinkingPart,
    Usage,
)
from autocompact.chat import AsyncChatSession, ChatSession
from autocompact.compaction import validate_history
from autocompact.content import as_message
from autocompact.sessions.stores import open_store
from autocompact.testing import FakeProvider


def test_message_helpers_build_text_parts() -> None:
    """Message.user/model turn strings into text parts and keep parts as given."""
    call = FunctionCallPart(id="1", name="ls")
    msg = Message.model("hi", call)
    assert msg.role == "model"
    assert msg.parts == (TextPart(text="hi"), call)
    assert msg.text == "hi"
    assert msg.function_calls == (call,)


def test_parts_list_is_stored_as_tuple() -> None:
    """A list of parts is accepted and stored as a tuple (messages stay immutable)."""
    msg = Message(role="user", parts=[TextPart(text="a")])  # type: ignore[arg-type]
    assert isinstance(msg.parts, tuple)


def test_text_excludes_thinking() -> None:
    """Message.text joins the text parts only, not the thinking."""
    msg = Message.model(ThinkingPart(text="secret"), "visible")
    assert msg.text == "visible"


def test_function_responses_property() -> None:
    """function_responses lists the responses in a user message."""
    resp = FunctionResponsePart(id="1", name="ls", response="a b")
    assert Message.user(resp).function_responses == (resp,)


@pytest.mark.parametrize(
    "bad",
    [object(), "text", {"kind": "text", "text": "x"}, None],
    ids=["object", "str", "dict", "None"],
)
def test_unknown_part_kind_raises_content_error(bad: object) -> None:
    """A part that is not one of the six kinds raises ContentError naming what it got."""
    with pytest.raises(ContentError, match=type(bad).__name__):
        Message(role="user", parts=(bad,))  # type: ignore[arg-type]


@pytest.mark.parametrize("role", ["system", "assistant", "tool", ""])
def test_unknown_role_raises_content_error(role: str) -> None:
    """Roles other than user/model raise ContentError that names the role and says what to use."""
    with pytest.raises(ContentError, match=repr(role)):
        Message(role=role, parts=(TextPart(text="x"),))  # type: ignore[arg-type]


def test_as_message_accepts_str_message_and_parts() -> None:
    """as_message makes a user message from a string or parts and passes a Message through."""
    msg = Message.model("x")
    assert as_message(msg) is msg
    assert as_message("hi") == Message.user("hi")
    assert as_message([TextPart(text="hi")]) == Message.user("hi")


def test_history_starting_with_a_function_response_is_rejected() -> None:
    """validate_history refuses a history whose first message is a function response."""
    history = [Message.user(FunctionResponsePart(id="1", name="ls", response="x"))]
    with pytest.raises(ContentError, match="function response") as info:
        validate_history(history)
    assert info.value.index == 0


@pytest.mark.parametrize("cls", [ChatSession, AsyncChatSession])
def test_session_rejects_history_starting_with_function_response(cls: type) -> None:
    """Both session classes refuse such a history at construction."""
    history = [
        Message.user(FunctionResponsePart(id="1", name="ls", response="x")),
        Message.model("ok"),
    ]
    with pytest.raises(ContentError, match="start the history with a user message"):
        cls(FakeProvider(), context_window=32_000, history=history)


def test_valid_histories_pass_validation() -> None:
    """An empty history and one starting with a user message are accepted."""
    validate_history([])
    validate_history([Message.user("hi"), Message.model("hello")])


def test_parts_are_frozen() -> None:
    """Parts and messages cannot be mutated after creation."""
    part = TextPart(text="a")
    with pytest.raises(AttributeError):
        part.text = "b"  # type: ignore[misc]
    msg = Message.user("a")
    with pytest.raises(AttributeError):
        msg.role = "model"  # type: ignore[misc]


def test_media_defaults() -> None:
    """Images and documents default to PNG and PDF media types."""
    assert ImagePart(url="u").media_type == "image/png"
    assert DocumentPart(url="u").media_type == "application/pdf"


def test_usage_total() -> None:
    """Usage.total_tokens is prompt plus output."""
    assert Usage(prompt_tokens=10, output_tokens=5).total_tokens == 15


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: ImagePart(data=5), "ImagePart.data"),  # type: ignore[arg-type]
        (lambda: ImagePart(url=b"http://x"), "ImagePart.url"),  # type: ignore[arg-type]
        (lambda: ImagePart(media_type=None, data="aGk="), "ImagePart.media_type"),  # type: ignore[arg-type]
        (lambda: DocumentPart(data="aGk=", title=5), "DocumentPart.title"),  # type: ignore[arg-type]
        (lambda: DocumentPart(media_type=5), "DocumentPart.media_type"),  # type: ignore[arg-type]
        (lambda: ThinkingPart(text="t", redacted="no"), "ThinkingPart.redacted"),  # type: ignore[arg-type]
        (
            lambda: FunctionResponsePart(id="1", name="f", response="r", is_error="x"),  # type: ignore[arg-type]
            "FunctionResponsePart.is_error",
        ),
        (lambda: OpaquePart(provider=5, family="b", payload={}), "OpaquePart.provider"),  # type: ignore[arg-type]
        (lambda: OpaquePart(provider="a", family="b", payload=5), "OpaquePart.payload"),  # type: ignore[arg-type]
        (
            lambda: OpaquePart(provider="a", family="b", payload={}, summary=5),  # type: ignore[arg-type]
            "OpaquePart.summary",
        ),
        (lambda: OpaquePart(provider="a", family="b", payload={}, tokens="9"), "OpaquePart.tokens"),  # type: ignore[arg-type]
        (lambda: OpaquePart(provider="a", family="b", payload={}, tokens=-5), "OpaquePart.tokens"),
        (
            lambda: OpaquePart(provider="a", family="b", payload={}, tokens=float("inf")),  # type: ignore[arg-type]
            "OpaquePart.tokens",
        ),
    ],
)
def test_part_fields_are_checked_when_the_part_is_made(build: Any, field: str) -> None:
    """A part field of the wrong type is refused where the part is made, naming the field.

    It was accepted, and failed far from the cause: an OpaquePart at the first estimate (a raw
    TypeError or OverflowError inside send or compress), the others when the session they were
    stored in was read back (the whole saved session unreadable).
    """
    with pytest.raises(ContentError, match=field.replace(".", r"\.")):
        build()


def test_a_stored_session_with_a_bad_media_part_stays_readable(tmp_path: Path) -> None:
    """The bad part never reaches the store: the session saved so far reads back whole."""
    store = open_store(str(tmp_path))
    session = ChatSession(FakeProvider(), context_window=100_000, store=store, session_id="s1")
    session.send("hello")
    with pytest.raises(ContentError, match=r"ImagePart\.data"):
        session.send(Message.user("look", ImagePart(data=5)))  # type: ignore[arg-type]
    again = ChatSession(
        FakeProvider(), context_window=100_000, store=open_store(str(tmp_path)), session_id="s1"
    )
    again.send("still there?")
    assert [m.text for m in again.history][:2] == ["hello", session.history[1].text]


@pytest.mark.parametrize("parts", [None, 5, "hello", {"text": "hi"}], ids=repr)
def test_message_parts_that_are_no_sequence_of_parts(parts: Any) -> None:
    """Message.parts of None or a number was a raw TypeError ("'NoneType' object is not
    iterable"); a str (read letter by letter) or a dict (by its keys) gave "unknown part 'str'".
    Each is a ContentError naming Message.parts."""
    with pytest.raises(ContentError, match=r"Message\.parts must be a sequence of parts"):
        Message(role="user", parts=parts)


@pytest.mark.parametrize(
    ("message", "said"),
    [
        (Message(role="model", parts=(TextPart(text="I decided for you."),)), "role 'model'"),
        ("", "empty message"),
        ("  \n\t", "empty message"),
        (Message(role="user", parts=()), "empty message"),
    ],
    ids=["model-role", "empty", "blank", "no-parts"],
)
def test_a_session_sends_only_a_user_turn_with_something_in_it(message: Any, said: str) -> None:
    """A model message passed to send() was appended as a second model turn in a row, and an
    empty one was sent as an empty user turn (which providers refuse or answer with nothing).
    Each is a ContentError before anything is sent, on every send method, and the history is
    as it was."""
    import asyncio

    fake = FakeProvider()
    session = ChatSession(fake, context_window=100_000)
    session.send("hello")
    before = session.history
    for send in (session.send, lambda m: list(session.send_stream(m))):
        with pytest.raises(ContentError, match=said):
            send(message)
    assert session.history == before
    assert len(fake.requests) == 1
    with pytest.raises(ConfigError, match="turn_id must be a str"):
        session.send("hi", turn_id=5)  # type: ignore[arg-type]

    async def run() -> None:
        asession = AsyncChatSession(FakeProvider(), context_window=100_000)

        async def stream(m: Any) -> None:
            async for _ in asession.send_stream(m):
                pass

        for send in (asession.send, stream):
            with pytest.raises(ContentError, match=said):
                await send(message)
        assert asession.history == ()

    asyncio.run(run())

"""What a session is made with besides its settings: the provider, the compression service,
the config object, the store and its ids, and the clearing flag. Each one that is the wrong
kind of thing is a ``ConfigError`` naming the argument when the session is made; before, each
was accepted and failed at the first send, compaction or store write with a raw
``AttributeError`` (or, for ``clear_tool_outputs="no"``, read as true)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from autocompact import ConfigError
from autocompact.chat import AsyncChatSession, ChatSession
from autocompact.compaction import CompressionService
from autocompact.guard import ContextGuard
from autocompact.sessions.stores import SqliteStore
from autocompact.testing import FakeProvider

_SESSIONS = [ChatSession, AsyncChatSession]


def _made(cls: type, **kw: Any) -> Any:
    kw.setdefault("context_window", 128_000)
    provider = kw.pop("provider", FakeProvider())
    return cls(provider, **kw)


@pytest.mark.parametrize("cls", _SESSIONS, ids=lambda c: c.__name__)
@pytest.mark.parametrize(
    ("kw", "named"),
    [
        ({"provider": "openai"}, r"^provider must be a model provider .* got str 'openai'; for a"),
        ({"provider": None}, r"^provider must be a model provider .* got NoneType None$"),
        ({"compression_service": "x"}, r"^compression_service must be a CompressionService"),
        ({"config": {"context_window": 5}, "context_window": None}, r"^config must be an Engine"),
        (
            {"store": "sessions.db", "session_id": "a"},
            r"^store must be a session store .*'sessions",
        ),
        ({"session_id": 5}, r"^session_id must be a str or None, got int 5$"),
        ({"store_owner": 5}, r"^store_owner must be a str or None, got int 5$"),
        ({"clear_tool_outputs": "no"}, r"^clear_tool_outputs must be True or False, got str 'no'$"),
    ],
    ids=[
        "provider-name",
        "provider-none",
        "service-str",
        "config-dict",
        "store-path",
        "session-id-int",
        "owner-int",
        "clear-str",
    ],
)
def test_a_collaborator_of_the_wrong_kind_is_named(
    cls: type, kw: dict[str, Any], named: str
) -> None:
    with pytest.raises(ConfigError, match=named):
        _made(cls, **kw)


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda: ContextGuard(context_window=1000, compression="x"), r"^compression must be a Com"),
        (
            lambda: ContextGuard(
                context_window=1000,
                compression=CompressionService(FakeProvider()),
                clear_tool_outputs=1,
            ),
            r"^clear_tool_outputs must be True or False, got int 1$",
        ),
        (lambda: CompressionService("openai"), r"^provider must be a model provider"),
        (
            lambda: CompressionService(None, summarizer=5),
            r"^summarizer must be callable, got int 5",
        ),
    ],
    ids=["guard-compression", "guard-clear-int", "service-provider-str", "service-summarizer-int"],
)
def test_the_guard_and_the_service_name_theirs(call: Callable[[], object], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        call()


def test_the_right_kinds_are_still_taken(tmp_path: Any) -> None:
    """Ids given as str, a summarizer alone, a real store, a bool flag: made and used."""
    store = SqliteStore(tmp_path / "s.db")
    session = ChatSession(
        FakeProvider(),
        context_window=128_000,
        store=store,
        session_id="s",
        store_owner="me",
        compression_service=CompressionService(None, summarizer=lambda *a, **k: "summary"),
        clear_tool_outputs=False,
    )
    assert session.send("hello").message.text
    assert len(store.load("s").entries) >= 1


def test_an_unknown_export_format_is_named(tmp_path: Any) -> None:
    """It was a plain ValueError, which the library's callers do not catch as its errors."""
    from autocompact import Message
    from autocompact.sessions import export_session
    from autocompact.sessions.store import SessionStore as SessionFiles

    files = SessionFiles(tmp_path)
    with files.create(provider="fake", model="m", context_window=1, cwd=tmp_path) as writer:
        writer.append_messages([Message.user("hello"), Message.model("hi")])
    saved = files.open(writer.id)
    with pytest.raises(
        ConfigError, match=r"^unknown export format 'csv': use 'openai' or 'jsonl'$"
    ):
        export_session(saved, "csv")  # type: ignore[arg-type]
    assert export_session(saved, "jsonl").count("\n") == 2


class _OnlyAsync:
    """A provider written for asyncio only (one of the four methods)."""

    name, model = "only-async", "m"

    async def acomplete(self, request: Any) -> Any:
        return await FakeProvider().acomplete(request)


class _OnlyComplete:
    """A provider that only answers whole (no stream, no asyncio)."""

    name, model = "only-complete", "m"

    def complete(self, request: Any) -> Any:
        return FakeProvider().complete(request)


def test_a_method_the_provider_lacks_is_named_and_the_history_is_kept() -> None:
    """Each raised a raw AttributeError from inside the turn."""
    import asyncio

    session = ChatSession(_OnlyComplete(), context_window=128_000)
    session.send("hello")
    before = session.history
    with pytest.raises(ConfigError, match=r"_OnlyComplete has no stream\(request\), which Chat"):
        list(session.send_stream("more"))
    assert session.history == before
    with pytest.raises(ConfigError, match=r"_OnlyAsync has no complete\(request\), which Chat"):
        ChatSession(_OnlyAsync(), context_window=128_000).send("hello")
    lone = AsyncChatSession(_OnlyComplete(), context_window=128_000)
    with pytest.raises(ConfigError, match=r"_OnlyComplete has no acomplete\(request\), which As"):
        asyncio.run(lone.send("hello"))

    async def stream() -> None:
        async for _ in lone.send_stream("hello"):
            pass

    with pytest.raises(ConfigError, match=r"_OnlyComplete has no astream\(request\), which Asy"):
        asyncio.run(stream())
    assert lone.history == ()
    reply = asyncio.run(AsyncChatSession(_OnlyAsync(), context_window=128_000).send("hello"))
    assert reply.message.text


def test_a_summary_model_that_lacks_the_method_is_named_before_the_compaction() -> None:
    """A compaction asked a provider for a summary with a method it lacks: raw AttributeError."""
    import asyncio

    from autocompact import Message

    history = [Message.user("question " + "word " * 300), Message.model("answer " + "x " * 300)]
    synced = ChatSession(_OnlyAsync(), context_window=128_000, history=history * 4)
    with pytest.raises(
        ConfigError, match=r"no complete\(request\), which ChatSession.compress \(for"
    ):
        synced.compress()
    assert synced.history == tuple(history * 4)
    awaited = AsyncChatSession(_OnlyComplete(), context_window=128_000, history=history * 4)
    with pytest.raises(ConfigError, match=r"no acomplete\(request\), which AsyncChatSession.comp"):
        asyncio.run(awaited.compress())
    other = ChatSession(
        FakeProvider(),
        context_window=128_000,
        compression_service=CompressionService(_OnlyAsync()),
    )
    with pytest.raises(ConfigError, match=r"_OnlyAsync has no complete\(request\), which ChatSe"):
        other.send("hello")
    assert other.history == ()
    # A summarizer function needs no provider method; the model's own are enough.
    local = ChatSession(
        _OnlyComplete(),
        context_window=128_000,
        history=history * 4,
        compression_service=CompressionService(None, summarizer=lambda *a, **k: "summary"),
    )
    assert local.compress().status.value == "compressed"


@pytest.mark.parametrize("spec", ["openai", "openai-responses", "anthropic", "gemini"])
@pytest.mark.parametrize("model", ["a\x01b", "a\nb", "gpt\x9b"], ids=["soh", "nl", "c1"])
def test_a_model_name_no_request_can_carry_is_named(spec: str, model: str) -> None:
    """Gemini's SDK raised a raw httpx.InvalidURL at the first send (the name goes in the URL);
    the others sent the name in the body and printed it back with its control character."""
    from autocompact.providers import get_provider

    with pytest.raises(ConfigError, match=r"^model must be a model name \(text without control"):
        get_provider(f"{spec}:{model}", api_key="k", base_url="http://127.0.0.1:9")


def test_instructions_too_long_for_the_summary_window_are_named() -> None:
    """Instructions longer than the window failed the compaction with "the summarizer's window
    is too small to hold a side query", which did not say what to shorten."""
    from autocompact import Message

    history = [Message.user("question " + "word " * 300), Message.model("answer " + "x " * 300)]
    session = ChatSession(FakeProvider(), context_window=8_000, history=history * 2)
    info = session.compress("keep every detail " * 3_000)
    assert info.status.value == "compression_failed_token_count_error"
    assert info.error is not None
    assert "with the 13,500-token instructions given: shorten them" in info.error
    assert session.history == tuple(history * 2)
    short = ChatSession(FakeProvider(), context_window=8_000, history=history * 2)
    assert short.compress("keep the numbers").status.value == "compressed"

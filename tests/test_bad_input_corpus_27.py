"""Issue 27: the bad-input corpus, continued — what still broke after the model was paid.

Each case names the error type, checks that the message names the field, value or file, and
that nothing was lost (the reply is still in memory, the history or the store unchanged). The
CLI's doors for the same issue are in ``tests/cli/test_bad_input_corpus_27_cli.py``.
"""

from __future__ import annotations

import datetime
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autocompact import (
    ContentError,
    FunctionCallPart,
    FunctionResponsePart,
    Message,
    SessionStoreError,
    Usage,
)
from autocompact.chat import ChatSession
from autocompact.providers.fake import FakeReply
from autocompact.sessions.store import SessionStore as SessionFiles
from autocompact.sessions.stores import JsonlStore, SqliteStore, open_store
from autocompact.testing import FakeProvider
from stores.conftest import make_store

# -- 1. text that is not valid Unicode -------------------------------------------------------


def replace_surrogates(text: str) -> str:
    """The oracle, written here (not the code under test): each surrogate becomes U+FFFD."""
    return re.sub("[\ud800-\udfff]", "\ufffd", text)


def _store(kind: str, tmp_path: Path, **options: Any) -> Any:
    if kind == "sqlite":
        return SqliteStore(tmp_path / "s.db", **options)
    if kind == "postgres":  # skipped without a server (.ci/postgres.sh start)
        return make_store("postgres", tmp_path, **options)
    return JsonlStore(tmp_path / "jsonl", **options)


STORES = ["sqlite", "jsonl"]


@pytest.mark.parametrize("kind", [*STORES, "postgres"])
def test_a_lone_surrogate_is_stored_as_a_replacement(tmp_path: Path, kind: str) -> None:
    """A lone surrogate in a sent message: no raw UnicodeEncodeError; stored as U+FFFD."""
    store = _store(kind, tmp_path)
    session = ChatSession(FakeProvider(), context_window=128_000, store=store, session_id="s")
    reply = session.send("bad \udce9")
    assert reply.text == "OK."
    assert len(session.history) == 2  # the paid reply is kept
    stored = store.load("s").history
    assert [m.text for m in stored] == ["bad \ufffd", "OK."]


@pytest.mark.parametrize("kind", STORES)
def test_a_session_id_with_a_surrogate_is_refused_before_the_send(
    tmp_path: Path, kind: str
) -> None:
    """A session id holding a lone surrogate: SessionStoreError naming it, nothing sent."""
    store = _store(kind, tmp_path)
    fake = FakeProvider()
    with pytest.raises(SessionStoreError) as info:
        ChatSession(fake, context_window=128_000, store=store, session_id="bad\udce9").send("x")
    assert type(info.value) is SessionStoreError
    assert "session id" in str(info.value)
    assert "'bad\\udce9'" in str(info.value)
    assert fake.requests == []


def _round_trip(text: str, tmp_path: Path, kind: str) -> list[str]:
    message = Message.user(text)
    reply = Message.model(FunctionCallPart(id="c1", name=text or "f", arguments={text: [text]}))
    if kind == "file":
        files = SessionFiles(tmp_path / "files")
        with files.create(provider="fake", model="m", context_window=1000) as writer:
            writer.append_messages([message, reply])
            sid = writer.id
        loaded = files.open(sid).history
    else:
        store = _store(kind, tmp_path)
        store.ensure("s", {"system_instruction": text})
        store.append_turn("s", "t", [message, reply])
        loaded = store.load("s").history
        assert store.load("s").meta["system_instruction"] == replace_surrogates(text)
        store.close()
    call = loaded[1].parts[0]
    assert isinstance(call, FunctionCallPart)
    key, values = next(iter(call.arguments.items()))
    return [loaded[0].text, call.name, key, *values]


# Every code point, surrogates included: st.characters() leaves out category Cs by default, and
# with it allowed hypothesis still almost never draws one of the 2,048 surrogates out of 1.1M
# code points, so they are drawn on purpose too (high and low, lone and in pairs).
ANY_TEXT = st.text(
    alphabet=st.one_of(
        st.characters(blacklist_categories=()),
        st.integers(min_value=0xD800, max_value=0xDFFF).map(chr),
    ),
    max_size=40,
)


@pytest.mark.parametrize("kind", ["sqlite", "jsonl", "file"])
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=ANY_TEXT)
def test_any_str_round_trips_through_every_store(
    tmp_path_factory: Any, kind: str, text: str
) -> None:
    """Any str (lone surrogates included) round-trips as replace_surrogates(text): text, names,
    argument keys and values, the session's meta."""
    tmp_path = tmp_path_factory.mktemp("rt")
    want = replace_surrogates(text)
    assert _round_trip(text, tmp_path, kind) == [want, want or "f", want, want]


# -- 5. errors after the model was paid ------------------------------------------------------


def _pending(store: Any = None) -> tuple[ChatSession, FakeProvider]:
    fake = FakeProvider()
    history = [Message.user("run it"), Message.model(FunctionCallPart(id="c1", name="ls"))]
    if store is not None:
        store.ensure("s", {})
        store.append_turn("s", "t0", history)
        session = ChatSession(fake, context_window=128_000, store=store, session_id="s")
    else:
        session = ChatSession(fake, context_window=128_000, history=history)
    return session, fake


NOT_JSON: list[tuple[str, object, str]] = [
    ("set", {"when": {1, 2}}, "response['when']: a set"),
    ("datetime", {"at": datetime.datetime(2026, 1, 1)}, "response['at']: a datetime"),
    ("bytes-in-list", ["ok", b"raw"], "response[1]: a bytes"),
    ("nan", {"score": float("nan")}, "response['score']: nan"),
    ("int-key", {"nested": {1: "x"}}, "response['nested']: a key of type int"),
]


@pytest.mark.parametrize(
    ("value", "named"), [c[1:] for c in NOT_JSON], ids=[c[0] for c in NOT_JSON]
)
@pytest.mark.parametrize("kind", STORES)
def test_a_tool_result_json_cannot_hold_is_refused_before_the_send(
    tmp_path: Path, kind: str, value: object, named: str
) -> None:
    """A tool result holding a set, a datetime, bytes, NaN or an int key: ContentError naming
    the path, before the send; the history and the store unchanged."""
    store = _store(kind, tmp_path)
    session, fake = _pending(store)
    before = session.history
    with pytest.raises(ContentError) as info:
        session.send([FunctionResponsePart(id="c1", name="ls", response=value)])
    assert type(info.value) is ContentError
    assert named in str(info.value)
    assert "nothing was sent" in str(info.value)
    assert fake.requests == []
    assert session.history == before
    assert store.load("s").history == before


def test_a_message_over_the_store_limit_is_refused_before_the_send(tmp_path: Path) -> None:
    """A message over the store's per-turn limit: SessionStoreError naming the limit, no send."""
    store = SqliteStore(tmp_path / "s.db", max_turn_bytes=10_000)
    fake = FakeProvider()
    session = ChatSession(fake, context_window=128_000, store=store, session_id="s")
    with pytest.raises(SessionStoreError) as info:
        session.send("x" * 20_000)
    assert "limit of 10,000 bytes" in str(info.value)
    assert "nothing was sent" in str(info.value)
    assert info.value.session_id == "s"
    assert fake.requests == []
    assert session.history == ()
    assert store.load("s").history == ()


@pytest.mark.parametrize("kind", STORES)
def test_a_reply_the_store_refuses_is_kept_on_the_error(tmp_path: Path, kind: str) -> None:
    """The reply itself pushes the turn over the limit: the error keeps the reply and says how
    to recover it; the history and the store are as before the turn."""
    store = _store(kind, tmp_path, max_turn_bytes=10_000)
    fake = FakeProvider()
    fake.enqueue(FakeReply(text="y" * 20_000))
    session = ChatSession(fake, context_window=128_000, store=store, session_id="s")
    with pytest.raises(SessionStoreError) as info:
        session.send("hello")
    assert info.value.reply is not None
    assert info.value.reply.message.text == "y" * 20_000  # nothing lost
    assert ".reply" in str(info.value)
    assert "append_turn" in str(info.value)
    assert session.history == ()
    assert store.load("s").history == ()


# -- 8. believing absurd numbers -------------------------------------------------------------

BAD_COUNTS: list[tuple[str, dict[str, Any], str]] = [
    ("prompt-str", {"prompt_tokens": "12"}, "Usage.prompt_tokens"),
    ("output-float", {"output_tokens": 1.5}, "Usage.output_tokens"),
    ("cached-negative", {"cached_tokens": -1}, "Usage.cached_tokens"),
    ("thinking-bool", {"thinking_tokens": True}, "Usage.thinking_tokens"),
    ("prompt-none", {"prompt_tokens": None}, "Usage.prompt_tokens"),
]


@pytest.mark.parametrize(
    ("kw", "named"), [c[1:] for c in BAD_COUNTS], ids=[c[0] for c in BAD_COUNTS]
)
def test_a_usage_count_that_is_no_count(kw: dict[str, Any], named: str) -> None:
    """A usage count given as a string, fraction, negative, bool or None: ContentError naming
    the field and the value, never a raw TypeError later."""
    with pytest.raises(ContentError) as info:
        Usage(**kw)
    assert type(info.value) is ContentError
    assert named in str(info.value)
    assert repr(next(iter(kw.values()))) in str(info.value)


def test_an_absurd_count_is_logged_and_not_learned(caplog: pytest.LogCaptureFixture) -> None:
    """prompt_tokens=10**12 on every reply of a 32K chat: every send goes out whole, the count is
    not learned, and the warning names it."""
    fake = FakeProvider()
    session = ChatSession(fake, context_window=32_000)
    with caplog.at_level(logging.WARNING, logger="autocompact"):
        for i in range(40):
            fake.enqueue(FakeReply(text="ok", usage=Usage(prompt_tokens=10**12, output_tokens=2)))
            session.send(f"message {i} " + "lorem ipsum dolor " * 60)
    chat = [r for r in fake.requests if r.purpose == "chat"]
    assert len(chat) == 40
    assert [len(r.messages) for r in chat] == [2 * i + 1 for i in range(40)]  # nothing trimmed
    assert session.last_prompt_token_count < 32_000
    assert "1000000000000" in caplog.text


def test_a_count_far_below_the_request_is_not_believed(caplog: pytest.LogCaptureFixture) -> None:
    """A model reporting input_tokens=50 on every reply while the history grows past the
    window: the count is not learned, so compaction still happens and no request goes over."""
    fake = FakeProvider()
    session = ChatSession(fake, context_window=32_000)
    with caplog.at_level(logging.WARNING, logger="autocompact"):
        for i in range(30):
            fake.enqueue(FakeReply(text="ok", usage=Usage(prompt_tokens=50)), purpose="chat")
            session.send(f"message {i} " + "lorem ipsum dolor sit amet " * 150)
    assert fake.oversized == []
    assert session.compactions, "the history outgrew the window: a compaction must have run"
    assert "reported prompt count of 50" in caplog.text


PLAUSIBLE: list[tuple[int, int, int | None, bool]] = [
    (1_000, 1_000, None, True),
    (9_000, 1_000, None, True),  # a tokenizer 9x the estimate: still believed
    (12_345, 2, 128_000, True),  # within the window: a provider's own prompt may be that big
    (10**12, 30_000, 32_000, False),
    (400_000, 30_000, 32_000, False),
    (50, 20_000, 32_000, False),
    (50, 300, 32_000, True),  # small requests are judged with the slack
    (0, 20_000, None, False),
]


@pytest.mark.parametrize(("reported", "estimate", "window", "believed"), PLAUSIBLE)
def test_plausible_prompt_count_table(
    reported: int, estimate: int, window: int | None, believed: bool
) -> None:
    """The 10x rule with slack, and the window as the upper bound of believable counts."""
    from autocompact.usage_check import plausible_prompt_count

    assert plausible_prompt_count(reported, estimate, window=window, log=False) is believed


# -- 6. store addresses ----------------------------------------------------------------------

ADDRESSES: list[tuple[str, str]] = [
    ("", "empty"),
    ("   ", "empty"),
    ("postgresql:db", "postgresql://"),
    ("mysql://u@h/db", "unknown store"),
]


@pytest.mark.parametrize(("address", "named"), ADDRESSES, ids=repr)
def test_a_bad_store_address(address: str, named: str) -> None:
    """An empty, slash-less or unknown store address: SessionStoreError saying so."""
    with pytest.raises(SessionStoreError) as info:
        open_store(address)
    assert named in str(info.value)


def test_sqlite_relative_is_a_sqlite_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sqlite:relative.db is a SQLite file in the current directory, not a JSONL folder."""
    monkeypatch.chdir(tmp_path)
    store = open_store("sqlite:relative.db")
    assert isinstance(store, SqliteStore)
    assert store.address == f"sqlite:///{tmp_path / 'relative.db'}"  # reopens the same file
    store.ensure("s", {})
    store.close()
    assert (tmp_path / "relative.db").is_file()


@pytest.mark.parametrize("name", ["plain.db", "plain.sqlite", "PLAIN.SQLITE3"])
def test_a_plain_path_with_a_sqlite_suffix_is_a_sqlite_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """A plain path ending in .db, .sqlite or .sqlite3 is a SQLite file (relative to the
    current directory, as sqlite:PATH), not a JSONL directory of that name; another plain path
    is still a JSONL directory."""
    monkeypatch.chdir(tmp_path)
    store = open_store(name)
    assert isinstance(store, SqliteStore)
    assert store.address == f"sqlite:///{tmp_path / name}"  # reopens the same file
    store.ensure("s", {})
    store.close()
    assert (tmp_path / name).read_bytes()[:16] == b"SQLite format 3\x00"
    assert isinstance(open_store("sessions"), JsonlStore)


def test_a_directory_named_like_a_sqlite_file_is_refused_naming_jsonl(tmp_path: Path) -> None:
    """A directory named x.db (the JSONL sessions such a path made before) is refused, naming
    the jsonl:// address that keeps reading it; that address opens it."""
    old = tmp_path / "old.db"
    old.mkdir()
    with pytest.raises(SessionStoreError) as info:
        open_store(str(old))
    assert f"{old} is a directory, not a SQLite file" in str(info.value)
    assert f"give jsonl://{old} to keep using it" in str(info.value)
    assert isinstance(open_store(f"jsonl://{old}"), JsonlStore)
    assert list(old.iterdir()) == []  # nothing written in it


@pytest.mark.parametrize("address", ["sqlite:///{}/typo.db", "{}/typo-dir"])
def test_reading_a_missing_store_creates_nothing(tmp_path: Path, address: str) -> None:
    """open_store(create=False) on a missing SQLite file or JSONL folder: an error naming the
    path, and nothing is created."""
    target = address.format(tmp_path)
    with pytest.raises(SessionStoreError) as info:
        open_store(target, create=False)
    assert str(tmp_path) in str(info.value)
    assert "never creates" in str(info.value)
    assert list(tmp_path.iterdir()) == []


# -- 9. smaller raw exceptions ---------------------------------------------------------------

AGENT_ITEMS: list[tuple[str, list[Any], str]] = [
    ("user-content-int", [{"role": "user", "content": 5}], "'content'"),
    ("system-content-int", [{"role": "system", "content": 5}], "'content'"),
    ("content-list-of-int", [{"role": "user", "content": [5]}], "content[0]"),
    ("assistant-content-dict", [{"role": "assistant", "content": {"x": 1}}], "'content'"),
]


@pytest.mark.parametrize(
    ("items", "named"), [c[1:] for c in AGENT_ITEMS], ids=[c[0] for c in AGENT_ITEMS]
)
def test_agents_sdk_items_with_bad_content(items: list[Any], named: str) -> None:
    """An Agents SDK item whose content is neither text nor a list of parts: ContentError
    naming the field, never a TypeError."""
    pytest.importorskip("agents")
    from autocompact.integrations.openai_agents import to_autocompact

    with pytest.raises(ContentError) as info:
        to_autocompact(items)
    assert named in str(info.value)


CASES: list[Callable[[], int]] = [
    lambda: 2 * len(STORES) + 1 + 3,  # surrogates: stored (+ PostgreSQL), ids, round trips
    lambda: len(NOT_JSON) * len(STORES) + 1 + len(STORES),
    lambda: len(BAD_COUNTS) + 2,
    lambda: len(ADDRESSES) + 1 + 2,
    lambda: len(AGENT_ITEMS),
]


def corpus_size_27() -> int:
    """How many bad inputs this file covers (the corpus' count includes it)."""
    return sum(case() for case in CASES)

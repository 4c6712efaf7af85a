"""The append-only history: a send copies nothing, views never change, failures roll back."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autocompact import ChatRequest, Message, SessionStoreError
from autocompact.chat import ChatSession
from autocompact.history import HistoryView, MessageLog
from autocompact.sessions.stores.sqlite import SqliteStore
from autocompact.testing import FakeProvider, FakeReply

WINDOW = 100_000


def _history(n: int) -> list[Message]:
    return [Message.user(f"q{i}") if i % 2 == 0 else Message.model(f"a{i}") for i in range(n)]


def _no_snapshot(self: MessageLog) -> tuple[Message, ...]:
    raise AssertionError("the send path built a copy of the history")


def test_a_send_copies_no_history(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sends append to the same list and hand the provider a view over it: no tuple of the
    history is built and the list is never copied (issue 11: per-send time O(1))."""
    fake = FakeProvider()
    session = ChatSession(fake, context_window=WINDOW, history=_history(40))
    session.history  # noqa: B018 - a read builds the snapshot; sends must not need it
    log = session.state.log
    monkeypatch.setattr(MessageLog, "snapshot", _no_snapshot)
    storage = log._items
    for i in range(5):
        session.send(f"turn {i}")
        assert log._items is storage  # appended in place, never copied
        messages = fake.requests[-1].messages
        assert isinstance(messages, HistoryView)
        assert messages._items is storage  # the request is a view, not a copy
    monkeypatch.undo()
    assert len(session.history) == 50
    assert [m.text for m in session.history[-2:]] == ["turn 4", "OK."]


def test_each_request_keeps_the_messages_it_was_sent_with() -> None:
    """A request held after later sends still shows exactly what was sent (the log only grows)."""
    fake = FakeProvider()
    session = ChatSession(fake, context_window=WINDOW, history=_history(4))
    session.send("one")
    session.send("two")
    first, second = fake.requests
    assert [m.text for m in first.messages] == ["q0", "a1", "q2", "a3", "one"]
    assert [m.text for m in second.messages][-3:] == ["one", "OK.", "two"]
    assert first.messages == (*_history(4), Message.user("one"))


def test_history_is_a_cached_tuple_until_the_next_change() -> None:
    """``history`` is a tuple, the same object on every read until a send changes it."""
    session = ChatSession(FakeProvider(), context_window=WINDOW, history=_history(6))
    before = session.history
    assert isinstance(before, tuple)
    assert session.history is before
    session.send("more")
    after = session.history
    assert after is not before
    assert after[:6] == before
    assert len(after) == 8


def test_a_failed_store_write_rolls_back_and_old_views_stay_whole(tmp_path: Path) -> None:
    """The store write fails after the turn was appended: the history is exactly as before,
    a request made before it still shows what it showed, and the next send works."""
    fail = {"on": False}

    def boom(step: str) -> None:
        if fail["on"] and step == "append:written":
            raise SessionStoreError("disk gone", store="test")

    fake = FakeProvider()
    store = SqliteStore(tmp_path / "s.db", on_step=boom)
    session = ChatSession(fake, context_window=WINDOW, store=store, session_id="c")
    session.send("kept")
    before = session.history
    fail["on"] = True
    with pytest.raises(SessionStoreError):
        session.send("lost")
    assert session.history == before
    held = fake.requests[-1].messages
    assert [m.text for m in held] == ["kept", "OK.", "lost"]
    fail["on"] = False
    session.send("again")
    assert [m.text for m in held] == ["kept", "OK.", "lost"]  # not overwritten by "again"
    assert [m.text for m in session.history] == ["kept", "OK.", "again", "OK."]


def test_a_provider_failure_leaves_the_history_as_it_was() -> None:
    """A send whose provider call raises appends nothing."""

    def boom(request: ChatRequest) -> FakeReply:
        raise RuntimeError("network down")

    session = ChatSession(FakeProvider(responder=boom), context_window=WINDOW, history=_history(4))
    before = session.history
    with pytest.raises(RuntimeError):
        session.send("x")
    assert session.history is before


_messages = st.lists(
    st.builds(Message.user, st.text(max_size=3)) | st.builds(Message.model, st.text(max_size=3)),
    max_size=8,
)


@given(_messages, _messages, st.integers(min_value=-12, max_value=12), st.integers(0, 10))
def test_a_view_reads_as_the_tuple_it_stands_for(
    base: list[Message], extra: list[Message], index: int, cut: int
) -> None:
    """len, indexing, slicing, iteration, ==, hash, + and ``in`` of a view equal the tuple's;
    appending to, truncating or replacing the log afterwards changes nothing in it."""
    log = MessageLog(base)
    view = log.view(*extra)
    expected = (*base, *extra)
    assert len(view) == len(expected)
    assert tuple(view) == expected
    assert view == expected
    assert expected == view
    assert view == list(expected)
    assert hash(view) == hash(expected)
    assert view[index : index + 3] == expected[index : index + 3]
    assert view + (Message.user("z"),) == (*expected, Message.user("z"))  # noqa: RUF005
    assert (Message.user("z"),) + view == (Message.user("z"), *expected)  # noqa: RUF005
    assert bool(view) == bool(expected)
    assert list(reversed(view)) == list(reversed(expected))
    if -len(expected) <= index < len(expected):
        assert view[index] == expected[index]
        assert expected[index] in view
    else:
        with pytest.raises(IndexError):
            view[index]
    log.append(Message.user("later"))
    assert pickle.loads(pickle.dumps(view)) == expected
    assert copy.deepcopy(view) == expected
    log.truncate(cut)
    log.append(Message.model("overwrite?"))
    log.replace([Message.user("new")])
    assert tuple(view) == expected

"""Per-message character statistics saved with a session and seeded on load (issue 11)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autocompact import ContentError, FunctionCallPart, FunctionResponsePart, Message, TextPart
from autocompact.chat import ChatSession
from autocompact.compaction.split import validate_history
from autocompact.content import CharStats, json_form, json_length
from autocompact.estimation import content_stats
from autocompact.sessions.store import SessionStore
from autocompact.testing import FakeProvider
from autocompact.validation import check_history, check_tool_pairs, scan_history


def _history() -> list[Message]:
    return [
        Message.user("fix the bug " * 50),
        Message.model(FunctionCallPart(id="c1", name="read", arguments={"path": "a.py"})),
        Message.user(FunctionResponsePart(id="c1", name="read", response="line\n" * 200)),
        Message.model("done"),
    ]


def _saved(tmp_path: Path) -> tuple[SessionStore, Path, str]:
    store = SessionStore(tmp_path)
    with store.create(provider="fake", model="m", context_window=100_000, cwd=tmp_path) as w:
        w.append_messages(_history())
        sid = w.id
    return store, store.path_of(sid), sid


def test_message_records_carry_their_statistics(tmp_path: Path) -> None:
    """Every message line holds [text, json, media] equal to the message's own statistics."""
    _, path, _ = _saved(tmp_path)
    records = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    saved = [r["stats"] for r in records if r["type"] == "message"]
    expected = [[m.stats.text_chars, m.stats.json_chars, m.stats.media_parts] for m in _history()]
    assert saved == expected


def test_loaded_messages_are_seeded_with_the_saved_statistics(tmp_path: Path) -> None:
    """A restored message reports the saved statistics without measuring itself (proved by a
    saved value that differs from what measuring would give)."""
    store, path, sid = _saved(tmp_path)
    lines = path.read_text().splitlines()
    record = json.loads(lines[1])
    record["stats"] = [12_345, 0, 0]
    lines[1] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    history = store.open(sid).history
    assert history[0].stats == CharStats(text_chars=12_345)
    assert history[1].stats == _history()[1].stats


def test_files_without_statistics_still_load_and_measure(tmp_path: Path) -> None:
    """An older file (no "stats" field, or a malformed one) loads; the messages measure
    themselves as before."""
    store, path, sid = _saved(tmp_path)
    lines = path.read_text().splitlines()
    out = [lines[0]]
    for n, line in enumerate(lines[1:]):
        record = json.loads(line)
        if n == 0:
            record["stats"] = ["x", -1]
        else:
            record.pop("stats", None)
        out.append(json.dumps(record))
    path.write_text("\n".join(out) + "\n")
    history = store.open(sid).history
    assert [m.stats for m in history] == [m.stats for m in _history()]


@given(st.text())
def test_json_length_is_the_length_of_the_json_form(text: str) -> None:
    """The one-pass JSON length of a string equals len(json_form(text)) for any text."""
    assert json_length(text) == len(json_form(text))


def _strip_stats(path: Path) -> None:
    lines = path.read_text().splitlines()
    out = [lines[0]]
    for line in lines[1:]:
        record = json.loads(line)
        record.pop("stats", None)
        out.append(json.dumps(record))
    path.write_text("\n".join(out) + "\n")


def test_an_old_file_restores_into_a_session_with_the_same_estimate(tmp_path: Path) -> None:
    """A session file written before statistics were saved restores into a ChatSession whose
    cold estimate equals that of the same session saved with statistics."""
    store, path, sid = _saved(tmp_path)
    with_stats = store.open(sid).history
    _strip_stats(path)
    without = store.open(sid).history
    assert all(m._stats is None for m in without)  # nothing seeded: measured on demand

    def estimate(history: tuple[Message, ...]) -> int:
        return ChatSession(FakeProvider(), context_window=100_000, history=history).estimate_tokens(
            "next"
        )

    assert without == with_stats
    assert estimate(without) == estimate(with_stats) == estimate(tuple(_history()))


_part = st.one_of(
    st.builds(lambda t: TextPart(text=t), st.text(max_size=5)),
    st.builds(lambda i: FunctionCallPart(id=i, name="f"), st.sampled_from("abc")),
    st.builds(lambda i: FunctionResponsePart(id=i, name="f", response="r"), st.sampled_from("abc")),
)
_message = st.builds(
    lambda role, parts: Message(role=role, parts=tuple(parts)),
    st.sampled_from(["user", "model"]),
    st.lists(_part, min_size=1, max_size=3),
)


def _old_checks(history: list[Message]) -> ContentError | None:
    """The checks the constructor ran before they were fused (issue 16), as the oracle."""
    try:
        check_history(history, tool_pairs=False)
        validate_history(history)
        check_tool_pairs(history)
    except ContentError as exc:
        return exc
    return None


def _scan(history: list[Message]) -> ContentError | tuple[list[Message], CharStats]:
    try:
        return scan_history(history)
    except ContentError as exc:
        return exc


@given(st.lists(_message, max_size=8))
def test_the_fused_scan_accepts_and_refuses_what_the_separate_checks_did(
    history: list[Message],
) -> None:
    """scan_history refuses exactly the histories the separate checks refused, naming the same
    message index (and the same text past the first message), and sums the same statistics as
    content_stats."""
    old, new = _old_checks(history), _scan(history)
    if old is None:
        assert new == (history, content_stats(history))
    else:
        assert isinstance(new, ContentError)
        assert new.index == old.index
        if old.index != 0:
            assert str(new) == str(old)


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"message"}',
        b'  {"type":"state"} \r',
        b"\t[1, 2]",
        b'{"type":"message"} x',
        b'{"type":"message"}{"type":"message"}',
        b'{"type":"mess',
        b"\xef\xbb\xbf{}",
        b'{"a":"\xff"}',
        b"\x0c{}",
        b'"\\u00e9\xc3\xa9\xf0\x9f\x98\x80"',
        b"",
        b"nul",
        b"1e400",
    ],
)
def test_record_lines_parse_as_json_loads_would(line: bytes, tmp_path: Path) -> None:
    """The session loader's line reader accepts exactly what json.loads(line) accepts."""
    import json

    from autocompact.sessions import records

    try:
        expected: object = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        expected = None
    got = records._line_parser(tmp_path / "s.jsonl")(line, 2)
    assert got == expected


def test_restored_statistics_equal_a_fresh_measure(tmp_path: Path) -> None:
    """Messages read back from a session file, measured lazily, equal freshly built ones."""
    from autocompact.codec import history_from_dicts, history_to_dicts
    from autocompact.content import FunctionCallPart, FunctionResponsePart, Message
    from autocompact.sessions.records import load_session
    from autocompact.sessions.store import SessionStore

    history = [
        Message.user("é\n" * 50),
        Message.model(FunctionCallPart(id="c", name="Edit", arguments={"s": 'a"\\\x01' * 9})),
        Message.user(FunctionResponsePart(id="c", name="Edit", response={"ok": ["\t", 1.5]})),
        Message.model("done"),
    ]
    store = SessionStore(tmp_path)
    with store.create(provider="p", model="m", context_window=1000) as writer:
        writer.append_messages(history)
        sid = writer.id
    loaded = load_session(store.path_of(sid)).history
    assert list(loaded) == history
    fresh = history_from_dicts(history_to_dicts(history))
    for got, want in zip(loaded, fresh, strict=True):
        for part_got, part_want in zip(got.parts, want.parts, strict=True):
            assert part_got.stats == part_want.stats
        assert got.stats == want.stats

"""Per-message character statistics saved with a session and seeded on load (issue 11)."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from autocompact import FunctionCallPart, FunctionResponsePart, Message
from autocompact.content import CharStats, json_form, json_length
from autocompact.sessions.store import SessionStore


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

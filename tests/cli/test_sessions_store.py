"""Saved sessions on disk: round trips, replay, damage, permissions, redaction, export."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from autocompact.content import FunctionCallPart, FunctionResponsePart, Message
from autocompact.errors import SessionFileError
from autocompact.sessions import SCHEMA_VERSION, SessionStore, export_session, load_session

SUCCESS = {"status": "compressed", "trigger": "manual", "original_token_count": 900}
FAILURE = {"status": "compression_failed_empty_summary", "trigger": "auto", "error": "empty"}


def _turn(i: int) -> list[Message]:
    return [Message.user(f"question {i}"), Message.model(f"answer {i}")]


def _store(tmp_path: Path, **kw: object) -> SessionStore:
    return SessionStore(tmp_path / "sessions", **kw)  # type: ignore[arg-type]


def test_round_trip_keeps_history_state_and_header(tmp_path: Path) -> None:
    """What a writer appends is what a reader rebuilds, header fields included."""
    store = _store(tmp_path)
    with store.create(
        provider="fake", model="m", context_window=32_000, cwd=tmp_path, system_instruction="sys"
    ) as w:
        w.append_messages(_turn(1))
        w.record_state(last_prompt_token_count=123, consecutive_failures=2, calibration=1.25)
        sid = w.id
    saved = store.open(sid)
    assert saved.history == tuple(_turn(1))
    assert (saved.last_prompt_token_count, saved.consecutive_failures) == (123, 2)
    assert saved.calibration == 1.25
    assert saved.header.context_window == 32_000
    assert saved.header.system_instruction == "sys"
    assert saved.header.cwd == str(tmp_path)
    assert saved.warnings == ()


def test_sync_keeps_the_hold_and_the_growth_log(tmp_path: Path) -> None:
    """The chat's saves carry the breaker's hold and the growth log; a reader gets them back,
    and a clear drops them (SPEC §10.2, design decision 63)."""
    store = _store(tmp_path)
    growth = {"recent": [300, 400], "last_count": 9_000, "since_compaction": 1, "compacted_to": 7}
    with store.create(provider="fake", model="m", context_window=32_000, cwd=tmp_path) as w:
        w.sync(_turn(1), last_prompt_token_count=50, hold_until=25_000, growth=growth)
        sid = w.id
    saved = store.open(sid)
    assert saved.hold_until == 25_000
    assert saved.growth == growth
    _, writer = store.open_for_append(sid)
    with writer:
        writer.sync(_turn(2), last_prompt_token_count=60)  # a clear: another history
    saved = store.open(sid)
    assert saved.hold_until is None
    assert saved.growth is None


def test_tool_parts_survive_the_round_trip(tmp_path: Path) -> None:
    """Function calls and responses are stored in the codec form and read back equal."""
    store = _store(tmp_path)
    msgs = [
        Message.user("run ls"),
        Message.model(FunctionCallPart(id="c1", name="ls", arguments={"path": "."})),
        Message.user(FunctionResponsePart(id="c1", name="ls", response={"files": ["a"]})),
        Message.model("done"),
    ]
    with store.create(provider="fake", model="m", context_window=1000, cwd=tmp_path) as w:
        w.append_messages(msgs)
    assert store.open(w.id).history == tuple(msgs)


def test_sync_replays_compaction_and_clear(tmp_path: Path) -> None:
    """sync() writes appends, a compaction's new history and a clear so replay rebuilds each."""
    store = _store(tmp_path)
    w = store.create(provider="fake", model="m", context_window=1000, cwd=tmp_path)
    history = _turn(1) + _turn(2)
    w.sync(history, last_prompt_token_count=50)
    assert store.open(w.id).history == tuple(history)

    compacted = [Message.user("summary"), Message.model("Got it."), *_turn(2), *_turn(3)]
    w.sync(compacted, new_compactions=[FAILURE, SUCCESS], last_prompt_token_count=20)
    saved = store.open(w.id)
    assert saved.history == tuple(compacted)
    assert [c["status"] for c in saved.compactions] == [FAILURE["status"], SUCCESS["status"]]
    assert saved.last_prompt_token_count == 20

    w.sync(compacted + _turn(4), last_prompt_token_count=30)
    assert store.open(w.id).history == tuple(compacted + _turn(4))

    w.sync(_turn(5), last_prompt_token_count=5)
    assert store.open(w.id).history == tuple(_turn(5))
    w.record_clear()
    saved = store.open(w.id)
    assert saved.history == ()
    assert saved.last_prompt_token_count == 0
    w.close()


def test_sync_records_the_history_a_compaction_left_apart_from_the_turn(tmp_path: Path) -> None:
    """With (info, history left) the compaction record holds it; the turn follows as messages."""
    store = _store(tmp_path)
    w = store.create(provider="fake", model="m", context_window=1000, cwd=tmp_path)
    w.sync(_turn(1) + _turn(2))
    left = [Message.user("summary"), Message.model("Got it."), *_turn(2)]
    w.sync([*left, *_turn(3)], new_compactions=[(SUCCESS, left)], last_prompt_token_count=9)
    w.close()
    records = [json.loads(x) for x in store.path_of(w.id).read_text().splitlines()]
    compaction = next(r for r in records if r["type"] == "compaction")
    assert len(compaction["history"]) == 4
    after = records[records.index(compaction) + 1 :]
    assert [r["message"]["parts"][0]["text"] for r in after if r["type"] == "message"] == [
        "question 3",
        "answer 3",
    ]
    assert store.open(w.id).history == (*left, *_turn(3))


def test_truncated_last_line_is_dropped_and_turns_kept(tmp_path: Path) -> None:
    """A torn final write loses only the turn in progress; appending first makes a backup."""
    store = _store(tmp_path)
    with store.create(provider="fake", model="m", context_window=1000, cwd=tmp_path) as w:
        w.append_messages(_turn(1))
        w.append_messages(_turn(2))
    path = store.path_of(w.id)
    original = path.read_bytes()
    # A torn turn: the user line complete, the model line cut in the middle.
    with path.open("ab") as f:
        f.write(
            b'{"type":"message","message":{"role":"user","parts":[{"kind":"text","text":"q3"}]}}\n'
        )
        f.write(b'{"type":"message","message":{"role":"mod')
    damaged_bytes = path.read_bytes()
    saved = store.open(w.id)
    assert saved.history == tuple(_turn(1) + _turn(2))
    assert saved.damaged
    assert any("incomplete" in x for x in saved.warnings)
    assert any("unanswered" in x for x in saved.warnings)
    assert path.read_bytes() == damaged_bytes  # reading never changes the file

    saved, writer = store.open_for_append(w.id)
    backup = path.with_name(path.name + ".bak")
    assert backup.read_bytes() == damaged_bytes
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    writer.append_messages(_turn(3))
    writer.close()
    again = store.open(w.id)
    assert again.history == tuple(_turn(1) + _turn(2) + _turn(3))
    assert again.warnings == ()
    assert path.read_bytes().startswith(original)


def test_unreadable_middle_line_keeps_records_before_it(tmp_path: Path) -> None:
    """A garbage line in the middle keeps what precedes it and says what was ignored."""
    store = _store(tmp_path)
    with store.create(provider="fake", model="m", context_window=1000, cwd=tmp_path) as w:
        w.append_messages(_turn(1))
    path = store.path_of(w.id)
    with path.open("ab") as f:
        f.write(b"\x00garbage\n")
        f.write(b'{"type":"clear"}\n')
    saved = store.open(w.id)
    assert saved.history == tuple(_turn(1))
    assert any("line 4 is unreadable" in x for x in saved.warnings)


def test_newer_schema_is_refused_naming_the_version(tmp_path: Path) -> None:
    """A file from a newer format says which version this build reads."""
    root = tmp_path / "s"
    root.mkdir()
    path = root / "x.jsonl"
    header = {
        "type": "header",
        "schema": 99,
        "id": "x",
        "created": "c",
        "cwd": "/",
        "provider": "fake",
        "model": "m",
        "context_window": 1,
    }
    path.write_text(json.dumps(header) + "\n")
    with pytest.raises(SessionFileError, match=f"version 99 .*version {SCHEMA_VERSION}"):
        SessionStore(root).open("x")


@pytest.mark.parametrize(
    "content",
    [b"", b"hello world\n", b'{"role": "user", "parts": []}\n', b"\xff\xfe\n"],
    ids=["empty", "text", "openai-message", "binary"],
)
def test_not_a_session_is_refused(tmp_path: Path, content: bytes) -> None:
    """Files that are not sessions raise SessionFileError naming the file."""
    path = tmp_path / "y.jsonl"
    path.write_bytes(content)
    with pytest.raises(SessionFileError, match=r"y\.jsonl"):
        load_session(path)


def test_files_are_private(tmp_path: Path) -> None:
    """Session files are created 0600 and the directory 0700."""
    store = _store(tmp_path)
    with store.create(provider="fake", model="m", context_window=1, cwd=tmp_path) as w:
        w.append_messages(_turn(1))
    assert stat.S_IMODE(store.root.stat().st_mode) == 0o700
    assert stat.S_IMODE(store.path_of(w.id).stat().st_mode) == 0o600


def test_secrets_are_redacted_everywhere(tmp_path: Path) -> None:
    """A secret passed to the store never reaches the disk, even when typed in a message."""
    secret = "sk-test-abcdef1234567890"
    store = _store(tmp_path, redact=[secret])
    with store.create(
        provider="openai",
        model="m",
        context_window=1,
        cwd=tmp_path,
        base_url=f"https://user:{secret}@example.test/v1?key={secret}",
        system_instruction=f"my key is {secret}",
    ) as w:
        w.append_messages([Message.user(f'the key is "{secret}"'), Message.model("noted")])
    data = store.path_of(w.id).read_text()
    assert secret not in data
    assert "[redacted]" in data
    assert store.open(w.id).header.base_url == "https://example.test/v1"


def test_latest_list_and_prefix(tmp_path: Path) -> None:
    """latest() picks the newest session of a directory; ids resolve by unique prefix."""
    store = _store(tmp_path)
    a = store.create(provider="fake", model="m", context_window=1, cwd="/a", session_id="s-aa")
    b = store.create(provider="fake", model="m", context_window=1, cwd="/b", session_id="s-bb")
    c = store.create(provider="fake", model="m", context_window=1, cwd="/a", session_id="s-cc")
    for w in (a, b, c):
        w.append_messages(_turn(1))
    os.utime(store.path_of("s-aa"), ns=(2_000_000_000_000_000_000,) * 2)
    latest = store.latest("/a")
    assert latest is not None
    assert latest.header.id == "s-aa"
    assert next(s.header.id for s in store.list()) == "s-aa"
    assert store.resolve("s-b") == "s-bb"
    with pytest.raises(SessionFileError, match="matches 3"):
        store.resolve("s-")
    with pytest.raises(SessionFileError, match="no saved session"):
        store.resolve("zz")
    with pytest.raises(SessionFileError, match="not a session id"):
        store.resolve("../etc")
    assert store.latest("/nowhere") is None


def test_export_formats(tmp_path: Path) -> None:
    """Export writes the neutral JSONL form and OpenAI chat messages with the system prompt."""
    store = _store(tmp_path)
    with store.create(
        provider="fake", model="m", context_window=1, cwd=tmp_path, system_instruction="be brief"
    ) as w:
        w.append_messages(_turn(1))
    saved = store.open(w.id)
    lines = export_session(saved, "jsonl").splitlines()
    assert json.loads(lines[0]) == {
        "role": "user",
        "parts": [{"kind": "text", "text": "question 1"}],
    }
    openai = json.loads(export_session(saved, "openai"))
    assert openai == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "question 1"},
        {"role": "assistant", "content": "answer 1"},
    ]


_CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from autocompact.content import Message
    from autocompact.sessions import SessionStore

    store = SessionStore(Path(sys.argv[1]))
    w = store.create(provider="fake", model="m", context_window=1000, cwd="/", session_id="crash")
    i = 0
    while True:
        i += 1
        big = "x" * 20000
        w.append_messages([Message.user(f"q{i} {big}"), Message.model(f"a{i} {big}")])
        w.record_state(last_prompt_token_count=i, consecutive_failures=0)
    """
)


def test_writer_killed_mid_append_then_resume(tmp_path: Path) -> None:
    """SIGKILL during appends leaves a file whose complete turns all load and accept appends."""
    root = tmp_path / "s"
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(root)])
    path = root / "crash.jsonl"
    try:
        while not path.exists() or path.stat().st_size < 400_000:
            time.sleep(0.01)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    store = SessionStore(root)
    saved, writer = store.open_for_append("crash")
    history = saved.history
    assert len(history) >= 8
    assert len(history) % 2 == 0
    for n, (q, a) in enumerate(zip(history[::2], history[1::2], strict=True), start=1):
        assert q.text.startswith(f"q{n} ")
        assert a.text.startswith(f"a{n} ")
    writer.append_messages([Message.user("after"), Message.model("crash")])
    writer.close()
    assert store.open("crash").history == (*history, Message.user("after"), Message.model("crash"))

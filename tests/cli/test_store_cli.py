"""``autocompact chat --store`` and ``sessions list|show|export|import --store`` on SQLite and
PostgreSQL; errors are one line without a traceback or a password."""

from __future__ import annotations

import json
import re
import socket

import pytest

from autocompact.sessions.stores import LATEST_SCHEMA, SqliteStore
from stores.conftest import fresh_postgres_schema

from .conftest import ChatEnv


def sqlite_address(chat_env: ChatEnv) -> str:
    """A SQLite store beside the project."""
    return f"sqlite://{chat_env.cwd.parent / 'shared.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def address(request: pytest.FixtureRequest, chat_env: ChatEnv) -> str:
    """A fresh store address of each kind."""
    return sqlite_address(chat_env) if request.param == "sqlite" else fresh_postgres_schema()


def only_id(chat_env: ChatEnv, address: str) -> str:
    """The one session in the store."""
    from autocompact.sessions.stores import open_store

    (listing,) = open_store(address).list_sessions()
    return listing.session_id


def test_chat_keeps_turns_in_the_store_and_sessions_reads_them(
    chat_env: ChatEnv, address: str
) -> None:
    """chat --store, then list/show/export --store see the two turns; no password printed."""
    result = chat_env.run(["chat", "--provider", "fake", "--store", address], ["one", "two"])
    assert result.code == 0, result.err
    sid = only_id(chat_env, address)
    assert not list(chat_env.sessions.glob("*.jsonl")) if chat_env.sessions.exists() else True
    listed = chat_env.run(["sessions", "list", "--store", address])
    assert sid in listed.out
    assert "fake/fake-model" in listed.out
    shown = chat_env.run(["sessions", "show", sid, "--store", address])
    assert "one" in shown.out
    assert "two" in shown.out
    exported = chat_env.run(["sessions", "export", sid, "--store", address, "--format", "openai"])
    assert [m["content"] for m in json.loads(exported.out)] == ["one", "OK.", "two", "OK."]
    if "@" in address:
        password = address.split("://", 1)[1].split("@", 1)[0].split(":", 1)[1]
        everything = result.out + result.err + listed.out + shown.out + exported.out
        assert password not in everything


def test_a_plain_path_ending_in_db_is_the_sqlite_file_for_chat_and_sessions(
    chat_env: ChatEnv,
) -> None:
    """chat --store PATH.db keeps the session in the SQLite file PATH.db (it made a JSONL
    directory of that name), which sessions list reads by either address."""
    path = chat_env.cwd.parent / "plain.db"
    result = chat_env.run(["chat", "--provider", "fake", "--store", str(path)], ["one"])
    assert result.code == 0, result.err
    assert path.read_bytes()[:16] == b"SQLite format 3\x00"
    sid = only_id(chat_env, f"sqlite://{path}")
    for address in (str(path), f"sqlite://{path}"):
        listed = chat_env.run(["sessions", "list", "--store", address])
        assert listed.code == 0, listed.err
        assert sid in listed.out


def test_chat_resumes_a_stored_session(chat_env: ChatEnv) -> None:
    """--store … --resume ID continues the stored conversation (the model sees turn one)."""
    address = sqlite_address(chat_env)
    chat_env.run(["chat", "--provider", "fake", "--store", address], ["remember 42"])
    sid = only_id(chat_env, address)
    result = chat_env.run(
        ["chat", "--provider", "fake", "--store", address, "--resume", sid], ["and now?"]
    )
    assert result.code == 0, result.err
    store = SqliteStore(chat_env.cwd.parent / "shared.db")
    assert [m.text for m in store.load(sid).history] == ["remember 42", "OK.", "and now?", "OK."]


def test_import_copies_the_jsonl_sessions(chat_env: ChatEnv) -> None:
    """sessions import --store: the JSONL session's export and the store's are the same."""
    assert chat_env.run(["chat", "--provider", "fake"], ["first", "second"]).code == 0
    (path,) = chat_env.sessions.glob("*.jsonl")
    address = sqlite_address(chat_env)
    result = chat_env.run(["sessions", "import", "--store", address])
    assert result.code == 0, result.err
    assert "2 turns imported" in result.out
    before = chat_env.run(["sessions", "export", path.stem, "--format", "jsonl"]).out
    after = chat_env.run(["sessions", "export", path.stem, "--store", address]).out
    assert after == before
    again = chat_env.run(["sessions", "import", "--store", address])
    assert "already in" in again.out


def test_export_original_includes_summarized_turns(chat_env: ChatEnv) -> None:
    """After a compaction the export shows the summary; --original every turn as sent."""
    from autocompact import Message

    store = SqliteStore(chat_env.cwd.parent / "shared.db")
    store.ensure("s", {"provider": "fake", "model": "m"})
    for i, word in enumerate(["alpha", "beta", "gamma"]):
        store.append_turn("s", f"t{i}", (Message.user(word), Message.model("OK.")))
    summary = (Message.user("summary: alpha beta"), Message.model("OK."))
    store.commit_compaction(store.load("s"), summary, {"status": "compressed"})
    store.append_turn("s", "t3", (Message.user("delta"), Message.model("OK.")))
    address = sqlite_address(chat_env)

    def texts(out: str) -> list[str]:
        return [json.loads(x)["parts"][0]["text"] for x in out.splitlines()]

    live = chat_env.run(["sessions", "export", "s", "--store", address]).out
    full = chat_env.run(["sessions", "export", "s", "--store", address, "--original"]).out
    assert texts(live) == ["summary: alpha beta", "OK.", "delta", "OK."]
    assert texts(full) == ["alpha", "OK.", "beta", "OK.", "gamma", "OK.", "delta", "OK."]


def free_port() -> int:
    """A port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_down_server_is_one_error_line(chat_env: ChatEnv) -> None:
    """No server: exit 1, 'Error: cannot reach …', no traceback, no password."""
    address = f"postgresql://me:hunter2hunter2@127.0.0.1:{free_port()}/db"
    result = chat_env.run(["sessions", "list", "--store", address])
    assert result.code != 0
    assert "cannot reach the PostgreSQL server" in result.err
    assert "Traceback" not in result.err + result.out
    assert "hunter2hunter2" not in result.err + result.out


def test_a_newer_schema_is_one_error_line(chat_env: ChatEnv) -> None:
    """A database from a newer autocompact: 'upgrade autocompact', exit 1, no traceback."""
    store = SqliteStore(chat_env.cwd.parent / "shared.db")
    store.ensure("s", {})
    with store._transaction(write=True) as cur:
        cur.execute("UPDATE autocompact_schema SET version = ?", (LATEST_SCHEMA + 1,))
    store.close()
    result = chat_env.run(
        ["chat", "--provider", "fake", "--store", sqlite_address(chat_env)], ["hi"]
    )
    assert result.code != 0
    assert "upgrade autocompact" in result.err
    assert "Traceback" not in result.err + result.out


@pytest.mark.parametrize("kind", ["empty-file", "other-database"])
@pytest.mark.parametrize("action", ["list", "show", "export"])
def test_reading_a_sqlite_file_that_holds_no_store_leaves_it_unchanged(
    chat_env: ChatEnv, kind: str, action: str
) -> None:
    """`sessions list|show|export --store sqlite:///FILE` on an empty file or another
    program's database: exit 2 naming the file, and the file's bytes unchanged (the read
    created autocompact's tables in it and switched it to WAL; list exited 0)."""
    import sqlite3

    path = chat_env.cwd.parent / "other.db"
    if kind == "empty-file":
        path.write_bytes(b"")
    else:
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.execute("INSERT INTO notes VALUES ('mine')")
        conn.commit()
        conn.close()
    before = path.read_bytes()
    args = ["sessions", action, *(["some-id"] if action != "list" else [])]
    result = chat_env.run([*args, "--store", f"sqlite://{path}"])
    assert result.code == 2, result.out
    assert f"{path} holds no autocompact sessions" in result.err
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir() if p.name.startswith("other")) == [
        "other.db"
    ]


def test_sessions_slash_command_lists_the_store(chat_env: ChatEnv, address: str) -> None:
    """/sessions in a chat started with --store lists that store's sessions (SQL included),
    marks the current one, and reads no JSONL file."""
    first = chat_env.run(["chat", "--provider", "fake", "--store", address], ["earlier chat"])
    assert first.code == 0, first.err
    earlier = only_id(chat_env, address)
    result = chat_env.run(
        ["chat", "--provider", "fake", "--store", address], ["hello", "/sessions"]
    )
    assert result.code == 0, result.err
    from autocompact.sessions.stores import open_store

    ids = [s.session_id for s in open_store(address).list_sessions()]
    (current,) = [i for i in ids if i != earlier]
    lines = result.out.splitlines()
    assert any(line.startswith("Sessions in ") for line in lines), result.out
    (mark,) = [line for line in lines if current in line and "turns" in line]
    assert mark.startswith("* ")
    assert "1 turns" in mark
    (other,) = [line for line in lines if earlier in line and "turns" in line]
    assert other.startswith("  ")
    assert "fake/fake-model" in other
    assert "Saving is off" not in result.out
    assert not chat_env.sessions.exists() or not list(chat_env.sessions.glob("*.jsonl"))
    if "@" in address:
        password = address.split("://", 1)[1].split("@", 1)[0].split(":", 1)[1]
        assert password not in result.out + result.err


def test_sqlite_address_with_an_absolute_path_after_three_slashes(chat_env: ChatEnv) -> None:
    """sqlite:///$HOME/agent.db (four slashes once $HOME expands) opens that file."""
    path = chat_env.cwd.parent / "abs.db"
    address = f"sqlite:///{path}"
    assert address.startswith("sqlite:////")
    result = chat_env.run(["chat", "--provider", "fake", "--store", address], ["one"])
    assert result.code == 0, result.err
    assert [s.turns for s in SqliteStore(path).list_sessions()] == [1]


def test_chat_store_redacts_the_api_keys_in_the_environment(
    chat_env: ChatEnv, address: str
) -> None:
    """A provider key typed in a message is redacted in SQLite and PostgreSQL as in JSONL."""
    secret = "plainsecretvalue-4711"  # no well-known credential shape: only the env names it
    chat_env.monkeypatch.setenv("OPENAI_API_KEY", secret)
    result = chat_env.run(["chat", "--provider", "fake", "--store", address], [f"key {secret}"])
    assert result.code == 0, result.err
    from autocompact.sessions.stores import open_store

    store = open_store(address)
    (listing,) = store.list_sessions()
    stored = json.dumps(
        [m.text for m in store.load(listing.session_id).history], ensure_ascii=False
    )
    assert secret not in stored
    assert "key " in stored  # the message itself was kept
    if address.startswith("sqlite"):
        assert secret.encode() not in (chat_env.cwd.parent / "shared.db").read_bytes()


def test_resuming_a_stored_session_keeps_its_provider_and_configured_window(
    chat_env: ChatEnv, address: str
) -> None:
    """chat --store … --continue (and --resume ID) take the provider, model, system
    instruction and configured window from the stored session, as the JSONL files do (it said
    "no provider is configured", and with --provider the window was 128K assumed)."""
    args = ["chat", "--provider", "fake", "--window", "32k", "--system", "be brief"]
    first = chat_env.run([*args, "--store", address], ["hello"])
    assert first.code == 0, first.err
    sid = only_id(chat_env, address)
    continued = chat_env.run(["chat", "--store", address, "--continue"], ["/context"])
    assert continued.code == 0, continued.err
    assert continued.out.startswith(
        "autocompact chat · fake/fake-model · window 32K (configured) ·"
    )
    assert "Window            32,000 tokens" in continued.out
    resumed = chat_env.run(["chat", "--store", address, "--resume", sid], ["again"])
    assert resumed.code == 0, resumed.err
    assert "window 32K (configured)" in resumed.out
    from autocompact.sessions.stores import open_store

    store = open_store(address)
    assert [m.text for m in store.load(sid).history] == ["hello", "OK.", "again", "OK."]
    assert store.load(sid).meta["window_source"] == "configured"


def test_resume_in_a_store_takes_a_unique_prefix_and_names_an_ambiguous_one(
    chat_env: ChatEnv,
) -> None:
    """--store … --resume PREFIX resumes the one session it starts (it said "no session");
    a prefix of two names both, exit 2, as sessions show does."""
    from autocompact import Message

    address = sqlite_address(chat_env)
    store = SqliteStore(chat_env.cwd.parent / "shared.db")
    for sid in ("20261207-201111-aaaaaa", "20261207-201111-bbbbbb", "20261208-090000-cccccc"):
        store.ensure(sid, {"provider": "fake", "context_window": 32_000})
        store.append_turn(sid, "t0", (Message.user(f"in {sid}"), Message.model("OK.")))
    store.close()
    result = chat_env.run(["chat", "--store", address, "--resume", "20261208"], ["more"])
    assert result.code == 0, result.err
    resumed = SqliteStore(chat_env.cwd.parent / "shared.db")
    history = resumed.load("20261208-090000-cccccc").history
    assert [m.text for m in history] == ["in 20261208-090000-cccccc", "OK.", "more", "OK."]
    ambiguous = chat_env.run(["chat", "--store", address, "--resume", "20261207-201111"], [])
    assert ambiguous.code == 2
    assert "matches 2 sessions" in ambiguous.err
    assert "20261207-201111-aaaaaa, 20261207-201111-bbbbbb" in ambiguous.err


def test_import_names_each_session_file_it_cannot_read_and_exits_1(chat_env: ChatEnv) -> None:
    """sessions import warns about each unreadable file (the file and why) and exits 1, as
    sessions list does (it printed "1 imported, 0 skipped" and exited 0)."""
    assert chat_env.run(["chat", "--provider", "fake"], ["hi"]).code == 0
    (good,) = chat_env.sessions.glob("*.jsonl")
    newer = chat_env.sessions / "20000101-000002-newer.jsonl"
    newer.write_text(good.read_text().replace('"schema":1', '"schema":2'))
    foreign = chat_env.sessions / "20000101-000003-foreign.jsonl"
    foreign.write_text('{"hello": 1}\n')
    result = chat_env.run(["sessions", "import", "--store", sqlite_address(chat_env)])
    assert result.code == 1
    assert f"{good.stem}: 1 turns imported" in result.out
    assert "1 imported, 0 skipped, 2 file(s) could not be read (named above)" in result.out
    warnings = [line for line in result.err.splitlines() if line.startswith("Warning: ")]
    assert len(warnings) == 2
    assert any(str(newer) in w and "schema version 2 is newer" in w for w in warnings)
    assert any(str(foreign) in w and "not an autocompact session" in w for w in warnings)


@pytest.fixture(params=["sqlite", "postgres", "jsonl"])
def any_address(request: pytest.FixtureRequest, chat_env: ChatEnv) -> str:
    """A fresh store address of each kind, a JSONL directory included."""
    if request.param == "jsonl":
        return f"jsonl://{chat_env.cwd.parent / 'shared-jsonl'}"
    return sqlite_address(chat_env) if request.param == "sqlite" else fresh_postgres_schema()


def test_a_model_switch_in_a_stored_chat_is_resumed(chat_env: ChatEnv, any_address: str) -> None:
    """/model NAME in chat --store is kept with the stored session, as a session file's model
    record is: --resume and --continue go on with it (they went back to the first model), and
    the rest of what the session started with stays."""
    args = ["chat", "--provider", "fake", "--window", "32k", "--system", "be brief"]
    first = chat_env.run([*args, "--store", any_address], ["hi", "/model fake-2", "more"])
    assert first.code == 0, first.err
    assert "Now using fake/fake-2" in first.out
    sid = only_id(chat_env, any_address)
    resumed = chat_env.run(["chat", "--store", any_address, "--resume", sid], ["/model"])
    assert resumed.code == 0, resumed.err
    assert resumed.out.startswith("autocompact chat · fake/fake-2 · window 32K (configured) ·")
    assert "Model: fake-2" in resumed.out
    continued = chat_env.run(["chat", "--store", any_address, "--continue"], ["again"])
    assert continued.code == 0, continued.err
    assert continued.out.startswith("autocompact chat · fake/fake-2 ·")
    from autocompact.sessions.stores import open_store

    store = open_store(any_address)
    meta = store.load(sid).meta
    assert (meta["model"], meta["window_source"], meta["system_instruction"]) == (
        "fake-2",
        "configured",
        "be brief",
    )
    assert meta["cwd"] == str(chat_env.cwd)
    history = [m.text for m in store.load(sid).history]
    assert history == ["hi", "OK.", "more", "OK.", "again", "OK."]
    store.close()


def _stored_state(address: str, sid: str) -> tuple[object, ...]:
    """Everything a store keeps of session ``sid``, and its listing."""
    from autocompact.sessions.stores import open_store

    store = open_store(address)
    try:
        listing = [(s.session_id, s.updated, s.turns, s.meta) for s in store.list_sessions()]
        return store.load(sid), store.entries(sid), store.attempts(sid), listing
    finally:
        store.close()


def test_no_save_resumes_from_the_store_and_writes_nothing(
    chat_env: ChatEnv, any_address: str
) -> None:
    """chat --no-save --store … --resume ID (or --continue) reads the session from the store
    (it looked for a JSONL file of that id) and writes nothing: not to the store (a /model
    switch neither), not to the JSONL files."""
    first = chat_env.run(["chat", "--provider", "fake", "--store", any_address], ["remember 42"])
    assert first.code == 0, first.err
    sid = only_id(chat_env, any_address)
    before = _stored_state(any_address, sid)
    for how in (["--resume", sid[:15]], ["--continue"]):
        result = chat_env.run(
            ["chat", "--no-save", "--store", any_address, *how],
            ["and now?", "/model fake-2", "/context"],
        )
        assert result.code == 0, result.err
        assert f"Resumed {sid} from " in result.out
        assert ": 2 messages, about " in result.out
        assert "Current           " in result.out  # /context on the resumed history
        assert f"Not saved (--no-save): {sid} is as it was before this chat." in result.out
        assert "Kept as" not in result.out
        assert "Saved as" not in result.out
        assert _stored_state(any_address, sid) == before
    assert not list(chat_env.sessions.glob("*.jsonl")) if chat_env.sessions.exists() else True


def test_no_save_on_a_store_that_does_not_exist_creates_nothing(chat_env: ChatEnv) -> None:
    """--no-save --store on a missing SQLite file: one error line naming it, exit 2, and the
    file is not created (reading never creates a store)."""
    path = chat_env.cwd.parent / "missing.db"
    result = chat_env.run(
        ["chat", "--provider", "fake", "--no-save", "--store", f"sqlite://{path}", "--resume", "x"]
    )
    assert result.code == 2
    assert result.err.startswith("Error: ")
    assert str(path) in result.err
    assert "Traceback" not in result.err
    assert not path.exists()


def test_a_resumed_chat_says_so_from_a_store_as_from_a_file(
    chat_env: ChatEnv, address: str
) -> None:
    """A chat resumed from a store prints the "Resumed ID …" line a session file's does (it
    printed none), naming the store (no password) after the id."""
    assert chat_env.run(["chat", "--provider", "fake"], ["hello"]).code == 0
    (path,) = chat_env.sessions.glob("*.jsonl")
    from_file = chat_env.run(["chat", "--resume", path.stem], [])
    assert chat_env.run(["chat", "--provider", "fake", "--store", address], ["hello"]).code == 0
    sid = only_id(chat_env, address)
    from_store = chat_env.run(["chat", "--store", address, "--resume", sid], [])
    from autocompact.sessions.stores import open_store

    shown = open_store(address).address
    # The same sentence; the token figure is each chat's own estimate (a store keeps the
    # provider's last count, a session file is resumed on the cold estimate).
    said = r": 2 messages, about \d+ tokens\.$"
    assert re.fullmatch(rf"Resumed {path.stem}{said}", from_file.out.splitlines()[1])
    assert re.fullmatch(
        rf"Resumed {sid} from {re.escape(shown)}{said}", from_store.out.splitlines()[1]
    )
    if "@" in address:
        password = address.split("://", 1)[1].split("@", 1)[0].split(":", 1)[1]
        assert password not in from_store.out


def test_no_save_on_a_session_file_says_it_was_not_saved(chat_env: ChatEnv) -> None:
    """chat --no-save --resume ID (a session file) ends with "Not saved (--no-save)", the
    file unchanged (it said "Saved as ID", which it was not)."""
    assert chat_env.run(["chat", "--provider", "fake"], ["hello"]).code == 0
    (path,) = chat_env.sessions.glob("*.jsonl")
    before = path.read_bytes()
    result = chat_env.run(["chat", "--no-save", "--resume", path.stem], ["more"])
    assert result.code == 0, result.err
    assert "Saved as" not in result.out
    assert result.out.splitlines()[-1] == (
        f"Not saved (--no-save): {path.stem} is as it was before this chat."
    )
    assert path.read_bytes() == before

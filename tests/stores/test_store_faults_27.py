"""Bad-input corpus, store faults: a PostgreSQL restart, corrupted rows, a reused turn id."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from autocompact import ChatSession
from autocompact.cli.main import main
from autocompact.content import Message
from autocompact.errors import SessionStoreError
from autocompact.providers.fake import FakeProvider
from autocompact.sessions.stores import SqliteStore, open_store
from autocompact.sessions.stores.base import SessionStore

from .conftest import make_store, postgres_dsn

META = {"provider": "fake", "model": "m", "context_window": 10_000, "system_instruction": "s"}
PG_BIN = os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin")


def _restart_postgres() -> None:
    """Restart the test server (``.ci/postgres.sh`` started it; same options, same port)."""
    directory = os.environ.get("AUTOCOMPACT_TEST_POSTGRES_DIR", "")
    if not directory or not Path(directory, "data").is_dir():
        pytest.skip("no AUTOCOMPACT_TEST_POSTGRES_DIR to restart (.ci/postgres.sh start sets it)")
    command = [f"{PG_BIN}/pg_ctl", "-D", f"{directory}/data", "-m", "fast", "-w", "restart"]
    command += ["-l", f"{directory}/server.log"]
    owner = Path(directory, "owner").read_text().strip() if os.getuid() == 0 else ""
    if owner and owner != "root":
        command = ["runuser", "-u", owner, "--", *command]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, timeout=120)


@pytest.mark.parametrize("kind", ["postgres", "postgres-async"])
def test_a_postgres_restart_mid_session_loses_no_send_and_no_turn(
    kind: str, tmp_path: Path
) -> None:
    """Every pooled connection dies in a restart: the next sends still work, every turn is kept."""
    postgres_dsn()
    store: Any = make_store(kind, tmp_path, pool_size=4)
    chat = ChatSession(FakeProvider(), context_window=128_000, store=store, session_id="s")
    for i in range(3):
        chat.send(f"before {i}", turn_id=f"b{i}")
    _restart_postgres()
    replies = [chat.send(f"after {i}", turn_id=f"a{i}") for i in range(6)]
    assert all(r.text for r in replies)
    turns = [e for e in store.entries("s") if e.kind == "turn"]
    assert [e.turn_id for e in turns] == ["b0", "b1", "b2", *(f"a{i}" for i in range(6))]
    store.close()


# -- corrupted rows ---------------------------------------------------------------------------


def _corrupt(store: Any, kind: str, statements: list[str]) -> None:
    """Run raw SQL on the store's database (PostgreSQL: a column may be retyped first)."""
    if kind == "sqlite":
        import sqlite3

        with sqlite3.connect(store.path) as conn:
            for statement in statements:
                conn.execute(statement)
        return
    with store._transaction(write=True) as cur:
        for statement in statements:
            cur.execute(statement)


def _reopen(store: Any, kind: str) -> SessionStore:
    return SqliteStore(store.path) if kind == "sqlite" else open_store(store._dsn)


def _seeded(kind: str, tmp_path: Path) -> Any:
    store: Any = make_store(kind, tmp_path)
    store.ensure("s", META)
    store.append_turn("s", "t1", (Message.user("hello there"), Message.model("hi")))
    store.append_turn("s", "t2", (Message.user("second"), Message.model("ok")))
    return store


def _row_count(store: Any, kind: str) -> int:
    if kind == "sqlite":
        import sqlite3

        with sqlite3.connect(store.path) as conn:
            return int(conn.execute("SELECT count(*) FROM ac_entries").fetchone()[0])
    with store._transaction(write=False) as cur:
        cur.execute("SELECT count(*) FROM ac_entries")
        return int(cur.fetchone()[0])


RETYPE = {  # PostgreSQL keeps a column's type: make it text to hold a bad value
    "version": "ALTER TABLE autocompact_schema ALTER COLUMN version TYPE TEXT",
}
CORRUPTIONS = {
    # name: (statement, what the message must name besides the store)
    "schema version": (
        "UPDATE autocompact_schema SET version = 'two'",
        ["schema version", "'two'"],
    ),
    "cut messages": (
        'UPDATE ac_entries SET messages = \'[{"role": "user", "par\' WHERE seq = 1',
        ["'s'", "seq 1", "messages"],
    ),
    "cut meta": (
        "UPDATE ac_sessions SET meta = '{\"provider\": ' WHERE id = 's'",
        ["'s'", "meta"],
    ),
    "text epoch": (
        "UPDATE ac_sessions SET epoch = 'zero' WHERE id = 's'",
        ["'s'", "epoch", "'zero'"],
    ),
    "unknown kind": (
        "UPDATE ac_entries SET kind = 'bogus' WHERE seq = 2",
        ["'s'", "seq 2", "kind", "'bogus'"],
    ),
}


@pytest.mark.parametrize("what", sorted(CORRUPTIONS))
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_corrupted_rows_give_a_store_error_naming_session_row_and_field(
    kind: str, what: str, tmp_path: Path
) -> None:
    """A corrupted row: SessionStoreError naming the session, row and field; nothing deleted."""
    store = _seeded(kind, tmp_path)
    statement, names = CORRUPTIONS[what]
    retype = [s for field, s in RETYPE.items() if field in what and kind == "postgres"]
    if what == "text epoch" and kind == "postgres":
        # A text epoch column fails inside the SQL (text = bigint); a NULL one reaches the row
        # decoder, as SQLite's text does.
        retype = ["ALTER TABLE ac_sessions ALTER COLUMN epoch DROP NOT NULL"]
        statement = "UPDATE ac_sessions SET epoch = NULL WHERE id = 's'"
        names = ["'s'", "epoch", "None"]
    _corrupt(store, kind, [*retype, statement])
    reader = _reopen(store, kind)
    with pytest.raises(SessionStoreError) as caught:
        reader.load("s")
    text = str(caught.value)
    for name in names:
        assert name in text, (name, text)
    assert "bug" not in text.lower()
    assert _row_count(store, kind) == 2  # nothing was lost or rewritten
    reader.close()
    store.close()


@pytest.mark.parametrize("what", ["cut meta", "cut messages", "text epoch", "unknown kind"])
def test_cli_reports_a_corrupted_sqlite_store_clearly(
    what: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`sessions show --store` on a corrupted row: exit 2 and a message naming the field."""
    store = _seeded("sqlite", tmp_path)
    statement, names = CORRUPTIONS[what]
    _corrupt(store, "sqlite", [statement])
    store.close()
    code = main(["sessions", "show", "s", "--store", f"sqlite:///{store.path}"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "This is a bug" not in err
    for name in names:
        assert name in err, (name, err)


# -- a reused turn id -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "jsonl"])
def test_a_retried_turn_id_with_the_same_message_returns_the_stored_reply(
    kind: str, tmp_path: Path
) -> None:
    """Same turn id, same message (a secret in it, redacted in the store): no model call."""
    store: Any = make_store(kind, tmp_path, redact=["hunter2-secret-key"])
    provider = FakeProvider()
    chat = ChatSession(provider, context_window=128_000, store=store, session_id="s")
    text = "my key is hunter2-secret-key and sk-proj-" + "A1b2C3d4E5" * 3
    first = chat.send(text, turn_id="t1")
    calls = len(provider.requests)
    again = chat.send(text, turn_id="t1")
    assert again.text == first.text
    assert len(provider.requests) == calls
    store.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "jsonl"])
def test_a_reused_turn_id_with_another_message_is_refused(kind: str, tmp_path: Path) -> None:
    """Same turn id, another message: SessionStoreError naming the id; nothing sent or stored."""
    store: Any = make_store(kind, tmp_path)
    provider = FakeProvider()
    chat = ChatSession(provider, context_window=128_000, store=store, session_id="s")
    chat.send("what is 2 + 2?", turn_id="t-42")
    calls, entries = len(provider.requests), store.entries("s")
    with pytest.raises(SessionStoreError) as caught:
        chat.send("and what is 3 + 3?", turn_id="t-42")
    assert "'t-42'" in str(caught.value)
    assert "'s'" in str(caught.value)
    assert len(provider.requests) == calls
    assert store.entries("s") == entries
    assert [m.text for m in chat.history] == [m.text for e in entries for m in e.messages]
    store.close()

"""Bad input to a store: clear errors saying what to do, no half-written turn, no password shown."""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from autocompact.content import Message
from autocompact.errors import SessionStoreError
from autocompact.sessions.stores import LATEST_SCHEMA, SessionStore, SqliteStore, open_store
from autocompact.sessions.stores.base import redact_address

from .conftest import fresh_postgres_schema, make_store, postgres_dsn

META = {"provider": "fake", "model": "m", "context_window": 10_000}
PAIR = (Message.user("q"), Message.model("a"))


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "jsonl"])
def test_a_10kb_session_id_is_refused_with_what_to_do(kind: str, tmp_path: Path) -> None:
    """A 10 KB id: an error that says the limit, nothing created."""
    store = make_store(kind, tmp_path)
    with pytest.raises(SessionStoreError, match="at most 256"):
        store.ensure("x" * 10_240, META)
    assert store.list_sessions() == []


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "jsonl"])
def test_a_control_character_in_an_id_is_refused(kind: str, tmp_path: Path) -> None:
    """A newline or NUL in an id is refused before anything is written."""
    store = make_store(kind, tmp_path)
    with pytest.raises(SessionStoreError, match="control character"):
        store.ensure("a\nb\x00", META)


def test_jsonl_refuses_slashes_with_its_own_rule(tmp_path: Path) -> None:
    """The file store names the characters an id may hold (it becomes a file name)."""
    store = make_store("jsonl", tmp_path)
    with pytest.raises(SessionStoreError, match="letters, digits"):
        store.ensure("../escape", META)
    assert not (tmp_path / "escape.jsonl").exists()


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "jsonl"])
def test_a_50_mb_turn_is_refused_whole(kind: str, tmp_path: Path) -> None:
    """A 50 MB tool output: an error naming the limit and the way out; nothing written."""
    store = make_store(kind, tmp_path)
    store.ensure("s", META)
    store.append_turn("s", "t0", PAIR)
    before = store.load("s")
    huge = (Message.user("x" * 50_000_000), Message.model("a"))
    with pytest.raises(SessionStoreError, match=r"50\.0 MB, over .* max_turn_bytes"):
        store.append_turn("s", "t1", huge)
    assert store.load("s") == before


def test_a_large_turn_under_a_raised_limit_round_trips(tmp_path: Path) -> None:
    """With max_turn_bytes raised, a 20 MB turn is stored and read back whole."""
    store = SqliteStore(tmp_path / "s.db", max_turn_bytes=64_000_000)
    store.ensure("s", META)
    store.append_turn("s", "t0", (Message.user("y" * 20_000_000), Message.model("a")))
    assert len(store.load("s").history[0].text) == 20_000_000


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_newer_schema_is_refused_and_left_alone(kind: str, tmp_path: Path) -> None:
    """A database written by a newer autocompact: 'upgrade autocompact', and no write."""
    store = make_store(kind, tmp_path)
    store.ensure("s", META)
    with store._transaction(write=True) as cur:  # type: ignore[attr-defined]
        cur.execute("UPDATE autocompact_schema SET version = ?", (LATEST_SCHEMA + 1,))
    store.close()
    again = make_store(kind, tmp_path) if kind == "sqlite" else open_store(store._dsn)  # type: ignore[attr-defined]
    with pytest.raises(SessionStoreError, match=r"newer autocompact.*pip install -U autocompact"):
        again.append_turn("s", "t0", PAIR)
    with again._transaction(write=False) as cur:  # type: ignore[attr-defined]
        cur.execute("SELECT COUNT(*) FROM ac_entries")
        assert cur.fetchone()[0] == 0


def test_a_read_only_sqlite_database_says_so(tmp_path: Path) -> None:
    """Opened with ?mode=ro: reads work, a write says the file is read-only and what to do."""
    writable = SqliteStore(tmp_path / "s.db")
    writable.ensure("s", META)
    writable.close()
    store = open_store(f"sqlite://{tmp_path / 's.db'}?mode=ro")
    assert store.load("s").entries == ()
    with pytest.raises(SessionStoreError, match=r"read-only.*without \?mode=ro"):
        store.append_turn("s", "t0", PAIR)


def test_a_read_only_postgres_database_says_so() -> None:
    """default_transaction_read_only: reads work, a write names the setting to change."""
    dsn = fresh_postgres_schema()
    writable = open_store(dsn)
    writable.ensure("s", META)
    writable.close()
    store = open_store(dsn.replace("options=", "options=-cdefault_transaction_read_only%3Don%20"))
    assert store.load("s").entries == ()
    with pytest.raises(SessionStoreError, match=r"read-only.*default_transaction_read_only"):
        store.append_turn("s", "t0", PAIR)


def test_an_unopenable_sqlite_path_says_which_directory(tmp_path: Path) -> None:
    """A path under a regular file: 'cannot open ... check that its directory exists'."""
    (tmp_path / "file").write_text("")
    store = SqliteStore(tmp_path / "file" / "s.db")
    with pytest.raises(SessionStoreError, match="check that its directory exists"):
        store.ensure("s", META)


def free_port() -> int:
    """A port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_postgres_server_that_is_down_is_a_clear_error_without_the_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Connection refused: what to check, the address with ***, the password nowhere."""
    password = "s3cret-Pa55word"
    store = open_store(
        f"postgresql://autocompact:{password}@127.0.0.1:{free_port()}/db", connect_timeout=2
    )
    caplog.set_level(logging.DEBUG)
    with pytest.raises(SessionStoreError) as err:
        store.ensure("s", META)
    text = str(err.value)
    assert "cannot reach the PostgreSQL server" in text
    assert "autocompact:***@127.0.0.1" in text
    assert password not in text + err.value.store + repr(err.value.args) + caplog.text
    assert err.value.__cause__ is None


def test_a_wrong_password_is_not_echoed() -> None:
    """The real server refuses a wrong password: the error says so without repeating it."""
    parts = urlsplit(postgres_dsn())
    wrong = "wrong-" + (parts.password or "x")
    dsn = parts._replace(netloc=f"{parts.username}:{wrong}@{parts.hostname}:{parts.port}")
    with pytest.raises(SessionStoreError, match="password") as err:
        open_store(dsn.geturl(), connect_timeout=5).ensure("s", META)
    assert wrong not in str(err.value)


def test_no_saved_row_holds_the_password(tmp_path: Path) -> None:
    """After a chat's writes, no table of the PostgreSQL store contains the DSN's password."""
    from autocompact.chat import ChatSession
    from autocompact.testing import FakeProvider

    dsn = fresh_postgres_schema()
    password = urlsplit(dsn).password
    assert password
    store = open_store(dsn)
    ChatSession(FakeProvider(), context_window=10_000, store=store, session_id="s").send("hi")
    with store._transaction(write=False) as cur:  # type: ignore[attr-defined]
        for table in ("ac_sessions", "ac_entries", "ac_attempts", "autocompact_schema"):
            cur.execute(f"SELECT * FROM {table}")
            assert password not in repr(cur.fetchall())
    assert password not in store.address


@pytest.mark.parametrize(
    ("address", "shown"),
    [
        ("postgresql://u:p%40ss@h:5/db", "postgresql://u:***@h:5/db"),
        ("postgresql://h/db?user=u&password=hunter22", "postgresql://h/db?user=u&password=***"),
        ("sqlite:///tmp/x.db", "sqlite:///tmp/x.db"),
    ],
)
def test_addresses_are_shown_without_their_password(address: str, shown: str) -> None:
    """Both places a password hides in a URL are replaced by ***."""
    assert redact_address(address)[0] == shown


def test_an_unknown_store_address_names_the_kinds(tmp_path: Path) -> None:
    """mysql://… is not a store: the error lists the three kinds, without the password."""
    with pytest.raises(SessionStoreError, match="sqlite:///path, postgresql://") as err:
        open_store("mysql://u:hunter22@h/db")
    assert "hunter22" not in str(err.value)


def test_sqlite_files_are_private(tmp_path: Path) -> None:
    """The database file is created 0600."""
    store: SessionStore = SqliteStore(tmp_path / "d" / "s.db")
    store.ensure("s", META)
    assert (tmp_path / "d" / "s.db").stat().st_mode & 0o777 == 0o600


def test_a_new_sqlite_file_in_a_folder_that_cannot_be_written_says_so(tmp_path: Path) -> None:
    """A store to be created in a folder nobody may write to: the error names the folder and
    says it cannot be written (it said the database "is read-only" and to "open it without
    ?mode=ro", which was never given, for a file that did not exist yet)."""
    import os
    import shutil
    import subprocess

    folder = tmp_path / "locked"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o500)
    elif (
        shutil.which("chattr") is None
        or subprocess.run(
            ["chattr", "+i", str(folder)], capture_output=True, check=False
        ).returncode
    ):
        pytest.skip("cannot make a folder read-only here (root without chattr)")
    try:
        with pytest.raises(SessionStoreError) as caught:
            SqliteStore(folder / "s.db").ensure("s", META)
    finally:
        if os.geteuid() != 0:
            folder.chmod(0o700)
        else:
            subprocess.run(["chattr", "-i", str(folder)], capture_output=True, check=False)
    message = str(caught.value)
    assert f"cannot create the SQLite database {folder / 's.db'}" in message
    assert f"the folder {folder} cannot be written" in message
    assert "mode=ro" not in message
    assert not (folder / "s.db").exists()

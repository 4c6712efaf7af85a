"""Issue 27: the CLI's doors of the bad-input corpus — bytes that are not UTF-8, file modes,
imports and store addresses that lie. Each case: the exit code, the message naming the file
or value, and nothing lost (the saved session, the store, the files on disk)."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from autocompact import Message, SessionStoreError
from autocompact.sessions import load_session
from autocompact.sessions.store import SessionStore as SessionFiles
from autocompact.sessions.stores import SqliteStore

from .conftest import ChatEnv


@contextlib.contextmanager
def umask(mask: int) -> Iterator[None]:
    """Run the block under ``mask``."""
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    """The permission bits of ``path``."""
    return stat.S_IMODE(path.stat().st_mode)


# -- 1. bytes that are not UTF-8 --------------------------------------------------------------


@pytest.mark.parametrize("with_store", [False, True], ids=["files", "sqlite"])
def test_piped_lines_that_are_not_utf8_are_sent_replaced_and_saved(
    chat_env: ChatEnv, with_store: bool
) -> None:
    """Two lines holding a byte that is not UTF-8 (a surrogate, as stdin gives it): exit 0, the
    user told once, and the saved session holds U+FFFD — the replies are kept."""
    store = ["--store", f"sqlite:///{chat_env.cwd.parent / 's.db'}"] if with_store else []
    result = chat_env.run(["chat", "--provider", "fake", *store], ["caf\udce9", "na\udcefve"])
    assert result.code == 0, result.err
    assert result.out.count("not UTF-8") == 1
    if with_store:
        (listing,) = SqliteStore(chat_env.cwd.parent / "s.db").list_sessions()
        history = SqliteStore(chat_env.cwd.parent / "s.db").load(listing.session_id).history
    else:
        (path,) = chat_env.sessions.glob("*.jsonl")
        history = load_session(path).history
    assert [m.text for m in history] == ["caf\ufffd", "OK.", "na\ufffdve", "OK."]


def test_real_bytes_on_stdin(tmp_path: Path) -> None:
    """printf 'caf\\xe9' | autocompact chat --provider fake: exit 0 (it was "This is a bug")."""
    env = {**os.environ, "AUTOCOMPACT_HOME": str(tmp_path / "home"), "PYTHONUTF8": "0"}
    env.pop("AUTOCOMPACT_FAKE_SCRIPT", None)
    done = subprocess.run(
        [sys.executable, "-m", "autocompact.cli.main", "chat", "--provider", "fake"],
        input=b"caf\xe9\n",
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert b"not UTF-8" in done.stdout
    (path,) = (tmp_path / "home" / "sessions").glob("*.jsonl")
    assert load_session(path).history[0].text == "caf\ufffd"


# -- 4. file modes ----------------------------------------------------------------------------


def test_export_from_a_store_is_private_under_umask_000(chat_env: ChatEnv) -> None:
    """sessions export --store -o FILE writes 0600 even under umask 000 (it was 0666)."""
    address = f"sqlite:///{chat_env.cwd.parent / 's.db'}"
    assert chat_env.run(["chat", "--provider", "fake", "--store", address], ["hi"]).code == 0
    (listing,) = SqliteStore(chat_env.cwd.parent / "s.db").list_sessions()
    out = chat_env.cwd / "export.jsonl"
    with umask(0):
        result = chat_env.run(
            ["sessions", "export", listing.session_id, "--store", address, "-o", str(out)]
        )
    assert result.code == 0, result.err
    assert mode(out) == 0o600
    assert "hi" in out.read_text()


def test_a_new_sqlite_store_path_is_private_under_umask_000(chat_env: ChatEnv) -> None:
    """The folders created for a new SQLite store are 0700 and the file 0600 under umask 000."""
    base = chat_env.cwd.parent / "deep"
    path = base / "er" / "s.db"
    with umask(0):
        result = chat_env.run(["chat", "--provider", "fake", "--store", f"sqlite:///{path}"], ["x"])
    assert result.code == 0, result.err
    assert [mode(p) for p in (base, base / "er", path)] == [0o700, 0o700, 0o600]


# -- 6. imports and stores that lie -----------------------------------------------------------


def _jsonl_session(root: Path, sid: str, texts: list[str]) -> None:
    files = SessionFiles(root)
    with files.create(provider="fake", model="m", context_window=1000, session_id=sid) as writer:
        for text in texts:
            writer.append_messages([Message.user(text), Message.model("ok")])


def test_import_is_all_or_nothing_per_session(chat_env: ChatEnv) -> None:
    """A session with a turn over the store's limit is not imported at all (exit 1, named);
    the others are; a rerun names it again instead of "already in …, skipped"."""
    _jsonl_session(chat_env.sessions, "big", ["small", "x" * (17 * 1024 * 1024), "after"])
    _jsonl_session(chat_env.sessions, "fine", ["one", "two"])
    db = chat_env.cwd.parent / "s.db"
    address = f"sqlite:///{db}"
    first = chat_env.run(["sessions", "import", "--store", address])
    assert first.code == 1, first.out + first.err
    assert "big: not imported" in first.out
    assert "16.8 MB" in first.out
    assert "fine: 2 turns imported" in first.out
    store = SqliteStore(db)
    assert not store.exists("big")  # nothing partial
    assert len(store.load("fine").history) == 4
    again = chat_env.run(["sessions", "import", "--store", address])
    assert again.code == 1
    assert "big: not imported" in again.out
    assert "big: already in" not in again.out


def test_import_from_a_missing_directory(chat_env: ChatEnv) -> None:
    """import --from /nonexistent: exit 2 naming the directory (it said "0 imported", exit 0)."""
    missing = chat_env.cwd / "nonexistent"
    address = f"sqlite:///{chat_env.cwd.parent / 's.db'}"
    result = chat_env.run(["sessions", "import", "--store", address, "--from", str(missing)])
    assert result.code == 2
    assert str(missing) in result.err
    assert "no such directory" in result.err
    assert not (chat_env.cwd.parent / "s.db").exists()


@pytest.mark.parametrize(
    "args",
    [["sessions", "list"], ["chat", "--provider", "fake"], ["sessions", "export", "x"]],
    ids=["list", "chat", "export"],
)
def test_an_empty_store_address_is_refused(chat_env: ChatEnv, args: list[str]) -> None:
    """--store '': exit 2 saying the address is empty (it silently meant the JSONL files)."""
    result = chat_env.run([*args, "--store", ""], ["hello"])
    assert result.code == 2
    assert "store address is empty" in result.err
    assert not chat_env.sessions.exists()  # no chat ran, nothing saved


@pytest.mark.parametrize("command", ["list", "show", "export"])
def test_reading_a_missing_store_creates_nothing(chat_env: ChatEnv, command: str) -> None:
    """sessions list|show|export --store sqlite:///typo.db: exit 2 naming the file; no file."""
    typo = chat_env.cwd / "typo.db"
    args = ["sessions", command] + ([] if command == "list" else ["some-id"])
    result = chat_env.run([*args, "--store", f"sqlite:///{typo}"])
    assert result.code == 2
    assert str(typo) in result.err
    assert not typo.exists()


def test_sqlite_relative_address_in_the_cli(chat_env: ChatEnv) -> None:
    """--store sqlite:relative.db: a SQLite file in the current directory, not a JSONL folder."""
    result = chat_env.run(["chat", "--provider", "fake", "--store", "sqlite:relative.db"], ["x"])
    assert result.code == 0, result.err
    assert (chat_env.cwd / "relative.db").is_file()
    assert [s.turns for s in SqliteStore(chat_env.cwd / "relative.db").list_sessions()] == [1]


def _immutable(paths: list[Path], on: bool) -> bool:
    if shutil.which("chattr") is None:
        return False
    flag = "+i" if on else "-i"
    done = subprocess.run(["chattr", flag, *map(str, paths)], capture_output=True, check=False)
    return done.returncode == 0


def test_a_read_only_sqlite_store_is_readable_with_mode_ro(chat_env: ChatEnv) -> None:
    """A store in a folder nobody may write to: ?mode=ro reads it (it failed, advising to
    drop ?mode=ro). The folder is made immutable with chattr (root ignores file modes)."""
    folder = chat_env.cwd.parent / "ro"
    db = folder / "s.db"
    assert (
        chat_env.run(["chat", "--provider", "fake", "--store", f"sqlite:///{db}"], ["x"]).code == 0
    )
    for extra in folder.glob("s.db-*"):  # what a clean close leaves: no -wal, no -shm
        extra.unlink()
    if os.geteuid() != 0 and os.access(folder, os.W_OK):
        folder.chmod(0o500)
        db.chmod(0o400)
        locked = [folder]
    elif _immutable([db, folder], True):
        locked = [db, folder]
    else:
        pytest.skip("cannot make a folder read-only here (root without chattr)")
    try:
        result = chat_env.run(["sessions", "list", "--store", f"sqlite:///{db}?mode=ro"])
    finally:
        if locked == [folder]:
            folder.chmod(0o700)
        else:
            _immutable(locked, False)
    assert result.code == 0, result.err
    assert "fake/fake-model" in result.out


class _FailsOnce(SqliteStore):
    """A SQLite store whose second import turn fails once, as a database going away would."""

    failed = False

    def append_turn(self, session_id: str, turn_id: str, *args: object, **kw: object) -> object:  # type: ignore[override]
        if turn_id == "import-1" and not self.failed:
            self.failed = True
            raise SessionStoreError("the database went away", store=self.address)
        return super().append_turn(session_id, turn_id, *args, **kw)  # type: ignore[arg-type]


def test_an_interrupted_import_is_finished_by_the_next_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A write fails half-way: exit 1 saying to run again; the rerun writes the rest (it said
    "already in …, skipped" and the rest was never imported)."""
    from autocompact.cli.store_import import import_sessions
    from autocompact.sessions.stores import JsonlStore

    _jsonl_session(tmp_path / "files", "s", ["one", "two", "three"])
    files = JsonlStore(tmp_path / "files")
    target = _FailsOnce(tmp_path / "s.db")
    assert import_sessions(files, target, None) == 1
    assert "run the import again" in capsys.readouterr().out
    assert [m.text for m in target.load("s").history] == ["one", "ok"]
    assert import_sessions(files, target, None) == 0
    out = capsys.readouterr().out
    assert "finishing an interrupted import (1 of 3 written)" in out
    assert [m.text for m in target.load("s").history] == ["one", "ok", "two", "ok", "three", "ok"]
    assert import_sessions(files, target, None) == 0
    assert "already in" in capsys.readouterr().out

"""Issue 16: two chats on one session, unwritable / deleted / unreadable files, modes, secrets."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from autocompact.content import Message
from autocompact.errors import SessionFileError, SessionInUseError
from autocompact.sessions import SessionStore, load_session
from autocompact.sessions.records import REDACTED, redact_credentials

from .conftest import PROVIDER_KEYS, ChatEnv


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_KEYS}
    env.update(AUTOCOMPACT_HOME=str(home), COLUMNS="200")
    return env


def _chat(home: Path, cwd: Path, *args: str, stdin: int | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "autocompact.cli.main", "chat", "--provider", "fake", *args],
        stdin=stdin if stdin is not None else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=_env(home),
        text=True,
    )


def _user_texts(path: Path) -> list[str]:
    return [m.text for m in load_session(path).history if m.role == "user"]


def test_two_chats_on_one_session_never_lose_a_turn(tmp_path: Path) -> None:
    """Two real processes `chat --continue`: the second is told the session is in use."""
    home, cwd = tmp_path / "home", tmp_path / "project"
    cwd.mkdir()
    seed = _chat(home, cwd)
    seed.communicate("seed\n", timeout=60)
    assert seed.returncode == 0
    (path,) = (home / "sessions").glob("*.jsonl")

    first = _chat(home, cwd, "--continue")
    assert first.stdout is not None
    assert first.stdin is not None
    greeting = first.stdout.readline()  # printed after the session was opened and locked
    assert "autocompact chat" in greeting
    second = _chat(home, cwd, "--continue")
    _, err = second.communicate("from the second\n", timeout=60)
    assert second.returncode == 2  # EXIT_USAGE: an error the user can act on
    assert "in use by another autocompact chat" in err
    assert path.name in err
    assert f"process {first.pid}" in err
    first.stdin.write("from the first\n")
    first.stdin.close()
    first.wait(60)
    assert first.returncode == 0
    assert _user_texts(path) == ["seed", "from the first"]

    # Once the first chat has ended, the session can be continued again.
    third = _chat(home, cwd, "--continue")
    third.communicate("from the third\n", timeout=60)
    assert third.returncode == 0
    assert _user_texts(path) == ["seed", "from the first", "from the third"]


def test_a_second_writer_in_the_same_process_is_refused(tmp_path: Path) -> None:
    """The lock holds between writers of one process too; closing the first releases it."""
    store = SessionStore(tmp_path / "s")
    writer = store.create(provider="fake", model="m", context_window=1000, session_id="one")
    with pytest.raises(SessionInUseError, match="in use") as info:
        store.open_for_append("one")
    assert info.value.path.endswith("one.jsonl")
    writer.close()
    _, again = store.open_for_append("one")
    again.close()


def _make_unwritable(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """chmod 0444; as root (who may write anyway) the open for writing is refused instead."""
    path.chmod(0o444)
    if os.geteuid() == 0:
        import autocompact.sessions.store as store_mod

        real_open = os.open

        def refusing(file: object, flags: int, *args: object, **kw: object) -> int:
            if str(file) == str(path) and flags & (os.O_WRONLY | os.O_RDWR):
                raise PermissionError(13, "Permission denied", str(file))
            return real_open(file, flags, *args, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(store_mod.os, "open", refusing)


def test_a_read_only_session_file_takes_the_not_saved_path(chat_env: ChatEnv) -> None:
    """Read-only file: the chat goes on, every turn is answered, the user is told, no 'Saved as'."""
    assert chat_env.run(["chat", "--provider", "fake"], ["seed"]).code == 0
    (path,) = chat_env.sessions.glob("*.jsonl")
    before = path.read_bytes()
    _make_unwritable(path, chat_env.monkeypatch)
    result = chat_env.run(["chat", "--continue"], ["one", "two"])
    assert result.code == 0
    assert "will not be saved" in result.out
    assert "Permission denied" in result.out
    assert result.out.count("OK.") >= 2  # both turns were sent and answered
    assert "Saved as" not in result.out
    assert "Not saved:" in result.out
    assert path.read_bytes() == before


def test_a_session_file_deleted_between_turns_is_recreated(chat_env: ChatEnv) -> None:
    """The file deleted mid-chat: the next save recreates it with every turn, and says so."""
    from autocompact.cli import repl as repl_mod

    deleted: list[bool] = []
    real_turn = repl_mod.Repl.turn

    def turn_then_delete(self: repl_mod.Repl, text: str) -> None:
        real_turn(self, text)
        if not deleted:
            for p in chat_env.sessions.glob("*.jsonl"):
                p.unlink()
            deleted.append(True)

    chat_env.monkeypatch.setattr(repl_mod.Repl, "turn", turn_then_delete)
    result = chat_env.run(["chat", "--provider", "fake"], ["one", "two"])
    assert result.code == 0
    assert "was deleted or replaced" in result.out
    (path,) = chat_env.sessions.glob("*.jsonl")
    assert _user_texts(path) == ["one", "two"]
    assert "Saved as" in result.out


def _latest_session(chat_env: ChatEnv) -> Path:
    assert chat_env.run(["chat", "--provider", "fake"], ["hello"]).code == 0
    (path,) = chat_env.sessions.glob("*.jsonl")
    return path


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        ("newer-schema", "newer than this build reads"),
        ("unknown-part", "unknown part kind"),
        ("deep-record", "nested more than"),
    ],
)
def test_continue_names_the_unreadable_latest_session(
    chat_env: ChatEnv, damage: str, named: str
) -> None:
    """--continue on a latest session that cannot be read names the file and the problem."""
    path = _latest_session(chat_env)
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    if damage == "newer-schema":
        header["schema"] = 99
        lines[0] = json.dumps(header)
    elif damage == "unknown-part":
        lines.append(
            json.dumps({"type": "message", "message": {"role": "user", "parts": [{"kind": "x"}]}})
        )
    else:
        lines.append('{"type":"message","message":' + "[" * 10_000 + "]" * 10_000 + "}")
    path.write_text("\n".join(lines) + "\n")
    result = chat_env.run(["chat", "--continue"], ["again"])
    assert result.code == 2
    assert str(path) in result.err
    assert named in result.err
    assert "no saved session" not in result.err


def test_continue_names_a_latest_session_it_cannot_open(chat_env: ChatEnv) -> None:
    """Mode 000 (or any unreadable file): named, with the OS's reason."""
    path = _latest_session(chat_env)
    if os.geteuid() == 0:
        real = Path.read_bytes

        def refusing(self: Path) -> bytes:
            if self == path:
                raise PermissionError(13, "Permission denied", str(self))
            return real(self)

        chat_env.monkeypatch.setattr(Path, "read_bytes", refusing)
        chat_env.monkeypatch.setattr(Path, "open", _refusing_open(path))
    else:
        path.chmod(0)
    result = chat_env.run(["chat", "--continue"], ["again"])
    assert result.code == 2
    assert str(path) in result.err
    assert "Permission denied" in result.err


def _refusing_open(path: Path):  # type: ignore[no-untyped-def]
    real = Path.open

    def refusing(self: Path, *args: object, **kw: object):  # type: ignore[no-untyped-def]
        if self == path:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *args, **kw)  # type: ignore[arg-type]

    return refusing


def test_home_and_exports_are_private(chat_env: ChatEnv, tmp_path: Path) -> None:
    """AUTOCOMPACT_HOME is created 0700; `sessions export -o` writes 0600, even over a 0644 file."""
    path = _latest_session(chat_env)
    assert stat.S_IMODE(chat_env.home.stat().st_mode) == 0o700
    assert stat.S_IMODE(chat_env.sessions.stat().st_mode) == 0o700
    out = tmp_path / "export.json"
    out.write_text("old")
    out.chmod(0o644)
    result = chat_env.run(["sessions", "export", path.stem, "-o", str(out)])
    assert result.code == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert "hello" in out.read_text()


CREDENTIALS = [
    "sk-ant-api03-" + "A1b2C3d4" * 10 + "-xyzAA",
    "sk-proj-" + "Ab1" * 16,
    "sk-" + "a1B2" * 12,
    "ghp_" + "a1B2c3D4e5" * 4,
    "github_pat_" + "11ABCDEFG0" * 4,
    "AKIAIOSFODNN7EXAMPLE",
    "AIzaSy" + "A1b2C3d4e5" * 3 + "abcde",
    "xoxb-1234567890-abcdefghij",
    "glpat-" + "a1B2c3D4e5" * 2,
]


@pytest.mark.parametrize("secret", CREDENTIALS, ids=lambda s: s[:8])
def test_credential_shapes_typed_into_messages_are_redacted(tmp_path: Path, secret: str) -> None:
    """A key typed into a message (not in the environment) never reaches the session file."""
    store = SessionStore(tmp_path / "s")
    with store.create(provider="fake", model="m", context_window=1000) as writer:
        writer.append_messages(
            [Message.user(f"my key is {secret}, use it"), Message.model(f"ok: {secret}")]
        )
        path = writer.path
    text = path.read_text()
    assert secret not in text
    assert text.count(REDACTED) == 2
    assert "my key is" in text


@pytest.mark.parametrize(
    "text",
    [
        "the bearer of bad news",
        "ask-me-anything-about-this-long-identifier",
        "risk-assessment-for-the-quarterly-report",
        "AKIA is not a key",
        "task_abcdefghijklmnopqrstuvwxyz",
    ],
)
def test_ordinary_text_is_not_redacted(text: str) -> None:
    """The shapes are specific: ordinary words and identifiers are left alone."""
    assert redact_credentials(text) == text


def test_bearer_tokens_keep_the_word_and_lose_the_token() -> None:
    """`Authorization: Bearer <token>` keeps 'Bearer' and redacts the token."""
    line = "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig"
    assert redact_credentials(line) == f"Authorization: Bearer {REDACTED}"


def test_unwritable_file_in_the_library_is_a_session_file_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """open_for_append on a read-only file: SessionFileError naming it, not PermissionError."""
    store = SessionStore(tmp_path / "s")
    store.create(provider="fake", model="m", context_window=1000, session_id="ro").close()
    path = store.path_of("ro")
    _make_unwritable(path, monkeypatch)
    with pytest.raises(SessionFileError, match="Permission denied") as info:
        store.open_for_append("ro")
    assert info.value.path == str(path)
    # The lock was released: once writable again, the session opens.
    monkeypatch.undo()
    path.chmod(0o600)
    _, writer = store.open_for_append("ro")
    writer.close()


@pytest.mark.parametrize("window", ["0", "0k", "1e99", "9999999999999999999999999", "abc", "-1"])
def test_chat_refuses_a_window_that_is_no_models(chat_env: ChatEnv, window: str) -> None:
    """`chat --window 0` (and absurd sizes) is an error naming --window, not '128K (assumed)'."""
    result = chat_env.run(["chat", "--provider", "fake", "--window", window], ["hi"])
    assert result.code == 2
    assert "--window" in result.err
    assert "assumed" not in result.out


@pytest.mark.parametrize("store", [None, "sqlite"])
@pytest.mark.parametrize("given", ["", "  "], ids=["empty", "blank"])
def test_chat_refuses_an_empty_resume_id(chat_env: ChatEnv, given: str, store: str | None) -> None:
    """`chat --resume ""` (an unset shell variable) is a usage error naming --resume; it
    started and saved a new chat, exit 0."""
    args = ["chat", "--provider", "fake", "--resume", given]
    if store:
        args += ["--store", f"sqlite:///{chat_env.home / 'sessions.db'}"]
    with pytest.raises(SystemExit) as info:
        chat_env.run(args, ["hi"])
    assert info.value.code == 2
    err = chat_env.capsys.readouterr().err
    assert "argument --resume: expected a session id" in err
    assert not chat_env.home.exists()


@pytest.mark.parametrize("given", ["", "  "], ids=["empty", "blank"])
def test_chat_refuses_an_empty_model_name(chat_env: ChatEnv, given: str) -> None:
    """`chat --model ""` (an unset shell variable) is a usage error naming --model; it chatted
    with the provider's default model, saying nothing."""
    with pytest.raises(SystemExit) as info:
        chat_env.run(["chat", "--provider", "fake", "--model", given], ["hi"])
    assert info.value.code == 2
    assert "argument --model: expected a model name" in chat_env.capsys.readouterr().err
    assert not chat_env.home.exists()


@pytest.mark.parametrize("window", [-5, 0, 10**30])
def test_resume_names_a_saved_window_that_is_no_window(chat_env: ChatEnv, window: int) -> None:
    """A hand-edited header whose configured window is no window: resuming names the session
    file and says to pass --window, which resumes it (it was "context_window must be 0 or more
    tokens", naming no file; 0 resumed on the assumed window)."""
    path = _latest_session(chat_env)
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    lines[0] = json.dumps({**header, "context_window": window, "window_source": "configured"})
    path.write_text("\n".join(lines) + "\n")
    before = path.read_bytes()
    # --no-save: in one process the failed run would still hold the session's lock
    result = chat_env.run(["chat", "--provider", "fake", "--resume", path.stem, "--no-save"])
    assert result.code == 2
    assert f"{path}: the saved session's context_window" in result.err
    assert "pass --window N" in result.err
    assert path.read_bytes() == before
    fixed = chat_env.run(["chat", "--provider", "fake", "--resume", path.stem, "--window", "64k"])
    assert fixed.code == 0, fixed.err


def test_chat_refuses_a_settings_file_that_is_a_directory(chat_env: ChatEnv) -> None:
    """A settings.json that is a directory is named, not ignored."""
    (chat_env.cwd / ".autocompact" / "settings.json").mkdir(parents=True)
    result = chat_env.run(["chat", "--provider", "fake"], ["hi"])
    assert result.code == 2
    assert "settings.json" in result.err
    assert "directory" in result.err


def test_replay_hints_when_a_transcript_has_no_usage(chat_env: ChatEnv) -> None:
    """A transcript with no recorded usage: a hint that says what the replay needs."""
    path = chat_env.cwd / "t.json"
    path.write_text(
        json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}])
    )
    result = chat_env.run(["replay", str(path), "--window", "200k"])
    assert result.code == 0
    assert "no API call with its token usage" in result.err
    assert str(path) in result.err


def test_replay_warns_about_a_tool_result_without_its_call(chat_env: ChatEnv) -> None:
    """A tool result whose call is missing: a warning naming the file (the replay goes on)."""
    path = chat_env.cwd / "t.json"
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "nope", "content": "x"},
        {"role": "assistant", "content": "ok", "usage": {"prompt_tokens": 10}},
    ]
    path.write_text(json.dumps(messages))
    result = chat_env.run(["replay", str(path), "--window", "200k"])
    assert "answers no earlier tool call" in result.err
    assert str(path) in result.err

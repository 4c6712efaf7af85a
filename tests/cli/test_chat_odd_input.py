"""The chat REPL given odd input: slash commands at odd moments, odd arguments and settings."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from autocompact.sessions import SessionStore

from .conftest import ChatEnv


def words(tokens: int) -> str:
    """Text the estimate counts as about ``tokens`` tokens (4 characters a token)."""
    return ("lorem " * (tokens * 4 // 6)).strip()


def test_ctrl_c_during_compress_keeps_the_history(chat_env: ChatEnv) -> None:
    """Ctrl-C while /compress waits for its summary cancels it: the history is as it was (the
    fake script's interrupt marker was taken as the summary and saved in the history)."""
    chat_env.script(
        [
            *({"text": f"a{i}", "purpose": "chat"} for i in range(3)),
            {"text": "half a summary", "purpose": "side_query", "interrupt": True},
        ]
    )
    questions = [f"q{i} {words(300)}" for i in range(3)]
    result = chat_env.run(["chat", "--provider", "fake"], [*questions, "/compress"])
    assert result.code == 0, result.err
    assert "Cancelled." in result.blocks()[4]
    assert "Compressed" not in result.out
    (summary,) = SessionStore(chat_env.sessions).list()
    saved = SessionStore(chat_env.sessions).open(summary.header.id)
    assert [m.text for m in saved.history] == [
        t for i, q in enumerate(questions) for t in (q, f"a{i}")
    ]
    assert "interrupt" not in summary.path.read_text()


def test_commands_alone_save_no_session(chat_env: ChatEnv) -> None:
    """A chat of commands only saves nothing, so --continue still finds the last conversation
    (/compress on a fresh chat saved an empty session, which --continue then resumed)."""
    assert chat_env.run(["chat", "--provider", "fake"], ["remember PINEAPPLE"]).code == 0
    result = chat_env.run(["chat", "--provider", "fake"], ["/compress", "/clear", "/compress"])
    assert result.code == 0, result.err
    assert "Nothing to compress: the history is empty" in result.out
    assert "Saved as" not in result.out
    assert len(SessionStore(chat_env.sessions).list()) == 1
    again = chat_env.run(["chat", "--continue"], [])
    assert "Resumed" in again.out
    assert "2 messages" in again.out


def test_compress_on_an_empty_chat_answers_at_once(chat_env: ChatEnv) -> None:
    """/compress on an empty chat (fresh, or after /clear) answers "Nothing to compress" at once,
    without first announcing a compaction ("Compacting the conversation (manual, 0 tokens)…")."""
    result = chat_env.run(
        ["chat", "--provider", "fake"], ["/compress", "hello", "/clear", "/compact"]
    )
    assert result.code == 0, result.err
    blocks = result.blocks()
    for block in (blocks[1], blocks[4]):
        assert block.splitlines()[1] == "Nothing to compress: the history is empty"
    assert "Compacting" not in result.out


def test_a_settings_window_too_small_is_refused_as_on_the_command_line(chat_env: ChatEnv) -> None:
    """model.contextWindow below 1,000 is refused naming the file, as --window refuses it (a
    50-token window was accepted and every /compress failed)."""
    settings = chat_env.cwd / ".autocompact" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"model": {"provider": "fake", "contextWindow": 50}}')
    result = chat_env.run(["chat"], ["hi"])
    assert result.code == 2
    assert str(settings) in result.err
    assert "model.contextWindow must be at least 1,000 tokens, got 50" in result.err


def test_a_command_and_its_argument_may_be_apart_by_any_whitespace(chat_env: ChatEnv) -> None:
    """/compress, a tab (or a new line: Alt-Enter at the prompt), then instructions runs
    /compress with them; it was "Unknown command /compress<TAB>keep …"."""
    from autocompact.chat import ChatSession
    from autocompact.cli.slash import REGISTRY, ChatContext
    from autocompact.content import Message
    from autocompact.testing import FakeProvider

    history = [Message.user(f"question {i} {words(300)}") for i in range(4)]
    fake = FakeProvider()
    ctx = ChatContext(
        session=ChatSession(fake, context_window=128_000, history=history),
        provider_name="fake",
        model=fake.model,
    )
    REGISTRY.dispatch(ctx, "/compress\nkeep every PINEAPPLE fact")
    (side,) = [r for r in fake.requests if r.purpose == "side_query"]
    assert "keep every PINEAPPLE fact" in (side.system_instruction or "")
    result = chat_env.run(["chat", "--provider", "fake"], ["hi", "/model\tfake-2", "/HELP\t"])
    assert result.code == 0, result.err
    assert "Now using fake/fake-2" in result.out
    assert "Unknown command" not in result.out
    # A space right after the slash is no command name (as before).
    assert REGISTRY.dispatch(ctx, "/ help").lines == (
        "Unknown command /. Type /help for the list.",
    )


def test_an_unknown_command_is_named_shortened(chat_env: ChatEnv) -> None:
    """An unknown command of a million characters is named by its first ones, not in full."""
    result = chat_env.run(["chat", "--provider", "fake"], ["/" + "x" * 1_000_000])
    assert result.code == 0, result.err
    (line,) = [x for x in result.out.splitlines() if x.startswith("Unknown command")]
    assert len(line) < 200
    assert line.startswith("Unknown command /xxxx")
    assert line.endswith("Type /help for the list.")


def test_model_says_an_assumed_window_once(chat_env: ChatEnv) -> None:
    """/model on an assumed window says "assumed:" once (it said "assumed: assumed: …")."""
    result = chat_env.run(["chat", "--provider", "fake"], ["/model"])
    assert result.code == 0, result.err
    assert "Window: 128K (assumed: the model is unknown; set --window to be exact)" in result.out


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:9/v1\x01", "not a url", "localhost:8000/v1", "http://[::1/v1", "http://"],
    ids=["control", "words", "no-scheme", "open-bracket", "no-host"],
)
def test_a_base_url_that_is_no_address_is_a_usage_error(chat_env: ChatEnv, url: str) -> None:
    """--base-url or model.baseUrl that is no http(s) address is refused before anything is sent,
    naming where it was given (a control character ended the chat at the first send with
    "unexpected InvalidURL ... a bug"; the others were sent as a relative path)."""
    args = ["chat", "--provider", "openai-compatible", "--model", "m", "--window", "32k"]
    with pytest.raises(SystemExit) as info:
        chat_env.run([*args, "--base-url", url, "--no-save"], ["hi"])
    assert info.value.code == 2
    err = chat_env.capsys.readouterr().err
    assert "argument --base-url: " in err
    assert "is not a server address: write it like http://localhost:8000/v1" in err
    settings = chat_env.cwd / ".autocompact" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"model": {"baseUrl": url}}))
    result = chat_env.run(args, ["hi"])
    assert result.code == 2
    assert f"{settings}: model.baseUrl" in result.err
    assert "unexpected" not in result.err


def test_a_settings_warning_is_printed_once(
    chat_env: ChatEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unknown settings key is reported once on stderr (with no logging configured, as in a
    terminal, Python's last-resort handler printed the warning's log record a second time)."""
    monkeypatch.setattr(logging.root, "handlers", [])  # as outside pytest: nothing configured
    settings = chat_env.cwd / ".autocompact" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"tips": false, "chatCompression": {"contextPercentageThreshold": 50}}')
    result = chat_env.run(["chat", "--provider", "fake"], ["hi"])
    assert result.code == 0, result.err
    assert result.err.count("unknown settings key 'tips' ignored") == 1
    assert result.err.count("contextPercentageThreshold has been removed") == 1


# An OSC 52 sequence (write the clipboard), a CSI one (clear the screen) in its 7-bit and
# one-character C1 forms, a title change ended by BEL, a carriage return that overwrites.
_HOSTILE = "ok\x1b]52;c;aGVsbG8=\x07 \x1b[2J \x9b2J \x1b]0;owned\x07 fake\rreal"


def _obeyed(text: str) -> list[str]:
    """The oracle, written here: every character a terminal would act on, but tab and newline."""
    return [c for c in text if (ord(c) < 0x20 and c not in "\t\n") or 0x7F <= ord(c) < 0xA0]


def test_a_reply_cannot_drive_the_terminal(chat_env: ChatEnv) -> None:
    """A model's reply (or a stored one shown again) that holds escape sequences is printed
    with each control character as its picture: before, ESC reached the terminal raw, so a
    reply could set the window title or write the clipboard."""
    assert len(_obeyed(_HOSTILE)) == 7  # the oracle sees what is there
    chat_env.script([{"text": _HOSTILE, "purpose": "chat"}])
    result = chat_env.run(["chat", "--provider", "fake"], ["hi \x1b[31mred"])
    assert result.code == 0, result.err
    assert _obeyed(result.out) == []
    assert "ok␛]52;c;aGVsbG8=␇" in result.out
    assert "> hi ␛[31mred" in result.out
    (summary,) = SessionStore(chat_env.sessions).list()
    saved = SessionStore(chat_env.sessions).open(summary.header.id)
    assert saved.history[-1].text == _HOSTILE  # what is kept is what was said
    shown = chat_env.run(["sessions", "show", summary.header.id[:12]])
    assert shown.code == 0, shown.err
    assert _obeyed(shown.out) == []
    assert "␛]0;owned␇" in shown.out


def test_a_stored_reply_shown_from_a_store_cannot_drive_the_terminal(chat_env: ChatEnv) -> None:
    address = f"sqlite://{chat_env.cwd.parent / 'shared.db'}"
    chat_env.script([{"text": _HOSTILE, "purpose": "chat"}])
    result = chat_env.run(["chat", "--provider", "fake", "--store", address], ["hi"])
    assert result.code == 0, result.err
    from autocompact.sessions.stores import open_store

    (listing,) = open_store(address).list_sessions()
    shown = chat_env.run(["sessions", "show", listing.session_id[:8], "--store", address])
    assert shown.code == 0, shown.err
    assert _obeyed(shown.out) == []
    assert "␛[2J" in shown.out


def test_a_first_message_or_directory_with_brackets_is_listed_as_written(
    chat_env: ChatEnv,
) -> None:
    """`sessions list` read rich markup in its cells: a first message opening with "[/oops]"
    failed the whole listing ("unexpected MarkupError ... This is a bug"), and "[red]" styled
    the cell and vanished. Same for a directory named with brackets, and with a store."""
    odd = chat_env.cwd / "[red]work"
    odd.mkdir()
    chat_env.monkeypatch.chdir(odd)
    address = f"sqlite://{chat_env.cwd.parent / 'shared.db'}"
    for extra in ([], ["--store", address]):
        sent = chat_env.run(["chat", "--provider", "fake", *extra], ["[/oops] and [bold]x"])
        assert sent.code == 0, sent.err
        listed = chat_env.run(["sessions", "list", *extra])
        assert listed.code == 0, listed.err
        assert "MarkupError" not in listed.out + listed.err
    listed = chat_env.run(["sessions", "list"])
    flat = "".join(listed.out.split())  # (the table folds long cells)
    assert "[/oops]and[bold]x" in flat
    assert "[red]work" in flat


def test_a_transcript_named_with_brackets_is_titled_as_written(
    chat_env: ChatEnv, tmp_path: Path
) -> None:
    """`replay` read its file's name as markup: "[red]" vanished, a closing tag failed it."""
    from .test_first_hour_cli import openai_file, refusing_transcript

    named = openai_file(tmp_path, refusing_transcript()).rename(tmp_path / "[red]x[-y].json")
    result = chat_env.run(["replay", str(named), "--window", "32k"])
    assert result.code == 0, result.err
    assert "[red]x[-y].json" in result.out


def test_piped_lines_ended_crlf_are_sent_without_the_cr(chat_env: ChatEnv) -> None:
    """Piped from a file written on Windows, each message kept its "\\r" (sent and saved)."""
    result = chat_env.run(["chat", "--provider", "fake"], ["hello there\r", "  indented\r"])
    assert result.code == 0, result.err
    (summary,) = SessionStore(chat_env.sessions).list()
    saved = SessionStore(chat_env.sessions).open(summary.header.id)
    assert [m.text for m in saved.history if m.role == "user"] == ["hello there", "  indented"]


def test_a_failed_start_gives_the_session_back(chat_env: ChatEnv) -> None:
    """A resume that failed after the session was locked (here: an unknown provider) kept the
    lock, so the next resume in the same process found the session in use."""
    first = chat_env.run(["chat", "--provider", "fake"], ["hello"])
    assert first.code == 0, first.err
    (summary,) = SessionStore(chat_env.sessions).list()
    failed = chat_env.run(["chat", "--resume", summary.header.id, "--provider", "bogus"], ["x"])
    assert failed.code == 2
    assert "bogus" in failed.err
    again = chat_env.run(["chat", "--resume", summary.header.id, "--provider", "fake"], ["more"])
    assert again.code == 0, again.err
    saved = SessionStore(chat_env.sessions).open(summary.header.id)
    assert [m.text for m in saved.history if m.role == "user"] == ["hello", "more"]

"""``autocompact sessions list | show | export`` on sessions saved by ``autocompact chat``."""

from __future__ import annotations

import json

import pytest

from .conftest import ChatEnv


def _one_session(chat_env: ChatEnv) -> str:
    result = chat_env.run(
        ["chat", "--provider", "fake", "--system", "be brief"], ["first question", "second"]
    )
    assert result.code == 0, result.err
    (path,) = chat_env.sessions.glob("*.jsonl")
    return path.stem


def test_list_shows_the_session(chat_env: ChatEnv) -> None:
    """sessions list shows id, provider/model, message count and the first question."""
    sid = _one_session(chat_env)
    result = chat_env.run(["sessions", "list"])
    assert result.code == 0, result.err
    assert sid in result.out
    assert "fake/fake-model" in result.out
    assert "first question" in result.out


def test_list_when_empty(chat_env: ChatEnv) -> None:
    """sessions list with nothing saved says so."""
    result = chat_env.run(["sessions", "list"])
    assert result.code == 0
    assert "No saved sessions" in result.out


def test_show_prints_the_conversation(chat_env: ChatEnv) -> None:
    """sessions show prints the header, the system prompt and every message."""
    sid = _one_session(chat_env)
    result = chat_env.run(["sessions", "show", sid[:12]])
    assert result.code == 0, result.err
    assert "system: be brief" in result.out
    assert "first question" in result.out
    assert result.out.count("model:") == 2


def test_export_openai_and_jsonl(chat_env: ChatEnv) -> None:
    """export --format openai writes chat-completions messages; jsonl the neutral form."""
    sid = _one_session(chat_env)
    openai = chat_env.run(["sessions", "export", sid, "--format", "openai"])
    assert openai.code == 0, openai.err
    assert json.loads(openai.out) == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "OK."},
        {"role": "user", "content": "second"},
        {"role": "assistant", "content": "OK."},
    ]
    neutral = chat_env.run(["sessions", "export", sid, "--format", "jsonl"])
    lines = [json.loads(x) for x in neutral.out.splitlines()]
    assert lines[0] == {"role": "user", "parts": [{"kind": "text", "text": "first question"}]}
    assert len(lines) == 4


def test_not_a_session_is_a_clear_error(chat_env: ChatEnv) -> None:
    """A file that is not a session, or a newer schema, is refused with a clear message."""
    chat_env.sessions.mkdir(parents=True)
    (chat_env.sessions / "junk.jsonl").write_text("this is not json\n")
    header = {
        "type": "header",
        "schema": 7,
        "id": "future",
        "created": "2030-01-01T00:00:00+00:00",
        "cwd": "/",
        "provider": "fake",
        "model": "m",
        "context_window": 1000,
    }
    (chat_env.sessions / "future.jsonl").write_text(json.dumps(header) + "\n")
    junk = chat_env.run(["sessions", "show", "junk"])
    assert junk.code == 2
    assert "not an autocompact session" in junk.err
    future = chat_env.run(["sessions", "export", "future", "--format", "jsonl"])
    assert future.code == 2
    assert "schema version 7 is newer than this build reads (version 1)" in future.err
    resume = chat_env.run(["chat", "--resume", "future"])
    assert resume.code == 2
    assert "upgrade autocompact" in resume.err
    # list names each unreadable file and why, one line each, and lists nothing else here
    listed = chat_env.run(["sessions", "list"])
    assert listed.code == 1
    assert "No readable sessions" in listed.out


def test_list_names_unreadable_files_and_lists_the_rest(chat_env: ChatEnv) -> None:
    """sessions list shows the readable sessions, one stderr line per unreadable file saying
    which file and why, and exits 1; --store DIR (the JSONL store) does the same."""
    sid = _one_session(chat_env)
    junk = chat_env.sessions / "junk.jsonl"
    junk.write_text("this is not json\n")
    empty = chat_env.sessions / "empty.jsonl"
    empty.write_text("")
    for args in (["sessions", "list"], ["sessions", "list", "--store", str(chat_env.sessions)]):
        result = chat_env.run(args)
        assert result.code == 1, result.err
        assert sid in result.out
        assert "first question" in result.out
        warnings = [line for line in result.err.splitlines() if line.startswith("Warning:")]
        assert len(warnings) == 2, result.err
        (junk_line,) = [w for w in warnings if str(junk) in w]
        assert "not an autocompact session" in junk_line
        (empty_line,) = [w for w in warnings if str(empty) in w]
        assert "empty file" in empty_line
        assert "2 session file(s) could not be read" in result.err
    junk.unlink()
    empty.unlink()
    clean = chat_env.run(["sessions", "list"])
    assert clean.code == 0
    assert clean.err == ""


def test_a_number_too_long_to_read_is_named_and_the_rest_listed(chat_env: ChatEnv) -> None:
    """A record holding an integer of 5,000 digits (past Python's limit on int(str)): list
    names the file and line and lists the others; show names it too; the file is unchanged.
    Every command failed on it with "unexpected ValueError"."""
    sid = _one_session(chat_env)
    long = chat_env.sessions / "long.jsonl"
    header = json.loads((chat_env.sessions / f"{sid}.jsonl").read_text().splitlines()[0])
    content = (
        json.dumps({**header, "id": "long"}) + '\n{"type": "clear", "n": ' + "9" * 5000 + "}\n"
    )
    long.write_text(content)
    listed = chat_env.run(["sessions", "list"])
    assert listed.code == 1, listed.err
    assert sid in listed.out
    assert f"{long}:2: a record holds a number of more than" in listed.err
    shown = chat_env.run(["sessions", "show", "long"])
    assert shown.code == 2
    assert f"{long}:2:" in shown.err
    assert "unexpected" not in shown.err
    resumed = chat_env.run(["chat", "--provider", "fake", "--resume", "long"], ["hi"])
    assert resumed.code == 2
    assert long.read_text() == content


def test_a_lone_surrogate_in_a_session_file_is_shown_as_a_question_mark(
    chat_env: ChatEnv,
) -> None:
    """A hand-edited session file with a lone surrogate escape ("\\ud800") in the model name
    and a message: list, show and a resumed chat print it as "?" (each failed with
    "unexpected UnicodeEncodeError" while printing); export and the file are unchanged."""
    sid = _one_session(chat_env)
    path = chat_env.sessions / f"{sid}.jsonl"
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    message = {"role": "user", "parts": [{"kind": "text", "text": "odd \ud800 text"}]}
    lines[0] = json.dumps({**header, "model": "m\ud800"})
    lines.append(json.dumps({"type": "message", "message": message}))
    path.write_text("\n".join(lines) + "\n")
    before = path.read_bytes()
    listed = chat_env.run(["sessions", "list"])
    assert listed.code == 0, listed.err
    assert "fake/m?" in listed.out
    shown = chat_env.run(["sessions", "show", sid])
    assert shown.code == 0, shown.err
    assert "odd ? text" in shown.out
    resumed = chat_env.run(["chat", "--provider", "fake", "--resume", sid, "--no-save"], [])
    assert resumed.code == 0, resumed.err
    assert "fake/m?" in resumed.out
    assert path.read_bytes() == before


def test_show_a_compaction_whose_counts_are_not_numbers(chat_env: ChatEnv) -> None:
    """A hand-edited compaction record whose token counts are not numbers: show prints "?" for
    them (it failed with "unexpected ValueError" and showed nothing)."""
    sid = _one_session(chat_env)
    path = chat_env.sessions / f"{sid}.jsonl"
    for count in ('"x"', "[1]", "NaN", "true"):
        info = '{"status": "compressed", "trigger": "auto", "original_token_count": ' + count
        with path.open("a") as f:
            f.write('{"type": "compaction", "info": ' + info + "}}\n")
        shown = chat_env.run(["sessions", "show", sid])
        assert shown.code == 0, shown.err
        assert "(compacted ? → 0 tokens, auto)" in shown.out
        assert "first question" in shown.out


def test_export_refuses_to_write_into_the_sessions_directory(chat_env: ChatEnv) -> None:
    """export -o SESSION_FILE (or any path in the sessions directory, --store DIR too) is
    refused and the session file is unchanged: it was replaced by the export (no header, no
    state), and the session was lost."""
    sid = _one_session(chat_env)
    path = chat_env.sessions / f"{sid}.jsonl"
    before = path.read_bytes()
    for args in (
        ["sessions", "export", sid, "-o", str(path)],
        ["sessions", "export", sid, "-o", str(chat_env.sessions / ".." / "sessions" / path.name)],
        ["sessions", "export", sid, "--store", str(chat_env.sessions), "-o", str(path)],
    ):
        result = chat_env.run(args)
        assert result.code == 2, result.err
        assert "will not write the export into the sessions directory" in result.err
        assert path.read_bytes() == before
    assert chat_env.run(["sessions", "show", sid]).code == 0
    outside = chat_env.cwd / "export.jsonl"
    assert chat_env.run(["sessions", "export", sid, "-o", str(outside)]).code == 0
    assert "first question" in outside.read_text()


@pytest.mark.parametrize(
    ("option", "named"),
    [
        (["export", "ID", "-o", ""], "argument -o/--output: expected a path, got ''"),
        (["export", "ID", "--output", " "], "argument -o/--output: expected a path, got ' '"),
        (["import", "--store", "sqlite:///x.db", "--from", ""], "argument --from: expected a"),
    ],
)
def test_an_empty_path_is_a_usage_error(chat_env: ChatEnv, option: list[str], named: str) -> None:
    """`export -o ""` and `import --from ""` (an unset shell variable) are usage errors naming
    the option: the export went to stdout, exit 0, and the import read the usual directory."""
    sid = _one_session(chat_env)
    args = ["sessions", *[sid if a == "ID" else a for a in option]]
    with pytest.raises(SystemExit) as info:
        chat_env.run(args)
    assert info.value.code == 2
    captured = chat_env.capsys.readouterr()
    assert named in captured.err
    assert captured.out == ""
    assert not (chat_env.cwd / "x.db").exists()


def test_unknown_id(chat_env: ChatEnv) -> None:
    """An unknown id is a usage error that names it."""
    result = chat_env.run(["sessions", "show", "nope"])
    assert result.code == 2
    assert "no saved session with id 'nope'" in result.err


def test_export_original_reads_the_session_files_too(chat_env: ChatEnv) -> None:
    """export --original without --store gives every turn as sent, the summarized ones
    included, as --store on the sessions directory does (it printed the compacted history)."""
    result = chat_env.run(
        ["chat", "--provider", "fake", "--window", "32k"],
        ["first question", "log " * 5_000, "/compress"],
    )
    assert result.code == 0, result.err
    (path,) = chat_env.sessions.glob("*.jsonl")

    def texts(out: str) -> list[str]:
        return [json.loads(x)["parts"][0]["text"][:14] for x in out.splitlines()]

    live = chat_env.run(["sessions", "export", path.stem])
    assert texts(live.out)[0] != "first question"  # the summary
    original = chat_env.run(["sessions", "export", path.stem[:15], "--original"])
    assert original.code == 0, original.err
    assert texts(original.out) == ["first question", "OK.", "log log log lo", "OK."]
    stored = chat_env.run(
        ["sessions", "export", path.stem, "--original", "--store", str(chat_env.sessions)]
    )
    assert original.out == stored.out

"""``autocompact replay FOLDER``: a folder stands for the transcripts in it and its subfolders
(Claude Code keeps a session's subagents in one), and what is not a transcript is named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autocompact.cli import main as cli_main


def _claude_code_log(path: Path, calls: int) -> Path:
    """A Claude Code session log of ``calls`` calls, each with its reported prompt size."""
    lines = []
    for i in range(calls):
        lines.append(
            {
                "type": "user",
                "uuid": f"u{i}",
                "message": {"role": "user", "content": f"rename the field in api/m{i}.py"},
            }
        )
        lines.append(
            {
                "type": "assistant",
                "uuid": f"a{i}",
                "message": {
                    "id": f"msg{i}",
                    "role": "assistant",
                    "model": "claude-test",
                    "content": [{"type": "text", "text": f"renamed it in api/m{i}.py"}],
                    "usage": {"input_tokens": 1_000 + 100 * i, "output_tokens": 5},
                },
            }
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _replayed(capsys: pytest.CaptureFixture[str], *names: str) -> tuple[int, list[str], str]:
    code = cli_main.main(["replay", *names, "--json"])
    out, err = capsys.readouterr()
    files = [f["file"] for f in json.loads(out)["files"]] if code == 0 else []
    return code, files, err


def test_a_folder_is_every_transcript_in_it_and_its_subfolders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The session and its subagent's log are both replayed, in name order; a file not named
    like a transcript (a README) is not read."""
    session = _claude_code_log(tmp_path / "proj" / "s1.jsonl", 4)
    subagent = _claude_code_log(tmp_path / "proj" / "s1" / "subagents" / "agent-a1.jsonl", 3)
    (tmp_path / "proj" / "README").write_text("not a transcript")
    code, files, err = _replayed(capsys, str(tmp_path / "proj"))
    assert code == 0, err
    assert files == [str(session), str(subagent)]
    assert err == ""


def test_a_file_in_a_folder_that_is_no_transcript_is_skipped_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """gemini-cli keeps a logs.json beside its chats: it is skipped with a warning naming it;
    the same file named on its own is an error (exit 2)."""
    session = _claude_code_log(tmp_path / "chats" / "s1.jsonl", 4)
    logs = tmp_path / "chats" / "logs.json"
    logs.write_text(json.dumps({"entries": []}))
    code, files, err = _replayed(capsys, str(tmp_path / "chats"))
    assert code == 0
    assert files == [str(session)]
    assert f"{logs}" in err
    assert "(skipped)" in err
    assert cli_main.main(["replay", str(logs)]) == 2
    assert "not a transcript" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("empty", "a folder with no transcript in it"),
        ("only-logs", "no file in it is a transcript"),
        ("missing", "no such file or folder"),
    ],
)
def test_a_folder_without_a_transcript_is_an_error_that_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], setup: str, message: str
) -> None:
    folder = tmp_path / setup
    if setup != "missing":
        folder.mkdir()
    if setup == "only-logs":
        (folder / "logs.json").write_text("{}")
    assert cli_main.main(["replay", str(folder)]) == 2
    err = capsys.readouterr().err
    assert str(folder) in err
    assert message in err


def test_a_damaged_transcript_in_a_folder_is_named_counted_and_fails_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Claude Code log with one corrupt line is a transcript that cannot be read, not a file
    that is none: it is named, the totals line says it was left out, and the exit status is 1
    (it was skipped as "no transcript", exit 0, and the totals left it out silently)."""
    folder = tmp_path / "proj"
    _claude_code_log(folder / "a.jsonl", 4)
    _claude_code_log(folder / "b.jsonl", 3)
    damaged = _claude_code_log(folder / "c.jsonl", 3)
    lines = damaged.read_text().splitlines()
    lines[2] = lines[2][:25]  # a line cut short, as by a crash
    damaged.write_text("\n".join(lines) + "\n")
    code = cli_main.main(["replay", str(folder)])
    out, err = capsys.readouterr()
    assert code == 1
    assert f"{damaged}:3: not valid JSON" in err
    assert "a transcript that cannot be read: left out" in err
    assert "1 transcript could not be read and was left out (named above)" in err
    totals = next(line for line in out.splitlines() if line.startswith("All "))
    assert "All 2 files (1 transcript could not be read and was left out)" in totals


def test_an_unterminated_string_is_not_at_at_a_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """json's "Unterminated string starting at" is followed by one "at column N" (it read
    "starting at at column 7")."""
    path = tmp_path / "cut.jsonl"
    path.write_text('{"a": "xyz')
    assert cli_main.main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert "not valid JSON (Unterminated string starting at column 7)" in err
    assert "at at" not in err


@pytest.mark.parametrize(
    ("args", "advice"),
    [
        (["thresholds", "nan"], "write it like 131072, 128k or 1m"),
        (["replay", "x.jsonl", "--window", "inf"], "write it like 131072, 128k or 1m"),
        (["replay", "x.jsonl", "--failure-rate", "nan"], "a number from 0 to 1, e.g. 0.3"),
    ],
    ids=["thresholds-nan", "replay-window-inf", "failure-rate-nan"],
)
def test_nan_and_inf_are_refused_saying_what_to_write(
    args: list[str], advice: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """nan and inf are refused with an example of what to write (the errors said only what
    was wrong)."""
    assert cli_main.main(args) == 2
    err = capsys.readouterr().err
    assert advice in err
    assert "Traceback" not in err

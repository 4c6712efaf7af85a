"""The command-line defects a newcomer met in the first hour, each pinned by a test."""

from __future__ import annotations

import argparse
import json
import re
import socket
from pathlib import Path

import pytest

from autocompact.cli import main as cli_main
from autocompact.cli.replay_cmd import render_chart
from autocompact.content import Message
from autocompact.estimation import estimate_content_tokens
from autocompact.replay import ReplayOptions, replay
from autocompact.transcripts import RecordedCall, Transcript

from .conftest import ChatEnv

WINDOW = 32_000


def refusing_transcript() -> Transcript:
    """A session growing ~2K tokens a call whose call 6 carries one message larger than the
    32K window (the ladder refuses that call; legacy sends it)."""
    messages: list[Message] = []
    recorded = []
    for i in range(12):
        size = 8_000 if i != 5 else 4 * 40_000
        messages.append(Message.user(f"request {i}\n" + "x" * size))
        recorded.append(
            RecordedCall(
                index=i,
                preceding=len(messages),
                context_start=0,
                prompt_tokens=2_000 + estimate_content_tokens(messages),
            )
        )
        messages.append(Message.model(f"done {i}"))
    return Transcript(
        path="refusing", format="openai-json", messages=tuple(messages), calls=tuple(recorded)
    )


def openai_file(tmp_path: Path, transcript: Transcript) -> Path:
    """The transcript as an OpenAI JSON list with usage on the replies."""
    sizes = {c.preceding: c.prompt_tokens for c in transcript.calls}
    items: list[dict[str, object]] = []
    for index, message in enumerate(transcript.messages):
        item: dict[str, object] = {
            "role": "user" if message.role == "user" else "assistant",
            "content": message.text,
        }
        if index in sizes:
            item["usage"] = {"prompt_tokens": sizes[index], "completion_tokens": 3}
        items.append(item)
    path = tmp_path / "refusing.json"
    path.write_text(json.dumps(items))
    return path


def test_replay_plot_with_a_refused_call_writes_the_png(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`replay --window 32k --plot` when the ladder refuses a call: a PNG and exit 0 (it
    crashed with "x and y must have same first dimension", exit 1)."""
    pytest.importorskip("matplotlib", reason="the plot extra is not installed")
    report = replay(refusing_transcript(), ReplayOptions(window=WINDOW))
    ladder = report.policies["ladder"]
    assert ladder.refused_requests >= 1
    assert len(ladder.sizes) < len(report.rows)
    assert 6 not in ladder.size_calls
    png = tmp_path / "x.png"
    path = openai_file(tmp_path, refusing_transcript())
    code = cli_main.main(["replay", str(path), "--window", "32k", "--plot", str(png)])
    _out, err = capsys.readouterr()
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Error" not in err


def _row_value(line: str) -> float:
    axis = line.split("|")[0].strip()
    return float(axis[:-1].replace(",", "")) * 1000 if axis.endswith("K") else float(axis)


def test_chart_names_every_threshold_on_its_nearest_row() -> None:
    """The text chart names window, hard, auto and warn, each on the row whose axis value is
    nearest to it, even when several share a row (the collapsed 32K ladder under a recorded
    size five times the window lost "window" and "hard")."""
    report = replay(refusing_transcript(), ReplayOptions(window=WINDOW))
    lines = render_chart(report, width=40, height=14)[:-2]
    step = _row_value(lines[0]) / 13
    values = {
        "window": report.window,
        "hard": report.thresholds.hard,
        "auto": report.thresholds.auto,
        "warn": report.thresholds.warn,
    }
    for name, value in values.items():
        (line,) = [x for x in lines if re.search(rf"\b{name}\b", x.split("|")[1])]
        assert abs(_row_value(line) - value) <= step / 2 + 1, (name, line)


def test_sessions_list_never_creates_a_sqlite_store(chat_env: ChatEnv, tmp_path: Path) -> None:
    """`sessions list --store sqlite:////nonexist/dir/x.db` is an error (exit 2) that creates
    neither the file nor its folders."""
    missing = tmp_path / "nonexist" / "dir" / "x.db"
    for action in (["list"], ["show", "abc"], ["export", "abc"]):
        result = chat_env.run(["sessions", *action, "--store", f"sqlite:///{missing}"])
        assert result.code == 2, result.out
        assert "no SQLite store" in result.err
        assert "never creates" in result.err
        assert "Traceback" not in result.err
    assert not (tmp_path / "nonexist").exists()


def test_sessions_show_and_export_take_a_prefix_with_a_store(chat_env: ChatEnv) -> None:
    """`sessions show PREFIX --store` finds the session as it does without a store."""
    address = f"sqlite://{chat_env.cwd.parent / 'shared.db'}"
    result = chat_env.run(["chat", "--provider", "fake", "--store", address], ["hello there"])
    assert result.code == 0, result.err
    from autocompact.sessions.stores import open_store

    (listing,) = open_store(address).list_sessions()
    prefix = listing.session_id[:8]
    shown = chat_env.run(["sessions", "show", prefix, "--store", address])
    assert shown.code == 0, shown.err
    assert "hello there" in shown.out
    exported = chat_env.run(["sessions", "export", prefix, "--store", address])
    assert exported.code == 0, exported.err
    missing = chat_env.run(["sessions", "show", "zzzz", "--store", address])
    assert missing.code == 2
    assert "no session 'zzzz'" in missing.err


def test_session_id_is_one_line_at_120_columns(chat_env: ChatEnv) -> None:
    """The id column never wraps at 120 columns (the other columns give way)."""
    chat_env.monkeypatch.setenv("COLUMNS", "120")
    result = chat_env.run(["chat", "--provider", "fake"], ["a first question " * 20])
    assert result.code == 0, result.err
    (path,) = chat_env.sessions.glob("*.jsonl")
    listed = chat_env.run(["sessions", "list"])
    assert listed.code == 0
    assert path.stem in listed.out
    address = f"sqlite://{chat_env.cwd.parent / 'ids.db'}"
    chat_env.run(["chat", "--provider", "fake", "--store", address], ["a question"])
    from autocompact.sessions.stores import open_store

    (listing,) = open_store(address).list_sessions()
    stored = chat_env.run(["sessions", "list", "--store", address])
    assert listing.session_id in stored.out


def test_replay_help_prints_a_single_percent(capsys: pytest.CaptureFixture[str]) -> None:
    """`replay --help` says "70% rule", not "70%%"."""
    with pytest.raises(SystemExit):
        cli_main.main(["replay", "--help"])
    out = capsys.readouterr().out
    assert "%%" not in out
    assert "70% rule" in " ".join(out.split())


def _subcommands() -> list[list[str]]:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    import importlib

    paths: list[list[str]] = []
    for module in cli_main.COMMANDS:
        importlib.import_module(module).register(sub)
    for name, command in sub.choices.items():
        paths.append([name])
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):
                paths += [[name, child] for child in action.choices]
    return paths


@pytest.mark.parametrize("command", _subcommands(), ids=" ".join)
def test_help_cites_no_spec_section(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """No help text cites "SPEC §…", a document users do not have."""
    with pytest.raises(SystemExit):
        cli_main.main([*command, "--help"])
    out = capsys.readouterr().out
    assert "SPEC" not in out
    assert not re.search(r"\b(issue|decision) \d", out)


def test_unknown_provider_is_named_not_a_missing_model(chat_env: ChatEnv) -> None:
    """`--provider bogus` says the provider is unknown and lists the valid ones (exit 2)."""
    result = chat_env.run(["chat", "--provider", "bogus"])
    assert result.code == 2
    assert "unknown provider 'bogus'" in result.err
    assert "needs --model" not in result.err
    assert "anthropic" in result.err
    assert "Error: --provider: unknown provider" in result.err


def test_unknown_provider_from_a_settings_file_names_the_file(chat_env: ChatEnv) -> None:
    """The same provider written in a settings file: the error names the key and the file
    (it named nothing, as if it had come from --provider)."""
    settings = chat_env.cwd / ".autocompact" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text('{"model": {"provider": "bogus"}}')
    result = chat_env.run(["chat"], ["hi"])
    assert result.code == 2
    assert f"model.provider in {settings}: unknown provider 'bogus'" in result.err


def test_local_server_that_cannot_be_asked_warns_and_names_window(chat_env: ChatEnv) -> None:
    """A local provider whose server does not answer starts with a clear warning saying the
    window is a guess and how to pass --window."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = chat_env.run(
        [
            "chat",
            "--provider",
            "vllm",
            "--model",
            "llama3.1",
            "--base-url",
            f"http://127.0.0.1:{port}/v1",
        ]
    )
    text = " ".join((result.out + result.err).split())
    assert "could not be asked for the context window" in text
    assert "--window" in text


@pytest.mark.parametrize(
    "argv",
    [
        ["chat", "--provider", "fake", "--window", "10"],
        # a negative window said "must be 0 or more tokens", and 0 is refused too
        ["chat", "--provider", "fake", "--window", "-5"],
        ["chat", "--provider", "fake", "--window=-8k"],
        ["thresholds", "0"],
        ["thresholds", "10"],
    ],
    ids=[
        "chat-window-10",
        "chat-window-negative",
        "chat-window-negative-k",
        "thresholds-0",
        "thresholds-10",
    ],
)
def test_window_below_a_sane_minimum_is_refused(chat_env: ChatEnv, argv: list[str]) -> None:
    """A window below 1,000 tokens is a one-line error naming the minimum, exit 2."""
    result = chat_env.run(argv)
    assert result.code == 2
    assert "at least 1,000 tokens" in result.err
    assert result.err.count("\n") == 1


def test_replay_window_below_the_minimum_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`replay --window 10` is refused before anything is read (exit 2)."""
    path = openai_file(tmp_path, refusing_transcript())
    assert cli_main.main(["replay", str(path), "--window", "10"]) == 2
    assert "at least 1,000 tokens" in capsys.readouterr().err

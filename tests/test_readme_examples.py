"""The README a newcomer follows: its Python examples run offline as written, its terminal
transcript is what the command prints, and user docs cite no SPEC section, issue or decision."""

from __future__ import annotations

import io
import json
import re
import runpy
import sys
from pathlib import Path
from typing import Any

import pytest

import autocompact.providers
from autocompact.cli import main as cli_main
from autocompact.testing import FakeProvider

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def python_blocks() -> list[str]:
    """Every ```python block of the README."""
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_readme_has_python_examples() -> None:
    """The README shows the library with a real provider and offline."""
    blocks = python_blocks()
    assert len(blocks) >= 2
    assert any('get_provider("anthropic:' in b for b in blocks)
    assert any("FakeProvider" in b for b in blocks)


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_readme_python_example_runs_offline(
    index: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each example runs as written, offline: a provider it builds from a key in the
    environment is built for real (so the call as written works with the key set), then a
    scripted fake answers in its place."""
    real = autocompact.providers.get_provider
    built: list[str] = []

    def offline(spec: str, **kwargs: Any) -> FakeProvider:
        provider = real(spec, **kwargs)  # fails as the user would see it (e.g. no env=)
        built.append(provider.model)
        return FakeProvider(provider.model)

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-offline-test")
    monkeypatch.setattr(autocompact.providers, "get_provider", offline)
    script = tmp_path / "example.py"
    script.write_text(python_blocks()[index])
    monkeypatch.chdir(tmp_path)
    runpy.run_path(str(script), run_name="__main__")
    assert capsys.readouterr().out.strip()
    if "get_provider(" in python_blocks()[index]:
        assert built


def _transcript() -> tuple[str, str]:
    """The README's chat command block and the transcript block after it."""
    text = README.read_text()
    section = text[text.index("## A session in the terminal") :]
    command, transcript = re.findall(r"```(?:bash)?\n(.*?)```", section, re.S)[:2]
    return command, transcript


def test_readme_chat_transcript_is_what_the_command_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Running the README's chat command prints its transcript, line for line (the session id
    and the cut paste aside)."""
    command, transcript = _transcript()
    script = re.search(r"AUTOCOMPACT_FAKE_SCRIPT=(\S+)", command)
    steps = re.search(r"range\((\d+)\)", command)
    assert script is not None
    assert steps is not None
    assert json.loads((ROOT / script.group(1)).read_text())
    monkeypatch.setenv("AUTOCOMPACT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AUTOCOMPACT_FAKE_SCRIPT", str(ROOT / script.group(1)))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.chdir(tmp_path)
    paste = "".join(f"[ci] step {i}: ok " for i in range(int(steps.group(1))))
    lines = ["Help me debug a flaky test", paste, "/compress keep the failing test name", "/quit"]
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(f"{x}\n" for x in lines)))
    assert cli_main.main(["chat", "--provider", "fake", "--window", "32k"]) == 0
    first = capsys.readouterr().out
    monkeypatch.setattr(sys, "stdin", io.StringIO("/context\n/quit\n"))
    assert cli_main.main(["chat", "--continue"]) == 0
    second = capsys.readouterr().out
    printed = [" ".join(x.split()) for x in (first + second).splitlines()]
    session_id = re.compile(r"\d{8}-\d{6}-[0-9a-f]+")
    for line in transcript.splitlines():
        if line.startswith(("$ ", "> [ci]")):
            continue
        wanted = session_id.sub("ID", " ".join(line.split()))
        assert any(session_id.sub("ID", p) == wanted for p in printed), line


USER_DOCS = [README, *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "design.md")]
INTERNAL = re.compile(r"SPEC §|\b[Ii]ssue \d|\b[Dd]ecision \d|\bdesign note \d|\(note \d")


@pytest.mark.parametrize("path", USER_DOCS, ids=lambda p: p.name)
def test_user_docs_cite_no_spec_issue_or_decision(path: Path) -> None:
    """User docs (README, docs/ except the design log) cite no SPEC section, issue or design
    decision number: users have none of them (the design log keeps those references)."""
    found = [
        f"{path.name}:{n}: {line.strip()[:80]}"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if INTERNAL.search(line)
    ]
    assert not found, "\n".join(found)

"""Fixtures for driving ``autocompact chat`` and ``autocompact sessions`` in-process.

``cli`` runs the real entry point (:func:`autocompact.cli.main.main`) with piped stdin, a private
``AUTOCOMPACT_HOME``, the working directory set to a temporary folder and no provider keys in
the environment; it returns the exit code and what was printed.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from autocompact.cli import main as cli_main

PROVIDER_KEYS = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "DASHSCOPE_API_KEY",
    "AUTOCOMPACT_FAKE_SCRIPT",
)


@dataclass
class CliResult:
    """What one CLI run returned and printed."""

    code: int
    out: str
    err: str

    def blocks(self) -> list[str]:
        """The output split at each echoed input line (``> ...``), the greeting first."""
        chunks: list[list[str]] = [[]]
        for line in self.out.splitlines():
            if line.startswith("> "):
                chunks.append([])
            chunks[-1].append(line)
        return ["\n".join(c) for c in chunks]


@dataclass
class ChatEnv:
    """A sandbox for CLI runs."""

    home: Path
    cwd: Path
    monkeypatch: pytest.MonkeyPatch
    capsys: pytest.CaptureFixture[str]

    @property
    def sessions(self) -> Path:
        """The sessions directory."""
        return self.home / "sessions"

    def script(self, replies: Sequence[Any]) -> Path:
        """Write a fake-provider script and point AUTOCOMPACT_FAKE_SCRIPT at it."""
        path = self.cwd.parent / "script.json"
        path.write_text(json.dumps(list(replies)))
        self.monkeypatch.setenv("AUTOCOMPACT_FAKE_SCRIPT", str(path))
        return path

    def run(self, args: Sequence[str], lines: Sequence[str] = ()) -> CliResult:
        """Run ``autocompact ARGS`` with ``lines`` on stdin."""
        self.capsys.readouterr()
        self.monkeypatch.setattr(sys, "stdin", io.StringIO("".join(f"{x}\n" for x in lines)))
        code = cli_main.main(list(args))
        captured = self.capsys.readouterr()
        return CliResult(code=code, out=captured.out, err=captured.err)


@pytest.fixture
def chat_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> ChatEnv:
    """A private home and working directory, no provider keys, a wide terminal."""
    home = tmp_path / "home"
    cwd = tmp_path / "project"
    cwd.mkdir()
    monkeypatch.setenv("AUTOCOMPACT_HOME", str(home))
    monkeypatch.setenv("COLUMNS", "200")
    for key in PROVIDER_KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(cwd)
    return ChatEnv(home=home, cwd=cwd, monkeypatch=monkeypatch, capsys=capsys)

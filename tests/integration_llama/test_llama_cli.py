"""``autocompact chat`` against the real llama.cpp servers (issue 17 items 6-9).

The CLI runs in-process with piped stdin (as ``tests/cli`` drives it), a private
``AUTOCOMPACT_HOME`` and the servers' recording proxies as base URLs.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from autocompact.cli import main as cli_main
from autocompact.cli.calibrations import CalibrationMemory

from .conftest import LlamaServer, LlamaServers, _free_port
from .helpers import turn_text

pytestmark = pytest.mark.usefixtures("no_http_proxy")


@dataclass
class Cli:
    home: Path
    monkeypatch: pytest.MonkeyPatch
    capsys: pytest.CaptureFixture[str]

    def chat(self, server: LlamaServer | str, lines: Sequence[str], *extra: str) -> str:
        """Run ``autocompact chat`` on ``server`` with ``lines`` on stdin; its output."""
        base_url = server if isinstance(server, str) else server.base_url
        args = ["chat", "--provider", "llamacpp", "--model", "gemma3-270m"]
        args += ["--base-url", base_url, "--no-save", *extra]
        self.capsys.readouterr()
        self.monkeypatch.setattr(sys, "stdin", io.StringIO("".join(f"{x}\n" for x in lines)))
        code = cli_main.main(args)
        captured = self.capsys.readouterr()
        assert code == 0, captured.out + captured.err
        return captured.out + captured.err


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Cli:
    home = tmp_path / "home"
    (tmp_path / "project").mkdir()
    monkeypatch.setenv("AUTOCOMPACT_HOME", str(home))
    monkeypatch.setenv("COLUMNS", "200")
    for key in ("OPENAI_API_KEY", "OPENAI_COMPATIBLE_API_KEY", "AUTOCOMPACT_FAKE_SCRIPT"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(tmp_path / "project")
    return Cli(home=home, monkeypatch=monkeypatch, capsys=capsys)


def test_window_from_props_or_the_warning_names_window(
    cli: Cli, llama_servers: LlamaServers
) -> None:
    """Item 6: llama-server's window comes from /props; llama_cpp.server has none, so the CLI
    assumes one and its warning names ``--window``; with ``--window 8k`` there is no warning."""
    out = cli.chat(llama_servers.cpp, [], "--max-tokens", "4")
    assert "window 8.2K (server)" in out
    out = cli.chat(llama_servers.python, [], "--max-tokens", "4")
    assert "pass --window" in out
    assert "--context-window" not in out
    out = cli.chat(llama_servers.python, [], "--max-tokens", "4", "--window", "8192")
    assert "pass --window" not in out
    assert "window 8.2K (configured)" in out


def test_calibration_is_learned_and_remembered(cli: Cli, llama_servers: LlamaServers) -> None:
    """Item 7: the plain estimate is low for Gemma; the first count teaches a factor, kept per
    provider and model in the data directory, and the next chat starts from it."""
    memory = CalibrationMemory(cli.home)
    text = turn_text(3, sentences=24)  # above the 500 tokens a calibration needs
    for server in llama_servers.all():
        if memory.path.exists():
            memory.path.unlink()
        cli.chat(server, [text], "--max-tokens", "4", "--window", "8192")
        first = memory.load("llamacpp", "gemma3-270m")
        assert first is not None
        assert first.samples >= 1
        assert first.factor > 1.0  # Gemma's tokenizer makes more tokens than the estimate
        saved = json.loads(memory.path.read_text())
        assert any("gemma3-270m" in key for key in saved) or "gemma3-270m" in json.dumps(saved)
        cli.chat(server, [text], "--max-tokens", "4", "--window", "8192")
        second = memory.load("llamacpp", "gemma3-270m")
        assert second is not None
        assert second.samples > first.samples


def test_no_usage_notice_once_and_length_notice(cli: Cli, llama_servers: LlamaServers) -> None:
    """Items 8 and 9: llama_cpp.server's streams carry no usage: the CLI says so once and
    counts with the tokenize endpoint; a reply cut at --max-tokens carries the length notice."""
    py = llama_servers.python
    mark = py.proxy.mark()
    out = cli.chat(py, ["Hello there.", "How are you?"], "--max-tokens", "3", "--window", "8192")
    assert out.count("sends no token usage in streamed replies") == 1
    assert "stopped at its length limit" in out
    paths = [e.path for e in py.proxy.since(mark)]
    assert "/extras/tokenize/count" in paths
    chats = [e for e in py.proxy.since(mark) if e.is_chat]
    assert [e.request["max_tokens"] for e in chats] == [3, 3]
    out = cli.chat(llama_servers.cpp, ["Hello there."], "--max-tokens", "3")
    assert "sends no token usage" not in out
    assert "stopped at its length limit" in out


def test_connection_error_names_the_url_and_profile(cli: Cli) -> None:
    """Item 9: a server that is not there: the error names the URL tried and ``llamacpp``."""
    url = f"http://127.0.0.1:{_free_port()}/v1"
    out = cli.chat(url, ["hi"], "--max-tokens", "3", "--window", "8192")
    assert url in out
    assert "llamacpp" in out

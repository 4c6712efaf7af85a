"""One end-to-end run of ``autocompact chat`` in a real terminal (a pseudo-terminal)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from collections.abc import Iterator
from pathlib import Path

import pytest

from autocompact.sessions import load_session

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]|\r")


class Terminal:
    """The main side of a pseudo-terminal: type keys, wait for text on the screen."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.raw: list[str] = []
        self.pos = 0  # the screen text before this offset has been matched already

    @property
    def text(self) -> str:
        """Everything drawn so far, escape sequences removed."""
        return ANSI.sub("", "".join(self.raw))

    def type(self, keys: bytes) -> None:
        """Send keystrokes."""
        os.write(self.fd, keys)

    def expect(self, pattern: str, reads: int = 300) -> str:
        """Wait until ``pattern`` is drawn after the last match; return the text up to it."""
        for _ in range(reads):
            match = re.compile(pattern).search(self.text, self.pos)
            if match:
                seen = self.text[self.pos : match.end()]
                self.pos = match.end()
                return seen
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if not ready:
                continue
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # the child closed the terminal
                break
            if b"\x1b[6n" in chunk:
                # Answer the cursor-position query as a terminal would: prompt_toolkit needs it
                # to know there is room below the prompt for the bottom toolbar.
                self.type(b"\x1b[5;1R")
            self.raw.append(chunk.decode("utf-8", "replace"))
        raise AssertionError(f"{pattern!r} never appeared:\n{self.text[self.pos :][-2000:]}")


@contextlib.contextmanager
def chat_in_a_terminal(tmp_path: Path, **env_extra: str) -> Iterator[Terminal]:
    """``autocompact chat --provider fake`` in a 100×30 pseudo-terminal; it must leave with
    status 0 (Ctrl-D), or it is killed."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("AUTOCOMPACT_FAKE_SCRIPT", None)
    env.update(AUTOCOMPACT_HOME=str(tmp_path / "home"), TERM="xterm", **env_extra)
    main, child = pty.openpty()
    # A fresh pseudo-terminal is 0×0; give it a real size so the toolbar has a row to draw on.
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "autocompact.cli.main", "chat", "--provider", "fake"],
        stdin=child,
        stdout=child,
        stderr=child,
        cwd=tmp_path,
        env=env,
        start_new_session=True,
    )
    os.close(child)
    term = Terminal(main)
    try:
        yield term
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(main)


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
def test_chat_in_a_terminal(tmp_path: Path) -> None:
    """In a real terminal: type, paste several lines, see replies and the toolbar, quit."""
    with chat_in_a_terminal(tmp_path) as term:
        assert "fake/fake-model" in term.expect(r"/help for commands")
        term.expect(r"0 / 128K tokens \(0%\)")  # the bottom toolbar, before anything is sent
        term.type(b"hello from a terminal\r")
        assert "hello from a terminal" in term.expect(r"OK\.")
        term.expect(r"\d+ / 128K tokens \(0%\)")  # the prompt and toolbar are back
        # A multi-line paste (bracketed paste) and Alt-Enter each make one message.
        term.type(b"\x1b[200~pasted line one\npasted line two\x1b[201~\r")
        term.expect(r"OK\.")
        term.expect(r"tokens \(0%\)")
        term.type(b"typed line one\x1b\rtyped line two\r")
        term.expect(r"OK\.")
        term.expect(r"tokens \(0%\)")
        term.type(b"/context\r")
        screen = term.expect(r"Hard threshold\s+105K")
        assert "Effective window  108K (window − 20K reserve)" in screen
        term.expect(r"tokens \(0%\)")
        term.type(b"\x04")  # Ctrl-D
        term.expect(r"Resume with: autocompact chat --continue")
    (saved,) = (tmp_path / "home" / "sessions").glob("*.jsonl")
    user = [m.text for m in load_session(saved).history if m.role == "user"]
    assert user == [
        "hello from a terminal",
        "pasted line one\npasted line two",
        "typed line one\ntyped line two",
    ]


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
def test_a_streamed_reply_cannot_drive_the_terminal(tmp_path: Path) -> None:
    """A reply streamed into a real terminal, holding an OSC 52 (write the clipboard) and an
    OSC 0 (set the title), reaches the screen as text, not as sequences the terminal obeys."""
    script = tmp_path / "script.json"
    hostile = "clip\x1b]52;c;aGVsbG8=\x07 title\x1b]0;owned\x07 done."
    script.write_text(json.dumps([{"text": hostile, "purpose": "chat"}]))
    with chat_in_a_terminal(tmp_path, AUTOCOMPACT_FAKE_SCRIPT=str(script)) as term:
        term.expect(r"/help for commands")
        term.type(b"hi\r")
        assert "clip␛]52;c;aGVsbG8=␇" in term.expect(r"done\.")
        term.expect(r"tokens \(0%\)")
        term.type(b"\x04")
        term.expect(r"Resume with")
    raw = "".join(term.raw)
    assert "\x1b]52" not in raw
    assert "\x1b]0;owned" not in raw

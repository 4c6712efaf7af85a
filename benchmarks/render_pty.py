"""Streaming a long reply in a real terminal: ``autocompact chat`` through a pseudo-terminal.

Issue 16 measured the chat rendering one streamed reply in 0.6 s at 2K characters, 18.7 s at
10K and 69 s of CPU at 20K, in a terminal: each delta re-parsed and redrew the whole reply.
This benchmark runs the real CLI (``--provider fake``, a scripted Markdown reply streamed word
by word) in a pseudo-terminal and reports, per reply length, the wall time from Enter to the
reply's last word on screen and the CPU the chat process spent beyond a one-word reply.

Side by side, in this process, the renderer it replaced (``Live`` + ``Markdown(whole text)``
per delta) draws the same replies on a console writing to a pseudo-terminal, up to
``--naive-max`` characters (it is quadratic: 20K takes minutes).

Run::

    .venv/bin/python benchmarks/render_pty.py                  # 2K, 5K, 10K, 20K, 40K
    .venv/bin/python benchmarks/render_pty.py --sizes 2000 20000 --naive-max 5000

Linear means the time per character stays flat as the reply grows (the "per 1K" column); the
target is a 20K-character reply in well under a second.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import re
import resource
import select
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

END = "ENDOFREPLY"


def reply_text(size: int) -> str:
    """Markdown of about ``size`` characters: paragraphs, lists, code, headings; ends with END."""
    words = [
        "the",
        "engine",
        "keeps",
        "every",
        "request",
        "under",
        "the",
        "window",
        "while",
        "the",
        "summary",
        "waits",
    ]
    blocks: list[str] = []
    total, n = 0, 0
    while total < size:
        n += 1
        if n % 7 == 0:
            block = "```python\n" + "\n".join(f"value_{i} = compute({i}, n={n})" for i in range(8))
            block += "\n```"
        elif n % 5 == 0:
            block = "\n".join(f"- item {i}: {' '.join(words[i : i + 6])}" for i in range(5))
        elif n % 11 == 0:
            block = f"## Section {n}"
        else:
            block = " ".join(words[(n + i) % len(words)] for i in range(60))
        blocks.append(block)
        total += len(block) + 2
    return "\n\n".join(blocks)[:size] + f" {END}\n"


class _Screen:
    """Reads the terminal's output, answering the cursor-position query as a terminal does."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.data = bytearray()

    def until(self, pattern: bytes, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        start = 0
        while time.monotonic() < deadline:
            if re.search(pattern, bytes(self.data[start:])):
                return True
            start = max(0, len(self.data) - 200)
            ready, _, _ = select.select([self.fd], [], [], 0.05)
            if not ready:
                continue
            try:
                chunk = os.read(self.fd, 1 << 16)
            except OSError:
                return False
            if b"\x1b[6n" in chunk:
                os.write(self.fd, b"\x1b[5;1R")
            self.data += chunk
        return False


def run_cli(size: int, workdir: Path) -> tuple[float, float]:
    """(wall seconds from Enter to the last word, child CPU seconds) for one reply."""
    script = workdir / f"script-{size}.json"
    warmup = (
        "A first reply loads the Markdown and code highlighters:\n\n```python\nx = 1\n```\n\nWARM"
    )
    replies = [{"text": warmup, "purpose": "chat"}, {"text": reply_text(size) if size else END}]
    script.write_text(json.dumps(replies))
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(
        AUTOCOMPACT_HOME=str(workdir / "home"), AUTOCOMPACT_FAKE_SCRIPT=str(script), TERM="xterm"
    )
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(
        [sys.executable, "-m", "autocompact.cli.main", "chat", "--provider", "fake", "--no-save"],
        stdin=child,
        stdout=child,
        stderr=child,
        cwd=workdir,
        env=env,
        start_new_session=True,
    )
    os.close(child)
    screen = _Screen(main)
    try:
        if not screen.until(rb"tokens \(", 60):
            raise RuntimeError("the chat did not start")
        os.write(main, b"warm up\r")  # one-time costs (imports) are not the reply's
        if not screen.until(rb"WARM", 60):
            raise RuntimeError("the warm-up reply never arrived")
        mark = len(screen.data)
        while b"\x1b[?2004h" not in screen.data[mark:]:  # the prompt is back
            screen.until(b"\x00never\x00", 0.1)
        mark = len(screen.data)
        start = time.perf_counter()
        os.write(main, b"go\r")
        while not screen.until(END.encode(), 600) or END.encode() not in screen.data[mark:]:
            pass
        wall = time.perf_counter() - start
        # Ctrl-D once the prompt is back (again until it is taken); keep reading meanwhile so
        # the chat never blocks on its output.
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            screen.until(b"\x00never\x00", 0.5)
            if b"\x1b[?2004h" in screen.data[mark:]:
                os.write(main, b"\x04")
        if proc.poll() is None:
            print(bytes(screen.data[-600:]).decode("utf-8", "replace"), file=sys.stderr)
        proc.wait(timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(main)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def run_naive(size: int) -> float:
    """Seconds the replaced renderer takes for one reply, drawn on a pseudo-terminal."""
    from rich.console import Console
    from rich.live import Live
    from rich.markdown import Markdown

    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    stop = threading.Event()

    def drain() -> None:
        while not stop.is_set():
            ready, _, _ = select.select([main], [], [], 0.05)
            if ready:
                try:
                    os.read(main, 1 << 16)
                except OSError:  # the writing side closed
                    return

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    with os.fdopen(child, "w", closefd=True) as out:
        console = Console(file=out, force_terminal=True, width=120, height=40)
        text = reply_text(size)
        words = re.findall(r"\S*\s*", text)
        start = time.perf_counter()
        buffer: list[str] = []
        with Live(console=console, refresh_per_second=12, vertical_overflow="visible") as live:
            for word in words:
                buffer.append(word)
                live.update(Markdown("".join(buffer)))
            live.update(Markdown("".join(buffer)))
        elapsed = time.perf_counter() - start
    stop.set()
    reader.join()
    os.close(main)
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 5000, 10000, 20000, 40000])
    parser.add_argument("--naive-max", type=int, default=5000, help="largest size for the old way")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        _, base_cpu = run_cli(0, workdir)
        print(f"One-word reply (start-up, warm-up reply, exit): {base_cpu:.2f} s CPU\n")
        print("| reply | wall, Enter → last word | CPU beyond a one-word reply | per 1K chars |")
        print("| ---: | ---: | ---: | ---: |")
        rows = []
        for size in args.sizes:
            wall, cpu = run_cli(size, workdir)
            extra = max(0.0, cpu - base_cpu)
            rows.append((size, wall, extra))
            print(
                f"| {size:,} | {wall:.2f} s | {extra:.2f} s | {1000 * wall / size * 1000:.1f} ms |"
            )
        if len(rows) >= 2:
            (s0, w0, _), (s1, w1, _) = rows[0], rows[-1]
            print(
                f"\nGrowth: {s1 / s0:.0f}× the characters took {w1 / w0:.1f}× the wall time "
                "(linear: about the same factor; quadratic: its square)."
            )
        naive = [s for s in args.sizes if s <= args.naive_max]
        if naive:
            print("\nThe replaced renderer (Live + Markdown of the whole text per delta):\n")
            print("| reply | seconds | the new chat, same reply (wall) | ratio |")
            print("| ---: | ---: | ---: | ---: |")
            for size in naive:
                old = run_naive(size)
                new = next(w for s, w, _ in rows if s == size)
                print(f"| {size:,} | {old:.2f} s | {new:.2f} s | {old / new:.1f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

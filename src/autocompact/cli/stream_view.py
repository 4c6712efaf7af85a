"""A streamed Markdown reply in a terminal, drawn in time linear in its length.

The chat used to build ``Markdown(whole reply so far)`` on every delta and let ``rich.live.Live``
redraw all of it: each delta re-parsed and re-rendered everything before it, so a reply took
time quadratic in its length (18.7 s of CPU for 10K characters, 69 s for 20K, in a terminal).

:class:`MarkdownStream` keeps the work per character constant:

* a delta is appended to a buffer — nothing is parsed or drawn per delta;
* a finished block (the text up to a blank line outside a code fence) is rendered once and
  printed above the live region, never touched again;
* a block that grows past :data:`MAX_TAIL_LINES` lines is committed at a line boundary (a code
  block is closed and reopened with the same fence, so it stays highlighted);
* the live region shows only the unfinished tail, drawn by rich's refresh thread a few times a
  second (its cost bounded by the clock, not by the number of deltas).

:attr:`MarkdownStream.parsed_chars` counts what was handed to the Markdown parser, so tests can
check the work is linear without timing anything.
"""

from __future__ import annotations

import threading
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.live import Live
from rich.markdown import Markdown

__all__ = ["MAX_TAIL_LINES", "MarkdownStream"]

MAX_TAIL_LINES = 24
"""The most lines the live (redrawn) region holds before they are committed."""


class MarkdownStream:
    """Feed it the deltas of one reply, then :meth:`close` it.

    Args:
        console: the terminal console.
        refresh_per_second: how often the live tail is redrawn.
        auto_refresh: redraw on rich's timer thread (tests turn it off to count renders).
    """

    def __init__(
        self, console: Console, *, refresh_per_second: float = 8, auto_refresh: bool = True
    ) -> None:
        self.console = console
        self.parsed_chars = 0  # characters given to the Markdown parser, commits and tail
        self.commits = 0
        self.tail_renders = 0
        self._lines: list[str] = []  # complete lines of the unfinished block
        self._partial: list[str] = []  # the line being written
        self._fence = ""  # the open code fence's marker ("```" or "~~~"), "" outside one
        self._fence_line = ""  # the line that opened it (kept to reopen a split block)
        self._done: list[str] = []  # finished blocks waiting to be printed
        self._version = 0
        self._cache: tuple[int, Markdown | None] = (-1, None)
        self._lock = threading.Lock()
        self._live = Live(
            _Tail(self),
            console=console,
            refresh_per_second=refresh_per_second,
            auto_refresh=auto_refresh,
            vertical_overflow="visible",
        )
        self._live.start()

    # -- feeding -------------------------------------------------------------------------------

    def feed(self, text: str) -> None:
        """Add a delta (constant work per character)."""
        if not text:
            return
        with self._lock:
            self._version += 1
            if "\n" not in text:
                self._partial.append(text)
                return
            pieces = text.split("\n")
            self._partial.append(pieces[0])
            for piece in pieces[1:]:
                line = "".join(self._partial)
                self._partial = [piece]
                self._complete_line(line)
            done, self._done = self._done, []
        # Printed outside the lock: rich's refresh thread holds its own lock while it asks
        # for the tail, and printing while Live runs takes that lock too.
        for block in done:
            self.console.print(Markdown(block))
            self.console.print()

    def close(self) -> None:
        """Draw what is left and stop the live region."""
        with self._lock:
            self._version += 1
        self._live.update(_Tail(self), refresh=True)
        self._live.stop()

    # -- internals -----------------------------------------------------------------------------

    def _complete_line(self, line: str) -> None:
        stripped = line.lstrip()
        if self._fence:
            self._lines.append(line)
            if stripped.startswith(self._fence) and not stripped[3:].strip():
                self._fence = ""
            elif len(self._lines) >= MAX_TAIL_LINES:
                # A long code block: commit what is there as a closed block, reopen the rest.
                self._commit([*self._lines, self._fence])
                self._lines = [self._fence_line]
            return
        if stripped.startswith(("```", "~~~")):
            self._fence, self._fence_line = stripped[:3], line
            self._lines.append(line)
            return
        if not line.strip():
            if self._lines:
                self._commit(self._lines)
                self._lines = []
            return
        self._lines.append(line)
        if len(self._lines) >= MAX_TAIL_LINES:
            self._commit(self._lines)
            self._lines = []

    def _commit(self, lines: list[str]) -> None:
        """Queue a finished block; it is printed above the live region, then never redrawn."""
        text = "\n".join(lines)
        self.parsed_chars += len(text)
        self.commits += 1
        self._done.append(text)

    def tail_text(self) -> str:
        """The unfinished block (what the live region shows)."""
        return "\n".join([*self._lines, "".join(self._partial)])

    def tail(self) -> Markdown | None:
        """The live region's Markdown, parsed at most once per change."""
        with self._lock:
            version, cached = self._cache
            if version == self._version:
                return cached
            text = self.tail_text()
            self.parsed_chars += len(text)
            self.tail_renders += 1
            markdown = Markdown(text) if text.strip() else None
            self._cache = (self._version, markdown)
            return markdown


class _Tail:
    """The live region's renderable: the stream's unfinished tail, parsed lazily."""

    def __init__(self, stream: MarkdownStream) -> None:
        self.stream = stream

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        markdown = self.stream.tail()
        if markdown is not None:
            yield markdown

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Any:
        from rich.measure import Measurement

        return Measurement(0, options.max_width)

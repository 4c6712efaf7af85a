"""The read–send–render loop of ``autocompact chat``.

Input comes from prompt_toolkit on a terminal (history, multi-line paste, Alt-Enter for a new
line, a bottom toolbar with the footer) or, when stdin is not a terminal, one message per line
from stdin (how tests and scripts drive it; the footer is then printed after each turn).
Replies stream into a rich Markdown view. Ctrl-C during a reply cancels that turn only: the
engine commits a turn to the history when its stream ends, so nothing already said is lost.
Ctrl-D (or ``/quit``) leaves.
"""

from __future__ import annotations

import io
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol, TextIO

from rich.console import Console
from rich.markdown import Markdown
from rich.text import Text

from autocompact.chat import ChatSession
from autocompact.cli.render import TipScheduler, describe_event, footer_text
from autocompact.cli.slash import REGISTRY, ChatContext, CommandResult, SlashRegistry
from autocompact.cli.stream_view import MarkdownStream
from autocompact.compaction import CompressionInfo, CompressionStatus, CompressionTrigger
from autocompact.errors import AutocompactError, ProviderTimeoutError
from autocompact.events import (
    CompactionFailed,
    CompactionSkipped,
    CompactionSucceeded,
    Event,
    WindowLearned,
)
from autocompact.providers.base import FinishReason, StreamDone, TextDelta, ThinkingDelta
from autocompact.textsafe import clean_input, for_terminal
from autocompact.tips import format_tokens

__all__ = ["LineSource", "Persist", "PipedInput", "Repl", "TerminalInput"]

Persist = Callable[[ChatSession, list[object]], None]
"""Saves a chat: ``(session, compactions since the last save)``; each compaction is a failed
attempt's info or a successful one's ``(info, the history it left)``."""


class LineSource(Protocol):
    """Where the REPL reads what the user types.

    ``read`` raises :class:`EOFError` at the end (Ctrl-D) and :class:`KeyboardInterrupt` on
    Ctrl-C at the prompt.
    """

    def read(self) -> str:
        """The next message or command."""
        ...

    def remember(self, text: str) -> None:
        """Add a line to the input history (used when a session is resumed)."""
        ...


_REPLACED_NOTE = (
    "Note: the input held bytes that are not UTF-8; each was replaced by \ufffd (U+FFFD) "
    "in what is sent and saved. Set a UTF-8 locale (e.g. LANG=C.UTF-8) to send them as typed."
)


_NOT_KEPT = "Your message was not added to the conversation; the history is as it was before it."

WAIT_NOTICE_SECONDS = 15.0
"""How long a turn waits for the server's first word before the chat says that it is waiting,
how long it will wait, and that Ctrl-C cancels (a server that takes a request and never answers
otherwise left the chat silent for the SDK's whole timeout, three times over)."""

TRIES = 3
"""How many times the provider SDKs send a request that timed out (their ``max_retries`` of 2,
which every adapter keeps by default)."""

_Timer = threading.Timer  # (tests start the notice at once)


def _kept(infos: Sequence[CompressionInfo]) -> str:
    """What stays of a turn that did not finish: the compactions made before its send (their
    new history is installed and saved), said after "the history is as it was" would be untrue.
    Empty when there were none."""
    done = [i for i in infos if i.status is CompressionStatus.COMPRESSED]
    if not done:
        return ""
    sizes = ", ".join(
        f"{format_tokens(i.original_token_count)} → {format_tokens(i.new_token_count)}"
        for i in done
    )
    return f"; the compaction made before sending it is kept ({sizes} tokens)"


class PipedInput:
    """One message per line from a stream that is not a terminal (stdin in tests and scripts)."""

    def __init__(self, stream: TextIO) -> None:
        if isinstance(stream, io.TextIOWrapper):  # issue 27: bytes that are not UTF-8 arrive
            stream.reconfigure(errors="surrogateescape")  # as surrogates; handle() replaces them
        self._lines: Iterator[str] = iter(stream)

    def read(self) -> str:
        """The next non-empty line; :class:`EOFError` at the end."""
        for line in self._lines:
            if line.strip():  # a line ended CRLF (a file from Windows) ends without its CR
                return line.rstrip("\n").removesuffix("\r")
        raise EOFError

    def remember(self, text: str) -> None:
        """Piped input has no history."""


class TerminalInput:
    """prompt_toolkit input: in-memory history, bracketed paste, Alt-Enter for a new line.

    The history is kept in memory only (never on disk, so nothing typed, keys included, is
    written); a resumed session preloads its user messages.

    Args:
        toolbar: returns the bottom toolbar's text.
    """

    def __init__(self, toolbar: Callable[[], str]) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import InMemoryHistory
        from prompt_toolkit.key_binding import KeyBindings

        bindings = KeyBindings()

        @bindings.add("escape", "enter")
        def _newline(event: object) -> None:
            event.current_buffer.insert_text("\n")  # type: ignore[attr-defined]

        self._history = InMemoryHistory()
        self._session: PromptSession[str] = PromptSession(
            history=self._history,
            key_bindings=bindings,
            bottom_toolbar=lambda: " " + toolbar(),
            enable_history_search=True,
        )

    def read(self) -> str:
        """Prompt for one message (a paste may span several lines)."""
        return self._session.prompt("> ")

    def remember(self, text: str) -> None:
        """Add a line to the up-arrow history."""
        self._history.append_string(text)


class Repl:
    """The chat loop.

    Args:
        ctx: the chat and its settings (shared with the slash commands).
        console: where output goes.
        source: where input comes from.
        persist: saves the session with the compactions made since the last save; called after
            every turn and every state-changing command.
        interactive: a terminal is attached (stream with a live view; the footer is a toolbar).
        tips: the tip scheduler.
        registry: the slash commands.
    """

    def __init__(
        self,
        ctx: ChatContext,
        *,
        console: Console,
        source: LineSource | None = None,
        persist: Persist | None = None,
        interactive: bool = False,
        tips: TipScheduler | None = None,
        registry: SlashRegistry = REGISTRY,
    ) -> None:
        self.ctx = ctx
        self.console = console
        self.source: LineSource = source or PipedInput(sys.stdin)
        self._persist = persist
        self.interactive = interactive
        self.tips = tips or TipScheduler()
        self.registry = registry
        self.pending_compactions: list[object] = []
        self.on_window_learned: Callable[[int], None] | None = None
        self._told_replaced = False

    def persist(self) -> None:
        """Save the chat (and the compactions made since the last save)."""
        new, self.pending_compactions = self.pending_compactions, []
        if self._persist is not None:
            try:
                self._persist(self.ctx.session, new)
            except AutocompactError as exc:
                self.console.print(Text(f"Error: the session was not saved: {exc}", style="red"))

    # -- the footer and events ---------------------------------------------------------------

    def footer(self) -> str:
        """The footer's text for the chat as it stands."""
        session = self.ctx.session
        return footer_text(
            session.estimate_tokens(),
            session.thresholds,
            consecutive_failures=session.consecutive_failures,
        )

    def on_event(self, event: Event) -> None:
        """The engine's hook: show each event as it happens and queue compactions to save."""
        if isinstance(event, WindowLearned):
            self.ctx.window_source = "server"
            if self.on_window_learned is not None:
                self.on_window_learned(event.context_window)
        if isinstance(event, CompactionSucceeded):
            # The engine has just replaced the history: keep the one this compaction left, so
            # the session file records it apart from the turn sent after it.
            self.pending_compactions.append((event.info, self.ctx.session.history))
        elif isinstance(event, CompactionFailed):
            self.pending_compactions.append(event.info)
        line = describe_event(event)
        if line is not None:
            style = (
                "red"
                if isinstance(event, CompactionFailed)
                else "dim"
                if isinstance(event, CompactionSkipped)
                else "yellow"
            )
            self.console.print(Text(line, style=style))

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> int:
        """Read and answer until Ctrl-D or ``/quit``; returns the exit code."""
        while True:
            try:
                line = self.source.read()
            except EOFError:
                break
            except KeyboardInterrupt:
                self.console.print(Text("(Ctrl-D or /quit to leave)", style="dim"))
                continue
            if not self.handle(line):
                break
        self.persist()
        return 0

    def handle(self, line: str) -> bool:
        """Handle one input; ``False`` when the chat should end."""
        line, replaced = clean_input(line)  # issue 27: undecodable bytes become U+FFFD, told once
        if replaced and not self._told_replaced:
            self._told_replaced = True
            self.console.print(Text(_REPLACED_NOTE, style="yellow"))
        text = line.strip()
        if not text:
            return True
        if not self.interactive:
            shown = text if len(text) <= 200 else f"{text[:200]}… ({len(text):,} characters)"
            self.console.print(Text(f"> {for_terminal(shown)}", style="bold"))
        if text.startswith("/") and not text.startswith("//"):
            return self._command(text)
        self.turn(text[1:] if text.startswith("//") else line)
        return True

    def _command(self, text: str) -> bool:
        try:
            result = self.registry.dispatch(self.ctx, text)
        except KeyboardInterrupt:
            self.console.print(Text("Cancelled.", style="yellow"))
            result = CommandResult(changed=True)
        except AutocompactError as exc:
            self.console.print(Text(f"Error: {for_terminal(str(exc))}", style="red"))
            result = CommandResult(changed=True)
        for out in result.lines:
            self.console.print(for_terminal(out), markup=False, highlight=False)
        if result.changed:
            self.persist()
        return not result.quit

    def turn(self, text: str) -> None:
        """Send one message, stream the reply, then save, show a tip and the footer."""
        before = len(self.ctx.session.compactions)
        try:
            self._stream(text)
        except KeyboardInterrupt:
            kept = _kept(self.ctx.session.compactions[before:])
            said = (
                f"Cancelled: your message was not added{kept}."
                if kept
                else "Cancelled; the conversation is as it was."
            )
            self.console.print(Text(f"\n{said}", style="yellow"))
        except AutocompactError as exc:  # provider errors included: the chat goes on
            self.console.print(Text(f"Error: {for_terminal(str(exc))}", style="red"))
            if isinstance(exc, ProviderTimeoutError) and self.ctx.timeout is not None:
                self.console.print(
                    Text(
                        f"The server sent nothing for {self.ctx.timeout:g} s, {TRIES} times; if "
                        "it is only slow (a large prompt on a local model), pass a larger "
                        "--timeout.",
                        style="yellow",
                    )
                )
            # A turn is committed only when its reply ends: say what became of the message (and
            # of a compaction made before its send, which stays).
            kept = _kept(self.ctx.session.compactions[before:])
            said = f"Your message was not added to the conversation{kept}." if kept else _NOT_KEPT
            self.console.print(Text(said, style="yellow"))
        self._report_notices()
        self.persist()
        forced = (CompressionTrigger.HARD, CompressionTrigger.REACTIVE)
        self._after_turn(
            rescue_ran=any(c.trigger in forced for c in self.ctx.session.compactions[before:])
        )

    def _stream(self, text: str) -> None:
        buffer: list[str] = []
        stopped = False
        live: MarkdownStream | None = None
        # A spinner until the first token (compaction events print above it).
        status = self.console.status("Thinking…") if self.interactive else None
        if status is not None:
            status.start()
        waiting = self._wait_notice()
        try:
            for event in self.ctx.session.send_stream(text):
                if waiting is not None and isinstance(
                    event, TextDelta | ThinkingDelta | StreamDone
                ):
                    waiting.cancel()
                    waiting = None
                if status is not None and isinstance(event, TextDelta | ThinkingDelta):
                    status.stop()
                    status = None
                if isinstance(event, TextDelta):
                    shown = for_terminal(event.text)  # a reply drives no terminal sequence
                    buffer.append(shown)
                    if self.interactive:
                        if live is None:  # linear in the reply's length (cli/stream_view.py)
                            live = MarkdownStream(self.console)
                        live.feed(shown)
                elif isinstance(event, StreamDone):
                    if not buffer:
                        buffer.append(for_terminal(event.completion.text))
                    stopped = event.completion.finish_reason is FinishReason.LENGTH
        finally:
            if waiting is not None:
                waiting.cancel()
            if status is not None:
                status.stop()
            if live is not None:
                live.close()
        if not self.interactive:
            # Rendered, then printed without the padding rich adds to fill the width.
            with self.console.capture() as captured:
                self.console.print(Markdown("".join(buffer)))
            for line in captured.get().splitlines():
                self.console.print(line.rstrip(), markup=False, highlight=False)
        if stopped:
            self.console.print(
                Text("(The reply stopped at its length limit: it may be cut short.)", "yellow")
            )

    def _wait_notice(self) -> threading.Timer | None:
        """A timer that says once, after :data:`WAIT_NOTICE_SECONDS` without a word from the
        server, how long the chat waits for it and that Ctrl-C cancels the turn (``None`` when
        the provider has no timeout: the offline fake)."""
        limit = self.ctx.timeout
        if limit is None:
            return None

        def say() -> None:
            self.console.print(
                Text(
                    f"Still waiting for the server ({WAIT_NOTICE_SECONDS:g} s so far). Each try "
                    f"waits up to {limit:g} s (--timeout) and a request that times out is tried "
                    f"{TRIES} times; Ctrl-C cancels this turn.",
                    style="yellow",
                )
            )

        timer = _Timer(WAIT_NOTICE_SECONDS, say)
        timer.daemon = True
        timer.start()
        return timer

    def _report_notices(self) -> None:
        """Say what the provider noticed about the server (once each: the adapter says so)."""
        take = getattr(self.ctx.session.provider, "take_notices", None)
        if callable(take):
            for notice in take():
                self.console.print(Text(f"Note: {notice}", style="yellow"))

    def _after_turn(self, *, rescue_ran: bool = False) -> None:
        """Show the tip for the count now (``rescue_ran``: a forced compaction ran before this
        turn's send) and, piped, the footer."""
        session = self.ctx.session
        tokens = session.estimate_tokens()
        hold = session.hold_until
        tip = self.tips.after_turn(
            tokens,
            session.thresholds,
            breaker_open=session.breaker_open,
            held=hold is not None and tokens < hold,
            rescue_ran=rescue_ran,
        )
        if tip is not None:
            self.console.print(Text(f"Tip: {tip.message}", style="cyan"))
        if not self.interactive:
            self.console.print(Text(f"[{self.footer()}]", style="dim"))

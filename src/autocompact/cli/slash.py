"""Slash commands: a registry of ``(name, help, handler)`` that also writes ``/help``.

Handlers are plain functions ``(ctx, argument) -> CommandResult`` that return the lines to show;
they never touch the terminal, so tests call them directly and compare text. The REPL prints
what they return and persists the session afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from autocompact.chat import ChatSession
from autocompact.cli.render import WINDOW_SOURCES, bar, format_tokens
from autocompact.context_report import WindowSource, build_context_report, native_block_lines
from autocompact.sessions import SessionStore
from autocompact.sessions.stores import SessionStore as SharedStore

__all__ = [
    "REGISTRY",
    "ChatContext",
    "CommandResult",
    "SlashCommand",
    "SlashRegistry",
    "context_lines",
]


class ModelSwitcher(Protocol):
    """Builds a new chat for another model of the same provider; returns a line to show."""

    def __call__(self, ctx: ChatContext, model: str) -> str: ...


@dataclass
class ChatContext:
    """What slash commands act on: the live chat and where it is saved.

    Attributes:
        session: the chat (replaced by ``/model``).
        provider_name: the provider's name as configured.
        model: the current model's name.
        window_source: where the window came from: known, configured, server or assumed.
        store: the saved-sessions directory, if saving is on.
        shared_store: the SQLite, PostgreSQL or JSONL store the chat runs on (``--store``).
        session_id: the id of this chat's saved session, if any.
        switch_model: how ``/model NAME`` builds a chat for another model, if it can.
        on_clear: called after ``/clear`` (the REPL records it in the session file).
        timeout: seconds each request waits for the server (``--timeout``; ``None``: the
            offline fake, which never waits).
    """

    session: ChatSession
    provider_name: str
    model: str
    window_source: WindowSource = "assumed"
    store: SessionStore | None = None
    shared_store: SharedStore | None = None
    session_id: str | None = None
    switch_model: ModelSwitcher | None = None
    on_clear: Callable[[], None] | None = None
    timeout: float | None = None


@dataclass(frozen=True, kw_only=True)
class CommandResult:
    """What a command shows and whether the chat ends.

    Attributes:
        lines: the lines to print, in order.
        quit: end the chat after printing.
        changed: the chat's state changed (the REPL saves it).
    """

    lines: tuple[str, ...] = ()
    quit: bool = False
    changed: bool = False


Handler = Callable[[ChatContext, str], CommandResult]


@dataclass(frozen=True, kw_only=True)
class SlashCommand:
    """One slash command.

    Attributes:
        name: the word after the slash.
        help: one line for ``/help``.
        handler: the function that runs it.
        usage: the argument synopsis shown in ``/help`` (e.g. ``[instructions]``).
        aliases: other names that run it.
    """

    name: str
    help: str
    handler: Handler
    usage: str = ""
    aliases: tuple[str, ...] = ()


class SlashRegistry:
    """The slash commands, by name; dispatches a typed line to its handler."""

    def __init__(self) -> None:
        self._commands: dict[str, SlashCommand] = {}
        self._names: dict[str, SlashCommand] = {}

    def command(
        self, name: str, help: str, *, usage: str = "", aliases: Sequence[str] = ()
    ) -> Callable[[Handler], Handler]:
        """Decorator: register ``handler`` as ``/name``."""

        def register(handler: Handler) -> Handler:
            cmd = SlashCommand(
                name=name, help=help, handler=handler, usage=usage, aliases=tuple(aliases)
            )
            self._commands[name] = cmd
            for key in (name, *aliases):
                self._names[key] = cmd
            return handler

        return register

    def __iter__(self) -> Iterator[SlashCommand]:
        return iter(self._commands.values())

    def get(self, name: str) -> SlashCommand | None:
        """The command called ``name`` (or one of its aliases)."""
        return self._names.get(name)

    def help_lines(self) -> tuple[str, ...]:
        """``/help``'s text, generated from the registry."""
        rows = [
            (f"/{c.name}" + (f" {c.usage}" if c.usage else ""), c.help)
            + ((", ".join(f"/{a}" for a in c.aliases),) if c.aliases else ())
            for c in self
        ]
        width = max(len(r[0]) for r in rows)
        out = ["Commands:"]
        for row in rows:
            line = f"  {row[0].ljust(width)}  {row[1]}"
            if len(row) > 2:
                line += f" (also {row[2]})"
            out.append(line)
        out.append("Anything else is sent to the model. Ctrl-C cancels a reply, Ctrl-D exits.")
        return tuple(out)

    def dispatch(self, ctx: ChatContext, line: str) -> CommandResult:
        """Run a line that starts with ``/``."""
        # The name follows the slash; any whitespace ends it (a space, a tab, an Alt-Enter).
        rest = line.strip()[1:]
        word = rest.split(None, 1)[0] if rest[:1].strip() else ""
        argument = rest[len(word) :]
        cmd = self.get(word.lower())
        if cmd is None:
            shown = word if len(word) <= 40 else f"{word[:40]}…"
            return CommandResult(lines=(f"Unknown command /{shown}. Type /help for the list.",))
        return cmd.handler(ctx, argument.strip())


REGISTRY = SlashRegistry()


@REGISTRY.command("help", "show this list", aliases=("?",))
def _help(ctx: ChatContext, argument: str) -> CommandResult:
    return CommandResult(lines=REGISTRY.help_lines())


def context_lines(session: ChatSession, window_source: WindowSource) -> tuple[str, ...]:
    """``/context``: the count, tier, window and its source, a bar, SPEC §7's four lines, and
    what holds the space by category (SPEC §10.2), and any native compaction blocks."""
    tokens = session.estimate_tokens()
    report = build_context_report(tokens, session.thresholds, window_source=window_source)
    space = session.space()
    breakdown = tuple(
        f"  {label:<24} {format_tokens(tokens)}" for label, tokens in space.rows() if tokens
    )
    native = native_block_lines(
        session.history,
        provider=session.provider.name,
        family=getattr(session.provider, "family", None),
    )
    return (
        report.summary,
        report.source_line,
        f"{' ' * 18}{bar(report.fraction)}",
        *report.lines,
        *(("What holds the space (estimated):", *breakdown) if breakdown else ()),
        *native,
    )


@REGISTRY.command("context", "show the context window, the thresholds and where the chat stands")
def _context(ctx: ChatContext, argument: str) -> CommandResult:
    return CommandResult(lines=context_lines(ctx.session, ctx.window_source))


@REGISTRY.command(
    "compress",
    "compact the conversation now; optional instructions say what the summary must keep",
    usage="[instructions]",
    aliases=("compact",),
)
def _compress(ctx: ChatContext, argument: str) -> CommandResult:
    if not ctx.session.history:
        # Nothing to compact: answer at once rather than announce a compaction (the engine's
        # started event) that can only end as a no-op.
        return CommandResult(lines=("Nothing to compress: the history is empty",))
    ctx.session.compress(argument or None)
    # Started / succeeded / failed / skipped are shown by the event hook as they happen.
    return CommandResult(changed=True)


@REGISTRY.command("clear", "forget the conversation and start over (the session file keeps it)")
def _clear(ctx: ChatContext, argument: str) -> CommandResult:
    ctx.session.clear()
    if ctx.on_clear is not None:
        ctx.on_clear()
    return CommandResult(lines=("Conversation cleared.",), changed=True)


@REGISTRY.command(
    "model", "show the provider, model and window; /model NAME switches model", usage="[name]"
)
def _model(ctx: ChatContext, argument: str) -> CommandResult:
    if argument:
        if ctx.switch_model is None:
            return CommandResult(lines=("This chat cannot switch models.",))
        return CommandResult(lines=(ctx.switch_model(ctx, argument),), changed=True)
    window = ctx.session.context_window
    return CommandResult(
        lines=(
            f"Provider: {ctx.provider_name}",
            f"Model: {ctx.model}",
            f"Window: {format_tokens(window)} ({ctx.window_source}: "
            f"{WINDOW_SOURCES.get(ctx.window_source, ctx.window_source)})",
        )
    )


@REGISTRY.command("sessions", "list saved sessions (resume one with: autocompact chat --resume ID)")
def _sessions(ctx: ChatContext, argument: str) -> CommandResult:
    if ctx.shared_store is not None:
        return _stored_sessions(ctx, ctx.shared_store)
    if ctx.store is None:
        return CommandResult(lines=("Saving is off for this chat.",))
    summaries = ctx.store.list()[:10]
    if not summaries:
        return CommandResult(lines=("No saved sessions yet.",))
    lines = []
    for s in summaries:
        mark = "*" if s.header.id == ctx.session_id else " "
        lines.append(
            f"{mark} {s.header.id}  {s.updated}  {s.header.provider}/{s.header.model}  "
            f"{s.messages} msgs  {s.preview}"
        )
    return CommandResult(lines=tuple(lines))


def _stored_sessions(ctx: ChatContext, store: SharedStore) -> CommandResult:
    """The ten most recently updated sessions of the store the chat runs on."""
    listing = store.list_sessions()
    if not listing:
        return CommandResult(lines=(f"No sessions in {store.address} yet.",))
    lines = [f"Sessions in {store.address} (resume one with: --store ... --resume ID):"]
    for s in listing[:10]:
        mark = "*" if s.session_id == ctx.session_id else " "
        model = f"{s.meta.get('provider', '?')}/{s.meta.get('model', '?')}"
        lines.append(
            f"{mark} {s.session_id}  {s.updated}  {model}  {s.turns} turns  "
            f"{s.compactions} compactions"
        )
    if len(listing) > 10:
        lines.append(f"  … {len(listing) - 10} more: autocompact sessions list --store ...")
    return CommandResult(lines=tuple(lines))


@REGISTRY.command("quit", "save and leave (Ctrl-D does the same)", aliases=("exit",))
def _quit(ctx: ChatContext, argument: str) -> CommandResult:
    return CommandResult(quit=True)

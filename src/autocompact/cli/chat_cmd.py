"""``autocompact chat``: a terminal chat whose context compacts itself, saved as it goes.

Resolution order for each setting: the command line, then the resumed session's header (for
``--continue`` / ``--resume``, a session file's or a store's), then the settings files (user,
then project), then the environment (which provider has a key set; see
:func:`~autocompact.cli.provider_choice.choose`). The window's source is recorded as ``configured``
(``--window`` or a settings file), ``known`` (the model's published window), ``server``
(reported by the server) or ``assumed``.

Testing aid: ``--provider fake`` runs offline on the scripted fake provider. When the
environment variable ``AUTOCOMPACT_FAKE_SCRIPT`` names a JSON file, its replies are queued in
order (see :func:`load_fake_script`); it is read only with ``--provider fake``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from autocompact.chat import ChatSession
from autocompact.cli.calibrations import CalibrationMemory
from autocompact.cli.paths import data_dir, not_blank, secrets_in_env, settings_paths
from autocompact.cli.provider_choice import (
    ASSUMED_WINDOW,
    DEFAULT_MODELS,
    Choice,
    build_provider,
    choose,
)
from autocompact.cli.render import format_tokens
from autocompact.cli.repl import PipedInput, Repl, TerminalInput
from autocompact.cli.slash import ChatContext
from autocompact.cli.store_cmd import chat_store, read_stored, store_address
from autocompact.compaction import CompressionService, CompressionStatus
from autocompact.compaction.accounting import GrowthLog, growth_from_dict
from autocompact.content import portable_history
from autocompact.context_report import WindowSource
from autocompact.errors import (
    AutocompactError,
    ConfigError,
    ContentError,
    SessionFileError,
    SessionInUseError,
)
from autocompact.estimation import (
    Calibration,
)
from autocompact.sessions import (
    SavedSession,
    SessionHeader,
    SessionStore,
    SessionWriter,
    sanitize_url,
)
from autocompact.sessions.stores.binding import meta_of
from autocompact.settings import check_base_url, load_settings

__all__ = [
    "ASSUMED_WINDOW",
    "DEFAULT_MODELS",
    "data_dir",
    "register",
    "run_chat",
    "secrets_in_env",
]


# -- the command ---------------------------------------------------------------------------------


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``autocompact chat``."""
    p = subparsers.add_parser(
        "chat",
        help="chat with a model; the context compacts itself and the session is saved",
        description=(
            "Chat in the terminal. The conversation is compacted automatically as it fills the "
            "window, and saved so that --continue picks it up later. Type /help inside."
        ),
    )
    p.add_argument(
        "--provider",
        help="openai, anthropic, gemini, qwen, openai-compatible or fake (offline)",
    )
    p.add_argument("--model", type=not_blank("a model name"), help="the model name")
    p.add_argument(
        "--base-url", type=_base_url, help="the server's base URL (openai-compatible servers)"
    )
    p.add_argument("--window", help="the context window in tokens, e.g. 131072, 128k, 1m")
    p.add_argument("--system", help="the system instruction")
    p.add_argument(
        "--max-tokens",
        type=_positive_int,
        metavar="N",
        help="the output cap of each reply (default: the server's; a base model on a local "
        "server may otherwise write until the window is full)",
    )
    resume = p.add_mutually_exclusive_group()
    resume.add_argument(
        "--continue",
        dest="continue_",
        action="store_true",
        help="resume the latest session started in this directory",
    )
    resume.add_argument(
        "--resume",
        metavar="ID",
        type=not_blank("a session id (autocompact sessions list shows them)"),
        help="resume a saved session by id (or prefix)",
    )
    p.add_argument("--no-save", action="store_true", help="do not save this session")
    p.add_argument(
        "--timeout",
        type=_seconds,
        metavar="SECONDS",
        default=DEFAULT_TIMEOUT,
        help="how long each try of a request waits for the server to answer, or to go on "
        f"streaming (default {DEFAULT_TIMEOUT:.0f}); a request that times out is tried 3 times, "
        "then the turn fails; Ctrl-C cancels a turn at any time",
    )
    p.add_argument(
        "--store",
        metavar="ADDRESS",
        help="keep the session in sqlite:///path/sessions.db or postgresql://user@host/db, "
        "shared with other workers (default: $AUTOCOMPACT_STORE, else the JSONL files)",
    )
    p.set_defaults(handler=run_chat)


def _positive_int(text: str) -> int:
    """``--max-tokens``: a whole number of 1 or more."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of 1 or more, got {text!r}")
    return value


DEFAULT_TIMEOUT = 600.0
"""``--timeout``: the OpenAI and Anthropic SDKs' own default, given to every provider (the
Gemini SDK has none) so that the chat can say how long it waits."""


def _seconds(text: str) -> float:
    """``--timeout``: a number of seconds above 0 (``nan`` and ``inf`` are not)."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < 1e9:  # (false for nan too)
        raise argparse.ArgumentTypeError(
            f"expected a number of seconds above 0, e.g. 120, got {text!r}"
        )
    return value


def _base_url(text: str) -> str:
    """``--base-url``: http(s)://host..., with no space or control character in it."""
    try:
        return check_base_url(text, "--base-url")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--base-url ")) from None


def run_chat(args: argparse.Namespace) -> int:
    """Run ``autocompact chat``."""
    # The chat shows the settings' warnings and the provider's notices itself; their log records
    # (on autocompact.notices) would reach the terminal a second time through Python's
    # last-resort handler, logging being unconfigured.
    notices = logging.getLogger("autocompact.notices")
    notices.addFilter(_shown_by_the_chat)
    try:
        with contextlib.ExitStack() as held:  # the session's lock and store, however it ends
            return _chat(args, held)
    finally:
        notices.removeFilter(_shown_by_the_chat)


def _shown_by_the_chat(record: logging.LogRecord) -> bool:
    """A logging filter that drops every record (the chat prints them in its own words)."""
    return False


def _chat(args: argparse.Namespace, held: contextlib.ExitStack) -> int:
    env = os.environ
    home = data_dir(env)
    cwd = Path.cwd()
    settings = load_settings(settings_paths(home, cwd))
    for warning in settings.warnings:
        print(warning, file=sys.stderr)

    store = SessionStore(home / "sessions", redact=secrets_in_env(env))
    address = store_address(args)
    # --no-save writes nothing: a session resumed from a store is read from it, not bound to it.
    shared = chat_store(address, args, cwd) if address and not args.no_save else None
    if shared is not None:
        held.callback(shared[0].close)
    saved: SavedSession | None = None
    writer: SessionWriter | None = None
    save_warning: str | None = None
    stored: tuple[SavedSession, str] | None = None  # (a session read from a store, its address)
    if address and args.no_save:
        stored = read_stored(address, args, cwd)
        saved = stored[0] if stored is not None else None
    elif shared is None:
        saved, writer, save_warning = _resume(args, store, cwd)
        if writer is not None:
            held.callback(writer.close)
    header: SessionHeader | None = None
    where = resumed_from = ""  # resumed_from: the store a resumed session is read from
    if shared is not None:  # a stored session's meta stands in for a session file's header
        header, resumed_from = shared[2], shared[0].address
        where = f"session {shared[1]} in {resumed_from}"
    elif stored is not None:
        header, resumed_from = stored[0].header, stored[1]
        where = f"session {stored[0].id} in {resumed_from}"
    elif saved is not None:
        header, where = saved.header, str(saved.path)
    choice = choose(args, settings, env, home, header=header, where=where)
    provider, window, source, window_warning = build_provider(choice, env)

    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    console = Console(highlight=False, soft_wrap=not interactive)
    memory = CalibrationMemory(home)
    calibration = _calibration_of(saved)
    if calibration.samples == 0:
        # A new chat on a model seen before starts with what earlier chats learned about it.
        calibration = memory.load(choice.provider, provider.model) or calibration
    history = saved.history if saved is not None else ()
    if shared is not None:  # the first worker's meta stays; cwd lets --continue find it
        shared[0].ensure(
            shared[1],
            meta_of(
                provider=choice.provider,
                model=provider.model,
                context_window=window,
                window_source=source,
                system_instruction=choice.system,
                base_url=sanitize_url(choice.base_url),
                cwd=str(cwd),
            ),
        )
    hold_until, growth = _breaker_of(saved, window)
    session = ChatSession(
        provider,
        context_window=window,
        system_instruction=choice.system,
        history=history,
        # Never the saved count on a restore: it may be stale (written before a crash, or for
        # another model's window and tokenizer), so the first send takes the cold estimate
        # path of SPEC §4 and a long restored history compacts before it is sent. The saved
        # calibration may only raise that estimate (ChatSession applies it).
        last_prompt_token_count=0,
        calibration=calibration,
        consecutive_failures=saved.consecutive_failures if saved is not None else 0,
        hold_until=hold_until,
        growth=growth,
        image_token_estimate=settings.image_token_estimate,
        max_output_tokens=args.max_tokens,
        clear_tool_outputs=settings.tool_output_clearing,
        compression_service=CompressionService(
            provider, native_compaction=settings.native_compaction
        ),
        store=shared[0] if shared else None,
        session_id=shared[1] if shared else None,
    )
    saver = _Saver(
        store=None if args.no_save or shared else store,
        choice=choice,
        window=window,
        window_source=source,
        cwd=cwd,
        saved=saved,
        writer=writer,
    )
    held.callback(saver.close)  # (the writer of a new session, once it has one)
    ctx = ChatContext(
        session=session,
        provider_name=choice.provider,
        model=provider.model,
        window_source=source,
        store=None if args.no_save or shared else store,
        shared_store=shared[0] if shared else None,
        session_id=shared[1] if shared else saved.id if saved is not None else None,
        on_clear=saver.clear,
        timeout=None if choice.provider == "fake" else choice.timeout,
    )

    def persist(session: ChatSession, new_compactions: list[object]) -> None:
        saver.save(session, new_compactions)
        memory.save(choice.provider, session.provider.model, session.calibration)
        if shared is None:  # a store's session id is known from the start
            ctx.session_id = saver.session_id  # known once the first turn created the file
        for notice in saver.notices():
            console.print(f"Warning: {notice}", style="yellow", markup=False, highlight=False)

    repl = Repl(ctx, console=console, persist=persist, interactive=interactive)
    session.add_hook(repl.on_event)

    def switched(model: str, window: int, source: WindowSource) -> None:
        """Record the model the chat goes on with where the session is kept."""
        saver.switched(model, window, source)
        if shared is not None:  # the stored meta, as a session file's model record
            shared[0].record_model(
                shared[1],
                provider=choice.provider,
                model=model,
                context_window=window,
                window_source=source,
            )

    repl.on_window_learned = lambda window: switched(ctx.session.provider.model, window, "server")

    def switch_model(ctx: ChatContext, model: str) -> str:
        new = replace(choice, model=model)
        if new.window_source != "configured":
            new = replace(new, window=None, window_source="assumed")
        provider, window, source, warning = build_provider(new, env)
        old = ctx.session
        repl.persist()  # save what the old chat did before it is replaced
        ctx.session = ChatSession(
            provider,
            context_window=window,
            system_instruction=old.system_instruction,
            # A native compaction block of another provider or model family is replaced by
            # its summary text: it is never sent where it cannot be read.
            history=portable_history(
                old.history, provider=provider.name, family=getattr(provider, "family", None)
            ),
            # Another model counts tokens its own way: start from the cold estimate.
            last_prompt_token_count=0,
            consecutive_failures=old.consecutive_failures,
            image_token_estimate=old.image_token_estimate,
            max_output_tokens=old.max_output_tokens,
            clear_tool_outputs=old.clear_tool_outputs,
            compression_service=CompressionService(
                provider, native_compaction=old.compression.native_compaction
            ),
            hooks=(repl.on_event,),
            store=shared[0] if shared else None,
            session_id=shared[1] if shared else None,
        )
        ctx.model, ctx.window_source = provider.model, source
        switched(provider.model, window, source)
        line = (
            f"Now using {ctx.provider_name}/{provider.model} · window "
            f"{format_tokens(window)} ({source}) · about "
            f"{format_tokens(ctx.session.estimate_tokens())} tokens in use"
        )
        return f"{line}\nWarning: {warning}" if warning else line

    ctx.switch_model = switch_model
    if interactive:
        repl.source = TerminalInput(repl.footer)
    else:
        repl.source = PipedInput(sys.stdin)
    resumed = shared[1] if shared is not None and header is not None else saved
    _greet(console, ctx, resumed, resumed_from)
    for note in (window_warning, save_warning):
        if note:
            console.print(f"Warning: {note}", style="yellow", markup=False, highlight=False)
    if saved is not None:
        for message in saved.history:
            if message.role == "user" and message.text:
                repl.source.remember(message.text)
    code = repl.run()
    if shared is not None:
        console.print(
            f"Kept as {shared[1]} in {shared[0].address}. Resume with: autocompact chat "
            f"--store ... --resume {shared[1]}",
            style="dim",
            markup=False,
            highlight=False,
        )
        shared[0].close()
    elif args.no_save:
        if saved is not None:
            console.print(
                f"Not saved (--no-save): {saved.id} is as it was before this chat.",
                style="dim",
                markup=False,
                highlight=False,
            )
    elif saver.error is not None:
        console.print(
            f"Not saved: {saver.error}. The conversation above was kept in memory only.",
            style="red",
            markup=False,
            highlight=False,
        )
    elif saver.session_id is not None:
        console.print(
            f"Saved as {saver.session_id}. Resume with: autocompact chat --continue "
            f"(or --resume {saver.session_id})",
            style="dim",
            markup=False,
            highlight=False,
        )
    saver.close()
    return code


def _resume(
    args: argparse.Namespace, store: SessionStore, cwd: Path
) -> tuple[SavedSession | None, SessionWriter | None, str | None]:
    """The session to continue, its writer (holding its lock) and why it cannot be saved.

    The writer is opened before the chat starts, so a second chat on the same session is told
    at once that it is in use (:class:`SessionInUseError`), before anything is typed.
    """
    if not (args.resume or args.continue_):
        return None, None, None
    sid = args.resume
    if sid is None:
        latest = store.latest(cwd, strict=True)
        if latest is None:
            raise ConfigError(
                f"no saved session for {cwd} in {store.root}; start one with: autocompact chat",
                key="--continue",
            )
        sid = latest.header.id
    if args.no_save:
        return store.open(sid), None, None
    try:
        saved, writer = store.open_for_append(sid)
    except SessionInUseError:
        raise
    except SessionFileError as exc:
        saved = store.open(sid)  # readable but not writable: chat on, unsaved, and say so
        return saved, None, f"{exc}; this chat will not be saved until that is fixed"
    return saved, writer, None


def _greet(
    console: Console, ctx: ChatContext, resumed: SavedSession | str | None, store: str
) -> None:
    """The greeting, and what was resumed: a session file, or (``store``: its redacted
    address) a stored session, given by its id when the chat runs on that store."""
    session = ctx.session
    line = (
        f"autocompact chat · {ctx.provider_name}/{ctx.model} · window "
        f"{format_tokens(session.context_window)} ({ctx.window_source}) · /help for commands"
    )
    console.print(line, style="dim", markup=False, highlight=False)
    if resumed is None:
        return
    sid = resumed if isinstance(resumed, str) else resumed.id
    console.print(
        f"Resumed {sid}{f' from {store}' if store else ''}: {len(session.history)} messages, "
        f"about {format_tokens(session.estimate_tokens())} tokens.",
        style="dim",
        markup=False,
        highlight=False,
    )
    for warning in () if isinstance(resumed, str) else resumed.warnings:
        console.print(f"Warning: {warning}", style="yellow", markup=False, highlight=False)


# -- saving ----------------------------------------------------------------------------------


def _breaker_of(saved: SavedSession | None, window: int) -> tuple[int | None, GrowthLog | None]:
    """The saved hold and growth log, when the session continues on the window they were
    measured on (another window's counts say nothing about this one)."""
    if saved is None or saved.header.context_window != window:
        return None, None
    try:
        growth = growth_from_dict(saved.growth, "the saved session's field")
    except ContentError:  # a bad growth log is not worth refusing the session over
        growth = None
    return saved.hold_until, growth


def _calibration_of(saved: SavedSession | None) -> Calibration:
    if saved is None or saved.calibration is None:
        return Calibration()
    try:
        return Calibration.from_dict(saved.calibration)
    except Exception:  # a bad calibration is not worth refusing the session over
        return Calibration()


class _Saver:
    """Creates the session file on the first save with content, then appends to it."""

    def __init__(
        self,
        *,
        store: SessionStore | None,
        choice: Choice,
        window: int,
        window_source: WindowSource,
        cwd: Path,
        saved: SavedSession | None,
        writer: SessionWriter | None = None,
    ) -> None:
        self.store = store
        self.choice = choice
        self.window = window
        self.window_source = window_source
        self.cwd = cwd
        self.saved = saved
        self.writer: SessionWriter | None = writer
        self.error: AutocompactError | None = None  # the last save's failure, if it failed

    @property
    def session_id(self) -> str | None:
        if self.writer is not None:
            return self.writer.id
        return self.saved.id if self.saved is not None else None

    def _writer(self, session: ChatSession) -> SessionWriter | None:
        if self.writer is None and self.store is not None:
            if self.saved is not None:
                _, self.writer = self.store.open_for_append(self.saved.id)
            elif session.history or any(  # /compress on an empty chat is no session
                info.status != CompressionStatus.NOOP for info in session.compactions
            ):
                self.writer = self.store.create(
                    provider=self.choice.provider,
                    model=session.provider.model,
                    context_window=self.window,
                    cwd=self.cwd,
                    window_source=self.window_source,
                    system_instruction=self.choice.system,
                    base_url=self.choice.base_url,
                )
        return self.writer

    def save(self, session: ChatSession, new_compactions: list[object]) -> None:
        try:
            writer = self._writer(session)
            if writer is None:
                return
            writer.sync(
                session.history,
                new_compactions=new_compactions,
                last_prompt_token_count=session.last_prompt_token_count,
                consecutive_failures=session.consecutive_failures,
                calibration=session.calibration.to_dict() if session.calibration.samples else None,
                hold_until=session.hold_until,
                growth=session.growth.to_dict(),
            )
        except AutocompactError as exc:
            self.error = exc  # the chat goes on; the next save tries again
            raise
        self.error = None

    def notices(self) -> list[str]:
        """What the writer had to do on its own since the last call (a recreated file)."""
        if self.writer is None:
            return []
        out, self.writer.notices = self.writer.notices, []
        return out

    def clear(self) -> None:
        if self.writer is not None:
            self.writer.record_clear()

    def switched(self, model: str, window: int, source: WindowSource) -> None:
        """The chat moved to another model: new files start on it, open ones record it."""
        self.window, self.window_source = window, source
        if self.writer is not None:
            self.writer.record_model(
                provider=self.choice.provider,
                model=model,
                context_window=window,
                window_source=source,
            )

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


# -- providers -------------------------------------------------------------------------------

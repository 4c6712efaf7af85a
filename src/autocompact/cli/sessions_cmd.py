"""``autocompact sessions list | show ID | export ID --format openai|jsonl``: saved chats."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.markdown import Markdown

from autocompact.cli.listing import list_files
from autocompact.cli.paths import data_dir, not_blank, write_export
from autocompact.cli.render import format_tokens
from autocompact.cli.store_cmd import (
    run_store_export,
    run_store_import,
    run_store_list,
    run_store_show,
    store_address,
)
from autocompact.content import FunctionCallPart, FunctionResponsePart, Message, TextPart
from autocompact.errors import ConfigError
from autocompact.sessions import SessionStore, export_session
from autocompact.textsafe import for_terminal

__all__ = ["list_files", "register", "run_export", "run_import", "run_list", "run_show"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``autocompact sessions``."""
    p = subparsers.add_parser(
        "sessions",
        help="list, show or export saved chat sessions",
        description="Saved chat sessions (under $AUTOCOMPACT_HOME or the user data directory).",
    )
    sub = p.add_subparsers(dest="sessions_command", metavar="ACTION", required=True)
    ls = sub.add_parser(
        "list",
        help="list saved sessions, newest first",
        description="List saved sessions, newest first. A session file that cannot be read is "
        "named on stderr with the reason, one line each, and the others are listed; the exit "
        "status is then 1 (0 when every file was read).",
    )
    ls.add_argument("--all", action="store_true", help="not only the 20 newest")
    ls.set_defaults(handler=run_list)
    store_help = (
        "a session store: sqlite:///path/sessions.db or postgresql://user@host/db "
        "(default: $AUTOCOMPACT_STORE, else the JSONL files)"
    )
    ls.add_argument("--store", metavar="ADDRESS", help=store_help)
    show = sub.add_parser("show", help="print a session's conversation")
    show.add_argument("id", help="the session id (or a unique prefix)")
    show.set_defaults(handler=run_show)
    show.add_argument("--store", metavar="ADDRESS", help=store_help)
    export = sub.add_parser("export", help="write a session's history in an interchange format")
    export.add_argument("id", help="the session id (or a unique prefix)")
    export.add_argument(
        "--format",
        choices=("openai", "jsonl"),
        default="jsonl",
        help="openai: a JSON array of chat-completions messages; jsonl: one neutral message "
        "a line (default)",
    )
    export.add_argument(
        "-o", "--output", type=not_blank("a path"), help="write to this file instead of stdout"
    )
    export.set_defaults(handler=run_export)
    export.add_argument("--store", metavar="ADDRESS", help=store_help)
    export.add_argument(
        "--original",
        action="store_true",
        help="every turn as it was sent, summarized ones included (not the compacted history)",
    )
    imp = sub.add_parser(
        "import", help="copy saved JSONL sessions into a SQLite or PostgreSQL store"
    )
    imp.add_argument("ids", nargs="*", metavar="ID", help="the sessions to copy (default: all)")
    imp.add_argument("--store", metavar="ADDRESS", help=store_help, required=False)
    imp.add_argument(
        "--from",
        dest="source",
        type=not_blank("a path"),
        help="the JSONL directory (default: the usual one)",
    )
    imp.set_defaults(handler=run_import)


def _store() -> SessionStore:
    return SessionStore(data_dir() / "sessions")


def run_import(args: argparse.Namespace) -> int:
    """``sessions import``."""
    address = store_address(args)
    if address is None:
        raise ConfigError(
            "sessions import needs --store sqlite:///path or postgresql://... (or "
            "$AUTOCOMPACT_STORE)",
            key="--store",
        )
    source = args.source or str(data_dir() / "sessions")
    from pathlib import Path

    return run_store_import(args, address, Path(source))


def run_list(args: argparse.Namespace) -> int:
    """``sessions list``."""
    address = store_address(args)
    if address is not None:
        return run_store_list(args, address)
    return list_files(args, _store())


def _part_text(message: Message) -> str:
    pieces = []
    for part in message.parts:
        if isinstance(part, TextPart):
            pieces.append(part.text)
        elif isinstance(part, FunctionCallPart):
            pieces.append(f"`→ {part.name}({dict(part.arguments)})`")
        elif isinstance(part, FunctionResponsePart):
            pieces.append(f"`← {part.name}: {str(part.response)[:200]}`")
        else:
            pieces.append(f"[{part.kind}]")
    return for_terminal("\n\n".join(pieces))  # a stored reply drives no terminal sequence


def _tokens(value: object) -> str:
    """A compaction record's token count as :func:`format_tokens` writes it; ``?`` for what is
    not a finite number (a hand-edited file)."""
    try:
        return format_tokens(value)  # type: ignore[arg-type]  # it checks what it is given
    except ConfigError:
        return "?"


def run_show(args: argparse.Namespace) -> int:
    """``sessions show ID``."""
    address = store_address(args)
    if address is not None:
        return run_store_show(args, address)
    saved = _store().open(args.id)
    console = Console(highlight=False)
    h = saved.header
    console.print(
        f"{h.id} · {h.provider}/{h.model} · window {format_tokens(h.context_window)} · "
        f"started {h.created} in {h.cwd}",
        style="bold",
        markup=False,
    )
    for warning in saved.warnings:
        console.print(f"Warning: {warning}", style="yellow", markup=False)
    if h.system_instruction:
        console.print(f"system: {for_terminal(h.system_instruction)}", style="dim", markup=False)
    for c in saved.compactions:
        if c.get("status") == "compressed":
            console.print(
                f"(compacted {_tokens(c.get('original_token_count', 0))} → "
                f"{_tokens(c.get('new_token_count', 0))} tokens, {c.get('trigger')})",
                style="yellow",
                markup=False,
            )
    for message in saved.history:
        console.print(f"\n{message.role}:", style="bold cyan", markup=False)
        console.print(Markdown(_part_text(message)))
    return 0


def run_export(args: argparse.Namespace) -> int:
    """``sessions export ID --format openai|jsonl``."""
    address = store_address(args)
    if address is not None:
        return run_store_export(args, address)
    store = _store()
    if args.original:  # the session files are a store too: it keeps every turn as sent
        return run_store_export(args, f"jsonl://{store.root}")
    saved = store.open(args.id)
    text = export_session(saved, args.format)
    if args.output:
        write_export(Path(args.output), text, store.root)
    else:
        sys.stdout.write(text)
    return 0

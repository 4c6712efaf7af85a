"""``--store ADDRESS`` for ``chat`` and ``sessions``: sessions in SQLite or PostgreSQL.

``autocompact sessions list|show|export --store …`` read any store; ``sessions import --store …``
copies the JSONL session files (turns, compactions and clears, in order) into one.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

from autocompact.cli.listing import plain_cell
from autocompact.cli.paths import secrets_in_env, write_export
from autocompact.content import Message
from autocompact.errors import ConfigError, SessionStoreError
from autocompact.sessions import SessionHeader, export_session
from autocompact.sessions.records import SavedSession
from autocompact.sessions.stores import JsonlStore, SessionStore, Snapshot, SqliteStore, open_store
from autocompact.sessions.stores.address import parse_store_address
from autocompact.textsafe import for_terminal

__all__ = [
    "STORE_ENV",
    "chat_store",
    "open_existing",
    "read_stored",
    "resolve_id",
    "run_store_export",
    "run_store_import",
    "run_store_list",
    "run_store_show",
    "store_address",
]

STORE_ENV = "AUTOCOMPACT_STORE"
"""The environment variable read when ``--store`` is not given (keeps passwords off argv)."""


def store_address(args: argparse.Namespace) -> str | None:
    """``--store``, else ``$AUTOCOMPACT_STORE``, else ``None`` (the JSONL files)."""
    given = getattr(args, "store", None)
    if isinstance(given, str) and not given.strip():  # issue 27: --store '' is refused
        parse_store_address(given, shown=repr(given))
    return given or os.environ.get(STORE_ENV) or None


def chat_store(
    address: str, args: argparse.Namespace, cwd: Path
) -> tuple[SessionStore, str, SessionHeader | None]:
    """The store and session id ``autocompact chat --store`` runs on (new, resumed by id or a
    unique prefix of it, continued), and a resumed session's header, made of the meta the store
    keeps (the provider, model, configured window and system instruction it started with, or
    the last model a ``/model`` switched to)."""
    # The API keys in the environment are redacted in every backend, as in the JSONL files.
    store = open_store(address, redact=secrets_in_env())
    session_id = _to_resume(store, args, cwd)
    if session_id is None:
        from autocompact.sessions.store import _new_id

        return store, _new_id(), None
    snapshot = store.load(session_id)
    return store, session_id, _header(snapshot)


def read_stored(
    address: str, args: argparse.Namespace, cwd: Path
) -> tuple[SavedSession, str] | None:
    """The session ``autocompact chat --no-save --store … --resume ID`` (or ``--continue``)
    continues, read from the store and held in memory: nothing is written to the store, nor
    created (a store that does not exist is an error), and the store's address (password
    hidden); ``None`` when no session is resumed. The session's ``path`` is empty: it lives in
    the store, not in a file.
    """
    if not (args.resume or args.continue_):
        return None
    store = open_existing(address)
    try:
        session_id = _to_resume(store, args, cwd)
        assert session_id is not None
        snapshot = store.load(session_id)
    finally:
        store.close()
    saved = SavedSession(
        header=_header(snapshot),
        path=Path(),
        history=snapshot.history,
        consecutive_failures=snapshot.consecutive_failures,
        calibration=snapshot.calibration,
        hold_until=snapshot.hold_until,
        growth=snapshot.growth,
    )
    return saved, store.address


def _to_resume(store: SessionStore, args: argparse.Namespace, cwd: Path) -> str | None:
    """The id of the session ``--resume`` (an id or a unique prefix of one) or ``--continue``
    (the latest started in ``cwd``) names in ``store``; ``None`` for a new chat."""
    if args.resume:
        return resolve_id(store, args.resume)
    if not args.continue_:
        return None
    here = str(cwd)
    latest = next((s for s in store.list_sessions() if s.meta.get("cwd") == here), None)
    if latest is None:
        raise ConfigError(
            f"no session for {cwd} in {store.address}; start one with: autocompact chat "
            "--store ...",
            key="--continue",
        )
    return latest.session_id


def _header(snapshot: Snapshot) -> SessionHeader:
    """A session file's header made of what a store keeps of the session (its meta)."""
    meta = snapshot.meta

    def text(key: str) -> str | None:
        value = meta.get(key)
        return value if isinstance(value, str) else None

    return SessionHeader(
        id=snapshot.session_id,
        created=snapshot.created,
        cwd=text("cwd") or "",
        provider=text("provider") or "",
        model=text("model") or "",
        # As stored: a resumed chat reads a configured one with parse_window, which names it.
        context_window=meta.get("context_window", 0),
        window_source=text("window_source"),
        system_instruction=text("system_instruction"),
        base_url=text("base_url"),
    )


def _saved(snapshot: Snapshot, history: tuple[Message, ...]) -> SavedSession:
    header = _header(snapshot)
    try:
        window = int(header.context_window or 0)
    except (TypeError, ValueError):  # a hand-edited row: the export does not need it
        window = 0
    return SavedSession(header=replace(header, context_window=window), path=Path(), history=history)


def open_existing(address: str) -> SessionStore:
    """The store at ``address`` for a command that only reads: a SQLite file or a JSONL folder
    that does not exist is an error, never created (nor its folders); nor is a SQLite file
    that holds no session store (another program's database, an empty file) changed.

    Raises:
        SessionStoreError: the store does not exist.
    """
    store = open_store(address, create=False)
    if isinstance(store, SqliteStore):
        _check_holds_sessions(store)
    return store


def _check_holds_sessions(store: SqliteStore) -> None:
    """Refuse a SQLite file without autocompact's tables: opening it as a store would add them
    (and switch it to WAL). A file this cannot read is left to the store to name."""
    try:
        conn = sqlite3.connect(f"{store.path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            found = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'ac_sessions'"
            ).fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return
    if found is None:
        raise SessionStoreError(
            f"{store.path} holds no autocompact sessions (it is empty or another program's "
            "database); check the path — reading a store never changes one",
            store=store.address,
        )


def resolve_id(store: SessionStore, session_id: str) -> str:
    """The full id of a session in ``store`` given by its id or a unique prefix of it.

    Raises:
        SessionStoreError: no session, or several, match.
    """
    if store.exists(session_id):
        return session_id
    matches = sorted(
        s.session_id for s in store.list_sessions() if s.session_id.startswith(session_id)
    )
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise SessionStoreError(
            f"no session {session_id!r:.80} in {store.address}; `autocompact sessions list "
            "--store ...` shows the ids",
            store=store.address,
            session_id=session_id,
        )
    raise SessionStoreError(
        f"{session_id!r:.80} matches {len(matches)} sessions ({', '.join(matches[:5])}); "
        "give more of the id",
        store=store.address,
        session_id=session_id,
    )


def run_store_list(args: argparse.Namespace, address: str) -> int:
    """``sessions list --store``."""
    store = open_existing(address)
    if isinstance(store, JsonlStore):  # the files: name the unreadable ones (as without --store)
        from autocompact.cli.listing import list_files
        from autocompact.sessions import SessionStore as JsonlDirectory

        return list_files(args, JsonlDirectory(store.root))
    listing = store.list_sessions()
    console = Console(highlight=False)
    if not listing:
        console.print(f"No sessions in {store.address}.", markup=False)
        return 0
    table = Table(box=None, pad_edge=False)
    for column in ("id", "updated", "provider/model", "turns", "compactions"):
        table.add_column(column, overflow="fold", no_wrap=column == "id")
    for s in listing if args.all else listing[:20]:
        cells = (
            s.session_id,
            s.updated,
            f"{s.meta.get('provider', '?')}/{s.meta.get('model', '?')}",
            s.turns,
            s.compactions,
        )
        table.add_row(*map(plain_cell, cells))
    console.print(table)
    return 0


def run_store_show(args: argparse.Namespace, address: str) -> int:
    """``sessions show ID --store``: the live history, and what was replaced."""
    store = open_existing(address)
    session_id = resolve_id(store, args.id)
    snapshot = store.load(session_id)
    entries = store.entries(session_id)
    replaced = sum(1 for e in entries if e.replaced_by is not None and e.kind == "turn")
    console = Console(highlight=False)
    meta = snapshot.meta
    console.print(
        f"{snapshot.session_id} · {meta.get('provider', '?')}/{meta.get('model', '?')} · "
        f"{sum(1 for e in entries if e.kind == 'turn')} turns, {replaced} replaced by summaries "
        f"(export --original shows them) · breaker count {snapshot.consecutive_failures}",
        style="bold",
        markup=False,
    )
    for message in snapshot.history:
        console.print(f"\n{message.role}:", style="bold cyan", markup=False)
        shown = message.text or f"[{', '.join(p.kind for p in message.parts)}]"
        console.print(for_terminal(shown), markup=False)  # a stored reply drives no sequence
    return 0


def run_store_export(args: argparse.Namespace, address: str) -> int:
    """``sessions export ID --store [--original]``."""
    store = open_existing(address)
    session_id = resolve_id(store, args.id)
    snapshot = store.load(session_id)
    if getattr(args, "original", False):
        history = tuple(
            m for e in store.entries(session_id) if e.kind == "turn" for m in e.messages
        )
    else:
        history = snapshot.history
    text = export_session(_saved(snapshot, history), args.format)
    if args.output:
        sessions = Path(store.root) if isinstance(store, JsonlStore) else None
        write_export(Path(args.output), text, sessions)
    else:
        sys.stdout.write(text)
    return 0


def run_store_import(args: argparse.Namespace, address: str, source: Path) -> int:
    """``sessions import [ID ...] --store``: copy JSONL sessions, all or nothing per session."""
    from autocompact.cli.store_import import run_import_into  # issue 27

    return run_import_into(address, source, args.ids)

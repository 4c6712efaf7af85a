"""``sessions import --store``: copy JSONL sessions into a store, all or nothing per session.

Each session is read and planned whole before anything is written: its turns (messages
grouped at each user text), compactions and clears, in order; every turn is checked against
the target store's per-turn limit and the JSON it will be written as. A session with a turn the
store would refuse is reported and not imported at all, so a rerun never finds a partial
session and skips the rest of it (issue 27); a session a failed write interrupted (the database
went away) is finished by the next run, which writes what is missing in order (turns are
idempotent by their ``import-N`` ids). A missing ``--from`` directory is an error.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from autocompact.cli.paths import secrets_in_env
from autocompact.content import Message
from autocompact.errors import AutocompactError, ConfigError, SessionFileError
from autocompact.sendcheck import store_turn_limit
from autocompact.sessions import SessionStore as JsonlDirectory
from autocompact.sessions.stores import JsonlStore, SessionStore, open_store
from autocompact.sessions.stores.base import check_turn_size

__all__ = ["ImportStep", "import_sessions", "plan_import", "run_import_into"]


@dataclass(frozen=True, kw_only=True)
class ImportStep:
    """One write of an import: a turn, a compaction's history, or a clear."""

    kind: Literal["turn", "summary", "clear"]
    messages: tuple[Message, ...] = ()


def plan_import(files: JsonlStore, sid: str) -> list[ImportStep]:
    """The writes that copy one JSONL session, in order (nothing is written)."""
    steps: list[ImportStep] = []
    pending: list[Message] = []
    for entry in (*files.entries(sid), None):
        starts_turn = (
            entry is None
            or entry.kind != "turn"
            or (entry.messages[0].role == "user" and bool(entry.messages[0].text))
        )
        if starts_turn and pending:
            steps.append(ImportStep(kind="turn", messages=tuple(pending)))
            pending = []
        if entry is None:
            break
        if entry.kind == "turn":
            pending.append(entry.messages[0])
        else:
            steps.append(ImportStep(kind=entry.kind, messages=entry.messages))
    return steps


def _check(steps: list[ImportStep], target: SessionStore, sid: str) -> None:
    """Raise the store's own error for the first turn it would refuse (before any write)."""
    limit = store_turn_limit(target)
    if limit is None:
        return
    for step in steps:
        if step.kind == "turn":
            check_turn_size(step.messages, limit, target.address, sid)


def _written(steps: list[ImportStep], target: SessionStore, sid: str) -> int | None:
    """How many of ``steps`` an earlier, interrupted import of ``sid`` wrote, in order;
    ``None`` when the stored session is not a prefix of this import (a chat's, or another
    file's): it is then left alone."""
    entries = target.entries(sid)
    if len(entries) > len(steps):
        return None
    turns = 0
    for step, entry in zip(steps, entries, strict=False):
        if entry.kind != step.kind:
            return None
        if step.kind == "turn":
            if entry.turn_id != f"import-{turns}":
                return None
            turns += 1
    return len(entries)


def _write(steps: list[ImportStep], target: SessionStore, sid: str, start: int = 0) -> int:
    """Write ``steps[start:]``; the number of turns the session then holds from the import."""
    n = sum(1 for step in steps[:start] if step.kind == "turn")
    for step in steps[start:]:
        if step.kind == "turn":
            target.append_turn(sid, f"import-{n}", step.messages)
            n += 1
        elif step.kind == "summary":
            info = {"status": "compressed", "trigger": "import", "new_token_count": 0}
            target.commit_compaction(target.load(sid), step.messages, info, owner="import")
        else:
            target.clear(sid, owner="import")
    return n


def run_import_into(address: str, source: Path, ids: list[str] | None) -> int:
    """Import the sessions ``ids`` (default: all) from ``source`` into ``address``; the exit
    code: 0 all imported or skipped, 1 when a session could not be imported or a session file
    could not be read.

    Raises:
        ConfigError: ``source`` is not a directory.
    """
    if not source.is_dir():
        raise ConfigError(
            f"--from {source}: {'not a directory' if source.exists() else 'no such directory'}; "
            "give the directory that holds the JSONL session files",
            key="--from",
        )
    return import_sessions(JsonlStore(source), open_store(address, redact=secrets_in_env()), ids)


def import_sessions(files: JsonlStore, target: SessionStore, ids: list[str] | None) -> int:
    """Copy the sessions ``ids`` (default: all) of ``files`` into ``target``, each planned and
    checked whole first; an import interrupted by a failed write is finished by the next run
    (it writes what is missing, in order). Prints a line per session, and, as ``sessions
    list`` does, a ``Warning:`` line on stderr for each file of the directory that cannot be
    read (the file and why); returns the exit code (1 when a session was not imported or a
    file could not be read)."""
    problems: list[SessionFileError] = []
    wanted = ids or [s.header.id for s in JsonlDirectory(files.root).list(problems=problems)]
    for problem in problems:
        print(f"Warning: not imported: {' '.join(str(problem).split())}", file=sys.stderr)
    imported = skipped = failed = 0
    for sid in wanted:
        try:
            steps = plan_import(files, sid)
            start = 0
            if target.exists(sid) and target.entries(sid):
                done = _written(steps, target, sid)
                if done is None or done == len(steps):
                    print(f"{sid}: already in {target.address}, skipped")
                    skipped += 1
                    continue
                print(f"{sid}: finishing an interrupted import ({done} of {len(steps)} written)")
                start = done
            _check(steps[start:], target, sid)
        except AutocompactError as exc:
            print(f"{sid}: not imported, nothing was written: {exc}")
            failed += 1
            continue
        try:
            target.ensure(sid, files.load(sid).meta)
            n = _write(steps, target, sid, start)
        except AutocompactError as exc:
            print(f"{sid}: interrupted: {exc}; run the import again to finish it")
            failed += 1
            continue
        imported += 1
        print(f"{sid}: {n} turns imported")
    print(
        f"{imported} imported, {skipped} skipped"
        + (f", {failed} not imported" if failed else "")
        + (f", {len(problems)} file(s) could not be read (named above)" if problems else "")
        + f", into {target.address}"
    )
    return 1 if failed or problems else 0

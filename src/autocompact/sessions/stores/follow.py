"""Following a session file: read only what was appended since the last read.

A :class:`Tail` is what a reader has replayed of one session file: its inode, how many bytes
(whole lines) it has read, the state they left and the history as store entries. :func:`read_on`
reads and replays only the lines appended since; it gives up (the caller reads the file whole)
when the file was replaced (a repair, a recreation), ends in a line being written or a crash's
remnant, or holds records other than the plain ones a store writes.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

from autocompact.content import Message
from autocompact.errors import SessionFileError
from autocompact.sessions.records import (
    ReplayState,
    SavedSession,
    SessionHeader,
    info_succeeded,
    replay_records,
)
from autocompact.sessions.stores.base import Entry, JsonDict, Snapshot

__all__ = ["Tail", "read_on", "snapshot_of", "tail_of"]

_FOLLOWED = frozenset({"message", "state", "compaction", "clear"})
"""The records a follower replays itself; any other kind makes it read the file whole."""


@dataclass(kw_only=True)
class Tail:
    """What this process has replayed of one session file: its first ``offset`` bytes
    (``lines`` whole lines), the state they left and the history as entries."""

    path: Path
    inode: int
    offset: int
    lines: int
    header: SessionHeader
    state: ReplayState
    entries: list[Entry]
    clean: bool = True  # the file ended at ``offset`` when it was last read
    snapshot: Snapshot | None = None


def read_on(tail: Tail) -> bool:
    """Replay what was appended to the file since ``tail``; ``False``: read it whole."""
    try:
        with tail.path.open("rb") as f:
            if os.fstat(f.fileno()).st_ino != tail.inode or not tail.clean:
                return False
            f.seek(tail.offset)
            data = f.read()
    except OSError:
        return False
    if not data:
        return True
    if not data.endswith(b"\n"):
        return False  # a line being written, or a crash's remnant: read whole
    try:
        records = [json.loads(line) for line in data.splitlines()]
    except (ValueError, RecursionError):
        return False
    if not all(isinstance(r, dict) and r.get("type") in _FOLLOWED for r in records):
        return False
    state, history = tail.state, tail.state.history
    try:
        replay_records(records, tail.path, state, first_line=tail.lines + 1)
    except SessionFileError:
        return False
    if state.history is history:
        tail.entries.extend(_turn(len(tail.entries) + 1, m) for m in history[len(tail.entries) :])
    else:  # a compaction or a clear replaced the history
        tail.entries = [_turn(i + 1, m) for i, m in enumerate(state.history)]
    tail.offset += len(data)
    tail.lines += len(records)
    tail.snapshot = None
    return True


def tail_of(saved: SavedSession, inode: int, data: bytes) -> Tail:
    """The follower of a file read whole (``data``: its bytes, read at least as far as
    ``saved``; ``inode``: the file they were read from)."""
    offset = 0
    for _ in range(saved.good_lines):
        offset = data.find(b"\n", offset) + 1
        if offset == 0:
            break
    state = ReplayState(
        history=list(saved.history),
        last_prompt_token_count=saved.last_prompt_token_count,
        consecutive_failures=saved.consecutive_failures,
        calibration=saved.calibration,
        compactions=list(saved.compactions),
        hold_until=saved.hold_until,
        turn_ids=dict(saved.turn_ids),
        clears=saved.clears,
        growth=saved.growth,
    )
    return Tail(
        path=saved.path,
        inode=inode,
        offset=offset,
        lines=saved.good_lines,
        header=saved.header,
        state=state,
        entries=[_turn(i + 1, m) for i, m in enumerate(saved.history)],
        clean=offset == len(data) and not saved.damaged,
    )


def _turn(seq: int, message: Message) -> Entry:
    return Entry(seq=seq, pos=seq, kind="turn", turn_id=None, messages=(message,))


def snapshot_of(tail: Tail) -> Snapshot:
    """A session file as a store snapshot: one entry per message; the epoch counts the
    successful compactions and the clears (what the compare-and-swap compares)."""
    state = tail.state
    entries = tuple(tail.entries)
    if entries and state.last_prompt_token_count > 0:
        usage = {"prompt_tokens": state.last_prompt_token_count, "since": 0}
        entries = (*entries[:-1], replace(entries[-1], usage=usage))
    return Snapshot(
        session_id=tail.header.id,
        meta=_meta(tail.header),
        entries=entries,
        epoch=sum(1 for c in state.compactions if info_succeeded(c)) + state.clears,
        last_seq=len(entries),
        consecutive_failures=state.consecutive_failures,
        calibration=state.calibration,
        hold_until=state.hold_until,
        growth=state.growth,
        created=tail.header.created,
    )


def _meta(h: SessionHeader) -> JsonDict:
    return {
        key: value
        for key, value in (
            ("provider", h.provider),
            ("model", h.model),
            ("context_window", h.context_window),
            ("window_source", h.window_source),
            ("system_instruction", h.system_instruction),
            ("base_url", h.base_url),
            ("cwd", h.cwd),
        )
        if value is not None
    }

"""Saved chat sessions: versioned, append-only JSONL files that survive a crash. Stdlib only.

This module owns the on-disk form of a session and nothing else (the directory is chosen by the
caller; the CLI passes the platform's user data directory). One file per session,
``<id>.jsonl``; the first line is a header, every later line one record::

    {"type": "header", "schema": 1, "id": "...", "created": "...", "cwd": "...",
     "provider": "...", "model": "...", "context_window": 131072, ...}
    {"type": "message", "message": {"role": "user", "parts": [...]}}
    {"type": "state", "last_prompt_token_count": 1234, "consecutive_failures": 0,
     "calibration": null}
    {"type": "compaction", "info": {...}, "history": [...]}   # success: the new history
    {"type": "compaction", "info": {...}}                     # failure: history unchanged
    {"type": "clear"}
    {"type": "model", "provider": "...", "model": "...", "context_window": 200000,
     "window_source": "known"}                                # /model: later fields win

Replaying the records in order rebuilds the history: ``message`` appends, a successful
``compaction`` replaces the history with the one it carries, ``clear`` empties it.

Crash safety: each append is one ``os.write`` of whole lines followed by ``fsync``, so a crash
loses at most the turn being written. On load a truncated last line is dropped with a warning
(and an unanswered user message left before it, the turn in progress); every complete turn is
kept. Before a damaged file is rewritten for appending, a ``.bak`` copy is kept. Files are
created with mode 0600 inside a 0700 directory. No secret is ever written: the header holds no
credential, and every string given in ``redact`` is replaced before a line reaches the disk.

Schema versions: this build reads version :data:`SCHEMA_VERSION`; older versions are upgraded
in memory by the ordered ``_MIGRATIONS``; newer ones raise :class:`SessionFileError`.
"""

from __future__ import annotations

from autocompact.sessions.records import (
    SCHEMA_VERSION,
    ExportFormat,
    SavedSession,
    SessionHeader,
    SessionSummary,
    export_session,
    load_session,
    sanitize_url,
)
from autocompact.sessions.store import SessionStore, SessionWriter

__all__ = [
    "SCHEMA_VERSION",
    "ExportFormat",
    "SavedSession",
    "SessionHeader",
    "SessionStore",
    "SessionSummary",
    "SessionWriter",
    "export_session",
    "load_session",
    "sanitize_url",
]

"""Session file locking and header peeking (stdlib only; POSIX ``fcntl``).

One lock per session file, ``<id>.jsonl.lock`` beside it (not the file itself: a repair replaces
the file through ``os.replace``, which would drop a lock held on it). The lock file holds the
holder's pid, so the second chat can say which process has the session.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import time
from pathlib import Path

from autocompact.errors import SessionFileError, SessionInUseError

__all__ = ["header_cwd", "lock_session", "open_append", "unlock"]


def open_append(path: Path) -> int:
    try:
        return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError as exc:
        raise SessionFileError(
            f"cannot open for writing: {exc.strerror or exc} (check the file's permissions)",
            path=str(path),
        ) from exc


def lock_session(path: Path, *, wait: float = 0.0) -> int:
    """Take the exclusive lock of a session file (``<file>.lock``); returns the lock's fd.

    Args:
        path: the session file.
        wait: seconds to keep trying while another process holds it (0: fail at once). The
            session stores hold it for one write at a time, so they wait; a chat holds it for
            its whole life, so a second chat is told at once.

    Raises:
        SessionInUseError: another process (or writer) holds it: the session is in use.
        SessionFileError: the lock file cannot be created.
    """
    lock_path = path.with_name(path.name + ".lock")
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise SessionFileError(
            f"cannot create the session's lock file {lock_path.name}: {exc.strerror or exc}",
            path=str(path),
        ) from exc
    deadline = time.monotonic() + wait
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(random.uniform(0.0005, 0.003))
    except OSError:
        holder = os.read(fd, 32).decode("ascii", "replace").strip()
        os.close(fd)
        by = f" (process {holder})" if holder.isdigit() else ""
        raise SessionInUseError(
            f"this session is in use by another autocompact chat{by}: two chats writing one "
            "session would interleave their turns. Finish the other chat first, or start a "
            "new session (autocompact chat without --continue)",
            path=str(path),
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode("ascii"), 0)
    return fd


def unlock(fd: int) -> None:
    try:
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def header_cwd(path: Path) -> str | None:
    """The ``cwd`` of a session file's header line, read without the rest (``None``: unknown)."""
    try:
        with path.open("rb") as f:
            first = f.readline(1 << 20)
        data = json.loads(first.decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    cwd = data.get("cwd") if isinstance(data, dict) else None
    return cwd if isinstance(cwd, str) else None

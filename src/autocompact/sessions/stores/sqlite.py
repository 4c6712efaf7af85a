"""The SQLite backend (standard library ``sqlite3``, WAL): the default for one machine.

Many processes share one database file: WAL lets readers go on while one writer writes;
every write is a ``BEGIN IMMEDIATE`` transaction (the database's write lock, taken up front so
two writers never deadlock on an upgrade) committed with ``synchronous=FULL``, so a turn is on
disk when :meth:`append_turn` returns. The file is created with mode 0600.
"""

from __future__ import annotations

import contextlib
import os
import random
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from autocompact.errors import SessionStoreError
from autocompact.filemodes import make_private_dirs
from autocompact.sessions.stores.address import readable_read_only
from autocompact.sessions.stores.schema import SQLITE
from autocompact.sessions.stores.sql import Cursor, SqlStore

__all__ = ["READ_ONLY_HINT", "SqliteStore"]

READ_ONLY_HINT = " (or add ?mode=ro to only read it)"
"""What the error of a file that cannot be opened adds for a store that could be read only (a
writer, such as ``autocompact serve``, leaves it out)."""

_BUSY_SECONDS = 30.0


class SqliteStore(SqlStore):
    """Sessions in one SQLite database file.

    Args:
        path: the database file (created, with its directory, on first use).
        read_only: open without writing (``sqlite:///path?mode=ro``).
        **options: see :class:`~autocompact.sessions.stores.sql.SqlStore`.
    """

    def __init__(self, path: str | os.PathLike[str], *, read_only: bool = False, **options: Any):
        self.path = Path(path)
        suffix = "?mode=ro" if read_only else ""
        super().__init__(f"sqlite:///{self.path}{suffix}", **options)
        self.read_only = read_only
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        if not self.read_only and not self.path.exists():
            self._create_file()
        try:
            mode = "ro" if self.read_only else "rwc"
            conn = sqlite3.connect(
                f"file:{self.path}?mode={mode}",
                uri=True,
                timeout=_BUSY_SECONDS,
                isolation_level=None,
                check_same_thread=False,
            )
            if self.read_only:  # issue 27: a store nobody here can write is read as immutable
                conn = readable_read_only(conn, self.path, _BUSY_SECONDS)
            if not self.read_only:
                conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
        except (sqlite3.Error, OSError) as exc:
            raise self._error(exc) from None
        self._conn = conn
        return conn

    def _create_file(self) -> None:
        """Create the database file (0600) and its missing folders (0700).

        Raises:
            SessionStoreError: the file's folder cannot be written (or made): said so, since
                the file did not exist and no ``?mode=ro`` was given.
        """
        try:
            make_private_dirs(self.path.parent)  # issue 27: parents 0700 too
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
        except OSError as exc:
            folder = self.path.parent  # the nearest one there is: the one that refused
            while not folder.exists() and folder != folder.parent:
                folder = folder.parent
            why = (
                f"the folder {folder} cannot be written ({exc.strerror or exc}); give --store a "
                "file in a folder you can write to, or fix that folder's permissions"
                if folder.is_dir()
                else f"{folder} is not a folder ({exc.strerror or exc}); check that its "
                "directory exists, or give --store another path"
            )
            raise SessionStoreError(
                f"cannot create the SQLite database {self.path}: {why}", store=self.address
            ) from None

    @contextlib.contextmanager
    def _transaction(self, *, write: bool) -> Iterator[Cursor]:
        with self._lock:
            conn = self._connection()
            try:
                if write:
                    self._begin_immediate(conn)
                else:
                    conn.execute("BEGIN")
            except sqlite3.Error as exc:
                raise self._error(exc) from None
            try:
                yield conn.cursor()
                conn.execute("COMMIT")
            except BaseException as exc:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise self._error(exc) from None
                raise

    def _begin_immediate(self, conn: sqlite3.Connection) -> None:
        """Take the write lock, retrying every 0.5–3 ms for up to 30 s.

        SQLite's own busy handler backs off to 100 ms sleeps, so under contention a waiter
        could sleep through many short writes in a row (seconds at p99 with 8 writers); short,
        jittered retries keep the wait close to the queue in front of it.
        """
        deadline = time.monotonic() + _BUSY_SECONDS
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            while True:
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    return
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or time.monotonic() > deadline:
                        raise
                time.sleep(random.uniform(0.0005, 0.003))
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(_BUSY_SECONDS * 1000)}")

    dialect = SQLITE

    def _error(self, exc: BaseException) -> SessionStoreError:
        text = str(exc)
        lowered = text.lower()
        if "readonly" in lowered or "read-only" in lowered or isinstance(exc, PermissionError):
            what = (
                f"the SQLite database {self.path} is read-only ({text}); open it without "
                "?mode=ro to write to it"
                if self.read_only
                else f"the SQLite database {self.path} cannot be written ({text}); fix the "
                f"permissions of the file and of its folder {self.path.parent} (SQLite writes "
                "its -wal and -shm files beside it), or add ?mode=ro to only read it"
            )
        elif "locked" in lowered or "busy" in lowered:
            what = (
                f"the SQLite database {self.path} stayed locked for {_BUSY_SECONDS:.0f} s "
                f"({text}); another process holds a long write, try again"
            )
        elif "unable to open" in lowered or isinstance(exc, OSError):
            what = (
                f"cannot open the SQLite database {self.path} ({text}); check that its "
                "directory exists and is writable" + ("" if self.read_only else READ_ONLY_HINT)
            )
        elif "not a database" in lowered or "malformed" in lowered:
            what = (
                f"{self.path} is not a usable SQLite database ({text}); point --store at "
                "another file, or restore it from a backup"
            )
        elif "disk" in lowered or "full" in lowered:
            what = f"cannot write the SQLite database {self.path} ({text}); free some disk space"
        else:
            what = f"the SQLite database {self.path} failed: {text}"
        return SessionStoreError(what, store=self.address)

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

"""Store addresses, parsed before any store is opened (issue 27: stores that lie).

:func:`parse_store_address` turns what ``--store`` or ``open_store`` was given into a
:class:`StoreAddress` — which kind of store and where — or a :class:`SessionStoreError` saying
what is wrong with it. It never opens or creates anything; with ``create=False`` (the read-only
commands: ``sessions list|show|export --store``) it refuses a SQLite file or a JSONL directory
that does not exist instead of letting the store create an empty one.

The forms:

- ``sqlite:///abs/path.db`` and ``sqlite:////abs/path.db``: an absolute path;
  ``sqlite:relative/path.db``: a path relative to the current directory (before, this became a
  JSONL directory named ``sqlite:relative``); ``?mode=ro`` opens it read-only;
- ``postgresql://…`` / ``postgres://…``; ``postgresql:…`` without ``//`` is refused;
- a plain path ending in ``.db``, ``.sqlite`` or ``.sqlite3``: a SQLite file, as
  ``sqlite:`` + the path (before, it became a JSONL directory named ``x.db``); one that is an
  existing directory (the JSONL sessions such a path made before) is refused, naming
  ``jsonl:///`` to keep reading it;
- ``jsonl:///path`` or another plain path: a directory of JSONL session files;
- an empty or blank address is refused (``--store ''`` used to mean the JSONL files silently).
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from typing import Literal

from autocompact.errors import SessionStoreError

__all__ = ["SQLITE_SUFFIXES", "StoreAddress", "parse_store_address", "readable_read_only"]

_FORMS = "use sqlite:///path/to/sessions.db, postgresql://user@host/db, or a directory"
SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
"""A plain path ending in one of these names a SQLite file, not a JSONL directory."""


@dataclass(frozen=True, kw_only=True)
class StoreAddress:
    """What an address names.

    Attributes:
        kind: ``sqlite``, ``postgresql`` or ``jsonl``.
        location: the SQLite file or JSONL directory; the address itself for PostgreSQL.
        read_only: ``?mode=ro`` was given (SQLite).
    """

    kind: Literal["sqlite", "postgresql", "jsonl"]
    location: str
    read_only: bool = False


def parse_store_address(address: object, *, shown: str, create: bool = True) -> StoreAddress:
    """Parse ``address`` (``shown``: the same with its password redacted, for errors).

    Args:
        address: what ``--store`` / ``$AUTOCOMPACT_STORE`` / ``open_store`` was given.
        shown: the address as errors may show it.
        create: ``False`` for read-only use: a SQLite file or JSONL directory that does not
            exist is an error (nothing is created).

    Raises:
        SessionStoreError: empty, malformed, of no known kind, or (``create=False``) missing.
    """
    if not isinstance(address, str) or not address.strip():
        raise SessionStoreError(
            f"the store address is empty ({address!r:.40}); {_FORMS} (leave --store out for "
            "the JSONL session files)",
            store=shown,
        )
    scheme, colon, rest = address.partition(":")
    scheme = scheme.lower() if colon else ""
    slashed = rest.startswith("//")
    if scheme in ("postgresql", "postgres"):
        if not slashed:
            raise SessionStoreError(
                f"a PostgreSQL address starts with postgresql:// ({shown!r}); {_FORMS}", store=shown
            )
        return StoreAddress(kind="postgresql", location=address)
    if scheme == "sqlite":
        path, _, query = (rest[2:] if slashed else rest).partition("?")
        if not path:
            raise SessionStoreError(
                "a SQLite address needs a file: sqlite:///path/to/sessions.db", store=shown
            )
        if path.startswith("//"):  # sqlite:////abs/path (and sqlite:///$HOME/… with HOME=/…)
            path = "/" + path.lstrip("/")
        if not slashed:  # sqlite:relative.db: made absolute, so the store's address reopens it
            path = os.path.abspath(path)
        return _sqlite_file(path, "mode=ro" in query.split("&"), shown=shown, create=create)
    if scheme == "jsonl" and slashed:
        directory = rest[2:]
    elif slashed:
        raise SessionStoreError(
            f"unknown store {shown!r}: use sqlite:///path, postgresql://user@host/db, or a "
            "directory of JSONL session files",
            store=shown,
        )
    else:
        directory = address
        if directory.lower().endswith(SQLITE_SUFFIXES):
            return _plain_sqlite(directory, shown=shown, create=create)
    if not create and not os.path.isdir(directory):
        raise SessionStoreError(
            f"no directory of JSONL sessions at {directory}; check the path ({_FORMS}) — "
            "reading a store never creates one",
            store=shown,
        )
    return StoreAddress(kind="jsonl", location=directory)


def _sqlite_file(path: str, read_only: bool, *, shown: str, create: bool) -> StoreAddress:
    if not create and not os.path.isfile(path):
        why = "not a file" if os.path.exists(path) else "no such file"
        raise SessionStoreError(
            f"no SQLite store at {path} ({why}); "
            "check the path — reading a store never creates one",
            store=shown,
        )
    return StoreAddress(kind="sqlite", location=path, read_only=read_only)


def _plain_sqlite(path: str, *, shown: str, create: bool) -> StoreAddress:
    """A plain path with a SQLite suffix: a SQLite file (made absolute, as ``sqlite:x.db``)."""
    absolute = os.path.abspath(path)
    if os.path.isdir(absolute):
        raise SessionStoreError(
            f"{path} is a directory, not a SQLite file (a plain path ending in "
            f"{os.path.splitext(path)[1]} names a SQLite file; one named so was read as a "
            f"directory of JSONL sessions before): give jsonl://{absolute} to keep using it as "
            "that directory, or sqlite:///path/to/sessions.db for a SQLite file",
            store=shown,
        )
    return _sqlite_file(absolute, False, shown=shown, create=create)


def readable_read_only(
    conn: sqlite3.Connection, path: str | os.PathLike[str], timeout: float
) -> sqlite3.Connection:
    """A ``?mode=ro`` connection that can read: ``conn`` when it can, else one opened with
    ``immutable=1``.

    A WAL database is read through its ``-shm`` file; in a directory the reader cannot write
    (a read-only mount, another user's files) that file cannot be created and every read fails
    with "unable to open database file", although the data is there. SQLite reads such a file
    with ``immutable=1`` (no locks, no ``-shm``): right for a store nobody can write from here,
    and used only when the plain read-only open cannot read.
    """
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError:
        conn.close()
    return sqlite3.connect(
        f"file:{os.fspath(path)}?mode=ro&immutable=1",
        uri=True,
        timeout=timeout,
        isolation_level=None,
        check_same_thread=False,
    )

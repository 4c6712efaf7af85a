"""The PostgreSQL backend: psycopg 3 with a pool (``pip install "autocompact[postgres]"``).

For agent servers whose workers run on several machines. Writes lock the session's row
(``SELECT ... FOR UPDATE``) for the rest of their transaction; reads run at ``REPEATABLE READ``
so a snapshot's entries and counters agree. Migrations hold a transaction-scoped advisory lock,
so workers starting together create the schema once. psycopg is imported on first use only.

The connection string's password never leaves this module: :attr:`address` shows ``***`` and
every error message is scrubbed of it.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator, Sequence
from typing import Any

from autocompact.errors import MissingDependencyError, SessionStoreError
from autocompact.sessions.stores.base import redact_address, scrub
from autocompact.sessions.stores.sql import Cursor, SqlStore

__all__ = ["PostgresStore"]

_SCHEMA_LOCK_KEY = 7_215_020_114  # any constant: the advisory lock migrations take


class _Cursor:
    """A psycopg cursor that takes the rules' ``?`` placeholders."""

    def __init__(self, cur: Any) -> None:
        self._cur = cur

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._cur.execute(sql.replace("?", "%s"), tuple(params))

    def fetchone(self) -> Any:
        return self._cur.fetchone()

    def fetchall(self) -> Any:
        return self._cur.fetchall()


class PostgresStore(SqlStore):
    """Sessions in a PostgreSQL database.

    Args:
        dsn: ``postgresql://user:password@host:port/dbname`` (or any libpq connection string).
        pool_size: the most connections this process opens.
        connect_timeout: seconds to wait for the server before giving up with an error.
        **options: see :class:`~autocompact.sessions.stores.sql.SqlStore`.
    """

    def __init__(
        self, dsn: str, *, pool_size: int = 4, connect_timeout: float = 10.0, **options: Any
    ) -> None:
        address, self._secrets = redact_address(dsn)
        super().__init__(address, **options)
        self._dsn = dsn
        self._pool_size = pool_size
        self._connect_timeout = connect_timeout
        self._pool: Any = None
        self._psycopg: Any = None

    def _open(self) -> Any:
        if self._pool is not None:
            return self._pool
        try:
            psycopg = importlib.import_module("psycopg")
            pool_module = importlib.import_module("psycopg_pool")
        except ImportError:
            raise MissingDependencyError("psycopg", "postgres") from None
        self._psycopg = psycopg
        timeout = max(1, int(self._connect_timeout))
        try:
            # One direct connection first: its error says why (refused, password, no such db).
            psycopg.connect(self._dsn, connect_timeout=timeout).close()
        except psycopg.Error as exc:
            raise self._error(exc) from None
        pool = pool_module.ConnectionPool(
            self._dsn,
            min_size=1,
            max_size=self._pool_size,
            kwargs={"connect_timeout": timeout},
            timeout=self._connect_timeout,
            open=False,
            name="autocompact",
        )
        try:
            pool.open(wait=True, timeout=self._connect_timeout)
        except Exception as exc:
            pool.close()
            raise self._error(exc) from None
        self._pool = pool
        return pool

    @contextlib.contextmanager
    def _transaction(self, *, write: bool) -> Iterator[Cursor]:
        pool = self._open()
        psycopg = self._psycopg
        try:
            with pool.connection() as conn, conn.cursor() as cur:
                if not write:
                    cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                yield _Cursor(cur)
        except SessionStoreError:
            raise
        except psycopg.Error as exc:
            raise self._error(exc) from None
        except Exception as exc:
            if type(exc).__module__.startswith("psycopg_pool"):
                raise self._error(exc) from None
            raise

    def _lock_schema(self, cur: Cursor) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(?)", (_SCHEMA_LOCK_KEY,))

    def _table_exists(self, cur: Cursor, name: str) -> bool:
        cur.execute(
            "SELECT 1 FROM information_schema.tables "
            "WHERE table_schema = current_schema() AND table_name = ?",
            (name,),
        )
        return cur.fetchone() is not None

    lock_suffix = " FOR UPDATE"

    def _error(self, exc: BaseException) -> SessionStoreError:
        text = scrub(" ".join(str(exc).split()), self._secrets) or type(exc).__name__
        name = type(exc).__name__
        if name == "ReadOnlySqlTransaction":
            what = (
                f"the PostgreSQL database at {self.address} is read-only ({text}); point "
                "--store at a primary, or turn off default_transaction_read_only"
            )
        elif name == "InsufficientPrivilege":
            what = (
                f"the PostgreSQL user may not do this at {self.address} ({text}); grant it "
                "CREATE and write rights on the schema, or use another user"
            )
        elif name in ("OperationalError", "PoolTimeout", "ConnectionTimeout", "InterfaceError"):
            what = (
                f"cannot reach the PostgreSQL server at {self.address} ({text}); check that "
                "it is running and that the address, user and password are right"
            )
        elif name in ("ProgramLimitExceeded", "OutOfMemory", "DiskFull"):
            what = (
                f"the PostgreSQL server at {self.address} refused the write ({text}); "
                "shorten the turn or give the server more room"
            )
        else:
            what = f"the PostgreSQL server at {self.address} failed: {text}"
        return SessionStoreError(what, store=self.address)

    def close(self) -> None:
        """Close the pool."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

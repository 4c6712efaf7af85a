"""The PostgreSQL backend: psycopg 3 with a pool (``pip install "autocompact[postgres]"``).

For agent servers whose workers run on several machines. Writes lock the session's row
(``SELECT ... FOR UPDATE``) for the rest of their transaction; reads run at ``REPEATABLE READ``
so a snapshot's entries and counters agree. Migrations hold a transaction-scoped advisory lock,
so workers starting together create the schema once. psycopg is imported on first use only.
The pools check each connection before lending it (psycopg_pool ≥ 3.2's ``check_connection``),
so after a server restart the next call reconnects instead of failing.

Two stores share everything but the driver calls: :class:`PostgresStore` (psycopg's
``Connection`` and ``ConnectionPool``) and :class:`AsyncPostgresStore` (``AsyncConnection`` and
``AsyncConnectionPool``, for asyncio servers: every statement is awaited, so waiting for the
server or for another worker's row lock never blocks the event loop). Both run the plans of
:mod:`autocompact.sessions.stores.sql`, so they send the same statements.

The connection string's password never leaves this module: :attr:`address` shows ``***`` and
every error message is scrubbed of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from autocompact.errors import MissingDependencyError, SessionStoreError
from autocompact.sessions.stores.base import encode_userinfo, redact_address, scrub
from autocompact.sessions.stores.schema import POSTGRES
from autocompact.sessions.stores.sql import AsyncCursor, AsyncSqlStore, Cursor, SqlStore

__all__ = ["AsyncPostgresStore", "PostgresStore"]


class _Cursor:
    """A psycopg cursor that takes the plans' ``?`` placeholders."""

    def __init__(self, cur: Any) -> None:
        self._cur = cur

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._cur.execute(POSTGRES.sql(sql), tuple(params))

    def fetchone(self) -> Any:
        return self._cur.fetchone()

    def fetchall(self) -> Any:
        return self._cur.fetchall()


class _AsyncCursor:
    """A psycopg async cursor that takes the plans' ``?`` placeholders."""

    def __init__(self, cur: Any) -> None:
        self._cur = cur

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return await self._cur.execute(POSTGRES.sql(sql), tuple(params))

    async def fetchone(self) -> Any:
        return await self._cur.fetchone()

    async def fetchall(self) -> Any:
        return await self._cur.fetchall()


class _Postgres:
    """What both PostgreSQL stores share: the address, the SQL dialect, the error messages."""

    dialect = POSTGRES

    _address: str
    _secrets: tuple[str, ...]

    def _connection_settings(self, dsn: str, pool_size: int, connect_timeout: float) -> None:
        """Keep how to connect; the pool opens on first use."""
        self._dsn = dsn
        self._pool_size = pool_size
        self._connect_timeout = connect_timeout
        self._pool: Any = None
        self._psycopg: Any = None

    @staticmethod
    def _modules() -> tuple[Any, Any]:
        try:
            return importlib.import_module("psycopg"), importlib.import_module("psycopg_pool")
        except ImportError:
            raise MissingDependencyError("psycopg", "postgres") from None

    def _error(self, exc: BaseException) -> SessionStoreError:
        text = scrub(" ".join(str(exc).split()), self._secrets) or type(exc).__name__
        name = type(exc).__name__
        address = self._address
        if name == "ReadOnlySqlTransaction":
            what = (
                f"the PostgreSQL database at {address} is read-only ({text}); point "
                "--store at a primary, or turn off default_transaction_read_only"
            )
        elif name == "InsufficientPrivilege":
            what = (
                f"the PostgreSQL user may not do this at {address} ({text}); grant it "
                "CREATE and write rights on the schema, or use another user"
            )
        elif name in ("OperationalError", "PoolTimeout", "ConnectionTimeout", "InterfaceError"):
            what = (
                f"cannot reach the PostgreSQL server at {address} ({text}); check that "
                "it is running and that the address, user and password are right"
            )
        elif name in ("ProgramLimitExceeded", "OutOfMemory", "DiskFull"):
            what = (
                f"the PostgreSQL server at {address} refused the write ({text}); "
                "shorten the turn or give the server more room"
            )
        else:
            what = f"the PostgreSQL server at {address} failed: {text}"
        return SessionStoreError(what, store=address)

    def _driver_error(self, exc: Exception, psycopg: Any) -> SessionStoreError | None:
        """The store error for a driver or pool exception (``None``: not the driver's)."""
        if isinstance(exc, SessionStoreError):
            return None
        if isinstance(exc, psycopg.Error) or type(exc).__module__.startswith("psycopg_pool"):
            return self._error(exc)
        return None


class PostgresStore(_Postgres, SqlStore):
    """Sessions in a PostgreSQL database.

    Args:
        dsn: ``postgresql://user:password@host:port/dbname`` (or any libpq connection string).
        pool_size: the most connections this process opens.
        connect_timeout: seconds to wait for the server before giving up with an error.
        **options: see :class:`~autocompact.sessions.stores.sql.SqlRules`.
    """

    def __init__(
        self, dsn: str, *, pool_size: int = 4, connect_timeout: float = 10.0, **options: Any
    ) -> None:
        address, self._secrets = redact_address(dsn)
        super().__init__(address, **options)
        self._connection_settings(encode_userinfo(dsn), pool_size, connect_timeout)

    def _open(self) -> Any:
        if self._pool is not None:
            return self._pool
        psycopg, pool_module = self._modules()
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
            # A connection the server dropped (a restart, a failover) is found and replaced
            # before use, so the send through it does not fail.
            check=pool_module.ConnectionPool.check_connection,
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
        try:
            with pool.connection() as conn, conn.cursor() as cur:
                if not write:
                    cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                yield _Cursor(cur)
        except Exception as exc:
            error = self._driver_error(exc, self._psycopg)
            if error is None:
                raise
            raise error from None

    def close(self) -> None:
        """Close the pool."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None


class AsyncPostgresStore(_Postgres, AsyncSqlStore):
    """Sessions in a PostgreSQL database, for asyncio code (every method is a coroutine).

    The pool opens on the first call, in the running event loop; a store serves that loop
    (make one per loop, as with any asyncio connection pool). ``await store.close()`` (or
    ``async with``) closes it.

    Args:
        dsn: ``postgresql://user:password@host:port/dbname`` (or any libpq connection string).
        pool_size: the most connections this process opens.
        connect_timeout: seconds to wait for the server before giving up with an error.
        **options: see :class:`~autocompact.sessions.stores.sql.SqlRules`.
    """

    def __init__(
        self, dsn: str, *, pool_size: int = 4, connect_timeout: float = 10.0, **options: Any
    ) -> None:
        address, self._secrets = redact_address(dsn)
        super().__init__(address, **options)
        self._connection_settings(encode_userinfo(dsn), pool_size, connect_timeout)
        self._opening: asyncio.Lock | None = None

    async def _open(self) -> Any:
        if self._pool is not None:
            return self._pool
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:  # two first calls at once open one pool
            if self._pool is None:
                self._pool = await self._new_pool()
        return self._pool

    async def _new_pool(self) -> Any:
        psycopg, pool_module = self._modules()
        self._psycopg = psycopg
        timeout = max(1, int(self._connect_timeout))
        try:
            # One direct connection first: its error says why (refused, password, no such db).
            conn = await psycopg.AsyncConnection.connect(self._dsn, connect_timeout=timeout)
            await conn.close()
        except psycopg.Error as exc:
            raise self._error(exc) from None
        pool = pool_module.AsyncConnectionPool(
            self._dsn,
            min_size=1,
            max_size=self._pool_size,
            kwargs={"connect_timeout": timeout},
            timeout=self._connect_timeout,
            open=False,
            name="autocompact-async",
            check=pool_module.AsyncConnectionPool.check_connection,  # see PostgresStore
        )
        try:
            await pool.open(wait=True, timeout=self._connect_timeout)
        except Exception as exc:
            await pool.close()
            raise self._error(exc) from None
        return pool

    @contextlib.asynccontextmanager
    async def _transaction(self, *, write: bool) -> AsyncIterator[AsyncCursor]:
        pool = await self._open()
        try:
            async with pool.connection() as conn, conn.cursor() as cur:
                if not write:
                    await cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                yield _AsyncCursor(cur)
        except Exception as exc:
            error = self._driver_error(exc, self._psycopg)
            if error is None:
                raise
            raise error from None

    async def close(self) -> None:
        """Close the pool."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()

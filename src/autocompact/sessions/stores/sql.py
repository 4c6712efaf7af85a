"""The SQL stores: the plans of :mod:`autocompact.sessions.stores.plans` run on a database.

:class:`SqlStore` runs each plan's statements on a DB-API cursor, :class:`AsyncSqlStore` awaits
them on an async cursor, so the synchronous and the asyncio stores send the very same statements
in the very same order (the protocol's methods are :mod:`autocompact.sessions.stores.front`'s).
A backend (:mod:`.sqlite`, :mod:`.postgres`) only names its :class:`~.plans.Dialect` and says
how to open a transaction and how its driver's errors become
:class:`~autocompact.errors.SessionStoreError`.
"""

from __future__ import annotations

import contextlib
from abc import abstractmethod
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from autocompact.sessions.stores.front import AsyncStoreFront, Call, StoreFront
from autocompact.sessions.stores.plans import SqlRules
from autocompact.sessions.stores.schema import (
    LATEST_SCHEMA,
    MIGRATIONS,
    Fetch,
    Op,
    Plan,
    Query,
    check_not_newer,
    migrate_plan,
    version_plan,
)

__all__ = [
    "LATEST_SCHEMA",
    "MIGRATIONS",
    "AsyncCursor",
    "AsyncSqlStore",
    "Cursor",
    "Query",
    "SqlRules",
    "SqlStore",
    "arun_plan",
    "run_plan",
]

_T = TypeVar("_T")


class Cursor(Protocol):
    """The part of a DB-API cursor the runner uses."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> Any: ...


class AsyncCursor(Protocol):
    """The same, awaited (a psycopg ``AsyncCursor``)."""

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> Any: ...

    async def fetchone(self) -> Any: ...

    async def fetchall(self) -> Any: ...


def run_plan(plan: Plan[_T], cur: Cursor) -> _T:
    """Run a plan's statements on a cursor, inside the caller's transaction."""
    result: Any = None
    try:
        while True:
            query = plan.send(result)
            cur.execute(query.sql, query.params)
            if query.fetch is Fetch.ONE:
                result = cur.fetchone()
            elif query.fetch is Fetch.ALL:
                result = cur.fetchall()
            else:
                result = None
    except StopIteration as stop:
        value: _T = stop.value
        return value
    finally:
        plan.close()


async def arun_plan(plan: Plan[_T], cur: AsyncCursor) -> _T:
    """:func:`run_plan`, each statement awaited (the event loop runs on meanwhile)."""
    result: Any = None
    try:
        while True:
            query = plan.send(result)
            await cur.execute(query.sql, query.params)
            if query.fetch is Fetch.ONE:
                result = await cur.fetchone()
            elif query.fetch is Fetch.ALL:
                result = await cur.fetchall()
            else:
                result = None
    except StopIteration as stop:
        value: _T = stop.value
        return value
    finally:
        plan.close()


class SqlStore(SqlRules, StoreFront):
    """The rules run on a DB-API connection (see :class:`~.base.SessionStore` for each method)."""

    @abstractmethod
    def _transaction(self, *, write: bool) -> contextlib.AbstractContextManager[Cursor]:
        """A transaction (committed on success, rolled back on error); driver errors become
        :class:`SessionStoreError`."""

    def _ensure_schema(self) -> None:
        if self._schema_checked:
            return
        with self._transaction(write=False) as cur:
            version = run_plan(version_plan(self.dialect, self._address), cur)
        if version < LATEST_SCHEMA:
            with self._transaction(write=True) as cur:
                version = run_plan(migrate_plan(self.dialect, self._address), cur)
        check_not_newer(version, self._address)
        self._schema_checked = True

    def _run(self, call: Call[_T]) -> _T:
        op: Op[_T] = self._op(call)
        self._ensure_schema()
        with self._transaction(write=op.write) as cur:
            return run_plan(op.plan, cur)


class AsyncSqlStore(SqlRules, AsyncStoreFront):
    """The same plans awaited on an async driver (see :class:`~.aio.AsyncSessionStore`).

    Every statement is awaited, so the event loop runs other tasks while one waits for the
    server (a row lock held by another worker included).
    """

    @abstractmethod
    def _transaction(self, *, write: bool) -> contextlib.AbstractAsyncContextManager[AsyncCursor]:
        """An async transaction (committed on success, rolled back on error); driver errors
        become :class:`SessionStoreError`."""

    async def _ensure_schema(self) -> None:
        if self._schema_checked:
            return
        async with self._transaction(write=False) as cur:
            version = await arun_plan(version_plan(self.dialect, self._address), cur)
        if version < LATEST_SCHEMA:
            async with self._transaction(write=True) as cur:
                version = await arun_plan(migrate_plan(self.dialect, self._address), cur)
        check_not_newer(version, self._address)
        self._schema_checked = True

    async def _run(self, call: Call[_T]) -> _T:
        op: Op[_T] = self._op(call)
        await self._ensure_schema()
        async with self._transaction(write=op.write) as cur:
            return await arun_plan(op.plan, cur)

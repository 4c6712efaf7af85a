"""The store protocol for asyncio code (:class:`AsyncSessionStore`) and its two implementations.

- PostgreSQL has a real async driver: :class:`~autocompact.sessions.stores.postgres.
  AsyncPostgresStore` awaits every statement on psycopg's ``AsyncConnectionPool`` (the same
  statements as the synchronous store, see :mod:`autocompact.sessions.stores.sql`).
- SQLite and the JSONL files have none (the standard library's ``sqlite3`` and file I/O block):
  :class:`AsyncStore` runs each call of the synchronous store in a worker thread
  (:func:`asyncio.to_thread`), so the event loop runs on while the call waits for the database's
  write lock or the disk. The backend's own locking (a lock per SQLite connection, a lock per
  JSONL store) makes concurrent calls safe.

:func:`autocompact.sessions.stores.open_async_store` picks the right one from an address.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
from typing import Protocol, TypeVar, runtime_checkable

from autocompact.content import Message
from autocompact.sessions.stores.base import (
    AppendResult,
    Attempt,
    BreakerEffect,
    CommitResult,
    Entry,
    JsonDict,
    Lease,
    SessionListing,
    SessionStore,
    Snapshot,
    takes_growth,
)
from autocompact.sessions.stores.front import AsyncStoreFront, Call

__all__ = ["AsyncSessionStore", "AsyncStore"]

_T = TypeVar("_T")


@runtime_checkable
class AsyncSessionStore(Protocol):
    """:class:`~autocompact.sessions.stores.base.SessionStore` with every call a coroutine."""

    @property
    def address(self) -> str:
        """The store's address with any password replaced by ``***``."""
        ...

    async def ensure(self, session_id: str, meta: JsonDict) -> None: ...

    async def record_model(
        self,
        session_id: str,
        *,
        provider: str,
        model: str,
        context_window: int,
        window_source: str | None = None,
    ) -> None: ...

    async def exists(self, session_id: str) -> bool: ...

    async def load(self, session_id: str, *, after: Snapshot | None = None) -> Snapshot: ...

    async def append_turn(
        self,
        session_id: str,
        turn_id: str,
        messages: Sequence[Message],
        *,
        usage: JsonDict | None = None,
        calibration: JsonDict | None = None,
        owner: str | None = None,
        growth: JsonDict | None = None,
    ) -> AppendResult: ...

    async def get_turn(self, session_id: str, turn_id: str) -> Entry | None: ...

    async def acquire_lease(
        self, session_id: str, owner: str, ttl: float | None = None
    ) -> Lease | None: ...

    async def release_lease(self, lease: Lease) -> None: ...

    async def commit_compaction(
        self,
        base: Snapshot,
        history: Sequence[Message],
        info: JsonDict,
        *,
        lease: Lease | None = None,
        owner: str | None = None,
        breaker: BreakerEffect = "reset",
        hold_until: int | None = None,
    ) -> CommitResult: ...

    async def record_attempt(
        self,
        session_id: str,
        info: JsonDict,
        *,
        counted: bool,
        epoch: int,
        lease: Lease | None = None,
        owner: str | None = None,
        hold_until: int | None = None,
    ) -> int: ...

    async def record_outgrown(
        self,
        session_id: str,
        info: JsonDict,
        *,
        epoch: int,
        hold_until: int,
        owner: str | None = None,
    ) -> bool: ...

    async def clear(self, session_id: str, *, owner: str | None = None) -> None: ...

    async def entries(self, session_id: str) -> tuple[Entry, ...]: ...

    async def attempts(self, session_id: str) -> tuple[Attempt, ...]: ...

    async def list_sessions(self) -> list[SessionListing]: ...

    async def close(self) -> None: ...


class AsyncStore(AsyncStoreFront):
    """Awaitable calls over a :class:`SessionStore`, each in a worker thread (see the protocol
    for each method): the async form of the SQLite and JSONL stores."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store

    @property
    def address(self) -> str:
        """The store's address, password replaced by ``***``."""
        return self.store.address

    async def _run(self, call: Call[_T]) -> _T:
        kwargs = dict(call.kwargs)
        if call.name == "append_turn" and (
            kwargs["growth"] is None or not takes_growth(self.store.append_turn)
        ):
            del kwargs["growth"]  # a store written before the growth log takes none
        result: _T = await asyncio.to_thread(
            functools.partial(getattr(self.store, call.name), **kwargs)
        )
        return result

    async def close(self) -> None:
        """See :meth:`SessionStore.close`."""
        await asyncio.to_thread(self.store.close)

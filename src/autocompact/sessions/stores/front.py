"""The store protocol's methods, written once for every backend: each names a :class:`Call`.

:class:`StoreFront` (synchronous) and :class:`AsyncStoreFront` (asyncio) hold every method of
:class:`~autocompact.sessions.stores.base.SessionStore` (and its asyncio form): each builds a
:class:`Call` (the method's name and its arguments by keyword) and hands it to the backend's
``_run``. A backend only says how to run a call:

- the SQL stores turn it into a plan (:mod:`autocompact.sessions.stores.sql`) and run its
  statements on a cursor, or await them on an async cursor: the same plan either way;
- the JSONL store calls its file operation (:mod:`autocompact.sessions.stores.jsonl`);
- :class:`~autocompact.sessions.stores.aio.AsyncStore` runs the synchronous store's call in a
  worker thread.

See :class:`~autocompact.sessions.stores.base.SessionStore` for what each method does.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

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
    Snapshot,
)

__all__ = ["AsyncStoreFront", "Call", "StoreFront"]

_T = TypeVar("_T")


@dataclass(frozen=True)
class Call(Generic[_T]):
    """One protocol call: the method's name and its arguments (by keyword)."""

    name: str
    kwargs: dict[str, Any] = field(default_factory=dict)


def _args(**kwargs: Any) -> dict[str, Any]:
    return kwargs


class StoreFront(ABC):
    """:class:`~autocompact.sessions.stores.base.SessionStore`'s methods over ``_run``."""

    _redact: tuple[str, ...] = ()

    @property
    def redacted(self) -> tuple[str, ...]:
        """The secrets the store writes as ``[redacted]`` (besides the credential shapes)."""
        return self._redact

    @property
    @abstractmethod
    def address(self) -> str:
        """The store's address with any password replaced by ``***``."""

    @abstractmethod
    def _run(self, call: Call[_T]) -> _T:
        """Run one call (one transaction, durable when it returns)."""

    @abstractmethod
    def close(self) -> None:
        """Release connections and files."""

    def __enter__(self) -> StoreFront:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ensure(self, session_id: str, meta: JsonDict) -> None:
        """Create the session if it does not exist (``meta`` is kept from the first call)."""
        self._run(Call[None]("ensure", {"session_id": session_id, "meta": meta}))

    def record_model(
        self,
        session_id: str,
        *,
        provider: str,
        model: str,
        context_window: int,
        window_source: str | None = None,
    ) -> None:
        """Record that the session goes on with another model: its meta's provider, model,
        window and window source are replaced (the rest is kept)."""
        kwargs = _args(session_id=session_id, provider=provider, model=model)
        kwargs.update(_args(context_window=context_window, window_source=window_source))
        self._run(Call[None]("record_model", kwargs))

    def exists(self, session_id: str) -> bool:
        """Whether the session exists."""
        return self._run(Call[bool]("exists", {"session_id": session_id}))

    def load(self, session_id: str, *, after: Snapshot | None = None) -> Snapshot:
        """The live history and shared state, read as one consistent view.

        With ``after`` (an earlier snapshot of this session) and no summary or clear since,
        only what was written after it is read and decoded.
        """
        return self._run(Call[Snapshot]("load", {"session_id": session_id, "after": after}))

    def append_turn(
        self,
        session_id: str,
        turn_id: str,
        messages: Sequence[Message],
        *,
        usage: JsonDict | None = None,
        calibration: JsonDict | None = None,
        owner: str | None = None,
        growth: JsonDict | None = None,
    ) -> AppendResult:
        """Append one turn once (a second append with the same ``turn_id`` changes nothing);
        ``growth``: the session's growth log after it (``None`` leaves the stored one)."""
        kwargs = _args(session_id=session_id, turn_id=turn_id, messages=messages, usage=usage)
        kwargs.update(_args(calibration=calibration, owner=owner, growth=growth))
        return self._run(Call[AppendResult]("append_turn", kwargs))

    def get_turn(self, session_id: str, turn_id: str) -> Entry | None:
        """The turn stored under ``turn_id`` (live or replaced), if any."""
        kwargs = {"session_id": session_id, "turn_id": turn_id}
        return self._run(Call[Entry | None]("get_turn", kwargs))

    def acquire_lease(self, session_id: str, owner: str, ttl: float | None = None) -> Lease | None:
        """Take the compaction lease when it is free, expired or already ``owner``'s."""
        kwargs = {"session_id": session_id, "owner": owner, "ttl": ttl}
        return self._run(Call[Lease | None]("acquire_lease", kwargs))

    def release_lease(self, lease: Lease) -> None:
        """Give the lease back (nothing happens when it lapsed and someone else holds it)."""
        self._run(Call[None]("release_lease", {"lease": lease}))

    def commit_compaction(
        self,
        base: Snapshot,
        history: Sequence[Message],
        info: JsonDict,
        *,
        lease: Lease | None = None,
        owner: str | None = None,
        breaker: BreakerEffect = "reset",
        hold_until: int | None = None,
    ) -> CommitResult:
        """Replace ``base``'s live entries by ``history`` when the epoch is still ``base``'s.

        ``breaker``: what the committed attempt does to the breaker's count (an effective
        summary resets it; an ineffective one adds one); ``hold_until``: the session's hold
        after it. A superseded attempt changes neither.
        """
        kwargs = _args(base=base, history=history, info=info, lease=lease, owner=owner)
        kwargs.update(_args(breaker=breaker, hold_until=hold_until))
        return self._run(Call[CommitResult]("commit_compaction", kwargs))

    def record_attempt(
        self,
        session_id: str,
        info: JsonDict,
        *,
        counted: bool,
        epoch: int,
        lease: Lease | None = None,
        owner: str | None = None,
        hold_until: int | None = None,
    ) -> int:
        """Record an attempt that did not commit (a counted one adds one to the breaker);
        ``hold_until``: the session's hold after it. Returns the breaker's count."""
        kwargs = _args(session_id=session_id, info=info, counted=counted, epoch=epoch)
        kwargs.update(_args(lease=lease, owner=owner, hold_until=hold_until))
        return self._run(Call[int]("record_attempt", kwargs))

    def record_outgrown(
        self,
        session_id: str,
        info: JsonDict,
        *,
        epoch: int,
        hold_until: int,
        owner: str | None = None,
    ) -> bool:
        """Count the compaction before ``epoch`` outgrown and hold; ``False``: already done."""
        kwargs = _args(session_id=session_id, info=info, epoch=epoch, hold_until=hold_until)
        return self._run(Call[bool]("record_outgrown", {**kwargs, "owner": owner}))

    def clear(self, session_id: str, *, owner: str | None = None) -> None:
        """Replace the live history by an empty one; the breaker and usage start over."""
        self._run(Call[None]("clear", {"session_id": session_id, "owner": owner}))

    def entries(self, session_id: str) -> tuple[Entry, ...]:
        """Every entry in write order (replaced ones included)."""
        return self._run(Call[tuple[Entry, ...]]("entries", {"session_id": session_id}))

    def attempts(self, session_id: str) -> tuple[Attempt, ...]:
        """Every compaction attempt in write order."""
        return self._run(Call[tuple[Attempt, ...]]("attempts", {"session_id": session_id}))

    def list_sessions(self) -> list[SessionListing]:
        """Every session, most recently updated first."""
        return self._run(Call[list[SessionListing]]("list_sessions"))


class AsyncStoreFront(ABC):
    """The same methods, awaited (:class:`~autocompact.sessions.stores.aio.AsyncSessionStore`):
    each builds the same :class:`Call` as :class:`StoreFront`'s and awaits ``_run``."""

    _redact: tuple[str, ...] = ()

    @property
    def redacted(self) -> tuple[str, ...]:
        """The secrets the store writes as ``[redacted]`` (besides the credential shapes)."""
        return self._redact

    @property
    @abstractmethod
    def address(self) -> str:
        """The store's address with any password replaced by ``***``."""

    @abstractmethod
    async def _run(self, call: Call[_T]) -> _T:
        """Run one call (one transaction, durable when it returns)."""

    @abstractmethod
    async def close(self) -> None:
        """Release connections and files."""

    async def __aenter__(self) -> AsyncStoreFront:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def ensure(self, session_id: str, meta: JsonDict) -> None:
        """See :meth:`StoreFront.ensure`."""
        await self._run(Call[None]("ensure", {"session_id": session_id, "meta": meta}))

    async def record_model(
        self,
        session_id: str,
        *,
        provider: str,
        model: str,
        context_window: int,
        window_source: str | None = None,
    ) -> None:
        """See :meth:`StoreFront.record_model`."""
        kwargs = _args(session_id=session_id, provider=provider, model=model)
        kwargs.update(_args(context_window=context_window, window_source=window_source))
        await self._run(Call[None]("record_model", kwargs))

    async def exists(self, session_id: str) -> bool:
        """See :meth:`StoreFront.exists`."""
        return await self._run(Call[bool]("exists", {"session_id": session_id}))

    async def load(self, session_id: str, *, after: Snapshot | None = None) -> Snapshot:
        """See :meth:`StoreFront.load`."""
        return await self._run(Call[Snapshot]("load", {"session_id": session_id, "after": after}))

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
    ) -> AppendResult:
        """See :meth:`StoreFront.append_turn`."""
        kwargs = _args(session_id=session_id, turn_id=turn_id, messages=messages, usage=usage)
        kwargs.update(_args(calibration=calibration, owner=owner, growth=growth))
        return await self._run(Call[AppendResult]("append_turn", kwargs))

    async def get_turn(self, session_id: str, turn_id: str) -> Entry | None:
        """See :meth:`StoreFront.get_turn`."""
        kwargs = {"session_id": session_id, "turn_id": turn_id}
        return await self._run(Call[Entry | None]("get_turn", kwargs))

    async def acquire_lease(
        self, session_id: str, owner: str, ttl: float | None = None
    ) -> Lease | None:
        """See :meth:`StoreFront.acquire_lease`."""
        kwargs = {"session_id": session_id, "owner": owner, "ttl": ttl}
        return await self._run(Call[Lease | None]("acquire_lease", kwargs))

    async def release_lease(self, lease: Lease) -> None:
        """See :meth:`StoreFront.release_lease`."""
        await self._run(Call[None]("release_lease", {"lease": lease}))

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
    ) -> CommitResult:
        """See :meth:`StoreFront.commit_compaction`."""
        kwargs = _args(base=base, history=history, info=info, lease=lease, owner=owner)
        kwargs.update(_args(breaker=breaker, hold_until=hold_until))
        return await self._run(Call[CommitResult]("commit_compaction", kwargs))

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
    ) -> int:
        """See :meth:`StoreFront.record_attempt`."""
        kwargs = _args(session_id=session_id, info=info, counted=counted, epoch=epoch)
        kwargs.update(_args(lease=lease, owner=owner, hold_until=hold_until))
        return await self._run(Call[int]("record_attempt", kwargs))

    async def record_outgrown(
        self,
        session_id: str,
        info: JsonDict,
        *,
        epoch: int,
        hold_until: int,
        owner: str | None = None,
    ) -> bool:
        """See :meth:`StoreFront.record_outgrown`."""
        kwargs = _args(session_id=session_id, info=info, epoch=epoch, hold_until=hold_until)
        return await self._run(Call[bool]("record_outgrown", {**kwargs, "owner": owner}))

    async def clear(self, session_id: str, *, owner: str | None = None) -> None:
        """See :meth:`StoreFront.clear`."""
        await self._run(Call[None]("clear", {"session_id": session_id, "owner": owner}))

    async def entries(self, session_id: str) -> tuple[Entry, ...]:
        """See :meth:`StoreFront.entries`."""
        return await self._run(Call[tuple[Entry, ...]]("entries", {"session_id": session_id}))

    async def attempts(self, session_id: str) -> tuple[Attempt, ...]:
        """See :meth:`StoreFront.attempts`."""
        return await self._run(Call[tuple[Attempt, ...]]("attempts", {"session_id": session_id}))

    async def list_sessions(self) -> list[SessionListing]:
        """See :meth:`StoreFront.list_sessions`."""
        return await self._run(Call[list[SessionListing]]("list_sessions"))

"""How a chat session uses a store: what it reads before a turn, what it writes after.

:class:`StoreBinding` is what ``ChatSession(store=…, session_id=…)`` holds. It keeps the
snapshot the session last read (the compare-and-swap base of a compaction) and turns the
chat's events into store calls:

- before each turn, the live history and the shared counters are read again (another worker
  may have appended or compacted);
- a compaction first takes the lease (``None``: another worker is compacting; this one skips
  the side query and relies on the guarantee that trims its request), then commits with the
  compare-and-swap; a superseded summary becomes a no-op that does not count;
- a turn is appended under its turn id once the reply is in.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import secrets
import socket
from collections.abc import Generator, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from autocompact.compaction.accounting import BreakerState, record_attempt
from autocompact.compaction.plan import (
    CompressionInfo,
    CompressionResult,
    CompressionStatus,
    CompressionTrigger,
)
from autocompact.compaction.service import Awaiting, settle
from autocompact.content import Message
from autocompact.errors import ConfigError, SessionStoreError
from autocompact.sessions.records import info_to_dict
from autocompact.sessions.stores.aio import AsyncSessionStore
from autocompact.sessions.stores.base import (
    BreakerEffect,
    Entry,
    JsonDict,
    Lease,
    SessionStore,
    Snapshot,
    encode_messages,
    redact_text,
    takes_growth,
)
from autocompact.thresholds import CompactionThresholds

__all__ = [
    "StoreBinding",
    "breaker_effect",
    "default_owner",
    "meta_of",
    "run_step",
    "skipped_info",
]

_T = TypeVar("_T")
logger = logging.getLogger("autocompact")


def default_owner() -> str:
    """``host:pid:random``: a worker's name in leases and entries."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class StoreBinding:
    """One chat session's link to its store.

    Each store step is written once, as a generator (the ``*_step`` methods): with a
    synchronous store it calls the store and never yields; with an asyncio store
    (:class:`~autocompact.sessions.stores.aio.AsyncSessionStore`) it yields each call as an
    :class:`~autocompact.compaction.service.Awaiting`, which ``AsyncChatSession``'s driver
    awaits, so the event loop runs on while the store works. The plain methods run the steps of
    a synchronous store.

    Args:
        store: the store (synchronous or asyncio).
        session_id: the session (created with ``meta`` when missing).
        meta: provider, model, window, system instruction (kept from the first worker).
        owner: this worker's name.
    """

    def __init__(
        self,
        store: SessionStore | AsyncSessionStore,
        session_id: str,
        meta: JsonDict,
        owner: str | None = None,
    ) -> None:
        if not (
            callable(getattr(store, "load", None)) and callable(getattr(store, "append_turn", None))
        ):
            raise ConfigError(
                "store must be a session store (open_store(address), open_async_store(address) "
                f"or a store object), got {type(store).__name__} {store!r:.60}",
                key="store",
            )
        self.store: Any = store
        self.session_id = session_id
        self.owner = owner or default_owner()
        self.is_async = inspect.iscoroutinefunction(getattr(store, "load", None))
        # Whether the store keeps the growth log with each turn (design decision 69).
        self.keeps_growth = takes_growth(store.append_turn)
        self._meta = meta
        self._lease: Lease | None = None
        self._base: Snapshot | None = None
        self._pending: set[asyncio.Task[Any]] = set()
        # An asyncio store is read on the first step (a constructor cannot await).
        self.snapshot = Snapshot(session_id=session_id, meta=meta, entries=(), epoch=-1, last_seq=0)
        self.opened = False
        if not self.is_async:
            self.open()

    # -- the steps (a synchronous store never yields) --------------------------------------

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        call = getattr(self.store, method)
        if self.is_async:
            return (yield Awaiting(call(*args, **kwargs)))
        return call(*args, **kwargs)

    def open_step(self) -> Generator[Any, Any, Snapshot]:
        """Create the session when missing and read it (once)."""
        if not self.opened:
            yield from self._call("ensure", self.session_id, self._meta)
            self.snapshot = yield from self._call("load", self.session_id)
            self.opened = True
        return self.snapshot

    def refresh_step(self) -> Generator[Any, Any, Snapshot]:
        """Read the session again."""
        if not self.opened:
            return (yield from self.open_step())
        self.snapshot = yield from self._call("load", self.session_id, after=self.snapshot)
        return self.snapshot

    def find_turn_step(self, turn_id: str) -> Generator[Any, Any, Entry | None]:
        """The stored turn with this id (live or replaced), if any."""
        if getattr(self.store, "get_turn", None) is None:
            return None
        entry: Entry | None = yield from self._call("get_turn", self.session_id, turn_id)
        return entry

    def check_retry(self, stored: Entry, message: Message) -> None:
        """Refuse a stored turn's id reused for another message (its stored reply would answer
        a question it was not asked). The store may keep the message redacted: a retry matches
        when the same redaction makes it the stored text."""
        kept, new = encode_messages(stored.messages[:1]), encode_messages((message,))
        hidden = getattr(self.store, "redacted", ())
        if new == kept or redact_text(new, hidden if isinstance(hidden, tuple) else ()) == kept:
            return
        address = str(getattr(self.store, "address", "the store"))
        raise SessionStoreError(
            f"turn id {stored.turn_id!r:.80} is already stored in session "
            f"{self.session_id!r:.80} in {address} for another message "
            f"({stored.messages[0].text!r:.60}); nothing was sent: give a new message a new "
            "turn id (resending the same message with this id returns its stored reply)",
            store=address,
            session_id=self.session_id,
        )

    def begin_compaction_step(self) -> Generator[Any, Any, Snapshot | None]:
        """Take the lease and read the base; ``None`` when another worker holds the lease."""
        lease = yield from self._call("acquire_lease", self.session_id, self.owner)
        if lease is None:
            return None
        self._lease = lease
        self._base = yield from self.refresh_step()
        return self._base

    def finish_compaction_step(
        self,
        result: CompressionResult,
        thresholds: CompactionThresholds,
        *,
        pending_tokens: int = 0,
    ) -> Generator[Any, Any, CompressionResult]:
        """Commit or record the attempt; a superseded summary comes back as a no-op.

        What the attempt does to the shared breaker count and hold is decided by the same pure
        rule the chat applies (:func:`autocompact.compaction.accounting.record_attempt`), and
        written in the attempt's transaction. ``pending_tokens``: the size of the message being
        sent (a hold begins at the pre-send count).
        """
        base, lease = self._base, self._lease
        self._base = self._lease = None
        assert base is not None, "finish_compaction without begin_compaction"
        info = result.info
        record = info_to_dict(info)
        effect, hold_until = breaker_effect(info, thresholds, base, pending_tokens=pending_tokens)
        if info.status is CompressionStatus.COMPRESSED:
            outcome = yield from self._call(
                "commit_compaction",
                base,
                result.history,
                record,
                lease=lease,
                owner=self.owner,
                breaker=effect,
                hold_until=hold_until,
            )
            if not outcome.committed:
                superseded: CompressionInfo = replace(
                    info,
                    status=CompressionStatus.NOOP,
                    new_token_count=info.original_token_count,
                    error="superseded: another worker changed the summarized range first",
                    summary=None,
                )
                result = CompressionResult(base.history, superseded)
        else:
            yield from self._call(
                "record_attempt",
                self.session_id,
                record,
                counted=effect == "add",
                epoch=base.epoch,
                lease=lease,
                owner=self.owner,
                hold_until=hold_until,
            )
        yield from self.refresh_step()
        return result

    def outgrown_step(self, info: JsonDict, hold_until: int) -> Generator[Any, Any, bool]:
        """Record that the last compaction was outgrown (design decision 69): the breaker's
        count and hold change in the store, in one write, so the next read (this worker's
        compaction step, another worker, a reopened session) sees them. ``False``: another
        worker already recorded it at this epoch. A store without ``record_outgrown`` (one
        written before it) records a counted attempt instead."""
        yield from self.open_step()
        epoch = self.snapshot.epoch
        if getattr(self.store, "record_outgrown", None) is None:
            yield from self._call(
                "record_attempt",
                self.session_id,
                {**info, "status": "outgrown"},
                counted=True,
                epoch=epoch,
                owner=self.owner,
                hold_until=hold_until,
            )
            recorded = True
        else:
            recorded = yield from self._call(
                "record_outgrown",
                self.session_id,
                info,
                epoch=epoch,
                hold_until=hold_until,
                owner=self.owner,
            )
        yield from self.refresh_step()
        return bool(recorded)

    def append_step(
        self,
        turn_id: str,
        messages: Sequence[Message],
        *,
        usage: JsonDict | None,
        calibration: JsonDict | None,
        growth: JsonDict | None = None,
    ) -> Generator[Any, Any, bool]:
        """Append a turn (with the growth log after it, when the store keeps one); ``False``
        when it was already there."""
        extra = {"growth": growth} if growth is not None and self.keeps_growth else {}
        result = yield from self._call(
            "append_turn",
            self.session_id,
            turn_id,
            messages,
            usage=usage,
            calibration=calibration,
            owner=self.owner,
            **extra,
        )
        return not result.duplicate

    def clear_step(self) -> Generator[Any, Any, None]:
        """Clear the stored history."""
        yield from self._call("clear", self.session_id, owner=self.owner)
        yield from self.refresh_step()

    def abandon(self) -> None:
        """Give the lease back after an error in the side query's flow.

        Called where the flow cannot wait (it is being closed or cancelled): an asyncio store's
        release is started as a task on the running loop; should it not run, the lease lapses.
        """
        lease, self._lease, self._base = self._lease, None, None
        if lease is None:
            return
        if not self.is_async:
            self.store.release_lease(lease)
            return
        try:
            task = asyncio.get_running_loop().create_task(self.store.release_lease(lease))
        except RuntimeError:  # no loop: the lease lapses after its expiry
            return
        self._pending.add(task)
        task.add_done_callback(self._released)

    def _released(self, task: asyncio.Task[Any]) -> None:
        self._pending.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.warning("could not release the compaction lease: %s", task.exception())

    # -- the same, for a synchronous store -------------------------------------------------

    def open(self) -> Snapshot:
        """See :meth:`open_step`."""
        return _run(self.open_step())

    def refresh(self) -> Snapshot:
        """See :meth:`refresh_step`."""
        return _run(self.refresh_step())

    def find_turn(self, turn_id: str) -> Entry | None:
        """See :meth:`find_turn_step`."""
        return _run(self.find_turn_step(turn_id))

    def begin_compaction(self) -> Snapshot | None:
        """See :meth:`begin_compaction_step`."""
        return _run(self.begin_compaction_step())

    def finish_compaction(
        self,
        result: CompressionResult,
        thresholds: CompactionThresholds,
        *,
        pending_tokens: int = 0,
    ) -> CompressionResult:
        """See :meth:`finish_compaction_step`."""
        return _run(self.finish_compaction_step(result, thresholds, pending_tokens=pending_tokens))

    def append(
        self,
        turn_id: str,
        messages: Sequence[Message],
        *,
        usage: JsonDict | None,
        calibration: JsonDict | None,
    ) -> bool:
        """See :meth:`append_step`."""
        return _run(self.append_step(turn_id, messages, usage=usage, calibration=calibration))

    def clear(self) -> None:
        """See :meth:`clear_step`."""
        _run(self.clear_step())


async def run_step(step: Generator[Any, Any, _T]) -> _T:
    """Run a step outside a flow, awaiting each store call it yields."""
    try:
        item = next(step)
        while True:
            ok, value = await settle(item)
            item = step.send(value) if ok else step.throw(value)
    except StopIteration as stop:
        result: _T = stop.value
        return result


def _run(step: Generator[Any, Any, _T]) -> _T:
    """Run a step of a synchronous store (it never yields)."""
    try:
        item = next(step)
    except StopIteration as stop:
        value: _T = stop.value
        return value
    step.close()
    if isinstance(item, Awaiting):
        close = getattr(item.awaitable, "close", None)
        if close is not None:
            close()
    raise ConfigError(
        "this session's store is an asyncio store (open_async_store): call it from "
        "AsyncChatSession (await session.send / aclear), or use a synchronous store",
        key="store",
    )


def meta_of(**values: Any) -> JsonDict:
    """Session metadata without unset values."""
    return {k: v for k, v in values.items() if v is not None}


def skipped_info(trigger: CompressionTrigger, tokens: int) -> CompressionInfo:
    """The no-op of a compaction left to the worker that holds the store's lease."""
    return CompressionInfo(
        status=CompressionStatus.NOOP,
        trigger=trigger,
        original_token_count=tokens,
        new_token_count=tokens,
        error="another worker holds the compaction lease",
    )


def breaker_effect(
    info: CompressionInfo,
    thresholds: CompactionThresholds,
    base: Snapshot,
    *,
    pending_tokens: int = 0,
) -> tuple[BreakerEffect, int | None]:
    """What an attempt does to the shared breaker count, and the hold after it.

    The count's change never depends on its value (reset, add one, or keep), so it is read off
    the accounting rule at a probe count and applied to the stored count in the transaction.
    """
    probe = record_attempt(BreakerState(consecutive_failures=10), info, thresholds)
    effect: BreakerEffect = (
        "reset"
        if probe.consecutive_failures == 0
        else "add"
        if probe.consecutive_failures == 11
        else "keep"
    )
    state = BreakerState(consecutive_failures=base.consecutive_failures, hold_until=base.hold_until)
    return effect, record_attempt(state, info, thresholds, pending_tokens=pending_tokens).hold_until

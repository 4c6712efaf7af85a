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

import os
import secrets
import socket
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from autocompact.compaction.accounting import BreakerState, record_attempt
from autocompact.compaction.plan import (
    CompressionInfo,
    CompressionResult,
    CompressionStatus,
    CompressionTrigger,
)
from autocompact.content import Message
from autocompact.sessions.records import info_to_dict
from autocompact.sessions.stores.base import (
    BreakerEffect,
    Entry,
    JsonDict,
    Lease,
    SessionStore,
    Snapshot,
)
from autocompact.thresholds import CompactionThresholds

__all__ = ["StoreBinding", "breaker_effect", "default_owner", "meta_of", "skipped_info"]


def default_owner() -> str:
    """``host:pid:random``: a worker's name in leases and entries."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class StoreBinding:
    """One chat session's link to its store.

    Args:
        store: the store.
        session_id: the session (created with ``meta`` when missing).
        meta: provider, model, window, system instruction (kept from the first worker).
        owner: this worker's name.
    """

    def __init__(
        self, store: SessionStore, session_id: str, meta: JsonDict, owner: str | None = None
    ) -> None:
        self.store = store
        self.session_id = session_id
        self.owner = owner or default_owner()
        store.ensure(session_id, meta)
        self.snapshot: Snapshot = store.load(session_id)
        self._lease: Lease | None = None
        self._base: Snapshot | None = None

    def refresh(self) -> Snapshot:
        """Read the session again."""
        self.snapshot = self.store.load(self.session_id, after=self.snapshot)
        return self.snapshot

    def find_turn(self, turn_id: str) -> Entry | None:
        """The stored turn with this id (live or replaced), if any."""
        getter = getattr(self.store, "get_turn", None)
        if getter is None:
            return None
        entry: Entry | None = getter(self.session_id, turn_id)
        return entry

    def begin_compaction(self) -> Snapshot | None:
        """Take the lease and read the base; ``None`` when another worker holds the lease."""
        lease = self.store.acquire_lease(self.session_id, self.owner)
        if lease is None:
            return None
        self._lease = lease
        self._base = self.refresh()
        return self._base

    def finish_compaction(
        self, result: CompressionResult, thresholds: CompactionThresholds
    ) -> CompressionResult:
        """Commit or record the attempt; a superseded summary comes back as a no-op.

        What the attempt does to the shared breaker count and hold is decided by the same pure
        rule the chat applies (:func:`autocompact.compaction.accounting.record_attempt`), and
        written in the attempt's transaction.
        """
        base, lease = self._base, self._lease
        self._base = self._lease = None
        assert base is not None, "finish_compaction without begin_compaction"
        info = result.info
        record = info_to_dict(info)
        effect, hold_until = breaker_effect(info, thresholds, base)
        if info.status is CompressionStatus.COMPRESSED:
            outcome = self.store.commit_compaction(
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
            self.store.record_attempt(
                self.session_id,
                record,
                counted=effect == "add",
                epoch=base.epoch,
                lease=lease,
                owner=self.owner,
                hold_until=hold_until,
            )
        self.refresh()
        return result

    def abandon(self) -> None:
        """Give the lease back after an error in the side query's flow."""
        lease, self._lease, self._base = self._lease, None, None
        if lease is not None:
            self.store.release_lease(lease)

    def append(
        self,
        turn_id: str,
        messages: Sequence[Message],
        *,
        usage: JsonDict | None,
        calibration: JsonDict | None,
    ) -> bool:
        """Append a turn; ``False`` when it was already there."""
        result = self.store.append_turn(
            self.session_id,
            turn_id,
            messages,
            usage=usage,
            calibration=calibration,
            owner=self.owner,
        )
        return not result.duplicate

    def clear(self) -> None:
        """Clear the stored history."""
        self.store.clear(self.session_id, owner=self.owner)
        self.refresh()


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
    info: CompressionInfo, thresholds: CompactionThresholds, base: Snapshot
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
    return effect, record_attempt(state, info, thresholds).hold_until

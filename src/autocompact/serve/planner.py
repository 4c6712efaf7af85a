"""What to send for one request: forward, substitute, compact, or trim (the engine decides).

The proxy is a driver of :class:`~autocompact.guard.ContextGuard` (the client owns the
history): each request is converted to the content model, the stored substitution that matches
it is applied, and the guard runs the ladder on the result. Below *auto* nothing more is done;
at *auto* (or when the upstream said "too long") the conversation's single-flight lease is
taken and the guard compacts (clearing first, then the side query through
:class:`~autocompact.serve.upstream.UpstreamProvider`, the breaker, the hold, the guarantee's
trimming). A compaction's result becomes a :class:`~autocompact.serve.substitution.Record`, which
the app stores only once the upstream accepted the request.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import anyio

from autocompact import CompressionService
from autocompact.content import CharStats
from autocompact.errors import AutocompactError, ContentError
from autocompact.guard import (
    ContextGuard,
    GuardResult,
    GuardState,
    learn_from_usage,
    request_stats,
)
from autocompact.serve.fastpath import Sizing, estimate, read
from autocompact.serve.identity import Identity, identify
from autocompact.serve.protocol import Converted, WireProtocol
from autocompact.serve.substitution import (
    Record,
    best_record,
    build_replacement,
    record_from_entry,
    record_messages,
)
from autocompact.serve.upstream import UpstreamProvider
from autocompact.serve.wire import chain_hashes, splice_body
from autocompact.sessions.stores.base import Lease, SessionStore, Snapshot
from autocompact.thresholds import Tier, compute_thresholds, tier_of

__all__ = ["Decision", "Planner"]

logger = logging.getLogger("autocompact.serve")
_AT_AUTO = (Tier.AUTO, Tier.HARD)
CACHE_ENTRIES = 1024
"""How many conversations' snapshots and failure states a worker keeps in memory."""
SIZING_BYTES = 64 * 1024 * 1024
"""The request bytes whose readings a worker keeps (each conversation's last request, the
decoded messages held about 3-4 times their size in memory) so the next request of the same
conversation reads only what it adds."""


def _remember(cache: OrderedDict[str, Any], key: str, value: Any) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > CACHE_ENTRIES:
        cache.popitem(last=False)


@dataclass(frozen=True, kw_only=True)
class Decision:
    """What the app sends for one request.

    Attributes:
        body: the bytes to send (the client's own bytes when nothing changed).
        action: ``forward``, ``substituted``, ``compacted``, ``trimmed``, ``client-compaction``,
            ``passthrough`` (a request the proxy does not read), ``compaction-failed``.
        identity: the conversation, when one was read.
        tokens: the engine's estimate of what the client sent (after substitution).
        tier: the ladder's tier of that estimate.
        record: a compaction to store once the upstream accepts the request.
        lease: the conversation's lease, to give back when the request is done.
        side_queries: how many summary requests this decision made.
        state: the engine's state for what was sent (what reported usage teaches).
        state_key: the record that state belongs to (``""``: none).
        sent: the character statistics of what was sent (``None``: not read).
    """

    body: bytes
    action: str
    identity: Identity | None = None
    tokens: int = 0
    tier: str = ""
    record: Record | None = None
    lease: Lease | None = None
    side_queries: int = 0
    state: GuardState | None = None
    state_key: str = ""
    sent: CharStats | None = None

    @property
    def compacted(self) -> bool:
        """Whether the request went out with a substitution or a new compaction."""
        return self.action in ("substituted", "compacted")


class _Chain:
    """A request's chain hashes, computed only as far as a stored record needs them (a
    conversation with no record hashes nothing)."""

    def __init__(self, conv: Sequence[Any]) -> None:
        self.conv = conv
        self.hashes: list[str] = []

    def upto(self, records: Sequence[Record], limit: int) -> list[str]:
        """The hashes of the first messages, as many as the longest record (at most ``limit``)
        needs."""
        need = min(max((r.prefix_len for r in records), default=0), limit, len(self.conv))
        if need > len(self.hashes):
            self.hashes = chain_hashes(self.conv[:need])
        return self.hashes


class Planner:
    """Plans requests against one store (see the module docstring).

    Args:
        store: the session store holding the records.
        owner: this worker's name (the lease's owner).
        lease_wait: seconds to wait for another worker's compaction of the same conversation.
        lease_seconds: how long a lease lasts (``None``: the store's default); a worker killed
            mid-compaction holds it this long.
        clock: a monotonic clock.
        sleep: waits between lease attempts.
        fast_path: read a request with no stored substitution straight from its JSON
            (:mod:`autocompact.serve.fastpath`); ``False`` converts every request (the
            benchmark's control).
    """

    def __init__(
        self,
        store: SessionStore,
        *,
        owner: str,
        lease_wait: float = 60.0,
        lease_seconds: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        fast_path: bool = True,
    ) -> None:
        self.fast_path = fast_path
        self.store = store
        self.owner = owner
        self.lease_wait = lease_wait
        self.lease_seconds = lease_seconds
        self.clock = clock
        self.sleep = sleep
        # Bounded caches: a long-running proxy sees many conversations.
        self._snapshots: OrderedDict[str, Snapshot] = OrderedDict()
        # Per conversation: the state the last request left, and the record it belongs to
        # (a failed compaction's breaker count, the calibration reported usage taught).
        self._states: OrderedDict[str, tuple[str, GuardState]] = OrderedDict()
        self._limiter = anyio.CapacityLimiter(8)
        # Per conversation: the last request's reading, which the next one resumes from.
        self._sizings: OrderedDict[str, Sizing] = OrderedDict()
        self._sizing_bytes = 0

    async def _store(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs), limiter=self._limiter)

    async def records(self, session_id: str) -> list[Record]:
        """The conversation's stored records (extending the last snapshot read)."""

        def load() -> Snapshot | None:
            cached = self._snapshots.get(session_id)
            if cached is None and not self.store.exists(session_id):
                return None
            return self.store.load(session_id, after=cached)

        snapshot = await self._store(load)
        if snapshot is None:
            return []
        _remember(self._snapshots, session_id, snapshot)
        found = (record_from_entry(e.turn_id, e.messages) for e in snapshot.entries)
        return [r for r in found if r is not None]

    async def commit(self, decision: Decision, protocol: str) -> None:
        """Store the decision's record (after the upstream accepted the request)."""
        record, identity = decision.record, decision.identity
        if record is None or identity is None:
            return
        meta = {"kind": "autocompact-serve", "protocol": protocol}
        await self._store(self.store.ensure, identity.session_id, meta)
        await self._store(
            self.store.append_turn,
            identity.session_id,
            record.turn_id,
            record_messages(record),
            owner=self.owner,
        )

    def learn(self, decision: Decision, prompt_tokens: int | None) -> None:
        """Teach the conversation's calibration the upstream's count of what was sent."""
        identity, state, sent = decision.identity, decision.state, decision.sent
        if identity is None or state is None or sent is None or not prompt_tokens:
            return
        learned = learn_from_usage(state, sent, prompt_tokens)
        _remember(self._states, identity.session_id, (decision.state_key, learned))

    async def release(self, decision: Decision) -> None:
        """Give the decision's lease back."""
        if decision.lease is not None:
            await self._store(self.store.release_lease, decision.lease)

    async def _lease(self, session_id: str, protocol: str) -> Lease | None:
        """The conversation's lease, or ``None`` when another worker held it too long."""
        await self._store(
            self.store.ensure, session_id, {"kind": "autocompact-serve", "protocol": protocol}
        )
        deadline = self.clock() + self.lease_wait
        # One owner per request: two requests of one worker are as distinct as two workers'.
        owner = f"{self.owner}/{secrets.token_hex(6)}"
        while True:
            lease = await self._store(
                self.store.acquire_lease, session_id, owner, self.lease_seconds
            )
            if lease is not None or self.clock() >= deadline:
                return lease  # type: ignore[no-any-return]
            await self.sleep(0.05)

    async def plan(
        self,
        *,
        protocol: WireProtocol,
        body: dict[str, Any],
        raw: bytes,
        headers: Mapping[str, str],
        window: int,
        provider: UpstreamProvider,
        reactive: bool = False,
    ) -> Decision:
        """The decision for one request (see the module docstring)."""
        key = protocol.messages_key
        messages = body.get(key)
        if not isinstance(messages, list):
            return Decision(body=raw, action="passthrough")
        lead = protocol.lead(messages)
        head, conv = messages[:lead], messages[lead:]
        identity = identify(headers, body, conv, protocol.name)
        if protocol.client_compaction(body, messages):
            return Decision(body=raw, action="client-compaction", identity=identity)
        records, fast = await self._records_and_fast(
            protocol, body, messages, raw, identity, window, reactive
        )
        if fast is not None and not records:
            return fast
        try:
            pending = protocol.convert(body, messages).pending_start - lead
        except ContentError as exc:
            logger.info("forwarding a request the proxy cannot read: %s", exc)
            return Decision(body=raw, action="passthrough", identity=identity)
        return await self._plan(
            protocol=protocol,
            body=body,
            raw=raw,
            head=head,
            conv=conv,
            pending=pending,
            chain=_Chain(conv),
            records=records,
            identity=identity,
            window=window,
            provider=provider,
            reactive=reactive,
            waited=False,
        )

    async def _records_and_fast(
        self,
        protocol: WireProtocol,
        body: dict[str, Any],
        messages: Sequence[Any],
        raw: bytes,
        identity: Identity,
        window: int,
        reactive: bool,
    ) -> tuple[list[Record], Decision | None]:
        """The conversation's records, and the fast decision read meanwhile (the store's
        answer comes from a worker thread while this one reads the request)."""
        if reactive or not self.fast_path:
            return await self.records(identity.session_id), None
        found: list[Any] = []

        async def fetch() -> None:
            try:
                found.append(await self.records(identity.session_id))
            except BaseException as exc:  # re-raised below, outside the task group
                found.append(exc)

        async with anyio.create_task_group() as group:
            group.start_soon(fetch)
            await anyio.sleep(0)  # the lookup goes to its thread before the reading starts
            fast = self._fast(protocol, body, messages, raw, identity, window)
        if isinstance(found[0], BaseException):
            raise found[0]
        return found[0], fast

    def _fast(
        self,
        protocol: WireProtocol,
        body: dict[str, Any],
        messages: Sequence[Any],
        raw: bytes,
        identity: Identity,
        window: int,
    ) -> Decision | None:
        """The decision for a request below *auto*, read from the decoded JSON
        (:mod:`autocompact.serve.fastpath`), resuming from the conversation's last reading;
        ``None``: the full path decides. Used only when the conversation has no record."""
        key = identity.session_id
        sizing = read(
            protocol.name, body, messages, previous=self._sizings.get(key), weight=len(raw)
        )
        if sizing is None:
            return None
        self._keep_sizing(key, sizing)
        learned = self._states.get(key)
        state = learned[1] if learned is not None and learned[0] == "" else GuardState()
        tokens, sent = estimate(sizing.stats, state)
        tier = tier_of(tokens, compute_thresholds(window))
        if tier in _AT_AUTO:
            return None
        return Decision(
            body=raw,
            action="forward",
            identity=identity,
            tokens=tokens,
            tier=tier,
            state=state,
            sent=sent,
        )

    def _keep_sizing(self, key: str, sizing: Sizing) -> None:
        """Keep the conversation's last reading, the oldest dropped past :data:`SIZING_BYTES`."""
        old = self._sizings.pop(key, None)
        if old is not None:
            self._sizing_bytes -= old.weight
        if sizing.weight > SIZING_BYTES:
            return
        self._sizings[key] = sizing
        self._sizing_bytes += sizing.weight
        while self._sizing_bytes > SIZING_BYTES:
            _, dropped = self._sizings.popitem(last=False)
            self._sizing_bytes -= dropped.weight

    async def _plan(
        self,
        *,
        protocol: WireProtocol,
        body: dict[str, Any],
        raw: bytes,
        head: Sequence[Any],
        conv: Sequence[Any],
        pending: int,
        chain: _Chain,
        records: Sequence[Record],
        identity: Identity,
        window: int,
        provider: UpstreamProvider,
        reactive: bool,
        waited: bool,
    ) -> Decision:
        key = protocol.messages_key
        record = best_record(records, chain.upto(records, pending), pending)
        state_key = "" if record is None else record.prefix_hash
        learned = self._states.get(identity.session_id)
        if record is None:
            current, state = list(conv), GuardState()
            as_sent = raw
        else:
            current = json.loads(record.replacement) + list(conv[record.prefix_len :])
            state = GuardState.from_dict(record.state)
            as_sent = splice_body(
                body, key, record.replacement, conv[record.prefix_len :], head=head
            )
        if learned is not None and learned[0] == state_key:
            state = learned[1]
        action = "forward" if record is None else "substituted"
        try:
            converted = protocol.convert(body, [*head, *current])
        except ContentError as exc:
            logger.info("forwarding a request the proxy cannot read: %s", exc)
            return Decision(body=as_sent, action=action, identity=identity)
        guard = ContextGuard(
            context_window=window,
            compression=CompressionService(provider, native_compaction=False),
        )
        options: dict[str, Any] = {
            "system_instruction": converted.system,
            "tools": converted.tools,
            "state": state,
        }
        try:
            measured = guard.guarantee(converted.messages, **options)
        except AutocompactError as exc:
            logger.info("forwarding a request the engine cannot measure: %s", exc)
            return Decision(body=as_sent, action=action, identity=identity)
        tier = tier_of(measured.tokens, compute_thresholds(window))
        base = Decision(
            body=as_sent,
            action=action,
            identity=identity,
            tokens=measured.tokens,
            tier=tier,
            state=state,
            state_key=state_key,
            sent=request_stats(
                converted.messages, system_instruction=converted.system, tools=converted.tools
            ),
        )
        if tier not in _AT_AUTO and not reactive:
            return base
        lease = await self._lease(identity.session_id, protocol.name)
        if lease is None:  # another worker's compaction took too long: the guarantee alone
            return self._finish(
                protocol, converted, base, measured, current, conv, pending, head, body
            )
        if not waited:
            fresh = await self.records(identity.session_id)
            newer = best_record(fresh, chain.upto(fresh, pending), pending)
            if newer is not None and (record is None or newer.prefix_len > record.prefix_len):
                # Another worker compacted this conversation while we waited: use its record.
                await self._store(self.store.release_lease, lease)
                return await self._plan(
                    protocol=protocol, body=body, raw=raw, head=head, conv=conv,
                    pending=pending, chain=chain, records=fresh, identity=identity, window=window,
                    provider=provider, reactive=reactive, waited=True,
                )  # fmt: skip
        calls = provider.calls
        try:
            result = await guard.arun(converted.messages, reactive=reactive, **options)
        except BaseException:
            await self._store(self.store.release_lease, lease)
            raise
        decision = self._finish(
            protocol, converted, base, result, current, conv, pending, head, body
        )
        if decision.record is None:
            _remember(self._states, identity.session_id, (state_key, result.state))
            await self._store(self.store.release_lease, lease)
            return replace(decision, side_queries=provider.calls - calls)
        return replace(decision, lease=lease, side_queries=provider.calls - calls)

    def _finish(
        self,
        protocol: WireProtocol,
        converted: Converted,
        base: Decision,
        result: GuardResult,
        current: Sequence[Any],
        conv: Sequence[Any],
        pending: int,
        head: Sequence[Any],
        body: dict[str, Any],
    ) -> Decision:
        """The body and record for a guard's result."""
        key = protocol.messages_key
        tail = conv[pending:]
        source = current[: len(current) - len(tail)]
        record = None
        if result.compacted and pending > 0:
            replacement = build_replacement(protocol, result.history[:-1], source)
            record = Record(
                prefix_len=pending,
                prefix_hash=chain_hashes(conv[:pending])[-1],
                replacement=replacement,
                state=result.state.to_dict(),
                tokens_before=result.tokens,
            )
        sent_stats = request_stats(
            result.request,
            system_instruction=converted.system,
            tools=converted.tools,
        )
        base = replace(
            base,
            state=result.state,
            state_key=record.prefix_hash if record is not None else base.state_key,
            sent=sent_stats,
        )
        if result.trimmed:
            trimmed = build_replacement(protocol, result.request[:-1], source)
            sent = splice_body(body, key, trimmed, tail, head=head)
            return replace(base, body=sent, action="trimmed", record=record)
        if record is not None:
            sent = splice_body(body, key, record.replacement, tail, head=head)
            return replace(base, body=sent, action="compacted", record=record)
        if result.compactions:
            return replace(base, action="compaction-failed")
        return base

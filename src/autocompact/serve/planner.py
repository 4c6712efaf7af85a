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
from dataclasses import replace
from typing import Any

import anyio

from autocompact import CompressionService
from autocompact.compaction.accounting import BreakerState, record_refused
from autocompact.compaction.split import COMPRESSION_PRESERVE_THRESHOLD
from autocompact.errors import AutocompactError, ContentError
from autocompact.guard import (
    ContextGuard,
    GuardState,
    learn_from_usage,
    request_stats,
)
from autocompact.serve.decision import Decision, finish, untrimmed
from autocompact.serve.engine_log import (
    compactions_refused,
    engine_log,
    over_window_sent,
    substitution_refused,
    trims_refused_logged,
)
from autocompact.serve.identity import Identity, identify
from autocompact.serve.protocol import WireProtocol
from autocompact.serve.readings import AT_AUTO, Readings
from autocompact.serve.shared import (
    SharedState,
    calibration_moved,
    current_state,
    state_messages,
    state_turn_id,
)
from autocompact.serve.substitution import (
    PrefixChain,
    Record,
    best_record,
    record_messages,
    refusal_messages,
    trims_refused,
    trims_refused_turn,
    usable_records,
)
from autocompact.serve.upstream import UpstreamProvider
from autocompact.serve.wire import splice_body
from autocompact.sessions.stores.base import Lease, SessionStore, Snapshot
from autocompact.thresholds import compute_thresholds, tier_of

__all__ = ["Decision", "Planner"]

logger = logging.getLogger("autocompact.serve")
CACHE_ENTRIES = 1024
"""How many conversations' snapshots a worker keeps in memory."""

_STATE_WRITE_ATTEMPTS = 5
_FOLLOW_WAIT = 5.0  # seconds a request waits for what the conversation's last response taught


def _nothing() -> None:
    """Nothing to finish (a request of no conversation)."""


def _state_of(shared: SharedState | None) -> GuardState:
    """The carried state a shared state holds (the initial one when none, or unreadable)."""
    if shared is None:
        return GuardState()
    try:
        return GuardState.from_dict(shared.state)
    except ContentError as exc:
        logger.warning("ignoring a stored state that does not read: %s", exc)
        return GuardState()


def _breaker(state: GuardState) -> tuple[int, int | None]:
    return state.consecutive_failures, state.hold_until


def _remember(cache: OrderedDict[str, Any], key: str, value: Any) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > CACHE_ENTRIES:
        cache.popitem(last=False)


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
        keep_share, summary_target_tokens: the compaction's settings (``ContextGuard``'s).
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
        keep_share: float = COMPRESSION_PRESERVE_THRESHOLD,
        summary_target_tokens: int | None = None,
    ) -> None:
        self.fast_path = fast_path
        self.keep_share = keep_share
        self.summary_target_tokens = summary_target_tokens
        self.store = store
        self.owner = owner
        self.lease_wait = lease_wait
        self.lease_seconds = lease_seconds
        self.clock = clock
        self.sleep = sleep
        # Bounded cache: a long-running proxy sees many conversations.
        self._snapshots: OrderedDict[str, Snapshot] = OrderedDict()
        self._limiter = anyio.CapacityLimiter(8)
        # Per conversation: the last request's reading, which the next one resumes from.
        self.readings = Readings()
        # Per conversation: the learning that follows a response, while it runs.
        self._following: dict[str, anyio.Event] = {}

    async def _store(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs), limiter=self._limiter)

    async def _load(self, session_id: str) -> Snapshot | None:
        """The conversation as stored now (extending the last snapshot read)."""

        def load() -> Snapshot | None:
            cached = self._snapshots.get(session_id)
            if cached is None and not self.store.exists(session_id):
                return None
            return self.store.load(session_id, after=cached)

        snapshot: Snapshot | None = await self._store(load)
        if snapshot is not None:
            _remember(self._snapshots, session_id, snapshot)
        return snapshot

    async def records(self, session_id: str) -> list[Record]:
        """The conversation's stored records."""
        return (await self._read(session_id))[0]

    async def _read(self, session_id: str) -> tuple[list[Record], SharedState | None]:
        """The conversation's stored records and its current shared state."""
        snapshot = await self._load(session_id)
        if snapshot is None:
            return [], None
        return usable_records(snapshot.entries), current_state(snapshot.entries)

    async def _write_state(
        self,
        session_id: str,
        protocol: str,
        change: Callable[[GuardState], GuardState | None],
    ) -> GuardState | None:
        """Append ``change(current state)`` to the conversation's state chain (module
        :mod:`autocompact.serve.shared`); when another worker wrote first, read it and again.
        The state written (``None``: none)."""
        meta = {"kind": "autocompact-serve", "protocol": protocol}
        await self._store(self.store.ensure, session_id, meta)
        for _ in range(_STATE_WRITE_ATTEMPTS):
            _, shared = await self._read(session_id)
            new = change(_state_of(shared))
            if new is None:
                return None
            data = new.to_dict()
            result = await self._store(
                self.store.append_turn,
                session_id,
                state_turn_id(shared.seq if shared is not None else 0),
                state_messages(data),
                calibration=data["calibration"],
                owner=self.owner,
            )
            if not result.duplicate:
                return new
        logger.warning("the shared state of %s moved under every write; not written", session_id)
        return None

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

    async def refuse(self, decision: Decision, status: int) -> None:
        """Stop making the rewrite ``decision`` went out with: the upstream refused it (the
        client's own request, sent then, got ``status``). A stored substitution is marked
        refused in the store, so no worker sends it again; logged once (a mark already there
        is a duplicate). A fresh compaction counts as a failed one on the conversation's
        breaker (:meth:`_count_refused`). A request only trimmed marks the conversation's
        trimmed requests refused (:meth:`_refuse_trims`)."""
        if decision.attempts:
            await self._count_refused(decision)
        if decision.trimmed_only:
            await self._refuse_trims(decision, status)
        record, identity = decision.used, decision.identity
        if record is None or identity is None:
            return
        marked = await self._store(
            self.store.append_turn,
            identity.session_id,
            record.refused_id,
            refusal_messages(record, status),
            owner=self.owner,
        )
        if not marked.duplicate:
            substitution_refused(identity.session_id, record.prefix_len, status)

    async def _refuse_trims(self, decision: Decision, status: int) -> None:
        """Mark in the store that the upstream refuses the conversation's trimmed requests
        (:meth:`_untrimmed`); logged once (a mark already there is a duplicate)."""
        if decision.identity is None:
            return
        key, turn = decision.identity.session_id, trims_refused_turn(status)
        try:
            marked = await self._store(self.store.append_turn, key, *turn, owner=self.owner)
        except AutocompactError as exc:
            logger.error("could not store that the trimmed requests are refused: %s", exc)
            return
        if not marked.duplicate:
            trims_refused_logged(key, status)

    async def _untrimmed(self, decision: Decision, base: Decision) -> Decision:
        """``decision``, or :func:`untrimmed` when it is only trimmed and the upstream refuses
        the conversation's trimmed requests (:meth:`_refuse_trims`)."""
        if decision.trimmed_only and decision.identity is not None:
            snapshot = await self._load(decision.identity.session_id)
            if snapshot is not None and trims_refused(snapshot.entries):
                return untrimmed(decision, base)
        return decision

    async def _count_refused(self, decision: Decision) -> None:
        """Count the compactions ``decision`` made, which the upstream refused, as failed ones
        in the conversation's shared state (:func:`record_refused`): after the breaker's limit
        no worker compacts it automatically (as when summaries fail). Its opening is logged
        once, with why; a store that fails is logged."""
        identity, thresholds = decision.identity, compute_thresholds(decision.window)
        before: list[GuardState] = []

        def change(current: GuardState) -> GuardState:
            before[:] = [current]
            failures, hold = _breaker(current)
            breaker = BreakerState(consecutive_failures=failures, hold_until=hold)
            counted = record_refused(breaker, decision.attempts, thresholds, tokens=decision.tokens)
            failures, hold = counted.consecutive_failures, counted.hold_until
            return replace(current, consecutive_failures=failures, hold_until=hold)

        try:
            if identity is not None:
                key = identity.session_id
                written = await self._write_state(key, decision.protocol, change)
                if written is not None and written.breaker_open and not before[0].breaker_open:
                    compactions_refused(key, written.consecutive_failures)
        except AutocompactError as exc:
            logger.error("could not store the breaker's count: %s", exc)

    async def learn(self, decision: Decision, prompt_tokens: int | None) -> None:
        """Teach the conversation's calibration, in the store, the upstream's count of what
        was sent (written only when it moved: :func:`~autocompact.serve.shared.calibration_moved`;
        a store that fails is logged, the response is not failed for it)."""
        if not prompt_tokens:
            return
        decision = self.measured(decision)
        identity, state, sent = decision.identity, decision.state, decision.sent
        if identity is None or state is None or sent is None:
            return
        learned = learn_from_usage(state, sent, prompt_tokens).calibration
        if not calibration_moved(state.calibration, learned):
            return

        def change(current: GuardState) -> GuardState | None:
            if not calibration_moved(current.calibration, learned):
                return None
            return replace(current, calibration=learned)

        try:
            await self._write_state(identity.session_id, decision.protocol, change)
        except AutocompactError as exc:
            logger.error("could not store the calibration: %s", exc)

    def following(self, decision: Decision) -> Callable[[], None]:
        """Mark the decision's conversation as learning from its response, until the returned
        function is called: marked before the response ends, so this worker's next request
        of the conversation (which the client sends after the end) waits for it and sees
        what it learned."""
        key = decision.identity.session_id if decision.identity is not None else None
        if key is None:
            return _nothing
        done = self._following[key] = anyio.Event()

        def finished() -> None:
            done.set()
            if self._following.get(key) is done:
                del self._following[key]

        return finished

    async def _followed(self, key: str) -> None:
        """Wait for the learning from the conversation's last response, if it still runs
        (at most :data:`_FOLLOW_WAIT` seconds: a store that hangs delays no request longer)."""
        running = self._following.get(key)
        if running is not None:
            with anyio.move_on_after(_FOLLOW_WAIT):
                await running.wait()

    @staticmethod
    def measured(decision: Decision) -> Decision:
        """The decision with its exact estimate (made now, once, when it was decided on
        bounds: :mod:`autocompact.serve.readings`)."""
        if decision.reading is None:
            return decision
        tokens, sent = decision.reading.exact()
        return replace(decision, tokens=tokens, sent=sent, reading=None)

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
        await self._followed(identity.session_id)
        client = Decision(body=raw, action="client-compaction", identity=identity)
        # The messages are searched for a compaction block only when the fast reading did not
        # read them all (it reads no block it does not know): one walk over them, not two.
        if protocol.client_compaction(body, messages, read=True):
            return client
        records, shared, fast, read_all = await self._records_and_fast(
            protocol, body, messages, raw, identity, window, reactive
        )
        if not read_all and protocol.client_compaction(body, messages):
            return client
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
            chain=PrefixChain(conv),
            records=records,
            shared=shared,
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
    ) -> tuple[list[Record], SharedState | None, Decision | None, bool]:
        """The conversation's records and shared state, the fast decision read meanwhile (the
        store's answer comes from a worker thread while this one reads the request), and
        whether the fast reading read every message."""
        if reactive or not self.fast_path:
            return (*await self._read(identity.session_id), None, False)
        found: list[Any] = []

        async def fetch() -> None:
            try:
                found.append(await self._read(identity.session_id))
            except BaseException as exc:  # re-raised below, outside the task group
                found.append(exc)

        async with anyio.create_task_group() as group:
            group.start_soon(fetch)
            await anyio.sleep(0)  # the lookup goes to its thread before the reading starts
            key = identity.session_id
            sizing = self.readings.read(key, protocol.name, body, messages, len(raw))
        if isinstance(found[0], BaseException):
            raise found[0]
        records, shared = found[0]
        if sizing is None:
            return records, shared, None, False
        if records:  # the full path decides
            return records, shared, None, True
        state = _state_of(shared)
        reading = self.readings.decide(key, sizing, state, window)
        if reading is None:
            return records, shared, None, True
        fast = Decision(
            body=raw,
            action="forward",
            identity=identity,
            tier=reading.tier,
            state=state,
            protocol=protocol.name,
            reading=reading,
        )
        return records, shared, fast, True

    async def _plan(
        self,
        *,
        protocol: WireProtocol,
        body: dict[str, Any],
        raw: bytes,
        head: Sequence[Any],
        conv: Sequence[Any],
        pending: int,
        chain: PrefixChain,
        records: Sequence[Record],
        shared: SharedState | None,
        identity: Identity,
        window: int,
        provider: UpstreamProvider,
        reactive: bool,
        waited: bool,
    ) -> Decision:
        key = protocol.messages_key
        record = best_record(records, chain.upto(records, pending), pending)
        # The conversation's state, whichever worker left it (module autocompact.serve.shared).
        state = _state_of(shared)
        if record is None:
            current = list(conv)
            as_sent = raw
        else:
            current = json.loads(record.replacement) + list(conv[record.prefix_len :])
            as_sent = splice_body(
                body, key, record.replacement, conv[record.prefix_len :], head=head
            )
        action = "forward" if record is None else "substituted"
        try:
            converted = protocol.convert(body, [*head, *current])
        except ContentError as exc:
            logger.info("forwarding a request the proxy cannot read: %s", exc)
            return Decision(body=as_sent, action=action, identity=identity, used=record)
        guard = ContextGuard(
            context_window=window,
            compression=CompressionService(provider, native_compaction=False),
            keep_share=self.keep_share,
            summary_target_tokens=self.summary_target_tokens,
            hooks=[engine_log(identity.session_id)],
        )
        options: dict[str, Any] = {
            "system_instruction": converted.counted_system,
            "tools": converted.tools,
            "state": state,
            "over_window_ok": True,  # compacted when that brings it under, else sent as it is
        }
        try:
            measured = guard.guarantee(converted.guarded, **options)
        except AutocompactError as exc:
            logger.info("forwarding a request the engine cannot measure: %s", exc)
            return Decision(body=as_sent, action=action, identity=identity, used=record)
        tier = tier_of(measured.tokens, compute_thresholds(window))
        base = Decision(
            body=as_sent,
            action=action,
            identity=identity,
            used=record,
            tokens=measured.tokens,
            tier=tier,
            state=state,
            protocol=protocol.name,
            sent=request_stats(
                converted.messages, system_instruction=converted.system, tools=converted.tools
            ),
        )
        if tier not in AT_AUTO and not reactive and measured.over_window is None:
            return base
        lease = await self._lease(identity.session_id, protocol.name)
        if lease is None:  # another worker's compaction took too long: the guarantee alone
            over_window_sent(identity.session_id, measured.over_window)
            found = finish(protocol, converted, base, measured, current, conv, pending, head, body)
            return await self._untrimmed(found, base)
        calls = provider.calls
        held = True  # until given back: whatever fails while it is held gives it back
        try:
            if not waited:
                fresh, fresh_shared = await self._read(identity.session_id)
                newer = best_record(fresh, chain.upto(fresh, pending), pending)
                if newer is not None and (record is None or newer.prefix_len > record.prefix_len):
                    # Another worker compacted this conversation while we waited: use its record.
                    held = False
                    await self._store(self.store.release_lease, lease)
                    return await self._plan(
                        protocol=protocol, body=body, raw=raw, head=head, conv=conv,
                        pending=pending, chain=chain, records=fresh, shared=fresh_shared,
                        identity=identity, window=window, provider=provider, reactive=reactive,
                        waited=True,
                    )  # fmt: skip
            result = await guard.arun(converted.guarded, reactive=reactive, **options)
            over_window_sent(identity.session_id, result.over_window)
            decision = finish(protocol, converted, base, result, current, conv, pending, head, body)
        except BaseException:
            if held:  # (shielded: a client that hung up cancels the request, not this)
                with anyio.CancelScope(shield=True):
                    await self._store(self.store.release_lease, lease)
            raise
        if decision.record is None:
            try:
                if result.compactions or _breaker(result.state) != _breaker(state):
                    # A failed compaction: the breaker's count and hold, for every worker.
                    await self._write_state(
                        identity.session_id,
                        protocol.name,
                        lambda now: replace(result.state, calibration=now.calibration),
                    )
            except AutocompactError as exc:  # the request still goes out as the guard made it
                logger.error("could not store the breaker's count: %s", exc)
            finally:
                await self._store(self.store.release_lease, lease)
            decision = replace(decision, side_queries=provider.calls - calls)
            return await self._untrimmed(decision, base)
        return replace(
            decision,
            lease=lease,
            side_queries=provider.calls - calls,
            attempts=result.compactions,
            window=window,
        )

"""What the proxy sends for one request: the planner's :class:`Decision`, and the one a guard's
result makes (:func:`finish`). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from autocompact.compaction.plan import CompressionInfo, CompressionStatus
from autocompact.content import CharStats
from autocompact.guard import GuardResult, GuardState, request_stats
from autocompact.serve.identity import Identity
from autocompact.serve.protocol import Converted, WireProtocol
from autocompact.serve.readings import Reading
from autocompact.serve.substitution import Record, build_replacement
from autocompact.serve.wire import chain_hashes, splice_body
from autocompact.sessions.stores.base import Lease

__all__ = ["TRIM_REFUSED", "Decision", "finish", "untrimmed"]

TRIM_REFUSED = "trim-refused"
"""The action of a request the guarantee would have trimmed, sent as the client sent it: the
upstream refuses the conversation's trimmed requests (:func:`untrimmed`)."""


@dataclass(frozen=True, kw_only=True)
class Decision:
    """What the app sends for one request.

    Attributes:
        body: the bytes to send (the client's own bytes when nothing changed).
        action: ``forward``, ``substituted``, ``compacted``, ``trimmed``, ``client-compaction``,
            ``passthrough`` (a request the proxy does not read), ``compaction-failed``,
            ``trim-refused`` (the guarantee would have trimmed it; sent as the client's, the
            upstream refuses this conversation's trimmed requests).
        identity: the conversation, when one was read.
        tokens: the engine's estimate of what the client sent (after substitution).
        tier: the ladder's tier of that estimate.
        record: a compaction to store once the upstream accepts the request.
        lease: the conversation's lease, to give back when the request is done.
        side_queries: how many summary requests this decision made.
        state: the engine's state for what was sent (what reported usage teaches).
        protocol: the wire protocol's name (the store session's meta).
        sent: the character statistics of what was sent (``None``: not read).
        reading: a request decided before its exact estimate was made, which ``tokens`` and
            ``sent`` are then not yet (``Planner.measured`` makes it).
        used: the stored substitution the body went out with (``None``: none), which no
            request uses once the upstream refused it (``Planner.refuse``).
        attempts: the compaction attempts made for this request, which count as failed ones
            for the conversation's breaker when the upstream refuses the body they made
            (``Planner.refuse``).
        window: the context window the request was planned on (what ``attempts`` are
            counted against).
        trimmed: the body holds the guarantee's trimming of the request.
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
    protocol: str = ""
    sent: CharStats | None = None
    reading: Reading | None = None
    used: Record | None = None
    attempts: tuple[CompressionInfo, ...] = ()
    window: int = 0
    trimmed: bool = False

    @property
    def compacted(self) -> bool:
        """Whether the request went out with a substitution or a new compaction."""
        return self.action in ("substituted", "compacted")

    @property
    def refusable(self) -> bool:
        """Whether the body holds a rewrite the proxy stops making once the upstream refuses
        it: a stored substitution (marked refused), a fresh compaction (counted failed) or,
        with neither, the guarantee's trimming (the conversation's trims marked refused)."""
        return self.used is not None or self.trimmed or self._compacted_anew

    @property
    def trimmed_only(self) -> bool:
        """Whether the body's only rewrite is the guarantee's trimming (what the upstream
        refused, when it refuses the body, is the trim)."""
        return self.trimmed and self.used is None and not self._compacted_anew

    @property
    def _compacted_anew(self) -> bool:
        return any(info.status is CompressionStatus.COMPRESSED for info in self.attempts)


def finish(
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
    """The decision for a guard's ``result`` on a request planned as ``base``: its body (the
    compacted or trimmed messages spliced into the client's ``body``) and the record to store."""
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
        system_instruction=converted.counted_system,
        tools=converted.tools,
    )
    base = replace(
        base,
        state=result.state,
        sent=sent_stats,
    )
    if result.trimmed:
        trimmed = build_replacement(protocol, result.request[:-1], source)
        sent = splice_body(body, key, trimmed, tail, head=head)
        return replace(base, body=sent, action="trimmed", record=record, trimmed=True)
    if record is not None:
        sent = splice_body(body, key, record.replacement, tail, head=head)
        return replace(base, body=sent, action="compacted", record=record)
    if result.compactions:
        return replace(base, action="compaction-failed")
    return base


def untrimmed(decision: Decision, base: Decision) -> Decision:
    """The request ``decision`` trimmed, as the client sent it (``base``: the decision before
    the guard ran, with what the client sent measured), for a conversation whose trimmed
    requests the upstream refuses while it takes (or refuses only as too long) the client's
    own: sending the trimmed one first would cost a refusal and a second request every turn."""
    return replace(decision, body=base.body, action=TRIM_REFUSED, sent=base.sent, trimmed=False)

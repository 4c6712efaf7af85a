"""What the proxy sends for one request: the planner's :class:`Decision`. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from autocompact.content import CharStats
from autocompact.guard import GuardState
from autocompact.serve.identity import Identity
from autocompact.serve.readings import Reading
from autocompact.serve.substitution import Record
from autocompact.sessions.stores.base import Lease

__all__ = ["Decision"]


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
        protocol: the wire protocol's name (the store session's meta).
        sent: the character statistics of what was sent (``None``: not read).
        reading: a request decided before its exact estimate was made, which ``tokens`` and
            ``sent`` are then not yet (``Planner.measured`` makes it).
        used: the stored substitution the body went out with (``None``: none), which no
            request uses once the upstream refused it (``Planner.refuse``).
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

    @property
    def compacted(self) -> bool:
        """Whether the request went out with a substitution or a new compaction."""
        return self.action in ("substituted", "compacted")

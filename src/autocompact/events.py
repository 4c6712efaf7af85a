"""Frozen event records the chat sessions emit to hooks (STYLE habit 5).

A hook is any callable taking one :data:`Event`. Hooks run synchronously, in registration order;
an exception in a hook is logged under the ``autocompact`` logger and does not stop the send.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeAlias

from autocompact.compaction.plan import CompressionInfo, CompressionTrigger
from autocompact.thresholds import Tier

__all__ = [
    "BreakerClosed",
    "BreakerOpened",
    "CompactionCancelled",
    "CompactionFailed",
    "CompactionOutgrown",
    "CompactionSkipped",
    "CompactionStarted",
    "CompactionSucceeded",
    "Event",
    "Hook",
    "RequestTrimmed",
    "ThresholdCrossed",
    "WindowLearned",
]


@dataclass(frozen=True, kw_only=True)
class ThresholdCrossed:
    """The pre-send count moved into another tier (up or down).

    ``tokens`` is the estimate of the next request with the pending message (a user message,
    or the tool results a framework is about to send); after a compaction, of the new history
    with that message.
    """

    previous: Tier
    current: Tier
    tokens: int
    kind: Literal["threshold_crossed"] = "threshold_crossed"


@dataclass(frozen=True, kw_only=True)
class CompactionStarted:
    """A compaction attempt is about to run.

    Every one ends with exactly one :class:`CompactionSucceeded`, :class:`CompactionFailed`,
    :class:`CompactionSkipped` or :class:`CompactionCancelled`.
    """

    trigger: CompressionTrigger
    tokens: int
    kind: Literal["compaction_started"] = "compaction_started"


@dataclass(frozen=True, kw_only=True)
class CompactionSucceeded:
    """A compaction replaced the history (``info.method`` says how)."""

    info: CompressionInfo
    kind: Literal["compaction_succeeded"] = "compaction_succeeded"

    @property
    def audited(self) -> int:
        """How many of the ledger's constraints and latest facts the summary was checked for."""
        return self.info.audited

    @property
    def restored(self) -> int:
        """How many of them a model's summary lacked and were appended verbatim (issue 22)."""
        return self.info.restored


@dataclass(frozen=True, kw_only=True)
class CompactionFailed:
    """A compaction attempt failed; the history is unchanged (``info.error`` says why)."""

    info: CompressionInfo
    kind: Literal["compaction_failed"] = "compaction_failed"


@dataclass(frozen=True, kw_only=True)
class CompactionSkipped:
    """A compaction attempt found nothing to do; the history is unchanged (``info.error`` says
    why: the history is too short to cut, the only large item is the message being sent, a
    summary cannot buy room, another worker changed the history first).

    Not a failure: the breaker does not count it (one that cannot buy room starts a hold,
    ``info.ineffective``).
    """

    info: CompressionInfo
    kind: Literal["compaction_skipped"] = "compaction_skipped"


@dataclass(frozen=True, kw_only=True)
class CompactionCancelled:
    """A compaction attempt ended without an outcome; the history is unchanged.

    Every :class:`CompactionStarted` ends with exactly one :class:`CompactionSucceeded`,
    :class:`CompactionFailed`, :class:`CompactionSkipped` or :class:`CompactionCancelled`.
    This one is emitted when the attempt is interrupted (``KeyboardInterrupt``:
    ``reason="interrupted"``), its task is cancelled (``asyncio.CancelledError``, or the flow
    closed: ``"cancelled"``) or an exception no failure status covers escapes it (``"error"``,
    with ``error`` naming it). The exception then propagates to the caller as before; the
    breaker does not count it.
    """

    trigger: CompressionTrigger
    reason: Literal["interrupted", "cancelled", "error"]
    error: str | None = None
    kind: Literal["compaction_cancelled"] = "compaction_cancelled"


@dataclass(frozen=True, kw_only=True)
class CompactionOutgrown:
    """A compaction is needed again fewer than 5 calls after an effective one: that one is
    judged outgrown, counted like an ineffective compaction, and its hold starts from the count
    it left (SPEC §10.2; design decision 63).

    Attributes:
        calls: calls made since that compaction.
        compacted_to: the count it left.
        tokens: the count now.
        hold_until: no automatic side query while the count is below this.
    """

    calls: int
    compacted_to: int
    tokens: int
    hold_until: int
    kind: Literal["compaction_outgrown"] = "compaction_outgrown"


@dataclass(frozen=True, kw_only=True)
class BreakerOpened:
    """Too many unforced failures in a row: automatic compaction pauses."""

    consecutive_failures: int
    kind: Literal["breaker_opened"] = "breaker_opened"


@dataclass(frozen=True, kw_only=True)
class BreakerClosed:
    """A compaction succeeded while the breaker was open: automatic compaction resumes."""

    previous_failures: int
    kind: Literal["breaker_closed"] = "breaker_closed"


@dataclass(frozen=True, kw_only=True)
class RequestTrimmed:
    """The last-resort fallback left the oldest turns out of one request (never the history).

    ``tokens_before`` is the request's size on the provider's scale with a margin, which can
    reach *hard* while the ladder's estimate is below it; ``reason`` says which compaction ran
    before the request and what it did, or that none ran and why.
    """

    dropped_messages: int
    tokens_before: int
    tokens_after: int
    reason: str
    kind: Literal["request_trimmed"] = "request_trimmed"


@dataclass(frozen=True, kw_only=True)
class WindowLearned:
    """The server stated its context window in an overflow error, smaller than the window the
    session had (an assumed or wrong one): the session uses the server's from now on."""

    previous: int
    context_window: int
    kind: Literal["window_learned"] = "window_learned"


Event: TypeAlias = (
    ThresholdCrossed
    | CompactionStarted
    | CompactionSucceeded
    | CompactionFailed
    | CompactionSkipped
    | CompactionCancelled
    | CompactionOutgrown
    | BreakerOpened
    | BreakerClosed
    | RequestTrimmed
    | WindowLearned
)
Hook: TypeAlias = Callable[[Event], None]

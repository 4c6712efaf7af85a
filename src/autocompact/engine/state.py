"""The conversation's state: one record of everything the engine carries between sends.

:class:`ConversationState` is that record: the history (an append-only
:class:`~autocompact.history.MessageLog` and its character statistics), the provider's last
count and what was added since, the breaker's count and hold, the calibration, the growth log,
the last noted tier, and what a "too long" rejection or a count taught about the provider's
scale. Every driver keeps it where its world keeps state: a chat session in memory (and a
store), a framework in its own checkpoint, metadata or session record.

:class:`CarriedState` is the part of the record that outlives a request when the driver keeps
the history itself (the breaker's count and hold, the calibration, the growth log): frozen,
with a JSON form (``to_dict``/``from_dict``) that frameworks store next to their history.
``autocompact.guard.GuardState`` is this class.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from autocompact.compaction.accounting import BreakerState, GrowthLog, growth_from_dict
from autocompact.content import CharStats, Message
from autocompact.errors import ConfigError, ContentError
from autocompact.estimation import Calibration, content_stats
from autocompact.history import MessageLog
from autocompact.thresholds import MAX_CONSECUTIVE_FAILURES, Tier
from autocompact.validation import check_count, scan_history

if TYPE_CHECKING:
    from autocompact.sessions.stores.base import Snapshot

__all__ = ["CarriedState", "ConversationState", "adopt"]

logger = logging.getLogger("autocompact")


@dataclass(frozen=True, kw_only=True)
class CarriedState:
    """What the engine carries from one request to the next for a driver that keeps the history.

    Attributes:
        consecutive_failures: the breaker's count (automatic failures in a row).
        hold_until: no automatic side query while the count is below this (SPEC §10.2/§10.7;
            ``None``: no hold).
        calibration: what reported prompt sizes taught about this model's tokenizer.
        growth: the recent growth of the count and the last compaction's age (docs/design.md,
            decision 63).
    """

    consecutive_failures: int = 0
    hold_until: int | None = None
    calibration: Calibration = field(default_factory=Calibration)
    growth: GrowthLog = field(default_factory=GrowthLog)

    @property
    def breaker_open(self) -> bool:
        """Whether automatic compaction is paused."""
        return self.consecutive_failures >= MAX_CONSECUTIVE_FAILURES

    def to_dict(self) -> dict[str, Any]:
        """The JSON form a framework stores with its history."""
        return {
            "consecutive_failures": self.consecutive_failures,
            "hold_until": self.hold_until,
            "calibration": self.calibration.to_dict(),
            "growth": self.growth.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: object) -> CarriedState:
        """A state from its JSON form (``None`` gives the initial state).

        Raises:
            ContentError: the value is not a state; the message names the field.
        """
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise ContentError(f"autocompact state must be an object, got {type(data).__name__}")
        failures = data.get("consecutive_failures", 0)
        if isinstance(failures, bool) or not isinstance(failures, int) or failures < 0:
            raise ContentError(
                f"autocompact state field 'consecutive_failures' must be a count ≥ 0, "
                f"got {failures!r}"
            )
        hold = data.get("hold_until")
        if hold is not None and (isinstance(hold, bool) or not isinstance(hold, int) or hold < 0):
            raise ContentError(
                f"autocompact state field 'hold_until' must be a count ≥ 0 or null, got {hold!r}"
            )
        return cls(
            consecutive_failures=failures,
            hold_until=hold,
            calibration=Calibration.from_dict(data.get("calibration")),
            growth=growth_from_dict(data.get("growth")),
        )


@dataclass(kw_only=True, eq=False)
class ConversationState:
    """Everything the engine knows about one conversation between sends (one record).

    Build it with :meth:`start`; the engine's flows change it only when a step completes
    (a failed or cancelled step leaves it as it was).

    Attributes:
        log: the history, append-only (a send appends the turn, never copies the history).
        history_stats: the history's character statistics, kept up to date turn by turn so
            that no send walks the whole history (recomputed when a compaction replaces it).
        last_prompt_token_count: the provider's last count (0: unknown, the cold path).
        since_count: tokens appended after that count (the model's reply it did not count).
        consecutive_failures: the breaker's count.
        hold_until: no automatic side query while the count is below this (``None``: no hold).
        calibration: what reported counts taught about this provider's tokenizer.
        growth: the recent growth of the count and the last compaction's age.
        tier: the tier the last threshold event reported (the next crossing starts from it).
        last_ratio: provider tokens per plain-estimate token of the last count (SPEC §10.6).
        scale_floor: a lower bound on that ratio learned from a "too long" rejection.
        store_mark: the stored version and the log's mark at the last :func:`adopt` (``None``:
            never adopted, or the log was replaced since): what lets the next adoption compare
            only what was appended.
    """

    log: MessageLog = field(default_factory=MessageLog)
    history_stats: CharStats = field(default_factory=CharStats)
    last_prompt_token_count: int = 0
    since_count: int = 0
    consecutive_failures: int = 0
    hold_until: int | None = None
    calibration: Calibration = field(default_factory=Calibration)
    growth: GrowthLog = field(default_factory=GrowthLog)
    tier: Tier = Tier.SAFE
    last_ratio: float | None = None
    scale_floor: float | None = None
    store_mark: tuple[tuple[int, int], tuple[object, int]] | None = None

    @classmethod
    def start(
        cls,
        history: Sequence[Message] = (),
        *,
        last_prompt_token_count: int = 0,
        since_count: int = 0,
        carried: CarriedState | None = None,
    ) -> ConversationState:
        """A checked record for ``history`` (one pass: messages only, tool pairs whole, the
        statistics summed — issue 11) with the counts and the carried state to continue from.

        Raises:
            ConfigError: a value is not a history or a count; the message names it.
        """
        messages, stats = scan_history(history)
        check_count(last_prompt_token_count, "last_prompt_token_count")
        check_count(since_count, "since_count")
        carried = carried or CarriedState()
        check_count(carried.consecutive_failures, "consecutive_failures")
        check_count(carried.hold_until, "hold_until", optional=True)
        for name, kind, reader in (
            ("calibration", Calibration, "Calibration.from_dict"),
            ("growth", GrowthLog, "autocompact.compaction.accounting.growth_from_dict"),
        ):
            value = getattr(carried, name)  # (a wrong one failed inside the first send)
            if not isinstance(value, kind):
                raise ConfigError(
                    f"{name} must be a {kind.__name__} (read a saved one with {reader}), got "
                    f"{type(value).__name__} {value!r:.60}",
                    key=name,
                )
        return cls(
            log=MessageLog(messages),
            history_stats=stats,
            last_prompt_token_count=max(0, int(last_prompt_token_count)),
            since_count=since_count,
            consecutive_failures=max(0, int(carried.consecutive_failures)),
            hold_until=carried.hold_until,
            calibration=carried.calibration,
            growth=carried.growth,
        )

    @property
    def history(self) -> tuple[Message, ...]:
        """The conversation so far (a tuple cached until the next change)."""
        return self.log.snapshot()

    @property
    def breaker(self) -> BreakerState:
        """The breaker's count and hold, as the accounting functions take them."""
        return BreakerState(
            consecutive_failures=self.consecutive_failures, hold_until=self.hold_until
        )

    @property
    def breaker_open(self) -> bool:
        """Whether automatic compaction is paused by the circuit breaker."""
        return self.consecutive_failures >= MAX_CONSECUTIVE_FAILURES

    def count_base(self) -> int:
        """The provider's last count plus what was added since (0: no count, the cold path)."""
        if self.last_prompt_token_count <= 0:
            return 0
        return self.last_prompt_token_count + self.since_count

    def carried(self) -> CarriedState:
        """The part a driver that keeps the history carries to the next request."""
        return CarriedState(
            consecutive_failures=self.consecutive_failures,
            hold_until=self.hold_until,
            calibration=self.calibration,
            growth=self.growth,
        )

    def reset(self) -> None:
        """Forget the conversation and what came with it (a clear); the calibration stays."""
        self.log.replace(())
        self.history_stats = CharStats()
        self.last_prompt_token_count = 0
        self.since_count = 0
        self.consecutive_failures = 0
        self.hold_until = None
        self.growth = GrowthLog()


def adopt(state: ConversationState, snapshot: Snapshot, *, growth: bool = False) -> None:
    """Make a stored conversation the state: its history (replaced only when it differs),
    the count and what was added since, the breaker's count and hold, the calibration and,
    with ``growth``, the growth log (a stored log that does not read is ignored, with a
    warning: this worker's own is kept rather than fail the turn).

    This is the one place a worker takes what another worker may have changed. The store's
    version counter says what moved since the last adoption: only what was appended since is
    compared (O(turn), not O(history)); anything else takes the stored history whole.
    """
    mark, state.store_mark = state.store_mark, None
    new = snapshot.appended_since(mark[0]) if mark is not None else None
    ours = state.log.appended_since(mark[1]) if mark is not None else None
    if new is not None and ours is not None and new[: len(ours)] == ours:
        if len(new) > len(ours):  # another worker's turns: appended, not copied
            state.log.append(*new[len(ours) :])
            state.history_stats = state.history_stats + content_stats(new[len(ours) :])
    elif not state.log.same_as(history := snapshot.history):
        state.log.replace(history)
        state.history_stats = content_stats(history)
    state.store_mark = (snapshot.version, state.log.mark())
    state.last_prompt_token_count, state.since_count = snapshot.count_base
    state.consecutive_failures = snapshot.consecutive_failures
    state.hold_until = snapshot.hold_until
    if snapshot.calibration is not None:
        state.calibration = Calibration.from_dict(snapshot.calibration)
    if growth:
        try:
            state.growth = growth_from_dict(snapshot.growth, "the stored session's field")
        except ContentError as exc:
            logger.warning("ignoring the stored growth log of %s: %s", snapshot.session_id, exc)

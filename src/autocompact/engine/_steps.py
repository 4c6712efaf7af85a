"""The engine's compaction step and the commits (its base class; :mod:`.core` builds on it).

:class:`CompactionSteps` holds the configuration, the state record and the hooks, and the steps
that change the state when they complete: :meth:`~CompactionSteps.compaction_step` (one
compaction, under the store's lease when there is one) with the accounting that applies its
result, and :meth:`~CompactionSteps.commit_turn` (a turn's append, the count and the calibration
learned from it, the store's write). Failure accounting and the hold follow
:mod:`autocompact.compaction.accounting` (SPEC §5, §10.2, §10.7).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Generator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from autocompact.compaction.accounting import record_attempt
from autocompact.compaction.fallback import ProviderScale, TrimResult
from autocompact.compaction.plan import (
    CompressionInfo,
    CompressionResult,
    CompressionStatus,
    CompressionTrigger,
    CompressOptions,
)
from autocompact.compaction.service import CompressionService
from autocompact.content import Message, as_message
from autocompact.engine import sizing
from autocompact.engine.config import EngineConfig
from autocompact.engine.state import ConversationState, adopt
from autocompact.errors import SessionStoreError, described
from autocompact.estimation import (
    MIN_CALIBRATION_TOKENS,
    content_stats,
    estimate_content_tokens,
    estimate_stats_tokens,
    update_calibration,
)
from autocompact.events import (
    BreakerClosed,
    BreakerOpened,
    CompactionCancelled,
    CompactionFailed,
    CompactionSkipped,
    CompactionStarted,
    CompactionSucceeded,
    Event,
    Hook,
    ThresholdCrossed,
)
from autocompact.providers.base import ChatRequest, Completion
from autocompact.sendcheck import unsaved_reply
from autocompact.sessions.stores.binding import StoreBinding, skipped_info
from autocompact.usage_check import plausible_prompt_count

if TYPE_CHECKING:
    from autocompact.sessions.stores.base import Snapshot

__all__ = ["CompactionSteps", "cancelled_event"]

logger = logging.getLogger("autocompact")

_CompactionStep = Generator[ChatRequest, Completion, CompressionInfo]


class CompactionSteps:
    """The engine's state holders and its state-changing steps (see :class:`.core.Engine`)."""

    config: EngineConfig
    state: ConversationState
    compression: CompressionService
    compactions: list[CompressionInfo]
    store: StoreBinding | None
    _hooks: list[Hook]
    _generation: int
    _turn_attempt: CompressionInfo | None

    def estimate_tokens(self, message: str | Message | None = None) -> int:
        """The pre-send estimate of the next request (SPEC §4), with ``message`` pending
        (:func:`autocompact.engine.sizing.estimate_tokens`)."""
        pending = None if message is None else as_message(message)
        return sizing.estimate_tokens(self.config, self.state, pending)

    def provider_scale(self) -> ProviderScale:
        """How this provider's tokens relate to the plain estimate (SPEC §10.6)."""
        return sizing.provider_scale(self.state)

    def compaction_step(
        self,
        trigger: CompressionTrigger,
        message: Message | None,
        instructions: str | None = None,
    ) -> _CompactionStep:
        """One compaction (``trigger``: automatic, hard, reactive or manual), with ``message``
        pending and ``instructions`` added to the summary prompt.

        With a store it first takes the lease (another worker compacting: skipped, the
        guarantee covers this turn) and commits with the compare-and-swap. Every started
        compaction ends with one event; a cancelled or failed one leaves the history as it was,
        and a :meth:`clear` meanwhile wins.
        """
        config, state = self.config, self.state
        force = trigger is not CompressionTrigger.AUTO
        options = CompressOptions(
            context_window=config.context_window,
            force=force,
            consecutive_failures=state.consecutive_failures,
            user_message=message,
            last_prompt_token_count=sizing.compaction_count(config, state, message),
            trigger=trigger,
            system_instruction=config.system_instruction,
            tools=tuple(config.tools),
            image_token_estimate=config.image_token_estimate,
            instructions=instructions,
            clear_tool_outputs=config.clear_tool_outputs,
            keep_share=config.keep_share,
            summary_target_tokens=config.summary_target_tokens,
            token_scale=max(1.0, state.calibration.factor),
            growth_room_tokens=state.growth.expected_growth(),
        )
        if self.store is not None:
            yield from self.store.open_step()
            base = yield from self.store.begin_compaction_step()
            if base is None:  # another worker holds the lease: the guarantee covers this turn
                return skipped_info(trigger, self.estimate_tokens(message))
            self.adopt_snapshot(base)
            options = replace(
                options,
                consecutive_failures=state.consecutive_failures,
                last_prompt_token_count=sizing.compaction_count(config, state, message),
            )
        at = self.estimate_tokens(message)
        # The hold an attempt may start begins at this pre-send count, the message included.
        pending = at - self.estimate_tokens() if message is not None else 0
        self._emit(CompactionStarted(trigger=trigger, tokens=at))
        generation = self._generation
        try:
            result: CompressionResult = yield from self.compression.flow(state.history, options)
        except BaseException as exc:
            if self.store is not None:
                self.store.abandon()
            # Every started compaction ends with one event, even when it never finished.
            self._emit(cancelled_event(trigger, exc))
            raise
        if generation != self._generation:  # cleared meanwhile: the clear wins
            if self.store is not None:
                self.store.abandon()
            self._emit(
                CompactionCancelled(
                    trigger=trigger,
                    reason="cancelled",
                    error="the conversation was cleared while the summary was written",
                )
            )
            return result.info
        if self.store is not None:
            result = yield from self.store.finish_compaction_step(
                result, config.thresholds, pending_tokens=pending
            )
        self._apply(result, message, pending_tokens=pending)
        if self.store is not None:
            self.adopt_snapshot(self.store.snapshot)
        return result.info

    def adopt_snapshot(self, snapshot: Snapshot, *, growth: bool = False) -> None:
        """Take the stored history and shared counters (another worker may have moved on):
        :func:`autocompact.engine.state.adopt`, the one place a stored conversation becomes
        the state. ``growth``: take the stored growth log too (design decision 69) — at the
        start of a turn only: within one, this worker's log is ahead of the one it stored."""
        keeps_growth = self.store is not None and self.store.keeps_growth
        adopt(self.state, snapshot, growth=growth and keeps_growth)

    def _apply(
        self, result: CompressionResult, message: Message | None = None, *, pending_tokens: int = 0
    ) -> None:
        """Count a finished compaction; install its history when it compacted. The tier noted
        after it is that of the next request: the new history with ``message`` pending (a
        framework's pending tool results may be most of it).

        ``pending_tokens``: the size of the message being sent (where a hold begins).
        """
        config, state = self.config, self.state
        info = result.info
        self.compactions.append(info)
        self._turn_attempt = info
        was_open = state.breaker_open
        previous = state.consecutive_failures
        counted_state = record_attempt(
            state.breaker, info, config.thresholds, pending_tokens=pending_tokens
        )
        state.consecutive_failures = counted_state.consecutive_failures
        state.hold_until = counted_state.hold_until
        if info.status is CompressionStatus.COMPRESSED:
            # Also a clearing that stands after a failed summary (SPEC §10.3).
            counted = state.history_stats + config.fixed_stats  # what the scale was learned on
            state.log.replace(result.history)
            state.history_stats = content_stats(result.history)
            state.last_prompt_token_count = sizing.count_after_compaction(
                config, state, info.new_token_count, counted
            )
            state.since_count = 0
            state.growth = state.growth.after_compaction(info, self.estimate_tokens())
            self._emit(CompactionSucceeded(info=info))
            self._note_tier(self.estimate_tokens(message))
        elif info.status.failed:
            self._emit(CompactionFailed(info=info))
        else:  # nothing to do: the started compaction still ends with an event
            self._emit(CompactionSkipped(info=info))
        if was_open and not state.breaker_open:
            self._emit(BreakerClosed(previous_failures=previous))
        if state.breaker_open and not was_open:
            self._emit(BreakerOpened(consecutive_failures=state.consecutive_failures))

    def commit_turn(
        self,
        message: Message,
        request: ChatRequest,
        completion: Completion,
        trim: TrimResult | None,
        turn_id: str | None = None,
    ) -> Generator[Any, Any, None]:
        """Keep a completed turn: append it, learn the tokenizer from the provider's count of
        exactly what was sent, and (with a store) append it there under ``turn_id`` — durable
        before the reply is returned; a failed write leaves the turn out of the state too."""
        config, state = self.config, self.state
        image = config.image_token_estimate
        saved = (
            len(state.log),
            state.history_stats,
            state.calibration,
            state.last_prompt_token_count,
            state.since_count,
            state.last_ratio,
            state.scale_floor,
        )
        sent = (
            state.history_stats + message.stats  # the whole history went out, plus the message
            if trim is None
            else content_stats(request.messages)  # a trimmed request: what it carried
        )
        state.log.append(message, completion.message)
        state.history_stats = state.history_stats + message.stats + completion.message.stats
        usage = completion.usage
        reply_tokens = estimate_content_tokens([completion.message], image)
        if (
            usage is not None
            and usage.prompt_tokens > 0
            and plausible_prompt_count(  # an absurd count is logged, not learned from
                usage.prompt_tokens,
                estimate_stats_tokens(sent + config.fixed_stats, image),
                window=config.context_window,
            )
        ):
            counted = sent + config.fixed_stats
            state.calibration = update_calibration(
                state.calibration, counted, usage.prompt_tokens, image_token_estimate=image
            )
            plain = estimate_stats_tokens(counted, image)
            if plain >= MIN_CALIBRATION_TOKENS:  # a smaller sample teaches no ratio (note 100)
                state.last_ratio = usage.prompt_tokens / plain
            state.scale_floor = None  # a real count supersedes what a rejection implied
            left_out = 0
            if trim is not None:
                # A trimmed request was counted without what it left out: add that back on the
                # provider's scale (SPEC §10.6), never as a plain estimate.
                left_out = self.provider_scale().tokens(trim.left_out_tokens, scale="best")
            state.last_prompt_token_count = usage.prompt_tokens + left_out
            state.since_count = max(usage.output_tokens, reply_tokens)
        else:
            # No count from the provider: the next send takes the cold path (whole history).
            state.last_prompt_token_count = 0
            state.since_count = 0
        if self.store is not None:
            try:
                yield from self.store.append_step(
                    turn_id or uuid.uuid4().hex,
                    (message, completion.message),
                    usage={
                        "prompt_tokens": state.last_prompt_token_count,
                        "since": state.since_count,
                    },
                    calibration=state.calibration.to_dict() if state.calibration.samples else None,
                    growth=state.growth.to_dict(),
                )
            except BaseException as exc:
                (
                    saved_length,
                    state.history_stats,
                    state.calibration,
                    state.last_prompt_token_count,
                    state.since_count,
                    state.last_ratio,
                    state.scale_floor,
                ) = saved
                state.log.truncate(saved_length)
                if isinstance(exc, SessionStoreError | TypeError | ValueError):  # keep the reply
                    raise unsaved_reply(exc, completion, self.store) from exc
                raise
        self._note_tier(self.estimate_tokens())

    # -- events ----------------------------------------------------------------------------

    def _note_tier(self, tokens: int) -> None:
        tier = self.config.thresholds.tier(tokens)
        if tier is not self.state.tier:
            previous, self.state.tier = self.state.tier, tier
            self._emit(ThresholdCrossed(previous=previous, current=tier, tokens=tokens))

    def _emit(self, event: Event) -> None:
        for hook in self._hooks:
            try:
                hook(event)
            except Exception:
                logger.exception("an autocompact hook raised on %s", event.kind)


def cancelled_event(trigger: CompressionTrigger, exc: BaseException) -> CompactionCancelled:
    """The event that ends a compaction stopped by ``exc`` (every started one ends with one)."""
    if isinstance(exc, KeyboardInterrupt):
        return CompactionCancelled(trigger=trigger, reason="interrupted")
    if isinstance(exc, asyncio.CancelledError | GeneratorExit):
        return CompactionCancelled(trigger=trigger, reason="cancelled")
    return CompactionCancelled(trigger=trigger, reason="error", error=described(exc))

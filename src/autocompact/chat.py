"""Chat sessions: the pre-send check, the hard rescue, the breaker and the reactive retry (SPEC §5).

:class:`ChatSession` and :class:`AsyncChatSession` share one turn flow, written once as a
generator in :class:`_SessionCore`: it yields each :class:`ChatRequest` (side query or main turn)
and receives the :class:`Completion`; provider errors are thrown into it. The two classes only
differ in how they answer a request (``complete``/``stream`` or ``acomplete``/``astream``).

Before every send:

1. the pre-send estimate (SPEC §4) is computed once;
2. at or above *hard*, a forced compaction runs (the hard-tier rescue; bypasses the breaker and
   does not reset its count); below hard, an unforced one runs when the count is at or above
   *auto* and the breaker is closed;
3. if the count is still at or above *hard* (the summary failed, the breaker is open), the oldest
   turns are left out of this one request — never out of the history — until it is below *auto*
   (the guarantee); a single message larger than the window is refused before anything is sent;
4. the request is sent; if the provider still says it is too long, a forced compaction runs and
   the send is retried once; if that does not help, the provider's original error is raised.

Failure accounting and the hold follow :mod:`autocompact.compaction.accounting` (SPEC §5, §10.2,
§10.7): an unforced or reactive failure adds 1, a hard one only where hard equals auto, a manual
one nothing; an ineffective compaction is kept but counts and starts a hold (no automatic side
query until the count grows by 10 % of the window, or ``compress()`` is called); so does a failed
hard or reactive rescue; an effective success resets both. The reactive retry is not held back:
it answers a rejection the provider already made. State is committed only when a step
completes: a turn that is cancelled or fails leaves the history as it was before that turn's
send (a compaction that had already succeeded in the same call is kept — it is a complete,
valid history of its own).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import uuid
from collections.abc import AsyncIterator, Generator, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from autocompact.compaction.accounting import (
    BreakerState,
    GrowthLog,
    automatic_trigger,
    growth_from_dict,
    record_attempt,
    record_outgrown,
)
from autocompact.compaction.fallback import (
    SIZE_MARGIN,
    UNKNOWN_SCALE,
    ProviderScale,
    TrimResult,
    check_message_fits,
    trim_request,
)
from autocompact.compaction.plan import (
    CompressionInfo,
    CompressionResult,
    CompressionStatus,
    CompressionTrigger,
    CompressOptions,
)
from autocompact.compaction.service import (
    Awaiting,
    CompressionService,
    abandon,
    drive_flow,
    drive_flow_async,
    settle,
)
from autocompact.compaction.space import SpaceBreakdown, space_breakdown
from autocompact.compaction.split import COMPRESSION_PRESERVE_THRESHOLD
from autocompact.content import CharStats, Message, Part, as_message, json_lengths_total
from autocompact.errors import (
    ConfigError,
    ContentError,
    ContextOverflowError,
    MalformedResponseError,
    MessageTooLargeError,
    ProviderError,
    SessionStoreError,
)
from autocompact.estimation import (
    BYTES_PER_TOKEN_JSON,
    Calibration,
    calibrated_estimate,
    changed_mix_tokens,
    content_stats,
    estimate_content_tokens,
    estimate_stats_tokens,
    estimate_text_tokens,
    update_calibration,
)
from autocompact.events import (
    BreakerClosed,
    BreakerOpened,
    CompactionCancelled,
    CompactionFailed,
    CompactionOutgrown,
    CompactionStarted,
    CompactionSucceeded,
    Event,
    Hook,
    RequestTrimmed,
    ThresholdCrossed,
    WindowLearned,
)
from autocompact.history import MessageLog
from autocompact.providers.base import (
    ChatRequest,
    Completion,
    Provider,
    StreamDone,
    StreamEvent,
    ToolSpec,
)
from autocompact.sendcheck import check_before_send, unsaved_reply
from autocompact.sessions.stores.binding import StoreBinding, meta_of, run_step, skipped_info
from autocompact.thresholds import (
    DEFAULT_IMAGE_TOKEN_ESTIMATE,
    MAX_CONSECUTIVE_FAILURES,
    CompactionThresholds,
    Tier,
    compute_thresholds,
    parse_window,
)
from autocompact.usage_check import plausible_prompt_count
from autocompact.validation import (
    check_count,
    check_optional_str,
    check_outgoing,
    scan_history,
)

if TYPE_CHECKING:
    from autocompact.sessions.stores.aio import AsyncSessionStore
    from autocompact.sessions.stores.base import SessionStore, Snapshot

__all__ = ["AsyncChatSession", "ChatSession"]

logger = logging.getLogger("autocompact")

MessageLike = str | Message | Sequence[Part]
_T = TypeVar("_T")
_Flow = Generator[ChatRequest, Completion, Completion]
_CompactionStep = Generator[ChatRequest, Completion, CompressionInfo]


class _SessionCore:
    """State and the turn flow shared by both session classes (no I/O here)."""

    _awaits_store = False
    """Whether this class's driver awaits an asyncio store's calls (AsyncChatSession)."""

    def __init__(
        self,
        provider: Provider,
        *,
        context_window: int,
        system_instruction: str | None = None,
        tools: Sequence[ToolSpec] = (),
        history: Sequence[Message] = (),
        last_prompt_token_count: int = 0,
        consecutive_failures: int = 0,
        image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE,
        hooks: Sequence[Hook] = (),
        max_output_tokens: int | None = None,
        compression_service: CompressionService | None = None,
        clear_tool_outputs: bool = True,
        calibration: Calibration | None = None,
        store: SessionStore | AsyncSessionStore | None = None,
        session_id: str | None = None,
        store_owner: str | None = None,
        keep_share: float = COMPRESSION_PRESERVE_THRESHOLD,
        summary_target_tokens: int | None = None,
        hold_until: int | None = None,
        growth: GrowthLog | None = None,
    ) -> None:
        self.provider = provider
        self.keep_share = keep_share
        self.summary_target_tokens = summary_target_tokens
        check_count(hold_until, "hold_until", optional=True)
        # SPEC §10.2/§10.7: no automatic side query while the count is below this.
        self.hold_until: int | None = hold_until
        # The recent growth of the count and the last compaction's age (design decision 63).
        self._growth = growth or GrowthLog()
        self.calibration = calibration or Calibration()
        self.clear_tool_outputs = clear_tool_outputs
        self.context_window = parse_window(context_window, name="context_window", minimum=1)
        self.thresholds: CompactionThresholds = compute_thresholds(self.context_window)
        # One pass: messages only, tool pairs whole, the statistics summed (issue 11).
        messages, history_stats = scan_history(history)
        check_optional_str(system_instruction, "system_instruction")
        check_count(image_token_estimate, "image_token_estimate")
        check_count(max_output_tokens, "max_output_tokens", positive=True, optional=True)
        check_count(last_prompt_token_count, "last_prompt_token_count")
        check_count(consecutive_failures, "consecutive_failures")
        self.system_instruction = system_instruction
        self.tools = tuple(tools)
        self.image_token_estimate = image_token_estimate
        self.max_output_tokens = max_output_tokens
        # What the provider counts besides the messages: the system prompt and tool schemas.
        # Measured once, in one serialization (issue 11).
        tools_chars = json_lengths_total([tool.as_json() for tool in self.tools])
        self._fixed_stats = CharStats(
            text_chars=len(system_instruction or ""), json_chars=tools_chars
        )
        self._fixed_plain = estimate_stats_tokens(self._fixed_stats, image_token_estimate)
        # The same, rounded as estimate_prompt_tokens rounds each part (kept, not re-serialized).
        self._fixed_tokens = estimate_text_tokens(system_instruction) + math.ceil(
            tools_chars / BYTES_PER_TOKEN_JSON
        )
        # Provider tokens per plain-estimate token of the last reported count (SPEC §10.6).
        self._last_ratio: float | None = None
        # A lower bound on that ratio learned from a "too long" rejection (no count comes back).
        self._scale_floor: float | None = None
        self.compression = compression_service or CompressionService(provider)
        # Append-only: a send appends the turn, never copies the history (issue 11).
        self._log = MessageLog(messages)
        # The history's character statistics, kept up to date turn by turn so that no send
        # walks the whole history (recomputed only when a compaction replaces it).
        self._history_stats = history_stats
        self.last_prompt_token_count = max(0, int(last_prompt_token_count))
        # Tokens appended after the provider's last count (the model's reply), so the main path
        # covers the whole history, not only what the provider counted.
        self._since_count = 0
        self.consecutive_failures = max(0, int(consecutive_failures))
        self.compactions: list[CompressionInfo] = []
        self._hooks: list[Hook] = list(hooks)
        self.store: StoreBinding | None = None
        if store is not None:
            meta = meta_of(
                provider=provider.name,
                model=provider.model,
                context_window=self.context_window,
                system_instruction=system_instruction,
            )
            sid = session_id or uuid.uuid4().hex
            self.store = StoreBinding(store, sid, meta, store_owner)
            if self.store.is_async and not self._awaits_store:
                raise ConfigError(
                    f"{type(self).__name__} cannot await an asyncio store (open_async_store): "
                    "use AsyncChatSession, or a synchronous store (open_store)",
                    key="store",
                )
            self._adopt(self.store.snapshot, growth=True)
        # Bumped by clear(): a flow that started before a clear commits nothing after it.
        self._generation = 0
        self._tier = self.thresholds.tier(self.estimate_tokens())
        self._make_lock()

    def _adopt(self, snapshot: Snapshot, *, growth: bool = False) -> None:
        """Take the stored history and shared counters (another worker may have moved on).

        ``growth``: take the stored growth log too (design decision 69) — at the start of a
        turn only: within one, this worker's log is ahead of the one its last turn stored.
        """
        history = snapshot.history
        if not self._log.same_as(history):
            self._log.replace(history)
            self._history_stats = content_stats(history)
        self.last_prompt_token_count, self._since_count = snapshot.count_base
        self.consecutive_failures = snapshot.consecutive_failures
        self.hold_until = snapshot.hold_until
        if snapshot.calibration is not None:
            self.calibration = Calibration.from_dict(snapshot.calibration)
        if growth and self.store is not None and self.store.keeps_growth:
            try:
                self._growth = growth_from_dict(snapshot.growth, "the stored session's field")
            except ContentError as exc:  # keep this worker's own log rather than fail the turn
                logger.warning("ignoring the stored growth log of %s: %s", snapshot.session_id, exc)

    def _make_lock(self) -> None:
        """Create the lock that serializes sends (each session class picks its kind)."""

    # -- what callers can read -------------------------------------------------------------

    @property
    def history(self) -> tuple[Message, ...]:
        """The conversation so far (compacted where a compaction ran).

        A tuple built on the first read after a change and cached until the next one: a send
        itself copies nothing.
        """
        return self._log.snapshot()

    @property
    def tier(self) -> Tier:
        """The tier of the current pre-send estimate (no pending message)."""
        return self.thresholds.tier(self.estimate_tokens())

    @property
    def breaker_open(self) -> bool:
        """Whether automatic compaction is paused by the circuit breaker."""
        return self.consecutive_failures >= MAX_CONSECUTIVE_FAILURES

    @property
    def growth(self) -> GrowthLog:
        """The recent growth of the count and the last compaction's age (design decision 63);
        a saved session keeps it (``GrowthLog.to_dict``) to continue with the same pace."""
        return self._growth

    def space(self) -> SpaceBreakdown:
        """What holds the space in the context now, by category (``/context``)."""
        return space_breakdown(
            self.history,
            system_instruction=self.system_instruction,
            tools=self.tools,
            image_token_estimate=self.image_token_estimate,
        )

    def estimate_tokens(self, message: MessageLike | None = None) -> int:
        """The pre-send estimate of the next request (SPEC §4), with ``message`` pending.

        On the cold path (no provider count yet) a calibrated session applies what it learned
        about this tokenizer (:func:`calibrated_estimate`: raising at once, both ways once
        learned from enough reports). The cold path reads the statistics the session keeps (the
        history's, seeded from a saved session, and the system prompt and tools' measured once):
        it walks and serializes nothing (issue 11).
        """
        pending = None if message is None else as_message(message)
        base = self._count_base()
        pending_tokens = (
            0 if pending is None else estimate_content_tokens([pending], self.image_token_estimate)
        )
        if base > 0:
            return base + pending_tokens
        plain = (
            estimate_stats_tokens(self._history_stats, self.image_token_estimate)
            + pending_tokens
            + self._fixed_tokens
        )
        if self.calibration.samples == 0:
            return plain
        stats = self._history_stats + self._fixed_stats
        if pending is not None:
            stats = stats + pending.stats
        return calibrated_estimate(
            plain, self.calibration, stats, image_token_estimate=self.image_token_estimate
        )

    def add_hook(self, hook: Hook) -> None:
        """Register a callable that receives every event."""
        self._hooks.append(hook)

    # -- what a framework keeps between its hooks (the LangChain middleware's state) ---------

    @property
    def since_count(self) -> int:
        """Tokens added after the provider's last count (the reply it did not count)."""
        return self._since_count

    @property
    def noted_tier(self) -> Tier:
        """The tier the last threshold event reported (the next crossing starts from it)."""
        return self._tier

    def resume(
        self, *, since_count: int = 0, hold_until: int | None = None, noted_tier: Tier | None = None
    ) -> None:
        """Take back what a framework kept between two calls: the tokens added since the
        provider's last count, the breaker's hold and the last noted tier."""
        check_count(since_count, "since_count")
        check_count(hold_until, "hold_until", optional=True)
        self._since_count = since_count
        self.hold_until = hold_until
        if noted_tier is not None:
            self._tier = noted_tier

    def clear(self) -> None:
        """Forget the conversation (and the counts and breaker state that came with it)."""
        self._generation += 1
        if self.store is not None:  # nothing is deleted: the stored history is replaced
            self.store.clear()
        self._log.replace(())
        self._history_stats = CharStats()
        self.last_prompt_token_count = 0
        self._since_count = 0
        self.consecutive_failures = 0
        self.hold_until = None
        self._growth = GrowthLog()
        self._note_tier(self.estimate_tokens())

    # -- the flows -------------------------------------------------------------------------

    @property
    def _side_provider(self) -> Provider:
        return self.compression.side_provider(self.provider)

    def _provider_for(self, request: ChatRequest) -> Provider:
        """Side queries go to the compression service's model, turns to the chat model."""
        return self._side_provider if request.purpose == "side_query" else self.provider

    def _count_base(self) -> int:
        if self.last_prompt_token_count <= 0:
            return 0
        return self.last_prompt_token_count + self._since_count

    def provider_scale(self) -> ProviderScale:
        """How this provider's tokens relate to the plain estimate, as far as the session knows:
        its calibration, else the ratio of the last reported count to the plain estimate of what
        it counted, else unknown (SPEC §10.6)."""
        factor = None
        if self.calibration.samples > 0:
            factor = self.calibration.factor
        elif self._last_ratio is not None:
            factor = self._last_ratio
        if self._scale_floor is not None:
            factor = max(factor or 0.0, self._scale_floor)
        return ProviderScale() if factor is None else ProviderScale(factor=factor, known=True)

    def _count_after_compaction(self, planned: int, counted: CharStats | None = None) -> int:
        """The count of a compacted history on the provider's scale (SPEC §10.6): its plain
        estimate (system prompt and tools included) times what the session learned, never the
        old provider count minus a plain estimate of what was removed. The scale was learned on
        ``counted`` (the history before the compaction); what the compaction brought in of
        another mix — a summary's prose for tool output, tool output cleared — is sized at
        ``UNLEARNED_FACTOR`` until the next report (docs/design.md, note 67)."""
        scale = self.provider_scale()
        if not scale.known:
            return planned
        plain = self._fixed_plain + estimate_stats_tokens(
            self._history_stats, self.image_token_estimate
        )
        count = scale.tokens(plain, scale="best")
        if counted is None:
            return count
        changed = changed_mix_tokens(
            scale.best,
            counted,
            self._history_stats + self._fixed_stats,
            image_token_estimate=self.image_token_estimate,
        )
        return max(count, changed)

    def _learn_from_rejection(self, message: Message, trim: TrimResult | None) -> None:
        """A "too long" rejection says the provider counted more than the window for what was
        sent: its ratio is at least window / plain estimate, until it reports a count again."""
        if trim is not None:
            plain = trim.plain_after
        else:
            plain = (
                self._fixed_plain
                + estimate_content_tokens([message], self.image_token_estimate)
                + estimate_stats_tokens(self._history_stats, self.image_token_estimate)
            )
        if plain > 0:
            self._scale_floor = max(self._scale_floor or 0.0, self.context_window / plain)

    def turn_flow(self, message: Message, turn_id: str | None = None) -> _Flow:
        check_outgoing(self._log.view(), message)
        check_before_send(message, self.store)  # issue 27: fails now what the store would refuse
        if self.store is not None:  # an asyncio store's calls are yielded to be awaited
            yield from self.store.open_step()
            stored = (yield from self.store.find_turn_step(turn_id)) if turn_id else None
            if stored is not None and len(stored.messages) == 2:  # a retry of a stored turn
                self._adopt((yield from self.store.refresh_step()), growth=True)
                return Completion(message=stored.messages[1])
            turn_id = turn_id or uuid.uuid4().hex
            self._adopt((yield from self.store.refresh_step()), growth=True)
        generation = self._generation
        yield from self.pre_send_flow(message)
        return (yield from self.send_flow(message, turn_id, generation))

    def pre_send_flow(self, message: Message) -> Generator[ChatRequest, Completion, None]:
        """Before a send: the size check, then the hard rescue or the automatic compaction.

        Framework integrations run it on their own before-model hook and :meth:`send_flow`
        around the framework's model call, so the decision is made here once.
        """
        # Refuse a message that can never fit — with the system prompt and tools every request
        # carries — before anything (even a side query) is sent.
        check_message_fits(
            message,
            window=self.context_window,
            image_token_estimate=self.image_token_estimate,
            fixed_tokens=self._fixed_plain,
            scale=self.provider_scale(),
        )
        effective = self.estimate_tokens(message)
        self._note_tier(effective)
        self._growth = self._growth.before_send(effective)
        trigger = automatic_trigger(effective, self.thresholds, self._breaker_state())
        if trigger is not None and self._growth.outgrown:
            yield from self._judge_outgrown(effective, trigger)
            trigger = automatic_trigger(effective, self.thresholds, self._breaker_state())
        if trigger is not None:
            yield from self.compaction_step(trigger, message)

    def _judge_outgrown(
        self, tokens: int, trigger: CompressionTrigger
    ) -> Generator[Any, Any, None]:
        """A compaction is needed again fewer than 5 calls after an effective one: judge that
        one outgrown, count it, and hold from the count it left (design decision 63).

        With a store the count and hold are written there first, in one write (design decision
        69), and read back: the compaction step that follows adopts the stored counters, and
        other workers share them. When another worker already recorded the judgement at this
        epoch, its count and hold are taken and nothing more is counted or reported. A failed
        write leaves the session as it was (the judgement is made again on the next send).
        """
        log = self._growth
        was_open = self.breaker_open
        state = record_outgrown(self._breaker_state(), log, self.thresholds)
        hold = state.hold_until or 0
        if self.store is not None:
            info = {
                "trigger": str(trigger),
                "original_token_count": tokens,
                "new_token_count": log.compacted_to,
                "calls": log.since_compaction or 0,
                "hold_until": hold,
            }
            recorded = yield from self.store.outgrown_step(info, hold)
            stored = self.store.snapshot
            self.consecutive_failures, self.hold_until = (
                stored.consecutive_failures,
                stored.hold_until,
            )
            self._growth = log.judged()
            if not recorded:
                return
        else:
            self.consecutive_failures, self.hold_until = (
                state.consecutive_failures,
                state.hold_until,
            )
            self._growth = log.judged()
        self._emit(
            CompactionOutgrown(
                calls=log.since_compaction or 0,
                compacted_to=log.compacted_to,
                tokens=tokens,
                hold_until=hold,
            )
        )
        if self.breaker_open and not was_open:
            self._emit(BreakerOpened(consecutive_failures=self.consecutive_failures))

    def send_flow(
        self, message: Message, turn_id: str | None = None, generation: int | None = None
    ) -> _Flow:
        """The send: the guarantee's trimming, the request, the reactive retry, the commit."""
        if generation is None:
            generation = self._generation
        request, trim = self._request_for(message)
        try:
            completion = yield request
        except ContextOverflowError as overflow:
            self._learn_window(overflow)
            if self._growth.outgrown:
                tokens = self.estimate_tokens(message)
                yield from self._judge_outgrown(tokens, CompressionTrigger.REACTIVE)
            info = yield from self.compaction_step(CompressionTrigger.REACTIVE, message)
            if info.status is CompressionStatus.COMPRESSED:
                request, trim = self._request_for(message)
            else:
                # Still "too long" and nothing compacted: the scale under-sized the request.
                # Trim to a lower target and retry once before surfacing the error.
                self._learn_from_rejection(message, trim)
                retry = self._retry_for(message, trim)
                if retry is None:
                    raise overflow from None
                request, trim = retry
            completion = yield request
        if generation == self._generation:  # a clear() during the send wins
            yield from self._commit_turn(message, request, completion, trim, turn_id)
        return completion

    def _learn_window(self, overflow: ContextOverflowError) -> None:
        """Believe a server that states a smaller window in its overflow error (llama.cpp's
        ``n_ctx``): the session's window was assumed or wrong."""
        window = overflow.context_window
        if window is None or window >= self.context_window or window < 1024:
            return
        previous = self.context_window
        self.context_window = window
        self.thresholds = compute_thresholds(window)
        self._emit(WindowLearned(previous=previous, context_window=window))

    def compaction_step(
        self,
        trigger: CompressionTrigger,
        message: Message | None,
        instructions: str | None = None,
    ) -> _CompactionStep:
        force = trigger is not CompressionTrigger.AUTO
        options = CompressOptions(
            context_window=self.context_window,
            force=force,
            consecutive_failures=self.consecutive_failures,
            user_message=message,
            last_prompt_token_count=self._count_base(),
            trigger=trigger,
            system_instruction=self.system_instruction,
            tools=self.tools,
            image_token_estimate=self.image_token_estimate,
            instructions=instructions,
            clear_tool_outputs=self.clear_tool_outputs,
            keep_share=self.keep_share,
            summary_target_tokens=self.summary_target_tokens,
            token_scale=max(1.0, self.calibration.factor),
            growth_room_tokens=self._growth.expected_growth(),
        )
        if self.store is not None:
            yield from self.store.open_step()
            base = yield from self.store.begin_compaction_step()
            if base is None:  # another worker holds the lease: the guarantee covers this turn
                return skipped_info(trigger, self.estimate_tokens(message))
            self._adopt(base)
            options = replace(
                options,
                consecutive_failures=self.consecutive_failures,
                last_prompt_token_count=self._count_base(),
            )
        self._emit(CompactionStarted(trigger=trigger, tokens=self.estimate_tokens(message)))
        generation = self._generation
        try:
            result: CompressionResult = yield from self.compression.flow(self.history, options)
        except BaseException as exc:
            if self.store is not None:
                self.store.abandon()
            # Every started compaction ends with one event, even when it never finished.
            self._emit(_cancelled(trigger, exc))
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
            result = yield from self.store.finish_compaction_step(result, self.thresholds)
        self._apply(result)
        if self.store is not None:
            self._adopt(self.store.snapshot)
        return result.info

    def _breaker_state(self) -> BreakerState:
        return BreakerState(
            consecutive_failures=self.consecutive_failures, hold_until=self.hold_until
        )

    def _apply(self, result: CompressionResult) -> None:
        info = result.info
        self.compactions.append(info)
        was_open = self.breaker_open
        previous = self.consecutive_failures
        state = record_attempt(self._breaker_state(), info, self.thresholds)
        self.consecutive_failures, self.hold_until = state.consecutive_failures, state.hold_until
        if info.status is CompressionStatus.COMPRESSED:
            # Also a clearing that stands after a failed summary (SPEC §10.3).
            counted = self._history_stats + self._fixed_stats  # what the scale was learned on
            self._log.replace(result.history)
            self._history_stats = content_stats(result.history)
            self.last_prompt_token_count = self._count_after_compaction(
                info.new_token_count, counted
            )
            self._since_count = 0
            self._growth = self._growth.after_compaction(info, self.estimate_tokens())
            self._emit(CompactionSucceeded(info=info))
            self._note_tier(self.estimate_tokens())
        elif info.status.failed:
            self._emit(CompactionFailed(info=info))
        if was_open and not self.breaker_open:
            self._emit(BreakerClosed(previous_failures=previous))
        if self.breaker_open and not was_open:
            self._emit(BreakerOpened(consecutive_failures=self.consecutive_failures))

    def _sizing_scale(self, scale: ProviderScale, base: int) -> ProviderScale:
        """The scale a trimmed request is sized on: the learned one, or the ratio the count the
        session holds implies for the content it covers, if higher. A count on content of a
        new mix (after a compaction or a clearing, note 67) says more about it than a factor
        learned on the old mix. The implied ratio is believed up to ``UNKNOWN_SCALE`` (2.0, the
        top of the supported range): above it the count holds more than a tokenizer ratio
        (content the session does not see), and the retry after a rejection covers that."""
        covered = self._fixed_plain + estimate_stats_tokens(
            self._history_stats, self.image_token_estimate
        )
        if base <= 0 or covered <= 0 or not scale.known:
            return scale
        implied = min(base / covered, UNKNOWN_SCALE)
        if implied <= scale.factor:
            return scale
        return ProviderScale(factor=implied, known=True)

    def _request_for(
        self, message: Message, scale: ProviderScale | None = None, *, use_count: bool = True
    ) -> tuple[ChatRequest, TrimResult | None]:
        """The main request, trimmed by the guarantee when needed (None: nothing trimmed).

        Sizes are on the provider's scale (SPEC §10.6): the provider's last count where it
        covers the request, the plain estimate times the learned scale (with a margin) for
        what it does not. A request that cannot fit even trimmed is refused, never sent.
        """
        scale = scale or self.provider_scale()
        base = self._count_base() if use_count else 0
        pending = estimate_content_tokens([message], self.image_token_estimate)
        if base > 0:
            size = base + scale.tokens(pending, scale="trigger")
        else:
            plain = estimate_stats_tokens(self._history_stats, self.image_token_estimate)
            size = scale.tokens(plain + pending + self._fixed_plain, scale="trigger")
        messages: Sequence[Message] = self._log.view(message)  # no copy of the history
        trim: TrimResult | None = None
        if size >= self.thresholds.hard:
            trimmed = trim_request(
                self.history,
                message,
                target=self.thresholds.auto,
                image_token_estimate=self.image_token_estimate,
                scale=self._sizing_scale(scale, base),
                fixed_tokens=self._fixed_plain,
            )
            if trimmed.dropped:
                messages, trim = trimmed.messages, trimmed
                self._emit(
                    RequestTrimmed(
                        dropped_messages=trimmed.dropped,
                        tokens_before=size,
                        tokens_after=trimmed.tokens_after,
                        reason="still at or above the hard threshold after the rescue",
                    )
                )
                final = scale.tokens(trimmed.plain_after, scale="best")
                if final > self.context_window:
                    raise MessageTooLargeError(
                        f"the request cannot fit the model's context window of "
                        f"{self.context_window:,} tokens: even with every earlier turn left out "
                        f"it is about {final:,} tokens (system prompt, tool declarations and "
                        "the latest exchange); shorten the message or the system prompt, or use "
                        "a model with a larger window",
                        index=None,
                        tokens=final,
                        window=self.context_window,
                    )
        request = ChatRequest(
            messages=messages,
            system_instruction=self.system_instruction,
            tools=self.tools,
            max_output_tokens=self.max_output_tokens,
        )
        return request, trim

    def _retry_for(
        self, message: Message, rejected: TrimResult | None
    ) -> tuple[ChatRequest, TrimResult | None] | None:
        """The one retry after a trimmed request was still "too long" (SPEC §10.6): trimmed
        again on a scale raised so the rejected request is over the window, plus the margin;
        None when the rejected request was not trimmed or nothing smaller can be sent."""
        if rejected is None or rejected.plain_after <= 0:
            return None
        # The provider counted more than the window for ``plain_after`` estimated tokens: its
        # ratio is at least window / plain_after.
        least = max(self.provider_scale().best, self.context_window / rejected.plain_after)
        raised = ProviderScale(factor=least * (1 + SIZE_MARGIN), known=True)
        request, trim = self._request_for(message, raised, use_count=False)
        if trim is None or trim.dropped <= rejected.dropped:
            return None
        return request, trim

    def _commit_turn(
        self,
        message: Message,
        request: ChatRequest,
        completion: Completion,
        trim: TrimResult | None,
        turn_id: str | None = None,
    ) -> Generator[Any, Any, None]:
        saved = (
            len(self._log),
            self._history_stats,
            self.calibration,
            self.last_prompt_token_count,
            self._since_count,
            self._last_ratio,
            self._scale_floor,
        )
        sent = (
            self._history_stats + message.stats  # the whole history went out, plus the message
            if trim is None
            else content_stats(request.messages)  # a trimmed request: what it carried
        )
        self._log.append(message, completion.message)
        self._history_stats = self._history_stats + message.stats + completion.message.stats
        usage = completion.usage
        reply_tokens = estimate_content_tokens([completion.message], self.image_token_estimate)
        if (
            usage is not None
            and usage.prompt_tokens > 0
            and plausible_prompt_count(  # issue 27: an absurd count is logged, not learned from
                usage.prompt_tokens,
                estimate_stats_tokens(sent + self._fixed_stats, self.image_token_estimate),
                window=self.context_window,
            )
        ):
            # Learn this tokenizer from a count of exactly what was sent.
            counted = sent + self._fixed_stats
            self.calibration = update_calibration(
                self.calibration,
                counted,
                usage.prompt_tokens,
                image_token_estimate=self.image_token_estimate,
            )
            plain = estimate_stats_tokens(counted, self.image_token_estimate)
            self._last_ratio = usage.prompt_tokens / plain if plain > 0 else None
            self._scale_floor = None  # a real count supersedes what a rejection implied
            left_out = 0
            if trim is not None:
                # A trimmed request was counted without what it left out: add that back on the
                # provider's scale (SPEC §10.6), never as a plain estimate.
                scale = self.provider_scale()
                left_out = scale.tokens(trim.left_out_tokens, scale="best")
            self.last_prompt_token_count = usage.prompt_tokens + left_out
            self._since_count = max(usage.output_tokens, reply_tokens)
        else:
            # No count from the provider: the next send takes the cold path (whole history).
            self.last_prompt_token_count = 0
            self._since_count = 0
        if self.store is not None:
            try:  # durable before the reply is returned; a failed write leaves the turn out
                yield from self.store.append_step(
                    turn_id or uuid.uuid4().hex,
                    (message, completion.message),
                    usage={
                        "prompt_tokens": self.last_prompt_token_count,
                        "since": self._since_count,
                    },
                    calibration=self.calibration.to_dict() if self.calibration.samples else None,
                    growth=self._growth.to_dict(),
                )
            except BaseException as exc:
                (
                    saved_length,
                    self._history_stats,
                    self.calibration,
                    self.last_prompt_token_count,
                    self._since_count,
                    self._last_ratio,
                    self._scale_floor,
                ) = saved
                self._log.truncate(saved_length)
                if isinstance(exc, SessionStoreError | TypeError | ValueError):  # keep the reply
                    raise unsaved_reply(exc, completion, self.store) from exc
                raise
        self._note_tier(self.estimate_tokens())

    # -- events ----------------------------------------------------------------------------

    def _note_tier(self, tokens: int) -> None:
        tier = self.thresholds.tier(tokens)
        if tier is not self._tier:
            previous, self._tier = self._tier, tier
            self._emit(ThresholdCrossed(previous=previous, current=tier, tokens=tokens))

    def _emit(self, event: Event) -> None:
        for hook in self._hooks:
            try:
                hook(event)
            except Exception:
                logger.exception("an autocompact hook raised on %s", event.kind)


def _cancelled(trigger: CompressionTrigger, exc: BaseException) -> CompactionCancelled:
    if isinstance(exc, KeyboardInterrupt):
        return CompactionCancelled(trigger=trigger, reason="interrupted")
    if isinstance(exc, asyncio.CancelledError | GeneratorExit):
        return CompactionCancelled(trigger=trigger, reason="cancelled")
    return CompactionCancelled(
        trigger=trigger, reason="error", error=f"{type(exc).__name__}: {exc}"
    )


class ChatSession(_SessionCore):
    """A conversation with automatic compaction, for synchronous code.

    Args:
        provider: the model to talk to (and, unless ``compression_service`` says otherwise, the
            model that writes summaries).
        context_window: the model's context window in tokens.
        system_instruction: the system prompt.
        tools: tool declarations sent with every turn.
        history: a conversation to continue (a restored session: pass
            ``last_prompt_token_count=0`` so the first send takes the cold estimate path).
        last_prompt_token_count: the provider's last count of ``history``, if known.
        consecutive_failures: the breaker's count to continue from.
        hold_until: the breaker's hold to continue from (SPEC §10.2; a saved session's).
        growth: the growth log to continue from (design decision 63; a saved session's, read
            with :func:`autocompact.compaction.accounting.growth_from_dict`).
        image_token_estimate: tokens per image or document.
        hooks: callables that receive every :mod:`autocompact.events` record.
        max_output_tokens: the output cap of chat turns (``None``: the provider's default).
        compression_service: a custom summarizer (another model, or a local summarizer).
        clear_tool_outputs: clear old tool output (no model call) before summarizing on
            automatic triggers; when that alone gets below the auto threshold, no summary runs.
        calibration: what an earlier run learned about this model's tokenizer (saved with a
            session); the session keeps learning from every reported prompt size and uses it
            to raise, never lower, cold estimates.
        keep_share: the share of the history kept verbatim by a compaction (0: summary only).
        summary_target_tokens: the summary's target size (``None``: the summarizer's default).

    Sends on one session are serialized by a lock.
    """

    def _make_lock(self) -> None:
        self._lock = threading.RLock()

    def clear(self) -> None:
        """Forget the conversation; waits for a send or compaction in progress to finish."""
        with self._lock:
            super().clear()

    def send(self, message: MessageLike, *, turn_id: str | None = None) -> Completion:
        """Send a message and return the model's reply; compacts first when needed.

        With a store, ``turn_id`` makes a retried send idempotent: a turn already stored under
        it is returned as stored, without a model call (default: a new id).
        """
        msg = as_message(message)
        with self._lock:
            return self._drive(self.turn_flow(msg, turn_id))

    def send_stream(self, message: MessageLike) -> Iterator[StreamEvent]:
        """Send a message and yield the reply as it streams; the last event is a StreamDone."""
        msg = as_message(message)
        with self._lock:
            flow = self.turn_flow(msg)
            try:
                request = next(flow)
                while True:
                    if request.purpose == "side_query":
                        try:
                            completion = self._side_provider.complete(request)
                        except ProviderError as exc:
                            request = flow.throw(exc)
                            continue
                        request = flow.send(completion)
                        continue
                    final: Completion | None = None
                    try:
                        for event in self.provider.stream(request):
                            if isinstance(event, StreamDone):
                                final = event.completion
                            else:
                                yield event
                        if final is None:
                            raise MalformedResponseError(
                                "the stream ended without a final message",
                                provider=self.provider.name,
                                model=self.provider.model,
                            )
                    except ProviderError as exc:
                        request = flow.throw(exc)
                        continue
                    request = flow.send(final)
            except StopIteration as stop:
                yield StreamDone(completion=stop.value)
            except BaseException as exc:
                abandon(flow, exc)  # a compaction in progress ends with its event
                raise

    def compress(self, instructions: str | None = None) -> CompressionInfo:
        """Compact now (manual, forced); ``instructions`` are added to the summary prompt."""
        with self._lock:
            step = self.compaction_step(CompressionTrigger.MANUAL, None, instructions)
            return self._drive(step)

    def _drive(self, flow: Generator[ChatRequest, Completion, _T]) -> _T:
        return drive_flow(flow, self._provider_for)


class AsyncChatSession(_SessionCore):
    """A conversation with automatic compaction, for asyncio code (same arguments as
    :class:`ChatSession`).

    Sends on one session are serialized by an :class:`asyncio.Lock`. A session serves one event
    loop at a time: used again from another loop after the first is done (``asyncio.run``
    twice) it works; used from a second loop while a send of the first is in flight, the
    second gets a :class:`~autocompact.errors.ConfigError` that says so (never asyncio's
    ``RuntimeError`` about a lock bound to another loop). :meth:`clear` during a send wins:
    the reply is returned, but neither it nor a summary written meanwhile is kept.

    ``store`` may be an asyncio store (``open_async_store``): every store call of a turn is
    then awaited, the stored history is read on the first send, and :meth:`aclear` clears it.
    """

    _awaits_store = True

    def _make_lock(self) -> None:
        self._lock = asyncio.Lock()
        self._guard = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._owner: asyncio.AbstractEventLoop | None = None
        self._users = 0

    @contextlib.asynccontextmanager
    async def _serialized(self) -> AsyncIterator[None]:
        """Hold the session for one send; refuse a second event loop while one holds it."""
        loop = asyncio.get_running_loop()
        with self._guard:
            if self._owner is not None and self._owner is not loop:
                raise ConfigError(
                    "this AsyncChatSession is in use by another event loop (another thread's "
                    "asyncio.run): a session serves one event loop at a time; create one "
                    "session per loop, or wait for the other loop's send to finish",
                    key="AsyncChatSession",
                )
            if self._loop is not loop:  # a new loop (asyncio.run again): a lock bound to it
                self._lock, self._loop = asyncio.Lock(), loop
            self._owner = loop
            self._users += 1
            lock = self._lock
        try:
            async with lock:
                yield
        finally:
            with self._guard:
                self._users -= 1
                if self._users == 0:
                    self._owner = None

    async def aclear(self) -> None:
        """:meth:`clear`, awaiting the store's clear: the form to use with an asyncio store
        (``open_async_store``); with any other store, or none, it is :meth:`clear`."""
        binding = self.store
        if binding is None or not binding.is_async:
            self.clear()
            return
        await run_step(binding.open_step())
        await run_step(binding.clear_step())
        self.store = None  # the stored history is cleared: reset the rest as clear() does
        try:
            self.clear()
        finally:
            self.store = binding

    async def send(self, message: MessageLike, *, turn_id: str | None = None) -> Completion:
        """Send a message and return the model's reply; compacts first when needed (``turn_id``:
        see :meth:`ChatSession.send`)."""
        msg = as_message(message)
        async with self._serialized():
            return await self._drive(self.turn_flow(msg, turn_id))

    async def send_stream(self, message: MessageLike) -> AsyncIterator[StreamEvent]:
        """Send a message and yield the reply as it streams; the last event is a StreamDone."""
        msg = as_message(message)
        async with self._serialized():
            flow = self.turn_flow(msg)
            try:
                request = next(flow)
                while True:
                    if isinstance(request, Awaiting):  # an asyncio store's call
                        ok, value = await settle(request)
                        request = flow.send(value) if ok else flow.throw(value)
                        continue
                    if request.purpose == "side_query":
                        try:
                            completion = await self._side_provider.acomplete(request)
                        except ProviderError as exc:
                            request = flow.throw(exc)
                            continue
                        request = flow.send(completion)
                        continue
                    final: Completion | None = None
                    try:
                        async for event in self.provider.astream(request):
                            if isinstance(event, StreamDone):
                                final = event.completion
                            else:
                                yield event
                        if final is None:
                            raise MalformedResponseError(
                                "the stream ended without a final message",
                                provider=self.provider.name,
                                model=self.provider.model,
                            )
                    except ProviderError as exc:
                        request = flow.throw(exc)
                        continue
                    request = flow.send(final)
            except StopIteration as stop:
                yield StreamDone(completion=stop.value)
            except BaseException as exc:
                abandon(flow, exc)  # a compaction in progress ends with its event
                raise

    async def compress(self, instructions: str | None = None) -> CompressionInfo:
        """Compact now (manual, forced); ``instructions`` are added to the summary prompt."""
        async with self._serialized():
            step = self.compaction_step(CompressionTrigger.MANUAL, None, instructions)
            return await self._drive(step)

    async def _drive(self, flow: Generator[ChatRequest, Completion, _T]) -> _T:
        return await drive_flow_async(flow, self._provider_for)

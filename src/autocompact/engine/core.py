"""The engine: one conversation's configuration, its state record and the turn flows (SPEC §5).

:class:`Engine` holds an :class:`~autocompact.engine.config.EngineConfig`, a
:class:`~autocompact.engine.state.ConversationState` and, optionally, a store binding; its flows
are generators that yield each :class:`~autocompact.providers.base.ChatRequest` (a side query
or the main turn) and receive the :class:`~autocompact.providers.base.Completion`; provider
errors are thrown into them. It does no I/O: a driver answers the requests — ``ChatSession``
with ``complete``/``stream``, ``AsyncChatSession`` with their async twins, ``ContextGuard`` and
the framework integrations with the framework's own model call — and keeps the state where its
world keeps it.

The flows, each usable on its own:

- :meth:`Engine.turn_flow`: a whole turn (the store's read, the pre-send check, the send);
- :meth:`Engine.pre_send_flow`: the size check, then the hard rescue or the automatic
  compaction (with the outgrown judgement, design decision 63);
- :meth:`Engine.compaction_step`: one compaction (under the store's lease when there is one);
- :meth:`Engine.send_flow`: the guarantee's trimming, the request, the reactive compaction and
  one retry, then :meth:`Engine.commit_turn`;
- :meth:`Engine.reactive_step`: the reactive compaction alone (a driver whose request the
  provider rejected).

State is committed only when a step completes: a turn that is cancelled or fails leaves the
history as it was before that turn's send (a compaction that had already succeeded in the same
call is kept — it is a complete, valid history of its own).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Generator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

from autocompact.compaction.accounting import GrowthLog, automatic_trigger, record_outgrown
from autocompact.compaction.fallback import ProviderScale, TrimResult, check_message_fits
from autocompact.compaction.plan import CompressionInfo, CompressionStatus, CompressionTrigger
from autocompact.compaction.service import CompressionService, check_service
from autocompact.compaction.space import SpaceBreakdown, space_breakdown
from autocompact.content import Message
from autocompact.engine import sizing
from autocompact.engine._steps import CompactionSteps
from autocompact.engine.config import EngineConfig, check_config
from autocompact.engine.state import ConversationState
from autocompact.errors import ConfigError, ContextOverflowError
from autocompact.estimation import Calibration, content_stats
from autocompact.events import (
    BreakerOpened,
    CompactionOutgrown,
    Hook,
    RequestTrimmed,
    WindowLearned,
)
from autocompact.providers.base import ChatRequest, Completion, Provider, ToolSpec, check_provider
from autocompact.sessions.stores.binding import StoreBinding, meta_of
from autocompact.thresholds import CompactionThresholds, Tier
from autocompact.validation import check_count, check_hooks, check_optional_str, check_outgoing

if TYPE_CHECKING:
    from autocompact.sessions.stores.aio import AsyncSessionStore
    from autocompact.sessions.stores.base import SessionStore

from autocompact.sendcheck import check_before_send

__all__ = ["Engine", "TurnFlow"]

logger = logging.getLogger("autocompact")

TurnFlow = Generator[ChatRequest, Completion, Completion]
"""A flow that ends with the main request's completion."""


class Engine(CompactionSteps):
    """One conversation's engine: configuration, state record, hooks and the turn flows.

    Args:
        provider: the chat model (and, unless ``compression_service`` says otherwise, the
            model that writes summaries).
        config: the window, the fixed part of every request and the compaction's knobs.
        state: the conversation to continue (default: an empty one).
        hooks: callables that receive every :mod:`autocompact.events` record.
        compression_service: a custom summarizer (another model, or a local summarizer).
        store: a session store (synchronous, or asyncio for a driver with ``awaits_store``);
            the state is then the stored one, read now and before every turn.
        session_id: the stored session (default: a new id).
        store_owner: this worker's name in the store's leases and entries.

    Raises:
        ConfigError: an asyncio store for a driver that cannot await it.
    """

    awaits_store: ClassVar[bool] = False
    """Whether the driver awaits an asyncio store's calls (yielded as ``Awaiting``)."""

    def __init__(
        self,
        provider: Provider,
        config: EngineConfig,
        *,
        state: ConversationState | None = None,
        hooks: Sequence[Hook] = (),
        compression_service: CompressionService | None = None,
        store: SessionStore | AsyncSessionStore | None = None,
        session_id: str | None = None,
        store_owner: str | None = None,
    ) -> None:
        check_provider(provider)
        check_config(config)
        if compression_service is not None:
            check_service(compression_service, "compression_service")
        check_optional_str(session_id, "session_id")
        check_optional_str(store_owner, "store_owner")
        self.provider = provider
        self.config = config
        self.state = state or ConversationState()
        self.compression = compression_service or CompressionService(provider)
        self.compactions: list[CompressionInfo] = []
        self._hooks: list[Hook] = list(check_hooks(hooks))
        # Bumped by clear(): a flow that started before a clear commits nothing after it.
        self._generation = 0
        self._turn_attempt: CompressionInfo | None = None  # what a trim's reason reports
        self.store: StoreBinding | None = None
        if store is not None:
            meta = meta_of(
                provider=provider.name,
                model=provider.model,
                context_window=config.context_window,
                system_instruction=config.system_instruction,
            )
            self.store = StoreBinding(store, session_id or uuid.uuid4().hex, meta, store_owner)
            if self.store.is_async and not self.awaits_store:
                raise ConfigError(
                    f"{type(self).__name__} cannot await an asyncio store (open_async_store): "
                    "use AsyncChatSession, or a synchronous store (open_store)",
                    key="store",
                )
            self.adopt_snapshot(self.store.snapshot, growth=True)
        self.state.tier = self.config.thresholds.tier(self.estimate_tokens())

    # -- what callers can read (the config's and the state's fields, by their old names) ---

    @property
    def history(self) -> tuple[Message, ...]:
        """The conversation so far (compacted where a compaction ran); a send copies nothing."""
        return self.state.history

    @property
    def tier(self) -> Tier:
        """The tier of the current pre-send estimate (no pending message)."""
        return self.config.thresholds.tier(self.estimate_tokens())

    @property
    def noted_tier(self) -> Tier:
        """The tier the last threshold event reported (the next crossing starts from it)."""
        return self.state.tier

    @property
    def breaker_open(self) -> bool:
        """Whether automatic compaction is paused by the circuit breaker."""
        return self.state.breaker_open

    @property
    def growth(self) -> GrowthLog:
        """The recent growth of the count and the last compaction's age (design decision 63);
        a saved session keeps it (``GrowthLog.to_dict``) to continue with the same pace."""
        return self.state.growth

    @property
    def last_prompt_token_count(self) -> int:
        """The provider's last count (0: unknown)."""
        return self.state.last_prompt_token_count

    @property
    def since_count(self) -> int:
        """Tokens added after the provider's last count (the reply it did not count)."""
        return self.state.since_count

    @property
    def consecutive_failures(self) -> int:
        """The breaker's count."""
        return self.state.consecutive_failures

    @consecutive_failures.setter
    def consecutive_failures(self, value: int) -> None:
        self.state.consecutive_failures = value

    @property
    def hold_until(self) -> int | None:
        """The breaker's hold (SPEC §10.2/§10.7; ``None``: none)."""
        return self.state.hold_until

    @hold_until.setter
    def hold_until(self, value: int | None) -> None:
        self.state.hold_until = value

    @property
    def calibration(self) -> Calibration:
        """What reported counts taught about this model's tokenizer."""
        return self.state.calibration

    @calibration.setter
    def calibration(self, value: Calibration) -> None:
        self.state.calibration = value

    @property
    def context_window(self) -> int:
        """The model's context window (a window learned from the server replaces it)."""
        return self.config.context_window

    @property
    def thresholds(self) -> CompactionThresholds:
        """The ladder of the window."""
        return self.config.thresholds

    @property
    def system_instruction(self) -> str | None:
        """The system prompt."""
        return self.config.system_instruction

    @system_instruction.setter
    def system_instruction(self, value: str | None) -> None:
        # Set on a live session (as the attribute it was): a new, validated configuration.
        self.config = replace(self.config, system_instruction=value)

    @property
    def tools(self) -> tuple[ToolSpec, ...]:
        """The tool declarations."""
        return tuple(self.config.tools)

    @tools.setter
    def tools(self, value: Sequence[ToolSpec]) -> None:
        # Set on a live session (as the attribute it was): a new, validated configuration.
        self.config = replace(self.config, tools=value)

    @property
    def image_token_estimate(self) -> int:
        """Tokens per image or document."""
        return self.config.image_token_estimate

    @image_token_estimate.setter
    def image_token_estimate(self, value: int) -> None:
        # Set on a live session (as the attribute it was): a new, validated configuration.
        self.config = replace(self.config, image_token_estimate=value)

    @property
    def max_output_tokens(self) -> int | None:
        """The output cap of chat turns."""
        return self.config.max_output_tokens

    @max_output_tokens.setter
    def max_output_tokens(self, value: int | None) -> None:
        # Set on a live session (as the attribute it was): a new, validated configuration.
        self.config = replace(self.config, max_output_tokens=value)

    @property
    def clear_tool_outputs(self) -> bool:
        """Whether old tool output is cleared before summarizing."""
        return self.config.clear_tool_outputs

    @clear_tool_outputs.setter
    def clear_tool_outputs(self, value: bool) -> None:
        # Set on a live session (as the attribute it was): a new, validated configuration.
        self.config = replace(self.config, clear_tool_outputs=value)

    @property
    def keep_share(self) -> float:
        """The share of the history a compaction keeps verbatim."""
        return self.config.keep_share

    @keep_share.setter
    def keep_share(self, value: float) -> None:
        # Set on a live session (as the attribute it was): a new, validated configuration.
        self.config = replace(self.config, keep_share=value)

    @property
    def summary_target_tokens(self) -> int | None:
        """The summary's target size."""
        return self.config.summary_target_tokens

    @summary_target_tokens.setter
    def summary_target_tokens(self, value: int | None) -> None:
        # Set on a live session (as the attribute it was): a new, validated configuration.
        self.config = replace(self.config, summary_target_tokens=value)

    def space(self) -> SpaceBreakdown:
        """What holds the space in the context now, by category (``/context``)."""
        return space_breakdown(
            self.history,
            system_instruction=self.config.system_instruction,
            tools=tuple(self.config.tools),
            image_token_estimate=self.config.image_token_estimate,
        )

    def add_hook(self, hook: Hook) -> None:
        """Register a callable that receives every event."""
        if not callable(hook):  # (it was logged as a failing hook at every event)
            raise ConfigError(
                f"add_hook takes a callable that takes an event, got {type(hook).__name__} "
                f"{hook!r:.60}",
                key="hook",
            )
        self._hooks.append(hook)

    @property
    def side_provider(self) -> Provider:
        """Who answers side queries: the compression service's model, else the chat model."""
        return self.compression.side_provider(self.provider)

    def provider_for(self, request: ChatRequest) -> Provider:
        """Side queries go to the compression service's model, turns to the chat model."""
        return self.side_provider if request.purpose == "side_query" else self.provider

    # -- what a framework keeps between its hooks (the LangChain middleware's state) ---------

    def resume(
        self,
        *,
        since_count: int = 0,
        hold_until: int | None = None,
        noted_tier: Tier | None = None,
    ) -> None:
        """Take back what a framework kept between two calls: the tokens added since the
        provider's last count, the breaker's hold and the last noted tier."""
        check_count(since_count, "since_count")
        check_count(hold_until, "hold_until", optional=True)
        self.state.since_count = since_count
        self.state.hold_until = hold_until
        if noted_tier is not None:
            self.state.tier = noted_tier

    def clear(self) -> None:
        """Forget the conversation (and the counts and breaker state that came with it)."""
        self._generation += 1
        if self.store is not None:  # nothing is deleted: the stored history is replaced
            self.store.clear()
        self.state.reset()
        self._note_tier(self.estimate_tokens())

    # -- the flows -------------------------------------------------------------------------

    def turn_flow(self, message: Message, turn_id: str | None = None) -> TurnFlow:
        """A whole turn: with a store, its read (or a stored reply for a retried ``turn_id``);
        then :meth:`pre_send_flow` and :meth:`send_flow`."""
        check_outgoing(self.state.log.view(), message)
        check_before_send(message, self.store)  # fails now what the store would refuse later
        if self.store is not None:  # an asyncio store's calls are yielded to be awaited
            yield from self.store.open_step()
            stored = (yield from self.store.find_turn_step(turn_id)) if turn_id else None
            if stored is not None and len(stored.messages) == 2:  # a retry of a stored turn
                self.store.check_retry(stored, message)  # the same message, or refused
                self.adopt_snapshot((yield from self.store.refresh_step()), growth=True)
                return Completion(message=stored.messages[1])
            turn_id = turn_id or uuid.uuid4().hex
            self.adopt_snapshot((yield from self.store.refresh_step()), growth=True)
        generation = self._generation
        yield from self.pre_send_flow(message)
        return (yield from self.send_flow(message, turn_id, generation))

    def pre_send_flow(self, message: Message) -> Generator[ChatRequest, Completion, None]:
        """Before a send: the size check, then the hard rescue or the automatic compaction.

        Framework integrations run it on their own before-model hook and :meth:`send_flow`
        around the framework's model call, so the decision is made here once.

        Raises:
            MessageTooLargeError: the message cannot fit the window with the system prompt
                and tools every request carries (before anything, even a side query, is sent).
        """
        config, state = self.config, self.state
        self._turn_attempt = None
        self.check_fits(message)
        effective = self.estimate_tokens(message)
        self._note_tier(effective)
        state.growth = state.growth.before_send(effective)
        trigger = automatic_trigger(effective, config.thresholds, state.breaker)
        if trigger is not None and state.growth.outgrown:
            yield from self.judge_outgrown(effective, trigger)
            trigger = automatic_trigger(effective, config.thresholds, state.breaker)
        if trigger is not None:
            yield from self.compaction_step(trigger, message)

    def check_fits(self, message: Message) -> None:
        """The size check :meth:`pre_send_flow` starts with: refuse a message that cannot fit
        the window with the system prompt and tools every request carries. A driver that only
        trims (``ContextGuard.guarantee``) runs it too, so a message the ladder refuses is
        never sent by another path.

        Raises:
            MessageTooLargeError: it cannot fit (the refusal is sure: note 84).
        """
        config = self.config
        check_message_fits(
            message,
            window=config.context_window,
            image_token_estimate=config.image_token_estimate,
            fixed_tokens=config.fixed_plain,
            scale=sizing.refusal_scale(self.state, message.stats + config.fixed_stats),
        )

    def judge_outgrown(self, tokens: int, trigger: CompressionTrigger) -> Generator[Any, Any, None]:
        """A compaction is needed again fewer than 5 calls after an effective one: judge that
        one outgrown, count it, and hold from the count it left (design decision 63).

        With a store the count and hold are written there first, in one write (design decision
        69), and read back: the compaction step that follows adopts the stored counters, and
        other workers share them. When another worker already recorded the judgement at this
        epoch, its count and hold are taken and nothing more is counted or reported. A failed
        write leaves the session as it was (the judgement is made again on the next send).
        """
        state = self.state
        log = state.growth
        was_open = state.breaker_open
        judged = record_outgrown(state.breaker, log, self.config.thresholds)
        hold = judged.hold_until or 0
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
            state.consecutive_failures, state.hold_until = (
                stored.consecutive_failures,
                stored.hold_until,
            )
            state.growth = log.judged()
            if not recorded:
                return
        else:
            state.consecutive_failures, state.hold_until = (
                judged.consecutive_failures,
                judged.hold_until,
            )
            state.growth = log.judged()
        self._emit(
            CompactionOutgrown(
                calls=log.since_compaction or 0,
                compacted_to=log.compacted_to,
                tokens=tokens,
                hold_until=hold,
            )
        )
        if state.breaker_open and not was_open:
            self._emit(BreakerOpened(consecutive_failures=state.consecutive_failures))

    def reactive_step(self, message: Message) -> Generator[Any, Any, CompressionInfo]:
        """The provider rejected the request as too long: judge the last compaction outgrown
        when it was, then a forced (reactive) compaction."""
        if self.state.growth.outgrown:
            tokens = self.estimate_tokens(message)
            yield from self.judge_outgrown(tokens, CompressionTrigger.REACTIVE)
        return (yield from self.compaction_step(CompressionTrigger.REACTIVE, message))

    def send_flow(
        self, message: Message, turn_id: str | None = None, generation: int | None = None
    ) -> TurnFlow:
        """The send: the guarantee's trimming, the request, the reactive retry, the commit.

        If the provider says "too long", a forced compaction runs and the request is sent
        once more; if nothing could be compacted, the request is trimmed on a raised scale
        and retried once; if that cannot help, the provider's original error is raised.
        """
        if generation is None:
            generation = self._generation
        request, trim = self.request_for(message)
        try:
            completion = yield request
        except ContextOverflowError as overflow:
            self._learn_window(overflow)
            info = yield from self.reactive_step(message)
            if info.status is CompressionStatus.COMPRESSED:
                request, trim = self.request_for(message)
            else:
                # Still "too long" and nothing compacted: the scale under-sized the request.
                # Trim to a lower target and retry once before surfacing the error.
                self.state.scale_floor = sizing.rejection_floor(
                    self.config, self.state, message, trim
                )
                retry = self._retry_for(message, trim)
                if retry is None:
                    raise overflow from None
                request, trim = retry
            completion = yield request
        if generation == self._generation:  # a clear() during the send wins
            yield from self.commit_turn(message, request, completion, trim, turn_id)
        return completion

    def _learn_window(self, overflow: ContextOverflowError) -> None:
        """Believe a server that states a smaller window in its overflow error (llama.cpp's
        ``n_ctx``): the configured window was assumed or wrong."""
        window = overflow.context_window
        previous = self.config.context_window
        if window is None or window >= previous or window < 1024:
            return
        self.config = self.config.with_window(window)
        self._emit(WindowLearned(previous=previous, context_window=window))

    def request_for(
        self, message: Message, scale: ProviderScale | None = None, *, use_count: bool = True
    ) -> tuple[ChatRequest, TrimResult | None]:
        """The main request, trimmed by the guarantee when needed (None: nothing trimmed);
        see :func:`autocompact.engine.sizing.plan_request`."""
        scale = scale or self.provider_scale()
        planned = sizing.plan_request(self.config, self.state, message, scale, use_count=use_count)
        trim = planned.trim
        if trim is not None:
            reason = sizing.trim_reason(
                self.config,
                self.state,
                planned,
                scale,
                estimate=self.estimate_tokens(message),
                attempt=self._turn_attempt,
            )
            self._emit(
                RequestTrimmed(
                    dropped_messages=trim.dropped,
                    tokens_before=planned.size,
                    tokens_after=trim.tokens_after,
                    reason=reason,
                )
            )
            sent = content_stats(planned.request.messages) + self.config.fixed_stats
            sizing.check_trimmed_fits(self.config, sizing.refusal_scale(self.state, sent), trim)
        return planned.request, trim

    def _retry_for(
        self, message: Message, rejected: TrimResult | None
    ) -> tuple[ChatRequest, TrimResult | None] | None:
        """The one retry after a trimmed request was still "too long" (SPEC §10.6); None when
        the rejected request was not trimmed or nothing smaller can be sent."""
        planned = sizing.plan_retry(self.config, self.state, rejected)
        if planned is None:
            return None
        raised, dropped = planned
        request, trim = self.request_for(message, raised, use_count=False)
        if trim is None or trim.dropped <= dropped:
            return None
        return request, trim

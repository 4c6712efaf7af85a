"""Chat sessions: the pre-send check, the hard rescue, the breaker and the reactive retry (SPEC §5).

:class:`ChatSession` and :class:`AsyncChatSession` are drivers of one engine
(:class:`autocompact.engine.Engine`): its turn flow yields each :class:`ChatRequest` (side query
or main turn) and receives the :class:`Completion`; provider errors are thrown into it. The two
classes only differ in how they answer a request (``complete``/``stream`` or
``acomplete``/``astream``); the conversation's state is the engine's record, kept in memory
(and in a store, with ``store=``).

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
import threading
from collections.abc import AsyncIterator, Generator, Iterator, Sequence
from typing import TYPE_CHECKING, TypeVar

from autocompact.compaction.accounting import GrowthLog
from autocompact.compaction.plan import CompressionInfo, CompressionTrigger
from autocompact.compaction.service import (
    Awaiting,
    CompressionService,
    abandon,
    drive_flow,
    drive_flow_async,
    settle,
)
from autocompact.compaction.split import COMPRESSION_PRESERVE_THRESHOLD
from autocompact.content import Message, Part, as_message
from autocompact.engine import CarriedState, ConversationState, Engine, EngineConfig
from autocompact.engine.config import check_config, check_tools
from autocompact.errors import ConfigError, MalformedResponseError, ProviderError
from autocompact.estimation import Calibration
from autocompact.events import Hook
from autocompact.providers.base import (
    ChatRequest,
    Completion,
    Provider,
    StreamDone,
    StreamEvent,
    ToolSpec,
    require_method,
)
from autocompact.sessions.stores.binding import run_step
from autocompact.thresholds import DEFAULT_IMAGE_TOKEN_ESTIMATE
from autocompact.validation import check_count, check_optional_str, check_user_turn

if TYPE_CHECKING:
    from autocompact.sessions.stores.aio import AsyncSessionStore
    from autocompact.sessions.stores.base import SessionStore

__all__ = ["AsyncChatSession", "ChatSession"]

MessageLike = str | Message | Sequence[Part]
_T = TypeVar("_T")


class _ChatBase(Engine):
    """The keyword arguments both session classes take, turned into the engine's config and
    state record (see :class:`ChatSession` for each)."""

    def __init__(
        self,
        provider: Provider,
        *,
        context_window: int | None = None,
        config: EngineConfig | None = None,
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
        check_count(hold_until, "hold_until", optional=True)
        settings = EngineConfig(
            context_window=1 if context_window is None else context_window,
            system_instruction=system_instruction,
            tools=tools,
            image_token_estimate=image_token_estimate,
            max_output_tokens=max_output_tokens,
            clear_tool_outputs=clear_tool_outputs,
            keep_share=keep_share,
            summary_target_tokens=summary_target_tokens,
        )
        if config is None:
            if context_window is None:
                raise ConfigError(
                    "context_window is required (or pass config=)", key="context_window"
                )
            config = settings
        elif context_window is not None or settings != EngineConfig(context_window=1):
            raise ConfigError(
                "pass the window, system prompt, tools, output cap and compaction settings "
                "either in config=EngineConfig(...) or as keyword arguments, not both",
                key="config",
            )
        check_tools(
            check_config(config).tools, json_declarations=False
        )  # each adapter reads their fields
        check_count(consecutive_failures, "consecutive_failures")
        carried = CarriedState(
            consecutive_failures=consecutive_failures,
            hold_until=hold_until,
            calibration=calibration or Calibration(),
            growth=growth or GrowthLog(),
        )
        state = ConversationState.start(
            history, last_prompt_token_count=last_prompt_token_count, carried=carried
        )
        super().__init__(
            provider,
            config,
            state=state,
            hooks=hooks,
            compression_service=compression_service,
            store=store,
            session_id=session_id,
            store_owner=store_owner,
        )
        self._make_lock()

    def _make_lock(self) -> None:
        """Create the lock that serializes sends (each session class picks its kind)."""

    def _require(self, chat: str | None, side: str, caller: str) -> None:
        """Raise unless the model has ``chat`` and whoever writes summaries has ``side`` (a
        summarizer function needs neither): a ConfigError naming them, before anything runs."""
        if chat is not None:
            require_method(self.provider, chat, caller)
        summaries = self.compression.provider
        if summaries is None and self.compression.summarizer is None:
            summaries = self.provider
        if summaries is not None and (chat != side or summaries is not self.provider):
            require_method(summaries, side, f"{caller} (for its summaries)")


class ChatSession(_ChatBase):
    """A conversation with automatic compaction, for synchronous code.

    Args:
        provider: the model to talk to (and, unless ``compression_service`` says otherwise, the
            model that writes summaries).
        context_window: the model's context window in tokens.
        config: all of the model's and the compaction's settings as one
            :class:`~autocompact.engine.EngineConfig` (instead of ``context_window``,
            ``system_instruction``, ``tools``, ``image_token_estimate``, ``max_output_tokens``,
            ``clear_tool_outputs``, ``keep_share`` and ``summary_target_tokens``).
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
            session); the session keeps learning from every reported prompt size and sizes
            cold estimates with it: raised only until it has learned from two reports, then
            either way within 0.5-2.0 (a lowering with a 3 % margin).
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
        self._require("complete", "complete", "ChatSession.send")
        check_user_turn(msg, "ChatSession.send")
        check_optional_str(turn_id, "turn_id")
        with self._lock:
            return self._drive(self.turn_flow(msg, turn_id))

    def send_stream(self, message: MessageLike) -> Iterator[StreamEvent]:
        """Send a message and yield the reply as it streams; the last event is a StreamDone."""
        msg = as_message(message)
        self._require("stream", "complete", "ChatSession.send_stream")
        check_user_turn(msg, "ChatSession.send_stream")
        with self._lock:
            flow = self.turn_flow(msg)
            try:
                request = next(flow)
                while True:
                    if request.purpose == "side_query":
                        try:
                            completion = self.side_provider.complete(request)
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
        self._require(None, "complete", "ChatSession.compress")
        with self._lock:
            step = self.compaction_step(CompressionTrigger.MANUAL, None, instructions)
            return self._drive(step)

    def _drive(self, flow: Generator[ChatRequest, Completion, _T]) -> _T:
        return drive_flow(flow, self.provider_for)


class AsyncChatSession(_ChatBase):
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

    awaits_store = True

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
        self._require("acomplete", "acomplete", "AsyncChatSession.send")
        check_user_turn(msg, "AsyncChatSession.send")
        check_optional_str(turn_id, "turn_id")
        async with self._serialized():
            return await self._drive(self.turn_flow(msg, turn_id))

    async def send_stream(self, message: MessageLike) -> AsyncIterator[StreamEvent]:
        """Send a message and yield the reply as it streams; the last event is a StreamDone."""
        msg = as_message(message)
        self._require("astream", "acomplete", "AsyncChatSession.send_stream")
        check_user_turn(msg, "AsyncChatSession.send_stream")
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
                            completion = await self.side_provider.acomplete(request)
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
        self._require(None, "acomplete", "AsyncChatSession.compress")
        async with self._serialized():
            step = self.compaction_step(CompressionTrigger.MANUAL, None, instructions)
            return await self._drive(step)

    async def _drive(self, flow: Generator[ChatRequest, Completion, _T]) -> _T:
        return await drive_flow_async(flow, self.provider_for)

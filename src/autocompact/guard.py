"""The engine for frameworks that send their own requests (pydantic-ai, the OpenAI Agents SDK).

A framework owns its history and calls the model itself; it hands autocompact the request it is
about to send, already converted to :class:`~autocompact.content.Message` objects (the last one is
the pending user message or tool results), with the system prompt and the tool declarations.
:class:`ContextGuard` runs exactly the steps a :class:`~autocompact.chat.ChatSession` runs before
its own sends — the size check, the ladder (hard rescue, auto compaction, breaker), the guarantee's
trimming — through the same code (the engine's ``pre_send_flow``, ``request_for`` and
``reactive_step``, which ``ChatSession.turn_flow`` runs too), and the reactive compaction when
the provider still said "too long". No decision is made here: this is a driver of
:class:`autocompact.engine.Engine`.

What a session keeps between sends (the breaker's count, the calibration) travels in a frozen
:class:`GuardState` (the engine's :class:`~autocompact.engine.state.CarriedState`) that the
caller stores where its framework keeps state (pydantic-ai: the message history's metadata;
Agents SDK: the session wrapper), so a restored conversation resumes with the breaker and
calibration it had.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from autocompact.compaction.plan import CompressionInfo, CompressionStatus
from autocompact.compaction.service import (
    CompressionService,
    check_service,
    drive_flow,
    drive_flow_async,
)
from autocompact.compaction.split import COMPRESSION_PRESERVE_THRESHOLD
from autocompact.content import CharStats, Message, json_length
from autocompact.engine import CarriedState, ConversationState, Engine, EngineConfig
from autocompact.errors import ConfigError, ContentError, MessageTooLargeError
from autocompact.estimation import content_stats, estimate_stats_tokens, update_calibration
from autocompact.events import Hook
from autocompact.providers.base import ChatRequest, Completion, Provider, StreamEvent, ToolSpec
from autocompact.thresholds import DEFAULT_IMAGE_TOKEN_ESTIMATE
from autocompact.usage_check import plausible_prompt_count
from autocompact.validation import check_hooks, explain_bad_items, message_list

if TYPE_CHECKING:
    from autocompact.sessions.stores.base import SessionStore

__all__ = [
    "ContextGuard",
    "GuardResult",
    "GuardState",
    "learn_from_usage",
    "request_stats",
]

_GuardFlow = Generator[ChatRequest, Completion, "GuardResult"]


GuardState = CarriedState
"""What the engine carries from one request to the next (the engine's
:class:`~autocompact.engine.state.CarriedState`; its JSON form is unchanged)."""


@dataclass(frozen=True, kw_only=True)
class GuardResult:
    """What to do with the request a framework is about to send.

    Attributes:
        history: the conversation to keep (compacted when a compaction succeeded; the pending
            message is its last message).
        request: the messages to send now: ``history``, or, when it is still at or above the
            hard threshold, ``history`` with the oldest turns left out (the guarantee).
        compactions: what each compaction attempt of this step did.
        state: the state to carry to the next request.
        tokens: the pre-send estimate before anything was done.
        left_out_tokens: the estimated size of what the guarantee left out of ``request``.
        over_window: why the request cannot fit the window even with every earlier turn left
            out (``None``: it fits). Only with ``over_window_ok``, else that raises
            ``MessageTooLargeError``; ``request`` is then ``history``, untrimmed.
    """

    history: tuple[Message, ...]
    request: tuple[Message, ...]
    compactions: tuple[CompressionInfo, ...]
    state: GuardState
    tokens: int
    left_out_tokens: int = 0
    over_window: str | None = None

    @property
    def compacted(self) -> bool:
        """Whether a compaction replaced the history."""
        return any(info.status is CompressionStatus.COMPRESSED for info in self.compactions)

    @property
    def trimmed(self) -> bool:
        """Whether the guarantee left turns out of this request (never out of the history)."""
        return self.left_out_tokens > 0


class _NoChatProvider:
    """Stands in for the chat model: a framework sends its own requests, never through here."""

    name = "framework"
    model = "framework"

    def _refuse(self) -> ConfigError:
        return ConfigError("a framework guard sends no chat request; this is a bug in autocompact")

    def complete(self, request: ChatRequest) -> Completion:
        raise self._refuse()

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        raise self._refuse()

    async def acomplete(self, request: ChatRequest) -> Completion:
        raise self._refuse()

    def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        raise self._refuse()


class ContextGuard:
    """Runs the ladder on requests a framework sends itself.

    Args:
        context_window: the model's context window in tokens.
        compression: who writes summaries: a service over an autocompact provider (the agent's
            own model wrapped as one), or over a local summarizer.
        clear_tool_outputs: clear old tool output (no model call) before summarizing.
        image_token_estimate: tokens per image or document.
        hooks: callables that receive every :mod:`autocompact.events` record.
        keep_share: the share of the history a compaction keeps verbatim.
        summary_target_tokens: the summary's target size and so its output cap (``None``:
            the default).
    """

    def __init__(
        self,
        *,
        context_window: int,
        compression: CompressionService,
        clear_tool_outputs: bool = True,
        image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE,
        hooks: Sequence[Hook] = (),
        keep_share: float = COMPRESSION_PRESERVE_THRESHOLD,
        summary_target_tokens: int | None = None,
    ) -> None:
        self.context_window = context_window
        self.compression = check_service(compression, "compression")
        self.clear_tool_outputs = clear_tool_outputs
        self.image_token_estimate = image_token_estimate
        self.keep_share = keep_share
        self.summary_target_tokens = summary_target_tokens
        self.hooks = check_hooks(hooks)
        self._config(None, ())  # a bad value is a ConfigError now, not at the first request

    def _core(
        self,
        messages: Sequence[Message],
        system_instruction: str | None,
        tools: Sequence[ToolSpec],
        state: GuardState,
        last_prompt_token_count: int,
    ) -> tuple[Engine, Message]:
        try:
            messages = tuple(message_list(messages, "messages"))
            last = messages[-1].role if messages else None
            config = self._config(system_instruction, tools)
            carried = ConversationState.start(
                messages[:-1], last_prompt_token_count=last_prompt_token_count, carried=state
            )
        except (AttributeError, TypeError) as exc:
            explain_bad_items(messages, "messages", exc)
        if last != "user":
            raise ContentError(
                "a request must end with the pending user message or tool results "
                f"(got {'no messages' if not messages else 'a model message last'})"
            )
        provider: Provider = self.compression.provider or _NoChatProvider()
        core = Engine(
            provider,
            config,
            state=carried,
            hooks=self.hooks,
            compression_service=self.compression,
        )
        return core, messages[-1]

    def store_core(
        self,
        store: SessionStore,
        session_id: str,
        *,
        owner: str | None = None,
        system_instruction: str | None = None,
        tools: Sequence[ToolSpec] = (),
    ) -> Engine:
        """An engine over a conversation kept in ``store`` (shared by workers).

        Its history, breaker count, hold and calibration are the stored ones (read now); its
        compactions take the store's lease and commit with the compare-and-swap, and the turns
        its send flow commits are appended under their turn ids — the rules of
        ``ChatSession(store=…)`` (:class:`~autocompact.sessions.stores.binding.StoreBinding`).
        """
        provider: Provider = self.compression.provider or _NoChatProvider()
        return Engine(
            provider,
            self._config(system_instruction, tools),
            hooks=self.hooks,
            compression_service=self.compression,
            store=store,
            session_id=session_id,
            store_owner=owner,
        )

    def _config(self, system_instruction: str | None, tools: Sequence[ToolSpec]) -> EngineConfig:
        return EngineConfig(
            context_window=self.context_window,
            system_instruction=system_instruction,
            tools=tools,
            image_token_estimate=self.image_token_estimate,
            clear_tool_outputs=self.clear_tool_outputs,
            keep_share=self.keep_share,
            summary_target_tokens=self.summary_target_tokens,
        )

    def flow(
        self,
        messages: Sequence[Message],
        *,
        system_instruction: str | None = None,
        tools: Sequence[ToolSpec] = (),
        state: GuardState | None = None,
        last_prompt_token_count: int = 0,
        reactive: bool = False,
        over_window_ok: bool = False,
    ) -> _GuardFlow:
        """The step as a generator of side queries (for custom drivers).

        Args:
            messages: the request's messages; the last is the pending user message.
            system_instruction, tools: what the request sends besides the messages (counted).
            state: the state carried from the previous request.
            last_prompt_token_count: the provider's count of ``messages`` without the pending
                message (0: unknown; the estimate covers everything).
            reactive: the provider rejected this request as too long: force a compaction; on
                failure the result's history and request are ``messages`` unchanged.
            over_window_ok: a request that cannot fit the window even trimmed is a result
                (``over_window`` set, with what the step did to the state: a failed
                compaction's count) rather than a ``MessageTooLargeError``.

        Raises:
            MessageTooLargeError: the request cannot fit the window even with every earlier
                turn left out (unless ``over_window_ok``).
        """
        state = state or GuardState()
        core, pending = self._core(
            messages, system_instruction, tools, state, last_prompt_token_count
        )
        tokens = core.estimate_tokens(pending)
        try:
            if reactive:
                # As the session's send flow: a forced compaction, then the request once more.
                info = yield from core.reactive_step(pending)
                if info.status is CompressionStatus.COMPRESSED:
                    request, trim = core.request_for(pending)
                else:
                    request, trim = ChatRequest(messages=tuple(messages)), None
            else:
                yield from core.pre_send_flow(pending)
                request, trim = core.request_for(pending)
        except MessageTooLargeError as exc:
            if not over_window_ok:
                raise
            history = (*core.history, pending)
            return GuardResult(
                history=history,
                request=history,
                compactions=tuple(core.compactions),
                state=core.state.carried(),
                tokens=tokens,
                over_window=str(exc),
            )
        return GuardResult(
            history=(*core.history, pending),
            request=tuple(request.messages),
            compactions=tuple(core.compactions),
            state=core.state.carried(),
            tokens=tokens,
            left_out_tokens=0 if trim is None else trim.left_out_tokens,
        )

    def guarantee(
        self,
        messages: Sequence[Message],
        *,
        system_instruction: str | None = None,
        tools: Sequence[ToolSpec] = (),
        state: GuardState | None = None,
        last_prompt_token_count: int = 0,
        over_window_ok: bool = False,
    ) -> GuardResult:
        """The size check and the guarantee, with no compaction: for a request the caller may
        change but not persist (a framework's input filter). A pending message that cannot fit
        the window with the system prompt and tools is refused, as :meth:`flow` refuses it
        (the engine's ``check_fits``, the check ``pre_send_flow`` starts with); at or above the
        hard threshold the oldest turns are left out of the request until it is below auto.

        Raises:
            MessageTooLargeError: the pending message cannot fit the window, or the request
                cannot even with every earlier turn left out (unless ``over_window_ok``: the
                result says so, as :meth:`flow`'s does).
        """
        state = state or GuardState()
        core, pending = self._core(
            messages, system_instruction, tools, state, last_prompt_token_count
        )
        tokens = core.estimate_tokens(pending)
        try:
            core.check_fits(pending)  # the size check pre_send_flow starts with
            request, trim = core.request_for(pending)
        except MessageTooLargeError as exc:
            if not over_window_ok:
                raise
            whole = tuple(messages)
            return GuardResult(
                history=whole,
                request=whole,
                compactions=(),
                state=state,
                tokens=tokens,
                over_window=str(exc),
            )
        return GuardResult(
            history=tuple(messages),
            request=tuple(request.messages),
            compactions=(),
            state=state,
            tokens=tokens,
            left_out_tokens=0 if trim is None else trim.left_out_tokens,
        )

    def run(self, messages: Sequence[Message], **kwargs: Any) -> GuardResult:
        """:meth:`flow` driven synchronously (side queries through ``compression.provider``)."""
        return drive_flow(self.flow(messages, **kwargs), self._side_provider)

    async def arun(self, messages: Sequence[Message], **kwargs: Any) -> GuardResult:
        """Async :meth:`run`."""
        return await drive_flow_async(self.flow(messages, **kwargs), self._side_provider)

    def _side_provider(self, request: ChatRequest) -> Provider:
        if self.compression.provider is None:
            raise ConfigError("a summary is needed but the compression service has no provider")
        return self.compression.provider


def request_stats(
    messages: Sequence[Message], *, system_instruction: str | None, tools: Sequence[ToolSpec]
) -> CharStats:
    """The character statistics of a whole request (what calibration compares a count with)."""
    fixed = CharStats(
        text_chars=len(system_instruction or ""),
        json_chars=sum(json_length(tool.as_json()) for tool in tools),
    )
    return content_stats(messages) + fixed


def learn_from_usage(
    state: GuardState,
    sent: CharStats,
    prompt_tokens: int,
    *,
    image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE,
) -> GuardState:
    """The state after the provider counted ``prompt_tokens`` for a request of ``sent``."""
    if prompt_tokens <= 0 or not plausible_prompt_count(  # absurd counts are not learned
        prompt_tokens, estimate_stats_tokens(sent, image_token_estimate)
    ):
        return state
    calibration = update_calibration(
        state.calibration, sent, prompt_tokens, image_token_estimate=image_token_estimate
    )
    return replace(state, calibration=calibration)

"""The OpenAI Agents SDK: a compacting session wrapper and an input filter for the guarantee.

Install with ``pip install "autocompact[openai-agents]"``. Importing this module imports the SDK
(``agents``); ``import autocompact`` never does.

- :class:`AutocompactSession` wraps any session (``SQLiteSession``, ``SQLAlchemySession``, the
  encrypted or Redis ones, ...) and compacts its items on the token ladder in ``run_compaction``,
  the entry point the runner calls after each turn (it skips turns whose local tool outputs are
  still pending, and a compaction here never cuts a call whose output is not stored yet). The
  system prompt and the tool declarations are counted: pass them, or let
  :meth:`AutocompactSession.call_model_input_filter` learn them from the requests the runner
  sends (the session's agents' requests: not those of an agent used as a tool).
- :class:`StoreSession` is a session kept in an autocompact store (SQLite, PostgreSQL, JSONL),
  shared by workers: idempotent appends, compactions single-flight with the compare-and-swap,
  the breaker count and calibration stored with the conversation (``docs/sessions.md``); the
  items a worker process stored come back to it as they were stored (ids, reasoning, ...).
- :meth:`AutocompactSession.call_model_input_filter` (``RunConfig(call_model_input_filter=...)``)
  applies the guarantee to each outgoing request: a request still at or above the hard threshold
  has its oldest turns left out of that request only, never out of the session.
  :meth:`AutocompactSession.run_config` is the one construct that installs it
  (``Runner.run(agent, text, session=session, run_config=session.run_config())``); a session
  whose turns run without it warns once (``RuntimeWarning``). The model's count of each request
  the filter lets out (the run's usage) teaches the engine the provider's scale, so a trimmed
  request keeps what the model's own count says fits.

The decisions are the engine's (:class:`autocompact.guard.ContextGuard`); this module converts
items. Conversion is lossless: items the engine did not change come back as the same objects;
new ones (the summary, cleared tool output) are built from the engine's parts. Item types the
engine cannot express (hosted tool calls, computer use, ...) raise
:class:`~autocompact.errors.ContentError` naming the item.
"""

from __future__ import annotations

import warnings
from collections.abc import Awaitable, Sequence
from typing import Any

from autocompact.compaction.plan import CompressionInfo
from autocompact.content import Message
from autocompact.errors import MessageTooLargeError, MissingDependencyError
from autocompact.events import Hook
from autocompact.guard import ContextGuard, GuardState, request_stats
from autocompact.providers.base import ToolSpec
from autocompact.thresholds import DEFAULT_IMAGE_TOKEN_ESTIMATE

try:
    from agents.memory.session import Session
    from agents.run_config import CallModelData, ModelInputData, RunConfig
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    raise MissingDependencyError("openai-agents", "openai-agents") from exc

from autocompact.integrations._openai_agents_convert import (
    AgentsModelProvider,
    ConvertedItems,
    Item,
    SummarizerChoice,
    agent_tool_specs,
    from_autocompact,
    pending_start,
    summary_service,
    to_autocompact,
)
from autocompact.integrations._openai_agents_model import (
    AgentModel,
    RequestCounts,
    RunAgents,
    add_side_usage,
    engine_options,
    forward,
    guarded_input,
    json_form,
    take_back,
    with_mcp_tools,
)
from autocompact.integrations._openai_agents_store import StoreSession

__all__ = [
    "AgentsModelProvider",
    "AutocompactSession",
    "ConvertedItems",
    "StoreSession",
    "from_autocompact",
    "to_autocompact",
]


class AutocompactSession:
    """A session that compacts the items of an underlying session on the token ladder.

    Args:
        underlying: the session that stores the items (any ``Session``).
        context_window: the model's context window in tokens; ``None`` (the default): the
            window the Agents SDK's (else autocompact's) table of known models gives the
            agent's model, learned by the input filter (``ConfigError`` when neither knows it).
        summarizer: ``"model"`` (the default: the model the agent runs with, learned by the
            input filter; thinking off, 20K cap), ``"offline"`` (the extractive summarizer,
            no model call), an autocompact provider, an Agents SDK ``Model``, or a function
            ``(messages) -> summary``. The side queries count in the run's
            ``context_wrapper.usage``.
        system_instruction, tools: counted with the history; learned from each request by
            :meth:`call_model_input_filter` when it is installed.
        state: the breaker's count and calibration to start from.
        clear_tool_outputs: clear old tool output (no model call) before summarizing.
        image_token_estimate: tokens per image or document.
        hooks: callables that receive every :mod:`autocompact.events` record.
    """

    def __init__(
        self,
        underlying: Session,
        *,
        context_window: int | None = None,
        summarizer: SummarizerChoice = "model",
        system_instruction: str | None = None,
        tools: Sequence[ToolSpec] = (),
        state: GuardState | None = None,
        clear_tool_outputs: bool = True,
        image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE,
        hooks: Sequence[Hook] = (),
    ) -> None:
        self.underlying = underlying
        self.session_id = underlying.session_id
        self.session_settings = getattr(underlying, "session_settings", None)
        self.system_instruction = system_instruction
        self.tools = tuple(tools)
        self.state = state or GuardState()
        self.compactions: list[CompressionInfo] = []
        self.trimmed_requests = 0
        self.filtered_requests = 0
        self._warned = False
        self.model = AgentModel(
            context_window=context_window, summarizer=summarizer, where="AutocompactSession"
        )
        self._options = engine_options(
            clear_tool_outputs=clear_tool_outputs,
            image_token_estimate=image_token_estimate,
            hooks=hooks,
        )
        self._built: tuple[tuple[int, int], ContextGuard] | None = None
        self._wrapper: Any = None
        self._counts = RequestCounts()
        self._run = RunAgents()
        self._others: dict[int, ContextGuard] = {}  # by window: other agents' requests
        # The items stored since the filter last let a request out (what a refusal takes back).
        self._added: list[str] = []  # their json_form
        self._refused: list[str] = []

    @property
    def _guard(self) -> ContextGuard:
        """The engine for the window and summarizer known now (built again when they change).

        Raises:
            ConfigError: the window or the agent's model is not known.
        """
        window = self.model.window()
        service = self.model.service()
        key = (window, id(service))
        if self._built is None or self._built[0] != key:
            guard = ContextGuard(context_window=window, compression=service, **self._options)
            self._built = (key, guard)
        return self._built[1]

    # -- the Session protocol (delegated) --------------------------------------------------------
    # Each method takes the runner's ``wrapper`` (the run's context), so that the side queries'
    # usage reaches ``result.context_wrapper.usage``; it is passed on where the underlying
    # session takes it too.

    async def get_items(self, limit: int | None = None, *, wrapper: Any = None) -> list[Item]:
        """The underlying session's items."""
        if wrapper is not None:
            if wrapper is not self._wrapper:  # a new run: what it stores starts now
                self._added = []
            self._wrapper = wrapper
        self._run.started(wrapper)
        return list(await forward(self.underlying.get_items, limit, wrapper=wrapper))

    async def add_items(self, items: list[Item], *, wrapper: Any = None) -> None:
        """Store items in the underlying session."""
        self._learn()  # the runner stores a response's items after adding its usage
        await forward(self.underlying.add_items, items, wrapper=wrapper)
        self._added.extend(json_form(item) for item in items)

    async def pop_item(self, *, wrapper: Any = None) -> Item | None:
        """Remove and return the newest item."""
        return await forward(self.underlying.pop_item, wrapper=wrapper)

    async def clear_session(self, *, wrapper: Any = None) -> None:
        """Forget every item (and the breaker's count)."""
        await forward(self.underlying.clear_session, wrapper=wrapper)
        self.state = GuardState(calibration=self.state.calibration)
        self._added = []

    def _learn(self, *, last: bool = False) -> None:
        """Learn the provider's scale from the model's count of the last request let out."""
        learned = self._counts.learn(self.state, self._options["image_token_estimate"], last=last)
        if learned is not None:
            self.state = learned

    def _count_usage(self, compactions: Sequence[CompressionInfo]) -> None:
        if not self.model.local and self._wrapper is not None:
            add_side_usage(getattr(self._wrapper, "usage", None), tuple(compactions))

    def run_config(self, **options: Any) -> RunConfig:
        """A ``RunConfig`` with this session's :meth:`call_model_input_filter` installed: the
        one construct that protects every request (``Runner.run(agent, text, session=session,
        run_config=session.run_config())``). ``options`` are passed to ``RunConfig``."""
        return self.model.run_config(self.call_model_input_filter, options)

    def _check_filter(self) -> None:
        """Warn once when turns run without the input filter: the session alone compacts only
        between turns, so a tool loop longer than the window reaches the provider."""
        if self.filtered_requests or self._warned:
            return
        self._warned = True
        warnings.warn(
            "AutocompactSession compacts only between turns without its input filter: run with "
            "run_config=session.run_config() (or RunConfig(call_model_input_filter="
            "session.call_model_input_filter)) so that every request is protected",
            RuntimeWarning,
            stacklevel=3,
        )

    # -- compaction ------------------------------------------------------------------------------

    async def run_compaction(
        self, args: dict[str, Any] | None = None, *, wrapper: Any = None
    ) -> None:
        """Compact the stored items when the ladder says so (``{"force": True}``: always).

        Calls whose output is not stored yet, and everything after them, are left out of the
        compaction and kept as they are. On any failure the stored items are unchanged.
        """
        if args and "response_id" in args:  # the runner's call after a turn
            self._check_filter()
        if wrapper is not None:
            self._wrapper = wrapper
        self._learn(last=True)  # before the side queries' usage is added to the run's
        self._added = []  # the turn is over: its items are never taken back
        items = await self.underlying.get_items()
        converted = to_autocompact(items)
        messages = converted.messages
        cut = pending_start(messages)
        head, pending_tail = messages[:cut], messages[cut:]
        if not head:
            return
        # Between turns nothing is pending: an empty user message stands for the next one.
        placeholder = head[-1].role != "user"
        request = (*head, Message.user("")) if placeholder else head
        result = await self._guard.arun(
            request,
            system_instruction=self._system(converted),
            tools=self.tools,
            state=self.state,
            reactive=bool(args and args.get("force")),
        )
        self.compactions.extend(result.compactions)
        self._count_usage(result.compactions)
        self.state = result.state
        if not result.compacted:
            return
        kept = result.history[:-1] if placeholder else result.history
        new_items = from_autocompact((*kept, *pending_tail), converted)
        await self._replace(items, new_items)

    async def _replace(self, old: list[Item], new: list[Item]) -> None:
        await self.underlying.clear_session()
        try:
            await self.underlying.add_items(new)
        except BaseException:
            await self.underlying.clear_session()
            await self.underlying.add_items(old)
            raise

    def _sent(self, messages: Sequence[Message], system: str | None) -> None:
        """Mark the request let out (its messages, system prompt and tools) for its count."""
        stats = request_stats(messages, system_instruction=system, tools=self.tools)
        self._counts.sent(self._wrapper, stats)

    def _system(self, converted: ConvertedItems) -> str | None:
        text = "\n\n".join(t for t in (self.system_instruction, converted.system_instruction) if t)
        return text or None

    # -- the guarantee on each outgoing request -------------------------------------------------

    def _other_guard(self, agent: Any) -> ContextGuard:
        """The engine for another agent's request (an agent used as a tool): the window of its
        model; it only trims, so it writes no summary."""
        window = self.model.window(agent)
        if window not in self._others:
            self._others[window] = ContextGuard(
                context_window=window, compression=summary_service("offline"), **self._options
            )
        return self._others[window]

    def call_model_input_filter(
        self, data: CallModelData[Any]
    ) -> ModelInputData | Awaitable[ModelInputData]:
        """For ``RunConfig(call_model_input_filter=session.call_model_input_filter)``.

        Learns the system prompt and tools the runner sends (so compaction counts them) and,
        when the request is at or above the hard threshold, leaves its oldest turns out of this
        request only. The model's count of the request it lets out, read from the run's usage
        once the model answered, teaches the provider's scale. The requests of an agent used as
        a tool are protected the same way (with their own instructions, tools and window), but
        nothing is learned from them.

        For an agent with MCP servers it returns an awaitable (the runner awaits it): their
        tools are sent with every request, so it lists them (``agent.get_mcp_tools``) to count
        them. A server that does not cache its tool list is asked once more per request.

        A request of the session's agent that cannot fit the window (a message or tool result
        larger than it) raises ``MessageTooLargeError`` before it is sent, as ``ChatSession``
        raises it; the items the runner stored for that request (the run's input, or the
        model's call with its outputs) are first taken back out of the session, so the
        conversation goes on from where it was (``ChatSession`` keeps no refused message).
        """
        try:
            result = with_mcp_tools(data, self._filter)
        except MessageTooLargeError as exc:
            if not self._refused:
                raise
            return self._refuse(exc)
        if isinstance(result, ModelInputData):
            return result
        return self._awaited(result)

    async def _awaited(self, pending: Awaitable[ModelInputData]) -> ModelInputData:
        try:
            return await pending
        except MessageTooLargeError:
            await self._take_back()
            raise

    async def _refuse(self, exc: MessageTooLargeError) -> ModelInputData:
        await self._take_back()
        raise exc

    async def _take_back(self) -> None:
        """Remove the refused request's stored items from the underlying session."""
        refused, self._refused = self._refused, []
        if refused:
            await take_back(self.underlying, refused, wrapper=self._wrapper)

    def _filter(self, data: CallModelData[Any], mcp_tools: Sequence[Any]) -> ModelInputData:
        model_data = data.model_data
        self.filtered_requests += 1
        self._learn()
        converted = to_autocompact(model_data.input)
        own = self._run.owns(data.agent)
        if own:
            self.model.learn(data.agent)
            self.system_instruction = model_data.instructions
            self.tools = agent_tool_specs(data.agent, mcp_tools)
            guard, system, tools = self._guard, self._system(converted), self.tools
        else:
            guard, tools = self._other_guard(data.agent), agent_tool_specs(data.agent, mcp_tools)
            texts = (model_data.instructions, converted.system_instruction)
            system = "\n\n".join(t for t in texts if t) or None
        try:
            sent, replaced = guarded_input(
                guard, model_data, converted, system=system, tools=tools, state=self.state
            )
        except MessageTooLargeError:
            if own:  # what the runner stored for this request is taken back
                self._refused, self._added = self._added, []
            raise
        if own:
            self._added = []  # sent: never taken back
            self._sent(sent, system)
        else:
            self._counts.forget()
        if replaced is None:
            return model_data
        self.trimmed_requests += 1
        return replaced

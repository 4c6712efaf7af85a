"""``AutocompactMiddleware``: the engine's ladder inside a LangChain v1 agent.

Each hook rebuilds the engine's session state from the agent state (the messages, and the
``autocompact`` entry holding the last reported count, the breaker and the calibration) and runs
the same flows as :class:`autocompact.ChatSession`:

- ``before_model`` runs :meth:`pre_send_flow` (the estimate, the hard rescue or the automatic
  compaction with clearing and the summary) and writes a compacted history back into the graph
  state (``RemoveMessage(REMOVE_ALL_MESSAGES)`` then the new messages), so a checkpointer saves
  it. It needs the system prompt and tool schemas for the cold estimate; until this middleware has
  seen one model request in this process it leaves the step to ``wrap_model_call``.
- ``wrap_model_call`` runs :meth:`send_flow` around the framework's model call (the guarantee's
  trimming of the outgoing request only, the reactive compaction and one retry when the model
  rejects the prompt as too long), or the whole turn flow when ``before_model`` did not check
  this request. Its state changes travel in an ``ExtendedModelResponse`` command.

With ``store=`` the conversation is the store's (shared by workers, ``docs/sessions.md``): each
hook's core is bound to the store (the history, counts, breaker and calibration read from it; its
compactions under the lease with the compare-and-swap; each model call appended once under its
turn id), and the graph state is replaced by the stored history whenever the two differ. A model
call whose turn id is stored already is answered from the store, without a model call.

No decision is made here: tiers, estimates, compaction and failure accounting are the core's.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NotRequired, TypeAlias, cast

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    OmitFromInput,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.config import get_config
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime
from langgraph.types import Command

from autocompact.compaction.extractive import extractive_summary
from autocompact.compaction.plan import CompressionStatus
from autocompact.compaction.service import CompressionService
from autocompact.content import FunctionResponsePart, Message
from autocompact.context_report import ContextReport, build_context_report
from autocompact.engine import CarriedState, ConversationState, Engine, EngineConfig
from autocompact.errors import ConfigError
from autocompact.estimation import Calibration
from autocompact.events import Hook
from autocompact.integrations.langchain._convert import (
    convert_groups,
    message_to_langchain,
    system_text,
)
from autocompact.integrations.langchain._driving import Flow, adrive, drive
from autocompact.integrations.langchain._entry import STATE_KEY, entry_tip, entry_tokens
from autocompact.integrations.langchain._provider import (
    LangChainProvider,
    completion_of,
    model_name,
)
from autocompact.integrations.langchain._sources import Sources
from autocompact.providers.base import ChatRequest, Completion, Provider, ToolSpec
from autocompact.sessions.stores.base import SessionStore
from autocompact.thresholds import (
    DEFAULT_IMAGE_TOKEN_ESTIMATE,
    CompactionThresholds,
    Tier,
    compute_thresholds,
    parse_window,
)
from autocompact.tips import Tip

__all__ = ["AutocompactMiddleware", "AutocompactState", "SummarizerChoice"]

SummarizerChoice: TypeAlias = Literal["model", "offline", "extractive"] | BaseChatModel | Provider
"""Who writes the summary: the agent's own model (``"model"``), another LangChain chat model,
any autocompact provider, or the offline extractive summarizer (``"offline"``, the name every
integration uses; ``"extractive"`` is a deprecated alias)."""


class AutocompactState(AgentState[Any]):
    """The agent state with autocompact's per-thread entry (saved by the checkpointer)."""

    autocompact: NotRequired[Annotated[dict[str, Any], OmitFromInput]]


@dataclass(frozen=True, kw_only=True)
class _Fixed:
    """What a model request carries besides the messages (learned from the last request)."""

    system: str | None
    tools: tuple[ToolSpec, ...]
    model: BaseChatModel


class _Turn:
    """One hook's view: the engine session rebuilt from the state, and the message mapping."""

    def __init__(
        self,
        middleware: AutocompactMiddleware,
        messages: Sequence[BaseMessage],
        entry: Mapping[str, Any],
        fixed: _Fixed,
    ) -> None:
        self.pinned: list[BaseMessage] = []
        body = list(messages)
        system = fixed.system
        first = body[0] if body else None
        if isinstance(first, SystemMessage):  # a system prompt kept in the state (sent as it is)
            self.pinned = [body.pop(0)]
            system = "\n".join(s for s in (system, system_text(first, exact=False)) if s)
        groups = convert_groups(body, offset=len(self.pinned))
        self.sources = Sources()
        for m, src in groups:
            self.sources[m] = src
        # Each tool result's own ToolMessage (by the part, else by its call id when unique), so
        # a rebuilt run keeps the results it did not change (LC-1).
        tools = [
            (p, s)
            for m, src in groups
            if m.function_responses
            for p, s in zip(m.parts, src, strict=True)
            if isinstance(s, ToolMessage)
        ]
        self.tools = {id(p): (p, s) for p, s in tools}
        self.by_call: dict[str, ToolMessage | None] = {}
        for _, s in tools:
            self.by_call[s.tool_call_id] = None if s.tool_call_id in self.by_call else s
        split = max((i + 1 for i, (m, _) in enumerate(groups) if m.role == "model"), default=0)
        history = [m for m, _ in groups[:split]]
        tail = groups[split:]
        parts = tuple(p for m, _ in tail for p in m.parts)
        self.pending = Message(role="user", parts=parts)
        self.sources[self.pending] = [msg for _, src in tail for msg in src]
        # The state's messages in order (and the reply, once sent): a message the store gives
        # back equal to one of them is that one, not a copy rebuilt without its metadata.
        self.known = [*groups[:split], (self.pending, self.sources[self.pending])]
        self.turn_id = _turn_id(body)
        self.earlier: list[Any] = []  # before_model's compactions for this model call
        self.stored: _Stored | None = None
        tier = Tier(entry["tier"]) if "tier" in entry else None
        config = EngineConfig(
            context_window=middleware.context_window,
            system_instruction=system,
            tools=fixed.tools,
            image_token_estimate=middleware.image_token_estimate,
            clear_tool_outputs=middleware.clear_tool_outputs,
        )
        provider = middleware.summary_provider(fixed.model)
        service = middleware.compression_service(fixed.model)
        if middleware.store is not None:
            # The conversation is the store's: the state's history gives way to it.
            self.stored = _Stored(middleware.store, middleware.session_of())
            self.core = Engine(
                provider,
                config,
                hooks=middleware.hooks,
                compression_service=service,
                store=self.stored.store,
                session_id=self.stored.session_id,
                store_owner=middleware.owner,
            )
            # The counts and the hold are the store's; only the last noted tier is the state's.
            self.core.resume(
                since_count=self.core.since_count,
                hold_until=self.core.hold_until,
                noted_tier=tier,
            )
            self.original = tuple(history)  # what the state holds, to see if it must change
            return
        counted = bool(history) and entry.get("counted_through") == _last_id(
            self.sources[history[-1]]
        )
        hold = entry.get("hold_until")
        carried = CarriedState(
            consecutive_failures=int(entry.get("consecutive_failures", 0)),
            calibration=Calibration.from_dict(entry.get("calibration")),
        )
        state = ConversationState.start(
            history,
            last_prompt_token_count=int(entry.get("last_prompt_tokens", 0)) if counted else 0,
            carried=carried,
        )
        self.core = Engine(
            provider, config, state=state, hooks=middleware.hooks, compression_service=service
        )
        self.core.resume(
            since_count=int(entry.get("since_count", 0)) if counted else 0,
            hold_until=int(hold) if hold is not None else None,
            noted_tier=tier,
        )
        self.original = self.core.history

    def to_langchain(self, messages: Sequence[Message]) -> list[BaseMessage]:
        """LangChain messages for engine messages: the originals where the engine kept them
        (with a store, also where the store gives back a message equal to the state's)."""
        out: list[BaseMessage] = []
        after = 0  # the next state message an equal stored one may be (in order, each once)
        for message in messages:
            known = self.sources.get(message)
            if known is None and self.stored is not None:
                known, after = self._same(message, after)
            if known is None:
                known = message_to_langchain(message, originals=self._original)
                for msg in known:
                    msg.id = msg.id or f"autocompact-{uuid.uuid4()}"
                self.sources[message] = known
            out.extend(known)
        return out

    def _same(self, message: Message, after: int) -> tuple[list[BaseMessage] | None, int]:
        """The LangChain messages of the first state message from ``after`` on that is equal
        to ``message`` (read back from the store), and where the next search starts."""
        for index in range(after, len(self.known)):
            candidate, sources = self.known[index]
            if candidate.role == message.role and candidate == message:
                return sources, index + 1
        return None, after

    def _original(self, part: FunctionResponsePart) -> ToolMessage | None:
        known = self.tools.get(id(part))
        if known is not None and known[0] is part:
            return known[1]
        return self.by_call.get(part.id)

    def rewritten(self) -> bool:
        """Whether the state's history must be replaced: a compaction ran in this hook, or the
        store holds another history than the state (another worker appended or compacted)."""
        if any(c.status is CompressionStatus.COMPRESSED for c in self.core.compactions):
            return True
        return self.stored is not None and self.original != self.core.history

    def stored_reply(self) -> AIMessage | None:
        """With a store: the reply an earlier attempt stored for this turn id, if any."""
        if self.stored is None or self.turn_id is None:
            return None
        entry = self.stored.store.get_turn(self.stored.session_id, self.turn_id)
        if entry is None or len(entry.messages) != 2:
            return None
        (reply,) = [m for m in message_to_langchain(entry.messages[1]) if isinstance(m, AIMessage)]
        reply.id = f"autocompact-{self.turn_id}"
        return reply

    def entry(self, **extra: Any) -> dict[str, Any]:
        """The ``autocompact`` state entry after this hook."""
        core = self.core
        history = core.history
        last = _last_id(self.to_langchain(history[-1:])) if history else None
        return {
            "last_prompt_tokens": core.last_prompt_token_count,
            "since_count": core.since_count,
            "counted_through": last if core.last_prompt_token_count > 0 else None,
            "consecutive_failures": core.consecutive_failures,
            "hold_until": core.hold_until,
            "calibration": core.calibration.to_dict(),
            "tier": core.noted_tier.value,
            "tokens": core.estimate_tokens(),
            "compactions": [*self.earlier, *(c.as_dict() for c in core.compactions)],
            **extra,
        }


def _last_id(messages: Sequence[BaseMessage]) -> str | None:
    return messages[-1].id if messages else None


@dataclass(frozen=True)
class _Stored:
    store: SessionStore
    session_id: str


def _turn_id(messages: Sequence[BaseMessage]) -> str | None:
    """A model call's idempotency key: the id of the last user message and how many model
    replies follow it (the same on a retry that sends the same message id)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, HumanMessage):
            if message.id is None:
                return None
            replies = sum(1 for m in messages[index + 1 :] if isinstance(m, AIMessage))
            return f"{message.id}#{replies}"
    return None


def _tool_spec(tool: BaseTool | Mapping[str, Any]) -> ToolSpec:
    schema = convert_to_openai_tool(tool)
    function = schema.get("function", schema)
    return ToolSpec(
        name=str(function.get("name", "")),
        description=str(function.get("description", "")),
        parameters=function.get("parameters") or {"type": "object"},
    )


class AutocompactMiddleware(AgentMiddleware[AutocompactState, Any, Any]):
    """Automatic context compaction for ``langchain.agents.create_agent``.

    Args:
        context_window: the model's context window in tokens; ``None`` (the default): the chat
            model's profile's ``max_input_tokens``, read on the first model call (a model
            without one raises :class:`~autocompact.errors.ConfigError` asking for the number).
        summarizer: who writes summaries: ``"model"`` (the agent's own model, thinking off and
            the 20K cap where the chat model exposes them), another LangChain chat model, any
            autocompact provider, or ``"offline"`` (the extractive summarizer, no model call;
            ``"extractive"`` is a deprecated alias).
        hooks: callables receiving every :mod:`autocompact.events` record (as ``ChatSession``).
        clear_tool_outputs: clear old tool output (no model call) before summarizing.
        image_token_estimate: tokens per image or document.
        store: keep each thread's conversation in this session store (SQLite, PostgreSQL,
            JSONL), shared by every worker: its history, compactions (lease, compare-and-swap),
            breaker count and calibration are the store's, and the graph state is brought in
            line with it before each model call (see ``docs/integrations.md``).
        session_id: with a store, the conversation: a string, a function of the run's config,
            or ``None`` for the config's ``thread_id``.
        owner: with a store, this worker's name in its leases and entries.

    Adopt it with one line: ``create_agent(model, tools, middleware=[AutocompactMiddleware(
    context_window=128_000)])``. The breaker, calibration and last reported count live in the
    agent state under ``"autocompact"``, so they are per thread and survive a checkpoint.
    """

    state_schema = AutocompactState

    def __init__(
        self,
        *,
        context_window: int | None = None,
        summarizer: SummarizerChoice = "model",
        hooks: Sequence[Hook] = (),
        clear_tool_outputs: bool = True,
        image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE,
        store: SessionStore | None = None,
        session_id: str | Callable[[Mapping[str, Any]], str] | None = None,
        owner: str | None = None,
    ) -> None:
        super().__init__()
        self.store = store
        self.session_id = session_id
        self.owner = owner
        self._window = (
            None if context_window is None else parse_window(context_window, name="context_window")
        )
        if summarizer == "extractive":
            warnings.warn(
                "summarizer='extractive' is deprecated: use summarizer='offline' (the same "
                "extractive summarizer, the name every autocompact integration uses)",
                DeprecationWarning,
                stacklevel=2,
            )
            summarizer = "offline"
        if not (
            summarizer in ("model", "offline") or isinstance(summarizer, BaseChatModel | Provider)
        ):
            raise ConfigError(
                f"summarizer must be 'model', 'offline', a LangChain chat model or an "
                f"autocompact provider, got {summarizer!r}",
                key="summarizer",
            )
        self.summarizer = summarizer
        self.hooks: list[Hook] = list(hooks)
        self.clear_tool_outputs = clear_tool_outputs
        self.image_token_estimate = image_token_estimate
        self._fixed: _Fixed | None = None

    @property
    def context_window(self) -> int:
        """The model's context window: as given, else the chat model's profile's
        ``max_input_tokens`` (read on the first model call)."""
        if self._window is None:
            raise ConfigError(
                "AutocompactMiddleware needs the model's context window: pass "
                "context_window=… (tokens), or use a chat model whose profile gives "
                "max_input_tokens (read on the first model call)",
                key="context_window",
            )
        return self._window

    @property
    def thresholds(self) -> CompactionThresholds:
        """The ladder of the window."""
        return compute_thresholds(self.context_window)

    def _window_from(self, model: BaseChatModel) -> None:
        if self._window is not None:
            return
        profile = getattr(model, "profile", None) or {}
        window = profile.get("max_input_tokens") if isinstance(profile, Mapping) else None
        if isinstance(window, int) and not isinstance(window, bool) and window > 0:
            self._window = parse_window(window, name="the model profile's max_input_tokens")
        else:
            _ = self.context_window  # the clear error

    def session_of(self) -> str:
        """With a store: the session of the run in progress (``session_id``, else the
        ``thread_id`` of the run's config)."""
        config: Mapping[str, Any] = get_config()
        if callable(self.session_id):
            value: object = self.session_id(config)
        else:
            value = self.session_id or (config.get("configurable") or {}).get("thread_id")
        if not isinstance(value, str) or not value:
            raise ConfigError(
                "AutocompactMiddleware has a store but no session id: pass session_id=… or run "
                "the agent with config={'configurable': {'thread_id': …}}",
                key="session_id",
            )
        return value

    # -- who writes the summary ------------------------------------------------------------

    def summary_provider(self, agent_model: BaseChatModel) -> Provider:
        """The provider the side query goes to."""
        if isinstance(self.summarizer, BaseChatModel):
            return LangChainProvider(self.summarizer)
        if self.summarizer in ("model", "offline"):
            return LangChainProvider(agent_model)
        assert not isinstance(self.summarizer, str)
        return self.summarizer

    def compression_service(self, agent_model: BaseChatModel) -> CompressionService:
        """The engine's compression service for this middleware's summarizer."""
        if self.summarizer == "offline":
            return CompressionService(None, summarizer=extractive_summary)
        return CompressionService(self.summary_provider(agent_model))

    # -- reading the state -----------------------------------------------------------------

    def context_report(self, state: Mapping[str, Any]) -> ContextReport:
        """The ``/context`` report for a thread's state (e.g. ``agent.get_state(cfg).values``)."""
        return build_context_report(entry_tokens(state), self.thresholds)

    def tip(self, state: Mapping[str, Any]) -> Tip | None:
        """The tip for a thread's state, or ``None`` below the warn band (it says when a hold
        or the breaker pauses automatic compaction, and whether a forced one already ran)."""
        return entry_tip(state, self.context_window, self.thresholds)

    # -- the hooks -------------------------------------------------------------------------

    def _learn(self, request: ModelRequest[Any]) -> _Fixed:
        self._window_from(request.model)
        system = request.system_message
        fixed = _Fixed(
            # (sent as given, never rebuilt: a text block's cache_control need not fit in a str)
            system=system_text(system, exact=False) if system is not None else None,
            tools=tuple(_tool_spec(t) for t in request.tools),
            model=request.model,
        )
        self._fixed = fixed
        return fixed

    def _before(self, state: Mapping[str, Any]) -> tuple[_Turn, Flow] | None:
        if self._fixed is None or not state.get("messages"):
            return None  # the system prompt and tools are unknown yet: wrap_model_call checks
        turn = _Turn(self, state["messages"], state.get(STATE_KEY) or {}, self._fixed)
        if turn.stored_reply() is not None:
            return None  # a retried turn: wrap_model_call answers it from the store
        return turn, turn.core.pre_send_flow(turn.pending)

    def _before_update(self, turn: _Turn, state: Mapping[str, Any]) -> dict[str, Any]:
        checked = _last_id(turn.to_langchain([turn.pending])) or _last_id(state["messages"])
        update: dict[str, Any] = {STATE_KEY: turn.entry(checked=checked)}
        if turn.rewritten():
            new = [*turn.pinned, *turn.to_langchain([*turn.core.history, turn.pending])]
            update["messages"] = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *new]
        return update

    def before_model(self, state: AutocompactState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Compact before the model call when the ladder says so (persisted in the state)."""
        prepared = self._before(state)
        if prepared is None:
            return None
        turn, flow = prepared
        drive(flow, turn.core.side_provider, send=None)
        return self._before_update(turn, state)

    async def abefore_model(
        self, state: AutocompactState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async :meth:`before_model`."""
        prepared = self._before(state)
        if prepared is None:
            return None
        turn, flow = prepared
        await adrive(flow, turn.core.side_provider, send=None)
        return self._before_update(turn, state)

    def _wrap(self, request: ModelRequest[Any]) -> tuple[_Turn, Flow]:
        fixed = self._learn(request)
        entry: Mapping[str, Any] = cast("Mapping[str, Any]", request.state.get(STATE_KEY) or {})
        turn = _Turn(self, request.messages, entry, fixed)
        checked = entry.get("checked") is not None and entry.get("checked") == _last_id(
            request.messages
        )
        if checked:  # the entry's compactions are before_model's for this call: kept
            turn.earlier = list(entry.get("compactions") or [])
            return turn, turn.core.send_flow(turn.pending, turn.turn_id)
        return turn, turn.core.turn_flow(turn.pending, turn.turn_id)

    def _wrap_result(self, turn: _Turn, response: ModelResponse[Any]) -> ExtendedModelResponse[Any]:
        for msg in response.result:
            msg.id = msg.id or f"autocompact-{uuid.uuid4()}"
        update: dict[str, Any] = {STATE_KEY: turn.entry(checked=None)}
        if turn.rewritten():
            update["messages"] = [
                RemoveMessage(id=REMOVE_ALL_MESSAGES),
                *turn.pinned,
                *turn.to_langchain(turn.core.history),
            ]
        return ExtendedModelResponse(model_response=response, command=Command(update=update))

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ExtendedModelResponse[Any]:
        """The guarantee and the reactive retry around the model call."""
        turn, flow = self._wrap(request)
        stored = turn.stored_reply()
        if stored is not None:  # answered by an earlier attempt: no model call, nothing stored
            flow.close()
            return ExtendedModelResponse(model_response=ModelResponse(result=[stored]))
        sender = _Sender(turn, request)
        drive(flow, turn.core.side_provider, send=lambda r: sender.done(handler(sender.request(r))))
        assert sender.response is not None
        return self._wrap_result(turn, sender.response)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ExtendedModelResponse[Any]:
        """Async :meth:`wrap_model_call`."""
        turn, flow = self._wrap(request)
        stored = turn.stored_reply()
        if stored is not None:  # answered by an earlier attempt: no model call, nothing stored
            flow.close()
            return ExtendedModelResponse(model_response=ModelResponse(result=[stored]))
        sender = _Sender(turn, request)

        async def send(r: ChatRequest) -> Completion:
            return sender.done(await handler(sender.request(r)))

        await adrive(flow, turn.core.side_provider, asend=send)
        assert sender.response is not None
        return self._wrap_result(turn, sender.response)


class _Sender:
    """Turns the engine's main request into the framework's request, and its reply back."""

    def __init__(self, turn: _Turn, request: ModelRequest[Any]) -> None:
        self.turn = turn
        self.base = request
        self.response: ModelResponse[Any] | None = None

    def request(self, chat: ChatRequest) -> ModelRequest[Any]:
        messages = [*self.turn.pinned, *self.turn.to_langchain(chat.messages)]
        return self.base.override(messages=cast("list[AnyMessage]", messages))

    def done(self, response: ModelResponse[Any] | AIMessage) -> Completion:
        if isinstance(response, AIMessage):
            response = ModelResponse(result=[response])
        self.response = response
        reply = next((m for m in response.result if isinstance(m, AIMessage)), None)
        if reply is None:
            reply = AIMessage(content="")
        completion = completion_of(reply, model=model_name(self.base.model))
        self.turn.sources[completion.message] = list(response.result)
        self.turn.known.append((completion.message, list(response.result)))
        return completion

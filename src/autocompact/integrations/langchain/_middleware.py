"""``AutocompactMiddleware``: the engine's ladder inside a LangChain v1 agent.

Each hook rebuilds the engine's session state from the agent state (the messages, and the
``autocompact`` entry holding the last reported count, the breaker and the calibration) and runs
the same flows as :class:`autocompact.ChatSession`:

- ``before_model`` runs :meth:`pre_send_flow` (the estimate, the hard rescue or the automatic
  compaction with clearing and the summary) and writes a compacted history back into the graph
  state (``RemoveMessage(REMOVE_ALL_MESSAGES)`` then the new messages), so a checkpointer saves
  it. It needs the model, system prompt and tool schemas: those of the thread's last model call
  (named in its entry); until this middleware has seen one in this process it leaves the step
  to ``wrap_model_call``.
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
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
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
    RemoveMessage,
)
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.config import get_config
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime
from langgraph.types import Command, StateSnapshot

from autocompact.compaction.extractive import extractive_summary
from autocompact.compaction.service import CompressionService
from autocompact.context_report import ContextReport, build_context_report
from autocompact.errors import ConfigError
from autocompact.events import Hook
from autocompact.integrations.langchain._convert import (
    system_text,
)
from autocompact.integrations.langchain._driving import Flow, adrive, drive
from autocompact.integrations.langchain._entry import (
    STATE_KEY,
    entry_tip,
    entry_tokens,
    entry_window,
    thread_values,
)
from autocompact.integrations.langchain._provider import (
    LangChainProvider,
    model_name,
)
from autocompact.integrations.langchain._turn import Fixed, Sender, Turn, last_id
from autocompact.providers.base import ChatRequest, Completion, Provider, ToolSpec
from autocompact.sessions.stores.base import SessionStore
from autocompact.thresholds import (
    DEFAULT_IMAGE_TOKEN_ESTIMATE,
    CompactionThresholds,
    compute_thresholds,
    parse_window,
)
from autocompact.tips import Tip
from autocompact.validation import check_driver_options

__all__ = ["AutocompactMiddleware", "AutocompactState", "SummarizerChoice"]

SummarizerChoice: TypeAlias = Literal["model", "offline", "extractive"] | BaseChatModel | Provider
"""Who writes the summary: the agent's own model (``"model"``), another LangChain chat model,
any autocompact provider, or the offline extractive summarizer (``"offline"``, the name every
integration uses; ``"extractive"`` is a deprecated alias)."""


_KEPT_REQUESTS = 64
"""How many distinct requests (model, system prompt, tools) a middleware remembers for the
threads' ``before_model``; a thread whose request is forgotten is checked in wrap_model_call."""


class AutocompactState(AgentState[Any]):
    """The agent state with autocompact's per-thread entry (saved by the checkpointer)."""

    autocompact: NotRequired[Annotated[dict[str, Any], OmitFromInput]]


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
            model's profile's ``max_input_tokens``, read on each model call (a middleware
            given to agents on different models sizes each call on its own model's window; a
            model without one raises :class:`~autocompact.errors.ConfigError` asking for it).
        summarizer: who writes summaries: ``"model"`` (the agent's own model, thinking off and
            the 20K cap where the chat model exposes them), another LangChain chat model, any
            autocompact provider, or ``"offline"`` (the extractive summarizer, no model call;
            ``"extractive"`` is a deprecated alias).
        hooks: a list of callables receiving every :mod:`autocompact.events` record (as
            ``ChatSession``; one callable alone is a ``ConfigError``: ``hooks=[hook]``).
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
        # A bad value is a ConfigError now, not at the first model call.
        self._window, hooks = check_driver_options(
            context_window=context_window,
            clear_tool_outputs=clear_tool_outputs,
            image_token_estimate=image_token_estimate,
            hooks=hooks,
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
        # The model, system prompt and tools of recent model calls, by the key each thread's
        # entry names: a thread's before_model uses its own last request (design note 39).
        self._requests: OrderedDict[str, Fixed] = OrderedDict()
        self._last_window: int | None = None

    @property
    def context_window(self) -> int:
        """The model's context window: as given, else the chat model's profile's
        ``max_input_tokens`` of the last model call (each call uses its own model's; a
        thread's report and tip use the window of that thread's last call)."""
        window = self._window or self._last_window
        if window is None:
            raise ConfigError(
                "AutocompactMiddleware needs the model's context window: pass "
                "context_window=… (tokens), or use a chat model whose profile gives "
                "max_input_tokens (read on each model call)",
                key="context_window",
            )
        return window

    @property
    def thresholds(self) -> CompactionThresholds:
        """The ladder of the window."""
        return compute_thresholds(self.context_window)

    def _window_of(self, model: BaseChatModel) -> int:
        """The window a call to ``model`` is sized on: as given, else the model's profile's."""
        if self._window is not None:
            return self._window
        profile = getattr(model, "profile", None) or {}
        window = profile.get("max_input_tokens") if isinstance(profile, Mapping) else None
        if not (isinstance(window, int) and not isinstance(window, bool) and window > 0):
            raise ConfigError(
                "AutocompactMiddleware needs the model's context window: pass "
                f"context_window=… (tokens), or use a chat model ({model_name(model)}) whose "
                "profile gives max_input_tokens",
                key="context_window",
            )
        self._last_window = parse_window(window, name="the model profile's max_input_tokens")
        return self._last_window

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

    def _state_window(self, state: Mapping[str, Any]) -> int:
        return self._window or entry_window(state) or self.context_window

    def context_report(self, state: Mapping[str, Any] | StateSnapshot) -> ContextReport:
        """The ``/context`` report for a thread's state (``agent.get_state(cfg)`` or its
        ``.values``), on the window of the thread's last model call."""
        values = thread_values(state)
        window = self._state_window(values)
        return build_context_report(entry_tokens(values), compute_thresholds(window))

    def tip(self, state: Mapping[str, Any] | StateSnapshot) -> Tip | None:
        """The tip for a thread's state (``agent.get_state(cfg)`` or its ``.values``), or
        ``None`` below the warn band (it says when a hold or the breaker pauses automatic
        compaction, and whether a forced one already ran)."""
        values = thread_values(state)
        window = self._state_window(values)
        return entry_tip(values, window, compute_thresholds(window))

    # -- the hooks -------------------------------------------------------------------------

    def _learn(self, request: ModelRequest[Any]) -> Fixed:
        system = request.system_message
        fixed = Fixed(
            # (sent as given, never rebuilt: a text block's cache_control need not fit in a str)
            system=system_text(system, exact=False) if system is not None else None,
            tools=tuple(_tool_spec(t) for t in request.tools),
            model=request.model,
            window=self._window_of(request.model),
        )
        self._requests.pop(fixed.key, None)  # (re)inserted as the newest
        self._requests[fixed.key] = fixed
        while len(self._requests) > _KEPT_REQUESTS:
            self._requests.popitem(last=False)
        return fixed

    def _before(self, state: Mapping[str, Any]) -> tuple[Turn, Flow] | None:
        entry = state.get(STATE_KEY) or {}
        fixed = self._requests.get(str(entry.get("request")))
        if fixed is None or not state.get("messages"):
            # This thread's model, system prompt and tools are unknown yet (its first model
            # call in this process): wrap_model_call checks the request.
            return None
        turn = Turn(self, state["messages"], entry, fixed)
        if turn.stored_reply() is not None:
            return None  # a retried turn: wrap_model_call answers it from the store
        return turn, turn.core.pre_send_flow(turn.pending)

    def _before_update(self, turn: Turn, state: Mapping[str, Any]) -> dict[str, Any]:
        checked = last_id(turn.to_langchain([turn.pending])) or last_id(state["messages"])
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
        with turn.explained():
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
        with turn.explained():
            await adrive(flow, turn.core.side_provider, send=None)
        return self._before_update(turn, state)

    def _wrap(self, request: ModelRequest[Any]) -> tuple[Turn, Flow]:
        fixed = self._learn(request)
        entry: Mapping[str, Any] = cast("Mapping[str, Any]", request.state.get(STATE_KEY) or {})
        turn = Turn(self, request.messages, entry, fixed)
        checked = entry.get("checked") is not None and entry.get("checked") == last_id(
            request.messages
        )
        if checked:  # the entry's compactions are before_model's for this call: kept
            turn.earlier = list(entry.get("compactions") or [])
            return turn, turn.core.send_flow(turn.pending, turn.turn_id)
        return turn, turn.core.turn_flow(turn.pending, turn.turn_id)

    def _wrap_result(self, turn: Turn, response: ModelResponse[Any]) -> ExtendedModelResponse[Any]:
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
        sender = Sender(turn, request)
        with turn.explained():
            drive(
                flow,
                turn.core.side_provider,
                send=lambda r: sender.done(handler(sender.request(r))),
            )
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
        sender = Sender(turn, request)

        async def send(r: ChatRequest) -> Completion:
            return sender.done(await handler(sender.request(r)))

        with turn.explained():
            await adrive(flow, turn.core.side_provider, asend=send)
        assert sender.response is not None
        return self._wrap_result(turn, sender.response)

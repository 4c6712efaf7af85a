"""pydantic-ai: autocompact as a capability (request hooks) or a history processor.

Install with ``pip install "autocompact[pydantic-ai]"``. Importing this module imports
pydantic-ai; ``import autocompact`` never does.

Two ways in, one engine (:class:`autocompact.guard.ContextGuard`, the chat session's own pre-send
steps):

- :class:`Autocompact` — a capability (``Agent(..., capabilities=[Autocompact(...)])``). Before
  each model request it runs the ladder on the run's history with the request's instructions,
  system prompt and tool definitions counted, writes a compaction into the persistent history,
  and applies the guarantee to the outgoing request only. When the model still rejects the request
  as too long (``ModelContextWindowExceededError``, or an HTTP error that says so) it forces a
  compaction and retries the attempt once. After each response it learns the tokenizer from the
  reported usage. The breaker's count and the calibration are stored in the pending request's
  ``metadata["autocompact"]``, so a later run given ``message_history`` resumes them, and the
  provider's count of the last request comes from the last response's usage. The side query's
  usage is added to the run's usage.
- :func:`history_processor` / :func:`async_history_processor` — for
  ``ProcessHistory(...)``: the ladder and the guarantee (a processor's output is the persistent
  history, so turns the guarantee leaves out are left out of the history too, behind a marker;
  the request-only guarantee and the reactive retry need the capability).

Summaries are written by the agent's own model (``summarizer="model"``: thinking off, a 20K
output cap), by any autocompact provider, or by the offline extractive summarizer.

Conversion (:func:`to_autocompact` / :func:`from_autocompact`) is lossless: messages and parts the
engine did not change come back as the very objects that went in; new ones (the summary, cleared
tool output, the guarantee's marker) are built from the engine's parts. Parts the engine cannot
express (audio, video, native tool calls, files the model generated, ...) raise
:class:`~autocompact.errors.ContentError` naming the part.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from autocompact.compaction.plan import CompressionInfo
from autocompact.errors import (
    ConfigError,
    MissingDependencyError,
)
from autocompact.events import Hook
from autocompact.guard import (
    ContextGuard,
    GuardResult,
    request_stats,
)
from autocompact.integrations._pydantic_ai_convert import (
    Converted,
    from_autocompact,
    to_autocompact,
    tool_specs,
)
from autocompact.integrations._pydantic_ai_model import (
    PydanticAIModelProvider,
    SummarizerChoice,
    checked_options,
    model_window,
    summary_service,
    window_error,
)
from autocompact.integrations._pydantic_ai_state import STATE_KEY, restore, tag
from autocompact.integrations._pydantic_ai_store import (
    SessionIdSource,
    StoreTurn,
    session_id_of,
    stored_reply,
    turn_id_of,
)
from autocompact.providers import looks_like_overflow
from autocompact.providers.base import Provider
from autocompact.sessions.stores.base import SessionStore
from autocompact.thresholds import DEFAULT_IMAGE_TOKEN_ESTIMATE

try:
    from pydantic_ai import messages as pm
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.exceptions import (
        ModelContextWindowExceededError,
        ModelHTTPError,
        RetryModelRequest,
    )
    from pydantic_ai.models import Model, ModelRequestContext
    from pydantic_ai.tools import RunContext, ToolDefinition
    from pydantic_ai.usage import RequestUsage
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    raise MissingDependencyError("pydantic-ai-slim", "pydantic-ai") from exc

__all__ = [
    "STATE_KEY",
    "Autocompact",
    "Converted",
    "PydanticAIModelProvider",
    "async_history_processor",
    "from_autocompact",
    "history_processor",
    "to_autocompact",
]

logger = logging.getLogger("autocompact")


def _add_usage(
    ctx: RunContext[Any], compactions: Sequence[CompressionInfo], *, local: bool = False
) -> None:
    """Every side query a model answered counts in the run's usage, a failed one too (a local
    summarizer sends none)."""
    for info in compactions:
        if info.side_queries <= 0 or local:
            continue
        ctx.usage.incr(
            RequestUsage(
                input_tokens=info.compression_input_token_count,
                output_tokens=info.compression_output_token_count,
            )
        )
        ctx.usage.requests += info.side_queries


# -- the engine step ----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _Step:
    history: list[pm.ModelMessage]
    request: list[pm.ModelMessage]
    result: GuardResult


class _Engine:
    """One engine step on a pydantic-ai history (shared by the capability and processors)."""

    def __init__(
        self,
        *,
        context_window: int,
        summarizer: SummarizerChoice,
        clear_tool_outputs: bool,
        image_token_estimate: int,
        hooks: Sequence[Hook],
    ) -> None:
        self.context_window = context_window
        self.summarizer = summarizer
        self.clear_tool_outputs = clear_tool_outputs
        self.image_token_estimate = image_token_estimate
        self.hooks = tuple(hooks)

    @property
    def local(self) -> bool:
        """Whether summaries are written locally (no side query reaches a model)."""
        return not (self.summarizer == "model" or isinstance(self.summarizer, Provider))

    def guard(self, model: Model | None) -> ContextGuard:
        return ContextGuard(
            context_window=self.context_window,
            compression=summary_service(self.summarizer, model),
            clear_tool_outputs=self.clear_tool_outputs,
            image_token_estimate=self.image_token_estimate,
            hooks=self.hooks,
        )

    def arguments(
        self,
        history: Sequence[pm.ModelMessage],
        instructions: str | None,
        tools: Sequence[ToolDefinition],
    ) -> tuple[Converted, dict[str, Any]]:
        converted = to_autocompact(history)
        system = "\n\n".join(t for t in (converted.system_instruction, instructions) if t)
        restored = restore(history, self.image_token_estimate)
        return converted, {
            "system_instruction": system or None,
            "tools": tool_specs(tools),
            "state": restored.state,
            "last_prompt_token_count": restored.last_prompt_token_count,
        }

    def step(self, converted: Converted, arguments: dict[str, Any], result: GuardResult) -> _Step:
        history = from_autocompact(result.history, converted)
        request = history if not result.trimmed else from_autocompact(result.request, converted)
        sent = request_stats(
            result.request,
            system_instruction=arguments["system_instruction"],
            tools=arguments["tools"],
        )
        record = {
            "text_chars": sent.text_chars,
            "json_chars": sent.json_chars,
            "media_parts": sent.media_parts,
        }
        history[-1] = tag(history[-1], result, record)
        request[-1] = history[-1]
        return _Step(history=history, request=request, result=result)


def _instructions(messages: Sequence[pm.ModelMessage]) -> str | None:
    last = messages[-1] if messages else None
    return last.instructions if isinstance(last, pm.ModelRequest) else None


def _overflow(error: Exception) -> bool:
    if isinstance(error, ModelContextWindowExceededError):
        return True
    if isinstance(error, ModelHTTPError):
        return looks_like_overflow(error.status_code, str(error.body or error.message))
    return False


@dataclass
class Autocompact(AbstractCapability[Any]):
    """The capability: ladder, guarantee and reactive retry on every model request.

    Args:
        context_window: the model's context window in tokens; ``None`` (the default): the model
            profile's ``context_window``, else the model's name in autocompact's table of known
            models (a model neither knows raises ``ConfigError``).
        summarizer: ``"model"`` (the agent's own model, thinking off, 20K cap), ``"offline"``
            (the extractive summarizer, no model call), an autocompact provider, or a function
            ``(messages) -> summary``.
        clear_tool_outputs: clear old tool output (no model call) before summarizing.
        image_token_estimate: tokens per image or document.
        hooks: callables that receive every :mod:`autocompact.events` record.
        store: keep the conversation in this session store (SQLite, PostgreSQL, JSONL), shared
            by every worker: see :mod:`autocompact.integrations._pydantic_ai_store`.
        session_id: with a store, the conversation: a string, a function of the run context,
            or ``None`` for the run's ``conversation_id``.
        owner: with a store, this worker's name in its leases and entries.
    """

    context_window: int | None = None
    summarizer: SummarizerChoice = "model"
    clear_tool_outputs: bool = True
    image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE
    hooks: Sequence[Hook] = ()
    store: SessionStore | None = None
    session_id: SessionIdSource = None
    owner: str | None = None
    _retry: list[pm.ModelMessage] | None = field(default=None, init=False, repr=False)
    _reactive_tried: bool = field(default=False, init=False, repr=False)
    _turn: StoreTurn | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        """A bad option is a ``ConfigError`` here, not at the first request."""
        self.context_window, self.hooks = checked_options(
            context_window=self.context_window,
            summarizer=self.summarizer,
            clear_tool_outputs=self.clear_tool_outputs,
            image_token_estimate=self.image_token_estimate,
            hooks=self.hooks,
        )

    def _window_from(self, model: Model) -> None:
        """Take the model profile's ``context_window`` when none was given."""
        if self.context_window is None:
            self.context_window = model_window(model)

    def _engine(self) -> _Engine:
        if self.context_window is None:
            raise window_error("Autocompact")
        return _Engine(
            context_window=self.context_window,
            summarizer=self.summarizer,
            clear_tool_outputs=self.clear_tool_outputs,
            image_token_estimate=self.image_token_estimate,
            hooks=self.hooks,
        )

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Not spec-serializable (it may hold a provider or a function)."""
        return None

    async def for_run(self, ctx: RunContext[Any]) -> AbstractCapability[Any]:
        """A fresh instance per run: the reactive retry's state is per run."""
        return dataclasses.replace(self)

    async def _apply(
        self,
        ctx: RunContext[Any],
        request_context: ModelRequestContext,
        *,
        reactive: bool,
    ) -> _Step:
        engine = self._engine()
        params = request_context.model_request_parameters
        instructions = "\n\n".join(p.content for p in params.instruction_parts or ()) or None
        history = list(request_context.messages)
        converted, arguments = engine.arguments(
            history,
            instructions or _instructions(history),
            [*params.function_tools, *params.output_tools],
        )
        result = await engine.guard(request_context.model).arun(
            converted.messages, reactive=reactive, **arguments
        )
        step = engine.step(converted, arguments, result)
        _add_usage(ctx, result.compactions, local=engine.local)
        return step

    async def wrap_model_request(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        handler: Callable[[ModelRequestContext], Awaitable[pm.ModelResponse]],
    ) -> pm.ModelResponse:
        """With a store: a request an earlier attempt of this run already stored is answered
        from the store, without a model call."""
        if self.store is not None:
            sid = session_id_of(self.session_id, ctx, self.store)
            stored = stored_reply(self.store, sid, turn_id_of(ctx))
            if stored is not None:
                return stored
        return await handler(request_context)

    async def _store_before(
        self, ctx: RunContext[Any], request_context: ModelRequestContext, store: SessionStore
    ) -> ModelRequestContext:
        params = request_context.model_request_parameters
        instructions = "\n\n".join(p.content for p in params.instruction_parts or ()) or None
        turn = StoreTurn(
            self._engine().guard(request_context.model),
            store,
            session_id_of(self.session_id, ctx, store),
            turn_id_of(ctx),
            owner=self.owner,
            request_context=request_context,
            instructions=instructions or _instructions(request_context.messages),
        )
        request = await turn.start()
        self._turn = turn
        _add_usage(ctx, turn.compactions, local=self._engine().local)
        ctx.messages[:] = turn.history()
        request_context.messages = request
        return request_context

    async def after_model_request(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        response: pm.ModelResponse,
    ) -> pm.ModelResponse:
        """With a store: the turn is appended (durable) before the run goes on."""
        turn, self._turn = self._turn, None
        if turn is not None:
            turn.finish(response)
        return response

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """The ladder on the persistent history; the guarantee on this request only."""
        self._reactive_tried = False
        self._window_from(request_context.model)
        if self.store is not None:
            return await self._store_before(ctx, request_context, self.store)
        step = await self._apply(ctx, request_context, reactive=False)
        ctx.messages[:] = step.history
        request_context.messages = list(step.request)
        return request_context

    async def prepare_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """A retry after a reactive compaction sends the compacted request."""
        if self._retry is not None:
            request_context.messages, self._retry = self._retry, None
        return request_context

    async def on_model_request_error(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        error: Exception,
    ) -> pm.ModelResponse:
        """Too long: force a compaction and retry the attempt once; otherwise re-raise."""
        if not _overflow(error) or self._reactive_tried:
            turn, self._turn = self._turn, None
            if turn is not None:
                turn.abandon()
            raise error
        self._reactive_tried = True
        if self._turn is not None:
            retry = await self._turn.overflow(error)
            if retry is None:
                self._turn = None
                raise error
            _add_usage(ctx, self._turn.compactions[-1:], local=self._engine().local)
            ctx.messages[:] = self._turn.history()
            self._retry = retry
            raise RetryModelRequest()
        step = await self._apply(ctx, request_context, reactive=True)
        if not step.result.compacted:
            raise error
        ctx.messages[:] = step.history
        self._retry = list(step.request)
        raise RetryModelRequest()


def _processor_parts(
    ctx: RunContext[Any], messages: list[pm.ModelMessage], engine: _Engine
) -> tuple[Converted, dict[str, Any]]:
    tools = ctx.tool_manager.tool_defs if ctx.tool_manager is not None else []
    return engine.arguments(messages, _instructions(messages), tools)


class _Engines:
    """The processors' engine, built for the window given or, with none, for the window of
    the run's model (its profile, else its name in the table of known models)."""

    def __init__(self, context_window: int | None, where: str, **options: Any) -> None:
        self.context_window, options["hooks"] = checked_options(
            context_window=context_window, **options
        )
        self.where = where
        self.options = options
        self.built: dict[int, _Engine] = {}

    def __call__(self, ctx: RunContext[Any]) -> _Engine:
        window = self.context_window or model_window(ctx.model)
        if window is None:
            raise window_error(self.where)
        if window not in self.built:
            self.built[window] = _Engine(context_window=window, **self.options)
        return self.built[window]


def async_history_processor(
    context_window: int | None = None,
    *,
    summarizer: SummarizerChoice = "model",
    clear_tool_outputs: bool = True,
    image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE,
    hooks: Sequence[Hook] = (),
) -> Callable[[RunContext[Any], list[pm.ModelMessage]], Awaitable[list[pm.ModelMessage]]]:
    """An async history processor for ``ProcessHistory``: the ladder (summaries by the agent's
    own model by default) and the guarantee, whose trimming stays in the history (the reactive
    retry and a request-only trimming need :class:`Autocompact`). ``context_window=None``: the
    model profile's ``context_window``, else the model's name in the table of known models."""
    engines = _Engines(
        context_window,
        "async_history_processor",
        summarizer=summarizer,
        clear_tool_outputs=clear_tool_outputs,
        image_token_estimate=image_token_estimate,
        hooks=hooks,
    )

    async def process(
        ctx: RunContext[Any], messages: list[pm.ModelMessage]
    ) -> list[pm.ModelMessage]:
        engine = engines(ctx)
        converted, arguments = _processor_parts(ctx, messages, engine)
        model = ctx.model if isinstance(ctx.model, Model) else None
        result = await engine.guard(model).arun(converted.messages, **arguments)
        _add_usage(ctx, result.compactions, local=engine.local)
        return _persistent(engine.step(converted, arguments, result))

    return process


def history_processor(
    context_window: int | None = None,
    *,
    summarizer: SummarizerChoice = "offline",
    clear_tool_outputs: bool = True,
    image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE,
    hooks: Sequence[Hook] = (),
) -> Callable[[RunContext[Any], list[pm.ModelMessage]], list[pm.ModelMessage]]:
    """A synchronous history processor for ``ProcessHistory``: the ladder, with summaries by a
    synchronous autocompact provider or a local summarizer (the extractive one by default).
    ``context_window=None``: the model profile's ``context_window``, else the model's name in
    the table of known models."""
    if summarizer == "model":
        raise ConfigError(
            "the synchronous history processor cannot call the agent's (async) model: use "
            "async_history_processor or the Autocompact capability"
        )
    engines = _Engines(
        context_window,
        "history_processor",
        summarizer=summarizer,
        clear_tool_outputs=clear_tool_outputs,
        image_token_estimate=image_token_estimate,
        hooks=hooks,
    )

    def process(ctx: RunContext[Any], messages: list[pm.ModelMessage]) -> list[pm.ModelMessage]:
        engine = engines(ctx)
        converted, arguments = _processor_parts(ctx, messages, engine)
        result = engine.guard(None).run(converted.messages, **arguments)
        _add_usage(ctx, result.compactions, local=engine.local)
        return _persistent(engine.step(converted, arguments, result))

    return process


def _persistent(step: _Step) -> list[pm.ModelMessage]:
    # A processor's output is both the request and the persistent history: when the guarantee
    # had to leave turns out, they are left out of the history too (a marker says so), so no
    # request goes out over the window. The capability keeps that trimming request-only.
    return step.request

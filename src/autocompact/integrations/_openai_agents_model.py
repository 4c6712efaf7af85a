"""The agent's model as an Agents SDK session learns it: the default summarizer and the window.

Like the LangChain and pydantic-ai integrations, the Agents SDK sessions summarize with the
model the agent uses (``summarizer="model"``) and read the context window from that model where
the SDK (or autocompact's table of known models) knows it. A session sees the agent in its
input filter (``session.run_config()`` installs it) and the run's ``model`` and
``model_provider`` in :meth:`run_config`'s options. The side queries' usage is added to the
run's ``context_wrapper.usage``: the runner hands the wrapper to sessions whose methods take a
``wrapper`` argument. The same usage gives the model's count of each main request
(:class:`RequestCounts`), which teaches the engine the provider's scale.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agents import Agent, Handoff, Usage
from agents.models.interface import Model, ModelProvider
from agents.run_config import CallModelData, ModelInputData, RunConfig

from autocompact.compaction.plan import CompressionInfo
from autocompact.compaction.service import CompressionService
from autocompact.content import CharStats, Message
from autocompact.errors import ConfigError
from autocompact.guard import ContextGuard, GuardState, learn_from_usage
from autocompact.integrations._openai_agents_convert import (
    ConvertedItems,
    SummarizerChoice,
    from_autocompact,
    summary_service,
)
from autocompact.limits import known_limits
from autocompact.providers.base import Provider, ToolSpec
from autocompact.thresholds import parse_window
from autocompact.validation import check_driver_options

logger = logging.getLogger("autocompact")

__all__ = [
    "AgentModel",
    "InputFilter",
    "RequestCounts",
    "RunAgents",
    "add_side_usage",
    "engine_options",
    "forward",
    "guarded_input",
    "json_form",
    "take_back",
    "with_mcp_tools",
]


def _sdk_window(name: str) -> int | None:
    """The window the SDK's own table gives the model (``None``: not there, or no table)."""
    try:
        from agents.sandbox.capabilities.compaction import CompactionModelInfo
    except ImportError:  # pragma: no cover - an SDK without the table
        return None
    info = CompactionModelInfo.maybe_for_model(name)
    return None if info is None else info.context_window


def model_name(model: str | Model | None) -> str | None:
    """A model's name: the string, or the ``model`` attribute of the SDK's OpenAI models."""
    if isinstance(model, str):
        return model or None
    name = getattr(model, "model", None)
    return name if isinstance(name, str) and name else None


def engine_options(
    *, clear_tool_outputs: object, image_token_estimate: object, hooks: object
) -> dict[str, Any]:
    """A session's options for its engines, checked now (as ``ChatSession`` checks them) so a
    bad value is a ``ConfigError`` at construction, not in the middle of a run (``hooks=print``
    says ``hooks=[hook]``)."""
    _, checked = check_driver_options(
        context_window=None,
        clear_tool_outputs=clear_tool_outputs,
        image_token_estimate=image_token_estimate,
        hooks=hooks,
    )
    return {
        "clear_tool_outputs": clear_tool_outputs,
        "image_token_estimate": image_token_estimate,
        "hooks": checked,
    }


class AgentModel:
    """What a session knows of the agent's model, for its summarizer and its window.

    Args:
        context_window: the window given (``None``: read from the model's name).
        summarizer: the summarizer choice (``"model"``: the agent's own model).
        where: the session's class name, for the error messages.
    """

    def __init__(
        self, *, context_window: int | None, summarizer: SummarizerChoice, where: str
    ) -> None:
        if summarizer != "model":
            summary_service(summarizer)  # a bad choice is the same clear error as before
        # A window given is checked now, as ChatSession checks it, not at the first request.
        self.context_window = (
            None
            if context_window is None
            else parse_window(context_window, name="context_window", minimum=1)
        )
        self.summarizer = summarizer
        self.where = where
        self.agent_model: str | Model | None = None
        self.run_model: str | Model | None = None
        self.provider: ModelProvider | None = None
        self.seen = False
        self._service: tuple[object, CompressionService] | None = None

    @property
    def local(self) -> bool:
        """Whether summaries are written locally (no side query reaches a model)."""
        return not (self.summarizer == "model" or isinstance(self.summarizer, Model | Provider))

    def learn_run_config(self, options: dict[str, Any]) -> None:
        """The run's ``model`` and ``model_provider`` (they override the agent's)."""
        self.run_model = options.get("model", self.run_model)
        self.provider = options.get("model_provider", self.provider)

    def run_config(self, input_filter: Any, options: dict[str, Any]) -> RunConfig:
        """A session's ``run_config()``: ``RunConfig(**options)`` with its input filter installed
        (a filter of the caller's own is refused: there is one per run), the run's model learned."""
        if "call_model_input_filter" in options:
            raise ConfigError(
                "run_config() installs the session's own call_model_input_filter: pass the "
                "other RunConfig options only",
                key="call_model_input_filter",
            )
        self.learn_run_config(options)
        return RunConfig(call_model_input_filter=input_filter, **options)

    def learn(self, agent: Agent[Any]) -> None:
        """The model of the agent whose request the input filter sees."""
        self.agent_model = agent.model
        self.seen = True

    def _chosen(self, agent: Agent[Any] | None = None) -> str | Model | None:
        """The run's model, else the agent's (``agent``'s, else the one learned), else (the
        filter ran) the SDK's default one."""
        own = self.agent_model if agent is None else agent.model
        chosen = self.run_model if self.run_model is not None else own
        if chosen is None and (self.seen or agent is not None):
            from agents.models import get_default_model

            return get_default_model()
        return chosen

    def window(self, agent: Agent[Any] | None = None) -> int:
        """The context window: the one given, else the one the model's name (of ``agent``'s
        model, else the one learned) has in the SDK's table or autocompact's.

        Raises:
            ConfigError: neither is known; the message names ``context_window``.
        """
        if self.context_window is not None:
            return self.context_window
        name = model_name(self._chosen(agent))
        window = None
        if name is not None:
            window = _sdk_window(name)
            if window is None:
                known = known_limits(name)
                window = known.context_window if known is not None else None
        if window is None:
            if name:
                which = f"the model {name!r} is in no table of known models"
            elif self.seen or agent is not None or self.run_model is not None:
                # The filter saw the model: it has no name to look up (a custom Model object).
                which = (
                    f"the agent's model ({type(self._chosen(agent)).__name__}) has no name "
                    "that a table of known models could give a window for"
                )
            else:
                which = (
                    "the agent's model is not known yet (the input filter learns it: run with "
                    "run_config=session.run_config())"
                )
            raise ConfigError(
                f"{self.where} needs the model's context window: pass context_window=… "
                f"(tokens); {which}",
                key="context_window",
            )
        return window

    def service(self) -> CompressionService:
        """The summary service: the agent's own model for ``"model"``.

        Raises:
            ConfigError: ``"model"`` and the agent's model is not known yet.
        """
        if self.summarizer != "model":
            chosen: object = self.summarizer
        else:
            chosen = self._chosen()
            if chosen is None:
                raise ConfigError(
                    f"{self.where} summarizes with the agent's model, which its input filter "
                    "learns: run with run_config=session.run_config(), or pass summarizer= an "
                    "Agents SDK Model, an autocompact provider or 'offline'",
                    key="summarizer",
                )
        if self._service is None or self._service[0] is not chosen:
            self._service = (chosen, self._build(chosen))
        return self._service[1]

    def _build(self, chosen: object) -> CompressionService:
        if self.summarizer != "model":
            return summary_service(self.summarizer)
        if isinstance(chosen, Model):
            return summary_service(chosen)
        from agents.models.multi_provider import MultiProvider

        return summary_service((self.provider or MultiProvider()).get_model(str(chosen)))


class RunAgents:
    """Which agents' requests, among those the input filter sees, are the session's own.

    An agent used as a tool (``agent.as_tool``) runs with the run's config, so the filter sees
    its requests too; they are not the session's conversation, and what the session remembers
    for its compaction between turns (instructions, tools, model) and learns from the counts
    must not be taken from them. A run begins where the runner reads the session with a run
    context it did not use before; the first request after that is the session's agent's, and
    so are those of the agents it hands off to. Before any run is seen every request is taken
    as the session's.
    """

    def __init__(self) -> None:
        self._run: object | None = None
        self._agent: Agent[Any] | None = None

    def started(self, wrapper: object | None) -> None:
        """The runner read the session with ``wrapper`` (the run's context)."""
        if wrapper is not None and wrapper is not self._run:
            self._run = wrapper
            self._agent = None

    def owns(self, agent: Agent[Any]) -> bool:
        """Whether ``agent``'s request is the session's (it becomes the run's current agent)."""
        current = self._agent
        if self._run is None or current is None or agent is current or _hands_off(current, agent):
            self._agent = agent
            return True
        return False


def _hands_off(source: Agent[Any], target: Agent[Any]) -> bool:
    """Whether ``source`` has a handoff to ``target`` (the agent, or a handoff named after it)."""
    return any(
        h is target or (isinstance(h, Handoff) and h.agent_name == target.name)
        for h in source.handoffs
    )


def guarded_input(
    guard: ContextGuard,
    model_data: ModelInputData,
    converted: ConvertedItems,
    *,
    system: str | None,
    tools: tuple[ToolSpec, ...],
    state: GuardState,
) -> tuple[tuple[Message, ...], ModelInputData | None]:
    """The guarantee on one request the input filter sees: the messages let out, and the input
    to send instead (``None``: the request goes as it is). A request whose last message is not
    on the user's side (an output or a prompt) is sent as it is."""
    messages = converted.messages
    if not messages or messages[-1].role != "user":
        return messages, None
    result = guard.guarantee(messages, system_instruction=system, tools=tools, state=state)
    if not result.trimmed:
        return result.request, None
    replaced = ModelInputData(
        input=from_autocompact(result.request, converted), instructions=model_data.instructions
    )
    return result.request, replaced


InputFilter = Callable[[CallModelData[Any], Sequence[Any]], ModelInputData]
"""A session's input filter, given the tools the agent's MCP servers list."""


def with_mcp_tools(
    data: CallModelData[Any], input_filter: InputFilter
) -> ModelInputData | Awaitable[ModelInputData]:
    """``input_filter`` on ``data``, given the tools the agent's MCP servers list: the runner
    sends them with every request, so they are counted. Without MCP servers the filter runs at
    once; with them this is an awaitable (the runner awaits a filter's awaitable) that lists
    them as the runner does (``agent.get_mcp_tools``): a server that does not cache its tool
    list is asked once more per request."""
    if not data.agent.mcp_servers:
        return input_filter(data, ())

    async def listed() -> ModelInputData:
        from agents.run_context import RunContextWrapper

        tools = await data.agent.get_mcp_tools(RunContextWrapper(context=data.context))
        return input_filter(data, tools)

    return listed()


@dataclass(frozen=True, kw_only=True)
class _Mark:
    """Where the run's usage stood when the input filter let a request out, and its size."""

    usage: Usage
    entries: int
    requests: int
    sent: CharStats


class RequestCounts:
    """Pairs each request the input filter lets out with the model's count of exactly it.

    Right after the model answers (before tools run or items are stored) the runner adds the
    response's usage to the run's ``context_wrapper.usage``: one more request, and one more
    ``request_usage_entries`` entry when the response reported its tokens. The filter marks
    where that usage stands as it lets a request out (:meth:`sent`); the next look
    (:meth:`learn`: storing the items, the next request, the compaction after the turn) takes
    the one request answered since and its input tokens. Anything else since the mark (no count
    reported, a response standing for several requests) teaches nothing, and the compaction
    drops the mark before it adds its side queries' usage, so a count is never paired with
    another request.
    """

    def __init__(self) -> None:
        self._mark: _Mark | None = None

    def sent(self, wrapper: Any, sent: CharStats) -> None:
        """The filter lets out a request of ``sent`` in the run of ``wrapper``."""
        usage = getattr(wrapper, "usage", None)
        self._mark = (
            _Mark(
                usage=usage,
                entries=len(usage.request_usage_entries),
                requests=usage.requests,
                sent=sent,
            )
            if isinstance(usage, Usage)
            else None
        )

    def _counted(self, last: bool) -> tuple[CharStats, int] | None:
        mark = self._mark
        if mark is None or (mark.usage.requests == mark.requests and not last):
            return None  # nothing sent, or not answered yet
        self._mark = None
        entries = mark.usage.request_usage_entries[mark.entries :]
        if mark.usage.requests - mark.requests != 1 or len(entries) != 1:
            return None
        tokens = entries[0].input_tokens
        return (mark.sent, tokens) if isinstance(tokens, int) and tokens > 0 else None

    def forget(self) -> None:
        """A request whose count must teach nothing goes out (another agent's): no mark."""
        self._mark = None

    def learn(
        self, state: GuardState, image_token_estimate: int, *, last: bool = False
    ) -> GuardState | None:
        """``state`` taught by the count of the request marked last, once it is answered
        (``None``: nothing to learn now). ``last``: what the usage holds next is no request's
        count (side queries are about to be added): the mark is dropped, answered or not."""
        counted = self._counted(last)
        if counted is None:
            return None
        sent, tokens = counted
        return learn_from_usage(state, sent, tokens, image_token_estimate=image_token_estimate)


def add_side_usage(
    usage: Usage | None, compactions: list[CompressionInfo] | tuple[CompressionInfo, ...]
) -> None:
    """Every side query a model answered counts in the run's usage, a failed one too."""
    if usage is None:
        return
    for info in compactions:
        if info.side_queries <= 0:
            continue
        tokens_in = info.compression_input_token_count
        tokens_out = info.compression_output_token_count
        usage.add(
            Usage(
                requests=info.side_queries,
                input_tokens=tokens_in,
                output_tokens=tokens_out,
                total_tokens=tokens_in + tokens_out,
            )
        )


async def forward(method: Any, *args: Any, wrapper: Any = None) -> Any:
    """Call an underlying session's method, passing ``wrapper`` only where it takes one."""
    if wrapper is not None:
        try:
            takes = "wrapper" in inspect.signature(method).parameters
        except (TypeError, ValueError):
            takes = False
        if takes:
            return await method(*args, wrapper=wrapper)
    return await method(*args)


def json_form(item: Any) -> str:
    """An item as it is compared when taken back (its JSON, as a session stores it)."""
    return json.dumps(item, sort_keys=True, default=str)


async def take_back(session: Any, forms: Sequence[str], *, wrapper: Any = None) -> int:
    """Remove the newest items a session stored (``forms``: their :func:`json_form`, oldest
    first) from ``session``'s end with its ``pop_item``; an item popped that is not the one
    expected (another writer's) is put back and nothing more is removed. Returns how many were
    removed. A failure is logged, not raised: the caller is raising the error that made it take
    them back."""
    removed = 0
    try:
        for form in reversed(forms):
            popped = await forward(session.pop_item, wrapper=wrapper)
            if popped is None:
                break
            if json_form(popped) != form:
                await forward(session.add_items, [popped], wrapper=wrapper)
                break
            removed += 1
    except Exception:
        logger.warning("could not take the refused items back out of the session", exc_info=True)
    return removed

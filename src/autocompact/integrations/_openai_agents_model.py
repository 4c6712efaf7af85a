"""The agent's model as an Agents SDK session learns it: the default summarizer and the window.

Like the LangChain and pydantic-ai integrations, the Agents SDK sessions summarize with the
model the agent uses (``summarizer="model"``) and read the context window from that model where
the SDK (or autocompact's table of known models) knows it. A session sees the agent in its
input filter (``session.run_config()`` installs it) and the run's ``model`` and
``model_provider`` in :meth:`run_config`'s options. The side queries' usage is added to the
run's ``context_wrapper.usage``: the runner hands the wrapper to sessions whose methods take a
``wrapper`` argument.
"""

from __future__ import annotations

import inspect
from typing import Any

from agents import Agent, Usage
from agents.models.interface import Model, ModelProvider
from agents.run_config import RunConfig

from autocompact.compaction.plan import CompressionInfo
from autocompact.compaction.service import CompressionService
from autocompact.errors import ConfigError
from autocompact.integrations._openai_agents_convert import SummarizerChoice, summary_service
from autocompact.limits import known_limits
from autocompact.providers.base import Provider

__all__ = ["AgentModel", "add_side_usage", "forward"]


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
        self.context_window = context_window
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

    def _chosen(self) -> str | Model | None:
        """The run's model, else the agent's, else (the filter ran) the SDK's default one."""
        chosen = self.run_model if self.run_model is not None else self.agent_model
        if chosen is None and self.seen:
            from agents.models import get_default_model

            return get_default_model()
        return chosen

    def window(self) -> int:
        """The context window: the one given, else the one the model's name has in the SDK's
        table or autocompact's.

        Raises:
            ConfigError: neither is known; the message names ``context_window``.
        """
        if self.context_window is not None:
            return self.context_window
        name = model_name(self._chosen())
        window = None
        if name is not None:
            window = _sdk_window(name)
            if window is None:
                known = known_limits(name)
                window = known.context_window if known is not None else None
        if window is None:
            which = (
                f"the model {name!r} is in no table of known models"
                if name
                else "the agent's model is not known yet (the input filter learns it: run with "
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

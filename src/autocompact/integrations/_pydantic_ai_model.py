"""pydantic-ai's model as an autocompact provider (the agent's own model writes summaries),
and the summarizer choice of the :class:`~autocompact.integrations.pydantic_ai.Autocompact`
capability."""

from __future__ import annotations

import dataclasses
from typing import Literal, TypeAlias

from autocompact.compaction.extractive import extractive_summary
from autocompact.compaction.plan import Summarizer
from autocompact.compaction.service import CompressionService
from autocompact.content import (
    Message,
    Usage,
)
from autocompact.errors import (
    ConfigError,
    ContextOverflowError,
    MissingDependencyError,
    ProviderError,
)
from autocompact.events import Hook
from autocompact.integrations._pydantic_ai_convert import (
    from_autocompact,
    response_part,
)
from autocompact.limits import known_limits
from autocompact.providers.base import (
    AsyncOnlyProvider,
    ChatRequest,
    Completion,
    FinishReason,
    Provider,
)
from autocompact.thresholds import COMPACT_MAX_OUTPUT_TOKENS
from autocompact.validation import check_driver_options

try:
    from pydantic_ai import messages as pm
    from pydantic_ai.exceptions import (
        ModelAPIError,
        ModelContextWindowExceededError,
    )
    from pydantic_ai.models import Model, ModelRequestParameters
    from pydantic_ai.settings import ModelSettings
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    raise MissingDependencyError("pydantic-ai-slim", "pydantic-ai") from exc

__all__ = ["PydanticAIModelProvider", "SummarizerChoice", "model_window", "summary_service"]

SummarizerChoice: TypeAlias = Literal["model", "offline"] | Provider | Summarizer
"""``"model"``: the agent's own model; ``"offline"``: the extractive summarizer; or any
autocompact provider or local summarizer."""


_FINISH = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "content_filter": FinishReason.CONTENT_FILTER,
    "tool_call": FinishReason.TOOL_CALL,
}


class PydanticAIModelProvider(AsyncOnlyProvider):
    """A pydantic-ai model as an autocompact provider (for the summary side query).

    The side query goes out with ``thinking=False`` and ``max_tokens`` = the request's cap
    (20,000 for a summary) and no tools. Async only: pydantic-ai models are asynchronous.
    """

    sync_refusal = (
        "the agent's own model is asynchronous: use the Autocompact capability or "
        "async_history_processor, or pass an autocompact provider or summarizer='offline'"
    )

    name = "pydantic-ai"

    def __init__(self, model: Model) -> None:
        self.pydantic_model = model
        self.model = model.model_name

    def _messages(self, request: ChatRequest) -> list[pm.ModelMessage]:
        messages = from_autocompact(request.messages)
        if request.system_instruction:
            system = pm.SystemPromptPart(content=request.system_instruction)
            head = messages[0]
            if isinstance(head, pm.ModelRequest):
                messages[0] = dataclasses.replace(head, parts=[system, *head.parts])
            else:
                messages.insert(0, pm.ModelRequest(parts=[system]))
        return messages

    async def acomplete(self, request: ChatRequest) -> Completion:
        """Send the request through the model's own ``request``."""
        settings: ModelSettings = {
            "max_tokens": request.max_output_tokens or COMPACT_MAX_OUTPUT_TOKENS
        }
        if request.thinking is not None:
            settings["thinking"] = request.thinking
        try:
            response = await self.pydantic_model.request(
                self._messages(request), settings, ModelRequestParameters()
            )
        except ModelContextWindowExceededError as exc:
            raise ContextOverflowError(str(exc), provider=self.name, model=self.model) from exc
        except ModelAPIError as exc:
            raise ProviderError(str(exc), provider=self.name, model=self.model) from exc
        parts = [response_part(p, "the summary") for p in response.parts]
        usage = Usage(
            prompt_tokens=response.usage.input_tokens, output_tokens=response.usage.output_tokens
        )
        finish = None if response.finish_reason is None else _FINISH.get(response.finish_reason)
        return Completion(
            message=Message(role="model", parts=tuple(parts)),
            usage=usage,
            finish_reason=finish if finish is not None else None,
            raw_finish_reason=response.finish_reason,
            model=response.model_name,
        )


def checked_options(
    *,
    context_window: object,
    summarizer: object,
    clear_tool_outputs: object,
    image_token_estimate: object,
    hooks: object,
) -> tuple[int | None, tuple[Hook, ...]]:
    """The window (``None``: learned from the model) and the hooks, checked with the summarizer
    as the engine checks them at the first request (``validation.check_driver_options``)."""
    check_summarizer(summarizer)
    return check_driver_options(
        context_window=context_window,
        clear_tool_outputs=clear_tool_outputs,
        image_token_estimate=image_token_estimate,
        hooks=hooks,
    )


def check_summarizer(choice: object) -> None:
    """Raises ``ConfigError`` unless ``choice`` is one :data:`SummarizerChoice` allows."""
    if choice in ("model", "offline") or isinstance(choice, Provider) or callable(choice):
        return
    raise ConfigError(
        f"summarizer must be 'model', 'offline', an autocompact provider or a function, "
        f"got {choice!r:.60}",
        key="summarizer",
    )


def summary_service(choice: SummarizerChoice, model: Model | None) -> CompressionService:
    check_summarizer(choice)
    if choice == "model":
        if model is None:
            raise ConfigError("summarizer='model' needs the agent's model; none was given")
        return CompressionService(PydanticAIModelProvider(model))
    if choice == "offline":
        return CompressionService(None, summarizer=extractive_summary)
    if isinstance(choice, Provider):
        return CompressionService(choice)
    return CompressionService(None, summarizer=choice)


def model_window(model: object) -> int | None:
    """The context window of a pydantic-ai model: its profile's ``context_window``, else its
    name in autocompact's table of known models (``None``: neither knows it)."""
    if not isinstance(model, Model):
        return None
    window = model.profile.get("context_window")
    if isinstance(window, int) and not isinstance(window, bool) and window > 0:
        return window
    name = model.model_name
    known = known_limits(name) if isinstance(name, str) and name else None
    return known.context_window if known is not None else None


def window_error(where: str) -> ConfigError:
    """The error for a window that neither the caller nor the model gives."""
    return ConfigError(
        f"{where} needs the model's context window: pass context_window=… (tokens), or use a "
        "model whose profile gives context_window (e.g. profile={'context_window': 128_000})",
        key="context_window",
    )

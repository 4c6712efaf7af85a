"""A LangChain chat model as an autocompact :class:`~autocompact.providers.base.Provider`.

Used for the summary side query when the agent's own model writes the summary. The side query
asks for thinking off and a 20K output cap (SPEC §6); this adapter applies both in the terms of
the chat model, where the model exposes them as fields (``max_tokens``, ``max_output_tokens``,
``max_completion_tokens``, ``num_predict``; Anthropic ``thinking``, Google
``thinking_budget``/``include_thoughts``, Ollama ``reasoning``, OpenAI ``reasoning_effort``).
A model that exposes none is called as it is; a summary that still reaches the cap is refused
by the engine as truncated.

Errors: LangChain's ``ContextOverflowError``, and any provider error whose message says the
prompt is too long, become :class:`autocompact.errors.ContextOverflowError`; every other
exception becomes :class:`autocompact.errors.ProviderError` (``raise … from``), in one place.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from langchain_core.exceptions import ContextOverflowError as LangChainOverflow
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.constants import TAG_NOSTREAM

from autocompact.content import Message
from autocompact.errors import ContextOverflowError, ProviderError, described
from autocompact.integrations.langchain._convert import (
    completion_usage,
    convert_groups,
    from_autocompact,
)
from autocompact.providers import looks_like_overflow
from autocompact.providers.base import (
    ChatRequest,
    Completion,
    FinishReason,
    StreamDone,
    StreamEvent,
)
from autocompact.providers.claude_thinking import ClaudeThinking, claude_thinking

__all__ = ["LangChainProvider", "bounded_model", "convert_error", "is_overflow"]

_CAP_FIELDS = ("max_tokens", "max_completion_tokens", "max_output_tokens", "num_predict")
# Field → the value that turns thinking off (applied only when the model has the field).
_THINKING_OFF: Mapping[str, Any] = {
    "thinking": {"type": "disabled"},  # ChatAnthropic
    "thinking_budget": 0,  # ChatGoogleGenerativeAI
    "include_thoughts": False,  # ChatGoogleGenerativeAI
}
_LOWEST_EFFORT = "low"  # the least every OpenAI reasoning model accepts
_LENGTH_WORDS = frozenset({"length", "max_tokens", "MAX_TOKENS", "max_output_tokens"})
_STOP_WORDS = frozenset({"stop", "end_turn", "STOP", "stop_sequence"})


def bounded_model(
    model: BaseChatModel, *, cap: int | None, thinking: bool | None
) -> tuple[BaseChatModel, dict[str, Any]]:
    """A copy of ``model`` with the output cap and thinking set, and what was set.

    Only fields the model declares are touched; the original model is not modified.
    """
    fields = type(model).model_fields
    update: dict[str, Any] = {}
    claude = _claude(model, fields) if thinking is False else None
    if cap is not None:
        if claude is not None:  # room for the thinking it may still do, as the adapter
            cap += claude.cap_extra
        for name in _CAP_FIELDS:
            if name in fields:
                current = getattr(model, name, None)
                update[name] = cap if not isinstance(current, int) else min(current, cap)
    if claude is not None:
        update.update(_claude_off(model, fields, claude))
    elif thinking is False:
        update.update(_thinking_off(model, fields))
    if not update:
        return model, {}
    return model.model_copy(update=update), update


def _claude(model: BaseChatModel, fields: Mapping[str, Any]) -> ClaudeThinking | None:
    """How a Claude chat model (one with Anthropic's ``thinking`` field) turns thinking off,
    as the Anthropic adapter sends it; ``None`` for any other model."""
    name = model_name(model)
    return claude_thinking(name) if "thinking" in fields and "claude" in name.lower() else None


def _claude_off(
    model: BaseChatModel, fields: Mapping[str, Any], claude: ClaudeThinking
) -> dict[str, Any]:
    """The field updates that turn a Claude model's thinking off as the Anthropic adapter does
    (or, where it cannot be, leave the setting out and ask for the lowest effort). An effort
    the user set is lowered too: ``xhigh`` and ``max`` are refused with thinking off on some
    models, and on Opus 4.7 an effort with no thinking setting turns adaptive thinking on."""
    update: dict[str, Any] = {"thinking": dict(claude.off) if claude.off is not None else None}
    user_effort = "reasoning_effort" in fields and getattr(model, "reasoning_effort", None)
    current = getattr(model, "output_config", None) if "output_config" in fields else None
    if user_effort:
        turns_on = claude.off is None and not claude.off_effort
        update["reasoning_effort"] = None if turns_on else _LOWEST_EFFORT
    if isinstance(current, Mapping) and "effort" in current:
        update["output_config"] = {**current, "effort": _LOWEST_EFFORT}
    elif claude.off_effort and not user_effort and "output_config" in fields:
        update["output_config"] = {**(current or {}), "effort": _LOWEST_EFFORT}
    return update


def _thinking_off(model: BaseChatModel, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The field updates that turn thinking off (or as low as the model allows)."""
    update = {name: value for name, value in _THINKING_OFF.items() if name in fields}
    if "reasoning" in fields:
        current = getattr(model, "reasoning", None)
        if isinstance(current, Mapping) and "effort" in current:  # ChatOpenAI (Responses API)
            update["reasoning"] = {**current, "effort": _LOWEST_EFFORT}
        elif isinstance(current, bool) or type(model).__name__ == "ChatOllama":
            update["reasoning"] = False
    if "reasoning_effort" in fields and getattr(model, "reasoning_effort", None):
        update["reasoning_effort"] = _LOWEST_EFFORT  # ChatOpenAI (Chat Completions)
    return update


def is_overflow(exc: BaseException) -> bool:
    """Whether an exception from a chat model says the prompt is longer than the window."""
    if isinstance(exc, LangChainOverflow | ContextOverflowError):
        return True
    status = getattr(exc, "status_code", None)
    code = getattr(exc, "code", None)
    return looks_like_overflow(
        status if isinstance(status, int) else None,
        str(exc),
        code if isinstance(code, str) else None,
    )


def convert_error(exc: Exception, *, model: str) -> ProviderError:
    """The autocompact error for an exception a LangChain chat model raised."""
    if isinstance(exc, ProviderError):
        return exc
    kind = ContextOverflowError if is_overflow(exc) else ProviderError
    status = getattr(exc, "status_code", None)
    return kind(
        described(exc),
        provider="langchain",
        model=model,
        status=status if isinstance(status, int) else None,
    )


def model_name(model: BaseChatModel) -> str:
    """The model's name as LangChain reports it (its class name when it has none)."""
    for attr in ("model_name", "model"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


_SIDE_QUERY_CONFIG: RunnableConfig = {
    "metadata": {"lc_source": "autocompact"},
    "tags": [TAG_NOSTREAM],
}
"""The side query's run config: tagged as LangChain's own summarization tags its call, so an
agent streamed with ``stream_mode="messages"`` never shows the summary's tokens."""


class LangChainProvider:
    """Sends autocompact requests (the summary side query) to a LangChain chat model.

    Args:
        model: the chat model (the agent's own model by default).
    """

    name = "langchain"

    def __init__(self, model: BaseChatModel) -> None:
        self.chat_model = model
        self.model = model_name(model)
        self.last_settings: dict[str, Any] = {}

    def _prepare(self, request: ChatRequest) -> tuple[BaseChatModel, list[BaseMessage]]:
        model, self.last_settings = bounded_model(
            self.chat_model, cap=request.max_output_tokens, thinking=request.thinking
        )
        return model, from_autocompact(request.messages, system=request.system_instruction)

    def complete(self, request: ChatRequest) -> Completion:
        """Send a request and wait for the whole reply."""
        model, messages = self._prepare(request)
        try:
            reply = model.invoke(messages, config=_SIDE_QUERY_CONFIG)
        except Exception as exc:
            raise convert_error(exc, model=self.model) from exc
        return self._completion(reply)

    async def acomplete(self, request: ChatRequest) -> Completion:
        """Async :meth:`complete`."""
        model, messages = self._prepare(request)
        try:
            reply = await model.ainvoke(messages, config=_SIDE_QUERY_CONFIG)
        except Exception as exc:
            raise convert_error(exc, model=self.model) from exc
        return self._completion(reply)

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """The whole reply as one final event (side queries are never shown as they stream)."""
        yield StreamDone(completion=self.complete(request))

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Async :meth:`stream`."""
        yield StreamDone(completion=await self.acomplete(request))

    def _completion(self, reply: BaseMessage) -> Completion:
        if not isinstance(reply, AIMessage):
            raise ProviderError(
                f"the chat model answered with {type(reply).__name__}, not an AIMessage",
                provider=self.name,
                model=self.model,
            )
        return completion_of(reply, model=self.model)


def completion_of(reply: AIMessage, *, model: str | None = None) -> Completion:
    """An autocompact completion for a LangChain reply (usage and finish reason included)."""
    ((message, _),) = (
        convert_groups([reply])
        if reply.content or reply.tool_calls
        else ((Message(role="model", parts=()), [reply]),)
    )
    raw = reply.response_metadata.get("finish_reason") or reply.response_metadata.get("stop_reason")
    raw_text = str(raw) if raw is not None else None
    finish: FinishReason | None = None
    if raw_text in _LENGTH_WORDS:
        finish = FinishReason.LENGTH
    elif raw_text in _STOP_WORDS:
        finish = FinishReason.STOP
    elif reply.tool_calls:
        finish = FinishReason.TOOL_CALL
    elif raw_text is not None:
        finish = FinishReason.OTHER
    return Completion(
        message=message,
        usage=completion_usage(reply),
        finish_reason=finish,
        raw_finish_reason=raw_text,
        model=model,
    )

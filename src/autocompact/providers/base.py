"""The provider protocol: one small interface every adapter implements.

A provider turns a :class:`ChatRequest` into a :class:`Completion`, synchronously or
asynchronously, whole or streamed. The summarization side query is an ordinary request with
``thinking=False`` and ``max_output_tokens=COMPACT_MAX_OUTPUT_TOKENS``; each adapter maps those
two generic settings to its provider's own fields (SPEC §6) and omits what is unset.

Adapters convert every SDK exception to :mod:`autocompact.errors` in one place.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from autocompact.content import Message, OpaquePart, Usage
from autocompact.errors import ConfigError

__all__ = [
    "AsyncOnlyProvider",
    "ChatRequest",
    "Completion",
    "FinishReason",
    "NativeCompaction",
    "NativeCompactor",
    "NativeOutcome",
    "NativeSource",
    "Provider",
    "RequestPurpose",
    "StreamDone",
    "StreamEvent",
    "TextDelta",
    "ThinkingDelta",
    "ToolSpec",
    "check_model",
    "check_provider",
    "require_method",
]

RequestPurpose: TypeAlias = Literal["chat", "side_query"]


class FinishReason(StrEnum):
    """Why the model stopped, normalized across providers."""

    STOP = "stop"
    LENGTH = "length"  # hit the output cap: a summary that ends here is truncated
    TOOL_CALL = "tool_call"
    CONTENT_FILTER = "content_filter"
    OTHER = "other"


@dataclass(frozen=True, kw_only=True)
class ToolSpec:
    """A tool the model may call: a name, a description and a JSON-schema for its arguments."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object"})

    def __post_init__(self) -> None:
        for name in ("name", "description"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise ConfigError(
                    f"ToolSpec.{name} must be a str, got {type(value).__name__} {value!r:.60}",
                    key=f"ToolSpec.{name}",
                )
        if not isinstance(self.parameters, Mapping):
            raise ConfigError(
                "ToolSpec.parameters must be a JSON schema object (a mapping), got "
                f"{type(self.parameters).__name__} {self.parameters!r:.60}",
                key="ToolSpec.parameters",
            )

    def as_json(self) -> dict[str, Any]:
        """The declaration as a JSON object (what the estimate measures)."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


@dataclass(frozen=True, kw_only=True)
class NativeSource:
    """What a native summary backend compacts: the side query's range as it is in the history.

    Attributes:
        messages: the messages to summarize, unslimmed, without our summary prompt.
        instructions: the user's extra instructions (``/compress ...``), if any.
        system_instruction, tools: the conversation's own (the provider compacts the
            conversation as the model sees it).
    """

    messages: tuple[Message, ...]
    instructions: str | None = None
    system_instruction: str | None = None
    tools: tuple[ToolSpec, ...] = ()


@dataclass(frozen=True, kw_only=True)
class ChatRequest:
    """One request to a model.

    Attributes:
        messages: the conversation to send (roles ``user`` / ``model``): a read-only sequence
            (a tuple, or on a session's main request a :class:`~autocompact.history.HistoryView`
            over the session's history plus the new message, so a send copies nothing). Read
            it by iterating, indexing or slicing; call ``tuple(...)`` for a tuple.
        system_instruction: the system prompt, if any.
        tools: tool declarations.
        max_output_tokens: the output cap; ``None`` leaves the provider's default (omitted).
        thinking: ``False`` turns thinking off as far as the model allows, ``True`` asks for it,
            ``None`` sends nothing about it.
        purpose: ``"side_query"`` for the compaction summary, ``"chat"`` otherwise.
        extra: provider-prefixed extras (``{"openai": {...}}``), merged into that provider's body.
        native: on a side query, the range it summarizes, for a provider that can compact it
            natively (:class:`NativeCompactor`); ``None`` elsewhere.
    """

    messages: Sequence[Message]
    system_instruction: str | None = None
    tools: tuple[ToolSpec, ...] = ()
    max_output_tokens: int | None = None
    thinking: bool | None = None
    purpose: RequestPurpose = "chat"
    extra: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    native: NativeSource | None = None


@dataclass(frozen=True, kw_only=True)
class Completion:
    """A model's reply.

    Attributes:
        message: the reply as a ``model`` message.
        usage: what the provider reported, or ``None`` when it reported nothing.
        finish_reason: the normalized reason, or ``None`` when the provider gave none.
        raw_finish_reason: the provider's own word for it.
        model: the model that answered, as the provider named it.
    """

    message: Message
    usage: Usage | None = None
    finish_reason: FinishReason | None = None
    raw_finish_reason: str | None = None
    model: str | None = None

    @property
    def text(self) -> str:
        """The reply's text."""
        return self.message.text


@dataclass(frozen=True, kw_only=True, slots=True)
class TextDelta:
    """A piece of streamed reply text."""

    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True, kw_only=True, slots=True)
class ThinkingDelta:
    """A piece of streamed reasoning."""

    text: str
    kind: Literal["thinking"] = "thinking"


@dataclass(frozen=True, kw_only=True, slots=True)
class StreamDone:
    """The end of a stream: the whole reply, with usage and finish reason."""

    completion: Completion
    kind: Literal["done"] = "done"


StreamEvent: TypeAlias = TextDelta | ThinkingDelta | StreamDone


@runtime_checkable
class Provider(Protocol):
    """What the engine needs from a model provider.

    ``stream`` and ``astream`` yield deltas and end with exactly one :class:`StreamDone`.
    Every method raises only :class:`autocompact.errors.ProviderError` subclasses, with
    :class:`autocompact.errors.ContextOverflowError` when the prompt is too long.
    """

    name: str
    model: str

    def complete(self, request: ChatRequest) -> Completion:
        """Send a request and wait for the whole reply."""
        ...

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """Send a request and yield the reply as it arrives."""
        ...

    async def acomplete(self, request: ChatRequest) -> Completion:
        """Async :meth:`complete`."""
        ...

    def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Async :meth:`stream`."""
        ...


class AsyncOnlyProvider:
    """Base of the adapters over a framework's own model, which can only be awaited: the
    synchronous methods raise a :class:`~autocompact.errors.ConfigError` saying what to use
    instead (``sync_refusal``), and ``astream`` yields the whole reply as one
    :class:`StreamDone` (summaries are never streamed). Subclasses define ``acomplete``."""

    sync_refusal = "this model is asynchronous: use the async methods"

    async def acomplete(self, request: ChatRequest) -> Completion:
        """The reply, awaited (each subclass sends it through its framework)."""
        raise NotImplementedError

    def complete(self, request: ChatRequest) -> Completion:
        """Refused: the model can only be awaited."""
        raise ConfigError(self.sync_refusal)

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """Refused (summaries are never streamed)."""
        raise ConfigError(self.sync_refusal)

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """The whole reply as one :class:`StreamDone`."""
        yield StreamDone(completion=await self.acomplete(request))


class NativeOutcome(StrEnum):
    """What a provider's native compaction came to (each maps to a compaction status)."""

    COMPACTED = "compacted"  # success: ``part`` holds the opaque block
    TRUNCATED = "truncated"  # stopped on the output cap: never kept
    REFUSED = "refused"  # the provider refused to summarize
    EMPTY = "empty"  # finished without a usable block (null content, or a reply instead)
    TOO_LARGE = "too_large"  # the range does not fit the model: our own (chunked) summary
    UNSUPPORTED = "unsupported"  # this model or account cannot compact: remembered, fall back
    UNAVAILABLE = "unavailable"  # a transient server reason: fall back this time


@dataclass(frozen=True, kw_only=True)
class NativeCompaction:
    """The result of one native compaction request.

    Attributes:
        outcome: what it came to.
        part: the opaque block on success.
        usage: the compaction's own usage (Anthropic: its ``usage.iterations`` entry).
        raw_stop: the provider's stop reason or error code.
        detail: why it failed, in words.
    """

    outcome: NativeOutcome
    part: OpaquePart | None = None
    usage: Usage | None = None
    raw_stop: str | None = None
    detail: str = ""


@runtime_checkable
class NativeCompactor(Protocol):
    """A provider that can write the summary itself (a summary backend, not a trigger).

    The compaction service asks it only for the summary step; the ladder, the estimate, the
    breaker, clearing and the cut stay the engine's. Errors that are not an outcome (rate
    limits, authentication, timeouts) raise :class:`autocompact.errors.ProviderError`.
    """

    name: str
    model: str

    def native_compaction_supported(self) -> bool | None:
        """``True``/``False`` when known (capability data or a remembered 400), else ``None``."""
        ...

    def compact_natively(self, source: NativeSource) -> NativeCompaction:
        """Ask the provider to compact ``source.messages``."""
        ...

    async def acompact_natively(self, source: NativeSource) -> NativeCompaction:
        """Async :meth:`compact_natively`."""
        ...


def check_provider(value: object, name: str = "provider") -> Any:
    """``value`` if it can answer a request (it has ``complete`` or ``acomplete``).

    Raises:
        ConfigError: anything else (a provider's name given as a str, ``None``), naming ``name``.
    """
    if callable(getattr(value, "complete", None)) or callable(getattr(value, "acomplete", None)):
        return value
    by_name = (
        f"; for a provider by name use autocompact.providers.get_provider({value!r:.40})"
        if isinstance(value, str)
        else ""
    )
    raise ConfigError(
        f"{name} must be a model provider (an object with complete(request), such as "
        f"OpenAIProvider(...), AnthropicProvider(...) or FakeProvider()), got "
        f"{type(value).__name__} {value!r:.60}{by_name}",
        key=name,
    )


def require_method(provider: object, method: str, caller: str) -> None:
    """Raise unless ``provider`` has ``method`` (a provider may implement only some of the four).

    Raises:
        ConfigError: naming the provider's class, the method and the call that needs it.
    """
    if not callable(getattr(provider, method, None)):
        raise ConfigError(
            f"the provider {type(provider).__name__} has no {method}(request), which {caller} "
            "needs: implement it (autocompact.providers.Provider lists the four methods)",
            key="provider",
        )


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def check_model(value: object, name: str = "model") -> str:
    """``value`` if it is a model name: text, not blank, without control characters (which a
    request's URL or header cannot carry: Gemini's SDK raised a raw ``InvalidURL``).

    Raises:
        ConfigError: anything else, naming ``name`` and the value.
    """
    if not isinstance(value, str) or not value.strip() or _CONTROL.search(value):
        raise ConfigError(
            f"{name} must be a model name (text without control characters), got "
            f"{type(value).__name__} {value!r:.60}",
            key=name,
        )
    return value

"""The OpenAI chat-completions adapter and its capability profiles.

One adapter serves OpenAI and every server that speaks its chat-completions API; what differs
is an :class:`OpenAIProfile` — which field carries the output cap and how thinking is turned off:

========================  =========================  ==========================================
profile                   cap field                  thinking off (side query)
========================  =========================  ==========================================
OpenAI reasoning models   ``max_completion_tokens``  lowest ``reasoning_effort`` the model takes
OpenAI other models       ``max_completion_tokens``  nothing (no reasoning field at all)
Qwen / DashScope          ``max_tokens`` (config.)   ``enable_thinking: false`` in the body
compatible servers        ``max_tokens``             nothing (vLLM, Ollama, llama.cpp, LM Studio)
========================  =========================  ==========================================

Streaming asks for usage in the stream (``stream_options.include_usage``) so the prompt size of
every turn is known. The ``openai`` SDK is imported only when an adapter is built. Every SDK
exception is converted in :meth:`OpenAIProvider._convert_error`.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any, Literal

from autocompact.content import Message, Usage
from autocompact.convert import ThinkingMode, from_openai_messages, to_openai_messages
from autocompact.errors import (
    ConfigError,
    MalformedResponseError,
    MissingDependencyError,
    ProviderError,
)
from autocompact.providers._common import (
    convert_transport_error,
    converting_errors,
    make_client,
    merge_extra,
    provider_error,
    redact,
)
from autocompact.providers.base import (
    ChatRequest,
    Completion,
    FinishReason,
    StreamDone,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
)

__all__ = [
    "COMPATIBLE_BASE_URLS",
    "DASHSCOPE_BASE_URLS",
    "OpenAIProfile",
    "OpenAIProvider",
    "compatible_profile",
    "lowest_reasoning_effort",
    "openai_profile",
    "qwen_profile",
]

CapField = Literal["max_completion_tokens", "max_tokens"]
ThinkingControl = Literal["reasoning_effort", "enable_thinking", "none"]

DASHSCOPE_BASE_URLS = {
    "intl": "https://dashscope-intl.aliyuncs.com/compatible-mode/v1",  # Singapore
    "cn": "https://dashscope.aliyuncs.com/compatible-mode/v1",  # Beijing
    "us": "https://dashscope-us.aliyuncs.com/compatible-mode/v1",  # Virginia
}
"""DashScope (Alibaba Model Studio) OpenAI-compatible endpoints by region."""

COMPATIBLE_BASE_URLS = {
    "vllm": "http://127.0.0.1:8000/v1",
    "ollama": "http://127.0.0.1:11434/v1",
    "lmstudio": "http://127.0.0.1:1234/v1",
    "llamacpp": "http://127.0.0.1:8080/v1",
}
"""Default local addresses of the common OpenAI-compatible servers."""

_FINISH = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "tool_calls": FinishReason.TOOL_CALL,
    "function_call": FinishReason.TOOL_CALL,
    "content_filter": FinishReason.CONTENT_FILTER,
}


@dataclass(frozen=True, kw_only=True)
class OpenAIProfile:
    """How one family of models or servers wants the generic settings expressed.

    Attributes:
        name: the provider name reported in errors and completions.
        cap_field: the body field that carries ``max_output_tokens``.
        thinking_control: ``reasoning_effort``, ``enable_thinking`` (Qwen) or ``none``.
        lowest_effort: the effort sent when thinking is off (``reasoning_effort`` profiles).
        base_url: the default base URL (``None``: the SDK's, i.e. api.openai.com).
        stream_usage: ask for usage in streams (``stream_options.include_usage``).
        history_thinking: how thinking parts of the history are sent back.
    """

    name: str
    cap_field: CapField
    thinking_control: ThinkingControl = "none"
    lowest_effort: str | None = None
    base_url: str | None = None
    stream_usage: bool = True
    history_thinking: ThinkingMode = "drop"


_NO_EFFORT = re.compile(r"^o1-(mini|preview)")
_REASONING = re.compile(r"^(o\d|gpt-5)")
_CHAT_VARIANT = re.compile(r"-chat(-latest)?$|-chat-")


def lowest_reasoning_effort(model: str) -> str | None:
    """The lowest ``reasoning_effort`` an OpenAI model accepts, or ``None`` to send none.

    ``none`` from GPT-5.1 on (except Codex models, whose floor is ``low``), ``minimal`` for the
    first GPT-5 models, ``low`` for the o-series; o1-mini/o1-preview and the -pro models take
    no lower value than their default, so nothing is sent.
    """
    name = model.lower().rsplit("/", 1)[-1]
    if _NO_EFFORT.match(name) or not _REASONING.match(name) or _CHAT_VARIANT.search(name):
        return None
    if name.endswith("-pro") or "-pro-" in name:
        return None
    if name.startswith("o"):
        return "low"
    if "codex" in name:
        return "low"
    if re.match(r"^gpt-5(-|$)", name):
        return "minimal"
    return "none"


def openai_profile(model: str) -> OpenAIProfile:
    """The profile of an OpenAI model: reasoning models get a ``reasoning_effort`` floor."""
    effort = lowest_reasoning_effort(model)
    return OpenAIProfile(
        name="openai",
        cap_field="max_completion_tokens",
        thinking_control="reasoning_effort" if effort is not None else "none",
        lowest_effort=effort,
    )


def qwen_profile(region: str = "intl", *, cap_field: CapField = "max_tokens") -> OpenAIProfile:
    """The Qwen / DashScope compatible-mode profile for a region (``intl``, ``cn``, ``us``)."""
    if region not in DASHSCOPE_BASE_URLS:
        raise ConfigError(
            f"unknown DashScope region {region!r}: use one of {', '.join(DASHSCOPE_BASE_URLS)}",
            key="region",
        )
    return OpenAIProfile(
        name="qwen",
        cap_field=cap_field,
        thinking_control="enable_thinking",
        base_url=DASHSCOPE_BASE_URLS[region],
    )


def compatible_profile(server: str = "vllm", *, base_url: str | None = None) -> OpenAIProfile:
    """A generic OpenAI-compatible server: ``max_tokens`` and no reasoning field."""
    return OpenAIProfile(
        name="openai-compatible",
        cap_field="max_tokens",
        base_url=base_url or COMPATIBLE_BASE_URLS.get(server, COMPATIBLE_BASE_URLS["vllm"]),
    )


class OpenAIProvider:
    """A :class:`~autocompact.providers.base.Provider` over the ``openai`` SDK.

    Args:
        model: the model name sent to the server.
        api_key: the key (compatible servers without auth may pass ``None``).
        profile: the capability profile; by default :func:`openai_profile` of ``model``.
        base_url: overrides the profile's base URL.
        http_client: an ``httpx2.Client`` for the SDK (tests inject a mock transport here).
        async_http_client: an ``httpx2.AsyncClient`` for the async methods.
        timeout: seconds per request (``None``: the SDK default).
        max_retries: SDK retries on connection errors, 429 and 5xx.
        stream_usage: overrides the profile's ``stream_options.include_usage`` (turn it off for
            an old server that rejects ``stream_options``).

    Raises:
        MissingDependencyError: the ``openai`` package is not installed.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        profile: OpenAIProfile | None = None,
        base_url: str | None = None,
        http_client: Any = None,
        async_http_client: Any = None,
        timeout: float | None = None,
        max_retries: int = 2,
        stream_usage: bool | None = None,
    ) -> None:
        try:
            import openai
        except ImportError as exc:
            raise MissingDependencyError("openai", "openai") from exc
        self._sdk: Any = openai
        self.model = model
        self.profile = profile or openai_profile(model)
        if base_url is not None:
            self.profile = replace(self.profile, base_url=base_url)
        if stream_usage is not None:
            self.profile = replace(self.profile, stream_usage=stream_usage)
        self.name = self.profile.name
        self._api_key = api_key
        self._client_args: dict[str, Any] = {
            # The SDK refuses to build without a key; local servers ignore it.
            "api_key": api_key or "not-needed",
            "max_retries": max_retries,
        }
        if self.profile.base_url is not None:
            self._client_args["base_url"] = self.profile.base_url
        if timeout is not None:
            self._client_args["timeout"] = timeout
        self._http_client = http_client
        self._async_http_client = async_http_client
        self._client: Any = None
        self._aclient: Any = None

    # -- clients -----------------------------------------------------------------------------

    def _sync(self) -> Any:
        if self._client is None:
            self._client = make_client(self._sdk.OpenAI, self._client_args, self._http_client)
        return self._client

    def _async(self) -> Any:
        if self._aclient is None:
            self._aclient = make_client(
                self._sdk.AsyncOpenAI, self._client_args, self._async_http_client
            )
        return self._aclient

    # -- request building --------------------------------------------------------------------

    def build_body(self, request: ChatRequest, *, stream: bool = False) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for a request (unset omitted).

        ``enable_thinking`` travels in ``extra_body`` because it is not an OpenAI field.
        """
        body: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(
                request.messages,
                request.system_instruction,
                thinking=self.profile.history_thinking,
            ),
        }
        if request.tools:
            body["tools"] = [
                _tool(t.name, t.description, dict(t.parameters)) for t in request.tools
            ]
        if request.max_output_tokens is not None:
            body[self.profile.cap_field] = request.max_output_tokens
        extra_body: dict[str, Any] = {}
        control = self.profile.thinking_control
        if request.thinking is False and control == "reasoning_effort":
            if self.profile.lowest_effort is not None:
                body["reasoning_effort"] = self.profile.lowest_effort
        elif request.thinking is not None and control == "enable_thinking":
            extra_body["enable_thinking"] = request.thinking
        if stream:
            body["stream"] = True
            if self.profile.stream_usage:
                body["stream_options"] = {"include_usage": True}
        merge_extra(extra_body, request.extra, "openai", self.name)
        if extra_body:
            body["extra_body"] = extra_body
        return body

    # -- the Provider protocol ---------------------------------------------------------------

    def complete(self, request: ChatRequest) -> Completion:
        """Send a request and wait for the whole reply."""
        with self._errors():
            response = self._sync().chat.completions.create(**self.build_body(request))
            return self._parse(response)

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """Send a request and yield text/thinking deltas, then one :class:`StreamDone`."""
        acc = _StreamAccumulator()
        with self._errors():
            chunks = self._sync().chat.completions.create(**self.build_body(request, stream=True))
            with chunks:  # closes the HTTP stream when the caller stops early (Ctrl-C)
                for chunk in chunks:
                    yield from acc.add(chunk)
            completion = acc.finish(self.model)
        yield StreamDone(completion=completion)

    async def acomplete(self, request: ChatRequest) -> Completion:
        """Async :meth:`complete`."""
        with self._errors():
            response = await self._async().chat.completions.create(**self.build_body(request))
            return self._parse(response)

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Async :meth:`stream`."""
        acc = _StreamAccumulator()
        with self._errors():
            chunks = await self._async().chat.completions.create(
                **self.build_body(request, stream=True)
            )
            async with chunks:
                async for chunk in chunks:
                    for event in acc.add(chunk):
                        yield event
            completion = acc.finish(self.model)
        yield StreamDone(completion=completion)

    # -- responses ---------------------------------------------------------------------------

    def _parse(self, response: Any) -> Completion:
        choices = getattr(response, "choices", None)
        if not choices:
            raise MalformedResponseError(
                "the response has no choices", provider=self.name, model=self.model, status=200
            )
        choice = choices[0]
        msg = choice.message
        raw = {
            "role": "assistant",
            "content": msg.content,
            "tool_calls": [tc.model_dump() for tc in (msg.tool_calls or ())],
            "reasoning_content": _reasoning(msg),
        }
        refused = bool(getattr(msg, "refusal", None))
        if msg.content is None and refused:
            raw["content"] = msg.refusal
        return Completion(
            message=_assistant(raw),
            usage=_usage(getattr(response, "usage", None)),
            # A refusal arrives with finish_reason "stop": it is a content filter all the same.
            finish_reason=FinishReason.CONTENT_FILTER if refused else _finish(choice.finish_reason),
            raw_finish_reason="refusal" if refused else choice.finish_reason,
            model=getattr(response, "model", None) or self.model,
        )

    # -- errors: the one place SDK exceptions are converted -----------------------------------

    def _errors(self) -> AbstractContextManager[None]:
        return converting_errors(
            provider=self.name, model=self.model, api_key=self._api_key, convert=self._convert_error
        )

    def _convert_error(self, exc: Exception) -> ProviderError | None:
        sdk = self._sdk
        where: dict[str, Any] = {"provider": self.name, "model": self.model}
        shared = convert_transport_error(
            sdk, exc, provider=self.name, model=self.model, api_key=self._api_key
        )
        if shared is not None:
            return shared
        if isinstance(exc, sdk.APIStatusError):
            message, code = _error_body(exc.body, exc.message)
            return provider_error(
                message, status=exc.status_code, code=code, api_key=self._api_key, **where
            )
        if isinstance(exc, sdk.OpenAIError):
            return ProviderError(redact(str(exc), self._api_key), **where)
        if isinstance(exc, (ValueError, KeyError, TypeError, AttributeError)):
            return MalformedResponseError(
                redact(f"malformed response: {type(exc).__name__}: {exc}", self._api_key), **where
            )
        return None


def _tool(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name, "parameters": parameters}
    if description:
        function["description"] = description
    return {"type": "function", "function": function}


def _error_body(body: object, fallback: str) -> tuple[str, str | None]:
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            message = inner.get("message") or fallback
            code = inner.get("code") or inner.get("type")
            return str(message), (str(code) if code is not None else None)
        if isinstance(inner, str):
            return inner, None
    if isinstance(body, str) and body:
        return body[:500], None
    return fallback, None


def _reasoning(obj: Any) -> str | None:
    for field in ("reasoning_content", "reasoning"):
        value = getattr(obj, field, None)
        if isinstance(value, str) and value:
            return value
    return None


def _assistant(raw: dict[str, Any]) -> Message:
    _, history = from_openai_messages([raw])
    return history[0]


def _finish(raw: str | None) -> FinishReason | None:
    if raw is None:
        return None
    return _FINISH.get(raw, FinishReason.OTHER)


def _usage(usage: Any) -> Usage | None:
    if usage is None:
        return None
    prompt_details = getattr(usage, "prompt_tokens_details", None)
    output_details = getattr(usage, "completion_tokens_details", None)
    cached = getattr(prompt_details, "cached_tokens", None) or getattr(
        usage, "prompt_cache_hit_tokens", None
    )
    return Usage(
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        cached_tokens=int(cached or 0),
        thinking_tokens=int(getattr(output_details, "reasoning_tokens", 0) or 0),
    )


class _StreamAccumulator:
    """Builds the final completion from chat-completion chunks."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.model: str | None = None
        self.refused = False

    def add(self, chunk: Any) -> Iterator[StreamEvent]:
        self.model = getattr(chunk, "model", None) or self.model
        if getattr(chunk, "usage", None) is not None:
            self.usage = _usage(chunk.usage)
        for choice in getattr(chunk, "choices", None) or ():
            delta = choice.delta
            if delta is not None:
                thinking = _reasoning(delta)
                if thinking:
                    self.reasoning.append(thinking)
                    yield ThinkingDelta(text=thinking)
                if delta.content:
                    self.text.append(delta.content)
                    yield TextDelta(text=delta.content)
                refusal = getattr(delta, "refusal", None)
                if refusal:
                    self.refused = True
                    self.text.append(refusal)
                    yield TextDelta(text=refusal)
                for call in delta.tool_calls or ():
                    slot = self.calls.setdefault(call.index, {"id": "", "name": "", "args": []})
                    if call.id:
                        slot["id"] = call.id
                    if call.function is not None:
                        if call.function.name:
                            slot["name"] += call.function.name
                        if call.function.arguments:
                            slot["args"].append(call.function.arguments)
            if choice.finish_reason is not None:
                self.finish_reason = choice.finish_reason

    def finish(self, model: str) -> Completion:
        raw = {
            "role": "assistant",
            "content": "".join(self.text),
            "reasoning_content": "".join(self.reasoning) or None,
            "tool_calls": [
                {
                    "id": slot["id"],
                    "type": "function",
                    "function": {"name": slot["name"], "arguments": "".join(slot["args"]) or "{}"},
                }
                for _, slot in sorted(self.calls.items())
            ],
        }
        return Completion(
            message=_assistant(raw),
            usage=self.usage,
            finish_reason=FinishReason.CONTENT_FILTER
            if self.refused
            else _finish(self.finish_reason),
            raw_finish_reason="refusal" if self.refused else self.finish_reason,
            model=self.model or model,
        )

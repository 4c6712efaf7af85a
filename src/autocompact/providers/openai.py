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

import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any

from autocompact.content import Message, Usage
from autocompact.convert import from_openai_messages, to_openai_messages
from autocompact.errors import (
    REPLY_ERRORS,
    MalformedResponseError,
    MissingDependencyError,
    ProviderError,
    described,
)
from autocompact.providers._common import (
    LazyClients,
    convert_transport_error,
    converting_errors,
    error_body,
    merge_extra,
    provider_error,
    redact,
)
from autocompact.providers._local_servers import (
    MESSAGE_OVERHEAD_TOKENS,
    REPLY_OPENING_TOKENS,
    TOKENIZE_ENDPOINTS,
    prompt_text,
    server_root,
    token_count,
)
from autocompact.providers.base import (
    ChatRequest,
    Completion,
    FinishReason,
    StreamDone,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    check_model,
)
from autocompact.providers.openai_profiles import (
    COMPATIBLE_BASE_URLS,
    DASHSCOPE_BASE_URLS,
    OpenAIProfile,
    compatible_profile,
    lowest_reasoning_effort,
    openai_profile,
    qwen_profile,
)
from autocompact.usage_check import reported_count

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

logger = logging.getLogger("autocompact.notices")
"""Notices also handed to the caller (:meth:`OpenAIProvider.take_notices`): a program that shows
those (the CLI) keeps this child of the ``autocompact`` logger quiet."""

_FINISH = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "tool_calls": FinishReason.TOOL_CALL,
    "function_call": FinishReason.TOOL_CALL,
    "content_filter": FinishReason.CONTENT_FILTER,
}


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
        self.model = check_model(model)
        self.profile = profile or openai_profile(model)
        if base_url is not None:
            self.profile = replace(self.profile, base_url=base_url)
        if stream_usage is not None:
            self.profile = replace(self.profile, stream_usage=stream_usage)
        self.name = self.profile.name
        self._api_key = api_key
        self._clients = LazyClients(
            self._sdk.OpenAI,
            self._sdk.AsyncOpenAI,
            # The SDK refuses to build without a key; local servers ignore it.
            api_key=api_key or "not-needed",
            max_retries=max_retries,
            base_url=self.profile.base_url,
            timeout=timeout,
            http_client=http_client,
            async_http_client=async_http_client,
        )
        self._notices: list[str] = []
        self._told_no_usage = False
        self._whole_replies = False  # the server gives no usage in streams and cannot count
        self._tokenize_path: str | None = None

    # -- clients -----------------------------------------------------------------------------

    def _sync(self) -> Any:
        return self._clients.sync()

    def _async(self) -> Any:
        return self._clients.async_()

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
                text_as_string=self.profile.text_as_string,
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
        body = self.build_body(request)  # (a ContentError here is the request's, not the reply's)
        with self._errors():
            response = self._sync().chat.completions.create(**body)
            return self._parse(response)

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """Send a request and yield text/thinking deltas, then one :class:`StreamDone`.

        A stream that ends with neither content nor a finish reason is an error, never an empty
        reply. When the server sends no usage in streams, the prompt is counted with its
        tokenize endpoint; a server without one gets whole (non-streamed) requests instead.
        """
        if self._whole_replies:
            completion = self.complete(request)
            if completion.text:
                yield TextDelta(text=completion.text)
            yield StreamDone(completion=completion)
            return
        acc = _StreamAccumulator()
        body = self.build_body(request, stream=True)
        with self._errors():
            chunks = self._sync().chat.completions.create(**body)
            with chunks:  # closes the HTTP stream when the caller stops early (Ctrl-C)
                for chunk in chunks:
                    yield from acc.add(chunk)
            if acc.empty:
                self._probe_empty_stream(request)
            completion = acc.finish(self.model)
            if completion.usage is None and self.profile.stream_usage:
                completion = self._counted(body, completion, self._count)
        yield StreamDone(completion=completion)

    async def acomplete(self, request: ChatRequest) -> Completion:
        """Async :meth:`complete`."""
        body = self.build_body(request)
        with self._errors():
            response = await self._async().chat.completions.create(**body)
            return self._parse(response)

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Async :meth:`stream`."""
        if self._whole_replies:
            completion = await self.acomplete(request)
            if completion.text:
                yield TextDelta(text=completion.text)
            yield StreamDone(completion=completion)
            return
        acc = _StreamAccumulator()
        body = self.build_body(request, stream=True)
        with self._errors():
            chunks = await self._async().chat.completions.create(**body)
            async with chunks:
                async for chunk in chunks:
                    for event in acc.add(chunk):
                        yield event
            if acc.empty:
                await self._aprobe_empty_stream(request)
            completion = acc.finish(self.model)
            if completion.usage is None and self.profile.stream_usage:
                counts = {
                    text: await self._acount(text) for text in _texts_to_count(body, completion)
                }
                completion = self._counted(body, completion, counts.__getitem__)
        yield StreamDone(completion=completion)

    # -- local servers: empty streams, streams without usage ---------------------------------

    def take_notices(self) -> list[str]:
        """Notices for the user gathered since the last call (each is said once per adapter)."""
        notices, self._notices = self._notices, []
        return notices

    def _notice(self, text: str) -> None:
        logger.warning("%s", text)
        self._notices.append(text)

    def _empty_stream_error(self) -> MalformedResponseError:
        return MalformedResponseError(
            f"the server at {self._where()} ended the stream with no reply and no finish "
            "reason; nothing was kept. A server does this when it drops a request, e.g. one "
            "longer than its context window",
            provider=self.name,
            model=self.model,
            status=200,
        )

    def _probe_request(self, request: ChatRequest) -> dict[str, Any]:
        return {**self.build_body(request), self.profile.cap_field: 1}

    def _probe_empty_stream(self, request: ChatRequest) -> None:
        """An empty stream: ask once more, not streamed and for one token, to learn why (a
        server that drops an oversize stream answers the same request with its overflow
        error, window included). Raises that error, or the empty-stream error."""
        self._sync().chat.completions.create(**self._probe_request(request))
        raise self._empty_stream_error()

    async def _aprobe_empty_stream(self, request: ChatRequest) -> None:
        await self._async().chat.completions.create(**self._probe_request(request))
        raise self._empty_stream_error()

    def _where(self) -> str:
        return self.profile.base_url or "the API"

    def _tokenize_attempts(self, text: str) -> Iterator[tuple[str, dict[str, Any]]]:
        endpoints = [
            (path, key) for path, key in TOKENIZE_ENDPOINTS if self._tokenize_path in (None, path)
        ]
        root = server_root(self._where())
        for path, key in endpoints:
            yield path, {"path": root + path, "body": {key: text}}

    def _count(self, text: str) -> int | None:
        for path, call in self._tokenize_attempts(text):
            try:
                reply = self._sync().post(
                    call["path"], cast_to=object, body=call["body"], options={"max_retries": 0}
                )
            except self._sdk.OpenAIError:
                continue
            if (count := token_count(reply)) is not None:
                self._tokenize_path = path
                return count
        return None

    async def _acount(self, text: str) -> int | None:
        for path, call in self._tokenize_attempts(text):
            try:
                reply = await self._async().post(
                    call["path"], cast_to=object, body=call["body"], options={"max_retries": 0}
                )
            except self._sdk.OpenAIError:
                continue
            if (count := token_count(reply)) is not None:
                self._tokenize_path = path
                return count
        return None

    def _counted(self, body: dict[str, Any], completion: Completion, count: Any) -> Completion:
        """``completion`` with usage counted by the server's tokenize endpoint, when it has one.

        Said once: the server sends no usage in streams. A server with no tokenize endpoint
        gets whole requests from now on (their replies carry usage).
        """
        prompt, messages = prompt_text(body)
        prompt_tokens = count(prompt)
        first = not self._told_no_usage
        self._told_no_usage = True
        if prompt_tokens is None:
            self._whole_replies = True
            self._notice(
                f"{self.name} at {self._where()} sends no token usage in streamed replies and "
                "has no tokenize endpoint: replies are no longer streamed, so that every turn "
                "is counted"
            )
            return completion
        if first:
            self._notice(
                f"{self.name} at {self._where()} sends no token usage in streamed replies; "
                f"counting each prompt with its {self._tokenize_path} endpoint instead"
            )
        output = count(completion.text) if completion.text else 0
        usage = Usage(
            prompt_tokens=prompt_tokens + MESSAGE_OVERHEAD_TOKENS * messages + REPLY_OPENING_TOKENS,
            output_tokens=output or 0,
        )
        return replace(completion, usage=usage)

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
            body = error_body(exc.body, exc.message)
            return provider_error(
                body.message,
                status=exc.status_code,
                code=body.code,
                api_key=self._api_key,
                n_ctx=body.n_ctx,
                n_prompt_tokens=body.n_prompt_tokens,
                **where,
            )
        if isinstance(exc, sdk.OpenAIError):
            return ProviderError(redact(str(exc), self._api_key), **where)
        if isinstance(exc, REPLY_ERRORS):
            return MalformedResponseError(
                redact(f"malformed response: {described(exc)}", self._api_key), **where
            )
        return None


def _tool(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name, "parameters": parameters}
    if description:
        function["description"] = description
    return {"type": "function", "function": function}


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
        prompt_tokens=reported_count(getattr(usage, "prompt_tokens", 0)),
        output_tokens=reported_count(getattr(usage, "completion_tokens", 0)),
        cached_tokens=reported_count(cached),
        thinking_tokens=reported_count(getattr(output_details, "reasoning_tokens", 0)),
    )


def _texts_to_count(body: dict[str, Any], completion: Completion) -> list[str]:
    """The texts :meth:`OpenAIProvider._counted` will count (so the async path counts first)."""
    texts = [prompt_text(body)[0]]
    if completion.text:
        texts.append(completion.text)
    return texts


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

    @property
    def empty(self) -> bool:
        """No content, no tool call and no finish reason: the server sent no reply at all."""
        return self.finish_reason is None and not (any(self.text) or self.reasoning or self.calls)

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

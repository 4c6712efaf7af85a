"""The Anthropic Messages API adapter.

Mapping of the generic settings:

* ``max_tokens`` is always sent (the API requires it): the request's ``max_output_tokens``, else
  the adapter's ``default_max_tokens`` (the model's maximum output from :mod:`autocompact.limits`
  when built by the registry).
* ``thinking=False`` (the side query) turns thinking off the way the model takes it, and
  ``True`` turns it on (:mod:`.claude_thinking`): ``{"type": "disabled"}`` and ``{"type":
  "enabled", "budget_tokens": ...}`` (half the cap, at least 1,024, the API's floor; omitted
  when the cap is too small for that) up to 4.5; adaptive thinking from 4.6 on; a model that
  cannot turn thinking off gets the lowest effort and its cap raised by an allowance.
* prompt size = ``input_tokens + cache_creation_input_tokens + cache_read_input_tokens``.
* ``stop_reason``: ``end_turn``/``stop_sequence`` → stop, ``max_tokens`` → length, ``tool_use``
  → tool call, ``refusal`` → content filter, ``pause_turn`` → other, and
  ``model_context_window_exceeded`` raises :class:`ContextOverflowError`, as does a 400
  "prompt is too long" or a 413.

Thinking parts without a signature (written by another provider) cannot be verified by the API
and are left out of the request; signed and redacted thinking is sent back as it came.

Native compaction (the ``compact-2026-09-04`` beta, see :mod:`.anthropic_compaction`): the
adapter is a :class:`~autocompact.providers.base.NativeCompactor`. A history that holds one of
its compaction blocks (an opaque part of the same model family) is sent through the beta
Messages API with the beta header, the block first and unchanged; blocks of another family or
provider go as their summary text.
The ``anthropic`` SDK is imported only when an adapter is built; every SDK exception is
converted in :meth:`AnthropicProvider._convert_error`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from autocompact.content import Message, OpaquePart, ThinkingPart, Usage
from autocompact.convert import from_anthropic_message, to_anthropic_messages
from autocompact.errors import (
    REPLY_ERRORS,
    ContextOverflowError,
    MalformedResponseError,
    MissingDependencyError,
    ProviderError,
    described,
)
from autocompact.providers._common import (
    LazyClients,
    convert_transport_error,
    converting_errors,
    looks_like_overflow,
    merge_extra,
    provider_error,
    redact,
)
from autocompact.providers.anthropic_compaction import (
    COMPACTION_BETA,
    anthropic_family,
    compaction_instructions,
    error_outcome,
    response_outcome,
    supported_by_capabilities,
)
from autocompact.providers.base import (
    ChatRequest,
    Completion,
    FinishReason,
    NativeCompaction,
    NativeOutcome,
    NativeSource,
    StreamDone,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    check_model,
)
from autocompact.providers.claude_thinking import claude_thinking
from autocompact.thresholds import COMPACT_MAX_OUTPUT_TOKENS
from autocompact.usage_check import reported_count

__all__ = ["DEFAULT_MAX_TOKENS", "MIN_THINKING_BUDGET", "AnthropicProvider"]

DEFAULT_MAX_TOKENS = 8192
MIN_THINKING_BUDGET = 1024

_STOP = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "max_tokens": FinishReason.LENGTH,
    "tool_use": FinishReason.TOOL_CALL,
    "refusal": FinishReason.CONTENT_FILTER,
    "pause_turn": FinishReason.OTHER,
}


class AnthropicProvider:
    """A :class:`~autocompact.providers.base.Provider` over the ``anthropic`` SDK.

    Args:
        model: the model name, e.g. ``"claude-sonnet-4-6"``.
        api_key: the API key.
        base_url: another endpoint (a proxy or gateway).
        default_max_tokens: ``max_tokens`` when a request sets no cap.
        http_client: an ``httpx2.Client`` for the SDK (tests inject a mock transport here).
        async_http_client: an ``httpx2.AsyncClient`` for the async methods.
        timeout: seconds per request (``None``: the SDK default).
        max_retries: SDK retries on connection errors, 429, 529 and 5xx.
        native_compaction: whether the model takes the compaction beta; ``None`` (default)
            decides from the Models API's capability data, else from the first clean 400, and
            remembers it.

    Raises:
        MissingDependencyError: the ``anthropic`` package is not installed.
    """

    name = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        default_max_tokens: int = DEFAULT_MAX_TOKENS,
        http_client: Any = None,
        async_http_client: Any = None,
        timeout: float | None = None,
        max_retries: int = 2,
        native_compaction: bool | None = None,
    ) -> None:
        try:
            import anthropic
        except ImportError as exc:
            raise MissingDependencyError("anthropic", "anthropic") from exc
        self._sdk: Any = anthropic
        self.model = check_model(model)
        self.default_max_tokens = default_max_tokens
        self._api_key = api_key
        self._clients = LazyClients(
            self._sdk.Anthropic,
            self._sdk.AsyncAnthropic,
            api_key=api_key,
            max_retries=max_retries,
            base_url=base_url,
            timeout=timeout,
            http_client=http_client,
            async_http_client=async_http_client,
        )
        self.family = anthropic_family(model)
        self._timeout = timeout
        self._native_supported = native_compaction
        self._capabilities_checked = native_compaction is not None

    def _sync(self) -> Any:
        return self._clients.sync()

    def _async(self) -> Any:
        return self._clients.async_()

    # -- request building --------------------------------------------------------------------

    def build_body(self, request: ChatRequest) -> dict[str, Any]:
        """The keyword arguments of ``messages.create`` for a request (unset values omitted)."""
        max_tokens = request.max_output_tokens or self.default_max_tokens
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens,
            "messages": to_anthropic_messages(
                _sendable(request.messages), opaque_family=self.family
            ),
        }
        if self._carries_block(request.messages):
            # Every request after a compaction sends its block, and with it the beta header.
            body["betas"] = [COMPACTION_BETA]
        if request.system_instruction is not None:
            body["system"] = request.system_instruction
        if request.tools:
            body["tools"] = [
                {
                    "name": t.name,
                    **({"description": t.description} if t.description else {}),
                    "input_schema": dict(t.parameters),
                }
                for t in request.tools
            ]
        profile = claude_thinking(self.model)
        if request.thinking is False:
            if profile.off is not None:
                body["thinking"] = dict(profile.off)
            if profile.off_effort:
                body["output_config"] = {"effort": "low"}
            body["max_tokens"] = max_tokens + profile.cap_extra
        elif request.thinking is True and profile.on is not None:
            body["thinking"] = dict(profile.on)
        elif request.thinking is True:
            budget = max(MIN_THINKING_BUDGET, max_tokens // 2)
            if budget < max_tokens:
                body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        extra: dict[str, Any] = {}
        merge_extra(extra, request.extra, self.name)
        if extra:
            body["extra_body"] = extra
        return body

    # -- the Provider protocol ---------------------------------------------------------------

    def complete(self, request: ChatRequest) -> Completion:
        """Send a request and wait for the whole reply.

        The request is streamed under the hood: the SDK refuses non-streaming requests whose
        ``max_tokens`` may take over ten minutes (8,192 tokens on Opus 4.0/4.1, ~21K elsewhere),
        and a 20K-token summary is such a request.
        """
        body = self.build_body(request)
        with self._errors(), _api(self._sync(), body).stream(**body) as events:
            events.until_done()
            return self._parse(events.get_final_message())

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """Send a request and yield text/thinking deltas, then one :class:`StreamDone`."""
        body = self.build_body(request)
        with self._errors(), _api(self._sync(), body).stream(**body) as events:
            for event in events:
                delta = _delta(event)
                if delta is not None:
                    yield delta
            completion = self._parse(events.get_final_message())
        yield StreamDone(completion=completion)

    async def acomplete(self, request: ChatRequest) -> Completion:
        """Async :meth:`complete` (streamed under the hood as well)."""
        body = self.build_body(request)
        with self._errors():
            async with _api(self._async(), body).stream(**body) as events:
                await events.until_done()
                return self._parse(await events.get_final_message())

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Async :meth:`stream`."""
        body = self.build_body(request)
        with self._errors():
            async with _api(self._async(), body).stream(**body) as events:
                async for event in events:
                    delta = _delta(event)
                    if delta is not None:
                        yield delta
                completion = self._parse(await events.get_final_message())
        yield StreamDone(completion=completion)

    # -- native compaction (a summary backend) -------------------------------------------------

    def _carries_block(self, messages: Sequence[Message]) -> bool:
        return any(
            isinstance(p, OpaquePart) and p.readable_by(self.name, self.family)
            for m in messages
            for p in m.parts
        )

    def native_compaction_supported(self) -> bool | None:
        """Whether this model takes the compaction beta (``None``: not known yet)."""
        return self._native_supported

    def compaction_body(self, source: NativeSource) -> dict[str, Any]:
        """The keyword arguments of ``beta.messages.create`` for a compaction request."""
        config: dict[str, Any] = {"type": "summarize"}
        instructions = compaction_instructions(source.instructions)
        if instructions is not None:
            config["instructions"] = instructions
        body = self.build_body(
            ChatRequest(
                messages=source.messages,
                system_instruction=source.system_instruction,
                tools=source.tools,
                max_output_tokens=COMPACT_MAX_OUTPUT_TOKENS,
            )
        )
        body["compaction"] = config
        body["betas"] = [COMPACTION_BETA]
        # Not streamed, so the block is read as the exact JSON the API sent; an explicit
        # timeout is what the SDK asks for on long non-streaming requests.
        body["timeout"] = self._timeout if self._timeout is not None else _COMPACTION_TIMEOUT
        return body

    def _learn(self, result: NativeCompaction) -> NativeCompaction:
        if result.outcome is NativeOutcome.UNSUPPORTED:
            self._native_supported = False
        elif result.outcome is NativeOutcome.COMPACTED:
            self._native_supported = True
        return result

    def _native_error(self, exc: Exception) -> NativeCompaction | None:
        if not isinstance(exc, self._sdk.APIStatusError):
            return None
        message = str(exc.api_message or _body_text(exc.body) or exc.message)
        code = exc.error_code
        overflow = looks_like_overflow(exc.status_code, message, code or exc.type)
        return error_outcome(
            exc.status_code, code, redact(message, self._api_key), overflow=overflow
        )

    def compact_natively(self, source: NativeSource) -> NativeCompaction:
        """Ask the API to compact ``source.messages`` (one non-streaming beta request)."""
        if not self._capabilities_checked:
            self._capabilities_checked = True
            try:
                info = self._sync().beta.models.retrieve(self.model)
            except (self._sdk.AnthropicError, *REPLY_ERRORS):  # (a check that says nothing)
                info = None
            self._native_supported = supported_by_capabilities(info)
        if self._native_supported is False:
            return NativeCompaction(outcome=NativeOutcome.UNSUPPORTED, detail="not supported")
        body = self.compaction_body(source)  # (a ContentError here is the request's)
        with self._errors():
            try:
                raw = self._sync().beta.messages.with_raw_response.create(**body)
            except self._sdk.APIStatusError as exc:
                outcome = self._native_error(exc)
                if outcome is None:
                    raise
                return self._learn(outcome)
            return self._learn(response_outcome(_raw_json(raw), family=self.family))

    async def acompact_natively(self, source: NativeSource) -> NativeCompaction:
        """Async :meth:`compact_natively`."""
        if not self._capabilities_checked:
            self._capabilities_checked = True
            try:
                info = await self._async().beta.models.retrieve(self.model)
            except (self._sdk.AnthropicError, *REPLY_ERRORS):  # (a check that says nothing)
                info = None
            self._native_supported = supported_by_capabilities(info)
        if self._native_supported is False:
            return NativeCompaction(outcome=NativeOutcome.UNSUPPORTED, detail="not supported")
        body = self.compaction_body(source)  # (a ContentError here is the request's)
        with self._errors():
            try:
                raw = await self._async().beta.messages.with_raw_response.create(**body)
            except self._sdk.APIStatusError as exc:
                outcome = self._native_error(exc)
                if outcome is None:
                    raise
                return self._learn(outcome)
            return self._learn(response_outcome(_raw_json(raw), family=self.family))

    # -- responses ---------------------------------------------------------------------------

    def _parse(self, response: Any) -> Completion:
        content = getattr(response, "content", None)
        if content is None:
            raise MalformedResponseError(
                "the response has no content", provider=self.name, model=self.model, status=200
            )
        stop = getattr(response, "stop_reason", None)
        if stop == "model_context_window_exceeded":
            raise ContextOverflowError(
                "the model stopped because the context window is full "
                "(stop_reason model_context_window_exceeded)",
                provider=self.name,
                model=self.model,
            )
        blocks = [block.model_dump(exclude_none=True) for block in content]
        message = from_anthropic_message({"role": "assistant", "content": blocks})
        return Completion(
            message=message,
            usage=_usage(getattr(response, "usage", None)),
            finish_reason=None if stop is None else _STOP.get(stop, FinishReason.OTHER),
            raw_finish_reason=stop,
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
            message = exc.api_message or _body_text(exc.body) or exc.message
            return provider_error(
                str(message),
                status=exc.status_code,
                code=exc.error_code or exc.type,
                api_key=self._api_key,
                **where,
            )
        if isinstance(exc, sdk.APIError) and exc.body is not None:
            # An error event inside a stream: no HTTP status, the body names the error type.
            body = exc.body if isinstance(exc.body, dict) else {}
            inner = body.get("error", body) if isinstance(body, dict) else {}
            kind = inner.get("type") if isinstance(inner, dict) else None
            status = 529 if kind == "overloaded_error" else None
            return provider_error(
                str(inner.get("message", exc.message) if isinstance(inner, dict) else exc.message),
                status=status,
                code=kind,
                api_key=self._api_key,
                **where,
            )
        if isinstance(exc, sdk.AnthropicError):
            return ProviderError(redact(str(exc), self._api_key), **where)
        if isinstance(exc, REPLY_ERRORS):
            return MalformedResponseError(
                redact(f"malformed response: {described(exc)}", self._api_key), **where
            )
        return None


_COMPACTION_TIMEOUT = 600.0
# The signature prefix of OpenAI Responses reasoning items (providers/openai_responses.py).
_FOREIGN_SIGNATURE = "openai-responses:"


def _api(client: Any, body: Mapping[str, Any]) -> Any:
    """The Messages API, or its beta surface when the request names a beta."""
    return client.beta.messages if "betas" in body else client.messages


def _raw_json(raw: Any) -> Mapping[str, Any]:
    data = raw.http_response.json()
    if not isinstance(data, Mapping):
        raise MalformedResponseError("the compaction response is not a JSON object", status=200)
    return data


def _sendable(history: Sequence[Message]) -> list[Message]:
    """The history without thinking the API cannot verify: unsigned, or signed by another API
    (an OpenAI Responses reasoning item)."""
    out = []
    for message in history:
        parts = tuple(
            p
            for p in message.parts
            if not (
                isinstance(p, ThinkingPart)
                and not p.redacted
                and (p.signature is None or p.signature.startswith(_FOREIGN_SIGNATURE))
            )
        )
        if parts != message.parts:
            message = Message(role=message.role, parts=parts)
        out.append(message)
    return out


def _delta(event: Any) -> StreamEvent | None:
    kind = getattr(event, "type", None)
    if kind == "text" and event.text:
        return TextDelta(text=event.text)
    if kind == "thinking" and event.thinking:
        return ThinkingDelta(text=event.thinking)
    return None


def _body_text(body: object) -> str | None:
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    if isinstance(body, str) and body:
        return body[:500]
    return None


def _usage(usage: Any) -> Usage | None:
    if usage is None:
        return None
    fresh = reported_count(getattr(usage, "input_tokens", 0))
    created = reported_count(getattr(usage, "cache_creation_input_tokens", 0))
    read = reported_count(getattr(usage, "cache_read_input_tokens", 0))
    details = getattr(usage, "output_tokens_details", None)
    return Usage(
        prompt_tokens=fresh + created + read,
        output_tokens=reported_count(getattr(usage, "output_tokens", 0)),
        cached_tokens=read,
        thinking_tokens=reported_count(getattr(details, "thinking_tokens", 0)),
    )

"""The OpenAI Responses API adapter (``openai-responses:`` provider), with native compaction.

Checked against the types inside the ``openai`` wheel (3.57):

* requests go to ``responses.create`` stateless: ``store: false`` and
  ``include: ["reasoning.encrypted_content"]``, the whole conversation in ``input`` every time
  (no ``previous_response_id``); encrypted reasoning items come back and are sent back, so a
  reasoning model keeps its reasoning across tool calls without the server storing anything;
* the output cap is ``max_output_tokens``; thinking off (the side query) sends
  ``reasoning: {"effort": <lowest the model accepts>}`` (:func:`lowest_reasoning_effort`);
  thinking on asks for a reasoning summary;
* ``status: "incomplete"`` with ``incomplete_details.reason`` ``max_output_tokens`` is the
  length stop (a truncated summary), ``content_filter`` the filter; a ``failed`` response or a
  stream ``error`` event raises; a 400 ``context_length_exceeded`` raises
  :class:`~autocompact.errors.ContextOverflowError`;
* usage: ``input_tokens`` (with ``input_tokens_details.cached_tokens``), ``output_tokens``
  (with ``output_tokens_details.reasoning_tokens``);
* native compaction is ``responses.compact``: its ``output`` (the user messages followed by one
  encrypted ``compaction`` item) is stored raw as one opaque part and sent back as input items.

Reasoning items travel in the history as thinking parts whose signature carries the item's id
and encrypted content (:data:`REASONING_SIGNATURE_PREFIX`); thinking from other providers is
left out. The ``openai`` SDK is imported only when an adapter is built; every SDK exception is
converted in :meth:`OpenAIResponsesProvider._convert_error`.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from autocompact.content import (
    OpaquePart,
    Usage,
)
from autocompact.convert.openai_responses import (
    PROVIDER_NAME,
    REASONING_SIGNATURE_PREFIX,
    dict_usage,
    output_message,
    response_usage,
    to_responses_input,
)
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
    looks_like_overflow,
    merge_extra,
    provider_error,
    redact,
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
from autocompact.providers.openai import lowest_reasoning_effort

__all__ = [
    "PROVIDER_NAME",
    "REASONING_SIGNATURE_PREFIX",
    "OpenAIResponsesProvider",
    "openai_family",
    "to_responses_input",
]

_DATE = re.compile(r"-(\d{4}-\d{2}-\d{2}|latest)$")
_FAILED_STATUS = {"rate_limit_exceeded": 429, "server_error": 500}


def openai_family(model: str) -> str:
    """The family an OpenAI compaction item belongs to: the model without its date."""
    return _DATE.sub("", model.strip().lower())


class OpenAIResponsesProvider:
    """A :class:`~autocompact.providers.base.Provider` over the Responses API of the ``openai``
    SDK, and a :class:`~autocompact.providers.base.NativeCompactor` through
    ``responses.compact``.

    Args:
        model: the model name, e.g. ``"gpt-5.4"``.
        api_key: the API key.
        base_url: another endpoint.
        http_client: an ``httpx2.Client`` for the SDK (tests inject a mock transport here).
        async_http_client: an ``httpx2.AsyncClient`` for the async methods.
        timeout: seconds per request (``None``: the SDK default).
        max_retries: SDK retries on connection errors, 429 and 5xx.
        native_compaction: whether ``responses.compact`` works for this model; ``None``
            (default) tries it and remembers a clean 400 (the SDK has no capability data).

    Raises:
        MissingDependencyError: the ``openai`` package is not installed.
    """

    name = PROVIDER_NAME

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: Any = None,
        async_http_client: Any = None,
        timeout: float | None = None,
        max_retries: int = 2,
        native_compaction: bool | None = None,
    ) -> None:
        try:
            import openai
        except ImportError as exc:
            raise MissingDependencyError("openai", "openai") from exc
        self._sdk: Any = openai
        self.model = check_model(model)
        self.family = openai_family(model)
        self.lowest_effort = lowest_reasoning_effort(model)
        self._api_key = api_key
        self._clients = LazyClients(
            self._sdk.OpenAI,
            self._sdk.AsyncOpenAI,
            api_key=api_key,
            max_retries=max_retries,
            base_url=base_url,
            timeout=timeout,
            http_client=http_client,
            async_http_client=async_http_client,
        )
        self._native_supported = native_compaction

    def _sync(self) -> Any:
        return self._clients.sync()

    def _async(self) -> Any:
        return self._clients.async_()

    # -- request building --------------------------------------------------------------------

    def build_body(self, request: ChatRequest, *, stream: bool = False) -> dict[str, Any]:
        """The keyword arguments of ``responses.create`` for a request (unset values omitted)."""
        body: dict[str, Any] = {
            "model": self.model,
            "input": to_responses_input(request.messages, family=self.family),
            "store": False,
            "include": ["reasoning.encrypted_content"],
        }
        if request.system_instruction is not None:
            body["instructions"] = request.system_instruction
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    **({"description": t.description} if t.description else {}),
                    "parameters": dict(t.parameters),
                    "strict": False,
                }
                for t in request.tools
            ]
        if request.max_output_tokens is not None:
            body["max_output_tokens"] = request.max_output_tokens
        if request.thinking is False and self.lowest_effort is not None:
            body["reasoning"] = {"effort": self.lowest_effort}
        elif request.thinking is True and self.lowest_effort is not None:
            body["reasoning"] = {"summary": "auto"}
        if self.lowest_effort is None:
            # Not a reasoning model: encrypted reasoning cannot be included.
            body.pop("include")
        if stream:
            body["stream"] = True
        extra: dict[str, Any] = {}
        merge_extra(extra, request.extra, "openai", self.name)
        if extra:
            body["extra_body"] = extra
        return body

    # -- the Provider protocol ---------------------------------------------------------------

    def complete(self, request: ChatRequest) -> Completion:
        """Send a request and wait for the whole reply."""
        body = self.build_body(request)  # (a ContentError here is the request's, not the reply's)
        with self._errors():
            return self._parse(self._sync().responses.create(**body))

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """Send a request and yield text/reasoning deltas, then one :class:`StreamDone`."""
        final: Any = None
        body = self.build_body(request, stream=True)
        with self._errors():
            events = self._sync().responses.create(**body)
            with events:
                for event in events:
                    delta, done = self._event(event)
                    if delta is not None:
                        yield delta
                    final = done or final
            completion = self._parse(final)
        yield StreamDone(completion=completion)

    async def acomplete(self, request: ChatRequest) -> Completion:
        """Async :meth:`complete`."""
        body = self.build_body(request)
        with self._errors():
            response = await self._async().responses.create(**body)
            return self._parse(response)

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Async :meth:`stream`."""
        final: Any = None
        body = self.build_body(request, stream=True)
        with self._errors():
            events = await self._async().responses.create(**body)
            async with events:
                async for event in events:
                    delta, done = self._event(event)
                    if delta is not None:
                        yield delta
                    final = done or final
            completion = self._parse(final)
        yield StreamDone(completion=completion)

    # -- responses ---------------------------------------------------------------------------

    def _event(self, event: Any) -> tuple[StreamEvent | None, Any]:
        kind = getattr(event, "type", None)
        if kind == "response.output_text.delta" and event.delta:
            return TextDelta(text=event.delta), None
        if kind == "response.reasoning_summary_text.delta" and event.delta:
            return ThinkingDelta(text=event.delta), None
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            return None, event.response
        if kind == "error":
            raise provider_error(
                str(event.message),
                provider=self.name,
                model=self.model,
                status=None,
                code=event.code,
                api_key=self._api_key,
            )
        return None, None

    def _parse(self, response: Any) -> Completion:
        where: dict[str, Any] = {"provider": self.name, "model": self.model}
        if response is None:
            raise MalformedResponseError("the stream ended without a response", **where)
        status = getattr(response, "status", None)
        error = getattr(response, "error", None)
        if status == "failed" or error is not None:
            code = getattr(error, "code", None)
            message = getattr(error, "message", None) or "the response failed"
            raise provider_error(
                str(message),
                status=_FAILED_STATUS.get(str(code)),
                code=code,
                api_key=self._api_key,
                **where,
            )
        message_out, refused = output_message(getattr(response, "output", None) or ())
        details = getattr(response, "incomplete_details", None)
        reason = getattr(details, "reason", None) if status == "incomplete" else None
        if reason == "max_output_tokens":
            finish, raw = FinishReason.LENGTH, reason
        elif reason == "content_filter" or refused:
            finish, raw = FinishReason.CONTENT_FILTER, reason or "refusal"
        elif status == "incomplete":
            finish, raw = FinishReason.OTHER, reason or "incomplete"
        elif message_out.function_calls:
            finish, raw = FinishReason.TOOL_CALL, status
        else:
            finish, raw = FinishReason.STOP, status
        return Completion(
            message=message_out,
            usage=response_usage(getattr(response, "usage", None)),
            finish_reason=finish,
            raw_finish_reason=raw,
            model=getattr(response, "model", None) or self.model,
        )

    # -- native compaction (a summary backend) -------------------------------------------------

    def native_compaction_supported(self) -> bool | None:
        """Whether ``responses.compact`` works for this model (``None``: not known yet)."""
        return self._native_supported

    def compaction_body(self, source: NativeSource) -> dict[str, Any]:
        """The keyword arguments of ``responses.compact`` for a range."""
        body: dict[str, Any] = {
            "model": self.model,
            "input": to_responses_input(source.messages, family=self.family),
        }
        instructions = "\n\n".join(
            text for text in (source.system_instruction, source.instructions) if text
        )
        if instructions:
            body["instructions"] = instructions
        return body

    def _compacted(self, raw: Any) -> NativeCompaction:
        data = raw.http_response.json()
        output = data.get("output") if isinstance(data, Mapping) else None
        usage = dict_usage(data.get("usage")) if isinstance(data, Mapping) else None
        items = [i for i in output if isinstance(i, Mapping)] if isinstance(output, list) else []
        if not any(i.get("type") == "compaction" and i.get("encrypted_content") for i in items):
            self._native_supported = True
            return NativeCompaction(
                outcome=NativeOutcome.EMPTY,
                usage=usage,
                detail="the compacted output holds no compaction item",
            )
        self._native_supported = True
        part = OpaquePart(
            provider=self.name,
            family=self.family,
            payload={"items": [dict(i) for i in items]},
            tokens=_items_tokens(items, usage),
        )
        return NativeCompaction(
            outcome=NativeOutcome.COMPACTED, part=part, usage=usage, raw_stop="compaction"
        )

    def _native_error(self, exc: Exception) -> NativeCompaction | None:
        if not isinstance(exc, self._sdk.APIStatusError):
            return None
        message, code = _error_body(exc.body, exc.message)
        message = redact(message, self._api_key)
        status = exc.status_code
        if looks_like_overflow(status, message, code):
            return NativeCompaction(outcome=NativeOutcome.TOO_LARGE, raw_stop=code, detail=message)
        if status in (400, 404) and re.search(r"compact|not supported", message, re.IGNORECASE):
            self._native_supported = False
            return NativeCompaction(
                outcome=NativeOutcome.UNSUPPORTED, raw_stop=code, detail=message
            )
        if status >= 500:
            return NativeCompaction(
                outcome=NativeOutcome.UNAVAILABLE, raw_stop=code, detail=message
            )
        return None

    def compact_natively(self, source: NativeSource) -> NativeCompaction:
        """Ask ``responses.compact`` to compact ``source.messages``."""
        if self._native_supported is False:
            return NativeCompaction(outcome=NativeOutcome.UNSUPPORTED, detail="not supported")
        body = self.compaction_body(source)  # (a ContentError here is the request's)
        with self._errors():
            try:
                raw = self._sync().responses.with_raw_response.compact(**body)
            except self._sdk.APIStatusError as exc:
                outcome = self._native_error(exc)
                if outcome is None:
                    raise
                return outcome
            return self._compacted(raw)

    async def acompact_natively(self, source: NativeSource) -> NativeCompaction:
        """Async :meth:`compact_natively`."""
        if self._native_supported is False:
            return NativeCompaction(outcome=NativeOutcome.UNSUPPORTED, detail="not supported")
        body = self.compaction_body(source)  # (a ContentError here is the request's)
        with self._errors():
            try:
                raw = await self._async().responses.with_raw_response.compact(**body)
            except self._sdk.APIStatusError as exc:
                outcome = self._native_error(exc)
                if outcome is None:
                    raise
                return outcome
            return self._compacted(raw)

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
        if isinstance(exc, REPLY_ERRORS):
            return MalformedResponseError(
                redact(f"malformed response: {described(exc)}", self._api_key), **where
            )
        return None


def _items_tokens(items: Sequence[Mapping[str, Any]], usage: Usage | None) -> int:
    """The compacted items' size: the summary's output tokens plus the kept user messages."""
    kept = sum(
        len(json.dumps(item.get("content", ""), ensure_ascii=False))
        for item in items
        if item.get("type") != "compaction"
    )
    summary = usage.output_tokens if usage is not None and usage.output_tokens > 0 else 0
    if not summary:
        encrypted = sum(len(str(i.get("encrypted_content", ""))) for i in items)
        summary = encrypted // 4
    return summary + (kept + 3) // 4


def _error_body(body: object, fallback: str) -> tuple[str, str | None]:
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            message = inner.get("message") or fallback
            code = inner.get("code") or inner.get("type")
            return str(message), (str(code) if code is not None else None)
    if isinstance(body, str) and body:
        return body[:500], None
    return fallback, None

"""The Gemini API adapter (``google-genai`` SDK).

Mapping of the generic settings:

* the cap is ``max_output_tokens`` in the generation config; on Gemini thinking tokens are
  drawn from the same allowance as the answer;
* ``thinking=False`` (the side query) depends on the model family (:func:`gemini_thinking`):

  ========================  ===========================================  ==================
  family                    thinking config sent                         cap raised by
  ========================  ===========================================  ==================
  2.5 Flash / Flash-Lite    ``thinking_budget: 0`` (off)                 0
  2.5 Pro                   ``thinking_budget: 128`` (its floor; it      128
                            cannot turn thinking off)
  3.x Pro                   ``thinking_level: LOW`` (cannot turn off;    8,192 (allowance)
                            budget and level may not be combined)
  3.0-3.6 Flash, Flash-Lite ``thinking_level: MINIMAL``                  2,048 (allowance)
  Flash from 3.7 on,        ``thinking_level: LOW`` (MINIMAL is refused  8,192 (allowance)
  Gemini 4, ``*-latest``    with a 400 on 3.7/3.8 Flash and Gemini 4)
  1.5 / 2.0 / Gemma         nothing (no thinking)                        0
  ========================  ===========================================  ==================

  always with ``include_thoughts: false``; raising the cap keeps the whole 20K for the summary.
  A thinking *level* is not a hard budget, so for Gemini 3 the extra is an allowance; a reply
  that still runs out ends with ``MAX_TOKENS`` and the engine refuses it.
* ``finish_reason`` ``MAX_TOKENS`` → length, ``STOP`` → stop (tool call when the reply calls a
  function), the safety/recitation/blocklist family → content filter; a prompt blocked with no
  candidates → content filter with an empty reply; a response with neither candidates nor a
  block reason (a 200 whose body is an error object) → ``MalformedResponseError``.
* prompt size = ``usage_metadata.prompt_token_count``; output = candidates + thoughts.

Thought parts are not sent back (their signatures are: a signature rides on the next part as
``thought_signature``). Function responses that are not objects are wrapped as
``{"output": ...}`` (``{"error": ...}`` when ``is_error``), as the API wants an object.
An image or document a tool returned goes in the function response's ``parts`` (inline data,
or a file URI) on Gemini 3 and later, which read them (multimodal function responses); for an
earlier model such a result is a ``ContentError`` naming the call, as it would reach the
model as base64 text.
The SDK is imported only when an adapter is built; every SDK exception is converted in
:meth:`GeminiProvider._convert_error`.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AbstractContextManager, closing, suppress
from dataclasses import dataclass
from typing import Any

from autocompact.content import (
    DocumentPart,
    FunctionCallPart,
    FunctionResponsePart,
    ImagePart,
    Message,
    OpaquePart,
    Part,
    TextPart,
    ThinkingPart,
    Usage,
)
from autocompact.convert import media_url
from autocompact.errors import (
    REPLY_ERRORS,
    AuthenticationError,
    ContentError,
    MalformedResponseError,
    MissingDependencyError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    described,
)
from autocompact.providers._common import (
    converting_errors,
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
    check_model,
)
from autocompact.toolmedia import is_media_block, media_blocks, no_tool_media, without_media
from autocompact.usage_check import reported_count

__all__ = ["GeminiProvider", "GeminiThinking", "gemini_thinking"]

_FILTERED = {
    "SAFETY",
    "RECITATION",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
    "LANGUAGE",
}


@dataclass(frozen=True, kw_only=True)
class GeminiThinking:
    """How a Gemini model turns thinking off (or as far down as it goes).

    Attributes:
        budget: ``thinking_budget`` to send, or ``None``.
        level: ``thinking_level`` to send (Gemini 3), or ``None``.
        cap_extra: tokens added to the side query's cap for the thinking that cannot be avoided.
        supported: whether the model thinks at all (``False``: send no thinking config).
    """

    budget: int | None = None
    level: str | None = None
    cap_extra: int = 0
    supported: bool = True

    @property
    def can_disable(self) -> bool:
        """Whether thinking turns fully off."""
        return self.budget == 0 or not self.supported


def gemini_thinking(model: str) -> GeminiThinking:
    """The lowest thinking setting a Gemini model accepts (see the module's table)."""
    name = model.lower().rsplit("/", 1)[-1]
    if name.startswith(("gemini-1.", "gemini-2.0", "gemma")):
        return GeminiThinking(supported=False)
    if name.startswith("gemini-2.5-pro"):
        return GeminiThinking(budget=128, cap_extra=128)
    if name.startswith(("gemini-flash-latest", "gemini-pro-latest")):
        return GeminiThinking(level="LOW", cap_extra=8192)
    version = _version(name)
    if version is not None and version >= (3, 0):
        if "-flash" in name and version < (3, 7):
            return GeminiThinking(level="MINIMAL", cap_extra=2048)
        # Pro, Flash from 3.7 on, Gemini 4 and families not known yet: MINIMAL is refused
        # with a 400 where it is not in the model's levels; LOW is in every one's.
        return GeminiThinking(level="LOW", cap_extra=8192)
    return GeminiThinking(budget=0)


def _version(name: str) -> tuple[int, int] | None:
    """``(major, minor)`` of a ``gemini-X[.Y]-…`` name, or ``None``."""
    found = re.match(r"gemini-(\d+)(?:\.(\d+))?(?:-|$)", name)
    if found is None:
        return None
    return int(found.group(1)), int(found.group(2) or 0)


class GeminiProvider:
    """A :class:`~autocompact.providers.base.Provider` over the ``google-genai`` SDK.

    Args:
        model: the model name, e.g. ``"gemini-3.8-flash"``.
        api_key: the Gemini API key.
        base_url: another endpoint.
        http_client: an ``httpx2.Client`` for the SDK (tests inject a mock transport here).
        async_http_client: an ``httpx2.AsyncClient`` for the async methods.
        timeout: seconds per request (``None``: the SDK default).
        max_retries: SDK retries on 408, 429, 5xx and transport errors (0: none).

    Raises:
        MissingDependencyError: the ``google-genai`` package is not installed.
    """

    name = "gemini"

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
    ) -> None:
        try:
            from google import genai
            from google.genai import errors, types
        except ImportError as exc:
            raise MissingDependencyError("google-genai", "gemini") from exc
        self._genai: Any = genai
        self._errors_mod: Any = errors
        self._types: Any = types
        self.model = check_model(model)
        self.thinking_profile = gemini_thinking(model)
        self._api_key = api_key
        options: dict[str, Any] = {}
        if base_url is not None:
            options["base_url"] = base_url
        if timeout is not None:
            options["timeout"] = int(timeout * 1000)
        if http_client is not None:
            options["httpx_client"] = http_client
        if async_http_client is not None:
            options["httpx_async_client"] = async_http_client
        if max_retries > 0:
            options["retry_options"] = types.HttpRetryOptions(attempts=max_retries + 1)
        self._client: Any = genai.Client(
            vertexai=False, api_key=api_key, http_options=types.HttpOptions(**options)
        )

    # -- request building --------------------------------------------------------------------

    def build_config(self, request: ChatRequest) -> dict[str, Any]:
        """The generation config for a request, as a dict (unset values omitted)."""
        config: dict[str, Any] = {}
        if request.system_instruction is not None:
            config["system_instruction"] = request.system_instruction
        if request.tools:
            config["tools"] = [
                {
                    "function_declarations": [
                        {
                            "name": t.name,
                            **({"description": t.description} if t.description else {}),
                            "parameters_json_schema": dict(t.parameters),
                        }
                        for t in request.tools
                    ]
                }
            ]
        cap = request.max_output_tokens
        profile = self.thinking_profile
        if request.thinking is False and profile.supported:
            thinking: dict[str, Any] = {"include_thoughts": False}
            if profile.level is not None:
                thinking["thinking_level"] = profile.level
            else:
                thinking["thinking_budget"] = profile.budget
            config["thinking_config"] = thinking
            if cap is not None:
                cap += profile.cap_extra
        elif request.thinking is True and profile.supported:
            config["thinking_config"] = {"include_thoughts": True}
        if cap is not None:
            config["max_output_tokens"] = cap
        merge_extra(config, request.extra, self.name)
        return config

    def build_contents(self, history: Sequence[Message]) -> list[dict[str, Any]]:
        """The history as Gemini ``contents`` (roles ``user`` / ``model``)."""
        media = reads_tool_media(self.model)
        return [
            {"role": m.role, "parts": _parts_out(m.parts, index, tool_media=media)}
            for index, m in enumerate(history)
        ]

    def _call_args(self, request: ChatRequest) -> dict[str, Any]:
        return {
            "model": self.model,
            "contents": self.build_contents(request.messages),
            "config": self.build_config(request),
        }

    # -- the Provider protocol ---------------------------------------------------------------

    def complete(self, request: ChatRequest) -> Completion:
        """Send a request and wait for the whole reply."""
        args = self._call_args(request)  # (a ContentError here is the request's, not the reply's)
        with self._errors():
            response = self._client.models.generate_content(**args)
            acc = _Accumulator()
            list(acc.add(response))
            return acc.finish(self.model)

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """Send a request and yield text/thinking deltas, then one :class:`StreamDone`."""
        acc = _Accumulator()
        args = self._call_args(request)
        with self._errors(), closing(self._client.models.generate_content_stream(**args)) as it:
            for chunk in it:  # closing() ends the HTTP stream when the caller stops early
                yield from acc.add(chunk)
            completion = acc.finish(self.model)
        yield StreamDone(completion=completion)

    async def acomplete(self, request: ChatRequest) -> Completion:
        """Async :meth:`complete`."""
        args = self._call_args(request)
        with self._errors():
            response = await self._client.aio.models.generate_content(**args)
            acc = _Accumulator()
            list(acc.add(response))
            return acc.finish(self.model)

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Async :meth:`stream`."""
        acc = _Accumulator()
        args = self._call_args(request)
        with self._errors():
            chunks = await self._client.aio.models.generate_content_stream(**args)
            async for chunk in chunks:
                for event in acc.add(chunk):
                    yield event
            completion = acc.finish(self.model)
        yield StreamDone(completion=completion)

    # -- errors: the one place SDK exceptions are converted -----------------------------------

    def _errors(self) -> AbstractContextManager[None]:
        return converting_errors(
            provider=self.name, model=self.model, api_key=self._api_key, convert=self._convert_error
        )

    def _convert_error(self, exc: Exception) -> ProviderError | None:
        where: dict[str, Any] = {"provider": self.name, "model": self.model}
        if isinstance(exc, self._errors_mod.APIError):
            message = str(exc.message or exc.details)
            if exc.code == 400 and ("API_KEY_INVALID" in str(exc.details) or "API key" in message):
                # Gemini answers a wrong key with 400 INVALID_ARGUMENT, not 401.
                return AuthenticationError(
                    redact(f"the provider rejected the API key: {message}", self._api_key),
                    status=400,
                    **where,
                )
            return provider_error(
                message, status=exc.code, code=exc.status, api_key=self._api_key, **where
            )
        kind = _transport_failure(exc)
        if kind == "timeout":
            return ProviderTimeoutError("the request timed out", **where)
        if kind == "connection":
            return ProviderConnectionError(
                redact(f"could not reach the server: {exc}", self._api_key), **where
            )
        if isinstance(exc, REPLY_ERRORS):
            return MalformedResponseError(
                redact(f"malformed response: {described(exc)}", self._api_key), **where
            )
        return None


def _transport_failure(exc: Exception) -> str | None:
    """``timeout`` / ``connection`` for httpx or httpx2 transport errors (the SDK lets them out)."""
    for cls in type(exc).__mro__:
        if cls.__module__.split(".")[0] not in ("httpx", "httpx2"):
            continue
        if cls.__name__ == "TimeoutException":
            return "timeout"
        if cls.__name__ == "TransportError":
            return "connection"
    return None


def _b64(data: bytes | None) -> str | None:
    return base64.b64encode(data).decode("ascii") if data else None


def _unb64(data: str, index: int) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ContentError(
            f"message {index}: inline data is not valid base64", index=index
        ) from exc


def reads_tool_media(model: str) -> bool:
    """Whether a Gemini model reads an image or document in a function response (Gemini 3
    and later: multimodal function responses)."""
    return re.match(r"gemini-[3-9]", model.lower().rsplit("/", 1)[-1]) is not None


def _function_response(part: FunctionResponsePart, index: int, media: bool) -> dict[str, Any]:
    """A ``function_response``: its media blocks in ``parts`` when the model reads them."""
    response = part.response
    parts: list[dict[str, Any]] = []
    if media and media_blocks(response):
        parts = [_tool_media_part(b, part, index) for b in response if is_media_block(b)]
        response = without_media(response)
    else:
        no_tool_media(part, index, "this Gemini adapter, for a model before Gemini 3,")
    if not isinstance(response, dict):
        response = {"error" if part.is_error else "output": response}
    out: dict[str, Any] = {"id": part.id, "name": part.name, "response": response}
    if parts:
        out["parts"] = parts
    return out


def _tool_media_part(
    block: dict[str, Any], part: FunctionResponsePart, index: int
) -> dict[str, Any]:
    """One image or document of a tool result as a function response part."""
    url = media_url(block)
    if url is not None and url.startswith("data:") and ";base64," in url:
        inline, data = url[5:].split(";base64,", 1)
        return {"inline_data": {"mime_type": inline, "data": _unb64(data, index)}}
    source = block.get("source")
    mime = source.get("media_type") if isinstance(source, dict) else None
    mime = mime or block.get("mime_type") or block.get("mimeType")
    if url is None or not isinstance(mime, str) or not mime:
        raise ContentError(
            f"message {index}: the result of tool call {part.id!r} ({part.name}) holds a "
            f"{block.get('type')} block that cannot be sent to Gemini (audio, a file known only "
            "by another API's id, or a URL without its media type)",
            index=index,
        )
    return {"file_data": {"file_uri": url, "mime_type": mime}}


def _parts_out(parts: Sequence[Part], index: int, *, tool_media: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    signature: str | None = None
    for part in parts:
        item: dict[str, Any]
        match part:
            case ThinkingPart():
                signature = part.signature or signature
                continue
            case TextPart():
                item = {"text": part.text}
            case OpaquePart():
                # Another provider's block: Gemini gets its text (none: nothing to read).
                stand_in = part.as_text()
                if stand_in is None:
                    continue
                item = {"text": stand_in.text}
            case FunctionCallPart():
                item = {
                    "function_call": {
                        "id": part.id,
                        "name": part.name,
                        "args": dict(part.arguments),
                    }
                }
            case FunctionResponsePart():
                item = {"function_response": _function_response(part, index, tool_media)}
            case ImagePart() | DocumentPart():
                if part.data is not None:
                    item = {
                        "inline_data": {
                            "mime_type": part.media_type,
                            "data": _unb64(part.data, index),
                        }
                    }
                elif part.url is not None:
                    item = {"file_data": {"file_uri": part.url, "mime_type": part.media_type}}
                else:
                    raise ContentError(
                        f"message {index}: a {part.kind} has neither data nor url", index=index
                    )
        if signature is not None:
            # A signature that is not base64 came from another provider: Gemini could not
            # verify it anyway, so it is not sent.
            with suppress(binascii.Error, ValueError):
                item["thought_signature"] = base64.b64decode(signature, validate=True)
            signature = None
        out.append(item)
    return out


class _Accumulator:
    """Builds one completion from one response or from the chunks of a stream."""

    def __init__(self) -> None:
        self.parts: list[Part] = []
        self.finish_reason: str | None = None
        self.blocked: str | None = None
        self.usage: Usage | None = None
        self.model: str | None = None
        self.calls = 0
        self.answered = False  # any chunk held a candidate

    def add(self, response: Any) -> Iterator[StreamEvent]:
        self.model = getattr(response, "model_version", None) or self.model
        meta = getattr(response, "usage_metadata", None)
        if meta is not None:
            self.usage = _usage(meta)
        candidates = getattr(response, "candidates", None)
        if not candidates:
            feedback = getattr(response, "prompt_feedback", None)
            reason = getattr(feedback, "block_reason", None)
            if reason is not None:
                self.blocked = _enum_name(reason)
            return
        self.answered = True
        candidate = candidates[0]
        if candidate.finish_reason is not None:
            self.finish_reason = _enum_name(candidate.finish_reason)
        content = candidate.content
        for part in (getattr(content, "parts", None) or ()) if content is not None else ():
            yield from self._add_part(part)

    def _add_part(self, part: Any) -> Iterator[StreamEvent]:
        signature = _b64(getattr(part, "thought_signature", None))
        if part.thought and part.text is not None:
            self._append(ThinkingPart(text=part.text, signature=signature))
            if part.text:
                yield ThinkingDelta(text=part.text)
            return
        if signature is not None:
            self.parts.append(ThinkingPart(text="", signature=signature))
        if part.text is not None:
            self._append(TextPart(text=part.text))
            if part.text:
                yield TextDelta(text=part.text)
        elif part.function_call is not None:
            call = part.function_call
            self.calls += 1
            self.parts.append(
                FunctionCallPart(
                    id=call.id or f"call_{self.calls}",
                    name=call.name or "",
                    arguments=dict(call.args or {}),
                )
            )
        elif part.inline_data is not None:
            self.parts.append(
                ImagePart(
                    media_type=part.inline_data.mime_type or "image/png",
                    data=_b64(part.inline_data.data) or "",
                )
            )
        else:
            fields = sorted(k for k, v in part.model_dump(exclude_none=True).items())
            raise ContentError(f"the reply has a part this adapter cannot read: {fields}")

    def _append(self, part: TextPart | ThinkingPart) -> None:
        last = self.parts[-1] if self.parts else None
        if isinstance(part, TextPart) and isinstance(last, TextPart):
            self.parts[-1] = TextPart(text=last.text + part.text)
        elif (
            isinstance(part, ThinkingPart)
            and isinstance(last, ThinkingPart)
            and last.text
            and part.signature is None
        ):
            self.parts[-1] = ThinkingPart(text=last.text + part.text, signature=last.signature)
        else:
            self.parts.append(part)

    def finish(self, model: str) -> Completion:
        if not self.answered and self.blocked is None:
            # (a 200 whose body is no reply, an error object for one: not an empty answer)
            raise MalformedResponseError(
                "the response has no candidates and no reason the prompt was blocked",
                provider="gemini",
                model=self.model or model,
                status=200,
            )
        raw = self.finish_reason or self.blocked
        if self.blocked is not None and self.finish_reason is None:
            reason: FinishReason | None = FinishReason.CONTENT_FILTER
        elif raw is None:
            reason = None
        elif raw == "STOP":
            reason = FinishReason.TOOL_CALL if self.calls else FinishReason.STOP
        elif raw == "MAX_TOKENS":
            reason = FinishReason.LENGTH
        elif raw in _FILTERED:
            reason = FinishReason.CONTENT_FILTER
        else:
            reason = FinishReason.OTHER
        parts = tuple(self.parts) or (TextPart(text=""),)
        return Completion(
            message=Message(role="model", parts=parts),
            usage=self.usage,
            finish_reason=reason,
            raw_finish_reason=raw,
            model=self.model or model,
        )


def _enum_name(value: Any) -> str:
    return str(getattr(value, "value", value))


def _usage(meta: Any) -> Usage:
    candidates = reported_count(getattr(meta, "candidates_token_count", 0))
    thoughts = reported_count(getattr(meta, "thoughts_token_count", 0))
    return Usage(
        prompt_tokens=reported_count(getattr(meta, "prompt_token_count", 0)),
        output_tokens=candidates + thoughts,
        cached_tokens=reported_count(getattr(meta, "cached_content_token_count", 0)),
        thinking_tokens=thoughts,
    )

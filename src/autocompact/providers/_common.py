"""Helpers shared by the SDK adapters: error classification, key redaction, usage sums.

Nothing here imports an SDK. Each adapter keeps its own single ``_convert_error`` that reads its
SDK's exception fields and calls :func:`provider_error` to pick the project's error class.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from autocompact.errors import (
    AuthenticationError,
    AutocompactError,
    ContentError,
    ContextOverflowError,
    MalformedResponseError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
)

__all__ = [
    "OVERFLOW_PATTERNS",
    "ErrorBody",
    "LazyClients",
    "convert_transport_error",
    "converting_errors",
    "error_body",
    "looks_like_overflow",
    "merge_extra",
    "overflow_sizes",
    "provider_error",
    "redact",
]

# Phrases providers use when a prompt is longer than the window (HTTP 400 / 413 bodies).
OVERFLOW_PATTERNS = re.compile(
    r"prompt is too long"
    r"|context[_ ]length[_ ]exceeded"
    r"|maximum context length"
    r"|context window"
    r"|exceeds? the (?:maximum|max) (?:number of )?tokens"
    r"|input token count .* exceeds"
    r"|input (?:length|is too long|tokens? exceed)"
    r"|range of input length"
    r"|too many tokens"
    r"|reduce the length of the messages"
    r"|request too large"
    # llama.cpp's llama-server: "request (8371 tokens) exceeds the available context size
    # (8192 tokens)", type "exceed_context_size_error"; llama_cpp.server: "Requested tokens
    # (8230) exceed context window of 8192".
    r"|exceeds? the available context size"
    r"|exceed_context_size",
    re.IGNORECASE,
)

# Where servers state their window and the request's size in an overflow message.
_WINDOW_IN_MESSAGE = re.compile(
    r"context (?:size|window|length)(?: of| is)? \(?(\d[\d,]*)(?: tokens)?\)?"
    r"|maximum context length is (\d[\d,]*)",
    re.IGNORECASE,
)
_PROMPT_IN_MESSAGE = (  # most specific first: "requested N tokens" may include the output
    re.compile(r"\((\d[\d,]*) in the messages", re.IGNORECASE),
    re.compile(r"request \((\d[\d,]*) tokens\)|requested tokens \((\d[\d,]*)\)", re.IGNORECASE),
    re.compile(r"(?:you requested|resulted in) (\d[\d,]*) tokens", re.IGNORECASE),
)

_MIN_SECRET = 6


def redact(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` (and of its long prefixes) replaced by ``***``.

    A prefix of 12+ characters counts too, because servers often echo a key truncated.
    """
    if not secret or len(secret) < _MIN_SECRET:
        return text
    out = text.replace(secret, "***")
    if len(secret) >= 16:
        out = re.sub(re.escape(secret[:12]) + r"\S*", "***", out)
    return out


@dataclass(frozen=True, kw_only=True)
class ErrorBody:
    """What an OpenAI-style error body says.

    Attributes:
        message: the human-readable message.
        code: the error's kind: its ``type`` (``exceed_context_size_error``) before its
            ``code`` (``context_length_exceeded``), both when both are words; a numeric
            ``code`` (llama-server puts the HTTP status there) is left out.
        n_ctx: the window the server stated (llama-server's ``n_ctx`` field).
        n_prompt_tokens: the request's size by the server's count (``n_prompt_tokens``).
    """

    message: str
    code: str | None = None
    n_ctx: int | None = None
    n_prompt_tokens: int | None = None


def _int_field(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def error_body(body: object, fallback: str) -> ErrorBody:
    """Read an OpenAI-style error body (``{"error": {...}}`` or the bare object).

    The error's ``type`` comes before its ``code``, and a numeric ``code`` is no kind at all:
    llama-server sends ``{"code": 400, "type": "exceed_context_size_error", ...}``.
    """
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            message = inner.get("message") or fallback
            words = [
                str(value)
                for value in (inner.get("type"), inner.get("code"))
                if isinstance(value, str) and value and not value.isdigit()
            ]
            return ErrorBody(
                message=str(message),
                code=" ".join(words) or None,
                n_ctx=_int_field(inner.get("n_ctx")),
                n_prompt_tokens=_int_field(inner.get("n_prompt_tokens")),
            )
        if isinstance(inner, str):
            return ErrorBody(message=inner)
    if isinstance(body, str) and body:
        return ErrorBody(message=body[:500])
    return ErrorBody(message=fallback)


def overflow_sizes(message: str) -> tuple[int | None, int | None]:
    """The (window, request size) an overflow message states, each ``None`` when it does not."""

    def first(*patterns: re.Pattern[str]) -> int | None:
        for pattern in patterns:
            match = pattern.search(message)
            if match is not None:
                digits = next(g for g in match.groups() if g)
                return int(digits.replace(",", ""))
        return None

    return first(_WINDOW_IN_MESSAGE), first(*_PROMPT_IN_MESSAGE)


def looks_like_overflow(status: int | None, message: str, code: str | None = None) -> bool:
    """Whether an error says the prompt does not fit the model's context window."""
    if isinstance(code, str) and code and OVERFLOW_PATTERNS.search(code):
        return True
    if status == 413:
        return True
    return status in (None, 400, 422) and bool(OVERFLOW_PATTERNS.search(message))


def provider_error(
    message: str,
    *,
    provider: str,
    model: str,
    status: int | None,
    code: str | None = None,
    api_key: str | None = None,
    n_ctx: int | None = None,
    n_prompt_tokens: int | None = None,
) -> ProviderError:
    """The project error for an HTTP failure, chosen by status and message, key redacted.

    An overflow carries the window and the request's size when the server stated them (in
    fields such as llama-server's ``n_ctx``, or in the message).
    """
    text = redact(message, api_key)
    code = code if isinstance(code, str) else None  # (a provider's body may hold anything)
    kwargs: dict[str, Any] = {"provider": provider, "model": model, "status": status}
    if looks_like_overflow(status, text, code):
        window, size = overflow_sizes(text)
        return ContextOverflowError(
            f"the prompt is too long for the model: {text}",
            context_window=n_ctx or window,
            prompt_tokens=n_prompt_tokens or size,
            **kwargs,
        )
    if status in (401, 403):
        return AuthenticationError(
            f"the provider rejected the credentials: {text}; check the API key", **kwargs
        )
    if status == 429 or (code is not None and "overloaded" in code):
        return RateLimitError(f"rate limited or overloaded: {text}", **kwargs)
    if status == 529:
        return RateLimitError(f"the provider is overloaded: {text}", retryable=True, **kwargs)
    if status is not None and status >= 500:
        return ProviderError(f"server error: {text}", retryable=True, **kwargs)
    if status is not None and 200 <= status < 300:
        return MalformedResponseError(f"malformed response: {text}", **kwargs)
    return ProviderError(f"request failed: {text}", **kwargs)


def merge_extra(body: dict[str, Any], extra: Mapping[str, Mapping[str, Any]], *keys: str) -> None:
    """Merge the provider-prefixed extras of a request into ``body`` (later keys win)."""
    for key in keys:
        for name, value in (extra.get(key) or {}).items():
            body[name] = value


@contextmanager
def converting_errors(
    *,
    provider: str,
    model: str,
    api_key: str | None,
    convert: Callable[[Exception], ProviderError | None],
) -> Iterator[None]:
    """The one place an adapter's SDK exceptions become :mod:`autocompact.errors`.

    A reply the content model cannot read is a malformed response; our own errors pass through;
    anything ``convert`` recognizes is raised in its place, chained to the SDK exception unless
    that exception's text carries the API key (then the chain is cut so the key never shows).
    """
    try:
        yield
    except ContentError as exc:
        raise MalformedResponseError(
            f"the reply cannot be read: {exc}", provider=provider, model=model
        ) from exc
    except AutocompactError:
        raise
    except Exception as exc:
        converted = convert(exc)
        if converted is None:
            raise
        leaks = bool(api_key) and str(api_key) in f"{exc} {exc!r}"
        raise converted from (None if leaks else exc)


def convert_transport_error(
    sdk: Any, exc: Exception, *, provider: str, model: str, api_key: str | None
) -> ProviderError | None:
    """The errors the ``openai`` and ``anthropic`` SDKs share (both are generated from the same
    template): timeout, connection failure, and a response that does not fit the schema.

    Returns ``None`` for anything else, which the adapter converts itself.
    """
    where: dict[str, Any] = {"provider": provider, "model": model}
    if isinstance(exc, sdk.APITimeoutError):
        return ProviderTimeoutError("the request timed out", **where)
    if isinstance(exc, sdk.APIConnectionError):
        url = _request_url(exc)
        at = f" at {url}" if url else ""
        return ProviderConnectionError(
            redact(f"could not reach the server{at}: {exc}", api_key), **where
        )
    if isinstance(exc, sdk.APIResponseValidationError):
        return MalformedResponseError(
            "the response does not match the API schema", status=exc.status_code, **where
        )
    return None


def _request_url(exc: Exception) -> str | None:
    """The URL a failed request went to (the SDKs keep the request on connection errors)."""
    try:
        url = exc.request.url  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):
        return None
    return str(url) if url else None


class LazyClients:
    """An adapter's sync and async SDK clients, built on first use from one set of arguments.

    Unset values (base URL, timeout, injected HTTP clients) are left out, so the SDK applies its
    own defaults.
    """

    def __init__(
        self,
        sync_factory: Any,
        async_factory: Any,
        *,
        api_key: str | None,
        max_retries: int,
        base_url: str | None = None,
        timeout: float | None = None,
        http_client: Any = None,
        async_http_client: Any = None,
    ) -> None:
        self._factories = (sync_factory, async_factory)
        self._args: dict[str, Any] = {"api_key": api_key, "max_retries": max_retries}
        if base_url is not None:
            self._args["base_url"] = base_url
        if timeout is not None:
            self._args["timeout"] = timeout
        self._http_clients = (http_client, async_http_client)
        self._built: list[Any] = [None, None]

    def _get(self, which: int) -> Any:
        if self._built[which] is None:
            args = dict(self._args)
            if self._http_clients[which] is not None:
                args["http_client"] = self._http_clients[which]
            self._built[which] = self._factories[which](**args)
        return self._built[which]

    def sync(self) -> Any:
        """The synchronous client."""
        return self._get(0)

    def async_(self) -> Any:
        """The asynchronous client."""
        return self._get(1)

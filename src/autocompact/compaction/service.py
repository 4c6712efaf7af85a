"""``CompressionService``: the compaction flow plus the provider call, sync and async.

The service makes one attempt and reports it; it keeps no state. Failure accounting (the
breaker) belongs to the caller — :class:`autocompact.chat.ChatSession` — which passes
``consecutive_failures`` in :class:`CompressOptions`.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import Any, TypeVar

from autocompact.compaction.native import native_summaries_for
from autocompact.compaction.plan import (
    CompressionFlow,
    CompressionResult,
    CompressOptions,
    Summarizer,
    compress_flow,
)
from autocompact.compaction.sidequery import call_summarizer
from autocompact.content import Message, portable_history
from autocompact.errors import ConfigError, ProviderError
from autocompact.providers.base import ChatRequest, Completion, Provider, check_provider
from autocompact.thresholds import COMPACT_MAX_OUTPUT_TOKENS
from autocompact.validation import check_history

__all__ = [
    "Awaiting",
    "CompressionService",
    "abandon",
    "check_service",
    "drive_flow",
    "drive_flow_async",
    "settle",
]

_T = TypeVar("_T")


class Awaiting:
    """What a flow yields when it needs a coroutine awaited (an asyncio session store's call):
    :func:`drive_flow_async` awaits it and sends the result back (or throws its exception into
    the flow); a synchronous driver cannot, and says so."""

    __slots__ = ("awaitable",)

    def __init__(self, awaitable: Awaitable[Any]) -> None:
        self.awaitable = awaitable


def _no_awaiting(item: object) -> None:
    if isinstance(item, Awaiting):
        close = getattr(item.awaitable, "close", None)
        if close is not None:
            close()  # never awaited: no "coroutine was never awaited" warning
        raise ConfigError(
            "this session's store is an asyncio store (open_async_store): use it with "
            "AsyncChatSession, or give ChatSession a synchronous store (open_store)",
            key="store",
        )


async def settle(item: Awaiting) -> tuple[bool, Any]:
    """``(True, value)`` or ``(False, exception)`` of an awaited call (cancellation propagates),
    for the driver to send or throw into its flow."""
    try:
        return True, await item.awaitable
    except Exception as exc:
        return False, exc


def drive_flow(
    flow: Generator[ChatRequest, Completion, _T],
    provider_for: Callable[[ChatRequest], Provider],
) -> _T:
    """Run a flow to its end, answering each request with ``provider_for(request).complete``.

    Provider errors are thrown into the flow, which decides what they mean (a failed summary, a
    reactive retry); anything it does not handle propagates.
    """
    try:
        request = next(flow)
        while True:
            _no_awaiting(request)
            try:
                completion = provider_for(request).complete(request)
            except ProviderError as exc:
                request = flow.throw(exc)
            except BaseException as exc:
                abandon(flow, exc)
                raise
            else:
                request = flow.send(completion)
    except StopIteration as stop:
        result: _T = stop.value
        return result


async def drive_flow_async(
    flow: Generator[ChatRequest, Completion, _T],
    provider_for: Callable[[ChatRequest], Provider],
) -> _T:
    """Async :func:`drive_flow`: each request goes through ``acomplete``; an :class:`Awaiting`
    (an asyncio store's call) is awaited."""
    try:
        request = next(flow)
        while True:
            while isinstance(request, Awaiting):
                try:
                    ok, value = await settle(request)
                except BaseException as exc:  # cancelled: the flow ends cleanly first
                    abandon(flow, exc)
                    raise
                # An error from the awaited call is raised inside the flow, where it can roll
                # back what it started.
                request = flow.send(value) if ok else flow.throw(value)
            try:
                completion = await provider_for(request).acomplete(request)
            except ProviderError as exc:
                request = flow.throw(exc)
            except BaseException as exc:
                abandon(flow, exc)
                raise
            else:
                request = flow.send(completion)
    except StopIteration as stop:
        result: _T = stop.value
        return result


def abandon(flow: Generator[ChatRequest, Completion, object], exc: BaseException) -> None:
    """Throw into a flow the exception that stops its driver (Ctrl-C, cancellation, a bug).

    The flow sees it where it waits for its reply, so whatever it started can end cleanly (the
    chat session emits ``CompactionCancelled``); the driver then re-raises the original.
    """
    try:
        flow.throw(exc)
    except BaseException:  # it comes back out: the driver re-raises the original
        pass
    else:  # it asked for another request instead: nobody will answer it
        flow.close()


class CompressionService:
    """Compacts a history through a provider's side query, or a local summarizer.

    Args:
        provider: the model that writes the summary; ``None`` to use ``summarizer`` only.
        summarizer: writes a summary without a model; used when ``provider`` is ``None``.
        native_compaction: let a provider with a native summary backend (Anthropic's
            compaction beta, OpenAI's ``responses.compact``) write the summary itself where it
            supports it (on by default; ``False`` always sends our own summary prompt).
    """

    def __init__(
        self,
        provider: Provider | None,
        *,
        summarizer: Summarizer | None = None,
        native_compaction: bool = True,
    ) -> None:
        if provider is None and summarizer is None:
            raise ConfigError("CompressionService needs a provider or a summarizer")
        if provider is not None:
            check_provider(provider)
        if summarizer is not None and not callable(summarizer):
            raise ConfigError(
                f"summarizer must be callable, got {type(summarizer).__name__} {summarizer!r:.60}",
                key="summarizer",
            )
        self.provider = provider
        self.summarizer = summarizer
        self.native_compaction = native_compaction

    def side_provider(self, default: Provider) -> Provider:
        """The provider that answers side queries: this service's model (else ``default``),
        behind its native summary backend when it has one and it is enabled."""
        return native_summaries_for(self.provider or default, enabled=self.native_compaction)

    def _provider_for(self, request: ChatRequest) -> Provider:
        # Only reached with a provider: with a local summarizer the flow sends no request.
        if self.provider is None:
            raise ConfigError("a summary is needed but there is no provider and no summarizer")
        return self.side_provider(self.provider)

    def flow(self, history: Sequence[Message], options: CompressOptions) -> CompressionFlow:
        """The compaction flow for this service's configuration (for custom drivers).

        Raises:
            ContentError: ``history`` is not a sequence of messages (names the item).
        """
        check_history(history, tool_pairs=False)
        local = self.summarizer if self.provider is None else None
        if local is not None:
            local = _reading_text(local)
        return compress_flow(history, options, summarizer=local)

    def compress(self, history: Sequence[Message], options: CompressOptions) -> CompressionResult:
        """One compaction attempt; on failure the returned history is the input, untouched.

        Raises:
            ContentError: ``history`` is not a sequence of messages (names the item).
        """
        result = drive_flow(self.flow(history, options), self._provider_for)
        _log(result)
        return result

    async def acompress(
        self, history: Sequence[Message], options: CompressOptions
    ) -> CompressionResult:
        """Async :meth:`compress`."""
        result = await drive_flow_async(self.flow(history, options), self._provider_for)
        _log(result)
        return result


def _reading_text(summarizer: Summarizer) -> Summarizer:
    """A local summarizer reads text: native blocks reach it as their readable summaries."""

    def summarize(messages: Sequence[Message], max_tokens: int = COMPACT_MAX_OUTPUT_TOKENS) -> str:
        # Passes the cap on only when the wrapped summarizer takes it (as the flow does).
        return call_summarizer(summarizer, portable_history(messages), max_tokens)

    return summarize


def _log(result: CompressionResult) -> None:
    # An INFO record on the "autocompact" logger. Until something imports logging (to configure
    # it, or any library that logs), that logger has no level and no handler of its own and the
    # root's WARNING drops the record: not importing logging for it saves every start the import
    # (logging, traceback, string, textwrap), and what is logged is the same.
    logging = sys.modules.get("logging")
    if logging is None:
        return
    info = result.info
    logging.getLogger("autocompact").info(
        "compaction %s (trigger %s): %d -> %d tokens%s",
        info.status.value,
        info.trigger.value,
        info.original_token_count,
        info.new_token_count,
        f": {info.error}" if info.error else "",
    )


def check_service(value: object, name: str) -> CompressionService:
    """``value`` if it is a :class:`CompressionService`.

    Raises:
        ConfigError: anything else, naming ``name``.
    """
    if not isinstance(value, CompressionService):
        raise ConfigError(
            f"{name} must be a CompressionService(...), got {type(value).__name__} {value!r:.60}",
            key=name,
        )
    return value

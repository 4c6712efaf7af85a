"""Native summary backends: the provider writes the summary, the engine does everything else.

A provider that implements :class:`~autocompact.providers.base.NativeCompactor` (Anthropic's
compaction beta, OpenAI's ``responses.compact``) can answer the summary step of any compaction
(automatic, hard, reactive or manual) with an opaque block instead of our summary prompt. The
ladder, the estimate, the breaker, clearing, the cut and the size guarantee stay the engine's:
:class:`NativeSummaries` only stands in for the side-query provider, and turns each native
outcome into the :class:`~autocompact.providers.base.Completion` the flow already validates:

===================  =============================================  =========================
native outcome       what the flow receives                         compaction status
===================  =============================================  =========================
compacted            a model message holding the opaque part        compressed (method native)
truncated            finish reason ``length``                       output truncated
refused              finish reason ``content_filter``, no text      refused / empty summary
empty                no text                                        empty summary
too large            our own summary request instead                whatever ours comes to
unsupported          our own summary (and never asked again)        whatever ours comes to
unavailable          our own summary this time                      whatever ours comes to
===================  =============================================  =========================

A :class:`~autocompact.errors.ProviderError` from the native request (rate limit, credentials,
timeout) fails the summary like any side-query error. Pure apart from calling the provider.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import replace

from autocompact.compaction.extractive import extractive_summary
from autocompact.content import CONTENT_BLOCK, Message, OpaquePart, portable_history
from autocompact.errors import ContentError
from autocompact.estimation import estimate_text_tokens
from autocompact.providers.base import (
    ChatRequest,
    Completion,
    FinishReason,
    NativeCompaction,
    NativeCompactor,
    NativeOutcome,
    NativeSource,
    Provider,
    StreamEvent,
)

__all__ = ["NativeSummaries", "native_completion", "native_part", "native_summaries_for"]

_FALLBACK = (NativeOutcome.TOO_LARGE, NativeOutcome.UNSUPPORTED, NativeOutcome.UNAVAILABLE)


def native_part(completion: Completion) -> OpaquePart | None:
    """The opaque block a native summary backend answered with, if any (a content block a
    summarizer's reply carries, such as a reasoning item, is none: the summary is its text)."""
    for part in completion.message.parts:
        if isinstance(part, OpaquePart) and part.family != CONTENT_BLOCK:
            return part
    return None


def native_completion(result: NativeCompaction, source: NativeSource) -> Completion | None:
    """The completion the flow validates for a native outcome; ``None``: write our own summary.

    A compacted block without a readable summary (OpenAI's is encrypted) gets our own extractive
    summary of the same range, written locally, so that it can be replaced by text when the
    conversation moves to another provider.
    """
    outcome = result.outcome
    if outcome in _FALLBACK:
        return None
    if outcome is NativeOutcome.COMPACTED and result.part is not None:
        part = result.part
        if not part.summary.strip():
            readable = portable_history(source.messages)
            part = replace(part, summary=extractive_summary(readable))
        if part.tokens <= 0:
            part = replace(part, tokens=estimate_text_tokens(part.summary))
        return Completion(
            message=Message(role="model", parts=(part,)),
            usage=result.usage,
            finish_reason=FinishReason.STOP,
            raw_finish_reason=result.raw_stop,
        )
    reason = {
        NativeOutcome.TRUNCATED: FinishReason.LENGTH,
        NativeOutcome.REFUSED: FinishReason.CONTENT_FILTER,
    }.get(outcome, FinishReason.STOP)
    return Completion(
        message=Message.model(""),
        usage=result.usage,
        finish_reason=reason,
        raw_finish_reason=result.raw_stop,
    )


class NativeSummaries:
    """The side-query provider with a native summary backend in front of it.

    Side queries that carry their range (:attr:`ChatRequest.native`) go to the provider's
    native compaction while the provider may support it; what it cannot do falls back to our
    own summary through ``provider.complete``. Everything else passes straight through.
    """

    def __init__(self, provider: Provider, native: NativeCompactor) -> None:
        self._provider = provider
        self._native = native
        self.name = provider.name
        self.model = provider.model

    def _wanted(self, request: ChatRequest) -> NativeSource | None:
        if request.native is None or request.purpose != "side_query":
            return None
        if self._native.native_compaction_supported() is False:
            return None
        return request.native

    def _log(self, result: NativeCompaction) -> None:
        import logging  # imported when a native compaction is made: not on every start

        logging.getLogger("autocompact").info(
            "native compaction on %s: %s%s; %s",
            self.name,
            result.outcome.value,
            f" ({result.raw_stop})" if result.raw_stop else "",
            "writing our own summary" if result.outcome in _FALLBACK else "done",
        )

    def complete(self, request: ChatRequest) -> Completion:
        """The native summary when possible, else the provider's ordinary reply."""
        source = self._wanted(request)
        if source is not None:
            try:
                result = self._native.compact_natively(source)
            except ContentError as exc:  # the range holds what its request cannot carry
                result = _cannot_carry(exc)
            self._log(result)
            completion = native_completion(result, source)
            if completion is not None:
                return completion
        return self._provider.complete(request)

    async def acomplete(self, request: ChatRequest) -> Completion:
        """Async :meth:`complete`."""
        source = self._wanted(request)
        if source is not None:
            try:
                result = await self._native.acompact_natively(source)
            except ContentError as exc:
                result = _cannot_carry(exc)
            self._log(result)
            completion = native_completion(result, source)
            if completion is not None:
                return completion
        return await self._provider.acomplete(request)

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """Streams are chat turns: passed through."""
        return self._provider.stream(request)

    def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Async streams are chat turns: passed through."""
        return self._provider.astream(request)


def _cannot_carry(exc: ContentError) -> NativeCompaction:
    """A range the native request cannot carry (audio a tool returned, say): our own summary
    this time, whose request leaves such parts out (slimming)."""
    return NativeCompaction(
        outcome=NativeOutcome.UNAVAILABLE, raw_stop="content", detail=f"cannot be sent: {exc}"
    )


def native_summaries_for(provider: Provider, *, enabled: bool = True) -> Provider:
    """``provider`` wrapped in :class:`NativeSummaries` when it has a native backend and it is
    enabled and not known to be unsupported; else ``provider`` itself."""
    if not enabled or not isinstance(provider, NativeCompactor):
        return provider
    if provider.native_compaction_supported() is False:
        return provider
    return NativeSummaries(provider, provider)

"""Decide → build the side query → validate the reply → new history (SPEC §5–§6). Pure.

:func:`compress_flow` is the whole compaction as a generator: it yields the side-query
:class:`ChatRequest` and receives the provider's :class:`Completion` (or has the provider's
:class:`ProviderError` thrown into it). Sync and async drivers (``service.py``, ``chat.py``) run
the same flow, so both session classes behave identically. Every failure path returns the input
history object itself, untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Literal, TypeAlias

from autocompact.compaction.clearing import (
    DEFAULT_PROTECT_TOKENS,
    ClearingResult,
    clear_tool_outputs,
)
from autocompact.compaction.native import native_part
from autocompact.compaction.prompts import (
    SUMMARY_ACKNOWLEDGEMENT,
    SUMMARY_FINAL_INSTRUCTION,
    SUMMARY_PREAMBLE,
    summary_system_prompt,
)
from autocompact.compaction.slimming import slim_for_summary
from autocompact.compaction.split import (
    COMPRESSION_PRESERVE_THRESHOLD,
    MIN_COMPRESSION_FRACTION,
    find_split_point,
)
from autocompact.content import Message, Usage, as_message
from autocompact.errors import ProviderError
from autocompact.estimation import (
    PendingMessage,
    estimate_content_chars,
    estimate_content_tokens,
    estimate_prompt_tokens,
    estimate_text_tokens,
    estimate_tools_tokens,
)
from autocompact.providers.base import (
    ChatRequest,
    Completion,
    FinishReason,
    NativeSource,
    ToolSpec,
)
from autocompact.thresholds import (
    COMPACT_MAX_OUTPUT_TOKENS,
    DEFAULT_IMAGE_TOKEN_ESTIMATE,
    MAX_CONSECUTIVE_FAILURES,
    compute_thresholds,
)

__all__ = [
    "CompressOptions",
    "CompressionFlow",
    "CompressionInfo",
    "CompressionResult",
    "CompressionStatus",
    "CompressionTrigger",
    "Summarizer",
    "build_side_query",
    "compress_flow",
    "count_history_tokens",
]

Summarizer: TypeAlias = Callable[[Sequence[Message]], str]
"""Writes a summary without a model (used when no provider is available)."""


class CompressionStatus(StrEnum):
    """The outcome of one compaction attempt."""

    COMPRESSED = "compressed"
    NOOP = "noop"
    COMPRESSION_FAILED_OUTPUT_TRUNCATED = "compression_failed_output_truncated"
    COMPRESSION_FAILED_EMPTY_SUMMARY = "compression_failed_empty_summary"
    COMPRESSION_FAILED_INFLATED_TOKEN_COUNT = "compression_failed_inflated_token_count"
    COMPRESSION_FAILED_TOKEN_COUNT_ERROR = "compression_failed_token_count_error"
    COMPRESSION_FAILED_PROVIDER_ERROR = "compression_failed_provider_error"
    COMPRESSION_FAILED_CONTENT_FILTER = "compression_failed_content_filter"
    """The summary was stopped by a content filter or refused (SPEC §10.8): never kept."""

    @property
    def failed(self) -> bool:
        """Whether this status is a failure (neither compressed nor not needed)."""
        return self not in (CompressionStatus.COMPRESSED, CompressionStatus.NOOP)


class CompressionTrigger(StrEnum):
    """What asked for the compaction."""

    AUTO = "auto"
    HARD = "hard"
    REACTIVE = "reactive"
    MANUAL = "manual"


Method: TypeAlias = Literal["none", "summary", "clearing", "native"]


@dataclass(frozen=True, kw_only=True)
class CompressOptions:
    """Everything one compaction attempt needs to know besides the history.

    Attributes:
        context_window: the model's context window in tokens.
        force: skip the breaker and the threshold check (hard rescue, reactive, manual).
        consecutive_failures: unforced failures in a row so far (the breaker's count).
        user_message: the message about to be sent (counted by the pre-send estimate).
        last_prompt_token_count: the provider's count of the history (0: unknown, estimate).
        trigger: what asked for the compaction (recorded in telemetry).
        system_instruction, tools: counted by the cold estimate.
        image_token_estimate: tokens per image or document.
        instructions: extra instructions for the summary (``/compress ...``).
        clear_tool_outputs: run tool-output clearing (no model call) before the summary on
            automatic triggers; a manual ``/compress`` always summarizes.
        protect_tool_tokens: the newest tool output kept by clearing.
    """

    context_window: int
    force: bool = False
    consecutive_failures: int = 0
    user_message: PendingMessage = None
    last_prompt_token_count: int = 0
    trigger: CompressionTrigger = CompressionTrigger.AUTO
    system_instruction: str | None = None
    tools: Sequence[ToolSpec] = ()
    image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE
    instructions: str | None = None
    clear_tool_outputs: bool = True
    protect_tool_tokens: int = DEFAULT_PROTECT_TOKENS


@dataclass(frozen=True, kw_only=True)
class CompressionInfo:
    """Telemetry of one compaction attempt (SPEC §6).

    Attributes:
        status, trigger: the outcome and what asked for it.
        original_token_count: the history's size before (provider count when known).
        new_token_count: its size after (equal to the original on any failure or no-op).
        compression_input_token_count: the side query's prompt size.
        compression_output_token_count: the side query's output size (the summary).
        compressed_messages, kept_messages: how many messages were summarized and kept.
        error: why it failed or did nothing, in words.
        summary: the summary text, when one was accepted.
        method: what reduced the history: ``summary``, ``native`` (the provider's own
            compaction block), ``clearing`` (no model) or ``none``.
        cleared_tool_outputs, clearing_tokens_saved: what tool-output clearing did.
    """

    status: CompressionStatus
    trigger: CompressionTrigger
    original_token_count: int
    new_token_count: int
    compression_input_token_count: int = 0
    compression_output_token_count: int = 0
    compressed_messages: int = 0
    kept_messages: int = 0
    error: str | None = None
    summary: str | None = None
    method: Method = "none"
    cleared_tool_outputs: int = 0
    clearing_tokens_saved: int = 0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return {
            name: (value.value if isinstance(value, StrEnum) else value)
            for name, value in self.__dict__.items()
        }


@dataclass(frozen=True)
class CompressionResult:
    """The history after the attempt (the same object on failure) and its telemetry."""

    history: tuple[Message, ...]
    info: CompressionInfo = field()


CompressionFlow: TypeAlias = Generator[ChatRequest, Completion, CompressionResult]


def count_history_tokens(history: Sequence[Message], options: CompressOptions) -> int:
    """The history's size: the provider's count when known, else the cold estimate."""
    if options.last_prompt_token_count > 0:
        return options.last_prompt_token_count
    return (
        estimate_content_tokens(history, options.image_token_estimate)
        + estimate_text_tokens(options.system_instruction)
        + estimate_tools_tokens(options.tools)
    )


def compress_flow(
    history: Sequence[Message],
    options: CompressOptions,
    *,
    summarizer: Summarizer | None = None,
) -> CompressionFlow:
    """One compaction attempt as a generator (see the module docstring).

    With ``summarizer`` given, no request is yielded: the summary is written locally.
    """
    original_history = tuple(history)
    try:
        prepared = _prepare(original_history, options)
    except (TypeError, ValueError, RecursionError) as exc:
        # A history that cannot be measured (a circular or unserializable tool result).
        return _result(
            original_history,
            options,
            CompressionStatus.COMPRESSION_FAILED_TOKEN_COUNT_ERROR,
            0,
            error=f"could not count the history: {exc}",
        )
    if isinstance(prepared, CompressionResult):
        return prepared
    original, base, clearing, to_compress, to_keep = prepared

    def fail(status: CompressionStatus, error: str, **extra: Any) -> CompressionResult:
        return _result(original_history, options, status, original, error=error, **extra)

    request = build_side_query(to_compress, options)
    if summarizer is not None:
        text = summarizer(to_compress)
        completion = Completion(
            message=Message.model(text),
            usage=Usage(output_tokens=estimate_text_tokens(text)),
            finish_reason=FinishReason.STOP,
        )
    else:
        try:
            completion = yield request
        except ProviderError as exc:
            return fail(
                CompressionStatus.COMPRESSION_FAILED_PROVIDER_ERROR,
                f"the summary request failed: {exc}",
                compressed_messages=len(to_compress),
                kept_messages=len(to_keep),
            )
    result = _finish(
        original_history, to_compress, to_keep, request, completion, original, options, base
    )
    if clearing is None or result.info.status is not CompressionStatus.COMPRESSED:
        return result
    info = replace(
        result.info,
        cleared_tool_outputs=clearing.cleared + clearing.deduplicated,
        clearing_tokens_saved=clearing.tokens_saved,
    )
    return CompressionResult(history=result.history, info=info)


def _pending_tokens(options: CompressOptions) -> int:
    if options.user_message is None:
        return 0
    return estimate_content_tokens([as_message(options.user_message)], options.image_token_estimate)


def _cleared_result(
    clearing: ClearingResult, options: CompressOptions, original: int, new: int
) -> CompressionResult:
    info = CompressionInfo(
        status=CompressionStatus.COMPRESSED,
        trigger=options.trigger,
        original_token_count=original,
        new_token_count=new,
        method="clearing",
        cleared_tool_outputs=clearing.cleared + clearing.deduplicated,
        clearing_tokens_saved=clearing.tokens_saved,
        kept_messages=len(clearing.history),
    )
    return CompressionResult(history=clearing.history, info=info)


_Prepared: TypeAlias = tuple[
    int, int, ClearingResult | None, tuple[Message, ...], tuple[Message, ...]
]


def _prepare(
    history: tuple[Message, ...], options: CompressOptions
) -> CompressionResult | _Prepared:
    """Steps 1–4 of SPEC §5 before the side query: the gate, clearing and the split.

    Returns a finished result (no-op, or clearing alone was enough), or the original count, the
    count of what will be summarized, the clearing done, and the messages to summarize and keep.
    Counting errors propagate to the caller, which reports a token-count failure.
    """
    original = count_history_tokens(history, options)

    def noop(error: str) -> CompressionResult:
        return _result(history, options, CompressionStatus.NOOP, original, error=error)

    if options.consecutive_failures >= MAX_CONSECUTIVE_FAILURES and not options.force:
        return noop("breaker open: automatic compaction is paused")
    auto = compute_thresholds(options.context_window).auto
    if not options.force:
        effective = estimate_prompt_tokens(
            history,
            options.user_message,
            options.last_prompt_token_count,
            system_instruction=options.system_instruction,
            tools=options.tools,
            image_token_estimate=options.image_token_estimate,
        )
        if effective < auto:
            return noop(f"below the auto threshold ({effective} < {auto:.0f})")
    if not history:
        return noop("the history is empty")

    working, base, clearing = history, original, None
    if options.clear_tool_outputs and options.trigger is not CompressionTrigger.MANUAL:
        clearing = clear_tool_outputs(
            history,
            protect_tokens=options.protect_tool_tokens,
            image_token_estimate=options.image_token_estimate,
        )
        if clearing.tokens_saved > 0:
            working, base = clearing.history, max(0, original - clearing.tokens_saved)
            if base + _pending_tokens(options) < auto:
                return _cleared_result(clearing, options, original, base)
        else:
            clearing = None

    split = find_split_point(
        working, COMPRESSION_PRESERVE_THRESHOLD, image_token_estimate=options.image_token_estimate
    )
    to_compress, to_keep = working[:split], working[split:]
    total_chars = estimate_content_chars(working, options.image_token_estimate)
    compressed_chars = estimate_content_chars(to_compress, options.image_token_estimate)
    if not to_compress or compressed_chars < MIN_COMPRESSION_FRACTION * total_chars:
        return noop("too little history can be compressed safely")
    return original, base, clearing, to_compress, to_keep


def build_side_query(to_compress: Sequence[Message], options: CompressOptions) -> ChatRequest:
    """The bounded summarization request: thinking off, output capped at 20K (SPEC §6)."""
    messages = (*slim_for_summary(to_compress), Message.user(SUMMARY_FINAL_INSTRUCTION))
    if messages[0].role != "user":
        messages = (Message.user("(earlier conversation follows)"), *messages)
    return ChatRequest(
        messages=messages,
        system_instruction=summary_system_prompt(options.instructions),
        max_output_tokens=COMPACT_MAX_OUTPUT_TOKENS,
        thinking=False,
        purpose="side_query",
        native=NativeSource(
            messages=tuple(to_compress),
            instructions=options.instructions,
            system_instruction=options.system_instruction,
            tools=tuple(options.tools),
        ),
    )


def _finish(
    history: tuple[Message, ...],
    to_compress: tuple[Message, ...],
    to_keep: tuple[Message, ...],
    request: ChatRequest,
    completion: Completion,
    original: int,
    options: CompressOptions,
    base: int,
) -> CompressionResult:
    """Validate the side query's reply and build the new history.

    ``original`` is the size reported as before; ``base`` the size of the history that was
    summarized (smaller than ``original`` when tool output was cleared first).
    """
    usage = completion.usage
    opaque = native_part(completion)
    summary = opaque.summary.strip() if opaque is not None else completion.text.strip()
    sizes: dict[str, Any] = {
        "compressed_messages": len(to_compress),
        "kept_messages": len(to_keep),
        "compression_input_token_count": usage.prompt_tokens if usage else 0,
        "compression_output_token_count": usage.output_tokens if usage else 0,
    }

    def fail(status: CompressionStatus, error: str) -> CompressionResult:
        return _result(history, options, status, original, error=error, **sizes)

    if completion.finish_reason is FinishReason.CONTENT_FILTER:
        return fail(
            CompressionStatus.COMPRESSION_FAILED_CONTENT_FILTER,
            "the summary was stopped by the provider's content filter or refused "
            f"({completion.raw_finish_reason or 'content_filter'}); a partial summary is never "
            "kept",
        )
    if _truncated(completion):
        return fail(
            CompressionStatus.COMPRESSION_FAILED_OUTPUT_TRUNCATED,
            "the summary stopped at its output cap; a truncated summary is never kept",
        )
    if not summary:
        return fail(CompressionStatus.COMPRESSION_FAILED_EMPTY_SUMMARY, "the summary was empty")
    try:
        if opaque is not None:
            # A native block replaces the range by itself, first in the history (the provider
            # requires it there); its size is what the provider reported for it.
            new_history: tuple[Message, ...] = (
                Message(role="model", parts=(opaque,)),
                *to_keep,
            )
            summary_tokens = estimate_content_tokens(new_history[:1])
        else:
            new_history = (
                Message.user(SUMMARY_PREAMBLE + summary),
                Message.model(SUMMARY_ACKNOWLEDGEMENT),
                *to_keep,
            )
            summary_tokens = (
                usage.output_tokens
                if usage and usage.output_tokens > 0
                else estimate_text_tokens(summary)
            )
        compressed_tokens = estimate_content_tokens(to_compress, options.image_token_estimate)
        # SPEC §6: original − compressed part + summary. The estimate of the new history is a
        # floor: it may only raise the count (fire earlier), never lower it.
        floor = count_history_tokens(new_history, _cold(options))
        new = max(base - compressed_tokens + summary_tokens, floor)
        if not sizes["compression_input_token_count"]:
            sizes["compression_input_token_count"] = estimate_content_tokens(request.messages)
        if not sizes["compression_output_token_count"]:
            sizes["compression_output_token_count"] = summary_tokens
    except (TypeError, ValueError, RecursionError) as exc:
        return fail(
            CompressionStatus.COMPRESSION_FAILED_TOKEN_COUNT_ERROR, f"could not count: {exc}"
        )
    if new >= base:
        return fail(
            CompressionStatus.COMPRESSION_FAILED_INFLATED_TOKEN_COUNT,
            f"the compacted history would not be smaller ({new} ≥ {base} tokens)",
        )
    info = CompressionInfo(
        status=CompressionStatus.COMPRESSED,
        trigger=options.trigger,
        original_token_count=original,
        new_token_count=new,
        summary=summary,
        method="native" if opaque is not None else "summary",
        **sizes,
    )
    return CompressionResult(history=new_history, info=info)


def _truncated(completion: Completion) -> bool:
    if completion.finish_reason is FinishReason.LENGTH:
        return True
    if completion.finish_reason is None:
        usage = completion.usage
        return usage is not None and usage.output_tokens >= COMPACT_MAX_OUTPUT_TOKENS
    return False


def _cold(options: CompressOptions) -> CompressOptions:
    return CompressOptions(
        context_window=options.context_window,
        system_instruction=options.system_instruction,
        tools=options.tools,
        image_token_estimate=options.image_token_estimate,
    )


def _result(
    history: tuple[Message, ...],
    options: CompressOptions,
    status: CompressionStatus,
    original: int,
    *,
    error: str,
    **extra: Any,
) -> CompressionResult:
    info = CompressionInfo(
        status=status,
        trigger=options.trigger,
        original_token_count=original,
        new_token_count=original,
        error=error,
        **extra,
    )
    return CompressionResult(history=history, info=info)

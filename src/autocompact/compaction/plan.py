"""Decide → build the side query → validate the reply → new history (SPEC §5–§6). Pure.

:func:`compress_flow` is the whole compaction as a generator: it yields the side-query
:class:`ChatRequest` and receives the provider's :class:`Completion` (or has the provider's
:class:`ProviderError` thrown into it). Sync and async drivers (``service.py``, ``chat.py``) run
the same flow, so both session classes behave identically. Every failure path returns the input
history object itself, untouched.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Any, TypeAlias

from autocompact.compaction.attempt import (
    CompressionFlow,
    CompressionInfo,
    CompressionResult,
    CompressionStatus,
    CompressionTrigger,
    CompressOptions,
    Summarizer,
)
from autocompact.compaction.clearing import ClearingResult, clear_tool_outputs
from autocompact.compaction.counts import (
    cold_options,
    count_history_tokens,
    count_scale,
    summary_size,
)
from autocompact.compaction.ledger import (
    Ledger,
    audit_summary,
    build_ledger,
    missing,
    required_chars,
)
from autocompact.compaction.native import native_part
from autocompact.compaction.prompts import (
    SUMMARY_ACKNOWLEDGEMENT,
    SUMMARY_PREAMBLE,
)
from autocompact.compaction.reply import echo as _echo
from autocompact.compaction.reply import refusal as _refusal
from autocompact.compaction.sidequery import (
    DEFAULT_SUMMARY_SHARE,
    call_summarizer,
    no_room_reason,
    plan_side_queries,
    side_request,
    summary_cap,
)
from autocompact.compaction.space import space_breakdown
from autocompact.compaction.split import (
    MIN_COMPRESSION_FRACTION,
    exact_tokens,
    find_split_point,
)
from autocompact.content import Message, Usage, as_message
from autocompact.errors import ProviderError
from autocompact.estimation import (
    BYTES_PER_TOKEN,
    estimate_content_chars,
    estimate_content_tokens,
    estimate_prompt_tokens,
    estimate_text_tokens,
)
from autocompact.providers.base import (
    ChatRequest,
    Completion,
    FinishReason,
    NativeSource,
)
from autocompact.thresholds import MAX_CONSECUTIVE_FAILURES, compute_thresholds

__all__ = [
    "CLEAR_AT_LEAST_SHARE",
    "DEFAULT_SUMMARY_SHARE",
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

CLEAR_AT_LEAST_SHARE = 0.05
"""Clearing acts only when it frees at least this share of the window (default of
``CompressOptions.clear_at_least_tokens``): every clearing rewrites the cached prompt prefix, so
a small one costs more than it saves (Anthropic's ``clear_at_least`` is the model). A summary
that could free less than this, and cannot bring the count below *warn*, is not sent either
(design decision 70)."""
PROTECT_SHARE = 0.2
"""Clearing keeps the newest tool output up to ``min(protect_tool_tokens, this × window)``."""


def compress_flow(
    history: Sequence[Message],
    options: CompressOptions,
    *,
    summarizer: Summarizer | None = None,
) -> CompressionFlow:
    """One compaction attempt as a generator (see the module docstring).

    With ``summarizer`` given, no request is yielded: the summary is written locally. When the
    part to summarize does not fit the summarizer's window in one request, it is sent in chunks,
    oldest first (SPEC §10.4).
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
    original, base, scale, clearing, to_compress, to_keep = prepared
    sizes: dict[str, Any] = {
        "compressed_messages": len(to_compress),
        "kept_messages": len(to_keep),
    }
    done = _Done(original_history, clearing)
    done.original, done.base, done.scale = original, base, scale

    def fail(status: CompressionStatus, error: str, **extra: Any) -> CompressionResult:
        return done.failed(options, status, error, extra)

    ledger = build_ledger(to_compress)
    cap = summary_cap(
        to_compress,
        options.summary_target_tokens,
        local=summarizer is not None,
        image_token_estimate=options.image_token_estimate,
        window=options.context_window,
        must_free=_must_free(base, options),
        need=math.ceil(required_chars(ledger) / BYTES_PER_TOKEN),
    )
    done.ledger, done.local = ledger, summarizer is not None
    if summarizer is not None:
        text = call_summarizer(summarizer, to_compress, cap, ledger=ledger)
        completion = Completion(
            message=Message.model(text),
            usage=Usage(output_tokens=estimate_text_tokens(text)),
            finish_reason=FinishReason.STOP,
        )
        sizes["compression_input_token_count"] = estimate_content_tokens(
            to_compress, options.image_token_estimate
        )
        sizes["side_queries"] = 1
        return _finish(done, to_compress, to_keep, completion, cap, options, sizes)
    plan = plan_side_queries(
        to_compress,
        output_cap=cap,
        window=options.summarizer_window or options.context_window,
        scale=options.token_scale,
        instructions=options.instructions,
        target_tokens=options.summary_target_tokens,
        image_token_estimate=options.image_token_estimate,
        ledger=ledger if ledger.retained else None,
    )
    if plan is None:
        return fail(
            CompressionStatus.COMPRESSION_FAILED_TOKEN_COUNT_ERROR,
            no_room_reason(options.instructions),
            **sizes,
        )
    carried: str | None = None
    prompt_tokens = output_tokens = 0
    for index in range(len(plan.chunks)):
        request = side_request(plan, index, carried)
        if len(plan.chunks) == 1:
            request = replace(request, native=_native_source(to_compress, options))
        sizes["side_queries"] = index + 1
        try:
            completion = yield request
        except ProviderError as exc:
            return fail(
                CompressionStatus.COMPRESSION_FAILED_PROVIDER_ERROR,
                f"the summary request failed: {exc}",
                **sizes,
            )
        usage = completion.usage
        prompt_tokens += (
            usage.prompt_tokens if usage and usage.prompt_tokens else _plain(request.messages)
        )
        output_tokens += (
            usage.output_tokens
            if usage and usage.output_tokens
            else estimate_text_tokens(completion.text)
        )
        sizes["compression_input_token_count"] = prompt_tokens
        sizes["compression_output_token_count"] = output_tokens
        cap_here = request.max_output_tokens or cap
        problem = _refusal(completion, cap_here)
        if problem is not None:
            return fail(problem[0], problem[1], **sizes)
        carried = completion.text.strip()
    return _finish(done, to_compress, to_keep, completion, cap, options, sizes)


def _plain(messages: Sequence[Message]) -> int:
    return estimate_content_tokens(messages)


def _pending_tokens(options: CompressOptions) -> int:
    if options.user_message is None:
        return 0
    return estimate_content_tokens([as_message(options.user_message)], options.image_token_estimate)


def _judged(
    info: CompressionInfo, history: Sequence[Message], options: CompressOptions
) -> CompressionInfo:
    """Add what holds the space and whether an automatic compaction bought room (SPEC §10.2)."""
    breakdown = space_breakdown(
        history,
        system_instruction=options.system_instruction,
        tools=options.tools,
        image_token_estimate=options.image_token_estimate,
    )
    warn = compute_thresholds(options.context_window).warn
    ineffective = (
        options.trigger is not CompressionTrigger.MANUAL
        and info.new_token_count + _pending_tokens(options) >= warn
    )
    return replace(info, breakdown=breakdown, ineffective=ineffective)


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
    return CompressionResult(
        history=clearing.history, info=_judged(info, clearing.history, options)
    )


_Prepared: TypeAlias = tuple[
    int, int, Fraction, ClearingResult | None, tuple[Message, ...], tuple[Message, ...]
]


def _must_free(base: int, options: CompressOptions) -> int:
    """What the compaction must free to leave the room it aims at (0 when below it)."""
    auto = compute_thresholds(options.context_window).auto
    return max(0, math.ceil(base + _pending_tokens(options) - _room_target(options, auto)))


def _room_target(options: CompressOptions, auto: float) -> float:
    """The count a compaction aims to stay at or below: *auto* less the expected growth."""
    return max(0.0, auto - options.growth_room_tokens)


def _keep_share_for_room(
    working: tuple[Message, ...], base: int, options: CompressOptions, auto: float
) -> float:
    """``keep_share``, lowered (down to 0) so the count after is at most the room target.

    The count after is ``base − compressed + summary`` (SPEC §6); the summary is expected at its
    target, else at :data:`DEFAULT_SUMMARY_SHARE` of what it summarizes.
    """
    whole = sum(exact_tokens(m.stats, options.image_token_estimate) for m in working)
    if whole <= 0:
        return options.keep_share
    excess = base + _pending_tokens(options) - _room_target(options, auto)
    if options.summary_target_tokens is not None:
        must_compress = excess + options.summary_target_tokens
    else:
        must_compress = excess / (1 - DEFAULT_SUMMARY_SHARE)
    keep = (whole - must_compress) / whole
    return min(options.keep_share, max(0.0, keep))


def _clear_at_least(options: CompressOptions) -> int:
    if options.clear_at_least_tokens is not None:
        return options.clear_at_least_tokens
    return round(CLEAR_AT_LEAST_SHARE * options.context_window)


def _prepare(
    history: tuple[Message, ...], options: CompressOptions
) -> CompressionResult | _Prepared:
    """Steps 1–4 of SPEC §5 before the side query: the gate, clearing and the split.

    Returns a finished result (no-op, or clearing alone was enough), or the original count, the
    count summarized, the clearing done, the messages to summarize and keep. Counting errors
    propagate to the caller, which reports a token-count failure.
    """
    original = count_history_tokens(history, options)

    def noop(error: str) -> CompressionResult:
        return _result(history, options, CompressionStatus.NOOP, original, error=error)

    if options.consecutive_failures >= MAX_CONSECUTIVE_FAILURES and not options.force:
        return noop("breaker open: automatic compaction is paused")
    thresholds = compute_thresholds(options.context_window)
    if not options.force:
        effective = estimate_prompt_tokens(
            history,
            options.user_message,
            options.last_prompt_token_count,
            system_instruction=options.system_instruction,
            tools=options.tools,
            image_token_estimate=options.image_token_estimate,
        )
        if effective < thresholds.auto:
            return noop(f"below the auto threshold ({effective} < {thresholds.auto:.0f})")
    if not history:
        return noop("the history is empty")

    working, base, clearing = history, original, None
    scale = count_scale(history, options, original)
    if options.clear_tool_outputs and options.trigger is not CompressionTrigger.MANUAL:
        clearing = clear_tool_outputs(
            history,
            # The newest tool output kept is at most a fifth of the window: on small windows
            # 40K would protect nearly everything and clearing would never act.
            protect_tokens=min(
                options.protect_tool_tokens, round(PROTECT_SHARE * options.context_window)
            ),
            image_token_estimate=options.image_token_estimate,
        )
        if clearing.tokens_saved > 0 and clearing.tokens_saved >= _clear_at_least(options):
            saved = int(clearing.tokens_saved * scale)  # on the count's scale
            working, base = clearing.history, max(0, original - saved)
            # Clearing alone is enough only when it buys room: below warn (SPEC §10.2) and
            # room for the expected growth (design decision 63).
            after = base + _pending_tokens(options)
            if after < thresholds.warn and after <= _room_target(options, thresholds.auto):
                return _cleared_result(clearing, options, original, base)
        else:
            clearing = None

    split = find_split_point(
        working,
        _keep_share_for_room(working, base, options, thresholds.auto),
        image_token_estimate=options.image_token_estimate,
    )
    to_compress, to_keep = working[:split], working[split:]
    total_chars = estimate_content_chars(working, options.image_token_estimate)
    compressed_chars = estimate_content_chars(to_compress, options.image_token_estimate)
    if not to_compress or compressed_chars < MIN_COMPRESSION_FRACTION * total_chars:
        if clearing is not None:
            return _cleared_result(clearing, options, original, base)
        return noop("too little history can be compressed safely")
    if options.skip_without_room and options.trigger is not CompressionTrigger.MANUAL:
        futile = _cannot_buy_room(to_compress, base, options, clearing is not None)
        if futile is not None:
            if clearing is not None:  # the clearing stands; it is judged ineffective
                return _cleared_result(clearing, options, original, base)
            return _no_room(working, options, original, futile)
    return original, base, scale, clearing, to_compress, to_keep


def _cannot_buy_room(
    to_compress: tuple[Message, ...], base: int, options: CompressOptions, cleared: bool
) -> int | None:
    """The count an empty summary would leave, when a side query cannot buy room (else None).

    A summary can free at most what it replaces. Less than the clearing minimum (the cached
    prefix it rewrites costs more) with an empty summary still at or above *warn* (SPEC §10.2)
    is not worth a side query (design decision 70); after a clearing, neither is under half that
    minimum (a summary is about that size), nor missing the room target anyway. Freed is on the
    provider's scale, rounded up, so the judgement errs toward trying.
    """
    plain = sum(exact_tokens(m.stats, options.image_token_estimate) for m in to_compress)
    freed = math.ceil(plain * max(1.0, options.token_scale))
    best, minimum = base - freed + _pending_tokens(options), _clear_at_least(options)
    ladder = compute_thresholds(options.context_window)
    missed = best >= ladder.warn or (cleared and best > _room_target(options, ladder.auto))
    futile = (cleared and 2 * freed < minimum) or (freed < minimum and missed)
    return max(0, best) if futile else None


def _no_room(
    history: tuple[Message, ...], options: CompressOptions, original: int, best: int
) -> CompressionResult:
    """No side query: nothing it could summarize would bring the count below *warn*. Reported
    as an ineffective no-op with what holds the space; the session holds as after an
    ineffective compaction, without counting a failure (no side query was spent)."""
    warn = compute_thresholds(options.context_window).warn
    result = _result(
        history,
        options,
        CompressionStatus.NOOP,
        original,
        error=(
            f"a summary cannot buy room: even an empty one would leave about {best:,} tokens, "
            f"at or above warn ({warn:,.0f}); what must be kept holds the space"
        ),
    )
    info = _judged(result.info, history, options)
    return CompressionResult(history=history, info=replace(info, ineffective=True))


def build_side_query(to_compress: Sequence[Message], options: CompressOptions) -> ChatRequest:
    """The first bounded summarization request: thinking off, output capped at
    ``min(20K, target, what the window leaves after its input)`` (SPEC §6, §10.4)."""
    plan = plan_side_queries(
        to_compress,
        output_cap=summary_cap(
            to_compress,
            options.summary_target_tokens,
            local=False,
            image_token_estimate=options.image_token_estimate,
        ),
        window=options.summarizer_window or options.context_window,
        scale=options.token_scale,
        instructions=options.instructions,
        target_tokens=options.summary_target_tokens,
        image_token_estimate=options.image_token_estimate,
    )
    if plan is None:
        raise ValueError(no_room_reason(options.instructions))
    request = side_request(plan, 0, None)
    if len(plan.chunks) == 1:
        request = replace(request, native=_native_source(to_compress, options))
    return request


def _native_source(to_compress: Sequence[Message], options: CompressOptions) -> NativeSource:
    """The range for a provider that can compact it natively (one request, not chunked)."""
    return NativeSource(
        messages=tuple(to_compress),
        instructions=options.instructions,
        system_instruction=options.system_instruction,
        tools=tuple(options.tools),
    )


class _Done:
    """What stood before the summary (a plain class: a dataclass compiles at import)."""

    __slots__ = ("base", "clearing", "history", "ledger", "local", "original", "scale")

    def __init__(self, history: tuple[Message, ...], clearing: ClearingResult | None) -> None:
        self.history, self.clearing = history, clearing  # the input, the clearing that stands
        self.original = self.base = 0  # the size reported as before; of what is summarized
        self.scale = Fraction(1)  # the count's scale (:func:`count_scale`)
        self.ledger: Ledger | None = None  # what the summary must carry (issue 22)
        self.local = False  # the summary is the local summarizer's, not a model's

    def failed(
        self,
        options: CompressOptions,
        status: CompressionStatus,
        error: str,
        sizes: dict[str, Any],
    ) -> CompressionResult:
        """The input untouched, or the cleared history standing (SPEC §10.3)."""
        if self.clearing is None:
            return _result(self.history, options, status, self.original, error=error, **sizes)
        stood = _cleared_result(self.clearing, options, self.original, self.base)
        info = replace(stood.info, summary_failure=status, error=error, **sizes)
        return CompressionResult(history=stood.history, info=info)


def _finish(
    done: _Done,
    to_compress: tuple[Message, ...],
    to_keep: tuple[Message, ...],
    completion: Completion,
    cap: int,
    options: CompressOptions,
    sizes: dict[str, Any],
) -> CompressionResult:
    """Validate the summary and build the new history."""
    usage = completion.usage
    opaque = native_part(completion)
    summary = opaque.summary.strip() if opaque is not None else completion.text.strip()

    def fail(status: CompressionStatus, error: str) -> CompressionResult:
        return done.failed(options, status, error, sizes)

    problem = _refusal(completion, cap) or (None if opaque else _echo(summary, options))
    if problem is not None:
        return fail(*problem)
    model_text = summary
    if done.ledger is not None and opaque is None:
        if not done.local:  # a model wrote it: put back what it lost
            audit = audit_summary(summary, done.ledger)
            summary, sizes["audited"], sizes["restored"] = (
                audit.summary,
                audit.audited,
                audit.restored,
            )
        else:  # the local summarizer: say what its target could not hold
            sizes["audited"] = len(done.ledger.retained)
            sizes["ledger_dropped"] = len(missing(summary, done.ledger))
    # SPEC §6: original − compressed part + summary, each on the scale of the count it started
    # from (design decision 98): a plain estimate is scaled, what the provider counted is taken
    # as is. What is removed is scaled either way; what is added, and the floor, only up.
    scale, up = done.scale, max(Fraction(1), done.scale)
    try:
        if opaque is not None:
            # A native block replaces the range by itself, first in the history (the provider
            # requires it there); its size is what the provider reported for it.
            new_history: tuple[Message, ...] = (
                Message(role="model", parts=(opaque,)),
                *to_keep,
            )
            written = estimate_content_tokens(new_history[:1])
            summary_tokens = round(written * up)  # an estimate too
        else:
            # A kept tail that begins with a model message follows the summary directly.
            ack = () if to_keep and to_keep[0].role == "model" else (_acknowledgement(),)
            new_history = (Message.user(SUMMARY_PREAMBLE + summary), *ack, *to_keep)
            written, summary_tokens = summary_size(
                usage, summary, model_text, local=done.local, scale=scale
            )
        compressed_tokens = estimate_content_tokens(to_compress, options.image_token_estimate)
        # The estimate of the new history (on the count's scale) is a floor: it may only raise
        # the count (fire earlier), never lower it.
        floor = round(count_history_tokens(new_history, cold_options(options)) * up)
        new = max(done.base - int(compressed_tokens * scale) + summary_tokens, floor)
        sizes.setdefault("compression_output_token_count", written)
    except (TypeError, ValueError, RecursionError) as exc:
        return fail(
            CompressionStatus.COMPRESSION_FAILED_TOKEN_COUNT_ERROR, f"could not count: {exc}"
        )
    if new >= done.base:
        return fail(
            CompressionStatus.COMPRESSION_FAILED_INFLATED_TOKEN_COUNT,
            f"the compacted history would not be smaller ({new} ≥ {done.base} tokens)",
        )
    clearing = done.clearing
    info = CompressionInfo(
        status=CompressionStatus.COMPRESSED,
        trigger=options.trigger,
        original_token_count=done.original,
        new_token_count=new,
        summary=summary,
        method="native" if opaque is not None else "summary",
        cleared_tool_outputs=clearing.cleared + clearing.deduplicated if clearing else 0,
        clearing_tokens_saved=clearing.tokens_saved if clearing else 0,
        **sizes,
    )
    return CompressionResult(history=new_history, info=_judged(info, new_history, options))


def _acknowledgement() -> Message:
    return Message.model(SUMMARY_ACKNOWLEDGEMENT)


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

"""How big the next request is, on the provider's scale, and what the guarantee sends (pure).

Functions of the configuration and the conversation's state only: the pre-send estimate (SPEC
§4), the provider's scale as far as the state knows it (SPEC §10.6), the count a compaction
starts from and the count of a compacted history, and the main request with the guarantee's
trimming. The engine's flows call them; a driver that needs a size asks the engine, never
recomputes one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from autocompact.compaction.fallback import (
    SIZE_MARGIN,
    UNKNOWN_SCALE,
    ProviderScale,
    TrimResult,
    trim_request,
)
from autocompact.compaction.plan import CompressionInfo, CompressionStatus
from autocompact.content import CharStats, Message
from autocompact.engine.config import EngineConfig
from autocompact.engine.state import ConversationState
from autocompact.errors import MessageTooLargeError
from autocompact.estimation import (
    calibrated_estimate,
    changed_mix_tokens,
    estimate_content_tokens,
    estimate_stats_tokens,
    learned_mix_tokens,
)
from autocompact.providers.base import ChatRequest

__all__ = [
    "PlannedRequest",
    "check_trimmed_fits",
    "compaction_count",
    "count_after_compaction",
    "estimate_tokens",
    "plan_request",
    "plan_retry",
    "provider_scale",
    "refusal_scale",
    "rejection_floor",
    "trim_reason",
    "trim_window",
]


def estimate_tokens(
    config: EngineConfig, state: ConversationState, pending: Message | None = None
) -> int:
    """The pre-send estimate of the next request (SPEC §4), with ``pending`` pending.

    With a provider count, that count plus what was added since and the pending message. On
    the cold path a calibrated state applies what it learned about this tokenizer
    (:func:`calibrated_estimate`). Either way it reads the statistics the state keeps: it walks
    and serializes nothing (issue 11).
    """
    base = state.count_base()
    image = config.image_token_estimate
    pending_tokens = 0 if pending is None else estimate_content_tokens([pending], image)
    if base > 0:
        return base + pending_tokens
    plain = estimate_stats_tokens(state.history_stats, image) + pending_tokens + config.fixed_tokens
    if state.calibration.samples == 0:
        return plain
    stats = state.history_stats + config.fixed_stats
    if pending is not None:
        stats = stats + pending.stats
    return calibrated_estimate(plain, state.calibration, stats, image_token_estimate=image)


def compaction_count(
    config: EngineConfig, state: ConversationState, pending: Message | None = None
) -> int:
    """The count a compaction starts from (its ``last_prompt_token_count``), with ``pending``
    pending: the provider's count when the state holds one; on a cold path whose calibration
    raises the estimate, the pre-send estimate the tier was decided on, less ``pending`` as the
    compaction adds it back (plain). Its gate then judges the count the engine judged, and it
    plans the cut on the provider's scale (design decision 97). Otherwise 0: the compaction
    estimates the history itself, plain (a calibration that lowers the estimate never lowers a
    compaction's count; its gate still agrees, the plain count being the higher)."""
    base = state.count_base()
    if base > 0 or state.calibration.samples == 0:
        return base
    image = config.image_token_estimate
    added = 0 if pending is None else estimate_content_tokens([pending], image)
    calibrated = estimate_tokens(config, state, pending) - added
    plain = estimate_stats_tokens(state.history_stats, image) + config.fixed_tokens
    return calibrated if calibrated > plain else 0


def provider_scale(state: ConversationState) -> ProviderScale:
    """How the provider's tokens relate to the plain estimate, as far as the state knows: its
    calibration, else the ratio of the last reported count to the plain estimate of what it
    counted, else unknown (SPEC §10.6); never below what a rejection implied."""
    factor = None
    if state.calibration.samples > 0:
        factor = state.calibration.factor
    elif state.last_ratio is not None:
        factor = state.last_ratio
    if state.scale_floor is not None:
        factor = max(factor or 0.0, state.scale_floor)
    return ProviderScale() if factor is None else ProviderScale(factor=factor, known=True)


def refusal_scale(state: ConversationState, stats: CharStats) -> ProviderScale:
    """The scale that may refuse a request of ``stats`` as larger than the window: the learned
    factor on the part with the mix of text and JSON it was learned on, the plain estimate on
    the rest. A factor learned on a text-heavy request (a long system prompt) says nothing about
    a batch of tool results, and a refusal must be sure (it loses the whole turn)."""
    scale = provider_scale(state)
    content = estimate_stats_tokens(replace(stats, media_parts=0), 1)
    if not scale.known or scale.factor <= 1 or content <= 0:
        return scale
    learned = min(float(content), learned_mix_tokens(state.calibration, stats))
    factor = (learned * scale.factor + (content - learned)) / content
    return ProviderScale(factor=factor, known=True)


def _covered_plain(config: EngineConfig, state: ConversationState) -> int:
    return config.fixed_plain + estimate_stats_tokens(
        state.history_stats, config.image_token_estimate
    )


def count_after_compaction(
    config: EngineConfig, state: ConversationState, planned: int, counted: CharStats | None
) -> int:
    """The count of a compacted history (already in ``state``) on the provider's scale (SPEC
    §10.6): its plain estimate (system prompt and tools included) times what the state learned,
    never the old count minus a plain estimate of what was removed. The scale was learned on
    ``counted`` (the history before the compaction); what the compaction brought in of another
    mix is sized at ``UNLEARNED_FACTOR`` until the next report (docs/design.md, note 67)."""
    scale = provider_scale(state)
    if not scale.known:
        return planned
    count = scale.tokens(_covered_plain(config, state), scale="best")
    if counted is None:
        return count
    changed = changed_mix_tokens(
        scale.best,
        counted,
        state.history_stats + config.fixed_stats,
        image_token_estimate=config.image_token_estimate,
    )
    return max(count, changed)


def rejection_floor(
    config: EngineConfig, state: ConversationState, message: Message, trim: TrimResult | None
) -> float | None:
    """The scale floor after a "too long" rejection: the provider counted more than the window
    for what was sent, so its ratio is at least window / plain estimate (``None``: unchanged)."""
    if trim is not None:
        plain = trim.plain_after
    else:
        plain = _covered_plain(config, state) + estimate_content_tokens(
            [message], config.image_token_estimate
        )
    if plain <= 0:
        return state.scale_floor
    return max(state.scale_floor or 0.0, config.context_window / plain)


def _sizing_scale(
    config: EngineConfig, state: ConversationState, scale: ProviderScale, base: int
) -> ProviderScale:
    """The scale a trimmed request is sized on: the learned one, or the ratio the count the
    state holds implies for the content it covers, if higher. A count on content of a new mix
    (after a compaction or a clearing, note 67) says more about it than a factor learned on the
    old mix. The implied ratio is believed up to ``UNKNOWN_SCALE`` (2.0, the top of the
    supported range): above it the count holds more than a tokenizer ratio (content the state
    does not see), and the retry after a rejection covers that."""
    covered = _covered_plain(config, state)
    if base <= 0 or covered <= 0 or not scale.known:
        return scale
    implied = min(base / covered, UNKNOWN_SCALE)
    if implied <= scale.factor:
        return scale
    return ProviderScale(factor=implied, known=True)


def trim_window(config: EngineConfig) -> int:
    """The most a trimmed request may hold on the worst-case scale: the window minus the room
    its reply needs. That room is ``max_output_tokens`` when set (a provider refuses a request
    whose input plus output cap exceeds the window); unset, it is the output reserve the
    ladder keeps free above the effective window, never more than the ladder leaves above
    *hard* (on small windows the effective window is below *hard*)."""
    window = config.context_window
    if config.max_output_tokens is not None:
        return max(0, window - config.max_output_tokens)
    thresholds = config.thresholds
    return max(int(thresholds.hard), thresholds.effective_window)


@dataclass(frozen=True, kw_only=True)
class PlannedRequest:
    """The main request the guarantee lets out.

    Attributes:
        request: what to send.
        trim: what the guarantee left out (``None``: nothing).
        size: the request's size before any trimming, on the provider's scale.
    """

    request: ChatRequest
    trim: TrimResult | None
    size: int


def plan_request(
    config: EngineConfig,
    state: ConversationState,
    message: Message,
    scale: ProviderScale | None = None,
    *,
    use_count: bool = True,
) -> PlannedRequest:
    """The main request, trimmed by the guarantee when it is at or above *hard*.

    Sizes are on the provider's scale (SPEC §10.6): the provider's last count where it covers
    the request, the plain estimate times the learned scale (with a margin) for what it does
    not. A request that cannot fit even trimmed is refused, never sent.

    Raises:
        MessageTooLargeError: even with every earlier turn left out it is over the window.
    """
    scale = scale or provider_scale(state)
    image = config.image_token_estimate
    base = state.count_base() if use_count else 0
    pending = estimate_content_tokens([message], image)
    if base > 0:
        size = base + scale.tokens(pending, scale="trigger")
    else:
        plain = estimate_stats_tokens(state.history_stats, image)
        size = scale.tokens(plain + pending + config.fixed_plain, scale="trigger")
    messages: Sequence[Message] = state.log.view(message)  # no copy of the history
    trim: TrimResult | None = None
    if size >= config.thresholds.hard:
        trimmed = trim_request(
            state.history,
            message,
            target=config.thresholds.auto,
            image_token_estimate=image,
            scale=_sizing_scale(config, state, scale, base),
            fixed_tokens=config.fixed_plain,
            window=trim_window(config),
        )
        if trimmed.dropped:
            messages, trim = trimmed.messages, trimmed
    request = ChatRequest(
        messages=messages,
        system_instruction=config.system_instruction,
        tools=tuple(config.tools),
        max_output_tokens=config.max_output_tokens,
    )
    return PlannedRequest(request=request, trim=trim, size=size)


_ATTEMPT_NAMES = {"auto": "automatic", "hard": "hard-threshold"}


def trim_reason(
    config: EngineConfig,
    state: ConversationState,
    planned: PlannedRequest,
    scale: ProviderScale,
    *,
    estimate: int,
    attempt: CompressionInfo | None,
) -> str:
    """Why the guarantee trimmed ``planned``, as it happened (the ``RequestTrimmed`` reason).

    The guarantee sizes the request on the provider's scale with a margin (SPEC §10.6), the
    ladder on the pre-send ``estimate`` (SPEC §4): the first can reach *hard* while the second
    is below it, and then no rescue ran. ``attempt``: the compaction this turn made before the
    request, if any.
    """
    hard = config.thresholds.hard
    margin = f" with a {round(SIZE_MARGIN * 100)} % margin" if scale.known else ""
    reason = (
        f"sized at {planned.size:,} tokens on the provider's scale{margin}, at or above "
        f"the hard threshold ({hard:,.0f})"
    )
    if attempt is not None:
        if attempt.status is CompressionStatus.COMPRESSED:
            outcome = f"left {attempt.new_token_count:,} tokens"
        elif attempt.status is CompressionStatus.NOOP:
            outcome = "found nothing to cut"
        else:
            outcome = "failed"
        what = _ATTEMPT_NAMES.get(attempt.trigger, str(attempt.trigger))
        return f"{reason}, after the {what} compaction that {outcome}"
    if estimate < hard:
        tier = config.thresholds.tier(estimate).value
        why = f"the estimate the thresholds use is {estimate:,} ({tier} tier)"
    elif state.breaker.held(estimate):
        why = f"automatic compaction is on hold until {state.hold_until:,} tokens"
    elif state.breaker_open:
        why = "automatic compaction is paused after repeated failures"
    else:
        return f"{reason}; no compaction ran"
    return f"{reason}; no compaction ran: {why}"


def check_trimmed_fits(config: EngineConfig, scale: ProviderScale, trim: TrimResult) -> None:
    """Refuse a trimmed request still over the window (system prompt, tools, last exchange).

    Raises:
        MessageTooLargeError: it is; the message says what to shorten.
    """
    final = scale.tokens(trim.plain_after, scale="best")
    window = config.context_window
    if final > window:
        raise MessageTooLargeError(
            f"the request cannot fit the model's context window of "
            f"{window:,} tokens: even with every earlier turn left out "
            f"it is about {final:,} tokens (system prompt, tool declarations and "
            "the latest exchange); shorten the message or the system prompt, or use "
            "a model with a larger window",
            index=None,
            tokens=final,
            window=window,
        )


def plan_retry(
    config: EngineConfig, state: ConversationState, rejected: TrimResult | None
) -> tuple[ProviderScale, int] | None:
    """The scale for the one retry after a trimmed request was still "too long" (SPEC
    §10.6): raised so the rejected request is over the window, plus the margin; ``None`` when
    the rejected request was not trimmed. Returns the scale and how many messages the rejected
    request dropped (the retry must drop more)."""
    if rejected is None or rejected.plain_after <= 0:
        return None
    # The provider counted more than the window for ``plain_after`` estimated tokens: its
    # ratio is at least window / plain_after.
    least = max(provider_scale(state).best, config.context_window / rejected.plain_after)
    return ProviderScale(factor=least * (1 + SIZE_MARGIN), known=True), rejected.dropped

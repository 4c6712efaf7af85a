"""What one compaction attempt takes and gives: its options, trigger, status and telemetry.

Split from :mod:`autocompact.compaction.plan`, which runs the attempt and re-exports these names.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, TypeAlias

from autocompact.compaction.clearing import DEFAULT_PROTECT_TOKENS
from autocompact.compaction.space import SpaceBreakdown
from autocompact.compaction.split import COMPRESSION_PRESERVE_THRESHOLD
from autocompact.content import Message
from autocompact.errors import ConfigError
from autocompact.estimation import PendingMessage
from autocompact.providers.base import ChatRequest, Completion, ToolSpec
from autocompact.thresholds import DEFAULT_IMAGE_TOKEN_ESTIMATE
from autocompact.validation import check_count, check_optional_str, check_share

__all__ = [
    "CompressOptions",
    "CompressionFlow",
    "CompressionInfo",
    "CompressionResult",
    "CompressionStatus",
    "CompressionTrigger",
    "Method",
    "Summarizer",
]

Summarizer: TypeAlias = Callable[..., str]
"""Writes a summary without a model (used when no provider is available): called with the
messages to summarize, and with ``max_tokens=`` the summary's cap when it accepts that keyword."""


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
    COMPRESSION_FAILED_ECHO = "compression_failed_echo"
    """The reply mostly echoes the summary prompt, the acknowledgement or the system prompt
    (SPEC §10.8): it is no summary and is never kept."""

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
        last_prompt_token_count: the provider's count of the history, or the caller's count of
            it on the provider's scale (the engine's calibrated estimate when it has no count);
            0: unknown, the compaction estimates it.
        trigger: what asked for the compaction (recorded in telemetry).
        system_instruction, tools: counted by the cold estimate.
        image_token_estimate: tokens per image or document.
        instructions: extra instructions for the summary (``/compress ...``).
        clear_tool_outputs: run tool-output clearing (no model call) before the summary on
            automatic triggers; a manual ``/compress`` always summarizes.
        protect_tool_tokens: the newest tool output kept by clearing.
        keep_share: the share of the history (estimated tokens) kept verbatim, ``0 ≤ x < 1``;
            0 summarizes everything that can be (SPEC §10.1).
        summary_target_tokens: the summary's target size; the local summarizer honours it
            strictly, the side query gets it in the prompt and as its output cap when below 20K.
        summarizer_window: the summarizing model's window when it differs from
            ``context_window`` (the side query is sized to fit it, SPEC §10.4).
        token_scale: provider tokens per plain estimated token, as the session learned it; side
            queries are sized with ``max(1, token_scale)``, and what a compaction removes from a
            ``last_prompt_token_count`` above the plain estimate is taken off at this scale (at
            most the count's own ratio to the estimate).
        clear_at_least_tokens: clearing acts only when it frees at least this much
            (``None``: :data:`CLEAR_AT_LEAST_SHARE` of the window).
        growth_room_tokens: the room to leave below *auto* for the session's expected growth
            (:meth:`GrowthLog.expected_growth`): the kept tail shrinks, down to keeping only
            what must be kept, so the count after is at most ``auto − growth_room_tokens``, and
            clearing alone is enough only when it leaves that room (design decision 63).
        skip_without_room: on automatic, hard and reactive triggers, send no side query when no
            summary can buy room (design decision 70); ``replay``'s legacy policy turns it off
            to simulate the rule before it.

    Raises:
        ConfigError: a count that is not a whole number (the window: not 1 or more), a share
            outside ``[0, 1)``, a trigger that is not a :class:`CompressionTrigger`, a system
            instruction or instructions that are not a str or ``None``.
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
    keep_share: float = COMPRESSION_PRESERVE_THRESHOLD
    summary_target_tokens: int | None = None
    summarizer_window: int | None = None
    token_scale: float = 1.0
    clear_at_least_tokens: int | None = None
    growth_room_tokens: int = 0
    skip_without_room: bool = True

    def __post_init__(self) -> None:
        check_count(self.context_window, "context_window", positive=True)
        check_count(self.consecutive_failures, "consecutive_failures")
        check_count(self.last_prompt_token_count, "last_prompt_token_count")
        check_count(self.image_token_estimate, "image_token_estimate")
        check_count(self.protect_tool_tokens, "protect_tool_tokens")
        check_optional_str(self.system_instruction, "system_instruction")
        check_optional_str(self.instructions, "instructions")
        check_share(self.keep_share, "keep_share")
        check_count(
            self.summary_target_tokens, "summary_target_tokens", positive=True, optional=True
        )
        if not isinstance(self.trigger, CompressionTrigger):
            raise ConfigError(
                f"trigger must be a CompressionTrigger, got {type(self.trigger).__name__} "
                f"{self.trigger!r:.60}",
                key="trigger",
            )


@dataclass(frozen=True, kw_only=True)
class CompressionInfo:
    """Telemetry of one compaction attempt (SPEC §6).

    Attributes:
        status, trigger: the outcome and what asked for it.
        original_token_count: the history's size before (provider count when known).
        new_token_count: its size after, on the original's scale (equal to the original on any
            failure or no-op).
        compression_input_token_count: the side query's prompt size.
        compression_output_token_count: the side query's output size (the summary).
        compressed_messages, kept_messages: how many messages were summarized and kept.
        error: why it failed or did nothing, in words.
        summary: the summary text, when one was accepted.
        method: what reduced the history: ``summary``, ``native`` (the provider's own
            compaction block), ``clearing`` (no model) or ``none``.
        cleared_tool_outputs, clearing_tokens_saved: what tool-output clearing did.
        ineffective: an automatic, hard or reactive compaction that left the count at or above
            *warn* (SPEC §10.2): kept, but counted toward the breaker.
        summary_failure: the summary failed after a clearing that stands (SPEC §10.3).
        breakdown: what holds the space after the attempt, by category.
        side_queries: how many side queries were sent (more than 1 when chunked).
        audited: how many of the ledger's constraints, preferences and latest facts the summary
            was checked for (issue 22).
        restored: how many of those a model's summary lacked and were appended verbatim.
        ledger_dropped: how many of those the summary does not hold because even shortened
            they did not fit its target (the extractive summarizer under a binding
            ``summary_target_tokens``): 0 means nothing was dropped silently.
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
    ineffective: bool = False
    summary_failure: CompressionStatus | None = None
    breakdown: SpaceBreakdown | None = None
    side_queries: int = 0
    audited: int = 0
    restored: int = 0
    ledger_dropped: int = 0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        out: dict[str, Any] = {}
        for name, value in self.__dict__.items():
            if isinstance(value, StrEnum):
                value = value.value
            elif isinstance(value, SpaceBreakdown):
                value = dict(value.__dict__)
            out[name] = value
        return out


@dataclass(frozen=True)
class CompressionResult:
    """The history after the attempt (the same object on failure) and its telemetry."""

    history: tuple[Message, ...]
    info: CompressionInfo = field()


CompressionFlow: TypeAlias = Generator[ChatRequest, Completion, CompressionResult]

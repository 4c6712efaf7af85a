"""What a summarizer's reply is worth: a refusal, a truncation, an empty reply or an echo of
the prompt is never kept (SPEC §10.8). Pure; split from :mod:`autocompact.compaction.plan`."""

from __future__ import annotations

from autocompact.compaction.attempt import CompressionStatus, CompressOptions
from autocompact.compaction.echo import echo_source
from autocompact.compaction.native import native_part
from autocompact.compaction.prompts import (
    SUMMARY_ACKNOWLEDGEMENT,
    SUMMARY_FINAL_INSTRUCTION,
    SUMMARY_PREAMBLE,
    summary_system_prompt,
)
from autocompact.compaction.sidequery import truncated
from autocompact.providers.base import Completion, FinishReason

__all__ = ["echo", "refusal"]


def refusal(completion: Completion, cap: int) -> tuple[CompressionStatus, str] | None:
    """Why a reply is no summary (filtered, truncated, empty), or ``None``."""
    if completion.finish_reason is FinishReason.CONTENT_FILTER:
        return (
            CompressionStatus.COMPRESSION_FAILED_CONTENT_FILTER,
            "the summary was stopped by the provider's content filter or refused "
            f"({completion.raw_finish_reason or 'content_filter'}); a partial summary is never "
            "kept",
        )
    if truncated(completion, cap):
        return (
            CompressionStatus.COMPRESSION_FAILED_OUTPUT_TRUNCATED,
            "the summary stopped at its output cap; a truncated summary is never kept",
        )
    opaque = native_part(completion)
    text = opaque.summary if opaque is not None else completion.text
    if not text.strip():
        return CompressionStatus.COMPRESSION_FAILED_EMPTY_SUMMARY, "the summary was empty"
    return None


def echo(summary: str, options: CompressOptions) -> tuple[CompressionStatus, str] | None:
    """Why a summary is mostly an echo of a prompt, or ``None``."""
    source = echo_source(
        summary,
        {
            "the summary prompt": summary_system_prompt(options.instructions)
            + "\n"
            + SUMMARY_FINAL_INSTRUCTION,
            "the acknowledgement": SUMMARY_PREAMBLE + "\n" + SUMMARY_ACKNOWLEDGEMENT,
            "the system prompt": options.system_instruction,
        },
    )
    if source is None:
        return None
    return (
        CompressionStatus.COMPRESSION_FAILED_ECHO,
        f"the reply is mostly an echo of {source}, not a summary of the conversation; "
        "it is never kept",
    )

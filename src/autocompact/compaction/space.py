"""What holds the space in a context: the breakdown by category (SPEC §10.2). Pure.

Used to explain an ineffective compaction ("the kept tail holds 40K") and by ``/context`` at any
time. Sizes are the plain local estimate (SPEC §4) of each category; they show proportions, not
the provider's exact count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from autocompact.compaction.prompts import SUMMARY_ACKNOWLEDGEMENT, SUMMARY_PREAMBLE
from autocompact.content import FunctionCallPart, FunctionResponsePart, Message
from autocompact.estimation import (
    estimate_content_tokens,
    estimate_text_tokens,
    estimate_tools_tokens,
)
from autocompact.providers.base import ToolSpec
from autocompact.thresholds import DEFAULT_IMAGE_TOKEN_ESTIMATE

__all__ = ["SpaceBreakdown", "is_summary_message", "space_breakdown"]


@dataclass(frozen=True, kw_only=True)
class SpaceBreakdown:
    """Estimated tokens per category of a context.

    Attributes:
        system_and_tools: the system prompt and the tool declarations.
        summary: the compaction summary and its acknowledgement (0 when none).
        tool_traffic: function calls and their results in the rest of the history.
        conversation: everything else in the history (requests, replies, thinking, media).
    """

    system_and_tools: int
    summary: int
    tool_traffic: int
    conversation: int

    @property
    def kept(self) -> int:
        """The history besides the summary (what a compaction kept verbatim, and what came
        after it)."""
        return self.tool_traffic + self.conversation

    @property
    def total(self) -> int:
        """All categories together."""
        return self.system_and_tools + self.summary + self.kept

    def rows(self) -> tuple[tuple[str, int], ...]:
        """``(label, tokens)`` per category, in display order."""
        return (
            ("System prompt and tools", self.system_and_tools),
            ("Summary", self.summary),
            ("Tool calls and results", self.tool_traffic),
            ("Conversation", self.conversation),
        )

    def largest(self) -> str:
        """The label of the largest category."""
        return max(self.rows(), key=lambda row: row[1])[0]


def is_summary_message(message: Message) -> bool:
    """Whether ``message`` is a compaction summary or its acknowledgement."""
    text = message.text
    if message.role == "user":
        return text.startswith(SUMMARY_PREAMBLE)
    return text == SUMMARY_ACKNOWLEDGEMENT and not message.function_calls


def space_breakdown(
    history: Sequence[Message],
    *,
    system_instruction: str | None = None,
    tools: Sequence[ToolSpec] = (),
    image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE,
) -> SpaceBreakdown:
    """The breakdown of ``history`` plus the fixed part (system prompt and tools)."""
    summary = tool = other = 0
    for index, message in enumerate(history):
        if index < 2 and is_summary_message(message):
            summary += estimate_content_tokens([message], image_token_estimate)
            continue
        parts = message.parts
        if len(parts) == 1:  # the common case: one kind, no generators
            if isinstance(parts[0], FunctionCallPart | FunctionResponsePart):
                tool += estimate_content_tokens(parts)
            else:
                other += estimate_content_tokens(parts, image_token_estimate)
            continue
        traffic = tuple(p for p in parts if isinstance(p, FunctionCallPart | FunctionResponsePart))
        rest = tuple(p for p in parts if not isinstance(p, FunctionCallPart | FunctionResponsePart))
        if traffic:
            tool += estimate_content_tokens(traffic)
        if rest:
            other += estimate_content_tokens(rest, image_token_estimate)
    return SpaceBreakdown(
        system_and_tools=estimate_text_tokens(system_instruction) + estimate_tools_tokens(tools),
        summary=summary,
        tool_traffic=tool,
        conversation=other,
    )

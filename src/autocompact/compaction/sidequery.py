"""The side query that writes the summary: sized to fit the summarizer's window (SPEC §10.4). Pure.

One request when the part to summarize, the prompt and the output cap fit the summarizer's
window. Otherwise the part is cut into chunks that each fit, oldest first; each chunk's request
carries the summary of the chunks before it, which the model updates (SPEC §10.5). Chunks fall
on complete call/response boundaries (:func:`~autocompact.compaction.split.valid_cuts`); a
single turn larger than a chunk is sent as plain text pieces, so no request is ever built over
the window. Every request's output cap is ``min(cap, window − its input)``, where the input is
the plain estimate scaled by what the session learned about the tokenizer (SPEC §10.6).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from autocompact.compaction.extractive import known_ledger
from autocompact.compaction.ledger import Ledger, render_ledger
from autocompact.compaction.prompts import (
    SUMMARY_ACKNOWLEDGEMENT,
    SUMMARY_FINAL_INSTRUCTION,
    summary_system_prompt,
)
from autocompact.compaction.slimming import slim_for_summary
from autocompact.compaction.split import valid_cuts
from autocompact.content import FunctionCallPart, FunctionResponsePart, Message, TextPart, json_form
from autocompact.estimation import BYTES_PER_TOKEN, estimate_content_tokens, estimate_text_tokens
from autocompact.providers.base import ChatRequest, Completion, FinishReason
from autocompact.thresholds import COMPACT_MAX_OUTPUT_TOKENS

__all__ = [
    "CARRY_PREAMBLE",
    "DEFAULT_SUMMARY_SHARE",
    "MIN_SIDE_OUTPUT_TOKENS",
    "SUMMARY_WINDOW_SHARE",
    "SideQueryPlan",
    "call_summarizer",
    "no_room_reason",
    "plan_side_queries",
    "side_request",
    "summary_cap",
    "truncated",
]

CARRY_PREAMBLE = "The state snapshot of the conversation before the part below:\n\n"
MIN_SIDE_OUTPUT_TOKENS = 256
"""The smallest output cap a side query is sent with; a window that leaves less cannot summarize."""
DEFAULT_SUMMARY_SHARE = 0.1
"""What a summary is expected to take of the part it summarizes, when the split is chosen (an
estimate; the local summarizer's target is :func:`summary_cap`'s, design decision 72)."""
SUMMARY_WINDOW_SHARE = 0.05
"""The local summarizer's default target: this share of the window, less when the compaction
must free more (design decision 72)."""
MIN_SUMMARY_TARGET = 64
_MARGIN_TOKENS = 64  # role and framing overhead per request, in plain estimated tokens
_FIRST_USER = "(earlier conversation follows)"
_LEDGER_PROMPT_CHARS = 16_000  # the ledger shown to the summarizing model, at most
_LEDGER_WINDOW_SHARE = 8  # ... and at most this fraction of the summarizer's window


@dataclass(frozen=True, kw_only=True)
class SideQueryPlan:
    """How the part to summarize is sent.

    Attributes:
        chunks: the slimmed messages of each request, oldest first (one chunk: no chunking).
        output_cap: the summary's cap (``min(20K, target)``), before the window's own limit.
        window: the summarizer's context window.
        scale: provider tokens per plain estimated token (≥ 1; sizes err high).
        system_instruction: the side query's system prompt.
    """

    chunks: tuple[tuple[Message, ...], ...]
    output_cap: int
    window: int
    scale: float
    system_instruction: str


def _scaled(plain: int, scale: float) -> int:
    return math.ceil(plain * scale)


def no_room_reason(instructions: str | None) -> str:
    """Why :func:`plan_side_queries` found no plan, naming the caller's instructions when there
    are any (a user who pasted a long text after ``/compress`` learns what to shorten)."""
    reason = "the summarizer's window is too small to hold a side query"
    if instructions:
        tokens = estimate_text_tokens(instructions)
        reason += f" with the {tokens:,}-token instructions given: shorten them"
    return reason


def ledger_prompt_chars(window: int) -> int:
    """How much of the ledger a summary request shows its model: 16,000 characters, and at
    most an eighth of the summarizer's window, so that a small window (a local model, a small
    summarizer) still holds the part to summarize beside it (the audit of the reply reads the
    whole ledger all the same)."""
    return min(_LEDGER_PROMPT_CHARS, window * BYTES_PER_TOKEN // _LEDGER_WINDOW_SHARE)


def plan_side_queries(
    to_compress: Sequence[Message],
    *,
    output_cap: int,
    window: int,
    scale: float = 1.0,
    instructions: str | None = None,
    target_tokens: int | None = None,
    image_token_estimate: int,
    ledger: Ledger | None = None,
) -> SideQueryPlan | None:
    """The chunks to send, or ``None`` when the window cannot hold even one useful request.

    ``ledger``, when given, is shown to the model in the system prompt, within
    :func:`ledger_prompt_chars` of the window.
    """
    scale = max(1.0, scale)
    shown = render_ledger(ledger, ledger_prompt_chars(window)) if ledger is not None else None
    system = summary_system_prompt(instructions, target_tokens=target_tokens, ledger=shown)
    slimmed = slim_for_summary(to_compress)
    fixed = (
        estimate_text_tokens(system)
        + estimate_text_tokens(SUMMARY_FINAL_INSTRUCTION)
        + estimate_text_tokens(SUMMARY_ACKNOWLEDGEMENT)
        + _MARGIN_TOKENS
    )
    whole = estimate_content_tokens(slimmed, image_token_estimate)

    def plan(chunks: Sequence[tuple[Message, ...]]) -> SideQueryPlan:
        return SideQueryPlan(
            chunks=tuple(chunks),
            output_cap=output_cap,
            window=window,
            scale=scale,
            system_instruction=system,
        )

    if _scaled(whole + fixed, scale) + output_cap <= window:
        return plan([slimmed])
    # Chunks: the output and the carried summary each take at most a quarter of the window.
    out = min(output_cap, window // 4)
    budget = math.floor((window - 2 * out) / scale) - fixed - estimate_text_tokens(CARRY_PREAMBLE)
    if out < MIN_SIDE_OUTPUT_TOKENS or budget < MIN_SIDE_OUTPUT_TOKENS:
        return None
    return plan(_chunks(slimmed, budget, image_token_estimate))


def _chunks(
    messages: tuple[Message, ...], budget: int, image_token_estimate: int
) -> list[tuple[Message, ...]]:
    cuts = valid_cuts(messages)
    segments: list[tuple[Message, ...]] = []
    start = 0
    for index in range(1, len(messages) + 1):
        if cuts[index] or index == len(messages):
            segments.append(messages[start:index])
            start = index
    chunks: list[tuple[Message, ...]] = []
    current: list[Message] = []
    size = 0
    for segment in segments:
        tokens = estimate_content_tokens(segment, image_token_estimate)
        if tokens > budget:
            if current:
                chunks.append(tuple(current))
                current, size = [], 0
            chunks.extend((piece,) for piece in _text_pieces(segment, budget))
            continue
        if size + tokens > budget and current:
            chunks.append(tuple(current))
            current, size = [], 0
        current.extend(segment)
        size += tokens
    if current:
        chunks.append(tuple(current))
    return chunks


def _as_text(message: Message) -> str:
    lines = []
    for part in message.parts:
        if isinstance(part, TextPart):
            lines.append(part.text)
        elif isinstance(part, FunctionCallPart):
            lines.append(f"[called {part.name} {json_form(part.arguments)}]")
        elif isinstance(part, FunctionResponsePart):
            body = part.response if isinstance(part.response, str) else json_form(part.response)
            lines.append(f"[result of {part.name}{' (error)' if part.is_error else ''}] {body}")
    return f"{message.role}: " + "\n".join(lines)


def _text_pieces(segment: Sequence[Message], budget: int) -> list[Message]:
    """A turn too large for one chunk, as plain text user messages that each fit."""
    text = "\n\n".join(_as_text(m) for m in segment)
    size = max(1, (budget - 16) * BYTES_PER_TOKEN)
    count = math.ceil(len(text) / size)
    return [
        Message.user(
            f"(part {k + 1} of {count} of one long turn)\n{text[k * size : (k + 1) * size]}"
        )
        for k in range(count)
    ]


def side_request(plan: SideQueryPlan, index: int, carried: str | None) -> ChatRequest:
    """The request for chunk ``index``, carrying the summary written so far."""
    chunk = plan.chunks[index]
    head: tuple[Message, ...] = ()
    if carried:
        head = (Message.user(CARRY_PREAMBLE + carried),)
        if chunk and chunk[0].role == "user":
            head = (*head, Message.model(SUMMARY_ACKNOWLEDGEMENT))
    elif not chunk or chunk[0].role != "user":
        head = (Message.user(_FIRST_USER),)
    messages = (*head, *chunk, Message.user(SUMMARY_FINAL_INSTRUCTION))
    used = _scaled(
        estimate_content_tokens(messages) + estimate_text_tokens(plan.system_instruction),
        plan.scale,
    )
    cap = max(1, min(plan.output_cap, plan.window - used))
    return ChatRequest(
        messages=messages,
        system_instruction=plan.system_instruction,
        max_output_tokens=cap,
        thinking=False,
        purpose="side_query",
    )


def summary_cap(
    to_compress: Sequence[Message],
    target: int | None,
    *,
    local: bool,
    image_token_estimate: int,
    window: int = 0,
    must_free: int = 0,
    need: int = 0,
) -> int:
    """The summary's output cap: ``min(20K, target)`` when a target is set.

    A local summarizer without a target (design decision 72) gets the room the compaction can
    spend: :data:`SUMMARY_WINDOW_SHARE` of the ``window``, less when the compaction must free
    ``must_free`` tokens of what it summarizes (the summary takes at most the rest), and never
    less than ``need`` (what the ledger's constraints and latest facts take), at most 20K. It
    does not follow the size of the part summarized, so repeated compaction does not decay.
    """
    if target is None and local:
        compressed = estimate_content_tokens(to_compress, image_token_estimate)
        room = round(SUMMARY_WINDOW_SHARE * window) if window > 0 else compressed // 10
        if must_free > 0:
            room = min(room, compressed - must_free)
        target = max(MIN_SUMMARY_TARGET, need, room)
    return min(COMPACT_MAX_OUTPUT_TOKENS, target) if target else COMPACT_MAX_OUTPUT_TOKENS


def call_summarizer(
    summarizer: Callable[..., str],
    messages: Sequence[Message],
    cap: int,
    *,
    ledger: Ledger | None = None,
) -> str:
    """The local summary, passing the cap as ``max_tokens`` when the summarizer accepts it.

    ``ledger``, when given, is ``build_ledger(messages)``: an extractive summary of these same
    messages made during the call reads it instead of building it again.
    """
    try:
        accepts = "max_tokens" in inspect.signature(summarizer).parameters
    except (TypeError, ValueError):  # a builtin or C callable without a signature
        accepts = False
    known = known_ledger(messages, ledger) if ledger is not None else None
    try:
        return summarizer(messages, max_tokens=cap) if accepts else summarizer(messages)
    finally:
        if known is not None:
            known.var.reset(known)


def truncated(completion: Completion, cap: int = COMPACT_MAX_OUTPUT_TOKENS) -> bool:
    """Whether the reply stopped on its output cap (a length finish, or no finish reason and
    output at the cap)."""
    if completion.finish_reason is FinishReason.LENGTH:
        return True
    if completion.finish_reason is None:
        usage = completion.usage
        return usage is not None and usage.output_tokens >= cap
    return False

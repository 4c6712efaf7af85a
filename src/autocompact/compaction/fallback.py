"""The guarantee: never send a request over the window (issue 6, SPEC §10.6). Pure.

When the count is still at or above the hard threshold after the rescue (the summary failed, the
breaker is open, no model is available), the oldest turns are left out of the *request* — never
out of the saved history — until it is below the auto threshold. What is kept: the first message
when it is a plain user message (usually the task, or an earlier summary) and keeping it still
fits, a marker saying how many messages were left out, the most recent turns, and the message
being sent. A cut never falls between a call and its response (the message being sent may be the
response), so every call/response pair stays whole; user and model turns keep alternating.

Sizes are on the provider's scale (SPEC §10.6): the kept request — system prompt, tool
declarations, marker, kept turns and the pending message — is its plain estimate times a
:class:`ProviderScale` learned from the provider's own counts, with a margin. It is never
"provider count minus a plain estimate of what was removed": the two count different units, and
the error of that difference grows with what is left out (issue 11). With nothing learned yet
the scale assumes the largest tokenizer ratio the engine supports (2.0), so a restored history's
first request fits even when the provider counts twice the estimate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from autocompact.content import FunctionResponsePart, Message, TextPart
from autocompact.errors import MessageTooLargeError
from autocompact.estimation import estimate_content_tokens

__all__ = [
    "SIZE_MARGIN",
    "UNKNOWN_SCALE",
    "ProviderScale",
    "TrimResult",
    "check_message_fits",
    "trim_request",
]

SIZE_MARGIN = 0.1
"""Added on top of a learned scale when sizing what is sent: one ratio for the whole request
cannot follow a tokenizer that counts text and JSON differently, and the kept part's mix is not
the mix the ratio was learned on."""

UNKNOWN_SCALE = 2.0
"""The scale assumed for sizing before the provider ever reported a count: the largest ratio of
provider tokens to the plain estimate the engine supports (real tokenizers measure 0.5–2.0)."""


@dataclass(frozen=True, kw_only=True)
class ProviderScale:
    """How the provider's tokens relate to the plain estimate (SPEC §10.6).

    Attributes:
        factor: provider tokens per plain-estimate token (the session's calibration, or the
            ratio of the last reported count to the plain estimate of what it counted).
        known: whether ``factor`` was learned from the provider; unknown scales size with
            :data:`UNKNOWN_SCALE`.
    """

    factor: float = 1.0
    known: bool = False

    @property
    def sizing(self) -> float:
        """The scale that sizes what a trimmed request keeps: the factor plus the margin, or
        the worst case when nothing is known."""
        if not self.known:
            return UNKNOWN_SCALE
        return self.factor * (1 + SIZE_MARGIN)

    @property
    def trigger(self) -> float:
        """The scale that decides whether to trim at all: the factor plus the margin, or the
        plain estimate when nothing is known (as the ladder itself does: trimming a restored
        history below the hard threshold on a guess would drop context for nothing)."""
        return self.sizing if self.known else 1.0

    @property
    def best(self) -> float:
        """The best guess, used to refuse what cannot fit (1.0 when nothing is known)."""
        return self.factor if self.known else 1.0

    def tokens(
        self, plain: float, *, scale: Literal["sizing", "trigger", "best"] = "sizing"
    ) -> int:
        """``plain`` estimated tokens on the provider's scale."""
        factor = {"sizing": self.sizing, "trigger": self.trigger, "best": self.best}[scale]
        return math.ceil(plain * factor)


@dataclass(frozen=True, kw_only=True)
class TrimResult:
    """The messages to send and what was left out.

    Attributes:
        messages: the request's messages (history part plus the pending message).
        dropped: how many history messages were left out (0: nothing trimmed).
        tokens_after: the size of the request on the provider's sizing scale (system prompt
            and tools included).
        left_out_tokens: the plain estimate of the history messages left out.
        plain_after: the plain estimate of the request (system prompt and tools included).
    """

    messages: tuple[Message, ...]
    dropped: int
    tokens_after: int
    left_out_tokens: int
    plain_after: int = 0


def marker_text(dropped: int) -> str:
    """The note that stands in for the messages left out of a request."""
    what = "1 earlier message" if dropped == 1 else f"{dropped} earlier messages"
    verb = "was" if dropped == 1 else "were"
    return (
        f"[{what} of this conversation {verb} left out of this request here to fit the "
        "model's context window.]"
    )


def check_message_fits(
    message: Message,
    *,
    window: int,
    image_token_estimate: int,
    index: int | None = None,
    fixed_tokens: int = 0,
    scale: ProviderScale | None = None,
) -> None:
    """Raise before sending when a message cannot fit even in the smallest request.

    The smallest request still carries the system prompt and the tool declarations
    (``fixed_tokens``, plain estimate); it is compared with the window on the provider's scale
    (best guess: only what surely cannot fit is refused).

    Raises:
        MessageTooLargeError: names the message, its size and what else the request carries.
    """
    scale = scale or ProviderScale()
    plain = estimate_content_tokens([message], image_token_estimate)
    tokens = scale.tokens(plain + fixed_tokens, scale="best")
    if tokens > window:
        which = "the message being sent" if index is None else f"history message {index}"
        fixed = scale.tokens(fixed_tokens, scale="best")
        extra = (
            f" (with the system prompt and tool declarations, about {fixed:,} tokens)"
            if fixed_tokens
            else ""
        )
        raise MessageTooLargeError(
            f"{which} alone is about {tokens - fixed:,} tokens{extra}, larger than the model's "
            f"whole context window of {window:,}: split it, shorten it, or use a model with a "
            "larger window",
            index=index,
            tokens=tokens,
            window=window,
        )


def trim_request(
    history: Sequence[Message],
    pending: Message,
    *,
    target: float,
    image_token_estimate: int,
    scale: ProviderScale | None = None,
    fixed_tokens: int = 0,
) -> TrimResult:
    """Leave out the oldest turns until the request is below ``target`` on the provider's scale.

    The first message is kept while that is enough; when even the shortest request that keeps
    it is over the target, it is left out too. A request already below the target is returned
    whole.

    Args:
        history: the conversation before the pending message.
        pending: the message about to be sent.
        target: the size to get below (the auto threshold), in provider tokens.
        image_token_estimate: tokens per image or document.
        scale: how provider tokens relate to the plain estimate (sizing scale is used).
        fixed_tokens: the plain estimate of the system prompt and tool declarations.
    """
    scale = scale or ProviderScale()
    full = (*history, pending)
    sizes = [estimate_content_tokens([m], image_token_estimate) for m in history]
    prefix = [0]
    for size in sizes:
        prefix.append(prefix[-1] + size)
    fixed = fixed_tokens + estimate_content_tokens([pending], image_token_estimate)
    whole = fixed + prefix[-1]
    if scale.tokens(whole) < target or not history:
        return TrimResult(
            messages=full,
            dropped=0,
            tokens_after=scale.tokens(whole),
            left_out_tokens=0,
            plain_after=whole,
        )
    marker_tokens = estimate_content_tokens([Message.user(marker_text(len(history)))])
    starts = (1, 0) if _plain_user(history[0]) else (0,)
    best: TrimResult | None = None
    for start in starts:
        for cut in _cut_points(history, pending, start):
            left_out = prefix[cut] - prefix[start]
            plain = whole - left_out + marker_tokens
            best = TrimResult(
                messages=_assemble(history, pending, start, cut),
                dropped=cut - start,
                tokens_after=scale.tokens(plain),
                left_out_tokens=left_out,
                plain_after=plain,
            )
            if best.tokens_after < target:
                return best
    # Even the shortest request is over the target: send the shortest one (the caller checks it
    # against the window).
    assert best is not None
    return best


def _cut_points(history: Sequence[Message], pending: Message, start: int) -> list[int]:
    """Where the kept tail may begin: any index after ``start`` at which no call in the left-out
    part is answered in the kept part (the pending message included), and the end."""
    answered_at: dict[str, int] = {}
    for index, message in enumerate((*history, pending)):
        for part in message.parts:
            if isinstance(part, FunctionResponsePart):
                answered_at.setdefault(part.id, index)
    points: list[int] = []
    # Calls left out so far whose response comes later (a dangling call may be left out).
    waiting: set[str] = set()
    for index in range(start, len(history) + 1):
        if index > start and not waiting:
            points.append(index)
        if index == len(history):
            break
        message = history[index]
        for part in message.parts:
            if isinstance(part, FunctionResponsePart):
                waiting.discard(part.id)
        waiting.update(
            call.id for call in message.function_calls if answered_at.get(call.id, -1) > index
        )
    return points


def _assemble(
    history: Sequence[Message], pending: Message, start: int, cut: int
) -> tuple[Message, ...]:
    """The request: [first message], a marker, the kept tail and the pending message, with
    user and model turns still alternating where the marker stands."""
    marker = TextPart(text=marker_text(cut - start))
    tail = (*history[cut:], pending)
    head = tail[0]
    if start == 1:
        # The first message stays the same object; the marker joins the turn after it.
        if head.role == "user":
            return (history[0], Message(role="model", parts=(marker,)), *tail)
        return (history[0], Message(role="model", parts=(marker, *head.parts)), *tail[1:])
    if head.role == "user":
        return (Message(role="user", parts=(marker, *head.parts)), *tail[1:])
    return (Message(role="user", parts=(marker,)), *tail)


def _plain_user(message: Message) -> bool:
    return message.role == "user" and not any(
        isinstance(p, FunctionResponsePart) for p in message.parts
    )

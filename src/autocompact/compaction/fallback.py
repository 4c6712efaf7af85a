"""The guarantee: never send a request over the window (issue 6). Pure.

When the count is still at or above the hard threshold after the rescue (the summary failed, the
breaker is open, no model is available), the oldest turns are left out of the *request* — never
out of the saved history — until the estimate is below the auto threshold. What is kept: the first
message when it is a plain user message (usually the task, or an earlier summary) and keeping it
still fits, a marker saying how many messages were left out, the most recent turns, and the message
being sent. A cut never falls between a call and its response (the message being sent may be the
response), so every call/response pair stays whole; user and model turns keep alternating.

Sizes: the count of the full request comes from the caller (the provider's count where known);
what is removed is estimated by the shared counter, which undercounts real tokenizers, so the
count after trimming errs high and the request errs small.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from autocompact.content import FunctionResponsePart, Message, TextPart
from autocompact.errors import MessageTooLargeError
from autocompact.estimation import estimate_content_tokens

__all__ = ["TrimResult", "check_message_fits", "trim_request"]


@dataclass(frozen=True, kw_only=True)
class TrimResult:
    """The messages to send and what was left out.

    Attributes:
        messages: the request's messages (history part plus the pending message).
        dropped: how many history messages were left out (0: nothing trimmed).
        tokens_after: the estimated size of the trimmed request.
        left_out_tokens: the estimated size of the history messages left out.
    """

    messages: tuple[Message, ...]
    dropped: int
    tokens_after: int
    left_out_tokens: int


def marker_text(dropped: int) -> str:
    """The note that stands in for the messages left out of a request."""
    return (
        f"[{dropped} earlier message{'s' if dropped != 1 else ''} of this conversation were left "
        "out of this request to fit the model's context window.]"
    )


def check_message_fits(
    message: Message, *, window: int, image_token_estimate: int, index: int | None = None
) -> None:
    """Raise before sending when one message alone is larger than the window.

    Raises:
        MessageTooLargeError: names the message and its size.
    """
    tokens = estimate_content_tokens([message], image_token_estimate)
    if tokens > window:
        which = "the message being sent" if index is None else f"history message {index}"
        raise MessageTooLargeError(
            f"{which} alone is about {tokens:,} tokens, larger than the model's whole context "
            f"window of {window:,}: split it, shorten it, or use a model with a larger window",
            index=index,
            tokens=tokens,
            window=window,
        )


def trim_request(
    history: Sequence[Message],
    pending: Message,
    *,
    count: int,
    target: float,
    image_token_estimate: int,
) -> TrimResult:
    """Leave out the oldest turns until the request's estimate is below ``target``.

    The first message is kept while that is enough; when even the shortest request that keeps
    it is over the target, it is left out too.

    Args:
        history: the conversation before the pending message.
        pending: the message about to be sent.
        count: the size of ``history + pending`` as the caller counts it.
        target: the size to get below (the auto threshold).
        image_token_estimate: tokens per image or document.
    """
    full = (*history, pending)
    if count < target or not history:
        return TrimResult(messages=full, dropped=0, tokens_after=count, left_out_tokens=0)
    sizes = [estimate_content_tokens([m], image_token_estimate) for m in history]
    prefix = [0]
    for size in sizes:
        prefix.append(prefix[-1] + size)
    marker_tokens = estimate_content_tokens([Message.user(marker_text(len(history)))])
    starts = (1, 0) if _plain_user(history[0]) else (0,)
    best: TrimResult | None = None
    for start in starts:
        for cut in _cut_points(history, pending, start):
            left_out = prefix[cut] - prefix[start]
            after = count - left_out + marker_tokens
            best = TrimResult(
                messages=_assemble(history, pending, start, cut),
                dropped=cut - start,
                tokens_after=max(after, 0),
                left_out_tokens=left_out,
            )
            if after < target:
                return best
    # Even the shortest request is over the target: send the shortest one.
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

"""The guarantee: never send a request over the window (issue 6, SPEC §10.6). Pure.

When the count is still at or above the hard threshold after the rescue (the summary failed, the
breaker is open, no model is available), the oldest turns are left out of the *request* — never
out of the saved history — until it is below the auto threshold. What is always kept: the current
task (the latest plain user message), the newest complete exchange and the message being sent;
also the first message when it is a plain user message (usually the first task, or an earlier
summary) and keeping it still fits; a marker stands for each run of messages left out. A trim that
would not make the request smaller is not made; knowing the window, a request no trim gets below
the threshold is sent whole when it fits, and an unknown scale trims to just below the threshold
(within the window at the worst case), not to half of it. A cut never falls between a call and
its response (the message being sent may be the response), so every call/response pair stays
whole; user and model turns keep alternating.

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
        MessageTooLargeError: names the message (and the tool result that makes most of it:
            its tool's name and call id), its size, what else the request carries and what to
            do.
    """
    scale = scale or ProviderScale()
    plain = estimate_content_tokens([message], image_token_estimate)
    tokens = scale.tokens(plain + fixed_tokens, scale="best")
    if tokens <= window:
        return
    fixed = scale.tokens(fixed_tokens, scale="best")
    size = tokens - fixed
    which = "the message being sent" if index is None else f"history message {index}"
    what = f"{which} is about {size:,} tokens"
    advice = "split it, shorten it, or use a model with a larger window"
    result = _largest_result(message, image_token_estimate)
    if result is not None and result[1] * 2 >= plain:  # the tool result is what is too large
        part, part_plain = result
        named = f"the result of tool {part.name!r} (call id {part.id!r})"
        if len(message.parts) == 1:
            what = f"{which}, {named}, is about {size:,} tokens"
        else:
            share = min(size, math.ceil(size * part_plain / max(plain, 1)))
            what = f"{what}, {share:,} of them {named}"
        advice = (
            "make the tool return less (truncate or page its output), or use a model with a "
            "larger window"
        )
    if fixed_tokens:
        what += (
            f"; with the system prompt and tool declarations (about {fixed:,} tokens) the "
            f"request is about {tokens:,}"
        )
    raise MessageTooLargeError(
        f"{what}, larger than the model's whole context window of {window:,}: {advice}",
        index=index,
        tokens=tokens,
        window=window,
    )


def _largest_result(
    message: Message, image_token_estimate: int
) -> tuple[FunctionResponsePart, int] | None:
    """The message's largest tool result and its plain estimate (``None``: it holds none)."""
    sized = [
        (part, estimate_content_tokens([part], image_token_estimate))
        for part in message.function_responses
    ]
    return max(sized, key=lambda item: item[1], default=None)


def trim_request(
    history: Sequence[Message],
    pending: Message,
    *,
    target: float,
    image_token_estimate: int,
    scale: ProviderScale | None = None,
    fixed_tokens: int = 0,
    window: int | None = None,
) -> TrimResult:
    """Leave out the oldest turns until the request is below ``target`` on the provider's scale.

    Always kept: the current task (the latest plain user message: the pending message, or the
    one that opened the tool loop the pending message belongs to), the newest complete exchange
    (a call stays with its response; before a new user message, the last user-to-model step),
    and the pending message. User messages right before the pending one are one user turn with
    it, read and kept as such (Anthropic and Gemini join consecutive user messages; a client may
    send tool results, then its text as a message of its own). The first message is kept while
    that is enough; when even the shortest request that keeps it is over the target, it is
    left out too. A request already below the target is returned whole, and so is one that
    leaving turns out would not make smaller.

    With ``window``, a trimmed request only has to be below ``target`` on the trigger scale
    (the scale that decided to trim) and within the window on the sizing scale (the worst
    case), so it is trimmed to just below the threshold, not far below it. When nothing that
    keeps the task gets below the target, the fewest turns are left out that fit the window
    (none when the whole request fits).

    Args:
        history: the conversation before the pending message.
        pending: the message about to be sent.
        target: the size to get below (the auto threshold), in provider tokens.
        image_token_estimate: tokens per image or document.
        scale: how provider tokens relate to the plain estimate (sizing scale is used).
        fixed_tokens: the plain estimate of the system prompt and tool declarations.
        window: the model's context window in provider tokens (None: size on ``target`` only).
    """
    scale = scale or ProviderScale()
    full = (*history, pending)
    sizes = [estimate_content_tokens([m], image_token_estimate) for m in history]
    prefix = [0]
    for size in sizes:
        prefix.append(prefix[-1] + size)
    fixed = fixed_tokens + estimate_content_tokens([pending], image_token_estimate)
    whole = fixed + prefix[-1]
    untrimmed = TrimResult(
        messages=full,
        dropped=0,
        tokens_after=scale.tokens(whole),
        left_out_tokens=0,
        plain_after=whole,
    )
    if scale.tokens(whole) < target or not history:
        return untrimmed
    turn = _turn_start(history)
    new_task = _plain_user(pending) and all(_plain_user(m) for m in history[turn:])
    task = None if new_task else _last_plain_user(history[:turn])
    last_cut = _newest_exchange_start(history[:turn]) if new_task else turn
    pins = [{0, task} - {None}, {task} - {None}] if _plain_user(history[0]) else [{task} - {None}]
    if task == 0:
        pins = [{0}]
    marker_tokens = estimate_content_tokens([Message.user(marker_text(len(history)))])
    points = [cut for cut in _cut_points(history, pending, 0) if cut <= last_cut]
    candidates: list[TrimResult] = []
    for pinned in pins:
        kept_pins = sorted(i for i in pinned if i is not None)
        for cut in points:
            kept = [i for i in kept_pins if i < cut]
            dropped = cut - len(kept)
            if dropped <= 0:
                continue
            left_out = prefix[cut] - sum(sizes[i] for i in kept)
            gaps = _gaps(kept, cut)
            plain = whole - left_out + marker_tokens * len(gaps)
            result = TrimResult(
                messages=_assemble(history, pending, kept, cut),
                dropped=dropped,
                tokens_after=scale.tokens(plain),
                left_out_tokens=left_out,
                plain_after=plain,
            )
            if _accepted(result, scale, target, window):
                return result
            candidates.append(result)
    return _fallback(untrimmed, candidates, scale, window, image_token_estimate)


def _accepted(result: TrimResult, scale: ProviderScale, target: float, window: int | None) -> bool:
    """Whether a trimmed request is small enough: below the target on the sizing scale, or,
    knowing the window, below the target on the trigger scale and within the window on the
    sizing scale."""
    if window is None:
        return result.tokens_after < target
    return (
        scale.tokens(result.plain_after, scale="trigger") < target and result.tokens_after <= window
    )


def _fallback(
    untrimmed: TrimResult,
    candidates: Sequence[TrimResult],
    scale: ProviderScale,
    window: int | None,
    image_token_estimate: int,
) -> TrimResult:
    """Nothing that keeps the task gets below the target: the whole request when it fits the
    window (or when leaving turns out would not make it smaller), else the fewest turns left
    out that fit, else the shortest request (the caller checks it against the window)."""
    if window is not None:
        for result in (untrimmed, *candidates):
            if result.tokens_after <= window:
                return result
    shortest = min(candidates, key=lambda r: r.plain_after, default=untrimmed)
    if shortest.plain_after >= untrimmed.plain_after:
        return untrimmed
    # The sums above round each message up; a request that saves no more than that rounding
    # (a note as long as the turns it replaces) is no smaller as one request: keep it whole.
    if estimate_content_tokens(shortest.messages, image_token_estimate) >= (
        estimate_content_tokens(untrimmed.messages, image_token_estimate)
    ):
        return untrimmed
    return shortest


def _last_plain_user(history: Sequence[Message]) -> int | None:
    """The index of the latest plain user message (the current task), if any."""
    for index in range(len(history) - 1, -1, -1):
        if _plain_user(history[index]):
            return index
    return None


def _turn_start(history: Sequence[Message]) -> int:
    """Where the user turn the pending message ends begins: after the last model message (the
    user messages after it are one turn with the pending message)."""
    for index in range(len(history) - 1, -1, -1):
        if history[index].role == "model":
            return index + 1
    return 0


def _newest_exchange_start(history: Sequence[Message]) -> int:
    """The latest index the kept tail may begin at so that it holds the newest complete
    exchange before a new user turn (``history``: the messages before that turn, ending with a
    model message): the last user-role message followed by a model reply."""
    model = next((i for i in range(len(history) - 1, -1, -1) if history[i].role == "model"), None)
    if model is None:
        return len(history)
    user = next((i for i in range(model - 1, -1, -1) if history[i].role == "user"), None)
    return model if user is None else user


def _gaps(kept: Sequence[int], cut: int) -> list[tuple[int, int]]:
    """The runs of left-out history indices before ``cut`` around the kept (pinned) ones."""
    gaps: list[tuple[int, int]] = []
    begin = 0
    for index in (*kept, cut):
        if index > begin:
            gaps.append((begin, index))
        begin = index + 1
    return gaps


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
    history: Sequence[Message], pending: Message, kept: Sequence[int], cut: int
) -> tuple[Message, ...]:
    """The request: the kept (pinned) messages, a marker for each run left out, the kept tail
    and the pending message, with user and model turns still alternating where a marker stands
    (it joins the next message when a message of its own would break the alternation)."""
    out: list[Message] = []
    sequence: list[Message | int] = []
    begin = 0
    for index in (*kept, cut):
        if index > begin:
            sequence.append(index - begin)  # a run left out
        if index < cut:
            sequence.append(history[index])
        begin = index + 1
    sequence.extend(history[cut:])
    sequence.append(pending)
    carried: TextPart | None = None
    for position, item in enumerate(sequence):
        if isinstance(item, int):
            marker = TextPart(text=marker_text(item))
            previous = out[-1].role if out else None
            following = next(
                (m.role for m in sequence[position + 1 :] if isinstance(m, Message)), None
            )
            if previous == following == "user" or (previous is None and following == "model"):
                role: Literal["user", "model"] = "model" if previous == "user" else "user"
                out.append(Message(role=role, parts=(marker,)))
            elif previous == following == "model":
                out.append(Message(role="user", parts=(marker,)))
            else:
                carried = marker  # joins the next message
            continue
        if carried is not None:
            if item.function_responses:
                item = Message(role=item.role, parts=(*item.parts, carried))
            else:
                item = Message(role=item.role, parts=(carried, *item.parts))
            carried = None
        out.append(item)
    return tuple(out)


def _plain_user(message: Message) -> bool:
    return message.role == "user" and not any(
        isinstance(p, FunctionResponsePart) for p in message.parts
    )

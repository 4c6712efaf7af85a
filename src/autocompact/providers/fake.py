"""A scripted provider for tests and the offline demo (re-exported by ``autocompact.testing``).

Replies are taken from queues: first the queue for the request's purpose (``"chat"`` or
``"side_query"``), then the shared queue, then the default responder. Each reply is a text with
optional usage and finish reason, or an exception to raise. Every request is logged in
:attr:`FakeProvider.requests`.

The fake counts every request with its own tokenizer (:class:`FakeTokenizer`), independent of
the engine's estimate: its own walk over the parts, its own JSON serialization, and factors
(overall 0.5–2.0 and per part: text, function-call/response JSON, images and documents) that
make it count more or fewer tokens than the engine expects, as real tokenizers do. That count is
the prompt size it reports in usage (unless a reply scripts another) and is logged in
:attr:`FakeProvider.counts`. With ``context_window`` set it rejects every request -- main turn or
side query -- whose size *by its own count* exceeds the window with
:class:`ContextOverflowError`, as a real provider does (``reject_oversized=False`` records it
in :attr:`FakeProvider.oversized` and answers anyway). Size guarantees are checked against this
count, so the oracle is not the code under test.
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass

from autocompact.content import (
    DocumentPart,
    FunctionCallPart,
    FunctionResponsePart,
    ImagePart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    Usage,
)
from autocompact.errors import (
    ContextOverflowError,
    MalformedResponseError,
    ProviderError,
    ProviderTimeoutError,
)
from autocompact.estimation import (
    estimate_content_tokens,
    estimate_text_tokens,
    estimate_tools_tokens,
)
from autocompact.providers.base import (
    ChatRequest,
    Completion,
    FinishReason,
    RequestPurpose,
    StreamDone,
    StreamEvent,
    TextDelta,
)
from autocompact.thresholds import COMPACT_MAX_OUTPUT_TOKENS

__all__ = ["FakeProvider", "FakeReply", "FakeTokenizer", "estimate_request_tokens"]

_UNSET_USAGE = Usage()


@dataclass(frozen=True, kw_only=True)
class FakeReply:
    """One scripted reply.

    Attributes:
        text: the reply text (ignored when ``parts`` is given).
        parts: the reply's parts, for replies with tool calls.
        usage: reported usage; ``None`` reports the fake's own estimate; ``Usage()`` with
            ``report_usage=False`` reports nothing.
        finish_reason: the normalized finish reason to report (``None``: none given).
        error: raised instead of replying.
        report_usage: ``False`` makes the reply carry no usage at all.
    """

    text: str = ""
    parts: tuple[Part, ...] | None = None
    usage: Usage | None = None
    finish_reason: FinishReason | None = FinishReason.STOP
    error: BaseException | None = None
    report_usage: bool = True


Responder = Callable[[ChatRequest], FakeReply]

_FACTOR_RANGE = (0.05, 20.0)


@dataclass(frozen=True, kw_only=True)
class FakeTokenizer:
    """The fake provider's own token counter, deliberately unlike the engine's estimate.

    It walks a request's parts itself and serializes JSON with :func:`json.dumps` (default
    separators, so even a factor of 1.0 counts differently from the engine's compact form).
    Each part kind has a base rate and a factor; ``factor`` multiplies them all:

    - text and thinking (and the system prompt): ``len / 4 × factor × text_factor``;
    - function calls and responses (and tool declarations): the length of their JSON
      ``/ 2 × factor × json_factor``;
    - images and documents: ``image_tokens × factor × image_factor`` each.

    Attributes:
        factor: the tokenizer's overall ratio to a chars/4 estimate; real ones run 0.5–2.0.
        text_factor, json_factor, image_factor: per-part-kind ratios on top of ``factor``.
        image_tokens: the base size of one image or document.
        per_message: tokens a real chat template adds per message (role markers).
    """

    factor: float = 1.0
    text_factor: float = 1.0
    json_factor: float = 1.0
    image_factor: float = 1.0
    image_tokens: int = 1_600
    per_message: int = 0

    def __post_init__(self) -> None:
        low, high = _FACTOR_RANGE
        for name in ("factor", "text_factor", "json_factor", "image_factor"):
            value = getattr(self, name)
            if not low <= value <= high:
                raise ValueError(f"FakeTokenizer.{name} must be in [{low}, {high}], got {value}")

    def count(self, request: ChatRequest) -> int:
        """The request's prompt size by this tokenizer: system prompt, tools and messages."""
        text = len(request.system_instruction or "")
        json_chars = sum(len(json.dumps(tool.as_json(), default=str)) for tool in request.tools)
        media = 0
        for message in request.messages:
            for part in message.parts:
                if isinstance(part, TextPart | ThinkingPart):
                    text += len(part.text)
                elif isinstance(part, FunctionCallPart):
                    json_chars += len(
                        json.dumps({"name": part.name, "args": part.arguments}, default=str)
                    )
                elif isinstance(part, FunctionResponsePart):
                    json_chars += len(
                        json.dumps({"name": part.name, "response": part.response}, default=str)
                    )
                elif isinstance(part, ImagePart | DocumentPart):
                    media += 1
        exact = self.factor * (
            text / 4 * self.text_factor
            + json_chars / 2 * self.json_factor
            + media * self.image_tokens * self.image_factor
        )
        return math.ceil(exact) + self.per_message * len(request.messages)


def estimate_request_tokens(request: ChatRequest) -> int:
    """The fake's notion of a request's prompt size: the engine's own estimate of it."""
    return (
        estimate_content_tokens(request.messages)
        + estimate_text_tokens(request.system_instruction)
        + estimate_tools_tokens(request.tools)
    )


def _default_responder(request: ChatRequest) -> FakeReply:
    if request.purpose == "side_query":
        return FakeReply(
            text="<state_snapshot>\n<overall_goal>continue</overall_goal>\n</state_snapshot>"
        )
    return FakeReply(text="OK.")


class FakeProvider:
    """A scripted, offline provider.

    Args:
        model: the model name to report.
        context_window: when set, requests (main turns and side queries) whose size by the
            fake's own count exceeds it raise :class:`ContextOverflowError`.
        responder: builds a reply when every queue is empty.
        prompt_scale: multiplies the fake's count (kept for older tests; the same as
            ``tokenizer=FakeTokenizer(factor=...)`` on top of the tokenizer's own factor).
        tokenizer: the fake's own token counter (default: plain rates, factor 1.0).
        reject_oversized: ``False`` answers requests over the window instead of raising,
            recording their index in :attr:`oversized` (to count leaks in property tests).

    Attributes:
        requests: every request received, in order.
        counts: each request's prompt size by the fake's count (parallel to ``requests``).
        oversized: indexes into ``requests`` of requests over the window by that count.
    """

    name = "fake"

    def __init__(
        self,
        model: str = "fake-model",
        *,
        context_window: int | None = None,
        responder: Responder | None = None,
        prompt_scale: float = 1.0,
        tokenizer: FakeTokenizer | None = None,
        reject_oversized: bool = True,
    ) -> None:
        self.model = model
        self.context_window = context_window
        self.responder = responder or _default_responder
        self.prompt_scale = prompt_scale
        self.tokenizer = tokenizer or FakeTokenizer()
        self.reject_oversized = reject_oversized
        self.requests: list[ChatRequest] = []
        self.counts: list[int] = []
        self.oversized: list[int] = []
        self._queues: dict[RequestPurpose | None, deque[FakeReply]] = {
            None: deque(),
            "chat": deque(),
            "side_query": deque(),
        }

    # -- scripting ---------------------------------------------------------------------------

    def enqueue(self, reply: FakeReply | str, *, purpose: RequestPurpose | None = None) -> None:
        """Queue a reply for the next request (of ``purpose``, or of any purpose)."""
        self._queues[purpose].append(FakeReply(text=reply) if isinstance(reply, str) else reply)

    def enqueue_text(
        self,
        text: str,
        *,
        usage: Usage | None = None,
        finish_reason: FinishReason | None = FinishReason.STOP,
        purpose: RequestPurpose | None = None,
    ) -> None:
        """Queue a text reply."""
        self.enqueue(
            FakeReply(text=text, usage=usage, finish_reason=finish_reason), purpose=purpose
        )

    def enqueue_error(
        self, error: BaseException | None = None, *, purpose: RequestPurpose | None = None
    ) -> None:
        """Queue a failure (a generic :class:`ProviderError` by default)."""
        err = error or ProviderError("scripted failure", provider=self.name, model=self.model)
        self.enqueue(FakeReply(error=err), purpose=purpose)

    def enqueue_timeout(self, *, purpose: RequestPurpose | None = None) -> None:
        """Queue a timeout."""
        self.enqueue_error(
            ProviderTimeoutError("scripted timeout", provider=self.name, model=self.model),
            purpose=purpose,
        )

    def enqueue_malformed(self, *, purpose: RequestPurpose | None = None) -> None:
        """Queue a malformed response."""
        self.enqueue_error(
            MalformedResponseError(
                "scripted malformed reply", provider=self.name, model=self.model
            ),
            purpose=purpose,
        )

    def enqueue_empty(self, *, purpose: RequestPurpose | None = "side_query") -> None:
        """Queue an empty (whitespace) summary."""
        self.enqueue(FakeReply(text="   \n"), purpose=purpose)

    def enqueue_truncated(
        self, *, by_size: bool = False, purpose: RequestPurpose | None = "side_query"
    ) -> None:
        """Queue a summary cut off by the output cap.

        ``by_size=True`` reports no finish reason but output tokens at the cap.
        """
        usage = Usage(output_tokens=COMPACT_MAX_OUTPUT_TOKENS)
        reason = None if by_size else FinishReason.LENGTH
        self.enqueue(
            FakeReply(text="<state_snapshot> cut off mid-sent", usage=usage, finish_reason=reason),
            purpose=purpose,
        )

    def enqueue_inflated(
        self, *, output_tokens: int = 10**9, purpose: RequestPurpose | None = "side_query"
    ) -> None:
        """Queue a summary whose reported size makes the new history larger than the old."""
        self.enqueue(
            FakeReply(text="an enormous summary", usage=Usage(output_tokens=output_tokens)),
            purpose=purpose,
        )

    def enqueue_too_long(self, *, purpose: RequestPurpose | None = "chat") -> None:
        """Queue a provider "prompt is too long" rejection."""
        self.enqueue_error(
            ContextOverflowError(
                "prompt is too long (scripted)", provider=self.name, model=self.model, status=400
            ),
            purpose=purpose,
        )

    def count_tokens(self, request: ChatRequest) -> int:
        """A request's prompt size by the fake's own count (what it reports and enforces)."""
        return math.ceil(self.tokenizer.count(request) * self.prompt_scale)

    def pending(self, purpose: RequestPurpose | None = None) -> int:
        """How many scripted replies are left in a queue."""
        return len(self._queues[purpose])

    # -- the Provider protocol ---------------------------------------------------------------

    def complete(self, request: ChatRequest) -> Completion:
        """Answer a request from the script."""
        return self._answer(request)

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """Answer a request from the script, a word at a time."""
        completion = self._answer(request)
        for chunk in _chunks(completion.text):
            yield TextDelta(text=chunk)
        yield StreamDone(completion=completion)

    async def acomplete(self, request: ChatRequest) -> Completion:
        """Async :meth:`complete`."""
        return self._answer(request)

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Async :meth:`stream`."""
        completion = self._answer(request)
        for chunk in _chunks(completion.text):
            yield TextDelta(text=chunk)
        yield StreamDone(completion=completion)

    # -- internals ---------------------------------------------------------------------------

    def _next_reply(self, request: ChatRequest) -> FakeReply:
        for key in (request.purpose, None):
            queue = self._queues[key]
            if queue:
                return queue.popleft()
        return self.responder(request)

    def _answer(self, request: ChatRequest) -> Completion:
        prompt = self.count_tokens(request)
        self.requests.append(request)
        self.counts.append(prompt)
        if self.context_window is not None and prompt > self.context_window:
            self.oversized.append(len(self.requests) - 1)
            if self.reject_oversized:
                raise ContextOverflowError(
                    f"prompt is too long: {prompt} tokens > {self.context_window} maximum",
                    provider=self.name,
                    model=self.model,
                    status=400,
                )
        reply = self._next_reply(request)
        if reply.error is not None:
            raise reply.error
        parts = reply.parts if reply.parts is not None else (TextPart(text=reply.text),)
        message = Message(role="model", parts=parts)
        usage: Usage | None = None
        if reply.report_usage:
            scripted = reply.usage or _UNSET_USAGE
            usage = Usage(
                prompt_tokens=scripted.prompt_tokens or prompt,
                output_tokens=scripted.output_tokens or estimate_content_tokens([message]),
                cached_tokens=scripted.cached_tokens,
                thinking_tokens=scripted.thinking_tokens,
            )
        return Completion(
            message=message,
            usage=usage,
            finish_reason=reply.finish_reason,
            raw_finish_reason=reply.finish_reason.value if reply.finish_reason else None,
            model=self.model,
        )


def _chunks(text: str) -> Iterator[str]:
    start = 0
    while start < len(text):
        end = text.find(" ", start + 1)
        end = len(text) if end == -1 else end
        yield text[start:end]
        start = end

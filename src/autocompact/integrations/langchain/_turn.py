"""One hook's view of a thread: the engine session rebuilt from the agent state, the message
mapping both ways, and the model call's request and reply in the engine's terms.

What is pending (sent with this model call) is read from the state as ``ChatSession`` and the
guard read it: the messages after the last model message, except that a user message after tool
results is a turn of its own — the results before it are history (old output that compaction
may clear), not part of the message being sent. A tool call without its ``ToolMessage`` is
refused here, in LangChain's terms, before the engine sees it.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from langchain.agents.middleware.types import ModelRequest, ModelResponse
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from autocompact.compaction.plan import CompressionStatus
from autocompact.compaction.service import CompressionService
from autocompact.content import FunctionResponsePart, Message
from autocompact.engine import CarriedState, ConversationState, Engine, EngineConfig
from autocompact.errors import ContentError, MessageTooLargeError
from autocompact.estimation import Calibration
from autocompact.events import Hook
from autocompact.integrations.langchain._convert import (
    convert_groups,
    message_to_langchain,
    system_text,
)
from autocompact.integrations.langchain._provider import completion_of, model_name
from autocompact.integrations.langchain._sources import Sources
from autocompact.providers.base import ChatRequest, Completion, Provider, ToolSpec
from autocompact.sessions.stores.base import SessionStore
from autocompact.thresholds import Tier

__all__ = ["Fixed", "Sender", "Settings", "Turn", "check_tool_answers", "last_id"]


class Settings(Protocol):
    """What a turn reads from the middleware that builds it."""

    image_token_estimate: int
    clear_tool_outputs: bool
    hooks: list[Hook]
    store: SessionStore | None
    owner: str | None

    def summary_provider(self, agent_model: BaseChatModel) -> Provider:
        """The provider the side query goes to."""
        ...

    def compression_service(self, agent_model: BaseChatModel) -> CompressionService:
        """The engine's compression service."""
        ...

    def session_of(self) -> str:
        """With a store: the run's session id."""
        ...


@dataclass(frozen=True, kw_only=True)
class Fixed:
    """What a model request carries besides the messages, and the window of its model."""

    system: str | None
    tools: tuple[ToolSpec, ...]
    model: BaseChatModel
    window: int
    key: str = field(init=False, compare=False)
    """Names this request's model, system prompt and tools in the thread's state entry, so
    the thread's next ``before_model`` uses them (not another agent's)."""

    def __post_init__(self) -> None:
        described = json.dumps(
            [self.system, [[t.name, t.description, t.parameters] for t in self.tools]],
            sort_keys=True,
            default=str,
        )
        digest = hashlib.sha256(described.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        object.__setattr__(self, "key", f"{id(self.model):x}-{self.window}-{digest}")


def check_tool_answers(messages: Sequence[BaseMessage], offset: int = 0) -> None:
    """Every tool call answered by a ``ToolMessage``, every ``ToolMessage`` answering a call.

    The calls of a last AI message are the model's own, still to run (allowed).

    Raises:
        ContentError: names the state message (its index), the tool call ids and what to add
            or remove, in LangChain's terms.
    """
    open_calls: dict[str, tuple[int, str]] = {}
    last = len(messages) - 1
    for position, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            if open_calls.pop(message.tool_call_id, None) is None:
                index = position + offset
                raise ContentError(
                    f"message {index}: a ToolMessage with tool_call_id "
                    f"{message.tool_call_id!r} answers no tool call of an earlier AI message: "
                    "every provider rejects it; remove it, or keep the AI message that made "
                    "the call",
                    index=index,
                )
        elif isinstance(message, AIMessage):
            for call in message.tool_calls:
                open_calls[str(call.get("id"))] = (position, str(call.get("name")))
    unanswered = {k: v for k, v in open_calls.items() if v[0] != last}
    if unanswered:
        index = min(position for position, _ in unanswered.values()) + offset
        listed = ", ".join(f"{call_id!r} ({name})" for call_id, (_, name) in unanswered.items())
        raise ContentError(
            f"message {index}: the AI message's tool calls {listed} have no ToolMessage "
            "answering them, and a provider rejects such a request: add a ToolMessage with "
            "that tool_call_id for each right after the AI message (e.g. content='cancelled' "
            "for a tool run that was interrupted), or resume the interrupted run instead of "
            "sending a new message",
            index=index,
        )


def _pending_from(groups: Sequence[tuple[Message, list[BaseMessage]]], stored: bool) -> int:
    """Where the pending message starts in ``groups``: after the last model message, and after
    any tool results followed by a user message (a new turn: those results are history). With
    a store the whole tail is pending: the store holds no tool result that no model call sent."""
    split = max((i + 1 for i, (m, _) in enumerate(groups) if m.role == "model"), default=0)
    if stored:
        return split
    results = [i + 1 for i, (m, _) in enumerate(groups[split:]) if m.function_responses]
    if results and split + results[-1] < len(groups):
        return split + results[-1]
    return split


class Turn:
    """One hook's view: the engine session rebuilt from the state, and the message mapping."""

    def __init__(
        self,
        middleware: Settings,
        messages: Sequence[BaseMessage],
        entry: Mapping[str, Any],
        fixed: Fixed,
    ) -> None:
        self.pinned: list[BaseMessage] = []
        body = list(messages)
        system = fixed.system
        first = body[0] if body else None
        if isinstance(first, SystemMessage):  # a system prompt kept in the state (sent as it is)
            self.pinned = [body.pop(0)]
            system = "\n".join(s for s in (system, system_text(first, exact=False)) if s)
        check_tool_answers(body, offset=len(self.pinned))
        groups = convert_groups(body, offset=len(self.pinned))
        self.sources = Sources()
        for m, src in groups:
            self.sources[m] = src
        # Each tool result's own ToolMessage (by the part, else by its call id when unique), so
        # a rebuilt run keeps the results it did not change (LC-1).
        tools = [
            (p, s)
            for m, src in groups
            if m.function_responses
            for p, s in zip(m.parts, src, strict=True)
            if isinstance(s, ToolMessage)
        ]
        self.tools = {id(p): (p, s) for p, s in tools}
        self.by_call: dict[str, ToolMessage | None] = {}
        for _, s in tools:
            self.by_call[s.tool_call_id] = None if s.tool_call_id in self.by_call else s
        split = _pending_from(groups, middleware.store is not None)
        history = [m for m, _ in groups[:split]]
        tail = groups[split:]
        parts = tuple(p for m, _ in tail for p in m.parts)
        self.pending = Message(role="user", parts=parts)
        self.sources[self.pending] = [msg for _, src in tail for msg in src]
        # The state's messages in order (and the reply, once sent): a message the store gives
        # back equal to one of them is that one, not a copy rebuilt without its metadata.
        self.known = [*groups[:split], (self.pending, self.sources[self.pending])]
        self.turn_id = _turn_id(body)
        self.window = fixed.window
        self.request_key = fixed.key
        self.earlier: list[Any] = []  # before_model's compactions for this model call
        self.stored: _Stored | None = None
        tier = Tier(entry["tier"]) if "tier" in entry else None
        config = EngineConfig(
            context_window=fixed.window,
            system_instruction=system,
            tools=fixed.tools,
            image_token_estimate=middleware.image_token_estimate,
            clear_tool_outputs=middleware.clear_tool_outputs,
        )
        provider = middleware.summary_provider(fixed.model)
        service = middleware.compression_service(fixed.model)
        if middleware.store is not None:
            # The conversation is the store's: the state's history gives way to it.
            self.stored = _Stored(middleware.store, middleware.session_of())
            self.core = Engine(
                provider,
                config,
                hooks=middleware.hooks,
                compression_service=service,
                store=self.stored.store,
                session_id=self.stored.session_id,
                store_owner=middleware.owner,
            )
            # The counts and the hold are the store's; only the last noted tier is the state's.
            self.core.resume(
                since_count=self.core.since_count,
                hold_until=self.core.hold_until,
                noted_tier=tier,
            )
            self.original = tuple(history)  # what the state holds, to see if it must change
            return
        counted = bool(history) and entry.get("counted_through") == last_id(
            self.sources[history[-1]]
        )
        hold = entry.get("hold_until")
        carried = CarriedState(
            consecutive_failures=int(entry.get("consecutive_failures", 0)),
            calibration=Calibration.from_dict(entry.get("calibration")),
        )
        state = ConversationState.start(
            history,
            last_prompt_token_count=int(entry.get("last_prompt_tokens", 0)) if counted else 0,
            carried=carried,
        )
        self.core = Engine(
            provider, config, state=state, hooks=middleware.hooks, compression_service=service
        )
        self.core.resume(
            since_count=int(entry.get("since_count", 0)) if counted else 0,
            hold_until=int(hold) if hold is not None else None,
            noted_tier=tier,
        )
        self.original = self.core.history

    @contextmanager
    def explained(self) -> Iterator[None]:
        """A refusal of tool results too large for the window, told in LangChain's terms: which
        ``ToolMessage`` it is, and how the thread goes on with it in its state."""
        try:
            yield
        except MessageTooLargeError as exc:
            results = [m for m in self.sources[self.pending] if isinstance(m, ToolMessage)]
            if exc.index is not None or not results:
                raise
            largest = max(results, key=lambda m: len(str(m.content)))
            retry = (
                "agent.update_state(config, {'messages': [ToolMessage(content=<shorter>, "
                f"tool_call_id={largest.tool_call_id!r}, id={largest.id!r})]}}), then "
                "agent.invoke(None, config)"
            )
            if self.stored is None:
                how = (
                    "The ToolMessage stays in the thread's state: the thread goes on with the "
                    "next user message (the result is then old output that compaction clears "
                    f"or summarizes), or retry this step with a shorter result: {retry}"
                )
            else:
                how = (
                    "The ToolMessage stays in the thread's state, and the store takes no turn "
                    f"without it: retry this step with a shorter result: {retry}"
                )
            raise MessageTooLargeError(
                f"{exc}. {how}", index=None, tokens=exc.tokens, window=exc.window
            ) from None

    def to_langchain(self, messages: Sequence[Message]) -> list[BaseMessage]:
        """LangChain messages for engine messages: the originals where the engine kept them
        (with a store, also where the store gives back a message equal to the state's)."""
        out: list[BaseMessage] = []
        after = 0  # the next state message an equal stored one may be (in order, each once)
        for message in messages:
            known = self.sources.get(message)
            if known is None and self.stored is not None:
                known, after = self._same(message, after)
            if known is None:
                known = message_to_langchain(message, originals=self._original)
                for msg in known:
                    msg.id = msg.id or f"autocompact-{uuid.uuid4()}"
                self.sources[message] = known
            out.extend(known)
        return out

    def _same(self, message: Message, after: int) -> tuple[list[BaseMessage] | None, int]:
        """The LangChain messages of the first state message from ``after`` on that is equal
        to ``message`` (read back from the store), and where the next search starts."""
        for index in range(after, len(self.known)):
            candidate, sources = self.known[index]
            if candidate.role == message.role and candidate == message:
                return sources, index + 1
        return None, after

    def _original(self, part: FunctionResponsePart) -> ToolMessage | None:
        known = self.tools.get(id(part))
        if known is not None and known[0] is part:
            return known[1]
        return self.by_call.get(part.id)

    def rewritten(self) -> bool:
        """Whether the state's history must be replaced: a compaction ran in this hook, or the
        store holds another history than the state (another worker appended or compacted)."""
        if any(c.status is CompressionStatus.COMPRESSED for c in self.core.compactions):
            return True
        return self.stored is not None and self.original != self.core.history

    def stored_reply(self) -> AIMessage | None:
        """With a store: the reply an earlier attempt stored for this turn id, if any."""
        if self.stored is None or self.turn_id is None:
            return None
        entry = self.stored.store.get_turn(self.stored.session_id, self.turn_id)
        if entry is None or len(entry.messages) != 2:
            return None
        (reply,) = [m for m in message_to_langchain(entry.messages[1]) if isinstance(m, AIMessage)]
        reply.id = f"autocompact-{self.turn_id}"
        return reply

    def entry(self, **extra: Any) -> dict[str, Any]:
        """The ``autocompact`` state entry after this hook."""
        core = self.core
        history = core.history
        last = last_id(self.to_langchain(history[-1:])) if history else None
        return {
            "last_prompt_tokens": core.last_prompt_token_count,
            "since_count": core.since_count,
            "counted_through": last if core.last_prompt_token_count > 0 else None,
            "consecutive_failures": core.consecutive_failures,
            "hold_until": core.hold_until,
            "calibration": core.calibration.to_dict(),
            "tier": core.noted_tier.value,
            "tokens": core.estimate_tokens(),
            "compactions": [*self.earlier, *(c.as_dict() for c in core.compactions)],
            "window": self.window,
            "request": self.request_key,
            **extra,
        }


def last_id(messages: Sequence[BaseMessage]) -> str | None:
    return messages[-1].id if messages else None


@dataclass(frozen=True)
class _Stored:
    store: SessionStore
    session_id: str


def _turn_id(messages: Sequence[BaseMessage]) -> str | None:
    """A model call's idempotency key: the id of the last user message and how many model
    replies follow it (the same on a retry that sends the same message id)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, HumanMessage):
            if message.id is None:
                return None
            replies = sum(1 for m in messages[index + 1 :] if isinstance(m, AIMessage))
            return f"{message.id}#{replies}"
    return None


class Sender:
    """Turns the engine's main request into the framework's request, and its reply back."""

    def __init__(self, turn: Turn, request: ModelRequest[Any]) -> None:
        self.turn = turn
        self.base = request
        self.response: ModelResponse[Any] | None = None

    def request(self, chat: ChatRequest) -> ModelRequest[Any]:
        messages = [*self.turn.pinned, *self.turn.to_langchain(chat.messages)]
        return self.base.override(messages=cast("list[AnyMessage]", messages))

    def done(self, response: ModelResponse[Any] | AIMessage) -> Completion:
        if isinstance(response, AIMessage):
            response = ModelResponse(result=[response])
        self.response = response
        reply = next((m for m in response.result if isinstance(m, AIMessage)), None)
        if reply is None:
            reply = AIMessage(content="")
        completion = completion_of(reply, model=model_name(self.base.model))
        self.turn.sources[completion.message] = list(response.result)
        self.turn.known.append((completion.message, list(response.result)))
        return completion

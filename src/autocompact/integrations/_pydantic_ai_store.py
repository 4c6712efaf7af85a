"""The :class:`~autocompact.integrations.pydantic_ai.Autocompact` capability over a session store.

With ``store=`` the conversation lives in a SQLite, PostgreSQL or JSONL store shared by every
worker (``docs/sessions.md``), not in the ``message_history`` a caller passes around:

- the session is ``session_id`` (default: the run's ``conversation_id``, which
  ``agent.run(..., conversation_id=…)`` sets), and each model request of a run is one stored turn
  under ``"{run_id}:{run_step}"`` (``agent.run(..., run_id=…)``): a request retried with the same
  run id is answered from the store without a model call, and nothing is stored twice;
- before each model request the stored history is read again (another worker may have appended
  or compacted) and becomes the run's history, with the pending request after it;
- the core's own turn flow runs across the request hooks (a session core bound to the store,
  :meth:`autocompact.guard.ContextGuard.store_core`): the ladder (its compaction takes the
  store's lease and commits with the compare-and-swap), the guarantee's trimming, the reactive
  retry, and the turn's append with the provider's count and the calibration when the response
  is in.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Generator, Sequence
from typing import Any

from autocompact.compaction.plan import CompressionInfo
from autocompact.content import Message, Usage
from autocompact.engine import Engine
from autocompact.errors import ConfigError, ContentError, ContextOverflowError, ProviderError
from autocompact.guard import ContextGuard
from autocompact.integrations._order import InOrder, part_key
from autocompact.integrations._pydantic_ai_convert import (
    from_autocompact,
    response_part,
    system_text,
    to_autocompact,
    tool_specs,
)
from autocompact.providers.base import ChatRequest, Completion
from autocompact.sessions.stores.base import SessionStore, check_session_id

try:
    from pydantic_ai import messages as pm
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.tools import RunContext
except ImportError:  # pragma: no cover - the caller imported pydantic_ai.py first
    raise

__all__ = ["SessionIdSource", "StoreTurn", "session_id_of", "stored_reply", "turn_id_of"]

SessionIdSource = str | Callable[[RunContext[Any]], str] | None
"""A fixed session id, a function of the run context, or ``None``: the run's conversation id."""

_Flow = Generator[ChatRequest, Completion, Completion]


def session_id_of(source: SessionIdSource, ctx: RunContext[Any], store: SessionStore) -> str:
    """The session a run's requests belong to."""
    value = source(ctx) if callable(source) else source
    if value is None:
        value = ctx.conversation_id
    if value is None:
        raise ConfigError(
            "the Autocompact capability has a store but no session id: pass session_id=… or "
            "run the agent with conversation_id=…",
            key="session_id",
        )
    return check_session_id(value, store.address)


def turn_id_of(ctx: RunContext[Any]) -> str:
    """The idempotency key of this model request: the run id and the step."""
    return f"{ctx.run_id}:{ctx.run_step}"


def stored_reply(store: SessionStore, session_id: str, turn_id: str) -> pm.ModelResponse | None:
    """The response stored for this request by an earlier attempt (on any worker), if any."""
    if not store.exists(session_id):
        return None
    entry = store.get_turn(session_id, turn_id)
    if entry is None or len(entry.messages) != 2:
        return None
    (response,) = from_autocompact(entry.messages[1:])
    assert isinstance(response, pm.ModelResponse)
    return response


def _split_system(
    messages: Sequence[pm.ModelMessage],
) -> tuple[list[pm.SystemPromptPart], pm.ModelRequest]:
    """The run's system prompt parts, and its pending request without them."""
    system = [
        part
        for m in messages
        if isinstance(m, pm.ModelRequest)
        for part in m.parts
        if isinstance(part, pm.SystemPromptPart)
    ]
    last = messages[-1]
    if not isinstance(last, pm.ModelRequest):
        raise ConfigError("a model request must end with the pending request; this is a bug")
    parts = [p for p in last.parts if not isinstance(p, pm.SystemPromptPart)]
    return system, dataclasses.replace(last, parts=parts)


def _known(messages: Sequence[pm.ModelMessage]) -> list[tuple[Message, pm.ModelMessage]]:
    """The run's messages before the pending request, each with its engine form (its system
    prompt parts left out: they are put back in front), so that a stored message equal to one
    of them is sent and kept as that message, not as a copy rebuilt without its fields
    (timestamps, ids, provider details, usage, the model's name)."""
    known: list[tuple[Message, pm.ModelMessage]] = []
    for message in messages:
        try:
            converted = to_autocompact([message]).messages
        except ContentError:  # not in the store's form either: the stored copy is used
            continue
        if len(converted) != 1:
            continue
        if isinstance(message, pm.ModelRequest):
            parts = [p for p in message.parts if not isinstance(p, pm.SystemPromptPart)]
            if len(parts) != len(message.parts):
                message = dataclasses.replace(message, parts=parts)
        known.append((converted[0], message))
    return known


def _key(message: Message) -> tuple[str, tuple[str, object] | None]:
    """What equal messages share (:func:`~autocompact.integrations._order.part_key`)."""
    return message.role, part_key(message.parts[0]) if message.parts else None


def _same(
    known: Sequence[tuple[Message, pm.ModelMessage]],
    index: InOrder,
    message: Message,
    after: int,
) -> tuple[pm.ModelMessage | None, int]:
    """The first run message from ``after`` on whose engine form equals ``message``, and where
    the next search starts (only those ``index`` gives the same key are tried)."""
    for position in index.candidates(_key(message), after):
        candidate, original = known[position]
        if candidate.role == message.role and candidate == message:
            return original, position + 1
    return None, after


class StoreTurn:
    """One model request of a run on a stored conversation: the core's turn flow, held open
    from ``before_model_request`` until the response (or the error) comes back."""

    def __init__(
        self,
        guard: ContextGuard,
        store: SessionStore,
        session_id: str,
        turn_id: str,
        *,
        owner: str | None,
        request_context: ModelRequestContext,
        instructions: str | None,
    ) -> None:
        params = request_context.model_request_parameters
        self.system_parts, self.pending = _split_system(request_context.messages)
        converted = to_autocompact([self.pending])
        system = "\n\n".join(t for t in (system_text(self.system_parts), instructions) if t)
        self.core: Engine = guard.store_core(
            store,
            session_id,
            owner=owner,
            system_instruction=system or None,
            tools=tool_specs([*params.function_tools, *params.output_tools]),
        )
        parts = tuple(p for m in converted.messages for p in m.parts)
        self.message = Message(role="user", parts=parts)
        self._known = _known(request_context.messages[:-1])
        self._index = InOrder(_key(message) for message, _ in self._known)
        self._flow: _Flow = self.core.turn_flow(self.message, turn_id)
        self._side = self.core.compression.side_provider(self.core.provider)

    @property
    def compactions(self) -> tuple[CompressionInfo, ...]:
        """What this turn's compaction attempts did."""
        return tuple(self.core.compactions)

    def _messages(self, messages: Sequence[Message]) -> list[pm.ModelMessage]:
        """pydantic-ai messages: the pending request as it came, the system prompt in front."""
        out: list[pm.ModelMessage] = []
        after = 0  # the next run message an equal stored one may be (in order, each once)
        for message in messages[:-1]:
            original, after = _same(self._known, self._index, message, after)
            out.extend([original] if original is not None else from_autocompact([message]))
        out.append(self.pending)
        if self.system_parts:
            head = out[0]
            assert isinstance(head, pm.ModelRequest)
            out[0] = dataclasses.replace(head, parts=[*self.system_parts, *head.parts])
        return out

    def history(self) -> list[pm.ModelMessage]:
        """The run's persistent history: the stored conversation, then the pending request."""
        return self._messages((*self.core.history, self.message))

    async def _until_send(self, step: Callable[[], ChatRequest]) -> list[pm.ModelMessage]:
        """Answer side queries until the flow asks for the main request; return it converted."""
        request = step()
        while request.purpose == "side_query":
            try:
                completion = await self._side.acomplete(request)
            except ProviderError as exc:
                request = self._flow.throw(exc)
                continue
            request = self._flow.send(completion)
        return self._messages(request.messages)

    async def start(self) -> list[pm.ModelMessage]:
        """Run the ladder; the messages to send (trimmed by the guarantee where needed)."""
        return await self._until_send(lambda: next(self._flow))

    def finish(self, response: pm.ModelResponse) -> None:
        """The response is in: the core commits the turn to the store (durable on return)."""
        parts = tuple(response_part(p, "the response") for p in response.parts)
        completion = Completion(
            message=Message(role="model", parts=parts),
            usage=Usage(
                prompt_tokens=response.usage.input_tokens,
                output_tokens=response.usage.output_tokens,
            ),
            model=response.model_name,
        )
        try:
            self._flow.send(completion)
        except StopIteration:
            return
        raise ConfigError("the turn flow asked for another request; this is a bug in autocompact")

    async def overflow(self, error: Exception) -> list[pm.ModelMessage] | None:
        """The model said "too long": the reactive step; the request to retry with, or ``None``
        when the engine gives up (the caller re-raises the model's error)."""
        overflow = ContextOverflowError(str(error), provider="pydantic-ai")
        try:
            return await self._until_send(lambda: self._flow.throw(overflow))
        except ContextOverflowError:
            return None

    def abandon(self) -> None:
        """The request failed otherwise: end the flow (nothing is stored for it)."""
        self._flow.close()

"""``StoreSession``: an Agents SDK session whose items live in an autocompact session store.

Where :class:`~autocompact.integrations.openai_agents.AutocompactSession` compacts the items of
another session, this one *is* the session: its items are the live history of a conversation in
a SQLite, PostgreSQL or JSONL store (:func:`autocompact.open_store`), shared by every worker that
opens the same store and session id. What the store promises (``docs/sessions.md``) holds here:

- each ``add_items`` call is one stored turn, appended once under ``"{turn_id}:{n}"`` (``n``:
  the call's number within this session object), so a request retried with the same
  ``turn_id`` (on this worker or another) does not store its items twice;
- ``run_compaction`` (the runner calls it after each turn) takes the store's lease (another
  worker compacting: nothing happens here), and commits the compacted history with the
  compare-and-swap on the summarized range; a summary whose range changed meanwhile is
  discarded, recorded as superseded and not counted;
- the breaker's count, its hold and the calibration are the stored ones; the model's count of
  each request the input filter lets out teaches the calibration, stored with the next turn.

The store keeps the items' engine form, which holds less than an item (its ``id``, ``status``,
an output text's ``annotations``, a reasoning item's ``id`` and any other field are not in it).
So that a conversation is sent back as the model produced it, the items this worker process
stored (through any session object on the same store object) are remembered for the
conversations it used last: an item the store gives back equal in engine form to one of them,
in order, is a copy of that item. The rest (items another process stored, a summary, an
output clearing replaced, which keeps its original item's fields) are built from the engine
form.

The decisions are the core's (a session core bound to the store,
:meth:`autocompact.guard.ContextGuard.store_core`); this module converts items.
"""

from __future__ import annotations

import copy
import threading
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from autocompact.compaction.plan import CompressionInfo, CompressionTrigger
from autocompact.compaction.service import drive_flow_async
from autocompact.content import FunctionResponsePart, Message, Part, Role
from autocompact.engine import Engine
from autocompact.errors import ConfigError, ContentError, SessionStoreError
from autocompact.estimation import Calibration
from autocompact.events import Hook
from autocompact.guard import ContextGuard, GuardState, request_stats
from autocompact.integrations._openai_agents_convert import (
    Item,
    SummarizerChoice,
    agent_tool_specs,
    from_autocompact,
    item_parts,
    pending_start,
    summary_service,
    to_autocompact,
)
from autocompact.integrations._openai_agents_model import (
    AgentModel,
    RequestCounts,
    RunAgents,
    add_side_usage,
    engine_options,
    guarded_input,
    with_mcp_tools,
)
from autocompact.integrations._order import InOrder, part_key
from autocompact.providers.base import ChatRequest, Provider, ToolSpec
from autocompact.sessions.stores.base import SessionStore, check_session_id
from autocompact.sessions.stores.binding import default_owner
from autocompact.thresholds import DEFAULT_IMAGE_TOKEN_ESTIMATE

if TYPE_CHECKING:
    from agents.run_config import CallModelData, ModelInputData, RunConfig

__all__ = ["StoreSession"]

_CONVERSATIONS = 64  # per store object: the conversations whose stored items are remembered


@dataclass(frozen=True, eq=False)
class _Original:
    """An item this process stored, with the side and the parts it was stored as (each one
    is itself: compared by identity)."""

    role: Role
    parts: tuple[Part, ...]
    item: Item


class _Originals:
    """The items stored through each store object in this process, per conversation (the
    ``limit`` used last), in the order they were stored; a conversation's list is cut down to
    what is still live each time its items are read."""

    def __init__(self, limit: int = _CONVERSATIONS) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._stores: weakref.WeakKeyDictionary[Any, OrderedDict[str, list[_Original]]] = (
            weakref.WeakKeyDictionary()
        )

    def _conversations(self, store: SessionStore) -> OrderedDict[str, list[_Original]] | None:
        try:
            return self._stores.setdefault(store, OrderedDict())
        except TypeError:  # a store that cannot be weakly referenced: nothing is remembered
            return None

    def known(self, store: SessionStore, session_id: str) -> list[_Original]:
        """The conversation's remembered items, in order (a copy of the list)."""
        with self._lock:
            conversations = self._conversations(store)
            return list(conversations.get(session_id, ())) if conversations is not None else []

    def add(self, store: SessionStore, session_id: str, originals: Sequence[_Original]) -> None:
        """Remember items just stored; the conversation becomes the one used last."""
        with self._lock:
            conversations = self._conversations(store)
            if conversations is None:
                return
            conversations.setdefault(session_id, []).extend(originals)
            conversations.move_to_end(session_id)
            while len(conversations) > self.limit:
                conversations.popitem(last=False)

    def keep(
        self,
        store: SessionStore,
        session_id: str,
        known: Sequence[_Original],
        live: Sequence[_Original],
    ) -> None:
        """After a read that began with ``known``: remember ``live`` (those the store still
        holds) and what was added since the read began; the conversation was used last."""
        with self._lock:
            conversations = self._conversations(store)
            if conversations is None or session_id not in conversations:
                return
            before = {id(o) for o in known}
            added = [o for o in conversations[session_id] if id(o) not in before]
            conversations[session_id] = [*live, *added]
            conversations.move_to_end(session_id)

    def forget(self, store: SessionStore, session_id: str) -> None:
        """Remember nothing of the conversation (it was cleared, or is gone)."""
        with self._lock:
            conversations = self._conversations(store)
            if conversations is not None:
                conversations.pop(session_id, None)


_ORIGINALS = _Originals()


def _same(
    known: Sequence[_Original],
    index: InOrder,
    flat: Sequence[tuple[Role, Part]],
    at: int,
    after: int,
) -> tuple[_Original | None, int]:
    """The first remembered item from ``after`` on whose side and parts are the stored parts
    from ``at`` on, and where the next search starts. Only the items whose first part could
    be equal are tried (``index``): a part stored by another worker costs a lookup, not a pass
    over every remembered item (which made a read quadratic)."""
    role, part = flat[at]
    for position in index.candidates((role, part_key(part)), after):
        original = known[position]
        end = at + len(original.parts)
        if (
            original.parts[0] == part
            and original.role == role
            and end <= len(flat)
            and all(flat[at + j] == (role, p) for j, p in enumerate(original.parts))
        ):
            return original, position + 1
    return None, after


def _outputs(known: Sequence[_Original]) -> dict[str, _Original]:
    """Each remembered ``function_call_output`` item by its call id (given twice: neither)."""
    found: dict[str, _Original | None] = {}
    for original in known:
        call = original.item.get("call_id")
        if original.item.get("type") == "function_call_output" and isinstance(call, str):
            found[call] = None if call in found else original
    return {call: original for call, original in found.items() if original is not None}


def _items_of(
    history: Sequence[Message], known: Sequence[_Original]
) -> tuple[list[Item], list[_Original]]:
    """The items of a stored history: a copy of the remembered item wherever the store gives
    back its parts (in order, each once), else built from the engine form; and the remembered
    items used."""
    flat = [(m.role, p) for m in history for p in m.parts]
    outputs = _outputs(known)
    index = InOrder((o.role, part_key(o.parts[0])) for o in known)
    items: list[Item] = []
    used: list[_Original] = []
    at = after = 0
    while at < len(flat):
        original, after = _same(known, index, flat, at, after)
        if original is not None:
            items.append(copy.deepcopy(original.item))
            used.append(original)
            at += len(original.parts)
            continue
        role, part = flat[at]
        built = from_autocompact([Message(role=role, parts=(part,))])
        at += 1
        if not built:  # thinking that carries no reasoning item goes out as none
            continue
        (item,) = built
        cleared = outputs.get(part.id) if isinstance(part, FunctionResponsePart) else None
        if cleared is not None:
            # An output clearing replaced is its original item with the new output (id, status).
            item = {**copy.deepcopy(cleared.item), "output": item["output"]}
            if cleared not in used:
                used.append(cleared)
        items.append(item)
    return items, used


class StoreSession:
    """An Agents SDK session kept in an autocompact store, compacted on the token ladder.

    Args:
        store: the store (``open_store("sqlite:///…")``, once per worker process).
        session_id: the conversation.
        context_window: the model's context window in tokens: required (``None`` is a
            ``ConfigError`` saying so). Unlike ``AutocompactSession``, the session cannot read
            it from the agent's model: the runner stores a request's input before the input
            filter sees the agent, and a session object lives for one request.
        turn_id: this request's idempotency key (default: a new one): the items of the ``n``-th
            ``add_items`` call are stored once under ``"{turn_id}:{n}"``. Build one session
            object per request and pass the request's id, so a retried request is not stored
            twice.
        owner: this worker's name in the store's leases and entries.
        summarizer, system_instruction, tools, clear_tool_outputs, image_token_estimate,
        hooks: as :class:`~autocompact.integrations.openai_agents.AutocompactSession`.

    The items this worker process stored come back as they were stored (ids, status,
    annotations, reasoning items whole), also through another session object on the same store
    object; items stored elsewhere are built from the store's form (see the module).
    """

    def __init__(
        self,
        store: SessionStore,
        session_id: str,
        *,
        context_window: int | None = None,
        turn_id: str | None = None,
        owner: str | None = None,
        summarizer: SummarizerChoice = "model",
        system_instruction: str | None = None,
        tools: Sequence[ToolSpec] = (),
        clear_tool_outputs: bool = True,
        image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE,
        hooks: Sequence[Hook] = (),
    ) -> None:
        if context_window is None:
            raise ConfigError(
                "StoreSession needs context_window=… (the model's context window in tokens, "
                "e.g. 128_000 or '128k'): unlike AutocompactSession it cannot read it from the "
                "agent's model, because the runner stores each request's input (which the store "
                "sizes) before the input filter sees the agent",
                key="context_window",
            )
        self.model = AgentModel(
            context_window=context_window, summarizer=summarizer, where="StoreSession"
        )
        self.store = store
        self.session_id = check_session_id(session_id, store.address)
        self.session_settings = None
        self.turn_id = turn_id or uuid.uuid4().hex
        self.owner = owner or default_owner()
        self.system_instruction = system_instruction
        self.tools = tuple(tools)
        self.compactions: list[CompressionInfo] = []
        self.trimmed_requests = 0
        self.duplicates = 0
        self._writes = 0
        self._wrapper: Any = None
        self._options = engine_options(
            clear_tool_outputs=clear_tool_outputs,
            image_token_estimate=image_token_estimate,
            hooks=hooks,
        )
        self._options["context_window"] = self.model.context_window
        self._built: tuple[object, ContextGuard] | None = None
        self._offline = summary_service("offline")
        self._counts = RequestCounts()
        self._run = RunAgents()
        self._learned: Calibration | None = None  # learned here, not stored yet

    def _learn(self, calibration: Calibration, *, last: bool = False) -> Calibration | None:
        """The calibration to store: ``calibration`` (the stored one) or what was learned here
        since, taught by the model's count of the last request let out (``None``: nothing new)."""
        state = GuardState(calibration=self._learned or calibration)
        learned = self._counts.learn(state, self._options["image_token_estimate"], last=last)
        if learned is not None:
            self._learned = learned.calibration
        return self._learned

    def _guard(self, *, summarizing: bool = False) -> ContextGuard:
        """The engine with the summarizer known now. Storing a turn or trimming a request
        writes no summary: before the input filter has seen the agent's model (the runner may
        store the input first) those get the offline summarizer's engine; a compaction needs
        the model (``ConfigError`` when it is not known)."""
        unknown = self.model.summarizer == "model" and not self.model.seen
        service = self._offline if unknown and not summarizing else self.model.service()
        if self._built is None or self._built[0] is not service:
            self._built = (service, ContextGuard(compression=service, **self._options))
        return self._built[1]

    def _core(self, *, summarizing: bool = False) -> Engine:
        return self._guard(summarizing=summarizing).store_core(
            self.store,
            self.session_id,
            owner=self.owner,
            system_instruction=self.system_instruction,
            tools=self.tools,
        )

    # -- the Session protocol --------------------------------------------------------------------

    async def get_items(self, limit: int | None = None, *, wrapper: Any = None) -> list[Item]:
        """The conversation's live items (a compacted history where a compaction ran): copies
        of the items this process stored where the store gives them back, the rest built from
        the store's form. ``wrapper`` is the runner's run context: the side queries' usage is
        added to it."""
        if wrapper is not None:
            self._wrapper = wrapper
        self._run.started(wrapper)
        if not self.store.exists(self.session_id):
            _ORIGINALS.forget(self.store, self.session_id)
            return []
        known = _ORIGINALS.known(self.store, self.session_id)
        items, used = _items_of(self.store.load(self.session_id).history, known)
        _ORIGINALS.keep(self.store, self.session_id, known, used)
        return items[-limit:] if limit else items

    async def add_items(self, items: list[Item], *, wrapper: Any = None) -> None:
        """Append the items as one stored turn, once per ``"{turn_id}:{n}"``; this process
        remembers them (a copy) to give them back as they are."""
        if not items:
            return
        items = copy.deepcopy(items)  # the runner's objects may change after this call
        converted = to_autocompact(items)
        if converted.system_items:
            raise ContentError(
                "a stored session keeps the conversation, not system or developer messages: "
                "pass them as the agent's instructions"
            )
        core = self._core()  # creates the session on first use, with its meta
        assert core.store is not None
        for message in converted.messages:
            if message.role == "user":
                # A store keeps every turn: what the input filter would refuse (a message or
                # tool result larger than the window) is refused before it is stored.
                core.check_fits(message)
        key = f"{self.turn_id}:{self._writes}"
        self._writes += 1
        # The runner stores a response's items after adding its usage: its count is known now.
        learned = self._learn(core.calibration)
        calibration = learned.to_dict() if learned is not None else None
        if not core.store.append(key, converted.messages, usage=None, calibration=calibration):
            self.duplicates += 1  # stored before (maybe elsewhere): those items are the stored
            return
        self._learned = None
        originals = [_Original(role=r, parts=p, item=i) for i, r, p in item_parts(converted)]
        _ORIGINALS.add(self.store, self.session_id, originals)

    async def pop_item(self, *, wrapper: Any = None) -> Item | None:
        """Refused: a store deletes nothing (use :meth:`clear_session` to start over)."""
        raise SessionStoreError(
            "a session store keeps every turn and removes none: pop_item is not supported; "
            "clear_session() starts the conversation over (the store keeps the old turns)",
            store=self.store.address,
            session_id=self.session_id,
        )

    async def clear_session(self, *, wrapper: Any = None) -> None:
        """Start the conversation over (the store keeps the old turns, replaced by a clear)."""
        if self.store.exists(self.session_id):
            self.store.clear(self.session_id, owner=self.owner)
        _ORIGINALS.forget(self.store, self.session_id)

    # -- compaction ------------------------------------------------------------------------------

    async def run_compaction(
        self, args: dict[str, Any] | None = None, *, wrapper: Any = None
    ) -> None:
        """Compact the stored conversation when the ladder says so (``{"force": True}``: now).

        Nothing happens while a call's output is not stored yet, or while another worker holds
        the store's compaction lease. On any failure the stored history is unchanged.
        """
        if wrapper is not None:
            self._wrapper = wrapper
        core = self._core(summarizing=True)
        self._learn(core.calibration, last=True)  # before the side queries' usage is added
        history = core.history
        if not history or pending_start(history) < len(history):
            return
        if args and args.get("force"):
            flow: Any = core.compaction_step(CompressionTrigger.MANUAL, None)
        else:
            # Between turns nothing is pending: an empty user message stands for the next one.
            flow = core.pre_send_flow(Message.user(""))
        side = core.compression.side_provider(core.provider)

        def provider_for(request: ChatRequest) -> Provider:
            return side

        try:
            await drive_flow_async(flow, provider_for)
        finally:
            self.compactions.extend(core.compactions)
            if not self.model.local and self._wrapper is not None:
                add_side_usage(getattr(self._wrapper, "usage", None), tuple(core.compactions))

    # -- the guarantee on each outgoing request -------------------------------------------------

    def run_config(self, **options: Any) -> RunConfig:
        """A ``RunConfig`` with :meth:`call_model_input_filter` installed (``options`` are
        passed to it): every request protected, and the agent's model learned for summaries."""
        return self.model.run_config(self.call_model_input_filter, options)

    def _sent(self, messages: Sequence[Message], system: str | None) -> None:
        """Mark the request let out (its messages, system prompt and tools) for its count."""
        stats = request_stats(messages, system_instruction=system, tools=self.tools)
        self._counts.sent(self._wrapper, stats)

    def call_model_input_filter(
        self, data: CallModelData[Any]
    ) -> ModelInputData | Awaitable[ModelInputData]:
        """For ``RunConfig(call_model_input_filter=session.call_model_input_filter)``: learns the
        system prompt and tools, and applies the guarantee with the stored breaker state and
        calibration (see :meth:`AutocompactSession.call_model_input_filter`; the requests of an
        agent used as a tool are protected, and nothing is learned from them; for an agent with
        MCP servers it is an awaitable that lists their tools to count them)."""
        return with_mcp_tools(data, self._filter)

    def _filter(self, data: CallModelData[Any], mcp_tools: Sequence[Any]) -> ModelInputData:
        model_data = data.model_data
        converted = to_autocompact(model_data.input)
        own = self._run.owns(data.agent)
        if own:
            self.model.learn(data.agent)
            self.system_instruction = model_data.instructions
            self.tools = agent_tool_specs(data.agent, mcp_tools)
        tools = self.tools if own else agent_tool_specs(data.agent, mcp_tools)
        texts = (model_data.instructions, converted.system_instruction)
        system = "\n\n".join(t for t in texts if t) or None
        state = GuardState()
        if self.store.exists(self.session_id):
            snapshot = self.store.load(self.session_id)
            state = GuardState(
                consecutive_failures=snapshot.consecutive_failures,
                hold_until=snapshot.hold_until,
                calibration=Calibration.from_dict(snapshot.calibration),
            )
        learned = self._learn(state.calibration)
        if learned is not None:
            state = replace(state, calibration=learned)
        sent, replaced = guarded_input(
            self._guard(), model_data, converted, system=system, tools=tools, state=state
        )
        if own:
            self._sent(sent, system)
        else:
            self._counts.forget()
        if replaced is None:
            return model_data
        self.trimmed_requests += 1
        return replaced

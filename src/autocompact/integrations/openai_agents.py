"""The OpenAI Agents SDK: a compacting session wrapper and an input filter for the guarantee.

Install with ``pip install "autocompact[openai-agents]"``. Importing this module imports the SDK
(``agents``); ``import autocompact`` never does.

- :class:`AutocompactSession` wraps any session (``SQLiteSession``, ``SQLAlchemySession``, the
  encrypted or Redis ones, ...) and compacts its items on the token ladder in ``run_compaction``,
  the entry point the runner calls after each turn (it skips turns whose local tool outputs are
  still pending, and a compaction here never cuts a call whose output is not stored yet). The
  system prompt and the tool declarations are counted: pass them, or let
  :meth:`AutocompactSession.call_model_input_filter` learn them from the requests the runner sends.
- :class:`StoreSession` is a session kept in an autocompact store (SQLite, PostgreSQL, JSONL),
  shared by workers: idempotent appends, compactions single-flight with the compare-and-swap,
  the breaker count and calibration stored with the conversation (``docs/sessions.md``).
- :meth:`AutocompactSession.call_model_input_filter` (``RunConfig(call_model_input_filter=...)``)
  applies the guarantee to each outgoing request: a request still at or above the hard threshold
  has its oldest turns left out of that request only, never out of the session.

The decisions are the engine's (:class:`autocompact.guard.ContextGuard`); this module converts
items. Conversion is lossless: items the engine did not change come back as the same objects;
new ones (the summary, cleared tool output) are built from the engine's parts. Item types the
engine cannot express (hosted tool calls, computer use, ...) raise
:class:`~autocompact.errors.ContentError` naming the item.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, assert_never

from autocompact.compaction.extractive import extractive_summary
from autocompact.compaction.plan import CompressionInfo, Summarizer
from autocompact.compaction.service import CompressionService
from autocompact.content import (
    DocumentPart,
    FunctionCallPart,
    FunctionResponsePart,
    ImagePart,
    Message,
    OpaquePart,
    Part,
    TextPart,
    ThinkingPart,
    Usage,
)
from autocompact.errors import ConfigError, ContentError, MissingDependencyError, ProviderError
from autocompact.events import Hook
from autocompact.guard import ContextGuard, GuardResult, GuardState
from autocompact.providers.base import (
    ChatRequest,
    Completion,
    FinishReason,
    Provider,
    StreamDone,
    ToolSpec,
)
from autocompact.thresholds import COMPACT_MAX_OUTPUT_TOKENS, DEFAULT_IMAGE_TOKEN_ESTIMATE

try:
    from agents import Agent, ModelSettings
    from agents.exceptions import AgentsException
    from agents.memory.session import Session
    from agents.models.interface import Model, ModelTracing
    from agents.run_config import CallModelData, ModelInputData
    from agents.tool import FunctionTool
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    raise MissingDependencyError("openai-agents", "openai-agents") from exc

if TYPE_CHECKING:
    from autocompact.integrations._openai_agents_store import StoreSession

__all__ = [
    "AgentsModelProvider",
    "AutocompactSession",
    "ConvertedItems",
    "StoreSession",
    "from_autocompact",
    "to_autocompact",
]

Item: TypeAlias = Any  # TResponseInputItem: a TypedDict union; items are plain dicts at runtime
SummarizerChoice: TypeAlias = Literal["offline"] | Provider | Summarizer | Model
"""``"offline"``: the extractive summarizer; an autocompact provider; a local function; or an
Agents SDK ``Model`` (thinking off, 20K cap)."""

# -- conversion ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConvertedItems:
    """Session items as autocompact messages, with what is needed to convert back.

    Attributes:
        messages: consecutive items of one side merged into one message.
        system_items: system / developer messages (counted as the system instruction, put back
            at the front when a compaction summarized them).
        system_instruction: their text, joined.
    """

    messages: tuple[Message, ...]
    system_items: tuple[Item, ...]
    system_instruction: str | None
    _originals: dict[int, int] = field(default_factory=dict, repr=False, compare=False)
    _items: tuple[Item, ...] = field(default=(), repr=False, compare=False)


def _content_parts(content: Any, where: str) -> list[Part]:
    if isinstance(content, str):
        return [TextPart(text=content)]
    _check_content(content, where)  # issue 27: a clear ContentError, not a TypeError
    parts: list[Part] = []
    for piece in content:
        kind = piece.get("type")
        if kind in ("input_text", "output_text"):
            parts.append(TextPart(text=piece["text"]))
        elif kind == "refusal":
            parts.append(TextPart(text=piece["refusal"]))
        elif kind == "input_image" and piece.get("image_url"):
            parts.append(ImagePart(url=piece["image_url"]))
        elif kind == "input_file" and (piece.get("file_data") or piece.get("file_url")):
            parts.append(
                DocumentPart(
                    data=piece.get("file_data"),
                    url=piece.get("file_url"),
                    title=piece.get("filename"),
                )
            )
        else:
            raise ContentError(
                f"{where}: content of type {kind!r} cannot be expressed by autocompact "
                "(text, images by URL and files by data or URL can)"
            )
    return parts


def _role_of(item: Item, where: str) -> Literal["user", "model", "system"]:
    if not isinstance(item, dict):
        raise ContentError(f"{where}: an item must be a dict, got {type(item).__name__}")
    kind = item.get("type")
    if kind in (None, "message") and "role" in item:
        role = item["role"]
        if role in ("system", "developer"):
            return "system"
        if role == "user":
            return "user"
        if role == "assistant":
            return "model"
        raise ContentError(f"{where}: unknown message role {role!r}")
    if kind in ("function_call", "reasoning"):
        return "model"
    if kind == "function_call_output":
        return "user"
    raise ContentError(
        f"{where}: items of type {kind!r} cannot be expressed by autocompact (messages, function "
        "calls and outputs and reasoning items can)"
    )


def _parts_of(item: Item, where: str, names: dict[str, str]) -> list[Part]:
    kind = item.get("type")
    if kind == "function_call":
        try:
            arguments = json.loads(item.get("arguments") or "{}")
        except json.JSONDecodeError:
            arguments = None
        if not isinstance(arguments, dict):
            arguments = {"_arguments": item.get("arguments")}
        names[item["call_id"]] = item["name"]
        return [FunctionCallPart(id=item["call_id"], name=item["name"], arguments=arguments)]
    if kind == "function_call_output":
        call_id = item["call_id"]
        return [
            FunctionResponsePart(id=call_id, name=names.get(call_id, ""), response=item["output"])
        ]
    if kind == "reasoning":
        text = "\n".join(s.get("text", "") for s in item.get("summary") or ())
        return [ThinkingPart(text=text, signature=item.get("encrypted_content"))]
    return _content_parts(item.get("content", ""), where)


def _check_content(content: Any, where: str) -> None:
    """``content`` is a list of content-part dicts (a str was taken before), else an error."""
    if not isinstance(content, list | tuple):
        raise ContentError(
            f"{where}: field 'content' must be a string or a list of content parts, got "
            f"{type(content).__name__} {content!r:.40}"
        )
    for i, piece in enumerate(content):
        if not isinstance(piece, dict):
            raise ContentError(
                f"{where}: content[{i}] must be a content-part object, got "
                f"{type(piece).__name__} {piece!r:.40}"
            )


def _text(content: Any, where: str = "a system item") -> str:
    if isinstance(content, str):
        return content
    _check_content(content, where)
    return "".join(p.get("text", "") for p in content if isinstance(p, dict))


def to_autocompact(items: Sequence[Item]) -> ConvertedItems:
    """Convert session items.

    Raises:
        ContentError: an item cannot be expressed; the message names its index and type.
    """
    messages: list[Message] = []
    system: list[Item] = []
    originals: dict[int, int] = {}
    names: dict[str, str] = {}
    role: Literal["user", "model"] | None = None
    parts: list[Part] = []
    for index, item in enumerate(items):
        where = f"item {index}"
        side = _role_of(item, where)
        if side == "system":
            system.append(item)
            continue
        if side != role and parts:
            assert role is not None
            messages.append(Message(role=role, parts=tuple(parts)))
            parts = []
        role = side
        for part in _parts_of(item, where, names):
            originals[id(part)] = index
            parts.append(part)
    if parts and role is not None:
        messages.append(Message(role=role, parts=tuple(parts)))
    text = "\n\n".join(_text(item.get("content", "")) for item in system) or None
    return ConvertedItems(
        messages=tuple(messages),
        system_items=tuple(system),
        system_instruction=text,
        _originals=originals,
        _items=tuple(items),
    )


def _new_item(part: Part, role: str) -> Item:
    match part:
        case TextPart():
            return {"role": "user" if role == "user" else "assistant", "content": part.text}
        case FunctionCallPart():
            return {
                "type": "function_call",
                "call_id": part.id,
                "name": part.name,
                "arguments": json.dumps(dict(part.arguments)),
            }
        case FunctionResponsePart():
            output = part.response if isinstance(part.response, str) else json.dumps(part.response)
            return {"type": "function_call_output", "call_id": part.id, "output": output}
        case ThinkingPart():
            item: dict[str, Any] = {
                "type": "reasoning",
                "id": "rs_autocompact",
                "summary": [{"type": "summary_text", "text": part.text}],
            }
            if part.signature:
                item["encrypted_content"] = part.signature
            return item
        case ImagePart():
            url = part.url or f"data:{part.media_type};base64,{part.data}"
            return {"role": "user", "content": [{"type": "input_image", "image_url": url}]}
        case OpaquePart():
            # A native compaction result reaches another framework as its summary text.
            return {"role": "user" if role == "user" else "assistant", "content": part.summary}
        case DocumentPart():
            piece: dict[str, Any] = {"type": "input_file"}
            if part.url:
                piece["file_url"] = part.url
            else:
                piece["file_data"] = part.data or base64.b64encode(b"").decode()
            if part.title:
                piece["filename"] = part.title
            return {"role": "user", "content": [piece]}
        case _:
            assert_never(part)


def from_autocompact(
    messages: Sequence[Message], converted: ConvertedItems | None = None
) -> list[Item]:
    """Convert back; items ``converted`` produced come back as the original objects."""
    originals = converted._originals if converted is not None else {}
    source = converted._items if converted is not None else ()
    out: list[Item] = []
    indices: list[int | None] = []  # each output item's index in the source (None: new)
    for message in messages:
        for part in message.parts:
            index = originals.get(id(part))
            if index is None:
                out.append(_new_item(part, message.role))
                indices.append(None)
            elif not indices or index != indices[-1]:
                out.append(source[index])
                indices.append(index)
    if converted is not None:
        # System items go back after the last kept item that preceded them (first if none).
        for item in converted.system_items:
            at = next(i for i, candidate in enumerate(source) if candidate is item)
            before = [j for j, k in enumerate(indices) if k is not None and k < at]
            position = before[-1] + 1 if before else 0
            out.insert(position, item)
            indices.insert(position, at)
    return out


# -- an Agents SDK model as the summarizer -------------------------------------------------------


class AgentsModelProvider:
    """An Agents SDK ``Model`` as an autocompact provider (for the summary side query).

    The side query goes out with ``max_tokens`` = the request's cap (20,000 for a summary),
    reasoning off (no ``reasoning`` setting) and no tools. Async only.
    """

    name = "openai-agents"

    def __init__(self, model: Model, *, model_name: str = "agents-model") -> None:
        self.agents_model = model
        self.model = model_name

    async def acomplete(self, request: ChatRequest) -> Completion:
        """Send the request through the model's ``get_response``."""
        settings = ModelSettings(max_tokens=request.max_output_tokens or COMPACT_MAX_OUTPUT_TOKENS)
        try:
            response = await self.agents_model.get_response(
                request.system_instruction,
                from_autocompact(request.messages),
                settings,
                [],
                None,
                [],
                ModelTracing.DISABLED,
                previous_response_id=None,
                conversation_id=None,
                prompt=None,
            )
        except AgentsException as exc:
            raise ProviderError(str(exc), provider=self.name, model=self.model) from exc
        converted = to_autocompact(response.to_input_items())
        parts = tuple(p for m in converted.messages if m.role == "model" for p in m.parts)
        return Completion(
            message=Message(role="model", parts=parts),
            usage=Usage(
                prompt_tokens=response.usage.input_tokens,
                output_tokens=response.usage.output_tokens,
            ),
            finish_reason=FinishReason.STOP,
        )

    def _sync_refused(self) -> ConfigError:
        return ConfigError("Agents SDK models are asynchronous: use the session's async methods")

    def complete(self, request: ChatRequest) -> Completion:
        """Refused: Agents SDK models are async."""
        raise self._sync_refused()

    def stream(self, request: ChatRequest) -> Any:
        """Refused (summaries are never streamed)."""
        raise self._sync_refused()

    async def _astream(self, request: ChatRequest) -> Any:
        yield StreamDone(completion=await self.acomplete(request))

    def astream(self, request: ChatRequest) -> Any:
        """The whole summary as one :class:`StreamDone`."""
        stream: Any = self._astream(request)
        return stream


def _service(choice: SummarizerChoice) -> CompressionService:
    if isinstance(choice, Model):
        return CompressionService(AgentsModelProvider(choice))
    if choice == "offline":
        return CompressionService(None, summarizer=extractive_summary)
    if isinstance(choice, Provider):
        return CompressionService(choice)
    if callable(choice):
        return CompressionService(None, summarizer=choice)
    raise ConfigError(
        "summarizer must be 'offline', an autocompact provider, an Agents SDK Model or a "
        f"function, got {choice!r}"
    )


def agent_tool_specs(agent: Agent[Any]) -> tuple[ToolSpec, ...]:
    """The agent's function tools as autocompact declarations (hosted tools by name only)."""
    specs: list[ToolSpec] = []
    for tool in agent.tools:
        if isinstance(tool, FunctionTool):
            specs.append(
                ToolSpec(
                    name=tool.name,
                    description=tool.description or "",
                    parameters=tool.params_json_schema,
                )
            )
        else:
            specs.append(ToolSpec(name=str(getattr(tool, "name", type(tool).__name__))))
    return tuple(specs)


# -- the session ---------------------------------------------------------------------------------


def _pending_start(messages: Sequence[Message]) -> int:
    """Where the suffix that holds calls without a stored output begins (len: none)."""
    answered = {p.id for m in messages for p in m.function_responses}
    for index, message in enumerate(messages):
        if any(call.id not in answered for call in message.function_calls):
            return index
    return len(messages)


class AutocompactSession:
    """A session that compacts the items of an underlying session on the token ladder.

    Args:
        underlying: the session that stores the items (any ``Session``).
        context_window: the model's context window in tokens.
        summarizer: ``"offline"`` (the extractive summarizer), an autocompact provider, an
            Agents SDK ``Model``, or a function ``(messages) -> summary``.
        system_instruction, tools: counted with the history; learned from each request by
            :meth:`call_model_input_filter` when it is installed.
        state: the breaker's count and calibration to start from.
        clear_tool_outputs: clear old tool output (no model call) before summarizing.
        image_token_estimate: tokens per image or document.
        hooks: callables that receive every :mod:`autocompact.events` record.
    """

    def __init__(
        self,
        underlying: Session,
        *,
        context_window: int,
        summarizer: SummarizerChoice = "offline",
        system_instruction: str | None = None,
        tools: Sequence[ToolSpec] = (),
        state: GuardState | None = None,
        clear_tool_outputs: bool = True,
        image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE,
        hooks: Sequence[Hook] = (),
    ) -> None:
        self.underlying = underlying
        self.session_id = underlying.session_id
        self.session_settings = getattr(underlying, "session_settings", None)
        self.system_instruction = system_instruction
        self.tools = tuple(tools)
        self.state = state or GuardState()
        self.compactions: list[CompressionInfo] = []
        self.trimmed_requests = 0
        self._guard = ContextGuard(
            context_window=context_window,
            compression=_service(summarizer),
            clear_tool_outputs=clear_tool_outputs,
            image_token_estimate=image_token_estimate,
            hooks=hooks,
        )

    # -- the Session protocol (delegated) --------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[Item]:
        """The underlying session's items."""
        return await self.underlying.get_items(limit)

    async def add_items(self, items: list[Item]) -> None:
        """Store items in the underlying session."""
        await self.underlying.add_items(items)

    async def pop_item(self) -> Item | None:
        """Remove and return the newest item."""
        return await self.underlying.pop_item()

    async def clear_session(self) -> None:
        """Forget every item (and the breaker's count)."""
        await self.underlying.clear_session()
        self.state = GuardState(calibration=self.state.calibration)

    # -- compaction ------------------------------------------------------------------------------

    async def run_compaction(self, args: dict[str, Any] | None = None) -> None:
        """Compact the stored items when the ladder says so (``{"force": True}``: always).

        Calls whose output is not stored yet, and everything after them, are left out of the
        compaction and kept as they are. On any failure the stored items are unchanged.
        """
        items = await self.underlying.get_items()
        converted = to_autocompact(items)
        messages = converted.messages
        cut = _pending_start(messages)
        head, pending_tail = messages[:cut], messages[cut:]
        if not head:
            return
        # Between turns nothing is pending: an empty user message stands for the next one.
        placeholder = head[-1].role != "user"
        request = (*head, Message.user("")) if placeholder else head
        result = await self._guard.arun(
            request,
            system_instruction=self._system(converted),
            tools=self.tools,
            state=self.state,
            reactive=bool(args and args.get("force")),
        )
        self.compactions.extend(result.compactions)
        self.state = result.state
        if not result.compacted:
            return
        kept = result.history[:-1] if placeholder else result.history
        new_items = from_autocompact((*kept, *pending_tail), converted)
        await self._replace(items, new_items)

    async def _replace(self, old: list[Item], new: list[Item]) -> None:
        await self.underlying.clear_session()
        try:
            await self.underlying.add_items(new)
        except BaseException:
            await self.underlying.clear_session()
            await self.underlying.add_items(old)
            raise

    def _system(self, converted: ConvertedItems) -> str | None:
        text = "\n\n".join(t for t in (self.system_instruction, converted.system_instruction) if t)
        return text or None

    # -- the guarantee on each outgoing request -------------------------------------------------

    def call_model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """For ``RunConfig(call_model_input_filter=session.call_model_input_filter)``.

        Learns the system prompt and tools the runner sends (so compaction counts them) and,
        when the request is at or above the hard threshold, leaves its oldest turns out of this
        request only.
        """
        model_data = data.model_data
        self.system_instruction = model_data.instructions
        self.tools = agent_tool_specs(data.agent)
        converted = to_autocompact(model_data.input)
        if not converted.messages or converted.messages[-1].role != "user":
            return model_data
        result: GuardResult = self._guard.guarantee(
            converted.messages,
            system_instruction=self._system(converted),
            tools=self.tools,
            state=self.state,
        )
        if not result.trimmed:
            return model_data
        self.trimmed_requests += 1
        return ModelInputData(
            input=from_autocompact(result.request, converted),
            instructions=model_data.instructions,
        )


def __getattr__(name: str) -> Any:
    # StoreSession lives in its own module, which imports this one.
    if name == "StoreSession":
        from autocompact.integrations._openai_agents_store import StoreSession

        return StoreSession
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""The OpenAI Agents SDK's items as autocompact messages, and the summarizer choice.

Shared by :mod:`autocompact.integrations.openai_agents` (the compacting session wrapper) and
:mod:`autocompact.integrations._openai_agents_store` (the session kept in a store); neither
imports the other's internals. Conversion is lossless: items the engine did not change come
back as the same objects; item types the engine cannot express raise
:class:`~autocompact.errors.ContentError` naming the item.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, assert_never

from autocompact.compaction.extractive import extractive_summary
from autocompact.compaction.plan import Summarizer
from autocompact.compaction.service import CompressionService
from autocompact.content import (
    DocumentPart,
    FunctionCallPart,
    FunctionResponsePart,
    ImagePart,
    Message,
    OpaquePart,
    Part,
    Role,
    TextPart,
    ThinkingPart,
    Usage,
)
from autocompact.convert.openai_responses import reasoning_ref, reasoning_signature
from autocompact.errors import ConfigError, ContentError, MissingDependencyError, ProviderError
from autocompact.jsonsafe import loads
from autocompact.providers.base import (
    AsyncOnlyProvider,
    ChatRequest,
    Completion,
    FinishReason,
    Provider,
    ToolSpec,
)
from autocompact.thresholds import COMPACT_MAX_OUTPUT_TOKENS

try:
    from agents import (
        Agent,
        AgentOutputSchema,
        AgentOutputSchemaBase,
        Handoff,
        ModelSettings,
        handoff,
    )
    from agents.exceptions import AgentsException
    from agents.models.fake_id import FAKE_RESPONSES_ID
    from agents.models.interface import Model, ModelTracing
    from agents.tool import FunctionTool
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    raise MissingDependencyError("openai-agents", "openai-agents") from exc

__all__ = [
    "AgentsModelProvider",
    "ConvertedItems",
    "Item",
    "SummarizerChoice",
    "agent_tool_specs",
    "from_autocompact",
    "item_parts",
    "pending_start",
    "summary_service",
    "to_autocompact",
]

Item: TypeAlias = Any  # TResponseInputItem: a TypedDict union; items are plain dicts at runtime
SummarizerChoice: TypeAlias = Literal["model", "offline"] | Provider | Summarizer | Model
"""``"model"``: the agent's own model (sessions learn it from their input filter);
``"offline"``: the extractive summarizer; an autocompact provider; a local function; or an
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


def _field(holder: Any, name: str, index: int, where: str) -> str:
    """``holder[name]`` when it is a str, else a ContentError naming the item and the field."""
    value = holder.get(name)
    if not isinstance(value, str):
        got = "it is missing" if name not in holder else f"got {type(value).__name__} {value!r:.40}"
        raise ContentError(f"{where}: field {name!r} must be a string, {got}", index=index)
    return value


def _optional_field(holder: Any, name: str, index: int, where: str) -> str | None:
    """``holder[name]`` when it is a str or absent (None), else a ContentError naming it."""
    return None if holder.get(name) is None else _field(holder, name, index, where)


def _content_parts(content: Any, index: int) -> list[Part]:
    if isinstance(content, str):
        return [TextPart(text=content)]
    where = f"item {index}"
    _check_content(content, index)  # a clear ContentError, not a TypeError
    parts: list[Part] = []
    for i, piece in enumerate(content):
        kind = piece.get("type")
        at = f"{where}: content[{i}] of type {kind!r}"
        if kind in ("input_text", "output_text"):
            parts.append(TextPart(text=_field(piece, "text", index, at)))
        elif kind == "refusal":
            parts.append(TextPart(text=_field(piece, "refusal", index, at)))
        elif kind == "input_image" and piece.get("image_url"):
            parts.append(ImagePart(url=_field(piece, "image_url", index, at)))
        elif kind == "input_file" and (piece.get("file_data") or piece.get("file_url")):
            parts.append(
                DocumentPart(
                    data=_optional_field(piece, "file_data", index, at),
                    url=_optional_field(piece, "file_url", index, at),
                    title=_optional_field(piece, "filename", index, at),
                )
            )
        else:
            raise ContentError(
                f"{where}: content of type {kind!r} cannot be expressed by autocompact "
                "(text, images by URL and files by data or URL can)",
                index=index,
            )
    return parts


def _role_of(item: Item, index: int) -> Literal["user", "model", "system"]:
    where = f"item {index}"
    if not isinstance(item, dict):
        raise ContentError(
            f"{where}: an item must be a dict, got {type(item).__name__}", index=index
        )
    kind = item.get("type")
    if kind in (None, "message") and "role" in item:
        role = item["role"]
        if role in ("system", "developer"):
            return "system"
        if role == "user":
            return "user"
        if role == "assistant":
            return "model"
        raise ContentError(f"{where}: unknown message role {role!r}", index=index)
    if kind in ("function_call", "reasoning"):
        return "model"
    if kind == "function_call_output":
        return "user"
    raise ContentError(
        f"{where}: items of type {kind!r} cannot be expressed by autocompact (messages, function "
        "calls and outputs and reasoning items can)",
        index=index,
    )


def _arguments(item: Item, index: int) -> dict[str, Any]:
    """A call's arguments: its JSON string parsed, or an object given as is (hand-built items)."""
    raw = item.get("arguments")
    if isinstance(raw, Mapping):
        return dict(raw)
    if raw is not None and not isinstance(raw, str):
        raise ContentError(
            f"item {index}: field 'arguments' must be a JSON string or an object, got "
            f"{type(raw).__name__} {raw!r:.40}",
            index=index,
        )
    try:
        arguments = loads(raw or "{}")
    except json.JSONDecodeError:
        arguments = None
    return arguments if isinstance(arguments, dict) else {"_arguments": raw}


def _summary_text(item: Item, index: int) -> str:
    summary = item.get("summary") or ()
    _check_parts(summary, index, "summary", "a list of summary_text parts", "a summary_text part")
    where = f"item {index}"
    return "\n".join(
        _field({"text": "", **entry}, "text", index, f"{where}: summary[{i}]")
        for i, entry in enumerate(summary)
    )


def _parts_of(item: Item, index: int, names: dict[str, str]) -> list[Part]:
    kind = item.get("type")
    where = f"item {index}"
    if kind == "function_call":
        arguments = _arguments(item, index)
        call_id = _field(item, "call_id", index, where)
        names[call_id] = _field(item, "name", index, where)
        return [FunctionCallPart(id=call_id, name=names[call_id], arguments=arguments)]
    if kind == "function_call_output":
        call_id = _field(item, "call_id", index, where)
        if item.get("output") is None:
            raise ContentError(f"{where}: field 'output' is missing (or None)", index=index)
        return [
            FunctionResponsePart(id=call_id, name=names.get(call_id, ""), response=item["output"])
        ]
    if kind == "reasoning":
        text = _summary_text(item, index)
        encrypted = item.get("encrypted_content")
        ident = item.get("id")
        if item.get("provider_data") or ident == FAKE_RESPONSES_ID:
            # Another provider's reasoning (the SDK's Chat Completions and LiteLLM models write
            # it so, an Anthropic or Gemini signature as its encrypted content): the Responses
            # API cannot verify it (400 invalid_encrypted_content), no adapter can send it, and
            # the item the runner gave still comes back as given.
            return [ThinkingPart(text=text)]
        carried = ident if isinstance(ident, str) and ident else None
        if not isinstance(encrypted, str | None) or (carried is None and encrypted is None):
            return [ThinkingPart(text=text, signature=encrypted)]  # (not a str: an error)
        # The item's id (if any) and encrypted content, as the Responses adapter keeps them: the
        # item comes back whole from the store's form (ids are what the API and runner key on),
        # and its signature says it is OpenAI's (another provider's is not sent back).
        return [ThinkingPart(text=text, signature=reasoning_signature(carried, encrypted))]
    return _content_parts(item.get("content", ""), index)


def _check_content(content: Any, index: int) -> None:
    """``content`` is a list of content-part dicts (a str was taken before), else an error."""
    _check_parts(
        content, index, "content", "a string or a list of content parts", "a content-part object"
    )


def _check_parts(value: Any, index: int, field: str, expected: str, part: str) -> None:
    """``value`` (item ``index``'s ``field``) is a list of dicts, else a ContentError saying
    that it must be ``expected`` and each entry ``part``."""
    where = f"item {index}"
    if not isinstance(value, list | tuple):
        raise ContentError(
            f"{where}: field {field!r} must be {expected}, got "
            f"{type(value).__name__} {value!r:.40}",
            index=index,
        )
    for i, entry in enumerate(value):
        if not isinstance(entry, dict):
            raise ContentError(
                f"{where}: {field}[{i}] must be {part}, got {type(entry).__name__} {entry!r:.40}",
                index=index,
            )


def _text(content: Any, index: int) -> str:
    """A system or developer item's text (its parts other than text are not counted)."""
    if isinstance(content, str):
        return content
    _check_content(content, index)
    return "".join(
        _field({"text": "", **p}, "text", index, f"item {index}: content[{i}]")
        for i, p in enumerate(content)
    )


def to_autocompact(items: Sequence[Item]) -> ConvertedItems:
    """Convert session items.

    Raises:
        ContentError: an item cannot be expressed, or a field is missing or of the wrong type
            (a call's ``arguments`` may be a JSON string or an object); the message names the
            item's index (also ``.index``) and the field.
    """
    messages: list[Message] = []
    system: list[Item] = []
    originals: dict[int, int] = {}
    names: dict[str, str] = {}
    role: Literal["user", "model"] | None = None
    parts: list[Part] = []
    texts: list[str] = []
    for index, item in enumerate(items):
        side = _role_of(item, index)
        if side == "system":
            system.append(item)
            texts.append(_text(item.get("content", ""), index))
            continue
        if side != role and parts:
            assert role is not None
            messages.append(Message(role=role, parts=tuple(parts)))
            parts = []
        role = side
        try:
            item_parts = _parts_of(item, index, names)
        except ContentError as exc:  # a part refused a value: name the item too
            if exc.index is not None:
                raise
            raise ContentError(f"item {index}: {exc}", index=index) from exc
        for part in item_parts:
            originals[id(part)] = index
            parts.append(part)
    if parts and role is not None:
        messages.append(Message(role=role, parts=tuple(parts)))
    text = "\n\n".join(texts) or None
    return ConvertedItems(
        messages=tuple(messages),
        system_items=tuple(system),
        system_instruction=text,
        _originals=originals,
        _items=tuple(items),
    )


def item_parts(converted: ConvertedItems) -> list[tuple[Item, Role, tuple[Part, ...]]]:
    """Each item that became parts, in order, with its side and those parts as this conversion
    made them (a call's output is named after its call when both were converted together).
    System items and a message with an empty content list become none."""
    found: dict[int, tuple[Role, list[Part]]] = {}
    for message in converted.messages:
        for part in message.parts:
            found.setdefault(converted._originals[id(part)], (message.role, []))[1].append(part)
    return [(converted._items[i], role, tuple(parts)) for i, (role, parts) in found.items()]


def _new_item(part: Part, role: str) -> Item | None:
    """The item a part the engine made (or rebuilt from a store's form) goes out as; ``None``
    for thinking that carries no reasoning item (see below)."""
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
            # Only a Responses reasoning item goes out: a part whose signature carries one (an
            # id, encrypted content, or both; the form the Responses adapter writes and reads).
            # No made-up id: the API looks an id up and answers 404 for one it never issued;
            # without one it reads the encrypted content (the SDK's "omit" id policy). Other
            # thinking goes out as no item, as the adapter leaves it out: with neither an id
            # nor encrypted content the API requires the id (400 "Missing required parameter");
            # another provider's signature (Anthropic's, Gemini's, unmarked, or under the SDK's
            # placeholder id) is not an OpenAI blob: 400 invalid_encrypted_content.
            ref = reasoning_ref(part) or {}
            ident, encrypted = ref.get("id"), ref.get("encrypted_content")
            ident = ident if isinstance(ident, str) and ident else None
            encrypted = encrypted if isinstance(encrypted, str) else None
            if (ident is None and encrypted is None) or ident == FAKE_RESPONSES_ID:
                return None
            item: dict[str, Any] = {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": part.text}],
            }
            if ident is not None:
                item["id"] = ident
            if encrypted is not None:
                item["encrypted_content"] = encrypted
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


def _outputs_by_call(items: Sequence[Item]) -> dict[str, Item]:
    """Each ``function_call_output`` item by its call id (an id given twice: neither)."""
    found: dict[str, Item | None] = {}
    for item in items:
        if item.get("type") == "function_call_output" and isinstance(item.get("call_id"), str):
            found[item["call_id"]] = None if item["call_id"] in found else item
    return {call: item for call, item in found.items() if item is not None}


def from_autocompact(
    messages: Sequence[Message], converted: ConvertedItems | None = None
) -> list[Item]:
    """Convert back; items ``converted`` produced come back as the original objects."""
    originals = converted._originals if converted is not None else {}
    source = converted._items if converted is not None else ()
    out: list[Item] = []
    indices: list[int | None] = []  # each output item's index in the source (None: new)
    outputs = _outputs_by_call(source)
    for message in messages:
        for part in message.parts:
            index = originals.get(id(part))
            if index is None:
                item = _new_item(part, message.role)
                if item is None:
                    continue
                original = outputs.get(part.id) if isinstance(part, FunctionResponsePart) else None
                # A cleared output is its original item with the new output (id, status kept).
                out.append({**original, "output": item["output"]} if original else item)
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


class AgentsModelProvider(AsyncOnlyProvider):
    """An Agents SDK ``Model`` as an autocompact provider (for the summary side query).

    The side query goes out with ``max_tokens`` = the request's cap (20,000 for a summary),
    reasoning off (no ``reasoning`` setting) and no tools. Async only.
    """

    sync_refusal = "Agents SDK models are asynchronous: use the session's async methods"

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


def summary_service(choice: SummarizerChoice) -> CompressionService:
    if isinstance(choice, Model):
        return CompressionService(AgentsModelProvider(choice))
    if choice == "offline":
        return CompressionService(None, summarizer=extractive_summary)
    if choice == "model":
        raise ConfigError("summarizer='model' needs the agent's model (a session learns it)")
    if isinstance(choice, Provider):
        return CompressionService(choice)
    if callable(choice):
        return CompressionService(None, summarizer=choice)
    raise ConfigError(
        "summarizer must be 'model', 'offline', an autocompact provider, an Agents SDK Model or a "
        f"function, got {choice!r}"
    )


def agent_tool_specs(agent: Agent[Any], mcp_tools: Sequence[Any] = ()) -> tuple[ToolSpec, ...]:
    """What the agent's requests declare besides the items, as autocompact declarations (the
    estimate sizes their JSON): the tools its MCP servers list (``mcp_tools``, as the agent's
    ``get_mcp_tools`` gives them), its function tools (hosted tools by name only), each handoff
    (sent as a function tool; one enabled by a callable is counted), and its output schema
    (sent as the Responses ``text.format``, the Chat Completions ``response_format``), declared
    as ``final_output``."""
    specs: list[ToolSpec] = []
    for tool in (*mcp_tools, *agent.tools):
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
    for target in agent.handoffs:
        declared = target if isinstance(target, Handoff) else handoff(target)
        if declared.is_enabled is not False:
            specs.append(
                ToolSpec(
                    name=declared.tool_name,
                    description=declared.tool_description or "",
                    parameters=declared.input_json_schema,
                )
            )
    schema = _output_schema(agent)
    if schema is not None:
        specs.append(ToolSpec(name="final_output", description="json_schema", parameters=schema))
    return tuple(specs)


def _output_schema(agent: Agent[Any]) -> dict[str, Any] | None:
    """The JSON schema the agent's requests carry for its output type (``None``: plain text),
    resolved as the runner resolves it."""
    output_type = agent.output_type
    if output_type is None or output_type is str:
        return None
    schema = (
        output_type
        if isinstance(output_type, AgentOutputSchemaBase)
        else AgentOutputSchema(output_type)
    )
    return None if schema.is_plain_text() else schema.json_schema()


# -- the session ---------------------------------------------------------------------------------


def pending_start(messages: Sequence[Message]) -> int:
    """Where the suffix that holds calls without a stored output begins (len: none)."""
    answered = {p.id for m in messages for p in m.function_responses}
    for index, message in enumerate(messages):
        if any(call.id not in answered for call in message.function_calls):
            return index
    return len(messages)

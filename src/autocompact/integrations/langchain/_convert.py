"""Lossless conversion between LangChain messages and autocompact messages.

One LangChain message becomes one autocompact message, except that a run of consecutive
``ToolMessage`` objects (the answers to one model turn) becomes one user message of function
responses, the way the engine stores them; :func:`from_autocompact` splits it again.

What a round trip keeps: the message type, text, content blocks (text, images, files,
reasoning/thinking with signatures, redacted thinking), tool calls (id, name, arguments), tool
results (call id, tool name, content, error status), and every block the engine does not read,
byte-exact in its place (a provider's built-in tool calls and results, encrypted reasoning, a
text block's citations or ``cache_control``, a media block's keys its part does not hold, a
generated image's item: :mod:`._blocks`).
Message identifiers and provider metadata (``id``, ``response_metadata``, ``usage_metadata``)
are not content: the middleware keeps the original LangChain objects for every message a
compaction does not rewrite.

What cannot be carried raises :class:`autocompact.errors.ContentError` naming it (a block JSON
cannot hold, audio or video the estimate cannot size, a media block with neither data nor a
URL, a tool call block whose call is not in ``tool_calls``); nothing is dropped silently.
Content blocks that only mirror ``AIMessage.tool_calls`` (Anthropic ``tool_use``, v1
``tool_call``) are represented by the tool calls.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, assert_never

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.tool import ToolCall

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
from autocompact.errors import ContentError
from autocompact.integrations.langchain._blocks import (
    carried,
    carried_call,
    carried_image,
    carried_text,
    is_carried,
    restore,
)
from autocompact.usage_check import reported_count

__all__ = [
    "completion_usage",
    "convert_groups",
    "from_autocompact",
    "message_to_langchain",
    "system_text",
    "to_autocompact",
]

# Keys a media block may carry that are bookkeeping, not content (streaming index, block id).
_BOOKKEEPING = frozenset({"type", "id", "index"})
_PLAIN_TEXT = frozenset({"type", "text", "index"})  # a text block that is its text alone
_MIRRORED_CALLS = frozenset({"tool_use", "tool_call", "function_call"})
_CALL_KEYS = frozenset({"type", "id", "index", "name", "args", "input"})  # what a call holds
# Media the estimate cannot size (an image or document counts as one image; these would count
# as their base64): refused, as is an image or file block with a key no part holds.
_UNSIZED_MEDIA = frozenset({"audio", "input_audio", "video", "input_image", "input_file"})


def to_autocompact(
    messages: Sequence[BaseMessage],
) -> tuple[str | None, tuple[Message, ...]]:
    """The system prompt and the history of a LangChain message list.

    A leading ``SystemMessage`` becomes the system prompt (its content must be text). A run of
    consecutive ``ToolMessage`` objects becomes one user message of function responses.

    Raises:
        ContentError: a message or a block the engine cannot express (named, with its index).
    """
    system: str | None = None
    start = 0
    if messages and isinstance(messages[0], SystemMessage):
        system = system_text(messages[0])
        start = 1
    groups = convert_groups(messages[start:], offset=start)
    return system, tuple(message for message, _ in groups)


def convert_groups(
    messages: Sequence[BaseMessage], *, offset: int = 0
) -> list[tuple[Message, list[BaseMessage]]]:
    """Each autocompact message with the LangChain messages it came from (in order)."""
    out: list[tuple[Message, list[BaseMessage]]] = []
    names: dict[str, str] = {}
    run: list[FunctionResponsePart] = []
    sources: list[BaseMessage] = []
    for position, msg in enumerate(messages):
        index = position + offset
        if isinstance(msg, ToolMessage):
            run.append(_tool_result(msg, names, index))
            sources.append(msg)
            continue
        if run:
            out.append((Message(role="user", parts=tuple(run)), sources))
            run, sources = [], []
        converted = _one(msg, index)
        for call in converted.function_calls:
            names[call.id] = call.name
        out.append((converted, [msg]))
    if run:
        out.append((Message(role="user", parts=tuple(run)), sources))
    return out


def system_text(message: SystemMessage, *, exact: bool = True) -> str:
    """The text of a system message.

    With ``exact=False`` (the middleware, which sends the system message it was given and never
    one rebuilt from this text) a text block's other keys (``cache_control``) are allowed.

    Raises:
        ContentError: the system message holds something other than text (or, with ``exact``,
            a text block with keys a string cannot carry).
    """
    content = message.content
    if isinstance(content, str):
        return content
    parts = _content(content, "system", 0, frozenset())
    texts = [p.text for p in parts if isinstance(p, TextPart)]
    rest = [p for p in parts if is_carried(p) and p.payload.get("type") == "text"]
    if len(texts) + len(rest) != len(parts):
        raise ContentError("the system message holds non-text content, which cannot be expressed")
    if rest and exact:
        raise ContentError(
            "the system message has a text block with keys besides its text "
            f"({sorted(k for p in rest for k in p.payload if k not in _PLAIN_TEXT)}), which "
            "the system prompt (a string) cannot carry"
        )
    return "\n".join(texts)


def _one(msg: BaseMessage, index: int) -> Message:
    if isinstance(msg, HumanMessage):
        return Message(role="user", parts=_content(msg.content, "user", index, frozenset()))
    if isinstance(msg, AIMessage):
        if msg.invalid_tool_calls:
            raise ContentError(
                f"message {index}: the AI message has invalid tool calls "
                f"({[c.get('name') for c in msg.invalid_tool_calls]}), which cannot be expressed",
                index=index,
            )
        if not isinstance(msg.tool_calls, list | tuple):
            raise ContentError(
                f"message {index}: tool_calls must be a list, got {type(msg.tool_calls).__name__}",
                index=index,
            )
        calls = tuple(_call(call, index) for call in msg.tool_calls)
        ids = frozenset(call.id for call in calls)
        return Message(role="model", parts=(*_content(msg.content, "model", index, ids), *calls))
    if isinstance(msg, SystemMessage):
        raise ContentError(
            f"message {index}: a SystemMessage after the start of the conversation cannot be "
            "expressed; pass the system prompt first (or as the agent's system_prompt)",
            index=index,
        )
    raise ContentError(
        f"message {index}: {type(msg).__name__} cannot be expressed; use HumanMessage, AIMessage, "
        "ToolMessage or a leading SystemMessage",
        index=index,
    )


def _call(call: ToolCall, index: int) -> FunctionCallPart:
    if not isinstance(call, Mapping):
        raise ContentError(
            f"message {index}: a tool call in tool_calls must be a dict, got "
            f"{type(call).__name__} {call!r:.60}",
            index=index,
        )
    call_id = call.get("id")
    name = call.get("name")
    if not call_id:
        raise ContentError(
            f"message {index}: tool call {name!r} has no id, so its result cannot "
            "be paired with it",
            index=index,
        )
    if not isinstance(call_id, str) or not isinstance(name, str) or not name:
        raise ContentError(
            f"message {index}: tool call {call_id!r} needs a str id and name, got {name!r:.60}",
            index=index,
        )
    args = call.get("args")
    if args is not None and not isinstance(args, Mapping):
        raise ContentError(
            f"message {index}: the args of tool call {name!r} must be a dict, got "
            f"{type(args).__name__} {args!r:.60}",
            index=index,
        )
    return FunctionCallPart(id=call_id, name=name, arguments=dict(args or {}))


def _tool_result(msg: ToolMessage, names: Mapping[str, str], index: int) -> FunctionResponsePart:
    name = msg.name or names.get(msg.tool_call_id, "")
    response: Any = msg.content
    if isinstance(response, list):
        response = [dict(b) if isinstance(b, Mapping) else b for b in response]
    return FunctionResponsePart(
        id=msg.tool_call_id, name=name, response=response, is_error=msg.status == "error"
    )


def _content(
    content: str | list[str | dict[str, Any]], role: str, index: int, calls: frozenset[str]
) -> tuple[Part, ...]:
    if isinstance(content, str):
        return (TextPart(text=content),) if content else ()
    if not isinstance(content, list):
        raise ContentError(
            f"message {index} ({role}): content must be a str or a list of blocks, got "
            f"{type(content).__name__} {content!r:.60}",
            index=index,
        )
    parts: list[Part] = []
    for block in content:
        parts.extend(_block(block, role=role, index=index, calls=calls))
    return tuple(parts)


def _block(
    block: str | Mapping[str, Any], *, role: str, index: int, calls: frozenset[str]
) -> tuple[Part, ...]:
    if isinstance(block, str):
        return (TextPart(text=block),)
    if not isinstance(block, Mapping):
        raise ContentError(
            f"message {index} ({role}): a content block must be a str or a dict, got "
            f"{type(block).__name__} {block!r:.60}",
            index=index,
        )
    kind = block.get("type")

    def refuse(why: str) -> ContentError:
        return ContentError(
            f"message {index} ({role}): content block of type {kind!r} cannot be expressed "
            f"({why}); it is never dropped silently",
            index=index,
        )

    def extra(*keys: str) -> set[str]:
        return {
            k
            for k, v in block.items()
            if k not in _BOOKKEEPING and k not in keys and v not in (None, [], {})
        }

    def only(*keys: str) -> None:
        if extra(*keys):
            raise refuse(f"unsupported keys {sorted(extra(*keys))}")

    def text_of(key: str) -> str:
        value = block.get(key, "")
        if not isinstance(value, str):  # never str(None) == 'None': the text would change
            raise refuse(f"its {key!r} is {type(value).__name__} {value!r:.40}, not text")
        return value

    # A text block with more than its text: the text is read, the block carried beside it; a
    # thinking block with an id (an OpenAI item's) or a key its part lacks: carried whole.
    if kind == "text":
        text = TextPart(text=text_of("text"))
        return (text,) if block.keys() <= _PLAIN_TEXT else (text, carried_text(block, refuse))
    thinking: Part | None = None
    if kind == "reasoning" and "reasoning" in block:
        thinking = ThinkingPart(text=text_of("reasoning"))
        keys: tuple[str, ...] = ("reasoning",)
    elif kind == "thinking":
        keys = ("thinking", "signature")
        thinking = ThinkingPart(text=text_of("thinking"), signature=block.get("signature"))
    elif kind == "redacted_thinking":
        thinking, keys = ThinkingPart(text=text_of("data"), redacted=True), ("data",)
    if thinking is not None:
        plain = not extra(*keys) and block.get("id") in (None, "")
        return (thinking,) if plain else (carried(block, refuse),)
    if kind == "image_generation_call" and isinstance(block.get("result"), str) and block["result"]:
        # OpenAI's generated image: read and sized as the image it is, the item carried beside.
        fmt = block.get("output_format")
        mime = f"image/{fmt}" if isinstance(fmt, str) and fmt.isalnum() else "image/png"
        return (
            ImagePart(media_type=mime, data=block["result"]),
            carried_image(block, "result", refuse),
        )
    if kind in ("image", "image_url", "file", "document"):
        # A media block with more than its part holds (an id, ``extras``, ``cache_control``, a
        # ``filename``, a ``detail``: LangChain's block for a generated image keeps the item's
        # id, which takes it back to the API as that item): the part, read and sized as the
        # image or document it is, then the block carried beside it, sized without its data.
        unheld: list[str] = []
        media = _media(block, refuse, unheld)
        if not unheld and block.get("id") in (None, ""):
            return (media,)
        data = next((k for k in ("base64", "data", "source", "image_url") if k in block), "")
        return (media, carried_image(block, data, refuse))
    if kind in _MIRRORED_CALLS:
        if block.get("call_id", block.get("id")) not in calls:
            raise refuse("a tool call block whose call is not in the message's tool_calls")
        # The call is in AIMessage.tool_calls; a block holding more is carried beside it.
        mirrored = all(k in _CALL_KEYS or v is None for k, v in block.items())
        return () if mirrored else (carried_call(block, refuse),)
    if kind in _UNSIZED_MEDIA:
        raise refuse("the estimate cannot size it: an image or document counts as one image")
    if not isinstance(kind, str) or not kind:
        raise refuse("a block needs a type")
    return (carried(block, refuse),)


def _media(
    block: Mapping[str, Any], refuse: Callable[[str], ContentError], unheld: list[str]
) -> Part:
    """An image or document part; the keys it does not hold (``detail``, ``cache_control``,
    ``extras``, a file's ``filename`` on an image) are added to ``unheld`` (the caller carries
    the block beside the part: nothing is dropped)."""
    kind = block["type"]
    data: str | None = None
    url: str | None = None
    mime = block.get("mime_type")
    title = block.get("filename")
    named = ("filename", "title") if kind in ("file", "document") else ()

    def only(inner: Mapping[str, Any], *keys: str) -> None:
        unheld.extend(
            k for k, v in inner.items() if k not in (*_BOOKKEEPING, *keys) and v is not None
        )

    if kind == "image_url":
        only(block, "image_url")
        raw = block.get("image_url")
        if isinstance(raw, Mapping):  # detail "auto" is the default: the same image
            only({k: v for k, v in raw.items() if (k, v) != ("detail", "auto")}, "url")
        url = raw.get("url") if isinstance(raw, Mapping) else raw
        if isinstance(url, str) and url.startswith("data:") and ";base64," in url:
            head, data = url[5:].split(";base64,", 1)
            mime, url = head or None, None
    elif isinstance(block.get("source"), Mapping):  # Anthropic's native image/document block
        source = block["source"]
        only(block, "source", *named)
        only(source, "type", "media_type", "data", "url")
        mime = source.get("media_type")
        data = source.get("data") if source.get("type") == "base64" else None
        url = source.get("url") if source.get("type") == "url" else None
        title = block.get("title")
    else:
        only(block, "base64", "data", "url", "mime_type", "source_type", *named[:1])
        data = block.get("base64") or (
            block.get("data") if block.get("source_type") != "url" else None
        )
        url = block.get("url")
    if (data is None) == (url is None):
        raise refuse("a media block needs exactly one of inline data or a URL")
    if kind in ("image", "image_url"):
        return ImagePart(media_type=mime or "image/png", data=data, url=url)
    return DocumentPart(media_type=mime or "application/pdf", data=data, url=url, title=title)


def from_autocompact(
    messages: Iterable[Message], *, system: str | None = None
) -> list[BaseMessage]:
    """LangChain messages for an autocompact history (inverse of :func:`to_autocompact`).

    A user message of function responses becomes one ``ToolMessage`` per response; text in the
    same user message follows as a ``HumanMessage``.
    """
    out: list[BaseMessage] = [SystemMessage(content=system)] if system is not None else []
    for message in messages:
        out.extend(message_to_langchain(message))
    return out


def message_to_langchain(
    message: Message,
    *,
    originals: Callable[[FunctionResponsePart], ToolMessage | None] | None = None,
) -> list[BaseMessage]:
    """The LangChain messages for one autocompact message.

    ``originals`` gives the ``ToolMessage`` a function response came from, if known: it comes
    back unchanged when the response is its own, else as a copy with the new content (a cleared
    output's placeholder), its id, name, artifact and metadata kept.
    """
    if message.role == "model":
        calls = [
            ToolCall(name=p.name, args=dict(p.arguments), id=p.id, type="tool_call")
            for p in message.function_calls
        ]
        rest: list[Part] = [p for p in message.parts if not isinstance(p, FunctionCallPart)]
        return [AIMessage(content=_blocks_of(rest), tool_calls=calls)]
    out: list[BaseMessage] = [
        _tool_message(p, originals(p) if originals is not None else None)
        for p in message.function_responses
    ]
    rest = [p for p in message.parts if not isinstance(p, FunctionResponsePart)]
    if rest or not out:
        out.append(HumanMessage(content=_blocks_of(rest)))
    return out


def _tool_message(part: FunctionResponsePart, original: ToolMessage | None) -> ToolMessage:
    content = _tool_content(part.response)
    status = "error" if part.is_error else "success"
    if original is None:
        return ToolMessage(
            content=content, tool_call_id=part.id, name=part.name or None, status=status
        )
    if original.content == content and original.status == status:
        return original
    return original.model_copy(update={"content": content, "status": status})


def _tool_content(response: Any) -> str | list[str | dict[str, Any]]:
    if isinstance(response, str):
        return response
    if isinstance(response, list) and all(isinstance(b, str | dict) for b in response):
        return list(response)
    # A value JSON has no form for (a set, bytes, set on the message without validation) is
    # written as its str, not a TypeError.
    return json.dumps(response, ensure_ascii=False, default=str)


def _blocks_of(parts: Sequence[Part]) -> str | list[str | dict[str, Any]]:
    if not parts:
        return ""
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return parts[0].text
    blocks: list[str | dict[str, Any]] = []
    previous: Part | None = None  # the part just before (a carried block may complete it)
    for part in parts:
        if is_carried(part):
            restore(part, blocks, previous)
        else:
            blocks.append(_block_of(part))
        previous = part
    return blocks


def _block_of(part: Part) -> dict[str, Any]:
    match part:
        case TextPart():
            return {"type": "text", "text": part.text}
        case ThinkingPart(redacted=True):
            return {"type": "redacted_thinking", "data": part.text}
        case ThinkingPart(signature=str() as signature):
            return {"type": "thinking", "thinking": part.text, "signature": signature}
        case ThinkingPart():
            return {"type": "reasoning", "reasoning": part.text}
        case ImagePart():
            src = {"base64": part.data} if part.data is not None else {"url": part.url}
            return {"type": "image", **src, "mime_type": part.media_type}
        case DocumentPart():
            src = {"base64": part.data} if part.data is not None else {"url": part.url}
            extra = {"filename": part.title} if part.title is not None else {}
            return {"type": "file", **src, "mime_type": part.media_type, **extra}
        case OpaquePart():
            # A provider's native compaction result travels only to that provider; a LangChain
            # model gets its summary as text (the contract of OpaquePart).
            return {"type": "text", "text": part.summary}
        case FunctionCallPart() | FunctionResponsePart():
            raise ContentError(f"a {part.kind} part belongs in tool_calls or a ToolMessage")
        case _:
            assert_never(part)


def completion_usage(message: AIMessage) -> Usage | None:
    """The usage an ``AIMessage`` reports in ``usage_metadata``, or ``None``."""
    usage = message.usage_metadata
    if not usage or not isinstance(usage, Mapping):
        return None
    inputs = usage.get("input_token_details")
    outputs = usage.get("output_token_details")
    inputs = inputs if isinstance(inputs, Mapping) else {}
    outputs = outputs if isinstance(outputs, Mapping) else {}
    return Usage(  # (a count that is no whole number reads as not reported, as elsewhere)
        prompt_tokens=reported_count(usage.get("input_tokens")),
        output_tokens=reported_count(usage.get("output_tokens")),
        cached_tokens=reported_count(inputs.get("cache_read")),
        thinking_tokens=reported_count(outputs.get("reasoning")),
    )

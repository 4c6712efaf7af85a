"""The neutral JSON form of the content model, for saved sessions and exports.

A message is ``{"role": "user" | "model", "parts": [...]}``; each part is an object with a
``kind`` and that kind's fields, exactly the dataclass fields::

    {"kind": "text", "text": "..."}
    {"kind": "thinking", "text": "...", "signature": null, "redacted": false}
    {"kind": "function_call", "id": "...", "name": "...", "arguments": {...}}
    {"kind": "function_response", "id": "...", "name": "...", "response": ..., "is_error": false}
    {"kind": "image", "media_type": "image/png", "data": "<base64>", "url": null}
    {"kind": "document", "media_type": "application/pdf", "data": null, "url": "...", "title": null}
    {"kind": "opaque", "provider": "...", "family": "...", "payload": {...}, "summary": "...",
     "tokens": 0}

Unknown kinds or missing fields raise :class:`ContentError` naming the message index and field.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import fields
from typing import Any, assert_never

from autocompact.content import (
    NAME_LENGTHS,
    CharStats,
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
    measured_call,
)
from autocompact.errors import ContentError
from autocompact.jsonsafe import is_array
from autocompact.jsonsize import plain_json_length, str_json_length
from autocompact.toolmedia import media_blocks

__all__ = ["history_from_dicts", "history_to_dicts", "message_from_dict", "message_to_dict"]

# -- Parts decoded from JSON text ----------------------------------------------------------
#
# A part read back from JSON holds only JSON values, which always serialize: its size is measured
# when first asked (often never: a saved session seeds the message's statistics), not in its
# constructor. The codec checks every field's type before calling these.

_new = object.__new__


def decoded_text(text: str, stats: CharStats | None = None) -> TextPart:
    """A text part from a checked JSON field (``stats``: its size, when already counted)."""
    part = _new(TextPart)
    _TEXT_TEXT(part, text)
    _TEXT_KIND(part, "text")
    _TEXT_STATS(part, stats)
    return part


def decoded_call(
    ident: str, name: str, arguments: Mapping[str, Any], stats: CharStats | None = None
) -> FunctionCallPart:
    """A function call from checked JSON fields, measured when first asked (unless ``stats``
    is given)."""
    part = _new(FunctionCallPart)
    _CALL_ID(part, ident)
    _CALL_NAME(part, name)
    _CALL_ARGUMENTS(part, arguments)
    _CALL_KIND(part, "function_call")
    _CALL_STATS(part, stats)
    return part


def decoded_response(
    ident: str, name: str, response: Any, is_error: bool, stats: CharStats | None = None
) -> FunctionResponsePart:
    """A function response from checked JSON fields, measured when first asked (unless
    ``stats`` is given)."""
    part = _new(FunctionResponsePart)
    _RESPONSE_ID(part, ident)
    _RESPONSE_NAME(part, name)
    _RESPONSE_RESPONSE(part, response)
    _RESPONSE_IS_ERROR(part, is_error)
    _RESPONSE_KIND(part, "function_response")
    _RESPONSE_STATS(part, stats)
    return part


def decoded_message(role: Role, parts: tuple[Part, ...]) -> Message:
    """A message from a checked role and parts the codec built."""
    message = _new(Message)
    _MESSAGE_ROLE(message, role)
    _MESSAGE_PARTS(message, parts)
    _MESSAGE_STATS(message, None)
    return message


def _setter(cls: type, name: str) -> Callable[[object, object], None]:
    # The slot's own descriptor: setting a field of a frozen slots dataclass through it costs
    # about half what object.__setattr__ does (no lookup of the name, no frozen check).
    setter: Callable[[object, object], None] = getattr(cls, name).__set__
    return setter


_TEXT_TEXT, _TEXT_KIND, _TEXT_STATS = (_setter(TextPart, n) for n in ("text", "kind", "_stats"))
_CALL_ID, _CALL_NAME, _CALL_ARGUMENTS, _CALL_KIND, _CALL_STATS = (
    _setter(FunctionCallPart, n) for n in ("id", "name", "arguments", "kind", "_stats")
)
_RESPONSE_ID, _RESPONSE_NAME, _RESPONSE_RESPONSE, _RESPONSE_IS_ERROR = (
    _setter(FunctionResponsePart, n) for n in ("id", "name", "response", "is_error")
)
_RESPONSE_KIND, _RESPONSE_STATS = (_setter(FunctionResponsePart, n) for n in ("kind", "_stats"))
_THINKING_TEXT, _THINKING_SIGNATURE, _THINKING_REDACTED, _THINKING_KIND, _THINKING_STATS = (
    _setter(ThinkingPart, n) for n in ("text", "signature", "redacted", "kind", "_stats")
)
_MESSAGE_ROLE, _MESSAGE_PARTS, _MESSAGE_STATS = (
    _setter(Message, n) for n in ("role", "parts", "_stats")
)


_KINDS: dict[str, type[Part]] = {
    "text": TextPart,
    "thinking": ThinkingPart,
    "function_call": FunctionCallPart,
    "function_response": FunctionResponsePart,
    "image": ImagePart,
    "document": DocumentPart,
    "opaque": OpaquePart,
}
# (field name, required, check) for each kind; `kind` itself is not a constructor argument.
_FIELD_CHECKS: dict[str, Callable[[object], bool]] = {
    "text": lambda v: isinstance(v, str),
    "signature": lambda v: v is None or isinstance(v, str),
    "redacted": lambda v: isinstance(v, bool),
    "id": lambda v: isinstance(v, str),
    "name": lambda v: isinstance(v, str),
    "arguments": lambda v: isinstance(v, Mapping),
    "response": lambda v: True,
    "is_error": lambda v: isinstance(v, bool),
    "media_type": lambda v: isinstance(v, str),
    "data": lambda v: v is None or isinstance(v, str),
    "url": lambda v: v is None or isinstance(v, str),
    "title": lambda v: v is None or isinstance(v, str),
    "provider": lambda v: isinstance(v, str),
    "family": lambda v: isinstance(v, str),
    "payload": lambda v: isinstance(v, Mapping),
    "summary": lambda v: isinstance(v, str),
    # (a size in a context: a count a float holds exactly, not a number of 400 digits)
    "tokens": lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**53,
}


def part_to_dict(part: Part) -> dict[str, Any]:
    """The JSON form of one part."""
    match part:
        case TextPart(text=text):
            return {"kind": "text", "text": text}
        case ThinkingPart():
            return {
                "kind": "thinking",
                "text": part.text,
                "signature": part.signature,
                "redacted": part.redacted,
            }
        case FunctionCallPart():
            return {
                "kind": "function_call",
                "id": part.id,
                "name": part.name,
                "arguments": dict(part.arguments),
            }
        case FunctionResponsePart():
            return {
                "kind": "function_response",
                "id": part.id,
                "name": part.name,
                "response": part.response,
                "is_error": part.is_error,
            }
        case ImagePart():
            return {
                "kind": "image",
                "media_type": part.media_type,
                "data": part.data,
                "url": part.url,
            }
        case DocumentPart():
            return {
                "kind": "document",
                "media_type": part.media_type,
                "data": part.data,
                "url": part.url,
                "title": part.title,
            }
        case OpaquePart():
            return {
                "kind": "opaque",
                "provider": part.provider,
                "family": part.family,
                "payload": dict(part.payload),
                "summary": part.summary,
                "tokens": part.tokens,
            }
        case _:
            assert_never(part)


def message_to_dict(message: Message) -> dict[str, Any]:
    """The JSON form of one message."""
    return {"role": message.role, "parts": [part_to_dict(p) for p in message.parts]}


def history_to_dicts(history: Iterable[Message]) -> list[dict[str, Any]]:
    """The JSON form of a history."""
    return [message_to_dict(m) for m in history]


def _field_specs(cls: type[Part]) -> tuple[tuple[str, bool, Callable[[object], bool]], ...]:
    """(name, required, check) of each constructor field of a part class."""
    specs = []
    for f in fields(cls):
        if not f.init:
            continue
        required = f.name in ("text", "id", "name", "response") or (
            (f.name == "arguments" and cls is FunctionCallPart)
            or (f.name in ("provider", "family", "payload") and cls is OpaquePart)
        )
        specs.append((f.name, required, _FIELD_CHECKS[f.name]))
    return tuple(specs)


_SPECS = {kind: _field_specs(cls) for kind, cls in _KINDS.items()}


def _part_from_dict(data: object, index: int | None, position: int) -> Part:
    # The common kinds, well formed, are built directly (issue 25: a restore costs what reading
    # the file costs); anything else takes the general path, which names what is wrong.
    if type(data) is dict:
        kind = data.get("kind")
        if kind == "function_response":
            ident, name, is_error = data.get("id"), data.get("name"), data.get("is_error", False)
            if (
                type(ident) is str
                and type(name) is str
                and "response" in data
                and type(is_error) is bool
            ):
                response = data["response"]
                if type(response) is str:  # nothing to prove: a str always serializes
                    return decoded_response(ident, name, response, is_error)
                return FunctionResponsePart(
                    id=ident, name=name, response=response, is_error=is_error
                )
        elif kind == "text":
            text = data.get("text")
            if type(text) is str:
                return decoded_text(text)
        elif kind == "function_call":
            ident, name, arguments = data.get("id"), data.get("name"), data.get("arguments")
            if type(ident) is str and type(name) is str and type(arguments) is dict:
                return measured_call(ident, name, arguments)
        elif kind == "thinking":
            text, signature = data.get("text"), data.get("signature")
            redacted = data.get("redacted", False)
            if (
                type(text) is str
                and (signature is None or type(signature) is str)
                and type(redacted) is bool
            ):
                return ThinkingPart(text=text, signature=signature, redacted=redacted)
    return _checked_part_from_dict(data, index, position)


def _decoded_part(data: object, index: int | None, position: int) -> Part:
    # Parts of JSON text just decoded: their values are JSON, so they serialize; they are
    # measured when first asked rather than built and measured now.
    if type(data) is dict:
        kind = data.get("kind")
        if kind == "function_response":
            ident, name, is_error = data.get("id"), data.get("name"), data.get("is_error", False)
            if (
                type(ident) is str
                and type(name) is str
                and "response" in data
                and type(is_error) is bool
            ):
                return decoded_response(ident, name, data["response"], is_error)
        elif kind == "function_call":
            ident, name, arguments = data.get("id"), data.get("name"), data.get("arguments")
            if type(ident) is str and type(name) is str and type(arguments) is dict:
                return decoded_call(ident, name, arguments)
    return _part_from_dict(data, index, position)


def _checked_part_from_dict(data: object, index: int | None, position: int) -> Part:
    where = f"message {index}, part {position}" if index is not None else f"part {position}"
    if not isinstance(data, Mapping):
        raise ContentError(f"{where}: a part must be a JSON object, got {data!r:.60}", index=index)
    kind = data.get("kind")
    cls = _KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ContentError(
            f"{where}: unknown part kind {kind!r}; expected one of {', '.join(_KINDS)}",
            index=index,
        )
    kwargs: dict[str, Any] = {}
    for name, required, check in _SPECS[str(kind)]:
        if name not in data:
            if required:
                raise ContentError(f"{where}: {kind} part is missing {name!r}", index=index)
            continue
        value = data[name]
        if not check(value):
            wrong = (
                "is out of range (a count from 0 below 2**53)"
                if name == "tokens" and isinstance(value, int) and not isinstance(value, bool)
                else f"has the wrong type ({type(value).__name__})"
            )
            raise ContentError(f"{where}: field {name!r} of a {kind} part {wrong}", index=index)
        kwargs[name] = value
    return cls(**kwargs)


def message_from_dict(data: object, *, index: int | None = None, decoded: bool = False) -> Message:
    """A message from its JSON form.

    Args:
        data: the message's JSON object.
        index: its position, for error messages.
        decoded: ``data`` was just decoded from JSON text (every value is a JSON value), so
            its function calls and responses need not be measured now to prove they serialize:
            they are measured when first asked (a restored session's saved statistics mean
            they rarely are).

    Raises:
        ContentError: the object is not a message; the error names the index and field.
    """
    if type(data) is not dict and not isinstance(data, Mapping):
        raise ContentError(f"{_where(index)}: must be a JSON object, got {data!r:.60}", index=index)
    role = data.get("role")
    if role != "user" and role != "model":
        raise ContentError(
            f"{_where(index)}: role must be 'user' or 'model', got {role!r}", index=index
        )
    parts = data.get("parts")
    if type(parts) is not list and not isinstance(parts, list):
        raise ContentError(f"{_where(index)}: 'parts' must be a list", index=index)
    build = _decoded_part if decoded else _part_from_dict
    if len(parts) == 1:
        return decoded_message(role, (build(parts[0], index, 0),))
    return decoded_message(role, tuple([build(p, index, i) for i, p in enumerate(parts)]))


def _where(index: int | None) -> str:
    return f"message {index}" if index is not None else "message"


def history_from_dicts(items: Sequence[object], *, decoded: bool = False) -> list[Message]:
    """A history from its JSON form (errors name the message index; ``decoded``: see
    :func:`message_from_dict`)."""
    if not is_array(items):
        raise ContentError(f"messages must be a list (a JSON array), got {type(items).__name__}")
    if decoded:
        return [message_from_dict(item, index=i, decoded=True) for i, item in enumerate(items)]
    # Plain dicts (another framework's messages, a request) are usually estimated next. The
    # common one-part messages are checked and measured here in one step, without the calls of
    # the general path (issue 25), and their part is built when first asked (Message.__getattr__:
    # the first estimate needs only the statistics), from the checked fields kept in the
    # message, not from the caller's dict. Anything else takes message_from_dict, which names
    # what is wrong. What is built here equals what it builds, statistics included (one
    # CharStats shared by the message and its part, as Message.stats shares it).
    out: list[Message] = []
    append = out.append
    new = _new
    names = NAME_LENGTHS  # (tool names' JSON lengths, looked up in C)
    for item in items:
        if type(item) is dict:
            try:  # (a missing key: the general path names it)
                parts = item["parts"]
                role = item["role"]
                if type(parts) is list and len(parts) == 1 and (role == "user" or role == "model"):
                    data: Any = parts[0]
                    kind = data["kind"] if type(data) is dict else None
                    source: tuple[Any, ...] | None = None
                    if kind == "function_response":
                        response = data["response"]
                        ident = data["id"]
                        name = data["name"]
                        is_error = data.get("is_error", False)
                        if (
                            type(ident) is str
                            and type(name) is str
                            and type(is_error) is bool
                            and not media_blocks(response)  # (an image: the general path)
                        ):
                            # Not plain JSON (-1): the general path proves it serializes.
                            length = (
                                str_json_length(response)
                                if type(response) is str
                                else plain_json_length(response)
                            )
                            if length >= 0:
                                chars = 21 + names[name] + length
                                source = (_response_part, 0, chars, ident, name, response, is_error)
                    elif kind == "function_call":
                        arguments = data["arguments"]
                        ident = data["id"]
                        name = data["name"]
                        if type(arguments) is dict and type(ident) is str and type(name) is str:
                            # Not plain JSON (-1): measured_call proves it serializes, or names it.
                            length = plain_json_length(arguments)
                            if length >= 0:
                                chars = 17 + names[name] + length
                                source = (_call_part, 0, chars, ident, name, arguments)
                    elif kind == "text":
                        text = data["text"]
                        if type(text) is str:
                            source = (_text_part, len(text), 0, text)
                    elif kind == "thinking":
                        text = data["text"]
                        signature = data.get("signature")
                        redacted = data.get("redacted", False)
                        if (
                            type(text) is str
                            and (signature is None or type(signature) is str)
                            and type(redacted) is bool
                        ):
                            source = (_thinking_part, len(text), 0, text, signature, redacted)
                    if source is not None:
                        message = new(Message)
                        _MESSAGE_ROLE(message, role)
                        _MESSAGE_STATS(message, source)  # undecoded: see Message._stats
                        append(message)
                        continue
            except KeyError:
                pass
        # (one message per item so far: its index is their count)
        append(message_from_dict(item, index=len(out)))
    return out


# The part of a message history_from_dicts left undecoded: ``build(source, stats)`` with the
# fields it checked (``source[3:]``), called by Message.__getattr__ on first use.


def _text_part(source: tuple[Any, ...], stats: CharStats) -> Part:
    return decoded_text(source[3], stats)


def _response_part(source: tuple[Any, ...], stats: CharStats) -> Part:
    return decoded_response(source[3], source[4], source[5], source[6], stats)


def _call_part(source: tuple[Any, ...], stats: CharStats) -> Part:
    return decoded_call(source[3], source[4], source[5], stats)


def _thinking_part(source: tuple[Any, ...], stats: CharStats) -> Part:
    part = _new(ThinkingPart)
    _THINKING_TEXT(part, source[3])
    _THINKING_SIGNATURE(part, source[4])
    _THINKING_REDACTED(part, source[5])
    _THINKING_KIND(part, "thinking")
    _THINKING_STATS(part, stats)
    return part

"""Provider-neutral messages and parts, and the ``Usage`` record.

A history is a sequence of :class:`Message` objects whose role is ``"user"`` or ``"model"``
(the system instruction is passed separately). A message holds parts, each a frozen dataclass
with a ``kind`` discriminator: text, thinking, function call, function response, image and
document. Function responses travel in user messages, as on Gemini; the adapters move them
where each provider wants them.

Every part knows its own size for estimation (:attr:`Part.stats`), computed once on first use and
cached on the instance, so the pre-send estimate never serializes the same JSON twice.
"""

from __future__ import annotations

import _thread
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from autocompact.errors import ContentError
from autocompact.jsonsize import NAME_LENGTHS as NAME_LENGTHS
from autocompact.jsonsize import (
    json_form,
    json_length,
    json_lengths_total,
    name_json_length,
    plain_json_length,
    utf8_json_length,
)
from autocompact.toolmedia import response_measure
from autocompact.usage_check import check_count

__all__ = [
    "CONTENT_BLOCK",
    "OPAQUE_SUMMARY_PREFIX",
    "CharStats",
    "DocumentPart",
    "FunctionCallPart",
    "FunctionResponsePart",
    "ImagePart",
    "Message",
    "OpaquePart",
    "Part",
    "Role",
    "TextPart",
    "ThinkingPart",
    "Usage",
    "as_message",
    "json_form",
    "json_length",
    "json_lengths_total",
    "portable_history",
    "utf8_json_length",
]

Role: TypeAlias = Literal["user", "model"]


@dataclass(frozen=True, slots=True)
class CharStats:
    """What the character counter sees in a part or message.

    Attributes:
        text_chars: characters of plain text and thinking (4 characters a token).
        json_chars: characters of function call / response JSON (2 characters a token).
        media_parts: images and documents (a fixed token estimate each).
    """

    text_chars: int = 0
    json_chars: int = 0
    media_parts: int = 0

    def __add__(self, other: CharStats) -> CharStats:
        return CharStats(
            text_chars=self.text_chars + other.text_chars,
            json_chars=self.json_chars + other.json_chars,
            media_parts=self.media_parts + other.media_parts,
        )


_EMPTY = CharStats()
_ONE_MEDIA = CharStats(media_parts=1)


class _Sized:
    """Caches a part's character statistics in a slot on first use (parts are immutable)."""

    __slots__ = ()
    _stats: CharStats | None

    @property
    def stats(self) -> CharStats:
        """Character statistics of this part, computed once."""
        cached = self._stats
        if cached is None:
            cached = self._measure()
            object.__setattr__(self, "_stats", cached)
        return cached

    def _measure(self) -> CharStats:
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True, slots=True)
class TextPart(_Sized):
    """Plain text."""

    text: str
    kind: Literal["text"] = field(default="text", init=False)

    _stats: CharStats | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _need_str(self.text, "TextPart.text")

    def _measure(self) -> CharStats:
        return CharStats(text_chars=len(self.text))


@dataclass(frozen=True, kw_only=True, slots=True)
class ThinkingPart(_Sized):
    """The model's visible reasoning; ``signature`` is the provider's opaque proof, if any."""

    text: str
    signature: str | None = None
    redacted: bool = False
    kind: Literal["thinking"] = field(default="thinking", init=False)

    _stats: CharStats | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _need_str(self.text, "ThinkingPart.text")
        _need_str(self.signature, "ThinkingPart.signature", optional=True)
        _need_bool(self.redacted, "ThinkingPart.redacted")

    def _measure(self) -> CharStats:
        return CharStats(text_chars=len(self.text))


@dataclass(frozen=True, kw_only=True, slots=True)
class FunctionCallPart(_Sized):
    """A tool call made by the model."""

    id: str
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    kind: Literal["function_call"] = field(default="function_call", init=False)

    _stats: CharStats | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _need_str(self.id, "FunctionCallPart.id")
        _need_str(self.name, "FunctionCallPart.name")
        _need_mapping(
            self.arguments,
            "FunctionCallPart.arguments",
            "of argument names to JSON values (use {} for none)",
        )
        # Measured now: a value JSON cannot carry fails here, naming the part, not mid-send.
        object.__setattr__(
            self, "_stats", _json_stats(lambda: self._measure(), "FunctionCallPart.arguments")
        )

    def _measure(self) -> CharStats:
        # len(json_form({"name": ..., "args": ...})): '{"name":' + name + ',"args":' + args + '}'
        return CharStats(json_chars=17 + name_json_length(self.name) + json_length(self.arguments))


@dataclass(frozen=True, kw_only=True, slots=True)
class FunctionResponsePart(_Sized):
    """The result of a tool call; ``response`` is any JSON value (usually a string or object)."""

    id: str
    name: str
    response: Any
    is_error: bool = False
    kind: Literal["function_response"] = field(default="function_response", init=False)

    _stats: CharStats | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _need_str(self.id, "FunctionResponsePart.id")
        _need_str(self.name, "FunctionResponsePart.name")
        _need_bool(self.is_error, "FunctionResponsePart.is_error")
        if not isinstance(self.response, str):  # a str cannot be circular or too deep
            object.__setattr__(
                self,
                "_stats",
                _json_stats(lambda: self._measure(), "FunctionResponsePart.response"),
            )

    def _measure(self) -> CharStats:  # len(json_form({"name": ..., "response": ...})), media out
        length, media = response_measure(self.response)  # (a returned image: toolmedia)
        return CharStats(json_chars=21 + name_json_length(self.name) + length, media_parts=media)


@dataclass(frozen=True, kw_only=True, slots=True)
class ImagePart(_Sized):
    """An image, inline (base64 ``data``) or by ``url``."""

    media_type: str = "image/png"
    data: str | None = None
    url: str | None = None
    kind: Literal["image"] = field(default="image", init=False)

    _stats: CharStats | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:  # checked here, not when a saved session is read back
        _need_str(self.media_type, "ImagePart.media_type")
        _need_str(self.data, "ImagePart.data", optional=True)
        _need_str(self.url, "ImagePart.url", optional=True)

    def _measure(self) -> CharStats:
        return _ONE_MEDIA


@dataclass(frozen=True, kw_only=True, slots=True)
class DocumentPart(_Sized):
    """A document (PDF, ...), inline (base64 ``data``) or by ``url``."""

    media_type: str = "application/pdf"
    data: str | None = None
    url: str | None = None
    title: str | None = None
    kind: Literal["document"] = field(default="document", init=False)

    _stats: CharStats | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _need_str(self.media_type, "DocumentPart.media_type")
        for name in ("data", "url", "title"):
            _need_str(getattr(self, name), f"DocumentPart.{name}", optional=True)

    def _measure(self) -> CharStats:
        return _ONE_MEDIA


@dataclass(frozen=True, kw_only=True, slots=True)
class OpaquePart(_Sized):
    """A provider's native compaction result, or a framework's content block the engine does not
    read (``family`` :data:`CONTENT_BLOCK`): opaque to everyone else.

    Only the provider (and model family) that made it can read it, so an adapter sends
    ``payload`` back exactly as it was received when ``provider`` and ``family`` match its own,
    and sends :meth:`as_text` — our summary of the same range, or what the block holds — as
    plain text anywhere else.

    Attributes:
        provider: the adapter that made it (``"anthropic"``, ``"openai-responses"``,
            ``"langchain"``).
        family: the model family whose requests may carry it (see each adapter's docs), or
            :data:`CONTENT_BLOCK`.
        payload: the block or items as the provider returned them, a JSON object, sent back
            byte-exact (Anthropic: the ``compaction`` block; OpenAI: ``{"items": [...]}``, the
            output of ``responses.compact``; a framework's content block).
        summary: a readable summary of the range it replaced (the provider's own summary text
            where it returns one, else ours), or what a content block holds.
        tokens: its size in the provider's context, for the ladder's estimate (a content
            block's: its JSON at 2 characters a token).
    """

    provider: str
    family: str
    payload: Mapping[str, Any]
    summary: str = ""
    tokens: int = 0
    kind: Literal["opaque"] = field(default="opaque", init=False)

    _stats: CharStats | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _need_str(self.provider, "OpaquePart.provider")
        _need_str(self.family, "OpaquePart.family")
        _need_mapping(self.payload, "OpaquePart.payload", "(the provider's JSON object)")
        _need_str(self.summary, "OpaquePart.summary")
        tokens = self.tokens
        if isinstance(tokens, bool) or not isinstance(tokens, int) or not 0 <= tokens < 2**53:
            raise ContentError(
                f"OpaquePart.tokens must be a whole number of tokens >= 0 (0: unknown), got "
                f"{type(tokens).__name__} {tokens!r:.40}"
            )

    def _measure(self) -> CharStats:
        # Its size in its provider's context: the provider's own count when known (at 4
        # characters a token; a content block's JSON at 2), else the summary text.
        if self.family == CONTENT_BLOCK and self.tokens > 0:
            return CharStats(json_chars=self.tokens * 2)
        return CharStats(text_chars=self.tokens * 4 if self.tokens > 0 else len(self.summary))

    def readable_by(self, provider: str, family: str) -> bool:
        """Whether ``payload`` may be sent to this provider and model family."""
        return provider == self.provider and family == self.family

    def as_text(self) -> TextPart | None:
        """What stands in for it where ``payload`` cannot go: a compaction result's summary
        after :data:`OPAQUE_SUMMARY_PREFIX`; a content block's summary as it is, ``None`` when
        empty (such a block only adds to a readable part beside it)."""
        if self.family != CONTENT_BLOCK:
            return TextPart(text=OPAQUE_SUMMARY_PREFIX + self.summary)
        return TextPart(text=self.summary) if self.summary else None


Part: TypeAlias = (
    TextPart
    | ThinkingPart
    | FunctionCallPart
    | FunctionResponsePart
    | ImagePart
    | DocumentPart
    | OpaquePart
)
_PART_TYPES = (
    TextPart,
    ThinkingPart,
    FunctionCallPart,
    FunctionResponsePart,
    ImagePart,
    DocumentPart,
    OpaquePart,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Message:
    """One turn of the conversation: a role and its parts.

    Args:
        role: ``"user"`` or ``"model"``.
        parts: the parts, in order. A list is accepted and stored as a tuple.
    """

    role: Role
    parts: tuple[Part, ...]
    # The statistics once measured (None: not yet). A message codec.history_from_dicts left
    # undecoded holds here ``(build, text_chars, json_chars, *fields)`` instead, its ``parts``
    # slot empty: ``build(source, stats)`` makes its one part when first asked (__getattr__).
    _stats: CharStats | tuple[Any, ...] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.role not in ("user", "model"):
            raise ContentError(
                f"unknown message role {self.role!r}: use 'user' or 'model' "
                "(pass the system instruction separately)"
            )
        given: object = self.parts  # a list is accepted and stored as a tuple
        if not isinstance(given, tuple):
            if isinstance(given, str | bytes | Mapping) or not isinstance(given, Iterable):
                raise ContentError(
                    f"Message.parts must be a sequence of parts, got {type(given).__name__} "
                    f"{given!r:.60}: use Message.user(...) / Message.model(...) for text"
                )
            object.__setattr__(self, "parts", tuple(self.parts))
        for part in self.parts:
            _check_part(part, self.role)

    if not TYPE_CHECKING:  # (for the type checker, attributes stay only the declared ones)

        def __getattr__(self, name: str) -> Any:
            # Only reached when the normal lookup fails: the part of a message that
            # codec.history_from_dicts checked and measured without building it (a first
            # estimate needs only the statistics), built here on first use as the codec would
            # have built it, sharing the message's statistics. Every reader of ``parts``
            # (equality, hashing, repr, pickling, replace) sees it as if built at once.
            if name == "parts" and type(self._stats) is tuple:
                return self._decode()
            return object.__getattribute__(self, name)  # raises as the normal lookup did

    def _decode(self) -> tuple[Part, ...]:
        """Build the part of a message history_from_dicts left undecoded (see ``_stats``)."""
        with _DECODING:  # one thread builds it; the others then read what it built
            source = self._stats
            if type(source) is tuple:
                stats = _new(CharStats)
                _STATS_TEXT(stats, source[1])
                _STATS_JSON(stats, source[2])
                _STATS_MEDIA(stats, 0)
                parts = (source[0](source, stats),)
                _MESSAGE_STATS(self, stats)  # (before parts: a reader of parts finds both)
                _MESSAGE_PARTS(self, parts)
                return parts
        return self.parts

    @classmethod
    def user(cls, *content: str | Part) -> Message:
        """A user message from strings and parts."""
        return cls(role="user", parts=_parts(content))

    @classmethod
    def model(cls, *content: str | Part) -> Message:
        """A model message from strings and parts."""
        return cls(role="model", parts=_parts(content))

    @property
    def stats(self) -> CharStats:
        """Character statistics of the whole message, computed once."""
        cached = self._stats
        if isinstance(cached, CharStats):
            return cached
        if type(cached) is tuple:  # undecoded: its part is built with its statistics
            self._decode()
            cached = self._stats
            if isinstance(cached, CharStats):
                return cached
        parts = self.parts
        if len(parts) == 1:
            cached = parts[0].stats
        else:
            cached = _EMPTY
            for part in parts:
                cached = cached + part.stats
        object.__setattr__(self, "_stats", cached)
        return cached

    @property
    def text(self) -> str:
        """The concatenated text parts (thinking excluded)."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def function_calls(self) -> tuple[FunctionCallPart, ...]:
        """The function calls in this message."""
        parts = self.parts
        if len(parts) == 1:  # the common case: no generator (compaction asks every message)
            only = parts[0]
            return (only,) if isinstance(only, FunctionCallPart) else ()
        return tuple([p for p in parts if isinstance(p, FunctionCallPart)])

    @property
    def function_responses(self) -> tuple[FunctionResponsePart, ...]:
        """The function responses in this message."""
        parts = self.parts
        if len(parts) == 1:
            only = parts[0]
            return (only,) if isinstance(only, FunctionResponsePart) else ()
        return tuple([p for p in parts if isinstance(p, FunctionResponsePart)])


_new = object.__new__
_DECODING = _thread.RLock()  # threading.RLock() is this lock (the module is not needed)
# The slots' own descriptors (half the cost of object.__setattr__ on a frozen dataclass).
_STATS_TEXT, _STATS_JSON, _STATS_MEDIA = (
    getattr(CharStats, n).__set__ for n in ("text_chars", "json_chars", "media_parts")
)
_MESSAGE_STATS, _MESSAGE_PARTS = (getattr(Message, n).__set__ for n in ("_stats", "parts"))


def _need_str(value: object, name: str, *, optional: bool = False) -> None:
    if isinstance(value, str) or (optional and value is None):
        return
    hint = " (decode bytes first)" if isinstance(value, bytes | bytearray) else ""
    raise ContentError(
        f"{name} must be a str{' or None' if optional else ''}, got "
        f"{type(value).__name__} {value!r:.60}{hint}"
    )


def _need_mapping(value: object, name: str, what: str) -> None:
    if not isinstance(value, Mapping):
        raise ContentError(
            f"{name} must be a mapping {what}, got {type(value).__name__} {value!r:.60}"
        )


def _need_bool(value: object, name: str) -> None:
    if type(value) is not bool:
        raise ContentError(
            f"{name} must be True or False, got {type(value).__name__} {value!r:.60}"
        )


def _json_stats(measure: Callable[[], CharStats], name: str) -> CharStats:
    """Measure a JSON-carrying part now, turning what JSON cannot carry into a ContentError."""
    try:
        return measure()
    except RecursionError:
        raise ContentError(
            f"{name} is nested too deeply to be sent as JSON; flatten it or send it as text"
        ) from None
    except (ValueError, TypeError) as exc:  # "Circular reference detected", bad keys
        raise ContentError(f"{name} cannot be sent as JSON: {exc}") from None


def seed_stats(message: Message, stats: CharStats) -> None:
    """Give a freshly loaded message the character statistics saved with it, so the first
    estimate of a restored session does not measure its content again (issue 11). A message
    that already measured itself keeps its own."""
    if message._stats is None:
        object.__setattr__(message, "_stats", stats)


def measured_call(ident: str, name: str, arguments: Mapping[str, Any]) -> FunctionCallPart:
    """A function call from checked fields, measured now as its constructor measures it (so a
    value JSON cannot carry fails here, naming the part)."""
    part = object.__new__(FunctionCallPart)
    setattr_ = object.__setattr__
    setattr_(part, "id", ident)
    setattr_(part, "name", name)
    setattr_(part, "arguments", arguments)
    setattr_(part, "kind", "function_call")
    length = plain_json_length(arguments)
    if length >= 0:  # plain JSON: it serializes, and this is its exact length
        setattr_(part, "_stats", CharStats(json_chars=17 + name_json_length(name) + length))
    else:
        setattr_(part, "_stats", _json_stats(part._measure, "FunctionCallPart.arguments"))
    return part


def _check_part(part: object, role: str) -> None:
    if not isinstance(part, _PART_TYPES):
        raise ContentError(
            f"unknown part {type(part).__name__!r} in a {role} message: use TextPart, "
            "ThinkingPart, FunctionCallPart, FunctionResponsePart, ImagePart, DocumentPart or "
            "OpaquePart"
        )


def _parts(content: Iterable[str | Part]) -> tuple[Part, ...]:
    return tuple(TextPart(text=c) if isinstance(c, str) else c for c in content)


def as_message(value: Message | str | Sequence[Part], *, name: str = "message") -> Message:
    """A user message from a message, a string or a sequence of parts.

    Raises:
        ContentError: anything else (``None``, a number, bytes, a dict), naming ``name``.
    """
    if isinstance(value, Message):
        return value
    if isinstance(value, str):
        return Message.user(value)
    if isinstance(value, bytes | bytearray | Mapping) or not isinstance(value, Iterable):
        raise ContentError(
            f"{name} must be a str, a Message or a sequence of parts, got "
            f"{type(value).__name__} {value!r:.60}"
        )
    return Message(role="user", parts=tuple(value))


@dataclass(frozen=True, kw_only=True, slots=True)
class Usage:
    """Token usage a provider reported for one call.

    Attributes:
        prompt_tokens: the whole prompt as the provider counted it, cached parts included
            (Anthropic: input + cache creation + cache read).
        output_tokens: generated tokens, thinking included where the provider counts it there.
        cached_tokens: the part of the prompt read from a cache.
        thinking_tokens: the part of the output spent on reasoning.
    """

    prompt_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    thinking_tokens: int = 0

    def __post_init__(self) -> None:  # issue 27: a count that is no count names its field
        for name in ("prompt_tokens", "output_tokens", "cached_tokens", "thinking_tokens"):
            check_count(getattr(self, name), f"Usage.{name}")

    @property
    def total_tokens(self) -> int:
        """Prompt plus output."""
        return self.prompt_tokens + self.output_tokens


def portable_history(
    history: Sequence[Message], *, provider: str | None = None, family: str | None = None
) -> list[Message]:
    """``history`` with every opaque part the given provider and family cannot read replaced by
    its text (:meth:`OpaquePart.as_text`; SPEC: an opaque block never goes to another provider).

    Messages without opaque parts are returned as the same objects.
    """
    out: list[Message] = []
    for message in history:
        if not any(isinstance(p, OpaquePart) for p in message.parts):
            out.append(message)
            continue
        parts = tuple(
            p.as_text() if isinstance(p, OpaquePart) and not _readable(p, provider, family) else p
            for p in message.parts
        )
        out.append(Message(role=message.role, parts=tuple(p for p in parts if p is not None)))
    return out


def _readable(part: OpaquePart, provider: str | None, family: str | None) -> bool:
    return provider is not None and family is not None and part.readable_by(provider, family)


OPAQUE_SUMMARY_PREFIX = "Summary of the earlier conversation (written when it was compacted):\n"
"""Put before a compaction result's summary when it is sent as text to another provider."""

CONTENT_BLOCK = "content-block"
"""``OpaquePart.family`` of a framework's content block the engine does not read (a built-in
tool's call or result, an encrypted reasoning item, a text block's citations; design decision
94): carried unchanged, sized as its JSON, never taken for a compaction result."""

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

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal, TypeAlias

from autocompact.errors import ContentError

__all__ = [
    "CharStats",
    "DocumentPart",
    "FunctionCallPart",
    "FunctionResponsePart",
    "ImagePart",
    "Message",
    "Part",
    "Role",
    "TextPart",
    "ThinkingPart",
    "Usage",
    "as_message",
    "json_form",
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


def json_form(value: object) -> str:
    """The compact JSON form the counter measures (non-JSON values fall back to ``str``)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


@dataclass(frozen=True, kw_only=True)
class TextPart:
    """Plain text."""

    text: str
    kind: Literal["text"] = field(default="text", init=False)

    @cached_property
    def stats(self) -> CharStats:
        """Character statistics of this part (cached)."""
        return CharStats(text_chars=len(self.text))


@dataclass(frozen=True, kw_only=True)
class ThinkingPart:
    """The model's visible reasoning; ``signature`` is the provider's opaque proof, if any."""

    text: str
    signature: str | None = None
    redacted: bool = False
    kind: Literal["thinking"] = field(default="thinking", init=False)

    @cached_property
    def stats(self) -> CharStats:
        """Character statistics of this part (cached)."""
        return CharStats(text_chars=len(self.text))


@dataclass(frozen=True, kw_only=True)
class FunctionCallPart:
    """A tool call made by the model."""

    id: str
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    kind: Literal["function_call"] = field(default="function_call", init=False)

    @cached_property
    def stats(self) -> CharStats:
        """Character statistics of this part (cached): the length of its JSON form."""
        return CharStats(json_chars=len(json_form({"name": self.name, "args": self.arguments})))


@dataclass(frozen=True, kw_only=True)
class FunctionResponsePart:
    """The result of a tool call; ``response`` is any JSON value (usually a string or object)."""

    id: str
    name: str
    response: Any
    is_error: bool = False
    kind: Literal["function_response"] = field(default="function_response", init=False)

    @cached_property
    def stats(self) -> CharStats:
        """Character statistics of this part (cached): the length of its JSON form."""
        return CharStats(json_chars=len(json_form({"name": self.name, "response": self.response})))


@dataclass(frozen=True, kw_only=True)
class ImagePart:
    """An image, inline (base64 ``data``) or by ``url``."""

    media_type: str = "image/png"
    data: str | None = None
    url: str | None = None
    kind: Literal["image"] = field(default="image", init=False)

    @cached_property
    def stats(self) -> CharStats:
        """Character statistics of this part: one media part."""
        return CharStats(media_parts=1)


@dataclass(frozen=True, kw_only=True)
class DocumentPart:
    """A document (PDF, ...), inline (base64 ``data``) or by ``url``."""

    media_type: str = "application/pdf"
    data: str | None = None
    url: str | None = None
    title: str | None = None
    kind: Literal["document"] = field(default="document", init=False)

    @cached_property
    def stats(self) -> CharStats:
        """Character statistics of this part: one media part."""
        return CharStats(media_parts=1)


Part: TypeAlias = (
    TextPart | ThinkingPart | FunctionCallPart | FunctionResponsePart | ImagePart | DocumentPart
)
_PART_TYPES = (
    TextPart,
    ThinkingPart,
    FunctionCallPart,
    FunctionResponsePart,
    ImagePart,
    DocumentPart,
)


@dataclass(frozen=True, kw_only=True)
class Message:
    """One turn of the conversation: a role and its parts.

    Args:
        role: ``"user"`` or ``"model"``.
        parts: the parts, in order. A list is accepted and stored as a tuple.
    """

    role: Role
    parts: tuple[Part, ...]

    def __post_init__(self) -> None:
        if self.role not in ("user", "model"):
            raise ContentError(
                f"unknown message role {self.role!r}: use 'user' or 'model' "
                "(pass the system instruction separately)"
            )
        given: object = self.parts  # a list is accepted and stored as a tuple
        if not isinstance(given, tuple):
            object.__setattr__(self, "parts", tuple(self.parts))
        for part in self.parts:
            _check_part(part, self.role)

    @classmethod
    def user(cls, *content: str | Part) -> Message:
        """A user message from strings and parts."""
        return cls(role="user", parts=_parts(content))

    @classmethod
    def model(cls, *content: str | Part) -> Message:
        """A model message from strings and parts."""
        return cls(role="model", parts=_parts(content))

    @cached_property
    def stats(self) -> CharStats:
        """Character statistics of the whole message (cached)."""
        total = _EMPTY
        for part in self.parts:
            total = total + part.stats
        return total

    @property
    def text(self) -> str:
        """The concatenated text parts (thinking excluded)."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def function_calls(self) -> tuple[FunctionCallPart, ...]:
        """The function calls in this message."""
        return tuple(p for p in self.parts if isinstance(p, FunctionCallPart))

    @property
    def function_responses(self) -> tuple[FunctionResponsePart, ...]:
        """The function responses in this message."""
        return tuple(p for p in self.parts if isinstance(p, FunctionResponsePart))


def _check_part(part: object, role: str) -> None:
    if not isinstance(part, _PART_TYPES):
        raise ContentError(
            f"unknown part {type(part).__name__!r} in a {role} message: use TextPart, "
            "ThinkingPart, FunctionCallPart, FunctionResponsePart, ImagePart or DocumentPart"
        )


def _parts(content: Iterable[str | Part]) -> tuple[Part, ...]:
    return tuple(TextPart(text=c) if isinstance(c, str) else c for c in content)


def as_message(value: Message | str | Sequence[Part]) -> Message:
    """A user message from a message, a string or a sequence of parts."""
    if isinstance(value, Message):
        return value
    if isinstance(value, str):
        return Message.user(value)
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

    @property
    def total_tokens(self) -> int:
        """Prompt plus output."""
        return self.prompt_tokens + self.output_tokens

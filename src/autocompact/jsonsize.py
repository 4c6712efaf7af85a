"""JSON lengths counted without building the JSON (issue 25). Pure, standard library only.

The estimator measures function calls and responses by the length of their compact JSON form
(``json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)``). These functions
count that length exactly: a string by its length plus what escaping adds (one C pass over its
UTF-8 bytes), a plain JSON value (``dict`` with ``str`` keys, ``list``/``tuple``, ``str``,
``int``, finite ``float``, ``bool``, ``None``) by summing its members' lengths and the
punctuation between them. Anything else (a subclass, a non-finite float, a non-string key, a
value JSON cannot carry, a structure too deep for the counter) is not counted here: the caller
serializes it instead, so its length and errors stay exactly the encoder's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "NAME_LENGTHS",
    "json_form",
    "json_length",
    "json_lengths_total",
    "name_json_length",
    "plain_json_length",
    "str_json_length",
    "utf8_escape_extra",
    "utf8_json_length",
]

# What ``json.dumps(..., ensure_ascii=False)`` escapes in a string: ``"`` and ``\`` and the
# control characters below U+0020. Each is one ASCII byte in UTF-8 and no byte of a multi-byte
# UTF-8 sequence is below 0x80, so counting them in the UTF-8 bytes counts them in the string.
_ESCAPED = bytes(range(0x20)) + b'"\\'
_NOT_ESCAPED = bytes(b for b in range(256) if b not in _ESCAPED)
# Written as a two-character escape (\", \\, \b, \f, \n, \r, \t); every other control
# character is written \u00XX (six characters).
_SHORT_ESCAPES = b'"\\\b\f\n\r\t'
# Maps each long-escaped byte above ASCII (0xFF) and every other byte to itself: ``translate``
# with it alone (no deletions, so no table to build) returns the same object when there is none
# (usual); with the deletions, what is left is ASCII unless there is one.
_LONG_MOVED = bytes(0xFF if b < 0x20 and b not in _SHORT_ESCAPES else b for b in range(256))
_CONTINUATION = bytes(range(0x80, 0xC0))
_NOT_CONTINUATION = bytes(b for b in range(256) if b not in _CONTINUATION)


def str_json_length(value: str) -> int:
    """The length of a ``str``'s JSON string (quotes and escapes included), without building it.

    Its length, two quotes, and one more character for each character JSON escapes (five more
    for a control character written ``\\u00XX``), counted in one C pass over its UTF-8 bytes.
    """
    try:
        raw = value.encode()  # (no arguments to parse: the common call made cheapest)
    except UnicodeEncodeError:  # a lone surrogate: three bytes, none of them escaped
        raw = value.encode("utf-8", "surrogatepass")
    # Only the bytes JSON escapes (usually few), each long-escaped one moved above ASCII: the
    # usual case (none, or two-character ones only) is then told by isascii(), no second pass.
    escaped = raw.translate(_LONG_MOVED, _NOT_ESCAPED)
    if escaped.isascii():
        return len(value) + 2 + len(escaped)
    return len(value) + 2 + len(escaped) + 4 * len(escaped.translate(None, _SHORT_ESCAPES))


def utf8_json_length(raw: bytes) -> int:
    """``len(json_form(raw.decode("utf-8")))`` from the UTF-8 bytes, without decoding them.

    For text that arrives as bytes (a transcript line, a request body's string): characters are
    the bytes that do not continue a multi-byte sequence, and the escapes are counted in the
    same bytes. ``raw`` must be valid UTF-8 (``surrogatepass`` bytes count as one character).
    """
    chars = len(raw) if raw.isascii() else len(raw) - len(raw.translate(None, _NOT_CONTINUATION))
    return chars + 2 + utf8_escape_extra(raw)


def utf8_escape_extra(raw: bytes) -> int:
    """How many characters escaping adds to the JSON string of these UTF-8 bytes.

    Additive: the bytes of several strings joined give the sum of their strings' (a
    character's escape depends on that character alone, and each escaped one is one byte).
    """
    escaped = raw.translate(None, _NOT_ESCAPED)  # only the bytes JSON escapes (usually few)
    if not escaped or escaped.translate(_LONG_MOVED) is escaped:  # two-character ones only
        return len(escaped)
    return len(escaped) + 4 * len(escaped.translate(None, _SHORT_ESCAPES))


_INFINITIES = (float("inf"), float("-inf"))


def plain_json_length(value: object) -> int:
    """``len(json_form(value))`` for a plain JSON value, counted without building it; ``-1``
    when ``value`` holds anything else (the caller then serializes it).

    The punctuation and the non-string members are counted in a walk over the value; its
    strings (keys included) are collected on the way and counted together, their escapes in
    one C pass over them all (the JSON length of strings is additive: each character's
    escaped width depends on that character alone). An object's scalar members (tool
    arguments: strings, numbers, flags) are counted in its loop, without a call each.
    """
    if type(value) is str:
        return str_json_length(value)
    strings: list[str] = []
    push = strings.append
    try:
        total = _length(value, push)
    except (RecursionError, ValueError):  # too deep here; an int too long for str()
        return -1
    if total < 0:
        return -1
    if not strings:
        return total
    return total + 2 * len(strings) + str_json_length("".join(strings)) - 2


def _length(value: object, push: Callable[[str], None]) -> int:
    """The JSON length of ``value`` less its strings' (each pushed), ``-1`` if not plain."""
    if type(value) is dict:
        if not value:
            return 2
        total = 1 + 2 * len(value)  # the braces, a colon per member, commas between them
        for key, member in value.items():
            if type(key) is not str:
                return -1
            push(key)
            if type(member) is str:
                push(member)
            elif member is True or member is None:
                total += 4
            elif member is False:
                total += 5
            elif type(member) is int:
                total += len(int.__repr__(member))
            else:
                length = _length(member, push)
                if length < 0:
                    return -1
                total += length
        return total
    if type(value) is str:
        push(value)
        return 0
    if type(value) is list or type(value) is tuple:
        if not value:
            return 2
        total = 1 + len(value)  # the brackets and the commas between members
        for member in value:
            if type(member) is str:
                push(member)
                continue
            length = _length(member, push)
            if length < 0:
                return -1
            total += length
        return total
    if value is None or value is True:
        return 4
    if value is False:
        return 5
    if type(value) is int:
        return len(int.__repr__(value))
    if type(value) is float:
        if value != value or value in _INFINITIES:  # NaN, Infinity: the encoder's own words
            return -1
        return len(float.__repr__(value))
    return -1


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)
_encode: Callable[[object], str] = _ENCODER.encode  # one encoder, not one per call
# The standard library's C encoder made once (json.dumps makes one per call, ~3x its own cost on
# a small object), without the circular-reference check: a circular value runs out of stack
# there, and is then encoded again by ``_encode``, which raises json's own error for it.
_c_make = getattr(json.encoder, "c_make_encoder", None)
_c_encode: Callable[[object, int], Any] | None = (
    None
    if _c_make is None
    else _c_make(None, str, json.encoder.encode_basestring, None, ":", ",", False, False, True)
)


def json_form(value: object) -> str:
    """The compact JSON form the counter measures (non-JSON values fall back to ``str``)."""
    if _c_encode is None or type(value) is str:
        return _encode(value)
    try:
        return "".join(_c_encode(value, 0))
    except (RecursionError, ValueError, TypeError):
        return _encode(value)  # the same value, with json's own checks and errors


def json_length(value: object) -> int:
    """``len(json_form(value))``, counted without building the JSON where it can be.

    Tool output is mostly one long string, tool arguments small objects of strings: their JSON
    length is counted from their strings' lengths and escapes (:mod:`autocompact.jsonsize`)
    instead of building the escaped copy (issue 25). Anything the counter does not know (a
    subclass, a value JSON cannot carry) is serialized as before.
    """
    if type(value) is str:
        return str_json_length(value)
    length = plain_json_length(value)
    return length if length >= 0 else len(json_form(value))


def json_lengths_total(values: Sequence[object]) -> int:
    """``sum(json_length(v) for v in values)``, in one serialization of the whole list.

    ``json_form([a, b, ...])`` is ``"[" + ",".join(json_form(v) ...) + "]"``: its length less
    the brackets and commas is the sum. One encoder call instead of one per value: the tool
    declarations of a session are measured this way when it starts (issue 11).
    """
    if not values:
        return 0
    return len(json_form(list(values))) - len(values) - 1


class _NameLengths(dict[str, int]):
    """Tool name -> its JSON length, remembered (an agent has a few dozen tools): a lookup is
    one subscript in C, the name measured only on a miss."""

    def __missing__(self, name: str) -> int:
        length = str_json_length(name)
        if len(self) < 4096:  # bounded: tool names repeat, other strings need not
            self[name] = length
        return length


NAME_LENGTHS = _NameLengths()
"""``NAME_LENGTHS[name]`` is ``name_json_length(name)`` without the call (the codec's loop)."""


def name_json_length(name: str) -> int:
    """The JSON length of a tool name (remembered: an agent has a few dozen)."""
    return NAME_LENGTHS[name]

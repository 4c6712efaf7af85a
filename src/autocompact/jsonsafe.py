"""JSON parsing that never raises a raw ``RecursionError``, and the test for a JSON array.
Stdlib only.

``json.loads`` recurses once per nesting level: a file nested 10,000 levels deep (a settings
file, a transcript line, a session record) ends in ``RecursionError`` deep in the parser.
:func:`loads` turns that into a :class:`json.JSONDecodeError` whose position is where the
nesting passed :data:`MAX_JSON_DEPTH`, so every caller's existing "not valid JSON (line, column)"
message names the file and line without knowing about recursion. An integer longer than
Python's limit on integer digits (``sys.get_int_max_str_digits()``, 4300 by default), which
``json.loads`` refuses with a plain ``ValueError``, is reported the same way, at the number (or
read as ``None`` when the caller asks).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeGuard

__all__ = ["MAX_JSON_DEPTH", "deep_position", "is_array", "loads", "long_number_position"]

MAX_JSON_DEPTH = 500
"""Nesting deeper than this is reported as too deep when the parser runs out of stack."""


def loads(text: str | bytes, *, long_integers_as_none: bool = False) -> Any:
    """``json.loads``, with too-deep nesting and too-long integers reported as a
    :class:`json.JSONDecodeError`.

    ``long_integers_as_none``: an integer past the digit limit reads as ``None`` instead of
    failing the whole text (a reply whose counts are read as not reported when they are none:
    its other fields still count).
    """
    try:
        if long_integers_as_none:
            return json.loads(text, parse_int=_int_or_none)
        return json.loads(text)
    except RecursionError:
        raise _decode_error(
            text,
            f"nested too deeply (more than {MAX_JSON_DEPTH} levels of arrays or objects)",
            deep_position,
        ) from None
    except ValueError as exc:
        if isinstance(exc, json.JSONDecodeError | UnicodeDecodeError):
            raise
        # The one other ValueError json.loads raises: an integer past the digit limit.
        raise _decode_error(
            text,
            f"a number has more than {sys.get_int_max_str_digits():,} digits",
            long_number_position,
        ) from None


def _int_or_none(digits: str) -> int | None:
    try:
        return int(digits)
    except ValueError:  # past the digit limit
        return None


def _decode_error(
    text: str | bytes, message: str, where: Callable[[str], int]
) -> json.JSONDecodeError:
    """The JSONDecodeError for ``text``, at the offset ``where`` finds in it."""
    doc = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    return json.JSONDecodeError(message, doc, where(doc))


# A JSON string (skipped), or an integer: its digits (group 1), not part of a fraction or an
# exponent.
_STRING_OR_INTEGER = re.compile(r'"(?:[^"\\]|\\.)*"|(?<![0-9.eE+-])-?([0-9]+)(?![0-9.eE])')


def long_number_position(text: str) -> int:
    """The offset of the first integer (outside strings) with more digits than
    ``sys.get_int_max_str_digits()`` allows (else 0)."""
    limit = sys.get_int_max_str_digits()
    for match in _STRING_OR_INTEGER.finditer(text):
        digits = match.group(1)
        if digits is not None and len(digits) > limit > 0:
            return match.start()
    return 0


def deep_position(text: str, limit: int = MAX_JSON_DEPTH) -> int:
    """The offset where bracket nesting (outside strings) first passes ``limit`` (else 0)."""
    depth = 0
    in_string = False
    escaped = False
    for index, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return index
        elif ch in "]}":
            depth -= 1
    return 0


def is_array(value: object) -> TypeGuard[Iterable[Any]]:
    """Whether ``value`` stands for a JSON array: a list or another iterable of items, not
    text, bytes or an object (a mapping), which are iterable too. Every reader of a list a
    caller hands in (messages, parts, tool calls, tools) asks this before iterating."""
    return not isinstance(value, str | bytes | Mapping) and hasattr(value, "__iter__")

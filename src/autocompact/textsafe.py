"""The one rule for text that is not valid Unicode (issue 27). Stdlib only.

Written down in docs/design.md ("Issue 27 — text that is not Unicode").

Text in autocompact is Unicode scalar values. Two things break that rule on the way in:

- **bytes that are not UTF-8** (a terminal in Latin-1, ``printf 'caf\\xe9'``, a file read):
  Python hands them over as lone surrogates (``surrogateescape``: ``\\xe9`` → ``\\udce9``);
- **lone surrogates in a ``str``** (a non-UTF-8 file name in a tool's output, a string built
  from UTF-16 halves): no encoder writes them — SQLite, PostgreSQL and UTF-8 files all refuse.

The rule: at the **input** boundary (the chat's lines, piped or typed) each undecodable byte becomes
U+FFFD and the user is told once (:func:`clean_input`); in what is
**stored** (every store's JSON, the session files, exports) each surrogate code point becomes
U+FFFD (:func:`dumps`, :func:`replace_surrogates`). Replaced, not escaped: a JSON escape cannot
keep a high+low pair apart from the astral character it spells, and PostgreSQL refuses a lone
``\\udXXX`` escape in ``jsonb``, so a lossless escape cannot be done in every store — and one
rule for every backend is worth more than a lossless one in some. A session id is an identifier,
not content: one holding a surrogate is refused before anything is sent (:func:`id_problem`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

__all__ = [
    "REPLACEMENT",
    "clean_input",
    "dumps",
    "for_terminal",
    "has_surrogates",
    "id_problem",
    "replace_surrogates",
]

REPLACEMENT = "\ufffd"
"""What an undecodable byte or a lone surrogate becomes."""

_SURROGATE = re.compile("[\ud800-\udfff]")


def has_surrogates(text: str) -> bool:
    """Whether ``text`` holds a surrogate code point (it cannot be encoded as UTF-8)."""
    return _SURROGATE.search(text) is not None


def replace_surrogates(text: str) -> str:
    """``text`` with every surrogate code point replaced by U+FFFD (``text`` itself if none)."""
    if _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(REPLACEMENT, text)


def clean_input(text: str) -> tuple[str, int]:
    """A line read from a terminal or a pipe, and how many characters were replaced.

    Undecodable bytes arrive as lone surrogates (Python's ``surrogateescape``); each becomes
    U+FFFD, so what is sent is what is stored.
    """
    found = _SURROGATE.findall(text)
    if not found:
        return text, 0
    return _SURROGATE.sub(REPLACEMENT, text), len(found)


def dumps(value: Any, *, default: Callable[[Any], Any] | None = None) -> str:
    """Compact JSON text for a store: ``ensure_ascii=False``, surrogates replaced by U+FFFD.

    The single encode function the stores call: its output always encodes as UTF-8.
    ``json.dumps`` with ``ensure_ascii=False`` writes a lone surrogate as the character itself
    (never as an escape), so replacing surrogates in the JSON text replaces exactly those in
    the values and keys, without walking the value.
    """
    return replace_surrogates(
        json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=default)
    )


def id_problem(value: str) -> str | None:
    """Why ``value`` cannot be an identifier (a session or turn id) in every store, or ``None``."""
    if has_surrogates(value):
        return (
            f"{value!r:.60} is not valid Unicode (it holds a lone surrogate, as undecodable "
            "bytes give); use UTF-8 text"
        )
    return None


# C0 controls but tab and newline, shown as their pictures (ESC as "␛"); DEL as "␡"; a carriage
# return dropped (it would move the cursor back over what the line said); C1 controls (CSI and
# OSC have one-character forms there) as U+FFFD.
_FOR_TERMINAL: dict[int, str | None] = {
    **{code: chr(0x2400 + code) for code in range(0x20) if code not in (0x09, 0x0A)},
    0x0D: None,
    0x7F: "\u2421",
    **dict.fromkeys(range(128, 160), REPLACEMENT),
}


def for_terminal(text: str) -> str:
    """``text`` made safe to print to a terminal: no control character it would obey.

    A model's reply or a stored message may hold escape sequences that move the cursor, set the
    window title or write the clipboard (OSC 52); each control character is shown as its
    picture instead (tab and newline kept, a carriage return dropped).
    """
    return text.translate(_FOR_TERMINAL)

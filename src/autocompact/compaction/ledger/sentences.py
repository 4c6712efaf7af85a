"""How to split a message into sentences: at sentence ends and line breaks, trimmed, bounded. Pure.

A sentence ends at ``.``, ``!`` or ``?`` and blanks before what can open one (a capital, a
quote, a bracket, a backtick); blanks inside are collapsed, list and quote marks at the start
dropped; a sentence is at most 400 characters (of the first 800 read), a message at most 400
sentences. Linear in the text: the work is done in C where it can be (``sentence_list``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from itertools import repeat

__all__ = ["sentence_list", "sentences"]

_MARKS = "-*•> "  # list and quote marks a sentence does not start with
_MAX_SENTENCE = 400
_MAX_SENTENCES_PER_MESSAGE = 400


def sentences(text: str) -> Iterable[str]:
    """The sentences of ``text`` (split at sentence ends and line breaks), trimmed, bounded."""
    return sentence_list(text)


# A sentence ends at ``.``, ``!`` or ``?`` and blanks (spaces, tabs) before what can open one
# (a capital, a quote, a bracket, a backtick): one pattern a mark, the mark kept with the sentence
# before it. Each pattern opens with one literal character, which ``re`` skips to in C (see
# ``gather._SCAN``); one alternation that opens with a class would be tried everywhere.
_ENDS = tuple(
    (re.compile(re.escape(mark) + r"[ \t]+(?=[A-Z`\"'(\[])"), mark + "\n") for mark in ".!?"
)
# A blank that is neither a space nor a line break (``str.splitlines``).
_ODD_TEXT_BLANK = re.compile(r"[^\S \n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def sentence_list(text: str) -> list[str]:
    """The sentences of ``text``: each sentence end becomes a line break, in C; each line is cut
    to the 800 characters read and trimmed, its blanks collapsed when it may hold others than
    single spaces (all of it over the lines at once, in C: ``map``)."""
    marked = text
    if "*" in text:  # Markdown's emphasis around a list item's label
        marked = _unmarked(text)
    if _breaks(marked):  # (else no sentence end: each line is one sentence)
        for end, mark in _ENDS:
            marked = end.sub(mark, marked)
    pieces = (
        marked.split("\n")
        if marked.isascii() and not any(mark in marked for mark in _LINE_BREAKS[1:])
        else marked.splitlines()
    )
    if not pieces:
        return []
    if max(map(len, pieces)) > 2 * _MAX_SENTENCE:
        pieces = [piece[: 2 * _MAX_SENTENCE] for piece in pieces]  # what is read of each
    if (
        "  " in marked
        or "\t" in marked
        or "\x1f" in marked
        or (not marked.isascii() and _ODD_TEXT_BLANK.search(marked))
    ):  # blanks to collapse (with single spaces only, trimming is collapsing)
        pieces = list(map(" ".join, map(str.split, pieces)))
    lines = list(filter(None, map(str.strip, map(str.lstrip, pieces, repeat(_MARKS)))))
    del lines[_MAX_SENTENCES_PER_MESSAGE:]
    if lines and max(map(len, lines)) > _MAX_SENTENCE:
        lines = [line[:_MAX_SENTENCE] for line in lines]
    return lines


# Markdown's emphasis (``*``, ``**``, ``***``) around the start of a line's text: after a line
# break and the marks of a list or a quote (or a list number, which goes with it), the emphasis
# before what can open a word, the text, and the same emphasis closing it on that line, after a
# mark and before what is no part of a word.
_BREAKS = "\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029"  # where str.splitlines ends a line
_LEAD_EMPHASIS = (
    r"(?:(?P<lead>(?:[-*\u2022> \t]*[-\u2022> \t])?)|[ \t]*\d{1,3}[.)] +)"
    rf"(?P<open>\*{{1,3}})(?=[^\s*])(?P<text>[^{_BREAKS}]*?)(?<=[^\s*])(?P=open)(?![\w*])"
)
# After "\n" (``re`` skips to it in C), or after any line break (a text that has others). Four
# groups, in this order: :func:`_unmarked` reads them by place.
_AFTER_NEWLINE = re.compile(r"(?P<brk>\n)" + _LEAD_EMPHASIS)


@cache
def _after_break() -> re.Pattern[str]:
    """The same after any line break (compiled when first needed: few texts have others)."""
    return re.compile(rf"(?P<brk>[{_BREAKS}])" + _LEAD_EMPHASIS)


def _unmarked(text: str) -> str:
    """``text`` without the emphasis around the start of a line's text (``- **Credo error**: …``
    reads ``Credo error: …``, not ``Credo error**: …``), nor a list number before it (``3.
    **Task**: …``). Emphasis inside a line, and emphasis that closes nothing on its line, are
    left as they are."""
    other = any(mark in text for mark in _LINE_BREAKS[1:]) or (
        not text.isascii() and any(mark in text for mark in ("\x85", "\u2028", "\u2029"))
    )
    # Split at each match, in C: the text between matches and the groups of each (a break, the
    # marks before the text, the emphasis, the text), the emphasis dropped, then joined (a list
    # number is in no group: it goes; an unmatched ``lead`` is None, left out with the blanks).
    parts = (_after_break() if other else _AFTER_NEWLINE).split("\n" + text)
    if len(parts) == 1:
        return text
    del parts[3::5]
    return "".join(filter(None, parts))[1:]


_LINE_BREAKS = ("\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e")  # str.splitlines, in ASCII


def _breaks(line: str) -> bool:
    """Whether ``line`` can hold a sentence end (a mark followed by a blank). A search for
    ``". "`` is slow (a space is everywhere); the marks themselves are rare."""
    if "\t" in line:
        return True
    for mark in ".!?":
        at = line.find(mark)
        while at >= 0:
            if line[at + 1 : at + 2] == " ":
                return True
            at = line.find(mark, at + 1)
    return False

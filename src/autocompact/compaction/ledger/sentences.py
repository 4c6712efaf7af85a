"""How to split a message into sentences: at sentence ends and line breaks, trimmed, bounded. Pure.

A sentence ends at ``.``, ``!`` or ``?`` and blanks before what can open one (a capital, a
quote, a bracket, a backtick); blanks inside are collapsed, list and quote marks at the start
dropped; a sentence is at most 400 characters (of the first 800 read), a message at most 400
sentences. Linear in the text: the work is done in C where it can be (``sentence_list``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from itertools import repeat
from operator import add

__all__ = ["sentence_list", "sentences"]

# A sentence ends at ``.``, ``!`` or ``?`` and blanks before what can open one; the group keeps
# the mark with the sentence before it (``re.split`` returns text, mark, text, mark, …).
_SENTENCE_END = re.compile(r"([.!?])[ \t]+(?=[A-Z`\"'(\[])")
_ODD_BLANK = re.compile(r"[^\S \t]")  # a blank that is neither a space nor a tab
_MARKS = "-*•> "  # list and quote marks a sentence does not start with
_MAX_SENTENCE = 400
_MAX_SENTENCES_PER_MESSAGE = 400


def sentences(text: str) -> Iterable[str]:
    """The sentences of ``text`` (split at sentence ends and line breaks), trimmed, bounded."""
    return sentence_list(text)


# A sentence end for each mark, as ``_SENTENCE_END`` has it: each pattern opens with one literal
# character, which ``re`` skips to in C (see ``gather._SCAN``); ``_SENTENCE_END`` opens with a
# class.
_ENDS = tuple(
    (re.compile(re.escape(mark) + r"[ \t]+(?=[A-Z`\"'(\[])"), mark + "\n") for mark in ".!?"
)
# A blank that is neither a space nor a line break (``str.splitlines``).
_ODD_TEXT_BLANK = re.compile(r"[^\S \n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def sentence_list(text: str) -> list[str]:
    """The sentences of ``text``: each sentence end becomes a line break, in C, and when the
    only blanks left are single spaces, cutting each line to the 800 characters read and
    trimming it is all that is left to do (blanks of any other kind take the line by line path
    of ``_line_sentences``)."""
    if not _breaks(text):  # each line is one sentence, of which 800 characters are read
        return list(_sentences_by_line(text))
    marked = text
    for end, mark in _ENDS:
        marked = end.sub(mark, marked)
    if not (
        "  " in marked
        or "\t" in marked
        or "\x1f" in marked
        or (not marked.isascii() and _ODD_TEXT_BLANK.search(marked))
    ):
        pieces = (
            marked.split("\n")
            if marked.isascii() and not any(mark in marked for mark in _LINE_BREAKS[1:])
            else marked.splitlines()
        )
        if pieces and max(map(len, pieces)) > 2 * _MAX_SENTENCE:
            pieces = [piece[: 2 * _MAX_SENTENCE] for piece in pieces]  # what is read of each
        lines = list(filter(None, map(str.strip, map(str.lstrip, pieces, repeat(_MARKS)))))
        del lines[_MAX_SENTENCES_PER_MESSAGE:]
        if lines and max(map(len, lines)) > _MAX_SENTENCE:
            lines = [line[:_MAX_SENTENCE] for line in lines]
        return lines
    return list(_sentences_by_line(text))


def _sentences_by_line(text: str) -> Iterable[str]:
    count = 0
    for raw_line in _lines(text):
        for line in _line_sentences(raw_line):
            count += 1
            if count > _MAX_SENTENCES_PER_MESSAGE:
                return
            yield line


_LINE_BREAKS = ("\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e")  # str.splitlines, in ASCII


def _lines(text: str) -> list[str]:
    """``text.splitlines()``, without copying a text that is one line (single-character
    searches are far cheaper than the copy)."""
    if text.isascii() and not any(mark in text for mark in _LINE_BREAKS):
        return [text] if text else []
    return text.splitlines()


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


def _line_sentences(raw_line: str) -> list[str]:
    """The sentences of one line: blanks collapsed, list marks dropped, at most 400 characters
    (the first 800 of the text are read)."""
    if _breaks(raw_line):
        parts = _SENTENCE_END.split(raw_line)
        pieces = list(map(add, parts[0::2], parts[1::2]))
        pieces.append(parts[-1])
        read = len(raw_line)
    else:
        pieces = [raw_line]
        read = 2 * _MAX_SENTENCE + 1
    odd = (
        "\x1f" in raw_line
        if raw_line.isascii()
        else _ODD_BLANK.search(raw_line, 0, read) is not None
    )
    if odd or raw_line.find("  ", 0, read) >= 0 or "\t" in raw_line:
        lines = [
            " ".join(piece[: 2 * _MAX_SENTENCE].split()).lstrip(_MARKS).strip() for piece in pieces
        ]
    else:
        # Single spaces only (the common case): collapsing blanks is trimming, and a sentence
        # after a break opens with a capital or a quote and ends with its mark, so only the
        # first and the last (and any cut to the 800 characters read) need it.
        if max(map(len, pieces)) > 2 * _MAX_SENTENCE:
            lines = [piece[: 2 * _MAX_SENTENCE].strip() for piece in pieces]
        else:
            lines = pieces
        lines[0] = lines[0].lstrip(_MARKS).strip()
        lines[-1] = lines[-1].strip()
    if max(map(len, lines)) > _MAX_SENTENCE:
        lines = [line[:_MAX_SENTENCE] for line in lines]
    return [line for line in lines if line]

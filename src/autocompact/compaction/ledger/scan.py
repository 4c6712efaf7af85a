"""One scan of a message's sentences: which are specific, which are negated or modal. Pure.

The sentences are joined and read in C over one class byte a character (issue 10's technique)
for what makes a sentence specific: each pattern opens with one literal byte, which ``re``
skips to in C, and counts once a sentence. Negation and modal words are a set test on each
other sentence's words (C-level split and ``isdisjoint``).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from itertools import accumulate, count
from operator import add

from autocompact.compaction.ledger.text import bare

__all__ = ["scan"]

# One class byte a character: ``#`` a digit or a symbol of code (``/_@#=`$\``), ``A`` a capital,
# ``a`` a small letter, ``.`` and ``-`` themselves, ``,`` for ``,;:``, a space and a line break
# themselves, ``?`` anything else (a character outside ASCII is ``?`` once encoded, so offsets
# stay those of the text).
_CLASS = bytes(
    0x23
    if (0x30 <= b <= 0x39 or b in b"/_@#=`$\\")
    else 0x41
    if 0x41 <= b <= 0x5A
    else 0x61
    if 0x61 <= b <= 0x7A
    else b
    if b in b".- \n"
    else 0x2C
    if b in b",;:"
    else 0x3F
    for b in range(256)
)
_SYMBOL = 0x23  # ``#``: a number, a path, an identifier with a symbol (found with bytes.find)
_MARKS = (
    re.compile(rb"A(?<=[a,] A)(?=[aA])"),  # a name or an acronym inside a sentence
    re.compile(rb"A(?<=aA)"),  # camelCase
    re.compile(rb"\.(?<=a\.)(?=a)"),  # a dotted name
    re.compile(rb"-(?<=a-)(?=a)"),  # a hyphenated name
)
# Negation and modal words (a specific sentence is a candidate anyway, so it is not tested),
# found among the words as the sentence's form reads them: the marks next to them blanked.
_STRONG = frozenset(
    """no not never none nothing without nor cannot must should shall only always need needs
    ought require requires""".split()  # noqa: SIM905
)


def _ends(lengths: Sequence[int]) -> list[int]:
    return list(map(add, accumulate(lengths), count()))


def scan(lines: Sequence[str]) -> tuple[dict[int, int], set[int], list[str]]:
    """For the sentences ``lines``: how many specific marks each holds (only those with any),
    which of the others hold a negation or a modal word, and each sentence in lower case."""
    joined = "\n".join(lines)
    lower = joined.lower()
    lower_lines = lower.split("\n")
    classes = joined.encode("ascii", "replace").translate(_CLASS)
    ends = _ends([len(line) for line in lines])
    marks: dict[int, int] = {}
    # Each mark counts once a sentence: on a hit, skip to its end. A run of ``#`` counts as
    # its first one, so a byte search (memchr, in C) finds what the pattern ``#+`` would.
    at = classes.find(_SYMBOL)
    while at >= 0:
        index = bisect_left(ends, at)
        marks[index] = marks.get(index, 0) + 1
        at = classes.find(_SYMBOL, ends[index] + 1)
    for pattern in _MARKS:  # the others open with one literal byte, which `re` skips to in C
        match = pattern.search(classes)
        while match is not None:
            index = bisect_left(ends, match.start())
            marks[index] = marks.get(index, 0) + 1
            match = pattern.search(classes, ends[index] + 1)
    strong = {
        index
        for index, line in enumerate(bare(lower).split("\n"))
        if index not in marks and (not _STRONG.isdisjoint(line.split()) or "n't" in line)
    }
    return marks, strong, lower_lines

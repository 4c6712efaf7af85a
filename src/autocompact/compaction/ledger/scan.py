"""One scan of a message's sentences: which are specific, which are negated or modal. Pure.

The sentences are joined and read in C, a few times over one byte a character (issue 10's
technique): a class byte a character for what makes a sentence specific, and the words alone
(letters and apostrophes) for negation and modal words. Each pattern opens with one literal
byte, which ``re`` skips to in C; Python-level work is per hit, so plain chatter costs little.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from itertools import accumulate, count
from operator import add

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
_MARKS = (
    re.compile(rb"#+"),  # a number, a path, an identifier with a symbol
    re.compile(rb"A(?<=[a,] A)(?=[aA])"),  # a name or an acronym inside a sentence
    re.compile(rb"A(?<=aA)"),  # camelCase
    re.compile(rb"\.(?<=a\.)(?=a)"),  # a dotted name
    re.compile(rb"-(?<=a-)(?=a)"),  # a hyphenated name
)
# The words alone: lower case, letters and apostrophes kept, everything else a space.
_WORDS = bytes(b if (0x61 <= b <= 0x7A or b == 0x27) else 0x20 for b in range(256))
_STRONG = re.compile(
    rb" (?:no|not|never|none|nothing|without|nor|cannot|must|should|shall|only|always|need|"
    rb"needs|ought|require|requires|[a-z]+n't)(?= )"
)


def _ends(lengths: Sequence[int]) -> list[int]:
    return list(map(add, accumulate(lengths), count()))


def scan(lines: Sequence[str]) -> tuple[dict[int, int], set[int], list[str]]:
    """For the sentences ``lines``: how many specific marks each holds (only those with any),
    which hold a negation or a modal word, and each sentence in lower case."""
    joined = "\n".join(lines)
    lower = joined.lower()
    lower_lines = lower.split("\n")
    classes = joined.encode("ascii", "replace").translate(_CLASS)
    ends = _ends([len(line) for line in lines])
    marks: dict[int, int] = {}
    for pattern in _MARKS:  # each pattern counts once a sentence: on a hit, skip to its end
        match = pattern.search(classes)
        while match is not None:
            index = bisect_left(ends, match.start())
            marks[index] = marks.get(index, 0) + 1
            match = pattern.search(classes, ends[index] + 1)
    strong: set[int] = set()
    words = b" " + lower.encode("ascii", "replace").translate(_WORDS) + b" "
    if len(lower_lines) == len(lines):
        lower_ends = _ends([len(line) for line in lower_lines])
        for match in _STRONG.finditer(words):
            strong.add(bisect_left(lower_ends, match.start()))
    return marks, strong, lower_lines

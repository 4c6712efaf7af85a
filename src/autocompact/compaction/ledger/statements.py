"""Whole statements: sentences that continue the one before are joined to it. Pure.

A user's statement often spans sentences whose value is in the last one (``About the exporter.
It has been slow. Everything it writes lands in `out/x-12`.``); kept apart, the last sentence
loses its subject and the first its value. A sentence that opens with a word pointing back
(a pronoun or a demonstrative) continues the statement before it; after a short sentence that
opens with a preposition (a topic: ``About the exporter.``), one with a pronoun anywhere does.
A ``Label: value`` line with no end mark run into the next sentence is split off it. The word
sets are closed classes of grammar. Linear: each sentence is read once (its first 40
characters, or its words after a topic).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from itertools import accumulate, count
from operator import add

__all__ = ["statements", "unglued"]

_MAX_SENTENCE = 400

# A ``Label: value`` line with no end mark, run into the next sentence (``Port: 8080 The build
# is green.``): the value is one token with a digit or a mark, the next sentence opens with a
# capitalised word.
_GLUED = re.compile(r"^([A-Z][^:=.!?]{0,60}?\s*[:=]\s+\S*[\d/_@.-]\S*)\s+([A-Z][a-z]+[\s:,=].*)$")


def _labelled(line: str) -> bool:
    """Whether ``line`` may open with a label (a cheap test before the pattern)."""
    if len(line) >= _MAX_SENTENCE:
        return False
    colon, equals = line.find(": ", 0, 64), line.find("= ", 0, 64)
    return colon > 0 or equals > 0


def unglued(lines: list[str]) -> list[str]:
    """``lines`` with each labelled value run into the next sentence split off it."""
    joined = "\n".join(lines)
    if ":" not in joined and "=" not in joined:
        return lines
    # Only a sentence holding ``": "`` or ``"= "`` is tried (the bounded test, then the
    # pattern): those are found in the joined text (C-level searches), the rest copied whole.
    ends: list[int] = []  # where each line's break is, once one is needed
    tried: set[int] = set()
    for mark in ":=":  # one character: a memchr, far faster than a search for ``": "``
        at = joined.find(mark)
        while at >= 0:
            if joined[at + 1 : at + 2] != " ":
                at = joined.find(mark, at + 1)
                continue
            ends = ends or list(map(add, accumulate(map(len, lines)), count()))
            index = bisect_left(ends, at)
            tried.add(index)
            at = joined.find(mark, ends[index] + 1)
    out: list[str] = []
    done = 0
    for index in sorted(tried):
        out += lines[done:index]
        done = index + 1
        line = lines[index]
        glued = _GLUED.match(line) if _labelled(line) else None
        while glued is not None:
            out.append(glued.group(1))
            line = glued.group(2)
            glued = _GLUED.match(line) if _labelled(line) else None
        out.append(line)
    out += lines[done:]
    return out


# Words that point back to what the sentence before said: a sentence that opens with one
# continues that statement. A short sentence that opens with
# a preposition (``About the exporter.``) names the topic of those after it.
_BACK = frozenset(
    [
        "it",
        "its",
        "it's",
        "they",
        "their",
        "them",
        "this",
        "that",
        "these",
        "those",
        "there",
        "everything",
        "all",
    ]
)
_SOFT = frozenset(["and", "but", "so", "also", "then", "plus"])
_TOPIC = frozenset(["about", "regarding", "concerning", "re", "on", "as", "for"])
_PRONOUN = frozenset(["it", "its", "it's", "they", "their", "them"])
_MAX_STATEMENT = 3  # sentences


def statements(lines: list[str]) -> list[str]:
    """``lines`` with each sentence that continues the one before joined to it, so a statement
    is kept whole, with every sentence (at most :data:`_MAX_STATEMENT` and 400 characters)."""
    out: list[str] = []
    parts = 0
    topic = False
    for line in lines:
        head = line[:24].split(None, 2)
        first = head[0].lower().rstrip(",") if head else ""
        if first in _SOFT and len(head) > 1:
            first = head[1].lower().rstrip(",")
        back = first in _BACK
        if topic and not back:
            back = not _PRONOUN.isdisjoint(line.lower().replace(",", " ").split())
        if out and back and parts < _MAX_STATEMENT and len(out[-1]) + len(line) < _MAX_SENTENCE:
            out[-1] += " " + line
            parts += 1
            continue
        topic = first in _TOPIC and len(line.split()) <= 5
        out.append(line)
        parts = 1
    return out

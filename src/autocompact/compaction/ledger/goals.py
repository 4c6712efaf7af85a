"""The goal and its changes, and the choice of a few entries among many. Pure.

The goal is the request of the first user message: its sentence with the most words of content
rare in the session (a greeting, an aside or a template said again and again before the request
is not the goal). What the goal is about is the words of its identifiers and paths
(``importer`` for ``importer/garnet_5160.py``). A later user directive that names that subject,
or that opens a turn, is a change of goal; one that names it (and is not of a template said
again and again) is kept first, the latest ones, so a change an earlier summary carried stays
until newer changes of the same goal replace it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from autocompact.compaction.ledger import tools
from autocompact.compaction.ledger.model import Entry
from autocompact.compaction.ledger.text import (
    GRAMMAR,
    LABEL,
    Form,
    bare,
    content_words,
    form_of,
    is_harness,
    is_heading,
    norm,
    specific_tokens,
)

__all__ = [
    "NAMED",
    "NAMED_GOAL",
    "best",
    "code_like",
    "goal_changes",
    "goal_index",
    "has_name",
    "latest",
    "names",
    "request_text",
    "says_again",
    "subject_of",
    "subject_words",
    "value_follows",
]

# (A match that opens after a letter has one that opens at that letter too: only a run's first
# two letters are tried; the same matches, found faster.)
NAMED = re.compile(r"(?<![A-Za-z])[A-Za-z]{2}[\w.-]*[\d/_@]|[\d/_@][\w.-]*[A-Za-z]{2}")
"""A token that names something: letters and digits or marks of a path or an identifier."""
# ``NAMED``'s second form alone: a mark, then two letters after it in the same word. Read
# backwards, the first form is this one too, so a text has a match of ``NAMED`` exactly when it
# or its reverse has one of this (a search that skips to the marks in C, twice as fast).
_MARK_THEN_LETTERS = re.compile(r"[\d/_@][\w.-]*[A-Za-z]{2}")
# The same in a text in ASCII (``\d`` and ``\w`` written out: classes read as tables).
_MARK_THEN_LETTERS_ASCII = re.compile(r"[0-9/_@][A-Za-z0-9_.-]*[A-Za-z]{2}")


def has_name(text: str) -> bool:
    """Whether ``NAMED`` finds a match in ``text`` (what it matches is not needed)."""
    pattern = _MARK_THEN_LETTERS_ASCII if text.isascii() else _MARK_THEN_LETTERS
    return pattern.search(text) is not None or pattern.search(text[::-1]) is not None


NAMED_GOAL = "names goal"
"""The mark of a change of goal that names the goal's subject."""
_PART = re.compile(r"[a-z]{4,}")  # a word of an identifier (``importer`` in ``importer/x.py``)
_EXTENSION = re.compile(r"\.\w{1,5}$")


def code_like(line: str) -> bool:
    """Whether a sentence reads as code: brackets, braces and assignments, or a traceback's
    frame line."""
    marks = line.count("(") + line.count("[") + line.count("{") + line.count(" = ")
    return marks >= 2 or line.startswith(('File "', "at ", "Traceback", "```", "def ", "class "))


def goal_index(
    lines: Sequence[str], lower: Sequence[str], marks: dict[int, int], common: set[str]
) -> int:
    """Which of the first user message's sentences ``lines`` is the goal: of those that set no
    limit (a rule is not the request), the one with the most words of content that are not
    ``common`` in the session (of a statement of several sentences, its first counts), one more
    for naming something (a path, an identifier), the first of equals; -1 when none is
    usable. A request the message opens with and then details under a heading ("Explore the
    project. I need to understand: 1. …") is chosen before the items of that list, when it
    says enough (:data:`_OPENING_WORDS` such words)."""
    usable = [
        index
        for index, line in enumerate(lines)
        if len(line) >= 4 and not is_harness(line) and not (index in marks and code_like(line))
    ]
    # A rule or a heading is not the request (a message of headings alone still has a goal).
    requests = [
        i for i in usable if not _limit(form_of(lines[i])) and not is_heading(lines[i])
    ] or usable
    heading = next((i for i in usable if is_heading(lines[i])), len(lines))
    chosen, chosen_score = -1, -1
    for index in requests:
        first = lower[index].split(". ", 1)[0]
        score = len(content_words(first) - common)
        score += 1 if index in marks and NAMED.search(lines[index]) is not None else 0
        if index < heading and score >= _OPENING_WORDS:
            score += _BEFORE_HEADING  # (a list's item scores less than any such request)
        if score > chosen_score:
            chosen, chosen_score = index, score
    return chosen


_OPENING_WORDS = 3
_BEFORE_HEADING = 1_000
_SHORT_SENTENCES = 4  # a request said whole in the goal: at most so many sentences
_SHORT_REQUEST = 300  # and characters


def request_text(lines: Sequence[str], index: int) -> str:
    """The goal's text: sentence ``index`` of the first message (:func:`goal_index`), with the
    sentences before it that ask for the same thing: a request (no rule, no heading) naming
    what it names (in ``Work on bead X. Run bd show X to see its details and bd ready to find
    its subtasks.``, the first says what, the one chosen how), when they are short."""
    named = {token.lower() for token in specific_tokens(lines[index])}
    before = [
        line
        for line in lines[:index]
        if len(line) >= 4
        and not is_harness(line)
        and not is_heading(line)
        and not {token.lower() for token in specific_tokens(line)}.isdisjoint(named)
        and (form := form_of(line)).directive
        and not _limit(form)
    ]
    if before and len(before) < _SHORT_SENTENCES:
        whole = " ".join((*before, lines[index]))
        if len(whole) <= _SHORT_REQUEST:
            return whole
    return lines[index]


def _limit(form: Form) -> bool:
    """Whether a sentence of this form sets a limit (negated, modal, bounded: a rule, not the
    request)."""
    return form.negated or form.bounded


def subject_words(goal: str) -> frozenset[str]:
    """What a goal is about: the words of its identifiers and paths (``importer`` and
    ``garnet`` for ``importer/garnet_5160.py``; not a file extension or ``src``); none for a
    goal without one (its plain words are too common to tell a change of it)."""
    parts = {
        part
        for token in specific_tokens(goal)
        for part in _PART.findall(_EXTENSION.sub("", token.lower()))
    }
    return frozenset(parts - tools.SOURCE_DIRS - GRAMMAR)


def subject_of(goal: Entry | None) -> re.Pattern[str] | None:
    """A pattern that finds the goal's :func:`subject_words` as whole words in lower-cased
    text (one search in C a sentence); None without a goal or words."""
    words = subject_words(goal.text) if goal is not None else frozenset()
    if not words:
        return None
    alternatives = "|".join(sorted(map(re.escape, words)))
    return re.compile(rf"(?<![a-z])(?:{alternatives})(?![a-z])")


def names(subject: re.Pattern[str] | None, lower: str) -> bool:
    """Whether a lower-cased sentence names the goal's subject (see :func:`subject_of`)."""
    return subject is not None and subject.search(lower) is not None


def value_follows(line: str, lines: Sequence[str], index: int) -> bool:
    """Whether ``line`` gives an order and the sentence after it gives none (so it holds the
    value the order is about: ``Park the importer. What matters now is `/v2/r-1`.``)."""
    return form_of(line).directive and not form_of(lines[index + 1]).directive


def goal_changes(goals: Sequence[Entry], count: int) -> tuple[Entry, ...]:
    """The changes of goal a summary shows: the latest that name the goal's subject (marked
    :data:`NAMED_GOAL`), then the most specific of the others, ``count`` in all, in history
    order."""
    named = [e for e in goals if e.mark == NAMED_GOAL]
    chosen = latest(named, count)
    others = [e for e in goals if e not in chosen]
    rest = best(others, count - len(chosen)) if len(chosen) < count else ()
    return tuple(sorted((*chosen, *rest), key=lambda e: e.position))


def says_again(goal: Entry | None, change: Entry) -> bool:
    """Whether a change of goal only says the goal again: its words are all in the goal, in
    order (a summary quoting the user's first request, ``"Implement X"``, under a goal that
    reads ``The user requested "Implement X" — …``), or the goal's are, and make most of it.
    What leads to a quote of it is read past: a label (a skill's ``Arguments: <the goal>``)
    or a word or two before a quote mark (``Parse `<the goal>```). Marks and case aside."""
    if goal is None:
        return False
    said = _word_line(goal.text)
    lead = LABEL.match(change.text) or _QUOTE_LEAD.match(change.text)
    for text in dict.fromkeys((change.text, change.text[lead.end() :] if lead else "")):
        now = _word_line(text)
        if now.strip() and (now in said or (said in now and 4 * len(said) >= 3 * len(now))):
            return True
    return False


# What leads to a quote without a label: a word or two before a quote mark.
_QUOTE_LEAD = re.compile(r"^\w+(?: \w+)?\s+(?=[`\"'])")


def _word_line(text: str) -> str:
    """``text``'s words, lower-cased, one blank between and around them."""
    return " " + " ".join(bare(text.lower()).split()) + " "


def latest(entries: Sequence[Entry], count: int) -> tuple[Entry, ...]:
    """The ``count`` latest of ``entries`` (one of each text), in history order."""
    seen: dict[str, Entry] = {}
    for entry in entries:
        seen[norm(entry.text)] = entry
    return tuple(sorted(seen.values(), key=lambda e: e.position)[-count:])


def best(entries: Sequence[Entry], count: int) -> tuple[Entry, ...]:
    """The ``count`` best scored of ``entries`` (one of each text, newer first of equals), in
    history order."""
    seen: dict[str, Entry] = {}
    for entry in entries:
        seen[norm(entry.text)] = entry
    chosen = sorted(seen.values(), key=lambda e: (-e.score, -e.position))[:count]
    return tuple(sorted(chosen, key=lambda e: e.position))

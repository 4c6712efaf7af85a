"""Reading one sentence: harness text, statement forms, specificity, shortening. Pure.

Items are recognised by structure, not by topic words: who said a sentence (the caller knows),
its form (a ``key: value`` / ``key = value`` / ``key is value`` / ``set key to value`` /
``use value for key`` statement; an imperative, a negation, a modal, a condition or a limit)
and how specific it is (numbers, versions, paths, identifiers, quoted values, names, and words
that are rare in the session, counted by the caller). The word sets here are closed classes of
grammar (determiners, pronouns, auxiliaries, negation, modals, prepositions), never a list of
subjects a user might mention.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from functools import lru_cache
from itertools import repeat
from typing import NamedTuple

from autocompact.compaction.ledger.announcements import SET_VERBS

__all__ = [
    "FILLER",
    "GRAMMAR",
    "LABEL",
    "Form",
    "bare",
    "carries_stale",
    "content_words",
    "drop_harness_blocks",
    "each_specific_token",
    "fact_of",
    "form_of",
    "has_specific",
    "hinted",
    "is_harness",
    "is_heading",
    "marked_tokens",
    "norm",
    "rare_count",
    "shorten",
    "specific_count",
    "specific_counts",
    "specific_marks",
    "specific_tokens",
    "stale_tokens",
    "template_key",
    "whole_words",
]

# Blocks the harness writes into the user's turn: never the user's words.
_HARNESS_BLOCK = re.compile(
    r"<(task-notification|system-reminder|local-command-caveat|local-command-stdout|"
    r"local-command-stderr|command-name|command-message|command-args|bash-input|bash-stdout|"
    r"bash-stderr|user-prompt-submit-hook)>.*?(?:</\1>|$)",
    re.S,
)
_HARNESS = re.compile(
    r"^\s*(?:\[Request interrupted|\[Tool output cleared|\[Image #|<command-|<local-command|"
    r"<system-reminder>|</?task-notification|<task-id>|<output-file>|<status>|<summary>|"
    r"Caveat: |<bash-(?:input|stdout|stderr)>|This session continues|"
    r"This session is being continued|The summary below covers the earlier portion|"
    r"If you need specific details from before compaction|"
    r"Please continue the conversation from where we left off|"
    r"Continue with the last task that you were asked|The user doesn't want to proceed|"
    r"The tool use was rejected|STOP what you are doing|To tell you how to proceed|"
    r"Read the output file to retrieve|Tool ran without output|No response requested|"
    r"Acknowledged\.|Got it\.|Continue(?: from where you left off)?\.?$|/[\w:-]+\s*$)",
    re.IGNORECASE,
)
_REJECTED_SAID = re.compile(r"the user said:\s*(.+)\Z", re.S | re.IGNORECASE)
_ARGS_TAG = re.compile(r"</?command-args>")


def drop_harness_blocks(text: str) -> str:
    """``text`` without the harness's own blocks (task notifications, system reminders, command
    echoes); what the user typed after a slash command is theirs (the request a custom command
    or skill serves), but not after ``/compact`` (a focus for that summary); a tool rejection
    keeps only what the user said with it."""
    if "<" in text:
        if "<command-args>" in text and "<command-name>/compact<" not in text:
            text = _ARGS_TAG.sub("\n\n", text)
        text = _HARNESS_BLOCK.sub(" ", text)
    if "doesn't want to proceed" in text:
        said = _REJECTED_SAID.search(text)
        return said.group(1) if said else ""
    return text


# The first three characters, lower-cased, of every sentence ``_HARNESS`` can match (a sentence
# is stripped); only those try the pattern. ``/`` opens a slash command.
_HARNESS_HEADS = frozenset(
    """[re [to [im <co <lo <sy <ta </t <ou <st <su cav <ba thi the sto to  rea too no ack got
    con ple""".split()  # noqa: SIM905
) | {"to ", "if "}


_ATX_HEADING = re.compile(r"#{1,6} ")


def is_heading(sentence: str) -> bool:
    """Whether a sentence heads what follows it (``Pending Tasks:``, ``## Phase 2``): it says
    nothing on its own."""
    return sentence.endswith(":") or _ATX_HEADING.match(sentence) is not None


def is_harness(sentence: str) -> bool:
    """Whether a sentence is harness or tool-protocol text, never the user's own words."""
    head = sentence[:3].lower()
    if head not in _HARNESS_HEADS and head[:1] != "/" and head.isascii():
        return False
    return _HARNESS.match(sentence) is not None


# -- closed classes ---------------------------------------------------------------------------

_OPENERS = frozenset(
    """the a an this that these those it its it's i i'm i've i'd we we're we've you you're he she
    they there here what which who whom whose how why where when is are was were be been am do
    does did has have had can could would will may might shall in on at of for to from by with
    as and but or so if then than because while also just well yes yeah no ok okay sure thanks
    thank hi hello hey great nice cool good fine hmm oh ah maybe perhaps really actually
    anyway sounds looks seems all some any each every both either neither one our my your
    their his her much many more most very too now today yesterday tomorrow about""".split()  # noqa: SIM905
)
_NEGATION = frozenset(
    """no not never none nothing nobody nowhere neither nor without cannot""".split()  # noqa: SIM905
)
_MODAL = frozenset(
    ["must", "should", "shall", "need", "needs", "only", "always", "ought", "require", "requires"]
)
_LIMIT = frozenset(
    """under below above over within before after until max min least most""".split()  # noqa: SIM905
)
_CONDITION = frozenset(["if", "unless", "when", "whenever", "until", "except", "otherwise"])
_REPORTED = re.compile(r"\b(?:does|did)(?: not\b|n't|nt\b)")  # the negation of a report
_ASKING = frozenset(["what", "why", "how", "where", "which", "who", "whom", "whose"])
_SOFT_LEAD = frozenset(["please", "also", "and", "so", "ok", "okay", "then", "now", "just", "oh"])
FILLER = frozenset(
    """the a an that this these those our my your its really just very please also actually
    basically currently simply quite rather so then now still kind sort of""".split()  # noqa: SIM905
)
"""Words a binding budget may drop from a statement (never a value, negation or condition)."""
_KEY_DROP = FILLER | frozenset(
    """for to in on at by with from is are was be set new current updated update note fyi
    value""".split()  # noqa: SIM905
)


class Form(NamedTuple):
    """The grammatical form of a sentence (what makes it a candidate item)."""

    directive: bool  # imperative, modal, negation, limit or condition
    negated: bool
    first_person: bool  # "I …" / "We …": a preference or a decision
    strong: bool  # negated or modal: a rule even without anything specific in it
    bounded: bool  # modal, a limit or a condition: a rule, not a change of goal


_WORD = re.compile(r"[a-z][a-z']*")


# The marks that may stand next to a word and are no part of it (Markdown's ``*`` included).
_BARE_MARKS = ',.;:!?()"`*'


def bare(lower: str) -> str:
    """``lower`` with its punctuation blanked (C-level replaces: faster than ``str.translate``
    on text outside ASCII)."""
    for mark in _BARE_MARKS:
        if mark in lower:
            lower = lower.replace(mark, " ")
    return lower


def form_of(sentence: str) -> Form:
    """The form of ``sentence`` (see :class:`Form`)."""
    lower = sentence.lower()
    words = bare(lower).split()
    if not words:
        return Form(False, False, False, False, False)
    head = 0
    while head < len(words) - 1 and words[head] in _SOFT_LEAD:
        head += 1
    first = words[head]
    if first in _ASKING and sentence.rstrip().endswith("?"):
        return Form(False, False, False, False, False)  # a question: asked, not a rule
    negated = not _NEGATION.isdisjoint(words) or "n't" in lower
    if negated and ("does" in lower or "did" in lower):  # "it does not start": told, not set
        told = _REPORTED.sub(" ", lower)
        negated = not _NEGATION.isdisjoint(bare(told).split()) or "n't" in told
    imperative = (
        first not in _OPENERS
        and not sentence.rstrip().endswith("?")
        and len(words) - head >= 2
        and (sentence[:1].isupper() or head > 0 or not sentence[:1].isalpha())
    ) or first in ("let's", "lets")
    modal = not _MODAL.isdisjoint(words) or " have to " in lower or " has to " in lower
    bounded = modal or not _LIMIT.isdisjoint(words) or not _CONDITION.isdisjoint(words)
    directive = imperative or negated or bounded
    first_person = first in ("i", "we", "i'd", "we'd", "i'm", "we're")
    return Form(directive, negated, first_person, negated or modal, bounded)


_GRAMMAR = _OPENERS | FILLER | _NEGATION | _MODAL | _SOFT_LEAD
GRAMMAR = _GRAMMAR
"""Closed classes of grammar and filler: words that carry no content."""


def content_words(lower: str) -> set[str]:
    """The words of a lower-cased sentence that carry content (not grammar, not filler)."""
    return set(bare(lower).split()) - _GRAMMAR


def rare_count(lower: str, known: frozenset[str]) -> int:
    """How many distinct words of a lower-cased sentence are not ``known`` (``len(content_words
    (lower) - common)`` with ``known`` the common words and :data:`GRAMMAR`): most sentences
    have none, told by one C-level pass over its words without building a set."""
    words = bare(lower).split()
    if known.issuperset(words):
        return 0
    return len(set(words) - known)


# -- specificity --------------------------------------------------------------------------------

# A specific token (one blank-separated word, edge punctuation off): a number, a path, an
# identifier (``a_b``, ``a.b``, ``aB``, ``a-1``), a word in capitals, a quoted or backticked
# value, a price or a percentage; or a capitalised name inside a sentence.
_TOKEN_SPECIFIC = re.compile(
    r"[`\"'].+|[$€£]?\d.*|.*[/_@#=\\].*|.*[a-z][A-Z].*|[A-Z][A-Z0-9]+|[A-Za-z0-9]+(?:[.-][A-Za-z0-9]+)+"
)
_NAME = re.compile(r"[A-Z][a-z]{2,}")
_EDGE = "()[]{}<>,;:!?.\u2026"
# What any specific token holds (one pass, in C): most prose has none and skips the word loop.
_HINT_CHARS = re.compile(r"[\d/_@#=`\"$€£\\-]")
_HINT_CHARS_ASCII = re.compile(r"[0-9/_@#=`\"$\\-]")  # (the same, in a text in ASCII)


# A fast count of what makes a sentence specific: runs of digits and symbols, a name or an
# acronym inside a sentence, a capital inside a word, a dot or a hyphen inside a word. The
# pattern opens with one class of every character a match can open with, which ``re`` skips to
# in C (an alternation of forms that each open with a class is tried at every position, about
# four times slower); the character it took tells the forms apart (the classes are disjoint).
_SYMBOLS = r"\d/_@#=`$€£\\"
_SPECIFIC_MARKS = re.compile(
    rf"[{_SYMBOLS}A-Z.-](?:(?<=[{_SYMBOLS}])[{_SYMBOLS}]*|(?<=[a-z,;:] [A-Z])(?=[a-z]{{2}}|[A-Z])"
    r"|(?<=[a-z][A-Z])|(?<=[a-z][.-])(?=[a-z]))"
)


# The same pattern for a text in ASCII, where ``\d`` is ``0-9``: its classes are then tables,
# read in one step a character, where a class with ``\d`` tests each of its members in turn.
_SPECIFIC_MARKS_ASCII = re.compile(_SPECIFIC_MARKS.pattern.replace(r"\d", "0-9"))


def specific_marks(text: str) -> int:
    """About how many specific tokens ``text`` holds (a fast count, for ranking)."""
    return len((_SPECIFIC_MARKS_ASCII if text.isascii() else _SPECIFIC_MARKS).findall(text))


def specific_counts(texts: Iterable[str]) -> list[int]:
    """:func:`specific_marks` of each of ``texts`` (one call for a message's sentences)."""
    ascii_marks, marks = _SPECIFIC_MARKS_ASCII.findall, _SPECIFIC_MARKS.findall
    return [len(ascii_marks(text) if text.isascii() else marks(text)) for text in texts]


def hinted(text: str) -> bool:
    """Whether ``text`` may hold a specific token (a superset of those that do; C-level tests)."""
    if (_HINT_CHARS_ASCII if text.isascii() else _HINT_CHARS).search(text) is not None:
        return True
    if text.find(".", 0, len(text) - 1) >= 0:
        return True
    rest = text[1:]
    return not (rest.islower() or rest.replace(" I ", " i ").islower())


def specific_tokens(text: str) -> list[str]:
    """The specific tokens of ``text``: numbers, versions, paths, identifiers, quoted values,
    words in capitals, and capitalised names inside a sentence."""
    return list(_specific_tokens(text))


# The ledger asks again for the tokens of a value it has just read (a fact's value when it is
# checked, looked up, indexed and compared with those it replaces): the last texts are kept.
@lru_cache(maxsize=256)
def _specific_tokens(text: str) -> tuple[str, ...]:
    if not hinted(text):
        return ()
    found = []
    for index, raw in enumerate(text.split()):
        word = raw.strip(_EDGE)
        if not word or (word.islower() and word.isalpha()):
            continue  # a word of small letters matches no pattern (each needs a capital or a mark)
        if _TOKEN_SPECIFIC.fullmatch(word) or (
            index and _NAME.fullmatch(word) and not raw.startswith(("(", "[", '"', "'"))
        ):
            found.append(word.strip("`\"'"))
    return tuple(token for token in found if token)


# A word (blank-separated) that holds a digit or one of ``/@._-``, from its start (the
# lookbehind fails at once inside a word; the first run cannot hold one of them, so it ends,
# and it is never given back: a word without one fails at its end, without backtracking).
_MARKED_WORD = re.compile(r"(?<!\S)[^\s\d/@._-]*+[\d/@._-]\S*")


def marked_tokens(text: str) -> list[str]:
    """The specific tokens of the words of ``text`` that hold a digit or one of ``/@._-``: all
    those that can tell a kind of value (:func:`~autocompact.compaction.ledger.keys.shapes`
    reads the same of them as of :func:`specific_tokens`), in order; the other words are not
    read. (A word with one of them makes ``text`` :func:`hinted`; a capitalised name is none of
    them.)"""
    found = []
    for raw in _MARKED_WORD.findall(text):
        word = raw.strip(_EDGE)
        if word and _TOKEN_SPECIFIC.fullmatch(word):
            token = word.strip("`\"'")
            if token:
                found.append(token)
    return found


_BLANK_RUN = re.compile(r"\S+")  # the words of ``str.split()``, found one at a time


def has_specific(text: str) -> bool:
    """``bool(specific_tokens(text))``, read no further than the first specific token."""
    if not hinted(text):
        return False
    for index, found in enumerate(_BLANK_RUN.finditer(text)):
        raw = found.group()
        word = raw.strip(_EDGE)
        if not word or (word.islower() and word.isalpha()):
            continue
        if (
            _TOKEN_SPECIFIC.fullmatch(word)
            or (index and _NAME.fullmatch(word) and not raw.startswith(("(", "[", '"', "'")))
        ) and word.strip("`\"'"):
            return True
    return False


def each_specific_token(text: str) -> Iterator[str]:
    """The tokens of :func:`specific_tokens`, one at a time: a caller that stops early reads
    no further."""
    if not hinted(text):
        return
    for index, found in enumerate(_BLANK_RUN.finditer(text)):
        raw = found.group()
        word = raw.strip(_EDGE)
        if not word or (word.islower() and word.isalpha()):
            continue
        if _TOKEN_SPECIFIC.fullmatch(word) or (
            index and _NAME.fullmatch(word) and not raw.startswith(("(", "[", '"', "'"))
        ):
            token = word.strip("`\"'")
            if token:
                yield token


def specific_count(text: str) -> int:
    """How many specific tokens ``text`` holds (at most 4)."""
    return min(4, len(specific_tokens(text)))


def norm(text: str) -> str:
    """Lower case, blanks collapsed, edge punctuation off: how values are compared."""
    return " ".join(text.lower().split()).strip(" .,;:!?'\"`")


# -- statements ---------------------------------------------------------------------------------

LABEL = re.compile(r"^[A-Za-z][\w ]{0,40}?:\s+(?=\S)")
"""A label that leads a statement (``Update: …``, ``Arguments: …``): up to its blanks."""
_IS_FACT = re.compile(
    r"^(?P<key>[A-Za-z$`\"'][^.!?]{1,80}?)\s+(?:is|are|was|were|will be|should be|becomes|"
    r"stays|remains|equals|=|moved to|changed to|goes to|lives in|runs on)\s+"
    r"(?:now\s+|still\s+|set to\s+|at\s+)?(?P<value>\S.*)$"
)
_SET_FACT = re.compile(
    rf"^(?:please\s+)?(?:[A-Za-z]+\s+)?(?:{'|'.join(sorted(SET_VERBS))}|"
    r"changed|moved|bumped|raised|lowered|switched|updated|made|pinned)\s+"
    r"(?P<key>[^.!?]{2,60}?)\s+(?:to|=)\s+(?P<value>\S.*)$",
    re.IGNORECASE,
)
_USE_FACT = re.compile(
    r"^(?:please\s+)?(?:use|pick|choose)\s+(?P<value>[^.!?]{1,60}?)\s+for\s+(?P<key>\S.{1,60})$",
    re.IGNORECASE,
)
_COLON_FACT = re.compile(r"^(?P<key>[A-Za-z`\"'][^:=.!?]{1,80}?)\s*(?::|=)\s+(?P<value>\S.*)$")
_HAS_ALNUM = re.compile(r"[^\W_]")  # a letter or a digit
_NOT_KEY = frozenset(
    """i we you it this that there he she they what which who how why""".split()  # noqa: SIM905
)


class Fact(NamedTuple):
    """A ``key → value`` statement."""

    key: str  # normalised: content words, sorted (word order does not matter)
    value: str


def _key(raw: str) -> str:
    words = [w for w in _WORD.findall(raw.lower()) if w not in _KEY_DROP]
    return " ".join(sorted(set(words)))


def fact_of(sentence: str) -> Fact | None:
    """The ``key → value`` a sentence states, or ``None``.

    Forms: ``key: value``, ``key = value``, ``key is value`` (``X for Y is Z``: the key is
    ``X for Y``), ``set key to value``, ``use value for key``; a leading label (``Update:``) is
    read past. The key has at most eight words and does not open with a pronoun.
    """
    text = sentence.strip().rstrip(".!")
    for body in _bodies(text):
        for pattern in _patterns(body):
            match = pattern.match(body)
            if match is None:
                continue
            raw_key = _subject(match.group("key"))
            words = raw_key.split()
            if not words or len(words) > 8 or words[0].lower() in _NOT_KEY:
                continue
            key = _key(raw_key)
            value = match.group("value").strip()
            if pattern is _COLON_FACT and _statement(value):
                continue
            if key and value and _HAS_ALNUM.search(value):
                return Fact(key, value)  # (a value of marks alone is code: ``x = () => {``)
    return None


_JOINS = (
    " is ",
    " are ",
    " was ",
    " were ",
    " will be ",
    " should be ",
    " becomes ",
    " stays ",
    " remains ",
    " equals ",
    " = ",
    " moved to ",
    " changed to ",
    " goes to ",
    " lives in ",
    " runs on ",
)
_JOIN = re.compile("|".join(map(re.escape, _JOINS)))  # any of them, in one C-level pass
_SET_HEADS = frozenset(
    """please set change move bump raise lower switch update make changed moved bumped raised
    lowered switched updated made pinned""".split()  # noqa: SIM905
)
_TRAILING = re.compile(r"[\s,:;-]+(?:it|they|this|that)?[\s,:;-]*$", re.IGNORECASE)


def _subject(raw_key: str) -> str:
    """A key read past what leads to it: what a dash or a semicolon ends is another clause
    (``almost done — this is …``: the key is ``this``, no key), a trailing pronoun (``the relay,
    it is …``) goes, and a key of more than eight words keeps its last clause, at most its last
    six words (``a small fix to what I said about the relay: it is …`` → ``said about the
    relay``)."""
    for separator in (" \u2014 ", " \u2013 ", "; "):  # a clause of its own: its subject next
        if separator in raw_key:
            raw_key = raw_key.rsplit(separator, 1)[1]
    key = _TRAILING.sub("", raw_key) or raw_key
    words = key.split()
    if len(words) <= 8:
        return key if len(words) > 1 or key == raw_key else raw_key
    clause = (re.split(r"[,:;]", key)[-1].split() or words)[-6:]
    while len(clause) > 1 and (clause[0].lower() in _NOT_KEY or clause[0].lower() in _OPENERS):
        del clause[0]
    return " ".join(clause)


_USE_HEADS = frozenset(["please", "use", "pick", "choose"])


def _patterns(body: str) -> list[re.Pattern[str]]:
    """The fact patterns that can match ``body`` (cheap substring tests first)."""
    head = body[: body.find(" ")].lower() if " " in body else ""
    words = body.split(None, 2) if head else []  # (``Fix .`` is one word once its mark is off)
    second = words[1].lower() if len(words) > 1 else ""
    out = []
    if head in _SET_HEADS or second in _SET_HEADS:
        out.append(_SET_FACT)
    if head in _USE_HEADS:
        out.append(_USE_FACT)
    if _JOIN.search(body) is not None:
        out.append(_IS_FACT)
    if ":" in body or "=" in body:
        out.append(_COLON_FACT)
    return out


def _statement(value: str) -> bool:
    """Whether what follows a colon is a statement of its own (``Change of plan: build the
    JSON exporter``), not a value: four words or more, opening with a lower-case word that is
    not grammar."""
    words = value.split(None, 4)
    first = words[0] if words else ""
    return len(words) >= 4 and first.isalpha() and first.islower() and first not in _OPENERS


def _bodies(text: str) -> tuple[str, ...]:
    label = LABEL.match(text) if ":" in text else None
    return (text[label.end() :], text) if label else (text,)


def template_key(sentence: str) -> str:
    """A statement with its values taken out: two statements of one template with different
    values are one rule at two times (``under 30 seconds`` → ``under 45 seconds``). A value is
    a word that is not all letters (a number, a path, an identifier, a price)."""
    words = [
        w
        for w in bare(sentence.lower()).split()
        if w.replace("'", "").isalpha() and w not in FILLER
    ]
    return "rule:" + " ".join(words)


def shorten(sentence: str) -> str:
    """``sentence`` without its label and filler words: every identifier, number, negation and
    condition stays."""
    text = sentence
    label = LABEL.match(text)
    if label and len(text[label.end() :].split()) >= 3:
        text = text[label.end() :]
    kept = [w for w in text.split() if w.lower().strip(",;") not in FILLER]
    out = " ".join(kept)
    return out if len(out) < len(sentence) else sentence


_TOKEN_EDGE = "()[]{}<>,;:!?.\u2026`\"'"


def stale_tokens(old: str, new: str) -> set[str]:
    """The specific tokens of an old value the new one no longer has (at least 3 characters or
    not only digits, so a stray ``2`` never hides a sentence; never a word of grammar, so a
    capitalised ``The`` read as a name where a sentence was not split never hides every
    sentence that says "the")."""
    keep = {t.lower() for t in specific_tokens(new)}
    stale = {
        t.lower()
        for t in specific_tokens(old)
        if t.lower() not in keep and (len(t) >= 3 or not t.isdigit())
    }
    return stale - _GRAMMAR


def carries_stale(text: str, stale: set[str]) -> bool:
    """Whether ``text`` holds a stale value (as a whole token)."""
    if not stale:
        return False
    return not stale.isdisjoint(map(str.strip, text.lower().split(), repeat(_TOKEN_EDGE)))


def whole_words(text: str, limit: int) -> str:
    """``text``, or, when it is longer than ``limit`` characters, its words that fit in
    ``limit`` with " …" after them (a text without a space in them is cut at ``limit``)."""
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit - 1)
    return (text[:cut] if cut > 0 else text[: limit - 2]) + " …"

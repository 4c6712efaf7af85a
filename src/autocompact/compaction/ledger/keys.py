"""What a statement is about: its subject as a set of key words, and when two share one. Pure.

Supersession needs the subject of a statement recognised however it is worded. The key words of
a text are its words lower-cased, possessives and plurals folded (``runners`` → ``runner``,
``team's`` → ``team``), with grammar (determiners, pronouns, auxiliaries, prepositions), filler
and values (numbers, paths, identifiers) dropped; as a set, word order does not matter, so
``the X for Y``, ``Y's X``, ``X of Y`` and ``Y X`` have one key. Two statements are about the
same subject when their key words share two words, or one word and their values have the same
shape (``pg-a-12.internal`` and ``pg-b-7.internal``: letters, digits and marks in one order).
The word sets here are closed classes of grammar, never a list of subjects.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from itertools import repeat

from autocompact.compaction.ledger.text import FILLER, GRAMMAR

__all__ = ["KeyWords", "key_words", "named", "rule_key", "same_subject", "shape", "shapes"]

# Closed classes a key never holds, besides ``text``'s grammar: prepositions and particles,
# adverbs of time and degree, and the verbs of saying and changing that open an update.
_STOP = (
    frozenset(
        """about above across after against along among around at before behind below beneath
    beside between beyond by down during except for from in inside into near of off on onto
    out outside over past per since through throughout till to toward towards under until up
    upon via with within without these those days week weeks morning today tonight yesterday
    tomorrow ago again earlier later before said say says told tell changed change changes
    moved move moves bumped bump set sets updated new old fix small heads what when which who
    whom whose where why how it's its it they them their there here is are was were be been
    being am has have had do does did will would can could may might shall should must""".split()  # noqa: SIM905
    )
    | FILLER
)
_DROP = _STOP | GRAMMAR | {""}
_EDGE = "()[]{}<>,;:!?.\u2026`\"'*"
# (Read only in a token in ASCII, where ``\d`` is ``0-9``: written so, its class is a table.)
_VALUE = re.compile(r"[0-9/_@=#$\\]|[a-z]\.[a-z]")
_TWO_LETTERS = re.compile(r"[A-Za-z][^A-Za-z]*[A-Za-z]")
_MEASURE = re.compile(r"[$€£]?[\d.,]+[a-zA-Z%]{0,3}")
_MEASURE_ASCII = re.compile(r"[$€£]?[0-9.,]+[a-zA-Z%]{0,3}")  # (the same, in a token in ASCII)
_MAX_NAMES = 8
_RICH = re.compile(r"[a-z].*\d|\d.*[a-z]|[/@._-]")


def _fold(word: str) -> str:
    word = word.strip("'-")
    if word.endswith("'s"):
        word = word[:-2]
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is", "as")):
        return word[:-1]
    return word


def key_words(text: str) -> frozenset[str]:
    """The key words of ``text`` (module docstring)."""
    # Each distinct word once, grammar taken out in C (the result is a set: order is no matter).
    found = {raw.strip(_EDGE) for raw in text.lower().split()} - _DROP
    # Most are plain words (letters only, no plural or possessive to fold): kept as they are.
    words = {word for word in found if word.isalpha() and word[-1] != "s" and len(word) >= 2}
    words.update(filter(None, map(_key_word, found - words)))  # the rest, one at a time
    return frozenset(words)


def _key_word(token: str) -> str | None:
    """The key word of one token of :func:`key_words` (lower-cased, edges stripped), if any."""
    if token in _DROP:
        return None
    if token.isalpha() and token[-1] != "s" and len(token) >= 2:
        return token
    if not token.isalpha() and (_VALUE.search(token) or not token.isascii()):
        return None  # a value (a number, a path, an identifier), not a key word
    if token.endswith("'s"):
        token = token[:-2]
    folded = _fold(token) if token.endswith("s") or "'" in token else token
    return folded if len(folded) >= 2 and folded not in _DROP else None


class KeyWords:
    """:func:`key_words` over many texts, each distinct word read once: the texts of one
    session say the same words again and again (a call's memory, dropped with it)."""

    __slots__ = ("_of",)

    def __init__(self) -> None:
        self._of: dict[str, str | None] = {}

    def __call__(self, text: str) -> frozenset[str]:
        """``key_words(text)``."""
        tokens = set(map(str.strip, text.lower().split(), repeat(_EDGE)))
        of = self._of
        for token in tokens.difference(of):  # (a set less a dict: its members looked up)
            of[token] = _key_word(token)
        # (``filter(None, …)`` leaves out the tokens without a key word: their ``None``.)
        return frozenset(filter(None, map(of.__getitem__, tokens)))


_LETTERS = re.compile(r"[A-Za-z]+")
_DIGITS = re.compile(r"\d+")


def shape(value: str) -> str:
    """A value with each run of letters written ``a`` and each run of digits ``9``."""
    return _DIGITS.sub("9", _LETTERS.sub("a", value))


def shapes(values: Iterable[str]) -> frozenset[str]:
    """The shapes of the values that are rich enough to tell a kind of value (letters and
    digits together, or a path, an address or a dotted name); a bare number tells nothing."""
    return frozenset(shape(v) for v in values if _RICH.search(v.lower()))


def same_subject(
    words: frozenset[str],
    value_shapes: frozenset[str],
    other_words: frozenset[str],
    other_shapes: frozenset[str],
) -> bool:
    """Whether two statements are about one subject (module docstring)."""
    shared = len(words & other_words)
    return shared >= 2 or (shared >= 1 and not value_shapes.isdisjoint(other_shapes))


def rule_key(sentence: str, words: frozenset[str] | None = None) -> str:
    """A rule with its quantities taken out: two rules of one template with other numbers are
    one rule at two times (``under 30 seconds`` → ``under 45 seconds``), but an identifier
    (a path, a name with digits) is what a rule is about, so it stays in the key (``leave
    lib/a-1 alone`` and ``leave lib/b-2 alone`` are two rules). ``words``: its key words, when
    known."""
    names: list[str] = []
    for word in sentence.split():
        if not word.isalpha() and named(token := word.strip(_EDGE)):
            names.append(token.lower())
            if len(names) == _MAX_NAMES:
                break  # a few names tell two rules apart
    if words is None:
        words = key_words(sentence)
    return "rule:" + " ".join(sorted(words)) + "|" + " ".join(sorted(names))


def named(token: str) -> bool:
    """Whether a specific token names something (letters in it) rather than measures it
    (a number, a price, a percentage, a version, a number with a unit)."""
    if token.isascii():
        if token.isalpha():  # (ASCII letters only: two of them, and no digit to measure)
            return len(token) >= 2
        if _TWO_LETTERS.search(token) is None:
            return False
        return _MEASURE_ASCII.fullmatch(token) is None
    return _TWO_LETTERS.search(token) is not None and _MEASURE.fullmatch(token) is None

"""The subject index of the ledger's statements: which earlier statement a new fact supersedes.

Statements with a value are indexed by their key words; a new fact looks up the earlier ones
that share its subject (:func:`~autocompact.compaction.ledger.keys.same_subject`) and hold
another value. Those said to have changed (``news``) have postings of their own, so a statement
is checked against them without reading every posting of its words. Pure.
"""

from __future__ import annotations

from autocompact.compaction.ledger.keys import key_words, shapes
from autocompact.compaction.ledger.model import Entry
from autocompact.compaction.ledger.text import hinted, marked_tokens, norm, stale_tokens

__all__ = ["Subjects"]

_POSTINGS = 64


class _Record:
    """A statement in the index: its key words; its value shapes and normal form on demand."""

    __slots__ = ("_normal", "_shapes", "entry", "words")

    def __init__(self, entry: Entry, words: frozenset[str]) -> None:
        self.entry, self.words = entry, words
        self._shapes: frozenset[str] | None = None
        self._normal: str | None = None

    def shapes(self) -> frozenset[str]:
        if self._shapes is None:
            self._shapes = shapes(marked_tokens(self.entry.value or self.entry.text))
        return self._shapes

    def normal(self) -> str:
        if self._normal is None:
            self._normal = norm(self.entry.value or self.entry.text)
        return self._normal


class Subjects:
    """The statements with a value so far, by key word: a new fact supersedes those about its
    subject (:func:`~autocompact.compaction.ledger.keys.same_subject`) that hold another value.
    A word of many statements is no subject (it is not looked up past :data:`_POSTINGS`)."""

    __slots__ = ("by_word", "changed", "gone", "judged", "news")

    def __init__(self) -> None:
        self.changed = 0  # how many facts of this part say their value changed
        self.by_word: dict[str, list[_Record]] = {}
        self.news: dict[str, list[_Record]] = {}  # the postings of those facts alone
        # By id, with the entry held: a dropped entry's id is never reused by a new one (a
        # replaced rule is freed, and CPython gives its memory to the next entry made).
        self.gone: dict[int, Entry] = {}
        # The last statement judged, with its value's shapes and normal form: it is most often
        # the one indexed next, whose record then needs not read them again.
        self.judged: tuple[Entry, frozenset[str], str] | None = None

    def drop(self, entry: Entry) -> None:
        """Mark ``entry`` superseded (kept out of the ledger)."""
        self.gone[id(entry)] = entry

    def add(self, entry: Entry, words: frozenset[str] | None = None) -> None:
        """Index ``entry`` (``words``: its key words, when known) if it may hold a value."""
        if not hinted(entry.value or entry.text):
            return
        if words is None:  # a fact's key is its subject; a rule's key is a template
            words = key_words(entry.key if entry.value else entry.text)
        record = _Record(entry, words)
        judged = self.judged
        if judged is not None and judged[0] is entry:
            record._shapes, record._normal = judged[1], judged[2]
        news = entry.mark == "changed" and entry.position > 0
        self.changed += news
        by_word = self.by_word
        for word in words:
            postings = by_word.get(word)
            if postings is None:
                by_word[word] = [record]
            elif len(postings) < _POSTINGS:
                postings.append(record)
            else:
                continue  # a word of many statements: no more postings
            if news:
                self.news.setdefault(word, []).append(record)

    def outdated(self, entry: Entry, stale: set[str], words: frozenset[str]) -> bool:
        """Whether ``entry`` states a value of a subject that a fact of this part says has
        changed (said before it): it is then older news, its values go to ``stale``."""
        if not self.changed or not entry.text or self.news.keys().isdisjoint(words):
            return False  # (a word without postings of news finds none of them)
        news = self.matches(entry, words, self.news)  # only the changed facts are judged
        if not news:
            return False
        self.drop(entry)
        stale.update(stale_tokens(entry.text, news[-1].value))
        return True

    def matches(
        self,
        fact: Entry,
        words: frozenset[str] | None = None,
        among: dict[str, list[_Record]] | None = None,
    ) -> list[Entry]:
        """The earlier statements about the subject of ``fact`` (``words``: its key words, when
        known) that hold another value; ``among``: the postings judged (default all of them;
        a word of too many statements is skipped all the same)."""
        if words is None:
            words = key_words(fact.key or fact.text)
        value_shapes: frozenset[str] | None = None
        new = ""
        out: list[Entry] = []
        by_word, gone = self.by_word, self.gone
        judged: set[_Record] = set()  # a record under two of the words is judged once
        for word in words:
            postings = by_word.get(word)
            if not postings or len(postings) >= _POSTINGS:
                continue  # a word of many statements names no one subject
            # Each record under ``word`` shares it: it shares two words when it holds another.
            others = words - {word}
            for record in postings if among is None else among.get(word, ()):
                if record in judged:
                    continue
                judged.add(record)
                entry = record.entry
                if id(entry) in gone:
                    continue
                if value_shapes is None:
                    value_shapes = shapes(marked_tokens(fact.value or fact.text))
                    new = norm(fact.value or fact.text)
                    self.judged = (fact, value_shapes, new)
                # same_subject inlined, the value shapes read only when one word is shared
                # and the new value has any
                if (
                    (
                        not others.isdisjoint(record.words)
                        or (value_shapes and not value_shapes.isdisjoint(record.shapes()))
                    )
                    and new not in record.normal()
                    and entry not in out
                ):
                    out.append(entry)
        return out

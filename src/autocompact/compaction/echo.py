"""Is a summary an echo? (SPEC §10.8, second half.) Pure.

A small model asked for a ``<state_snapshot>`` may answer with the instruction it was given
("Write the <state_snapshot> for the conversation above now."), with the acknowledgement that
follows a summary, with the system prompt, or with the summary prompt's own template. Such a
reply would replace thousands of tokens of conversation with nothing of it: measured on a 270M
model served by llama.cpp, all 12 "successful" compactions of a session were echoes.

The test is on words: the share of the reply's words that sit inside a run of
:data:`RUN_WORDS` consecutive words found in one of the texts it might echo. A summary that
quotes a sentence of the prompt is still mostly its own words; an echo is mostly theirs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["ECHO_SHARE", "RUN_WORDS", "echo_source"]

RUN_WORDS = 4
"""How many consecutive words must match for a word to count as echoed."""

ECHO_SHARE = 0.6
"""A reply whose echoed share of words reaches this is an echo, not a summary."""

_WORD = re.compile(r"\w+")
_SENTENCE_END = re.compile(r"[.!?\n]+")


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _covered(words: list[str], text: str) -> list[bool]:
    """Which of ``words`` sit in a run of :data:`RUN_WORDS` words also found in ``text``."""
    covered = [False] * len(words)
    if len(words) < RUN_WORDS:
        # Too short for runs: an echo when the reply is one whole sentence of the text.
        sentences = {tuple(_words(s)) for s in _SENTENCE_END.split(text)}
        return [tuple(words) in sentences] * len(words)
    reference = _words(text)
    runs = {tuple(reference[i : i + RUN_WORDS]) for i in range(len(reference) - RUN_WORDS + 1)}
    for i in range(len(words) - RUN_WORDS + 1):
        if tuple(words[i : i + RUN_WORDS]) in runs:
            for j in range(i, i + RUN_WORDS):
                covered[j] = True
    return covered


def echo_source(summary: str, sources: Mapping[str, str | None]) -> str | None:
    """The name of the text ``summary`` mostly echoes, or ``None`` when it is its own.

    Args:
        summary: the side query's reply.
        sources: what it might echo, by name ("the summary prompt", "the system prompt"...);
            empty or ``None`` texts are skipped.

    Returns:
        The name of the source that covers the most words, when the words covered by all the
        sources together reach :data:`ECHO_SHARE` of the reply; else ``None``.
    """
    words = _words(summary)
    if not words:
        return None
    any_covered = [False] * len(words)
    best: tuple[int, str] | None = None
    for name, text in sources.items():
        if not text:
            continue
        covered = _covered(words, text)
        count = sum(covered)
        if count and (best is None or count > best[0]):
            best = (count, name)
        any_covered = [a or b for a, b in zip(any_covered, covered, strict=True)]
    if best is None or sum(any_covered) < ECHO_SHARE * len(words):
        return None
    return best[1]

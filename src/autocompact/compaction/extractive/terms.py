"""Key terms and middle shortening: names, paths and numbers a summary must not lose. Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["key_terms", "shorten_middle"]

# Text is first split into tokens (linear), then each short token is searched for terms, so
# no pattern ever backtracks over a long run of characters.
_TOKEN = re.compile(r"`[^`\n]{1,80}`|[^\s=,;()\[\]{}<>\"'`|]+")
_TERM_HINT = re.compile(r"[\d/._A-Z-]")  # plain lower-case words hold no term
_MAX_TOKEN = 120  # longer tokens are data (base64, hashes, minified code), not terms
_KEY_TERM = re.compile(
    r"(?:~|\.{1,2})?/?[\w.@+-]+(?:/[\w.@+-]+)+/?"  # paths
    r"|\b[\w-]+(?:\.\w+)+\b"  # file names, dotted names, versions
    r"|^--?[A-Za-z][\w-]*"  # command-line flags
    r"|\b[A-Za-z]+[a-z0-9]*_\w+\b|\b_\w+\b"  # snake_case and _private
    r"|\b[a-z]+[A-Z]\w*\b|\b[A-Z][a-z0-9]+[A-Z]\w*\b"  # camelCase, PascalCase
    r"|\b[A-Z][A-Z0-9_]{2,}\b"  # CONSTANTS, acronyms
    r"|\b\d[\d,_.:]*\b"  # numbers
)


def _term_spans(text: str) -> tuple[tuple[int, int, str], ...]:
    """Every key term of ``text`` with its start and end, in order."""
    spans: list[tuple[int, int, str]] = []
    for token in _TOKEN.finditer(text):
        word = token.group(0)
        if word.startswith("`"):
            spans.append((token.start(), token.end(), word.strip("`")))
            continue
        if len(word) > _MAX_TOKEN or not _TERM_HINT.search(word):
            continue
        for match in _KEY_TERM.finditer(word):
            term = match.group(0).rstrip(".,:")
            if term:
                spans.append((token.start() + match.start(), token.start() + match.end(), term))
    return tuple(spans)


def _unique(terms: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(terms))


def key_terms(text: str) -> list[str]:
    """The key terms of ``text``, in order of first appearance, each once.

    Key terms are what a summary must not lose: backticked code, paths and file names, dotted
    names, command-line flags, snake_case / camelCase / PascalCase identifiers, CONSTANTS and
    numbers.
    """
    return _unique(term for _, _, term in _term_spans(text))


def shorten_middle(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters by removing its middle.

    The head and the tail are kept, and the key terms of the removed middle that do not appear
    in them are listed in the marker, so names and numbers survive. The result is at most
    ``limit`` characters plus a marker of at most 60 characters.
    """
    if len(text) <= limit:
        return text
    limit = max(limit, 20)
    keep = limit * 2 // 3
    head_end, tail_start = keep * 3 // 5, len(text) - keep * 2 // 5
    kept = text[:head_end] + text[tail_start:]
    middle_terms = _unique(
        term for start, end, term in _term_spans(text) if start >= head_end and end <= tail_start
    )
    mention_cap = limit - keep
    terms: list[str] = []
    used = 0
    for term in middle_terms:
        if term in kept:
            continue
        if used + len(term) + 2 > mention_cap:
            break
        terms.append(term)
        used += len(term) + 2
    keep = limit - used
    head, tail = text[: keep * 3 // 5], text[len(text) - keep * 2 // 5 :]
    omitted = len(text) - len(head) - len(tail)
    mentions = f"; mentions {', '.join(terms)}" if terms else ""
    return f"{head} [… {omitted:,} chars cut{mentions} …] {tail}"

"""An agent's own summary of an earlier part, or its request for one, met in a history (a session
the client compacted before it came through autocompact, a replayed log). Pure.

Claude Code's summary is a user message that opens with "This session is being continued from a
previous conversation" and is cut into numbered sections after a ``Summary:`` line. Two of them
hold what the user asked ("Primary Request and Intent", "All user messages"): those are the
user's words. The others (concepts, files, errors, pending tasks, current work, next step) and
the analysis before them are the state of the work as a model wrote it: notes and facts, never
the user's rules or a change of goal. Codex's summary, under its fixed preamble, has no sections:
all of it is the work's state (Codex keeps the user's own messages beside it).

The request for a summary (Claude Code's ``/compact`` prompt, Codex's checkpoint prompt, as a
replayed side query holds it) is the summarizer's task: none of it is the user's rule or goal.
What the user added to it (Claude Code's ``/compact <focus>``, a PreCompact hook's output, after
an "Additional Instructions:" line) is a focus for that summary, which was written: it is let go
with the rest (the hook's context comes back after the compaction, where a hook gives it).
"""

from __future__ import annotations

import re

__all__ = ["OPENING", "is_foreign_summary", "is_summary_request", "summary_sections"]

OPENING = "This session is being continued from a previous conversation"
_CODEX = "Another language model started to solve this problem"  # its summary's preamble
_REQUEST = re.compile(
    r"\s*(?:your task is to create a detailed summary of the conversation so far"  # Claude Code
    r"|you are performing a context checkpoint compaction)",  # Codex
    re.IGNORECASE,
)
_SUMMARY = re.compile(r"^Summary:[ \t]*$", re.M)
_SECTION = re.compile(r"^\d{1,2}\. ([^\n]{3,80}?):[ \t]*$", re.M)
_USERS = re.compile(r"\buser\b|\brequest\b", re.I)  # "All user messages", "Primary Request"


def is_foreign_summary(text: str) -> bool:
    """Whether a user message's text is Claude Code's or Codex's summary of an earlier part."""
    return text.lstrip().startswith((OPENING, _CODEX))


def is_summary_request(text: str) -> bool:
    """Whether a user message's text (its harness blocks taken out) opens with an agent's
    request for its own summary."""
    return _REQUEST.match(text) is not None


def summary_sections(text: str) -> list[tuple[bool, str]]:
    """The pieces of such a summary in order, each with whether it holds the user's own words
    (a section titled for the user's messages or request) or the state of the work (the rest,
    the analysis before ``Summary:`` included)."""
    found = _SUMMARY.search(text)
    start = found.end() if found is not None else 0
    pieces: list[tuple[bool, str]] = []
    at, users = 0, False
    for section in _SECTION.finditer(text, start):
        pieces.append((users, text[at : section.start()]))
        at, users = section.end(), _USERS.search(section.group(1)) is not None
    pieces.append((users, text[at:]))
    out: list[tuple[bool, str]] = []
    for own, piece in pieces:
        if piece.strip():
            out += _quoted(_dedented(piece)) if own else [(False, _dedented(piece))]
    return out


# A list item of the user's messages: a quote, the summarizer's comment in brackets after it, or
# a comment alone ("- (interrupted the long compile)").
_COMMENTED = re.compile(r'^([ \t]*[-*] )(?:(".*")[ \t]*)?\(([^()\n]*)\)[ \t]*$', re.M)


def _quoted(piece: str) -> list[tuple[bool, str]]:
    """A section of the user's words with the summarizer's comments on them (in brackets after
    a quoted message) taken out as the work's state: ``- "check again" (asking to re-check the
    tests)`` is the user's "check again", and the rest is what the model made of it."""
    comments: list[str] = []

    def own(found: re.Match[str]) -> str:
        comments.append(found.group(1) + found.group(3))
        return found.group(1) + found.group(2) if found.group(2) else ""

    said = _COMMENTED.sub(own, piece)
    return [(True, said), (False, "\n".join(comments))] if comments else [(True, piece)]


def _dedented(piece: str) -> str:
    """A section's text with the indent of its first line taken off every line that has it
    (Claude Code indents a section's prose under its numbered heading, which is not part of the
    piece; what follows the last section, less indented, is left as it is)."""
    lines = piece.split("\n")
    first = next(line for line in lines if line.strip())
    indent = len(first) - len(first.lstrip(" "))
    return "\n".join(line[min(indent, len(line) - len(line.lstrip(" "))) :] for line in lines)

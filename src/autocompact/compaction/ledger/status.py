"""Task status: what the tool calls show finished, the latest todo list, the next step. Pure.

Finished work is read from what succeeded, not from what was said: a ``git commit`` whose
output names the new commit (``[branch 1a2b3c4] subject``), and a command that closes tracked
items (a tracker's ``close`` / ``done`` / ``complete`` / ``finish`` / ``resolve`` subcommand
with the items' ids as arguments: ``bd close proj-1.2``, ``gh issue close 12``). Each becomes a
``[DONE]`` entry; an item a tracker marks in progress (``--status in_progress``) is an ``[IN
PROGRESS]`` entry until finished work names it; with the latest todo list (a ``TodoWrite`` call:
done, in progress, to do) they are the status section. Entries an earlier summary carried stay,
the latest :data:`MAX_DONE` of the finished ones.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from autocompact.compaction.ledger.model import Entry, Ledger
from autocompact.compaction.ledger.text import whole_words

__all__ = [
    "DONE",
    "MAX_DONE",
    "PROGRESS",
    "finished",
    "next_step",
    "reply_text",
    "started",
    "status_entries",
]

DONE = "DONE"
PROGRESS = "IN PROGRESS"
MAX_DONE = 12
"""Finished items a ledger keeps (the latest)."""
_SEGMENTS = re.compile(r"&&|\|\||;|\|")
_COMMIT = re.compile(r"\bgit\s+(?:-C\s+\S+\s+)?commit\b")
_COMMIT_LINE = re.compile(r"^\[[^\]\n]*?\b([0-9a-f]{7,40})\] (.+)$", re.MULTILINE)
_MESSAGE = re.compile(r"""\s-m\s*(?:"([^"$]+)"|'([^']+)')""")
# The subcommands of a tracker that mark items finished (a closed class of the trackers' verbs).
_CLOSING = frozenset({"close", "done", "complete", "finish", "resolve"})
_ID = re.compile(r"^#?[A-Za-z0-9][\w.#/-]*$")
_MAX_IDS = 8
_NEXT_KEY = re.compile(r"\bnext\b")
_PRINTERS = frozenset({"echo", "printf", "grep", "rg"})  # they print or search the words
_SAID = 200
"""Characters of a request or a reply the next step quotes."""
# Lines of a reply that are Markdown's layout, not its words: a heading (``## Results``), a
# table's row (``| id | task |``), and an interjection that opens it (``Perfect!``).
_LAYOUT = re.compile(r"#{1,6}(?:[ \t]|$)|\||[A-Z][a-z]+!$")
# A numbered heading (``### 1. Results``), which the sentence splitter cuts after its number.
_NUMBERED_HEADING = re.compile(r"#{1,6}[ \t]+\d{1,3}[.)]$")


def finished(command: str, output: str) -> list[tuple[str, str]]:
    """``(key, line)`` for each piece of finished work a successful ``command`` shows."""
    out: list[tuple[str, str]] = []
    if "commit" in command and _COMMIT.search(command):  # (a substring search first, in C)
        line = _COMMIT_LINE.search(output[:2_000])
        if line is not None:
            out.append((f"commit:{line.group(1)}", f"committed {line.group(1)}: {line.group(2)}"))
        else:
            message = _MESSAGE.search(command)
            if message is not None:
                subject = (message.group(1) or message.group(2)).strip().splitlines()[0]
                out.append((f"commit:{subject}", f"committed: {subject}"))
    lower = command.lower()
    if not any(verb in lower for verb in _CLOSING):
        return [(key, whole_words(text, 200)) for key, text in out]  # no closing subcommand
    for segment in _SEGMENTS.split(command):
        ids = _closed_ids(segment.split())
        if ids:
            out.append((f"closed:{' '.join(ids)}", f"closed {', '.join(ids)}"))
    return [(key, whole_words(text, 200)) for key, text in out]


def started(command: str) -> list[str]:
    """The ids a successful ``command`` marks in progress: a tracker's ``<sub> <ids>
    --status in_progress`` (an option ``--status`` or ``--state`` whose value says progress)."""
    out: list[str] = []
    if "--stat" not in command:
        return out  # neither option is given
    for segment in _SEGMENTS.split(command):
        words = segment.split()
        value = _option(words, ("--status", "--state"))
        if value is None or "progress" not in value.lower():
            continue
        ids = []
        for word in words[2:]:  # past the program and its subcommand
            if word.startswith("-") or ">" in word:
                break
            if _ID.match(word) and any(c.isdigit() or c in "-." for c in word):
                ids.append(word)
        out.extend(ids[:_MAX_IDS])
    return out


def _option(words: Sequence[str], names: tuple[str, ...]) -> str | None:
    """The value of the first of the options ``names`` in ``words`` (``--x v`` or ``--x=v``)."""
    for index, word in enumerate(words):
        name, eq, value = word.partition("=")
        if name in names:
            if eq:
                return value.strip("'\"")
            return words[index + 1].strip("'\"") if index + 1 < len(words) else None
    return None


def _closed_ids(words: Sequence[str]) -> list[str]:
    """The ids a tracker command closes: the arguments after a closing subcommand (the first
    or second word after the program), up to the first option or redirection."""
    words = [w for w in words if "=" not in w or w.startswith("-")]  # past ``VAR=x`` prefixes
    if not words or words[0] in _PRINTERS:
        return []
    for at in (1, 2):
        if len(words) > at and words[at].lower() in _CLOSING:
            ids = []
            for word in words[at + 1 :]:
                if word.startswith("-") or ">" in word or "<" in word:
                    break
                word = word.strip("'\"")
                if _ID.match(word) and any(c.isdigit() or c in "-." for c in word):
                    ids.append(word)
            return ids[:_MAX_IDS]
    return []


def status_entries(
    todos: Sequence[tuple[str, str]],
    todo_position: int,
    done: Sequence[Entry],
    seeded: Ledger,
) -> tuple[Entry, ...]:
    """The status section: the finished work carried and found (the latest :data:`MAX_DONE`),
    and the latest todo list (an earlier summary's when this part wrote none)."""
    todo_entries = [
        Entry(f"[{mark}] {text}", 0.0, todo_position + n, mark=mark)
        for n, (mark, text) in enumerate(todos)
    ]
    listed = {e.text for e in todo_entries}
    kept: dict[str, Entry] = {}
    for entry in seeded.status:
        if todos and entry.key != DONE:  # a todo list of this part replaces the carried one
            continue
        if entry.text not in listed:
            kept[entry.text] = entry
    for entry in done:
        kept[entry.text] = entry
    finished_ = sorted((e for e in kept.values() if e.key == DONE), key=lambda e: e.position)
    others = [e for e in kept.values() if e.key != DONE and not _closed_later(e, finished_)]
    return tuple(sorted([*others, *finished_[-MAX_DONE:], *todo_entries], key=lambda e: e.position))


def _closed_later(entry: Entry, finished_: Sequence[Entry]) -> bool:
    """Whether an item in progress is named by finished work after it (closed since)."""
    if entry.mark != PROGRESS:
        return False
    item = entry.text.removeprefix(f"[{PROGRESS}] ")
    named = re.compile(rf"(?<![\w.-]){re.escape(item)}(?![\w-]|\.\w)")
    return any(e.position > entry.position and named.search(e.text) for e in finished_)


def next_step(
    facts: dict[str, Entry],
    todos: Sequence[tuple[str, str]],
    todo_position: int,
    done: Sequence[Entry],
    user: Entry | None,
    reply: Entry | None,
) -> Entry | None:
    """An explicit ``next step: …`` fact, else the first open todo, else the item marked in
    progress since the latest user request (``user``) and not finished since (from ``done``),
    else that request when no reply followed it, else the last reply."""
    explicit = [e for k, e in facts.items() if _NEXT_KEY.search(k)]
    if explicit:
        latest = max(explicit, key=lambda e: e.position)
        return Entry(latest.value, 0.0, latest.position)
    pending = next(((m, t) for m, t in todos if m != DONE), None)
    if pending is not None:
        return Entry(f"Continue: {pending[1]}", 0.0, todo_position)
    finished_ = [e for e in done if e.key == DONE]
    working = [e for e in done if e.mark == PROGRESS and not _closed_later(e, finished_)]
    if working and (user is None or working[-1].position > user.position):
        item = working[-1].text.removeprefix(f"[{PROGRESS}] ")
        asked = "" if user is None else f" (the latest request: {whole_words(user.text, _SAID)})"
        return Entry(f"Continue {item}, in progress{asked}", 0.0, working[-1].position)
    if user is not None and (reply is None or user.position > reply.position):
        asked = whole_words(user.text, _SAID)
        return Entry(f"Continue with the latest request: {asked}", 0.0, user.position)
    if reply is not None:
        return Entry(f"Carry on after the last reply: {reply.text}", 0.0, reply.position)
    return None


def reply_text(lines: Sequence[str]) -> str:
    """What the next step quotes of a reply made of ``lines`` (its sentences): its words without
    Markdown's headings, tables and an opening interjection (all of it when that is all it
    holds), at most :data:`_SAID` characters ended on a whole word."""
    words = []
    heading = False  # the line before was a numbered heading's number: this is its title
    for line in lines:
        if not (heading or _LAYOUT.match(line)):
            words.append(line)
        heading = _NUMBERED_HEADING.match(line) is not None
    words = words or list(lines)
    return whole_words(" ".join(words), _SAID)

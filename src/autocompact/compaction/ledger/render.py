"""Write the ledger as a ``<state_snapshot>`` within a budget, and read one back. Pure.

The text is a compact frame: one ``heading:`` line a section (``goal:`` and ``next:`` inline),
one ``- item`` line an item, errors marked ``[open]`` / ``[fixed]``. Within the budget the items
are taken by rank: the goal, the constraints, the latest facts, the change of goal and the next
step first (most specific first), then status (the todo list), results and open errors, then
decisions, work finished, fixed errors and edited files, last the notes, files only read and
recent commands. An item that does not fit whole is shortened (its label and filler words
dropped, never a value, a negation or a condition); one that does not fit even so is left out,
never cut mid-word. :func:`parse_ledger`
reads the text back into a ledger (and a model's XML snapshot too), so the next compaction
updates it (SPEC §10.5).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from autocompact.compaction.ledger import tools
from autocompact.compaction.ledger.keys import rule_key
from autocompact.compaction.ledger.model import (
    ACTIONS,
    CONSTRAINTS,
    DECISIONS,
    ERRORS,
    FACTS,
    FILES,
    GOAL,
    GOAL_NOW,
    HEADINGS,
    NEXT,
    NOTES,
    RESULTS,
    STATUS,
    Entry,
    Ledger,
)
from autocompact.compaction.ledger.text import fact_of, shorten, specific_count
from autocompact.compaction.ledger.tokens import conservative_tokens

__all__ = ["FRAME", "OPEN", "parse_ledger", "render_ledger", "required_chars"]

OPEN, CLOSE = "<state_snapshot>", "</state_snapshot>"
FRAME = len(OPEN) + len(CLOSE) + 1
"""Characters of the snapshot's own opening and closing lines."""
_INLINE = frozenset({GOAL, NEXT})
_FRAME_TOKENS = conservative_tokens(OPEN + CLOSE) + 2
# Rank of each section's items (lower is kept first); errors and files depend on their mark.
_RANK = {
    GOAL: 0,
    CONSTRAINTS: 1,
    FACTS: 1,
    GOAL_NOW: 1,
    NEXT: 1,
    STATUS: 2,
    RESULTS: 2,
    DECISIONS: 3,
    NOTES: 4,
    ACTIONS: 5,
}


def _rank(section: str, entry: Entry) -> int:
    if section == ERRORS:
        return 2 if entry.mark == "open" else 3
    if section == FILES:
        return 4 if entry.mark == "read" else 3
    if section == STATUS and entry.mark == "DONE":
        return 3
    if entry.mark == "plain":
        return 3
    return _RANK[section]


def _line(section: str, entry: Entry, text: str) -> str:
    if section == ERRORS:
        return f"- [{entry.mark or 'open'}] {text}"
    return f"- {text}"


def _cost(section: str, line: str, opened: bool) -> int:
    if section in _INLINE:
        return len(section) + 2 + len(line) - 2 + 1
    return len(line) + 1 + (0 if opened else len(section) + 2)


def render_ledger(ledger: Ledger, budget: int, *, tokens: int | None = None) -> str:
    """The snapshot of ``ledger`` in at most ``budget`` characters (at least the frame) and,
    when ``tokens`` is given, at most that many tokens by
    :func:`~autocompact.compaction.ledger.tokens.conservative_tokens` (a newline one each)."""
    token_room = None if tokens is None else max(0, tokens - _FRAME_TOKENS)
    chosen, _ = _choose(ledger, max(0, budget - FRAME), token_room)
    out = [OPEN]
    for section in HEADINGS:
        lines = chosen.get(section)
        if not lines:
            continue
        if section in _INLINE:
            out.append(f"{section}: {lines[0][1][2:]}")
            continue
        out.append(f"{section}:")
        out.extend(line for _, line in sorted(lines))
    out.append(CLOSE)
    return "\n".join(out)


def required_chars(ledger: Ledger) -> int:
    """The characters the goal, the constraints and the latest facts need, shortened as a
    binding budget shortens them, with the frame: what a summary must have room for."""
    size = FRAME
    opened: set[str] = set()
    for section, entries in ((GOAL, ledger.sections()[GOAL]), (CONSTRAINTS, ledger.constraints)):
        for entry in entries:
            size += _cost(section, _line(section, entry, shorten(entry.text)), section in opened)
            opened.add(section)
    for entry in ledger.facts:
        size += _cost(FACTS, _line(FACTS, entry, shorten(entry.text)), FACTS in opened)
        opened.add(FACTS)
    return size


def _token_cost(section: str, line: str, opened: bool) -> int:
    if section in _INLINE:
        return conservative_tokens(f"{section}: {line[2:]}") + 1
    return conservative_tokens(line) + 1 + (0 if opened else conservative_tokens(section) + 2)


def _choose(
    ledger: Ledger, room: int, token_room: int | None = None
) -> tuple[dict[str, list[tuple[int, str]]], int]:
    candidates = [
        (_rank(section, entry), -entry.score, -entry.position, section, entry)
        for section, entries in ledger.sections().items()
        for entry in entries
    ]
    candidates.sort(key=lambda c: c[:3])
    chosen: dict[str, list[tuple[int, str]]] = {}
    used = used_tokens = 0
    for _, _, _, section, entry in candidates:
        opened = section in chosen
        for text in _forms(entry.text):
            line = _line(section, entry, text)
            cost = _cost(section, line, opened)
            if used + cost > room:
                continue
            if token_room is not None:
                token_cost = _token_cost(section, line, opened)
                if used_tokens + token_cost > token_room:
                    continue
                used_tokens += token_cost
            chosen.setdefault(section, []).append((entry.position, line))
            used += cost
            break
    return chosen, used


def _forms(text: str) -> Iterable[str]:
    yield text
    short = shorten(text)
    if short != text:
        yield short


# -- reading back ---------------------------------------------------------------------------------

_XML_SECTIONS = {
    "overall_goal": GOAL,
    "constraints": CONSTRAINTS,
    "key_knowledge": FACTS,
    "file_system_state": FILES,
    "errors_and_fixes": ERRORS,
    "current_plan": STATUS,
    "retained_from_history": "retained",
}
_HEADING = re.compile(r"^([a-z][a-z ]{1,20}):(?:\s(.*))?$")
_ERROR_MARK = re.compile(r"^\[(open|fixed)\]\s+")
_STATUS_MARK = re.compile(r"^\[(DONE|IN PROGRESS|TODO)\]")
_RAN = re.compile(r"^\S+ `([^`]+)` failed:")
_FILE = re.compile(r"^(?P<path>.+) \((?P<action>read|edited|written|deleted)\)$")


def parse_ledger(text: str) -> Ledger:
    """The ledger a snapshot holds (ours, or a model's XML one); positions are negative, older
    than anything that follows the snapshot."""
    start = text.find(OPEN)
    body = text[start + len(OPEN) :] if start >= 0 else text
    end = body.rfind(CLOSE)
    body = body[:end] if end >= 0 else body
    items: dict[str, list[str]] = {}
    section = ""
    for raw in body.splitlines():
        line = raw.strip()
        tag = re.fullmatch(r"</?(\w+)>(.*?)(?:</\w+>)?", line)
        if tag is not None:
            section = _XML_SECTIONS.get(tag.group(1), "") if not line.startswith("</") else ""
            line = tag.group(2).strip()
            if not line:
                continue
        heading = _HEADING.match(line) if not line.startswith("- ") else None
        if heading is not None and heading.group(1) in HEADINGS:
            section = heading.group(1)
            line = (heading.group(2) or "").strip()
            if not line:
                continue
        if line.startswith("- "):
            line = line[2:].strip()
        if section and line:
            items.setdefault(section, []).append(line)
    return _ledger_of(items)


def _ledger_of(items: dict[str, list[str]]) -> Ledger:
    position = -sum(map(len, items.values())) - 1

    def entries(section: str) -> list[tuple[int, str]]:
        nonlocal position
        out = []
        for line in items.get(section, ()):
            position += 1
            out.append((position, line))
        return out

    goal = entries(GOAL)
    goals = [Entry(t, _carried(t), p) for p, t in entries(GOAL_NOW)]
    rules = [_rule(t, p) for p, t in entries(CONSTRAINTS)]
    facts, notes = [], []
    for p, t in entries("retained"):
        fact = fact_of(t)
        if fact is None:
            rules.append(_rule(t, p))
        else:
            facts.append(Entry(t, _carried(t), p, fact.key, fact.value))
    for p, t in entries(FACTS):
        fact = fact_of(t)
        if fact is None:
            notes.append(Entry(t, _carried(t) - 4.0, p))
        else:
            facts.append(Entry(t, _carried(t), p, fact.key, fact.value))
    errors = []
    for p, t in entries(ERRORS):
        mark = _ERROR_MARK.match(t)
        state = mark.group(1) if mark else "open"
        t = t[mark.end() :] if mark else t
        ran = _RAN.match(t)
        key = tools.command_key(ran.group(1)) if ran else f"carried:{t}"
        kind = tools.kind_of(ran.group(1)) if ran else ""
        errors.append(Entry(t, 60.0, p, key, kind, state))
    files = []
    for p, t in entries(FILES):
        match = _FILE.match(t)
        if match is not None:
            files.append(Entry(t, 0.0, p, match.group("path"), mark=match.group("action")))
    status = []
    for p, t in entries(STATUS):
        mark = _STATUS_MARK.match(t)
        state = mark.group(1) if mark else "TODO"
        status.append(Entry(t, 0.0, p, "DONE" if state == "DONE" else "", mark=state))
    return Ledger(
        goal=Entry(" ".join(t for _, t in goal), 100.0, goal[0][0]) if goal else None,
        goal_changes=tuple(goals),
        constraints=tuple(rules),
        facts=tuple(facts),
        decisions=tuple(Entry(t, 5.0, p) for p, t in entries(DECISIONS)),
        status=tuple(status),
        results=tuple(Entry(t, 50.0, p, t.split(":", 1)[0]) for p, t in entries(RESULTS)),
        errors=tuple(errors),
        files=tuple(files),
        notes=tuple(notes) + tuple(Entry(t, _carried(t) - 4.0, p) for p, t in entries(NOTES)),
        actions=tuple(Entry(t, 5.0, p) for p, t in entries(ACTIONS)),
        next_step=next((Entry(t, 0.0, p) for p, t in entries(NEXT)), None),
    )


def _rule(text: str, position: int) -> Entry:
    mark = "" if specific_count(text) else "plain"
    return Entry(text, _carried(text), position, rule_key(text), mark=mark)


def _carried(text: str) -> float:
    """The score of an item an earlier summary kept: its specificity, and a bonus for having
    been chosen once (the earlier part's word counts are gone)."""
    return 2.0 * specific_count(text) + 4.0

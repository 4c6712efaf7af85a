"""The state ledger: a typed record of the work, section by section. Pure.

A :class:`Ledger` is what a summary must carry: the goal as stated and as changed, the user's
constraints and preferences, facts as *key → latest value*, decisions, task status, the latest
test / build / lint results, errors (open or fixed), files with their last action, the most
specific remaining sentences, and the next step. It is built by
:func:`autocompact.compaction.ledger.extract.build_ledger` and written (and read back) by
:mod:`autocompact.compaction.ledger.render`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

__all__ = [
    "ACTIONS",
    "CONSTRAINTS",
    "DECISIONS",
    "ERRORS",
    "FACTS",
    "FILES",
    "GOAL",
    "GOAL_NOW",
    "HEADINGS",
    "NEXT",
    "NOTES",
    "RESULTS",
    "STATUS",
    "Entry",
    "Ledger",
    "merged",
]

GOAL, GOAL_NOW, CONSTRAINTS, FACTS, DECISIONS = "goal", "goal now", "rules", "facts", "decisions"
STATUS, RESULTS, ERRORS, FILES, NOTES = "status", "results", "errors", "files", "notes"
ACTIONS, NEXT = "recent", "next"
HEADINGS = (
    GOAL,
    GOAL_NOW,
    CONSTRAINTS,
    FACTS,
    DECISIONS,
    STATUS,
    RESULTS,
    ERRORS,
    FILES,
    NOTES,
    ACTIONS,
    NEXT,
)
"""The sections, in the order a summary shows them."""


class Entry(NamedTuple):
    """One item of the ledger (a named tuple: a long history makes many).

    Attributes:
        text: the statement, verbatim (or the line a tool result gives).
        score: how specific it is: higher is kept first within its rank.
        position: its order in the history (newer is larger; an earlier summary's lowest).
        key: a fact's normalised key, a rule's template, an error's command; ``""`` for none.
        value: a fact's latest value.
        mark: ``open`` / ``fixed`` for an error, the action for a file, ``plain`` for a rule
            with nothing specific in it (kept after the status and results).
    """

    text: str
    score: float = 0.0
    position: int = 0
    key: str = ""
    value: str = ""
    mark: str = ""


@dataclass(frozen=True, kw_only=True)
class Ledger:
    """The record of the work (see the module docstring). Every tuple is in history order."""

    goal: Entry | None = None
    goal_changes: tuple[Entry, ...] = ()
    constraints: tuple[Entry, ...] = ()
    facts: tuple[Entry, ...] = ()
    decisions: tuple[Entry, ...] = ()
    status: tuple[Entry, ...] = ()
    results: tuple[Entry, ...] = ()
    errors: tuple[Entry, ...] = ()
    files: tuple[Entry, ...] = ()
    notes: tuple[Entry, ...] = ()
    actions: tuple[Entry, ...] = ()
    next_step: Entry | None = None
    stale: frozenset[str] = frozenset()

    @property
    def retained(self) -> tuple[Entry, ...]:
        """What a summary must never lose: the constraints and preferences, and the latest
        value of every fact (the retention audit checks these)."""
        return tuple(e for e in self.constraints if e.mark != "plain") + self.facts

    def sections(self) -> dict[str, tuple[Entry, ...]]:
        """The entries of each section, by heading."""
        return {
            GOAL: (self.goal,) if self.goal else (),
            GOAL_NOW: self.goal_changes,
            CONSTRAINTS: self.constraints,
            FACTS: self.facts,
            DECISIONS: self.decisions,
            STATUS: self.status,
            RESULTS: self.results,
            ERRORS: self.errors,
            FILES: self.files,
            NOTES: self.notes,
            ACTIONS: self.actions,
            NEXT: (self.next_step,) if self.next_step else (),
        }


def merged(old: Sequence[Entry], new: Iterable[Entry]) -> tuple[Entry, ...]:
    """The entries of ``old`` and ``new`` by key (by text without one), a new one replacing an
    old one of its key, in the order they were said."""
    out: dict[str, Entry] = {e.key or e.text: e for e in old}
    for entry in new:
        out[entry.key or entry.text] = entry
    return tuple(sorted(out.values(), key=lambda e: e.position))

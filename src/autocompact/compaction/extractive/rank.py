"""How to rank: which gathered items fit the budget. Pure, O(n log n) in the items.

Duplicates go first (same text, or the same fact key: only the newest value stays). Then items
are taken by priority, newest first within a priority, while they fit: the goal and its
changes, the next step, constraints, facts, errors, files written or edited, the plan, files
only read, and last the recent actions. An item that does not fit whole is cut on a word
boundary when enough room is left, with a one-character marker.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from operator import attrgetter

from autocompact.compaction.extractive.gather import (
    ACTIONS,
    FILES,
    GOAL,
    NEXT,
    PLAN,
    Item,
    Material,
    project_root,
)

__all__ = ["Selection", "cut_words", "select"]

SECTIONS = (
    GOAL,
    "constraints",
    "key_knowledge",
    FILES,
    "errors_and_fixes",
    ACTIONS,
    PLAN,
    NEXT,
)
_ITEM_OVERHEAD = 7  # "    - " and the line break
_MIN_CUT = 40  # an item is cut to fit only when at least this much room is left
_RECENT_ACTIONS = 8


def section_overhead(tag: str) -> int:
    """Characters a section's opening and closing lines take."""
    return 2 * (len(tag) + 7) + 2


def cut_words(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters on a word boundary, ending in ``…``."""
    if len(text) <= limit:
        return text
    head = text[: max(0, limit - 1)]
    space = head.rfind(" ")
    if space > limit // 2:
        head = head[:space]
    return head.rstrip(" ,;:") + "…"


@dataclass(frozen=True, kw_only=True)
class Selection:
    """The items chosen for each section, in history order."""

    sections: dict[str, list[str]]


def _candidates(material: Material) -> list[Item]:
    items = list(material.items)
    root = project_root(material.paths)
    for path, (action, position) in material.files.items():
        shown = posixpath.relpath(path, root) if root and path.startswith(root + "/") else path
        priority = 40 if action == "read" else 58
        items.append(
            Item(section=FILES, text=f"{shown} ({action})", priority=priority, position=position)
        )
    for offset, step in enumerate(material.plan):
        done = step.startswith("[DONE]")
        items.append(
            Item(
                section=PLAN,
                text=step,
                priority=15 if done else 50,
                position=material.plan_position + offset,
            )
        )
    pending = next((s for s in material.plan if not s.startswith("[DONE]")), None)
    if pending is not None:
        next_step = f"Continue: {pending.split('] ', 1)[-1]}"
    elif material.latest_request:
        next_step = f"Carry on with the latest request: {material.latest_request}"
    elif material.last_action:
        next_step = f"Carry on after the last step ({material.last_action})"
    else:
        next_step = ""
    if next_step:
        items.append(Item(section=NEXT, text=next_step, priority=90, position=material.position))
    return items


def _deduplicated(items: Sequence[Item]) -> list[Item]:
    """Newest first, each text once (ignoring case and blanks) and each fact key once (only
    its newest item counts, kept or not); then the recent actions, at most eight."""
    ordered = sorted(items, key=attrgetter("position"), reverse=True)  # stable, as -position
    norms = map(" ".join, map(str.split, map(str.lower, map(attrgetter("text"), ordered))))
    seen: set[str] = set()
    keys: set[str] = set()
    kept: list[Item] = []
    for item, norm in zip(ordered, norms, strict=True):
        if item.key:
            if item.key in keys:
                continue
            keys.add(item.key)
        if norm not in seen:
            seen.add(norm)
            kept.append(item)
    actions = [i for i in kept if i.section == ACTIONS][:_RECENT_ACTIONS]
    return [i for i in kept if i.section != ACTIONS] + actions


def select(material: Material, budget: int) -> Selection:
    """The items that fit ``budget`` characters (section framing included)."""
    chosen: dict[str, list[Item]] = {}
    used = 0
    # Priority, then position, both descending (two stable sorts: the same order as one by
    # ``(-priority, -position)``, without a Python-level key).
    ordered = sorted(
        sorted(_deduplicated(_candidates(material)), key=attrgetter("position"), reverse=True),
        key=attrgetter("priority"),
        reverse=True,
    )
    # The shortest text from each item on: once the room left is below both it and the least
    # worth a cut, nothing more fits.
    shortest = list(accumulate(reversed([len(i.text) for i in ordered]), min))[::-1]
    for index, item in enumerate(ordered):
        free = budget - used - _ITEM_OVERHEAD
        if free < _MIN_CUT and free < shortest[index]:
            break
        opening = 0 if item.section in chosen else section_overhead(item.section)
        room = budget - used - opening - _ITEM_OVERHEAD
        text = item.text
        if len(text) > room:
            if room < _MIN_CUT or (item.section == GOAL and room < len(text) // 3):
                continue
            text = cut_words(text, room)
        chosen.setdefault(item.section, []).append(
            Item(section=item.section, text=text, priority=item.priority, position=item.position)
        )
        used += opening + _ITEM_OVERHEAD + len(text)
    return Selection(
        sections={
            tag: [i.text for i in sorted(chosen[tag], key=lambda i: i.position)]
            for tag in SECTIONS
            if tag in chosen
        }
    )

"""Remembered things found again in order, by a key equal things share. Pure.

The stores of the Agents SDK and pydantic-ai integrations give back, for each stored message,
the framework's own object remembered for it: the first remembered one from a position on that
is equal to it. Tried in a pass over every remembered one after that position, a conversation
with many stored messages not remembered here (another worker's turns, cleared outputs, a
summary) was read in quadratic time; :class:`InOrder` tries only those with the same key.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Hashable, Iterable

from autocompact.content import Part

__all__ = ["InOrder", "part_key"]


def part_key(part: Part) -> tuple[str, object]:
    """What equal parts share (a call's or result's id, a text), hashable where a part need not
    be (a call's arguments, a result, a block's payload may be a dict)."""
    return part.kind, getattr(part, "id", None) or getattr(part, "text", None)


class InOrder:
    """The positions of remembered things, by key (see the module)."""

    def __init__(self, keys: Iterable[Hashable]) -> None:
        self._positions: dict[Hashable, list[int]] = {}
        for position, key in enumerate(keys):
            self._positions.setdefault(key, []).append(position)

    def candidates(self, key: Hashable, after: int) -> list[int]:
        """The positions from ``after`` on of the things with ``key``, ascending."""
        positions = self._positions.get(key)
        if positions is None:
            return []
        return positions[bisect_left(positions, after) :]

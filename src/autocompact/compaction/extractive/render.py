"""How to render: the chosen items as a ``<state_snapshot>``. Pure.

The sections are the ones the model is asked for (:mod:`autocompact.compaction.prompts`), in
the same order; an empty section is left out. :func:`parse` reads the items back, so a later
summary can merge them (SPEC §10.5).
"""

from __future__ import annotations

from autocompact.compaction.extractive.rank import SECTIONS, Selection

__all__ = ["FRAME", "render"]

FRAME = len("<state_snapshot>\n</state_snapshot>")
"""Characters of the snapshot's own opening and closing lines."""


def render(selection: Selection) -> str:
    """The snapshot text of ``selection``."""
    out = ["<state_snapshot>"]
    for tag in SECTIONS:
        items = selection.sections.get(tag)
        if not items:
            continue
        out.append(f"    <{tag}>")
        out.extend(f"    - {item}" for item in items)
        out.append(f"    </{tag}>")
    out.append("</state_snapshot>")
    return "\n".join(out)

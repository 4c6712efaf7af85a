"""What of a message is code rather than statements: fenced blocks, indented blocks, and the
prose Markdown indents under a list item (which is no code). Pure.
"""

from __future__ import annotations

import re

__all__ = ["drop_code"]

# An indented line (not a list item) with the line break before it: the pattern opens with a
# literal character, which ``re`` skips to in C (a line start, ``^`` in multi-line mode, is
# tried at every character).
_BREAK_INDENTED = re.compile(r"\n[ \t]+(?![-*•+>] |\d+[.)] )\S.*")

# A list item's marker ("1. …", "- …"); with the line break before it, one that opens a line.
_ITEM = re.compile(r"(?:\d{1,3}[.)]|[-*+•]) ")
_BREAK_ITEM = re.compile("\n" + _ITEM.pattern)


def drop_code(text: str) -> str:
    """``text`` without fenced code blocks and indented lines (pasted code, tracebacks, quoted
    output): never statements, and the costliest text to read (C-level searches). A fence
    runs to the next one, or to the end, and becomes a line break; an indented line is
    emptied, its line break kept. A line indented no deeper than the text of the list item
    above it (``1. Current Work:`` then ``   Fixing the parser.``) is that item's prose, as
    Markdown reads it: it is kept, without its indent."""
    if "```" in text:
        text = _without_fences(text)
    if "\n " in text or "\n\t" in text:  # (a first line is read after a line break put before it)
        text = "\n" + text
        if _BREAK_ITEM.search(text) is not None:
            text = _items_continued(text)
        text = _BREAK_INDENTED.sub("\n", text)[1:]
    return text


def _items_continued(text: str) -> str:
    """``text`` with each line under a list item indented by spaces no deeper than the item's
    text (blank lines between them keep the item open) written without its indent."""
    out = []
    column = 0  # where the text of the open list item starts (0: no item open)
    for line in text.split("\n"):
        body = line.lstrip(" ")
        if not body or body.isspace():
            out.append(line)
            continue
        indent = len(line) - len(body)
        if indent == 0:
            item = _ITEM.match(line)
            column = item.end() if item is not None else 0
        elif indent <= column:
            line = body
        out.append(line)
    return "\n".join(out)


def _without_fences(text: str) -> str:
    """``text`` with each fence to the next one (or to the end) made a line break, the fences
    found with ``str.find`` (a lazy pattern would test for a fence at each character)."""
    out = []
    at = 0
    start = text.find("```")
    while start >= 0:
        out.append(text[at:start])
        out.append("\n")
        end = text.find("```", start + 3)
        if end < 0:
            at = len(text)
            break
        at = end + 3
        start = text.find("```", at)
    out.append(text[at:])
    return "".join(out)

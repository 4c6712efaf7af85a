"""``sessions list`` over a directory of JSONL session files (with or without ``--store``)."""

from __future__ import annotations

import argparse
import sys

from rich.console import Console
from rich.table import Table
from rich.text import Text

from autocompact.errors import SessionFileError
from autocompact.sessions import SessionStore
from autocompact.textsafe import for_terminal

__all__ = ["list_files", "plain_cell"]


def plain_cell(value: object) -> Text:
    """A table cell shown as written: no rich markup read in it (a ``[/x]`` in a first message
    or a directory's name failed the listing) and no control character a terminal obeys."""
    return Text(for_terminal(str(value)))


def list_files(args: argparse.Namespace, store: SessionStore) -> int:
    """List a directory of JSONL sessions; one ``Warning:`` line on stderr per file that cannot
    be read (the file and why). Exit status: 0, or 1 when a file could not be read (the readable
    sessions are listed all the same)."""
    problems: list[SessionFileError] = []
    summaries = store.list(problems=problems)
    console = Console(highlight=False)
    for problem in problems:
        reason = " ".join(str(problem).split())
        print(f"Warning: skipped {reason}", file=sys.stderr)
    if not summaries:
        empty = "No readable sessions" if problems else "No saved sessions"
        console.print(f"{empty} in {store.root}.", markup=False)
        return 1 if problems else 0
    table = Table(box=None, pad_edge=False)
    for column in ("id", "updated", "provider/model", "msgs", "compactions", "directory", "first"):
        # The id is what a user copies: never wrapped (the other columns give way).
        table.add_column(column, overflow="fold", no_wrap=column == "id")
    for s in summaries if args.all else summaries[:20]:
        cells = (
            s.header.id,
            s.updated.replace("+00:00", "Z"),
            f"{s.header.provider}/{s.header.model}",
            s.messages,
            s.compactions,
            s.header.cwd,
            s.preview,
        )
        table.add_row(*map(plain_cell, cells))
    console.print(table)
    if problems:
        print(
            f"{len(problems)} session file(s) could not be read (listed above); the others are "
            "shown",
            file=sys.stderr,
        )
    return 1 if problems else 0

"""``autocompact thresholds [WINDOW ...] [--json]``: print the ladder for context windows."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from autocompact.thresholds import (
    SMALLEST_WINDOW,
    SUMMARY_RESERVE,
    CompactionThresholds,
    compute_thresholds,
    parse_window,
)
from autocompact.tips import format_tokens

_SHORT = {"proportional": "prop", "absolute": "abs", "collapsed": "coll"}
DEFAULT_WINDOWS = ("32k", "64k", "128k", "200k", "256k", "1m")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``thresholds`` command."""
    parser = subparsers.add_parser(
        "thresholds",
        help="print the warn / auto / hard ladder for context windows",
        description="Print the warn / auto / hard ladder for each context window, "
        "marking which branch of the formula set each tier.",
    )
    parser.add_argument(
        "windows",
        nargs="*",
        metavar="WINDOW",
        help=f"context windows such as 131072, 128k or 1m (default: {' '.join(DEFAULT_WINDOWS)})",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    parser.set_defaults(handler=run)


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def as_json(t: CompactionThresholds) -> dict[str, Any]:
    """The JSON object for one window (exact values, integers where whole)."""
    return {
        "window": t.window,
        "warn": _number(t.warn),
        "auto": _number(t.auto),
        "hard": _number(t.hard),
        "effective_window": t.effective_window,
        "tier_sources": {"warn": t.warn_source, "auto": t.auto_source, "hard": t.hard_source},
    }


def run(args: argparse.Namespace) -> int:
    """Print the ladders."""
    windows = [
        parse_window(w, name="WINDOW", minimum=SMALLEST_WINDOW)
        for w in (args.windows or DEFAULT_WINDOWS)
    ]
    ladders = [compute_thresholds(w) for w in windows]
    console = Console()
    if args.json:
        console.print_json(json.dumps([as_json(t) for t in ladders]))
        return 0
    table = Table(title="Compaction thresholds (tokens)")
    for column in ("window", "effective", "warn", "auto", "hard"):
        table.add_column(column, justify="right")
    table.add_column("branch w/a/h")
    for t in ladders:
        table.add_row(
            f"{t.window:,}",
            f"{t.effective_window:,}",
            _exact(t.warn),
            _exact(t.auto),
            _exact(t.hard),
            " / ".join(_SHORT[s] for s in (t.warn_source, t.auto_source, t.hard_source)),
        )
    console.print(table)
    console.print(
        "[dim]branch: which side of each max() set warn / auto / hard. prop: a share of the "
        "window; abs: a fixed distance below the effective window; coll: hard collapsed onto "
        "auto (windows up to about 76.7K).[/dim]"
    )
    if any(t.window <= SUMMARY_RESERVE for t in ladders):
        console.print(
            f"[dim]effective 0: the window is no larger than the {format_tokens(SUMMARY_RESERVE)} "
            "summary reserve (effective = window − reserve, at least 0); warn, auto and hard "
            "are then shares of the window (60 %, 70 %, 70 %).[/dim]"
        )
    return 0


def _exact(value: float) -> str:
    number = _number(value)
    return f"{number:,}" if isinstance(number, int) else f"{number:,.1f}"
